"""The governors' figures: one colour per governor family, a marker per governor.

A frame may carry ``family`` beside ``policy`` (:func:`dvfslab.evaluation.govcv.governor_family`:
``yardstick`` — the baseline and the oracle —, ``fixed level``, ``from the features``, ``probes the
job``); each family has one colour (:data:`FAMILY_COLORS`, colour-blind safe, none of them the
size groups' red and blue) and each governor a marker of its own within its family, the same in
every figure of a run (:func:`styles`). Without ``family`` every policy is one family. Legends sit
outside the axes, so they never cover the data; tick labels are rotated so that they never run
together. Drawing only, as :mod:`dvfslab.analysis.plots` (which re-exports these).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from dvfslab.analysis.plotbase import METRIC_LABELS, SIZE_PALETTE, _finish, _note

#: family -> colour (Okabe-Ito); a family not listed takes the next of :data:`EXTRA_COLORS`
FAMILY_COLORS = {"yardstick": "#555555", "fixed level": "#E69F00", "from the features": "#009E73",
                 "probes the job": "#CC79A7", "governor": "#0072B2"}
EXTRA_COLORS = ("#56B4E9", "#F0E442", "#D55E00", "#000000")
#: markers given in turn to the governors of one family
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "p", "h", "<", ">")
BAR_ALPHA = 0.55


def styles(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """``{policy: {"family", "color", "marker"}}`` in the frame's order of families, then policies."""
    fams = frame["family"].astype(str) if "family" in frame else pd.Series("governor", index=frame.index)
    order = list(dict.fromkeys(zip(fams, frame["policy"].astype(str), strict=True)))
    extra = iter(EXTRA_COLORS * 4)
    colors = {f: FAMILY_COLORS.get(f) or next(extra) for f in dict.fromkeys(f for f, _ in order)}
    out: dict[str, dict[str, Any]] = {}
    used: dict[str, int] = {}
    for fam, name in order:
        if name in out:
            continue
        k = used.get(fam, 0)
        used[fam] = k + 1
        out[name] = {"family": fam, "color": colors[fam], "marker": MARKERS[k % len(MARKERS)]}
    return out


def _governor_legend(style: Mapping[str, Mapping[str, Any]], filled: bool = True) -> list[Any]:
    """Legend handles: each family's name (no marker) then its governors (marker and colour)."""
    handles: list[Any] = []
    families = list(dict.fromkeys(s["family"] for s in style.values()))
    for fam in families:
        if families != ["governor"]:  # no family column: no headings
            handles.append(Line2D([], [], ls="none", label=fam))
        for name, s in style.items():
            if s["family"] == fam:
                handles.append(Line2D([], [], ls="none", marker=s["marker"], markersize=6, color=s["color"],
                                      markerfacecolor=s["color"] if filled else "none", label=f"  {name}"))
    return handles


def _outside_legend(fig: Figure, ax: Any, handles: list[Any], title: str, anchor_y: float = 1.0) -> Any:
    """A legend right of ``ax`` (never over the data); family names in italics."""
    leg = ax.legend(handles=handles, title=title, fontsize=7, title_fontsize=7, loc="upper left",
                    bbox_to_anchor=(1.02, anchor_y), borderaxespad=0.0, handletextpad=0.3, labelspacing=0.35)
    for text in leg.get_texts():
        if not text.get_text().startswith("  "):
            text.set_fontstyle("italic")
    return leg


