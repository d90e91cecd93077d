"""Replay governors over a sweep: chosen level, energy, time, saving, slowdown, regret — per run
and over the whole job.

For a workload ``w`` and a governor ``p`` (docs/method.md, "Evaluation definitions"):

* the level is ``p.decide(features of w, probe).level``; ``None`` replays the baseline runs;
  a level the workload was not measured at is replaced by its nearest measured level
  (:meth:`Sweep.nearest_level`, the :func:`dvfslab.core.levels.snap_mhz` rule: ties go to the
  higher level, as on the board) and ``snapped`` says so — e.g. the paper's tree on another
  board's level table;
* **the whole job** is ``J`` units (workloads.csv ``job_steps``; without it ``J`` is the run's
  own ``n`` units and the job is the run, as the per-run figures are): the baseline runs all
  ``J`` at its level, ``J/n`` times its run's mean energy and time, the oracle all ``J`` at the
  workload's least-energy level, a governor that probes nothing all ``J`` at its level;
* a probing governor (``online``, ``profiled``, ``zeus``, ``zeus-sim``, ``search``, ``voi``)
  under the physical probe model is **run through the live runner** on the replay board
  (:mod:`dvfslab.evaluation.governed`: the code ``dvfslab govern`` runs; told the job's length
  ``J``; the dataset's noise per sensor sample, never 0): its figures are the board's account of
  every unit of the job. With idealised probes (comparison only) it gets a probe that
  reads the dataset's units (:class:`dvfslab.analysis.steps.StepProbe`) and returns what it
  probed, ``U`` units in all; they are **charged**: its probes run the job's first ``U`` units
  at the probed levels (their true cost, read again from the dataset without the probe's
  noise), the rest of the job at the decided level ``l*``:
  ``E = sum_i e(probe_i) + (J/n) E(l*) - E_{[0, U)}(l*)`` (the same for time; ``l*`` None: the
  default clock), ``E_{[0, U)}(l*)`` being the first ``U`` units of the run at ``l*`` (recorded
  steps, or ``U`` x its per-unit mean); a job shorter than its probes ends while probing
  (``note`` says so). The per-run figures are the same with ``J = n``;
* ``saving_pct = 100 (1 - E_p / E_b)``, ``slowdown_pct = 100 (T_p / T_b - 1)``,
  ``regret_pct = 100 (E_p - E_oracle) / E_b`` with means over the ok repetitions, per run; the
  ``job_*`` figures the same over the whole job; ``probe_share_pct = 100 U / J`` (units);
  ``profiling_steps``: the probes used, ``probe_units``: their units.

**What a governor sees.** ``decide()`` gets the workload's feature-table row without the answer
(:data:`dvfslab.analysis.features.ANSWER_COLUMNS`: the optimum, the baseline's measurements, the
true ``job_steps``; :func:`~dvfslab.analysis.features.governor_row`) and with
``plan_job_units``, the job length it could know: the median job of the training workloads (the
fold's in a CV; by default the workloads not replayed) or a figure the caller gives. The charge
uses the true length.

**Probes are physical by default**: the replay's steps carry the physical probe model of
:mod:`dvfslab.evaluation.probes` (each level's window, noise shrinking with the units read)
unless the caller gives steps that carry another (:func:`dvfslab.evaluation.probes.idealised`:
instant, exact — comparison only).

**Intervals** (:func:`intervals`, in :func:`summarize` when ungrouped): a 90 % bootstrap interval
(``scipy.stats.bootstrap``, percentile, 9999 resamples, seed 0) over the CV's held-out groups
(``held_out``; else ``model``; else the workload; resamples where a ratio is undefined — FFG
without regret — left out) of each policy's mean whole-job regret
(``job_regret_pct_ci``) and of the share of the FFG-to-oracle gap it closes, ``gap_closed_pct =
100 (r_ffg - r) / r_ffg`` over the workloads both decided (``gap_closed_pct_ci``), and the same on
the workloads where FFG's regret is above its **noise floor** (``noise_floor_pct``: what a regret
between two noisy cells can be by chance, :func:`dvfslab.evaluation.probes.noise_floor_pct`;
``ffg_below_floor`` counts the others: nothing to win there).

A row's ``note`` carries what the decision reports (a search that stopped at a local minimum
of a curve that is not unimodal) and a learned governor that could not learn and fell back to
FFG's level (:meth:`~dvfslab.governors.base.Governor.fallback_note`). Evaluation is generic: any
:class:`~dvfslab.governors.base.Governor` can be replayed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import bootstrap

from dvfslab.analysis.aggregate import Sweep
from dvfslab.analysis.features import governor_row
from dvfslab.analysis.steps import StepSource
from dvfslab.core import reference as R
from dvfslab.core.errors import DvfsError, SweepError
from dvfslab.evaluation import probes as P
from dvfslab.evaluation.governed import governed_row, through_runner
from dvfslab.governors.base import Decision, Governor
from dvfslab.governors.errors import GovernorError

PER_WORKLOAD_COLUMNS = ["policy", "workload_id", "model", "task", "split", "params_m", "size_group",
                        "decided_level", "level", "snapped", "energy_j", "time_s", "baseline_energy_j",
                        "baseline_time_s", "oracle_energy_j", "saving_pct", "slowdown_pct", "regret_pct",
                        "profiling_steps", "probe_units", "job_units", "job_energy_j", "job_time_s",
                        "job_baseline_energy_j", "job_baseline_time_s", "job_oracle_energy_j", "job_saving_pct",
                        "job_slowdown_pct", "job_regret_pct", "probe_share_pct", "noise_floor_pct", "plan_job_units",
                        "note", "error"]
SUMMARY_KEYS = ("mean_saving_pct", "max_saving_pct", "min_saving_pct", "mean_slowdown_pct", "mean_regret_pct",
                "job_saving_pct", "job_slowdown_pct", "job_regret_pct", "probe_share_pct")
#: the interval keys of summary.json beside the figures (:func:`intervals`)
CI_KEYS = ("job_regret_pct_ci", "gap_closed_pct", "gap_closed_pct_ci", "gap_closed_above_floor_pct",
           "gap_closed_above_floor_pct_ci", "ffg_below_floor", "n_groups")
CONFIDENCE, RESAMPLES = 0.90, 9999
JOB_NOTE = "the job ended while probing"


def replay_one(name: str, governor: Governor, sweep: Sweep, workload: Mapping[str, Any], steps: StepSource,
               plan_job_units: float | None = None) -> dict:
    """Replay one governor on one workload (a feature-table row as a dict); ``steps`` feeds the
    probe of a probing governor and gives the run's and the job's units; the governor sees the
    row without its answer columns, with ``plan_job_units`` (module doc)."""
    wid = workload["workload_id"]
    e_b, t_b = sweep.baseline_of(wid)
    e_o = sweep.at(wid, sweep.oracle_level(wid))[0]
    n, job = steps.units(wid), steps.job_units(wid)
    row = {"policy": name, "workload_id": wid, "baseline_energy_j": e_b, "baseline_time_s": t_b,
           "oracle_energy_j": e_o, "decided_level": np.nan, "level": np.nan, "snapped": False,
           "energy_j": np.nan, "time_s": np.nan, "profiling_steps": 0, "probe_units": 0.0, "job_units": job,
           "job_energy_j": np.nan, "job_time_s": np.nan, "job_baseline_energy_j": e_b * job / n,
           "job_baseline_time_s": t_b * job / n, "job_oracle_energy_j": e_o * job / n, "note": "", "error": "",
           "noise_floor_pct": np.nan, "plan_job_units": np.nan if plan_job_units is None else float(plan_job_units)}
    for key in ("model", "task", "split", "params_m", "size_group"):
        row[key] = workload.get(key)
    if governor.probing and through_runner(governor, steps, wid):  # one code path with `dvfslab govern`
        try:
            return governed_row(row, name, governor, sweep, workload, steps)
        except (GovernorError, SweepError, DvfsError) as err:
            row["error"] = str(err)
            return row
    try:
        seen = governor_row(dict(workload), plan_job_units)
        decision = governor.decide(seen, steps.probe(wid) if governor.probing else None)
    except (GovernorError, SweepError) as err:
        row["error"] = str(err)
        return row
    level = None
    if decision.level is not None:
        level = sweep.nearest_level(wid, decision.level)
        row.update(decided_level=float(decision.level), level=level,
                   snapped=not np.isclose(level, decision.level, atol=1e-6))
    e_l = e_b if level is None else sweep.at(wid, level)[0]
    row["noise_floor_pct"] = P.noise_floor_pct(steps, wid, e_l, e_o, e_b)
    notes = [decision.note or governor.fallback_note()]
    try:
        row["energy_j"], row["time_s"], _ = charge(decision, wid, level, n, steps)
        row["job_energy_j"], row["job_time_s"], spent = charge(decision, wid, level, job, steps)
    except SweepError as err:
        row["error"] = str(err)
        return row
    if decision.probed:
        row["profiling_steps"], row["probe_units"] = len(decision.probed), spent
        if spent < decision.probe_units - 1e-9:
            notes.append(f"{JOB_NOTE} ({spent:g} of {decision.probe_units:g} probe units)")
    row["note"] = "; ".join(x for x in notes if x)
    return row


def charge(decision: Decision, workload_id: str, level: float | None, job_units: float,
           steps: StepSource) -> tuple[float, float, float]:
    """``(energy_j, time_s, probe units run)`` of a job of ``job_units`` units: the decision's
    probes first (their true cost, at most the job's length), the rest at ``level`` (module doc)."""
    e_l, t_l = steps.sweep.baseline_of(workload_id) if level is None else steps.sweep.at(workload_id, level)
    scale = job_units / steps.units(workload_id)
    energy = time = spent = 0.0
    for probe in decision.probed:
        units = min(float(probe.units), job_units - spent)
        if units <= 1e-12:
            break
        t, e = steps.span(workload_id, probe.level, spent, units)
        energy, time, spent = energy + e, time + t, spent + units
    if spent < job_units - 1e-12:
        t0, e0 = steps.span(workload_id, level, 0.0, spent) if spent else (0.0, 0.0)
        energy += scale * e_l - e0
        time += scale * t_l - t0
    return float(energy), float(time), float(spent)


def plan_units(steps: StepSource, workload_ids: Iterable[str]) -> float | None:
    """The job length a governor could know: the median job (units) of ``workload_ids`` (the
    training workloads); None when there are none."""
    jobs = [steps.job_units(str(w)) for w in workload_ids]
    return float(np.median(jobs)) if jobs else None


def row_names(names: Iterable[str], sweep: Sweep) -> list[str]:
    """The replay's row names of governors ``names``: ``maxn`` is named from the dataset
    (:attr:`~dvfslab.analysis.aggregate.Sweep.baseline_name`), the others as they are."""
    return [sweep.baseline_name if n == "maxn" else n for n in names]


def replay(governors: Mapping[str, Governor] | Iterable[Governor], sweep: Sweep, features: pd.DataFrame,
           workload_ids: Iterable[str] | None = None, steps: StepSource | None = None,
           plan_job_units: float | None = None) -> pd.DataFrame:
    """Per-workload results of every governor (tidy: one row per policy x workload).

    ``governors``: name -> fitted governor (or governors, named by their registry name);
    ``features`` is the feature table (what governors see, answer columns stripped);
    ``workload_ids`` restricts the workloads (e.g. the evaluation split); ``steps``: the dataset's
    steps for probing governors (read from the sweep's dataset when not given; they also give the
    run's and the job's units; the physical probe model is attached unless they carry one);
    ``plan_job_units``: the job length the governors plan with (default: the median job of the
    feature table's workloads not replayed, or of all when every one is). A governor that cannot
    decide for a workload gets NaN figures and the reason in ``error``.
    """
    govs = dict(governors) if isinstance(governors, Mapping) else {g.name: g for g in governors}
    steps = P.ensure_models(StepSource.from_sweep(sweep) if steps is None else steps)
    rows_in = features if workload_ids is None else features[features["workload_id"].isin(set(workload_ids))]
    if plan_job_units is None:
        others = features.loc[~features["workload_id"].isin(set(rows_in["workload_id"])), "workload_id"]
        plan_job_units = plan_units(steps, others if len(others) else features["workload_id"])
    records = rows_in.to_dict("records")
    rows = [replay_one(n, g, sweep, w, steps, plan_job_units) for n, g in govs.items() for w in records]
    out = pd.DataFrame(rows, columns=PER_WORKLOAD_COLUMNS)
    # the baseline row is named from the dataset: maxn only where its baseline runs were MAXN
    out["policy"] = row_names(out["policy"], sweep)
    out["saving_pct"] = 100.0 * (1.0 - out["energy_j"] / out["baseline_energy_j"])
    out["slowdown_pct"] = 100.0 * (out["time_s"] / out["baseline_time_s"] - 1.0)
    out["regret_pct"] = 100.0 * (out["energy_j"] - out["oracle_energy_j"]) / out["baseline_energy_j"]
    out["job_saving_pct"] = 100.0 * (1.0 - out["job_energy_j"] / out["job_baseline_energy_j"])
    out["job_slowdown_pct"] = 100.0 * (out["job_time_s"] / out["job_baseline_time_s"] - 1.0)
    out["job_regret_pct"] = 100.0 * (out["job_energy_j"] - out["job_oracle_energy_j"]) / out["job_baseline_energy_j"]
    out["probe_share_pct"] = (100.0 * out["probe_units"] / out["job_units"]).where(out["job_energy_j"].notna())
    return out


def summarize(per_workload: pd.DataFrame, by: Iterable[str] = ()) -> pd.DataFrame:
    """Per policy (and ``by`` groups): n, mean/max/min saving, mean/max slowdown, mean regret per
    run; the means of the whole-job figures (``job_saving_pct``, ``job_slowdown_pct``,
    ``job_regret_pct``, ``probe_share_pct``) and of the probes used (``profiling_steps``) and
    their units (``probe_units``), 0 for a governor that probes nothing.

    Means are plain means over workloads; workloads a policy could not decide are left out
    of its figures (``n_failed`` counts them).
    """
    keys = ["policy", *by]
    g = per_workload.groupby(keys, sort=False)
    out = pd.DataFrame({
        "n_workloads": g["energy_j"].count(),
        "n_failed": g["energy_j"].apply(lambda s: int(s.isna().sum())),
        "mean_saving_pct": g["saving_pct"].mean(), "max_saving_pct": g["saving_pct"].max(),
        "min_saving_pct": g["saving_pct"].min(), "mean_slowdown_pct": g["slowdown_pct"].mean(),
        "max_slowdown_pct": g["slowdown_pct"].max(), "mean_regret_pct": g["regret_pct"].mean(),
    })
    for col in ("job_saving_pct", "job_slowdown_pct", "job_regret_pct", "probe_share_pct"):
        out[col] = g[col].mean() if col in per_workload else np.nan
    for col in ("profiling_steps", "probe_units"):
        out[col] = g[col].mean() if col in per_workload else 0.0
    out = out.reset_index()
    if not list(by) and "job_regret_pct" in per_workload and len(out):
        ci = intervals(per_workload)
        out = out.merge(ci, on="policy", how="left") if len(ci) else out
    return out


def _groups(per_workload: pd.DataFrame) -> pd.Series:
    """The bootstrap's unit of each row: its CV group (``scheme`` + ``held_out``), else its model,
    else its workload."""
    if "held_out" in per_workload:
        scheme = per_workload["scheme"].astype(str) if "scheme" in per_workload else ""
        return scheme + "|" + per_workload["held_out"].astype(str)
    if "model" in per_workload and per_workload["model"].notna().all():
        return per_workload["model"].astype(str)
    return per_workload["workload_id"].astype(str)


def _interval(sums: np.ndarray, counts: np.ndarray, stat: Any, seed: int) -> tuple[list[float] | None, float]:
    """The point estimate ``stat(all groups)`` and its bootstrap interval over groups (None: < 2 groups)."""
    idx = np.arange(len(counts))
    if not counts.sum() > 0:
        return None, float("nan")
    point = float(stat(idx[None, :], axis=-1)[0])
    if len(idx) < 2 or not np.isfinite(point):
        return None, point
    with warnings.catch_warnings():  # a resample where the statistic is undefined (FFG without regret): NaN
        warnings.simplefilter("ignore")
        res = bootstrap((idx,), stat, vectorized=True, axis=-1, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                        method="percentile", rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(lo) and np.isfinite(hi)):  # the percentiles of the resamples where it is defined
        dist = np.asarray(res.bootstrap_distribution, dtype=float)
        if np.isfinite(dist).mean() < 0.5:
            return None, point
        tail = 100 * (1 - CONFIDENCE) / 2
        lo, hi = (float(x) for x in np.nanpercentile(dist, [tail, 100 - tail]))
    return [lo, hi], point


def intervals(per_workload: pd.DataFrame, fallback: str = "ffg", seed: int = 0) -> pd.DataFrame:
    """Per policy: ``job_regret_pct_ci``, ``gap_closed_pct`` (and ``_ci``), the same on the
    workloads where FFG is above its noise floor (``gap_closed_above_floor_pct`` and ``_ci``),
    ``ffg_below_floor`` (workloads) and ``n_groups`` (module doc: 90 % bootstrap over the groups)."""
    rows = per_workload.assign(_g=_groups(per_workload))
    key = [c for c in ("scheme", "held_out", "workload_id") if c in rows]
    ffg = rows[rows["policy"] == fallback].set_index(key) if fallback in set(rows["policy"]) else None
    out = []
    for name, mine in rows.groupby("policy", sort=False):
        mine = mine[mine["job_regret_pct"].notna()]
        rec: dict[str, Any] = {"policy": name, "n_groups": int(mine["_g"].nunique())}
        g = mine.groupby("_g")["job_regret_pct"]
        sums, counts = g.sum().to_numpy(float), g.count().to_numpy(float)
        rec["job_regret_pct_ci"] = _interval(sums, counts, _mean_stat(sums, counts), seed)[0]
        if ffg is not None:
            theirs = ffg[["job_regret_pct", "noise_floor_pct"]].add_suffix("_ffg")
            both = mine.set_index(key).join(theirs, how="inner")
            both = both[both["job_regret_pct_ffg"].notna()]
            below = both["job_regret_pct_ffg"] < both["noise_floor_pct_ffg"]
            rec["ffg_below_floor"] = int(below.sum())
            for suffix, part in (("", both), ("_above_floor", both[~below])):
                gp = part.groupby("_g")
                a, f, n = (gp["job_regret_pct"].sum().to_numpy(float), gp["job_regret_pct_ffg"].sum().to_numpy(float),
                           gp["job_regret_pct"].count().to_numpy(float))
                ci, point = _interval(a, n, _gap_stat(a, f, n), seed) if len(n) else (None, float("nan"))
                rec[f"gap_closed{suffix}_pct"], rec[f"gap_closed{suffix}_pct_ci"] = point, ci
        out.append(rec)
    return pd.DataFrame(out)


def mean_interval(values: pd.Series, groups: pd.Series, seed: int = 0) -> tuple[float, list[float] | None]:
    """The mean of ``values`` (NaN left out) and its 90 % bootstrap interval over ``groups`` (each
    group's sum and count resampled together, as :func:`intervals` does; None: fewer than 2 groups)."""
    ok = values.notna()
    g = values[ok].groupby(groups[ok])
    sums, counts = g.sum().to_numpy(float), g.count().to_numpy(float)
    ci, point = _interval(sums, counts, _mean_stat(sums, counts), seed)
    return point, ci


def _mean_stat(sums: np.ndarray, counts: np.ndarray) -> Any:
    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return sums[idx].sum(axis=axis) / counts[idx].sum(axis=axis)
    return stat


def _gap_stat(regret: np.ndarray, ffg: np.ndarray, counts: np.ndarray) -> Any:
    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        r_f = ffg[idx].sum(axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(r_f > 0, 100.0 * (r_f - regret[idx].sum(axis=axis)) / r_f, np.nan)
    return stat


def summary_dict(summary: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """``{policy: {mean_saving_pct, max_saving_pct, min_saving_pct, mean_slowdown_pct,
    mean_regret_pct, job_saving_pct, job_slowdown_pct, job_regret_pct, probe_share_pct,
    n_workloads[, profiling_steps, probe_units]}}`` from an ungrouped :func:`summarize` frame
    (NaN -> None; the probes only for a governor that probes)."""
    out = {}
    for _, row in summary.iterrows():
        d: dict[str, float | None] = {k: num_or_none(row[k]) if k in row else None for k in SUMMARY_KEYS}
        d["n_workloads"] = int(row["n_workloads"])
        for k in CI_KEYS:
            if k in row.index:
                v = row[k]
                d[k] = v if isinstance(v, list) or v is None else (None if pd.isna(v) else
                                                                  (int(v) if k in ("ffg_below_floor", "n_groups")
                                                                   else float(v)))
        if row.get("profiling_steps", 0) and not np.isnan(row["profiling_steps"]):
            d["profiling_steps"] = float(row["profiling_steps"])
            d["probe_units"] = num_or_none(row.get("probe_units", np.nan))
        out[str(row["policy"])] = d
    return out


def num_or_none(x: Any) -> float | None:
    """``x`` as a float, None for NaN (summary.json holds no NaN)."""
    x = float(x)
    return None if np.isnan(x) else x


def difference_pts(summary: pd.DataFrame, a: str, b: str, key: str = "mean_saving_pct") -> float | None:
    """``key`` of policy ``a`` minus that of ``b`` (percentage points), None when missing."""
    s = summary.set_index("policy")
    if a not in s.index or b not in s.index:
        return None
    return num_or_none(s.loc[a, key] - s.loc[b, key])


def paper_comparison(summary: Mapping[str, Any], by_size: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paper vs dvfslab, one row per headline figure, from a summary.json-like mapping.

    ``by_size``: :func:`summarize` by ``size_group`` (for the > 70M row), optional.
    """
    gov = summary.get("governors", {})
    mlg, ffg = gov.get("mlg") or {}, gov.get("ffg") or {}
    ch, ms = summary.get("characterization", {}), summary.get("model_selection", {})
    spot = ch.get("optimal_level_range", {})
    large = None
    if by_size is not None:
        row = by_size[(by_size["policy"] == "mlg") & (by_size["size_group"] == "> 70M")]
        large = float(row["mean_saving_pct"].iloc[0]) if len(row) else None
    diff = None if mlg.get("mean_saving_pct") is None or ffg.get("mean_saving_pct") is None \
        else mlg["mean_saving_pct"] - ffg["mean_saving_pct"]
    rows = [("energy-optimal level range (MHz)", R.optimal_range_text(),
             f"{spot.get('min', float('nan')):g}–{spot.get('max', float('nan')):g}"),
            ("LOOCV accuracy of the tree", f"{R.LOOCV_ACCURACY:.2f}", _fmt(ms.get("loocv_accuracy"), "{:.2f}")),
            ("leave-one-model-out accuracy", "not reported", _fmt(ms.get("grouped_accuracy"), "{:.2f}")),
            ("MLG mean saving vs baseline (%)", f"{R.MLG_MEAN_SAVING_PCT:.2f}", _fmt(mlg.get("mean_saving_pct"))),
            ("published tree replayed here (mlg-paper), mean saving (%)",
             f"{R.MLG_MEAN_SAVING_PCT:.2f} (on the real board)",
             _fmt((gov.get("mlg-paper") or {}).get("mean_saving_pct"))),
            ("MLG max saving (%)", f"{R.MLG_MAX_SAVING_PCT:.2f}", _fmt(mlg.get("max_saving_pct"))),
            ("MLG mean slowdown (%)", "not reported", _fmt(mlg.get("mean_slowdown_pct"))),
            (f"MLG mean saving, models > {R.SIZE_SPLIT_M:g}M (%)", R.gt70m_text(), _fmt(large)),
            ("MLG minus FFG (points)", f"{R.MLG_MINUS_FFG_PTS:g}", _fmt(diff)),
            ("oracle mean saving (%)", "not reported", _fmt((gov.get("oracle") or {}).get("mean_saving_pct")))]
    return pd.DataFrame(rows, columns=["figure", "paper", "dvfslab"])


def _fmt(x: float | None, spec: str = "{:.2f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else spec.format(x)
