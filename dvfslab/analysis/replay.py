"""Replay governors over a sweep: chosen level, energy, time, saving, slowdown, regret.

For a workload ``w`` and a policy ``p`` (docs/method.md, "Evaluation definitions"):

* the policy's level is ``p.decide(features of w)``; ``None`` replays the baseline runs;
  a level the workload was not measured at is replaced by its nearest measured level
  (:meth:`Sweep.nearest_level`, the :func:`dvfslab.core.levels.snap_mhz` rule: ties go to the
  higher level, as on the board) and ``snapped`` says so — e.g. the paper's tree on another
  board's frequency table;
* ``saving_pct = 100 (1 - E_p / E_b)``, ``slowdown_pct = 100 (T_p / T_b - 1)``,
  ``regret_pct = 100 (E_p - E_oracle) / E_b`` with means over the ok repetitions.

A governor that spends steps choosing (the online governor, the profiled governor's probe at
the default clock) also has ``charge(workload_id,
freq_mhz, energy_j, time_s) -> (energy_j, time_s, profiling_steps)``: its probing steps'
energy and time replace the first steps of the run, and ``profiling_steps`` says how many.

Evaluation is generic: any object with ``name`` and ``decide`` can be replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError

PER_WORKLOAD_COLUMNS = ["policy", "workload_id", "model", "task", "split", "params_m", "size_group",
                        "decided_freq_mhz", "freq_mhz", "snapped", "energy_j", "time_s", "baseline_energy_j",
                        "baseline_time_s", "oracle_energy_j", "saving_pct", "slowdown_pct", "regret_pct",
                        "profiling_steps", "error"]
SUMMARY_KEYS = ("mean_saving_pct", "max_saving_pct", "min_saving_pct", "mean_slowdown_pct", "mean_regret_pct")


def replay_one(governor: Governor, sweep: Sweep, workload: Mapping[str, Any]) -> dict:
    """Replay one governor on one workload (a feature-table row as a dict)."""
    wid = workload["workload_id"]
    e_b, t_b = sweep.baseline_of(wid)
    e_o = sweep.at(wid, sweep.oracle_freq(wid))[0]
    row = {"policy": governor.name, "workload_id": wid, "baseline_energy_j": e_b, "baseline_time_s": t_b,
           "oracle_energy_j": e_o, "decided_freq_mhz": np.nan, "freq_mhz": np.nan, "snapped": False,
           "energy_j": np.nan, "time_s": np.nan, "profiling_steps": 0, "error": ""}
    for key in ("model", "task", "split", "params_m", "size_group"):
        row[key] = workload.get(key)
    try:
        decided = governor.decide(workload)
    except GovernorError as err:
        row["error"] = str(err)
        return row
    freq = None
    if decided is None:
        row["energy_j"], row["time_s"] = e_b, t_b
    else:
        freq = sweep.nearest_level(wid, decided)
        row.update(decided_freq_mhz=float(decided), freq_mhz=freq, snapped=not np.isclose(freq, decided, atol=1e-6))
        row["energy_j"], row["time_s"] = sweep.at(wid, freq)
    if hasattr(governor, "charge"):  # governors that spend steps deciding (online): their cost counts
        try:
            row["energy_j"], row["time_s"], row["profiling_steps"] = governor.charge(wid, freq, row["energy_j"],
                                                                                    row["time_s"])
        except GovernorError as err:
            row.update(energy_j=np.nan, time_s=np.nan, error=str(err))
    return row


def replay(governors: Mapping[str, Governor] | Iterable[Governor], sweep: Sweep, features: pd.DataFrame,
           workload_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Per-workload results of every governor (tidy: one row per policy x workload).

    ``features`` is the feature table (what governors see); ``workload_ids`` restricts the
    workloads (e.g. the evaluation split). A governor that cannot decide for a workload gets
    NaN figures and the reason in ``error``.
    """
    govs = list(governors.values()) if isinstance(governors, Mapping) else list(governors)
    rows_in = features if workload_ids is None else features[features["workload_id"].isin(set(workload_ids))]
    records = rows_in.to_dict("records")
    rows = [replay_one(g, sweep, w) for g in govs for w in records]
    out = pd.DataFrame(rows, columns=PER_WORKLOAD_COLUMNS)
    out["saving_pct"] = 100.0 * (1.0 - out["energy_j"] / out["baseline_energy_j"])
    out["slowdown_pct"] = 100.0 * (out["time_s"] / out["baseline_time_s"] - 1.0)
    out["regret_pct"] = 100.0 * (out["energy_j"] - out["oracle_energy_j"]) / out["baseline_energy_j"]
    return out


