"""A governor that fails badly is named, with why.

A governor **fails** on a dataset when its mean saving — over the whole job (``job_saving_pct``,
probing charged), or per run where the job is not known — is negative beyond its 90 % bootstrap
interval: the interval's upper end is below zero (:func:`dvfslab.evaluation.replay.mean_interval`,
over the CV's held-out groups, else the models, else — one model — the workloads). It used more
energy than the baseline, and not by chance. Where no level saves at all (the oracle's mean
saving is negative too: the baseline's dynamic clock beats every fixed level), a governor is
not blamed for that: it fails only when its interval also lies below the oracle's mean saving.
:func:`failing_governors` names each with the causes it can check, in this order:

* **the levels it chose**: one level for most workloads, and whether it is the table's edge
  (the lowest or highest level: the mark of an extrapolation);
* **levels off the dataset's table**: decided levels the workloads were not measured at,
  replayed at the nearest measured level (``snapped``: e.g. a tree written for another board);
* **a rule fitted elsewhere**: a governor that learns nothing from this dataset (not
  ``needs_training``, probes nothing) applies a rule fitted on another kind of workload (the
  paper's tree: language-model fine-tuning on an AGX Orin);
* **a feature out of range**: a governor deciding from a curve model (``curve``, ``profiled``)
  was given, for a workload, a feature value farther from the training mean than any value it
  was fitted on can be. By Samuelson's inequality no value of ``n`` training rows lies farther
  than ``sqrt(n - 1)`` (population) standard deviations from their mean, so ``|z| > sqrt(n)`` is
  certainly outside the fitted range, whatever standard deviation the fit used. The features
  are those it decided from: for a probing governor, its probe's readings (replayed into a new
  session from the steps it probed);
* **errors**: workloads it could not decide.

When none of these applies, the line says so (the cause is elsewhere).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from dvfslab.analysis.features import governor_row
from dvfslab.analysis.steps import StepSource
from dvfslab.analysis.training import TrainingData
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.govcv import YARDSTICKS
from dvfslab.governors.base import Governor, probe_model
from dvfslab.governors.curvemodel import CurveModel


def saving_column(rows: pd.DataFrame) -> str:
    """``job_saving_pct`` when the rows have it, else ``saving_pct``."""
    return "job_saving_pct" if "job_saving_pct" in rows and rows["job_saving_pct"].notna().any() else "saving_pct"


def _units(rows: pd.DataFrame) -> tuple[pd.Series, str]:
    """The bootstrap's unit of each row (module doc) and its name."""
    if "held_out" in rows and rows["held_out"].nunique() >= 2:
        return rows["held_out"].astype(str), "held-out groups"
    if "model" in rows and rows["model"].notna().all() and rows["model"].nunique() >= 2:
        return rows["model"].astype(str), "models"
    return rows["workload_id"].astype(str), "workloads"


def failing_governors(rows: pd.DataFrame, governors: Mapping[str, Governor], data: TrainingData,
                      steps: StepSource | None = None, seed: int = 0) -> dict[str, str]:
    """``{policy: one line}`` for every policy of ``rows`` (replay rows) whose mean saving is
    negative beyond its interval (module doc); ``governors``: the fitted governors by registry
    name (for the causes; a policy without one gets the causes the rows show)."""
    if rows.empty:
        return {}
    col = saving_column(rows)
    steps = steps if steps is not None else data.steps()
    oracle = rows.loc[rows["policy"] == "oracle", col]
    bar = min(0.0, float(oracle.mean())) if oracle.notna().any() else 0.0  # the most any level saves, if negative
    out = {}
    for name, mine in rows.groupby("policy", sort=False):
        if name in YARDSTICKS or name == data.sweep.baseline_name:
            continue
        units, unit_word = _units(mine)
        mean, ci = E.mean_interval(mine[col], units, seed)
        if not math.isfinite(mean) or ci is None or not ci[1] < bar:
            continue
        what = "over the whole job" if col == "job_saving_pct" else "per run"
        head = (f"{name} FAILS: saving {mean:.2f} % {what}, 90 % interval [{ci[0]:.2f}, {ci[1]:.2f}] % over "
                f"{units.nunique()} {unit_word} — it used more energy than the "
                "baseline")
        causes = _causes(str(name), mine, governors.get(str(name)), data, steps)
        out[str(name)] = head + ": " + ("; ".join(causes) if causes else
                                        "none of the causes checked (levels off the table, a rule fitted elsewhere, a "
                                        "feature out of range, errors) applies")
    return out


