"""The twin's findings next to the paper's (docs/calibration.md, section 5). Simulated data.

:func:`twin_findings` reads a dataset by docs/method.md's definitions with the project's own
pieces: the :class:`~dvfslab.analysis.aggregate.Sweep` (level means, baselines, the oracle's
least-energy level), FFG fitted on the characterization split
(:class:`~dvfslab.governors.static.FixedGovernor`), and the paper's published tree
(:class:`~dvfslab.governors.tree.PaperTreeGovernor`, its default reading of where the
utilization split sits; docs/calibration.md explains the ambiguity) deciding each workload from
its features. :func:`findings_markdown` is the side-by-side table; the paper's figures come from
:mod:`dvfslab.core.reference`. It lives in the evaluation room (it applies governors to a
sweep), so the twin imports no governor.
"""

from __future__ import annotations

import pandas as pd

from dvfslab.analysis.aggregate import Sweep, sweep_from_dataset
from dvfslab.analysis.features import feature_table
from dvfslab.analysis.training import TrainingData
from dvfslab.core import reference as R
from dvfslab.core.levels import format_mhz, snap_mhz
from dvfslab.data.contract import Dataset
from dvfslab.governors.static import FixedGovernor
from dvfslab.governors.tree import PaperTreeGovernor

__all__ = ["board_total_view", "findings_markdown", "paper_tree_levels", "paper_util_split_pct", "twin_findings"]


def paper_util_split_pct() -> float:
    """Where the paper's tree splits on GPU utilization (%), read from the governors' tree."""
    nodes = PaperTreeGovernor().fit().tree_["nodes"]
    return next(float(n["threshold"]) for n in nodes if n.get("feature") == "gpu_util_pct")


def paper_tree_levels(sweep: Sweep, features: pd.DataFrame) -> pd.Series:
    """The paper's tree applied to each workload of the feature table (its MAXN utilization
    among the features), snapped to the sweep's levels (the tree's levels are the AGX Orin's;
    other boards' tables get the nearest), indexed by ``workload_id``."""
    gov = PaperTreeGovernor().fit()
    levels = list(sweep.level_table)
    rows = features.set_index("workload_id", drop=False)
    return pd.Series([snap_mhz(gov.decide({k: r[k] for k in ("workload_id", "n_layers", "avg_seq_len",
                                                               "gpu_util_pct")}).level, levels)
                      for _, r in rows.iterrows()], index=rows.index, dtype=float)


def _stats(s: pd.Series, mask: pd.Series) -> dict:
    s = s[mask]
    return {"mean": float(s.mean()), "max": float(s.max()), "argmax": str(s.idxmax()), "min": float(s.min()),
            "argmin": str(s.idxmin()), "n": int(s.size)}


def twin_findings(ds: Dataset) -> dict:
    """What a dataset says about the paper's findings, by docs/method.md's definitions.

    Means over ``status=ok`` repetitions per (workload, level) (the Sweep's); baseline = its
    baseline runs (MAXN); savings and slowdowns on the ``evaluation`` split; FFG fitted on
    ``characterization``.
    """
    sweep = sweep_from_dataset(ds)
    features = feature_table(sweep)
    table = sweep.levels.pivot(index="workload_id", columns="level")
    E, T, P = table["energy_j"], table["time_s"], table["avg_power_w"]
    base = sweep.baseline.set_index("workload_id")[["energy_j", "time_s", "gpu_util_pct"]].loc[E.index]
    wl = sweep.workloads.set_index("workload_id").loc[E.index]
    levels = [float(f) for f in E.columns]
    opt = pd.Series({w: sweep.oracle_level(w) for w in E.index}, dtype=float)

    ev, ch = wl["split"] == "evaluation", wl["split"] == "characterization"
    big = wl["params_m"] > R.SIZE_SPLIT_M
    ffg = FixedGovernor().fit(TrainingData(sweep, features, list(wl.index[ch]))).level_
    tree = paper_tree_levels(sweep, features).loc[E.index]
    choices = {"oracle": opt, "paper_tree": tree, "ffg": pd.Series(ffg, index=wl.index)}
    at = {k: pd.DataFrame([sweep.at(w, f) for w, f in c.items()], index=c.index, columns=["energy_j", "time_s"])
          for k, c in choices.items()}
    savings = {k: 100 * (1 - a["energy_j"] / base["energy_j"]) for k, a in at.items()}
    slowdowns = {k: 100 * (a["time_s"] / base["time_s"] - 1) for k, a in at.items()}

    return {
        "n_workloads": int(len(wl)),
        "time_decreasing": int((T.diff(axis=1).iloc[:, 1:] < 0).all(axis=1).sum()),
        "power_increasing": int((P.diff(axis=1).iloc[:, 1:] > 0).all(axis=1).sum()),
        "time_ratio_min_max": [float((T.iloc[:, 0] / T.iloc[:, -1]).min()), float((T.iloc[:, 0] / T.iloc[:, -1]).max())],
        "power_ratio_min_max": [float((P.iloc[:, -1] / P.iloc[:, 0]).min()), float((P.iloc[:, -1] / P.iloc[:, 0]).max())],
        "interior_minimum": int(((opt > levels[0]) & (opt < levels[-1])).sum()),
        "optimal_level_counts": {format_mhz(f): int(n) for f, n in opt.value_counts().sort_index().items()},
        "sweet_spot_mhz": [float(opt.min()), float(opt.max())],
        "maxn_util_pct": [float(base["gpu_util_pct"].min()), float(base["gpu_util_pct"].max())],
        "maxn_util_at_or_under_split": int((base["gpu_util_pct"] <= R.TREE_UTIL_SPLIT_PCT).sum()),
        "maxn_freq_note": "MAXN = emulated nvhost_podgov",
        "paper_util_split_pct": paper_util_split_pct(),
        "ffg_mhz": float(ffg),
        "saving_pct": {k: {"all": _stats(s, ev), "gt70m": _stats(s, ev & big), "le70m": _stats(s, ev & ~big)}
                       for k, s in savings.items()},
        "slowdown_pct": {k: float(s[ev].mean()) for k, s in slowdowns.items()},
    }