def savings_bars(per_workload: pd.DataFrame, simulated: bool) -> Figure:
    """Mean energy saving and slowdown per policy (bars, the family's colour) with each workload
    as a dot (its size group's colour); policy names rotated under the bars.

    ``per_workload``: long form with policy, metric (saving_pct | slowdown_pct), value,
    size_group, optionally family.
    """
    sns.set_theme(style="whitegrid", context="paper")
    style = styles(per_workload)
    names = list(style)
    metrics = list(dict.fromkeys(per_workload["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(9.0, 0.42 * len(names) * len(metrics) + 2.5), 4.0),
                             squeeze=False)
    rng = np.random.default_rng(0)  # the dots' horizontal jitter, the same every run
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = per_workload[per_workload["metric"] == metric]
        means = part.groupby("policy", sort=False)["value"].mean()
        x = np.arange(len(names))
        ax.bar(x, [means.get(n, np.nan) for n in names], color=[style[n]["color"] for n in names], alpha=BAR_ALPHA,
               width=0.7, edgecolor=[style[n]["color"] for n in names])
        for i, name in enumerate(names):
            mine = part[part["policy"] == name]
            for group, dots in mine.groupby(mine["size_group"].fillna("unknown") if "size_group" in mine else
                                            pd.Series("unknown", index=mine.index)):
                ax.scatter(i + rng.uniform(-0.22, 0.22, len(dots)), dots["value"], s=7, alpha=0.8, linewidths=0,
                           color=SIZE_PALETTE.get(str(group), "#7f7f7f"), zorder=3)
        for i, name in enumerate(names):  # a governor without a figure here says so, not a silent gap
            if not np.isfinite(means.get(name, np.nan)):
                ax.annotate("no figure", (i, 0.0), xytext=(0, 3), textcoords="offset points", ha="center",
                            va="bottom", rotation=90, fontsize=6.5, color="#555555")
        ax.set_xticks(x, names, rotation=40, ha="right", rotation_mode="anchor", fontsize=8)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_title(METRIC_LABELS.get(metric, metric))
        ax.set_ylabel("%")
        ax.set_xlabel("")
        ax.axhline(0.0, color="black", lw=0.8)
    fams = list(dict.fromkeys(s["family"] for s in style.values()))
    handles = [Patch(facecolor=style[next(n for n in names if style[n]["family"] == f)]["color"], alpha=BAR_ALPHA,
                     label=f) for f in fams]
    sizes = [g for g in SIZE_PALETTE if "size_group" in per_workload and (per_workload["size_group"].fillna("unknown")
                                                                            == g).any()]
    handles += [Line2D([], [], ls="none", marker="o", markersize=4, color=SIZE_PALETTE[g],
                       label="workload, size unknown" if g == "unknown" else f"workload {g}") for g in sizes]
    fig.legend(handles=handles, title="bar: governor family; dot: one workload", fontsize=7, title_fontsize=7,
               loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _finish(fig, "Governors on the evaluation workloads: mean (bar) and per workload (dots)", simulated)


def whole_job(job: pd.DataFrame, simulated: bool, text: str = "Whole job: regret and probing share") -> Figure:
    """Per policy (``job``'s index), the whole-job regret against the oracle and the share of the
    job spent probing (``job_regret_pct``, ``probe_share_pct``), side by side; names rotated, the
    legend outside the axes."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(max(8.0, 0.55 * len(job) + 2.5), 3.8))
    x, w = np.arange(len(job)), 0.38
    ax.bar(x - w / 2, job["job_regret_pct"], w, color="#d62728", label="regret vs oracle")
    ax.bar(x + w / 2, job["probe_share_pct"], w, color="#7f7f7f", label="share of the job probing")
    ax.set_xticks(x, [str(n) for n in job.index], rotation=40, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_xlim(-0.6, len(job) - 0.4)
    ax.set_ylabel("% of the baseline's job energy /\n% of the job's units")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _finish(fig, text, simulated)


def saving_vs_slowdown(summary: pd.DataFrame, simulated: bool) -> Figure:
    """Mean saving vs mean slowdown, one point per policy (its family's colour, its own marker)
    and size group when given (filled: > 70M, hollow: <= 70M)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    style = styles(summary)
    groups = list(dict.fromkeys(summary["size_group"])) if "size_group" in summary else [None]
    for _, r in summary.iterrows():
        s = style[str(r["policy"])]
        hollow = r.get("size_group") == "<= 70M"
        ax.scatter(r["mean_slowdown_pct"], r["mean_saving_pct"], s=55, marker=s["marker"], color=s["color"],
                   facecolors="none" if hollow else s["color"], linewidths=1.3, zorder=3)
    ax.set_xlabel("mean slowdown vs baseline (%)")
    ax.set_ylabel("mean energy saving vs baseline (%)")
    handles = _governor_legend(style)
    if groups != [None]:
        handles += [Line2D([], [], ls="none", label="size group")]
        handles += [Line2D([], [], ls="none", marker="o", color="#555555", markerfacecolor="none" if g == "<= 70M"
                           else "#555555", label=f"  {g}") for g in groups]
    _outside_legend(fig, ax, handles, "governor")
    return _finish(fig, "Energy saved vs time lost", simulated)


def pareto(points: pd.DataFrame, simulated: bool, text: str = "Energy vs time, mean over workloads") -> Figure:
    """Mean energy / baseline vs mean time / baseline, one point per policy (its family's colour,
    its own marker; hollow: under the slowdown ``limit`` when given), the Pareto front joined, each
    point labelled (labels pushed apart, with a leader line to their point), the legend outside.
    ``points``: :func:`dvfslab.evaluation.govcv.pareto_points`."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(8.4, 4.8))
    style = styles(points)
    limits = list(dict.fromkeys(points["limit"])) if "limit" in points else [None]
    for _, r in points.iterrows():
        s = style[str(r["policy"])]
        hollow = limits[0] is not None and r["limit"] != limits[0]
        ax.scatter(r["time_rel"], r["energy_rel"], s=60, marker=s["marker"], color=s["color"],
                   facecolors="none" if hollow else s["color"], linewidths=1.4, zorder=3)
    front = points[points["pareto"]].sort_values("time_rel")
    ax.plot(front["time_rel"], front["energy_rel"], color="#7f7f7f", lw=1, ls="--", zorder=1)
    ax.set_xlabel("time / baseline (lower is faster)")
    ax.set_ylabel("energy / baseline (lower is better)")
    handles = _governor_legend(style)
    if limits != [None]:
        handles += [Line2D([], [], ls="none", label="slowdown limit")]
        handles += [Line2D([], [], ls="none", marker="o", color="#555555", markerfacecolor="#555555" if i == 0 else
                           "none", label=f"  {lim}") for i, lim in enumerate(limits)]
    handles += [Line2D([], [], color="#7f7f7f", lw=1, ls="--", label="Pareto front")]
    _outside_legend(fig, ax, handles, "governor")
    ax.margins(x=0.12, y=0.15)  # room for the labels pushed off a cluster
    _finish(fig, text, simulated)
    label_points(ax, points["time_rel"], points["energy_rel"], points["policy"].astype(str))
    return fig


def label_points(ax: Any, x: Sequence[float], y: Sequence[float], labels: Sequence[str], fontsize: float = 6.5,
                 marker_pt: float = 4.5, gap_px: float = 1.5, rounds: int = 500) -> list[Any]:
    """Label data points without overlaps: each label starts just up-right of its point (up-left
    where it would run past the axes' right edge, over the legend); labels
    whose boxes overlap each other or a marker (a square of half-side ``marker_pt``) are pushed
    apart vertically (``rounds`` times at most); a label that ends away from its point gets a
    thin leader line. Points on one spot (the same pixel) share one label; a point with a NaN
    coordinate (not drawn) gets none. Call it after the
    figure's layout is final (positions are in screen pixels, kept as offsets in points)."""
    fig = ax.figure
    px_per_pt = fig.dpi / 72
    renderer = fig.canvas.get_renderer()
    anchors = ax.transData.transform(np.column_stack([np.asarray(x, float), np.asarray(y, float)]))
    places: dict[tuple[float, float], tuple[np.ndarray, list[str]]] = {}  # one spot, one label
    for label, anchor in zip(labels, anchors, strict=True):
        if not np.isfinite(anchor).all():  # a point not drawn (no figure for it) gets no label
            continue
        names = places.setdefault((round(anchor[0]), round(anchor[1])), (anchor, []))[1]
        if label not in names:
            names.append(label)
    labels = [", ".join(names) for _, names in places.values()]
    anchors = np.array([anchor for anchor, _ in places.values()], float).reshape(-1, 2)
    sizes = []
    for label in labels:
        probe = ax.text(0, 0, label, fontsize=fontsize)
        box = probe.get_window_extent(renderer)
        sizes.append((box.width, box.height))
        probe.remove()
    size = np.array(sizes).reshape(-1, 2)
    start = anchors + np.array([marker_pt, marker_pt * 0.6]) * px_per_pt
    # a label that would run past the axes' right edge (over the legend) goes left of its point
    flip = start[:, 0] + size[:, 0] > ax.get_window_extent(renderer).x1
    start[flip, 0] = anchors[flip, 0] - marker_pt * px_per_pt - size[flip, 0]
    pos = start.copy()  # lower-left corners of the labels, pixels
    half = marker_pt * px_per_pt
    markers = np.column_stack([anchors - half, np.full((len(anchors), 2), 2 * half)])  # x, y, w, h

    def overlap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        """Overlap (dx, dy) of boxes (x, y, w, h); both > -gap_px: they touch."""
        return (min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]), min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))

    for _ in range(rounds):
        moved = False
        boxes = np.column_stack([pos, size])
        for i in range(len(pos)):
            for j in range(i + 1, len(pos)):  # two labels: each moves half the overlap
                dx, dy = overlap(boxes[i], boxes[j])
                if dx > -gap_px and dy > -gap_px:
                    up, down = (i, j) if (pos[i, 1], i) > (pos[j, 1], j) else (j, i)
                    pos[up, 1] += (dy + gap_px) / 2
                    pos[down, 1] -= (dy + gap_px) / 2
                    moved = True
            for k in range(len(markers)):  # a label on a marker moves off it
                dx, dy = overlap(np.array([*pos[i], *size[i]]), markers[k])
                if dx > -gap_px and dy > -gap_px:
                    above = pos[i, 1] + size[i, 1] / 2 >= markers[k, 1] + half
                    pos[i, 1] += (dy + gap_px) if above else -(dy + gap_px)
                    moved = True
        if not moved:
            break
    out = []
    for anchor, corner, first, label in zip(anchors, pos, start, labels, strict=True):
        leader = {"arrowstyle": "-", "color": "#808080", "lw": 0.6, "shrinkA": 0, "shrinkB": half / px_per_pt} \
            if np.hypot(*(corner - first)) > 2 else None
        out.append(ax.annotate(label, ax.transData.inverted().transform(anchor), xytext=(corner - anchor) / px_per_pt,
                               textcoords="offset points", fontsize=fontsize, ha="left", va="bottom",
                               arrowprops=leader, annotation_clip=False))
    return out


def governor_cv(summary: pd.DataFrame, simulated: bool,
                note: str = "no cross-validation: fewer than two training workloads") -> Figure:
    """Mean regret and mean saving per policy, one bar group per CV scheme.

    ``summary``: :func:`dvfslab.evaluation.replay.summarize` with ``by=["scheme"]``; empty (no
    fold could be held out), a figure saying ``note``.
    """
    sns.set_theme(style="whitegrid", context="paper")
    if summary.empty:
        return _note(note, "Governors under cross-validation (training workloads)", simulated)
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for ax, col in zip(axes, ("mean_regret_pct", "mean_saving_pct"), strict=True):
        sns.barplot(data=summary, x="policy", y=col, hue="scheme", ax=ax)
        ax.set_ylabel(METRIC_LABELS.get(col.replace("mean_", ""), col))
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30, labelsize=7)
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
    # one legend outside the axes: inside, it would hide the bars that reach the top
    fig.legend(handles, labels, title="held out", fontsize=7, title_fontsize=7,
               loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _finish(fig, "Governors under cross-validation (training workloads)", simulated)