def _causes(name: str, rows: pd.DataFrame, gov: Governor | None, data: TrainingData, steps: StepSource) -> list[str]:
    sweep, n = data.sweep, len(rows)
    causes = []
    levels = rows["level"].dropna()
    if len(levels):
        top, count = levels.value_counts().index[0], int(levels.value_counts().iloc[0])
        table = [float(x) for x in sweep.level_table]
        edge = (" (the table's lowest level)" if math.isclose(top, min(table)) else
                " (the table's highest level)" if math.isclose(top, max(table)) else "")
        if count > n / 2:
            causes.append(f"it chose {sweep.format_level(top)} for {count} of {n} workloads{edge}")
    snapped = int(rows["snapped"].fillna(False).astype(bool).sum()) if "snapped" in rows else 0
    if snapped:
        example = rows.loc[rows["snapped"].fillna(False).astype(bool), "decided_level"].iloc[0]
        causes.append(f"levels off the dataset's table for {snapped} of {n} workloads (it decided e.g. "
                      f"{sweep.format_level(example)}, replayed at the nearest measured level)")
    if gov is not None and not gov.needs_training and not gov.probing:
        causes.append(f"it learns nothing from this dataset: its rule was fitted on another kind of workload "
                      f"({type(gov).summary})")
    if gov is not None:
        far = _out_of_range(gov, rows, data, steps)
        if far:
            causes.append(far)
    errors = rows["error"].fillna("").astype(str) if "error" in rows else pd.Series(dtype=str)
    if (errors != "").any():
        causes.append(f"{int((errors != '').sum())} of {n} workloads not decided ({errors[errors != ''].iloc[0]})")
    return causes


def _decided_from(gov: Governor, workload: dict[str, Any], steps: StepSource) -> Mapping[str, Any]:
    """The features ``gov`` decided ``workload`` from: the row, and a probing governor's
    readings (its probed steps replayed into a new session that reports them)."""
    if not gov.probing:
        return workload
    probe = steps.probe(str(workload["workload_id"]))
    decision = gov.decide(workload, probe)
    session = gov.start(workload, probe.levels, probe_model(steps.probe(str(workload["workload_id"]))))
    if not hasattr(session, "features"):
        return workload
    for step in decision.probed:
        session.observe(step)
    return session.features()


def _out_of_range(gov: Governor, rows: pd.DataFrame, data: TrainingData, steps: StepSource) -> str:
    """The feature farthest out of the range the governor's curve model was fitted on (module
    doc), as a clause; "" when none is or the governor has no curve model."""
    try:
        model = getattr(gov, "model", None)
    except Exception:  # noqa: BLE001 - not fitted, or no curve: nothing to check
        return ""
    if not isinstance(model, CurveModel) or not model.features:
        return ""
    n_fit = len(data.train_ids)
    bound = math.sqrt(n_fit)
    table = data.features.set_index("workload_id", drop=False)
    worst: dict[str, list[float]] = {}
    for _, r in rows.iterrows():
        wid = r["workload_id"]
        if wid not in table.index:
            continue
        plan = r.get("plan_job_units")
        seen = governor_row(dict(table.loc[wid]), None if plan is None or plan != plan else float(plan))
        try:
            z = model.standardized(_decided_from(gov, seen, steps))
        except Exception:  # noqa: BLE001 - a governor that cannot say what it decided from: no check
            return ""
        for feat, zj in zip(model.features, z, strict=True):
            worst.setdefault(feat, []).append(abs(zj))
    beyond = {f: [z for z in zs if z > bound] for f, zs in worst.items()}
    beyond = {f: zs for f, zs in beyond.items() if zs}
    if not beyond:
        return ""
    feat = max(beyond, key=lambda f: (len(beyond[f]), max(beyond[f])))
    zs = beyond[feat]
    return (f"a feature out of range: {feat}, as it decided from it, lies {min(zs):.3g}–{max(zs):.3g} standard "
            f"deviations from the mean of the {n_fit} workloads its model was fitted on, for {len(zs)} of "
            f"{len(worst[feat])} workloads — beyond √{n_fit} = {bound:.2f}, outside every value it was fitted on")


__all__ = ["failing_governors", "saving_column"]