def findings_markdown(ds: Dataset) -> str:
    """The side-by-side table (paper vs twin) as markdown, for docs/calibration.md and the README."""
    f = twin_findings(ds)
    n, sv = f["n_workloads"], f["saving_pct"]

    def pct(x: float) -> str:
        return f"{x:.1f} %"

    def mmx(k: str, g: str) -> str:
        s = sv[k][g]
        return f"{pct(s['mean'])} / {pct(s['max'])} ({s['argmax']}) / {pct(s['min'])} ({s['argmin']})"

    counts = ", ".join(f"{k} MHz: {v}" for k, v in f["optimal_level_counts"].items())
    rows = [
        ("Time vs GPU clock", "falls roughly exponentially",
         f"falls at every step up in {f['time_decreasing']}/{n} workloads; "
         f"T(min)/T(max) = {f['time_ratio_min_max'][0]:.2f}–{f['time_ratio_min_max'][1]:.2f}"),
        ("Power vs GPU clock", "rises roughly linearly",
         f"rises at every step up in {f['power_increasing']}/{n}; "
         f"P(max)/P(min) = {f['power_ratio_min_max'][0]:.2f}–{f['power_ratio_min_max'][1]:.2f}"),
        ("Energy vs GPU clock", "U-shaped", f"interior minimum in {f['interior_minimum']}/{n} workloads"),
        ("Energy-optimal level (sweet spot)", f"{R.optimal_range_text()} MHz",
         f"{format_mhz(f['sweet_spot_mhz'][0])}–{format_mhz(f['sweet_spot_mhz'][1])} MHz ({counts})"),
        ("Saving vs MAXN on the evaluation (unseen) tasks, mean / max / min",
         f"MLG: {R.MLG_MEAN_SAVING_PCT:.2f} % / {R.MLG_MAX_SAVING_PCT:.2f} % ({R.MLG_MAX_SAVING_WORKLOAD}) / "
         "negative for some small models",
         f"oracle (upper bound, not MLG): {mmx('oracle', 'all')}; the paper's tree applied: {mmx('paper_tree', 'all')}"),
        (f"Models > {R.SIZE_SPLIT_M:g}M parameters, mean saving", f"MLG: {R.gt70m_text()} %",
         f"oracle {pct(sv['oracle']['gt70m']['mean'])}; paper's tree {pct(sv['paper_tree']['gt70m']['mean'])}"),
        (f"Models ≤ {R.SIZE_SPLIT_M:g}M parameters", "vary; can lose energy",
         f"oracle mean {pct(sv['oracle']['le70m']['mean'])} (min {pct(sv['oracle']['le70m']['min'])}); "
         f"paper's tree mean {pct(sv['paper_tree']['le70m']['mean'])} (min {pct(sv['paper_tree']['le70m']['min'])})"),
        ("MLG vs fixed-frequency governor (FFG)", f"MLG ahead by {R.MLG_MINUS_FFG_PTS:g} points",
         f"FFG = {format_mhz(f['ffg_mhz'])} MHz saves {pct(sv['ffg']['all']['mean'])}; paper's tree − FFG = "
         f"{sv['paper_tree']['all']['mean'] - sv['ffg']['all']['mean']:+.1f} points"),
        ("GPU utilization in MAXN", f"tree splits at {R.TREE_UTIL_SPLIT_PCT:g} %",
         f"{f['maxn_util_pct'][0]:.0f}–{f['maxn_util_pct'][1]:.0f} % ({f['maxn_util_at_or_under_split'] or 'no'} "
         f"workload{'' if f['maxn_util_at_or_under_split'] == 1 else 's'} at or under {R.TREE_UTIL_SPLIT_PCT:g} %)"
         if f["maxn_util_pct"][0] > f["paper_util_split_pct"] else f"{f['maxn_util_pct'][0]:.0f}–{f['maxn_util_pct'][1]:.0f} %"),
        ("Mean slowdown vs MAXN (evaluation)", "not given as a headline",
         f"oracle {pct(f['slowdown_pct']['oracle'])}; paper's tree {pct(f['slowdown_pct']['paper_tree'])}"),
    ]
    lines = ["| Finding | Paper (measured, AGX Orin 64GB) | Twin (bundled data, **simulated**) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


def board_total_view(ds: Dataset) -> Dataset:
    """The same dataset with ``energy_j`` (and ``avg_power_w``) taken from all four rails
    (``energy_board_j``) instead of the paper's CPU+GPU total: how the findings change with
    the board total. Needs the ``energy_board_j`` column (datasets from twin_version 3)."""
    if "energy_board_j" not in ds.runs.columns or ds.runs["energy_board_j"].isna().all():
        raise ValueError(f"{ds.path}: runs.csv has no energy_board_j column (regenerate with dvfslab simulate)")
    runs = ds.runs.copy()
    runs["energy_j"] = runs["energy_board_j"]
    runs["avg_power_w"] = runs["energy_j"] / runs["time_s"]
    return Dataset(ds.path, ds.meta, ds.workloads, runs, ds.steps)
