"""The twin's findings next to the paper's (docs/calibration.md, section 5). Simulated data.

:func:`twin_findings` reads a dataset by docs/method.md's definitions (oracle, FFG, the paper's
published tree applied); :func:`findings_markdown` is the side-by-side table. The paper's tree
is the one copy in :func:`dvfslab.governors.tree.paper_tree` (its default reading of where the
utilization split sits; docs/calibration.md explains the ambiguity), decided by
:class:`~dvfslab.governors.tree.PaperTreeGovernor`.
"""

from __future__ import annotations

import pandas as pd

from dvfslab.data.contract import Dataset
from dvfslab.hw.base import format_mhz, snap_mhz

__all__ = ["findings_markdown", "paper_tree_levels", "paper_util_split_pct", "twin_findings"]


def _paper_tree():
    # the governors room sits above the twin: imported on use, so ``import dvfslab.sim`` stays light
    from dvfslab.governors.tree import PaperTreeGovernor

    return PaperTreeGovernor().fit()


def paper_util_split_pct() -> float:
    """Where the paper's tree splits on GPU utilization (%), read from the governors' tree."""
    nodes = _paper_tree().tree_["nodes"]
    return next(float(n["threshold"]) for n in nodes if n.get("feature") == "gpu_util_pct")


def paper_tree_levels(workloads: pd.DataFrame, maxn_util_pct: pd.Series, levels: list[float]) -> pd.Series:
    """The paper's tree applied to each workload (index ``workload_id``; ``n_layers`` and
    ``avg_seq_len`` columns) with its MAXN utilization, snapped to the board's ``levels``
    (the tree's levels are the AGX Orin's; other boards' tables get the nearest)."""
    gov = _paper_tree()
    return pd.Series([snap_mhz(gov.decide({"workload_id": w, "n_layers": r.n_layers, "avg_seq_len": r.avg_seq_len,
                                           "gpu_util_pct": maxn_util_pct.at[w]}).level, levels)
                      for w, r in workloads.iterrows()], index=workloads.index, dtype=float)


def _at(frame: pd.DataFrame, choice: pd.Series) -> pd.Series:
    """``frame[w, choice[w]]`` for every workload ``w`` of ``choice``."""
    return pd.Series([frame.at[w, f] for w, f in choice.items()], index=choice.index)


def _stats(s: pd.Series, mask: pd.Series) -> dict:
    s = s[mask]
    return {"mean": float(s.mean()), "max": float(s.max()), "argmax": str(s.idxmax()), "min": float(s.min()),
            "argmin": str(s.idxmin()), "n": int(s.size)}


def twin_findings(ds: Dataset) -> dict:
    """What a dataset says about the paper's findings, by docs/method.md's definitions.

    Means over ``status=ok`` repetitions per (workload, level); baseline = mean MAXN run;
    savings and slowdowns on the ``evaluation`` split; FFG chosen on ``characterization``.
    """
    ok = ds.ok_runs()
    fixed = ok[ok["policy"] == "fixed"].groupby(["workload_id", "gpu_freq_mhz"])
    E, T, P = (fixed[c].mean().unstack() for c in ("energy_j", "time_s", "avg_power_w"))
    base = ok[ok["policy"] == "maxn"].groupby("workload_id")[["energy_j", "time_s", "gpu_util_pct"]].mean()
    wl = ds.workloads.set_index("workload_id").loc[E.index]
    levels = [float(f) for f in E.columns]
    opt = E.idxmin(axis=1).astype(float)

    ev, ch = wl["split"] == "evaluation", wl["split"] == "characterization"
    big = wl["params_m"] > 70
    ffg = float((E[ch].div(base["energy_j"][ch], axis=0)).mean().idxmin())
    tree = paper_tree_levels(wl, base["gpu_util_pct"], levels)
    choices = {"oracle": opt, "paper_tree": tree, "ffg": pd.Series(ffg, index=wl.index)}
    savings = {k: 100 * (1 - _at(E, c) / base["energy_j"]) for k, c in choices.items()}
    slowdowns = {k: 100 * (_at(T, c) / base["time_s"] - 1) for k, c in choices.items()}

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
        "maxn_freq_note": "MAXN = emulated nvhost_podgov",
        "paper_util_split_pct": paper_util_split_pct(),
        "ffg_mhz": ffg,
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
        ("Energy-optimal level (sweet spot)", "510–816 MHz",
         f"{format_mhz(f['sweet_spot_mhz'][0])}–{format_mhz(f['sweet_spot_mhz'][1])} MHz ({counts})"),
        ("Saving vs MAXN on the evaluation (unseen) tasks, mean / max / min",
         "MLG: 13.11 % / 26.73 % (BERT-base, MNLI) / negative for some small models",
         f"oracle (upper bound, not MLG): {mmx('oracle', 'all')}; the paper's tree applied: {mmx('paper_tree', 'all')}"),
        ("Models > 70M parameters, mean saving", "MLG: > 22 %",
         f"oracle {pct(sv['oracle']['gt70m']['mean'])}; paper's tree {pct(sv['paper_tree']['gt70m']['mean'])}"),
        ("Models ≤ 70M parameters", "vary; can lose energy",
         f"oracle mean {pct(sv['oracle']['le70m']['mean'])} (min {pct(sv['oracle']['le70m']['min'])}); "
         f"paper's tree mean {pct(sv['paper_tree']['le70m']['mean'])} (min {pct(sv['paper_tree']['le70m']['min'])})"),
        ("MLG vs fixed-frequency governor (FFG)", "MLG ahead by 0.9 points",
         f"FFG = {format_mhz(f['ffg_mhz'])} MHz saves {pct(sv['ffg']['all']['mean'])}; paper's tree − FFG = "
         f"{sv['paper_tree']['all']['mean'] - sv['ffg']['all']['mean']:+.1f} points"),
        ("GPU utilization in MAXN", "tree splits at 22 %",
         f"{f['maxn_util_pct'][0]:.0f}–{f['maxn_util_pct'][1]:.0f} % (no workload at or under 22 %)"
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