def summarize(per_workload: pd.DataFrame, by: Iterable[str] = ()) -> pd.DataFrame:
    """Per policy (and ``by`` groups): n, mean/max/min saving, mean/max slowdown, mean regret,
    mean profiling steps (charged steps spent choosing the level; 0 for most governors).

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
        "profiling_steps": g["profiling_steps"].mean() if "profiling_steps" in per_workload else 0.0,
    })
    return out.reset_index()


def summary_dict(summary: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    """``{policy: {mean_saving_pct, max_saving_pct, min_saving_pct, mean_slowdown_pct,
    mean_regret_pct, n_workloads[, profiling_steps]}}`` from an ungrouped :func:`summarize` frame (NaN -> None)."""
    out = {}
    for _, row in summary.iterrows():
        d: dict[str, float | None] = {k: _num(row[k]) for k in SUMMARY_KEYS}
        d["n_workloads"] = int(row["n_workloads"])
        if row.get("profiling_steps", 0) and not np.isnan(row["profiling_steps"]):
            d["profiling_steps"] = float(row["profiling_steps"])
        out[str(row["policy"])] = d
    return out


def _num(x: Any) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def difference_pts(summary: pd.DataFrame, a: str, b: str, key: str = "mean_saving_pct") -> float | None:
    """``key`` of policy ``a`` minus that of ``b`` (percentage points), None when missing."""
    s = summary.set_index("policy")
    if a not in s.index or b not in s.index:
        return None
    return _num(s.loc[a, key] - s.loc[b, key])


# The paper's headline numbers (Park et al. 2026), for side-by-side tables.
PAPER = {"sweet_spot_mhz": (510.0, 816.0), "loocv_accuracy": 0.62, "mlg_mean_saving_pct": 13.11,
         "mlg_max_saving_pct": 26.73, "mlg_minus_ffg_pts": 0.9, "large_models_mean_saving_pct": "> 22"}


def paper_comparison(summary: Mapping[str, Any], by_size: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paper vs dvfslab, one row per headline figure, from a summary.json-like mapping.

    ``by_size``: :func:`summarize` by ``size_group`` (for the > 70M row), optional.
    """
    gov = summary.get("governors", {})
    mlg, ffg = gov.get("mlg") or {}, gov.get("ffg") or {}
    ch, ms = summary.get("characterization", {}), summary.get("model_selection", {})
    spot = ch.get("sweet_spot_mhz", {})
    large = None
    if by_size is not None:
        row = by_size[(by_size["policy"] == "mlg") & (by_size["size_group"] == "> 70M")]
        large = float(row["mean_saving_pct"].iloc[0]) if len(row) else None
    diff = None if mlg.get("mean_saving_pct") is None or ffg.get("mean_saving_pct") is None \
        else mlg["mean_saving_pct"] - ffg["mean_saving_pct"]
    rows = [("energy-optimal level range (MHz)", "510–816", f"{spot.get('min', float('nan')):g}–{spot.get('max', float('nan')):g}"),
            ("LOOCV accuracy of the tree", "0.62", _fmt(ms.get("loocv_accuracy"), "{:.2f}")),
            ("leave-one-model-out accuracy", "not reported", _fmt(ms.get("grouped_accuracy"), "{:.2f}")),
            ("MLG mean saving vs baseline (%)", "13.11", _fmt(mlg.get("mean_saving_pct"))),
            ("published tree replayed here (mlg-paper), mean saving (%)", "13.11 (on the real board)",
             _fmt((gov.get("mlg-paper") or {}).get("mean_saving_pct"))),
            ("MLG max saving (%)", "26.73", _fmt(mlg.get("max_saving_pct"))),
            ("MLG mean slowdown (%)", "not reported", _fmt(mlg.get("mean_slowdown_pct"))),
            ("MLG mean saving, models > 70M (%)", "> 22", _fmt(large)),
            ("MLG minus FFG (points)", "0.9", _fmt(diff)),
            ("oracle mean saving (%)", "not reported", _fmt((gov.get("oracle") or {}).get("mean_saving_pct")))]
    return pd.DataFrame(rows, columns=["figure", "paper", "dvfslab"])


def _fmt(x: float | None, spec: str = "{:.2f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else spec.format(x)
