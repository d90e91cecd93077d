"""Seaborn figures from tidy frames: no I/O and no analysis here, only drawing.

Every function returns a :class:`matplotlib.figure.Figure` and takes ``simulated``: when true,
the title says the data is simulated (the project's rule for data from the simulated board).
The frames come from :mod:`dvfslab.analysis.aggregate`, :mod:`dvfslab.analysis.features`,
:mod:`dvfslab.evaluation.selection` and :mod:`dvfslab.evaluation.replay` (plain frames: this
module imports neither); the notebooks save the figures. Levels are knob-neutral (column
``level``); figures with an axis of levels take ``knob`` (``Sweep.knob``; default the GPU clock
in MHz) and label that axis, and the title, from it: a power-limit sweep reads "GPU power limit (W)".
A joint dataset's level is a setting's index: given ``format_level`` (``Sweep.format_level``), its
figures name each setting by its clocks in MHz (ticks, leaves, cells: ``plotbase.level_text``),
never "setting 5".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

# the governors' figures (one colour per governor family, a marker per governor) live in
# govplots, the helpers every figure shares in plotbase; both re-exported here, where the
# notebooks call them
from dvfslab.analysis.govplots import (  # noqa: F401
    governor_cv,
    label_points,
    pareto,
    saving_vs_slowdown,
    savings_bars,
    whole_job,
)
from dvfslab.analysis.plotbase import (  # noqa: F401
    METRIC_LABELS,
    SIZE_PALETTE,
    _finish,
    _finish_grid,
    _note,
    joint,
    level_axis,
    level_text,
    title,
)
from dvfslab.data.knobs import Knob, get_knob


def _model_colors(models: Sequence[str]) -> dict[str, Any]:
    """One viridis colour per model, in the given (size) order."""
    return dict(zip(models, sns.color_palette("viridis", len(models)), strict=True))


def sweep_curves(rel: pd.DataFrame, simulated: bool, knob: Knob | None = None,
                 format_level: Callable[[float], str] | None = None) -> Figure:
    """Time, power and energy relative to the baseline vs level: one panel per metric,
    one line per workload, coloured by model (ordered by size).

    ``rel``: long form with columns workload_id, model, params_m, level, metric, value (see
    :func:`dvfslab.analysis.aggregate.relative_levels` and :func:`dvfslab.analysis.aggregate.long_form`).
    """
    knob = knob or get_knob()
    sns.set_theme(style="whitegrid", context="paper")
    order = rel.sort_values(["params_m", "model"])["model"].drop_duplicates().tolist()
    colors = _model_colors(order)
    metrics = list(dict.fromkeys(rel["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.4 * len(metrics) + 1.6, 3.3), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for (model, _), line in rel[rel["metric"] == metric].groupby(["model", "workload_id"], sort=False):
            line = line.sort_values("level")
            ax.plot(line["level"], line["value"], color=colors[model], lw=1, alpha=0.8)
        ax.axhline(1.0, color="black", lw=0.7, ls=":")
        ax.set_title(METRIC_LABELS.get(metric, metric))
        level_axis(ax, knob, format_level)
    axes[0][0].set_ylabel("relative to baseline (1 = baseline)")
    handles = [plt.Line2D([], [], color=colors[m], lw=2) for m in order]
    fig.legend(handles, order, title="model", loc="center right", fontsize=7)
    fig.suptitle(title(f"Time, power and energy vs {knob.quantity}, one line per workload", simulated), fontsize=12)
    fig.tight_layout(rect=(0, 0, 1 - 1.5 / fig.get_figwidth(), 1))
    return fig


def u_curves(levels: pd.DataFrame, optima: pd.DataFrame, simulated: bool, col_wrap: int = 4,
             knob: Knob | None = None, format_level: Callable[[float], str] | None = None) -> Figure:
    """Energy (kJ) vs level per workload, one panel per model, the optimum starred.

    ``levels``: model, task, level, energy_j (and workload_id: one line per workload when a
    model has several per task, e.g. batch sizes); ``optima``: model, task, params_m,
    opt_level, opt_energy_j.
    """
    lines = ["task", "workload_id"] if "workload_id" in levels else ["task"]
    sns.set_theme(style="whitegrid", context="paper")
    order = optima.sort_values(["params_m", "model"])["model"].drop_duplicates().tolist()
    tasks = list(dict.fromkeys(levels["task"]))
    colors = dict(zip(tasks, sns.color_palette("tab10", len(tasks)), strict=False))
    ncol = min(col_wrap, len(order))
    nrow = -(-len(order) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.9 * ncol + 1.2, 2.4 * nrow), squeeze=False)
    for ax, model in zip(axes.flat, order, strict=False):
        for key, line in levels[levels["model"] == model].groupby(lines, sort=False):
            line = line.sort_values("level")
            ax.plot(line["level"], line["energy_j"] / 1e3, marker="o", ms=2.5, lw=1, color=colors[key[0]])
        opt = optima[optima["model"] == model]
        ax.scatter(opt["opt_level"], opt["opt_energy_j"] / 1e3, marker="*", s=90, color="black", zorder=5,
                   label="least energy")
        ax.set_title(model)
    for ax in axes.flat[len(order):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("energy per run (kJ)")
    for ax in axes.flat[:len(order)]:
        level_axis(ax, knob or get_knob(), format_level)
    for ax in axes[:-1, :].flat:
        ax.set_xlabel("")
    handles = [plt.Line2D([], [], color=colors[t], marker="o", lw=1) for t in tasks]
    handles.append(plt.Line2D([], [], color="black", marker="*", ls="", ms=9))
    fig.legend(handles, tasks + ["least energy"], title="task", loc="center right", fontsize=7)
    fig.suptitle(title("Energy U-curves, least-energy level starred", simulated), fontsize=12)
    fig.tight_layout(rect=(0, 0, 1 - 1.1 / fig.get_figwidth(), 1))
    return fig


#: columns of one optimal-level heatmap panel; a wider grid (1 network x 112 concurrencies) wraps
HEATMAP_WRAP = 16
#: the load axis, named from the workloads' column that varies (LoudVA: request concurrency)
LOAD_LABELS = {"concurrency": "request concurrency", "batch_size": "batch size"}


def joint_energy_map(frame: pd.DataFrame, simulated: bool, x: str = "gpu_freq_mhz", y: str = "emc_freq_mhz",
                     col_wrap: int = 4) -> Figure:
    """Energy / baseline over two clocks of a joint sweep, one panel per workload; the least cell
    of each panel is outlined. Where the sweep set more clocks, each cell is the least over the
    others (the title says so); a setting not run (a design of N settings) is left blank.

    ``frame``: :func:`dvfslab.analysis.aggregate.joint_levels_frame` (columns workload_id,
    ``x``, ``y``, energy_rel and the other clocks).
    """
    sns.set_theme(style="white", context="paper")
    labels = {"gpu_freq_mhz": "GPU (MHz)", "emc_freq_mhz": "EMC (MHz)", "cpu_freq_mhz": "CPU (MHz)"}
    others = [c for c in labels if c in frame.columns and c not in (x, y)]
    cells = frame.groupby(["workload_id", y, x], sort=True)["energy_rel"].min().reset_index()
    workloads = list(dict.fromkeys(cells["workload_id"]))
    ncol = min(col_wrap, len(workloads))
    nrow = -(-len(workloads) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol + 1.0, 2.6 * nrow + 0.6), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(workloads):]:
        ax.set_visible(False)
    vmin, vmax = float(cells["energy_rel"].min()), float(cells["energy_rel"].max())
    image = None
    for ax, wid in zip(axes.flat, workloads, strict=False):
        # matplotlib's imshow, not seaborn's heatmap: that draws the whole figure once per panel
        grid = cells[cells["workload_id"] == wid].pivot(index=y, columns=x, values="energy_rel").sort_index(ascending=False)
        values = grid.to_numpy(float)
        image = ax.imshow(values, cmap="viridis_r", vmin=vmin, vmax=vmax, aspect="auto")
        if values.size <= 40:
            for (r, c), v in np.ndenumerate(values):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if v > (vmin + vmax) / 2 else "black")
        r, c = np.unravel_index(np.nanargmin(values), values.shape)
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        ax.set_xticks(range(values.shape[1]), [f"{v:g}" for v in grid.columns], fontsize=6)
        ax.set_yticks(range(values.shape[0]), [f"{v:g}" for v in grid.index], fontsize=6)
        ax.set_title(wid, fontsize=8)
        ax.set_xlabel(labels.get(x, x))
        ax.set_ylabel(labels.get(y, y))
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="energy / baseline", shrink=0.8)
    least = f" (each cell the least over {', '.join(labels[c] for c in others)})" if others else ""
    fig.suptitle(title(f"Energy over the joint setting, red: the least{least}", simulated), fontsize=12)
    return fig


def optimal_heatmap(features: pd.DataFrame, simulated: bool, knob: Knob | None = None,
                    workloads: pd.DataFrame | None = None, format_level: Callable[[float], str] | None = None) -> Figure:
    """Energy-optimal level (in the knob's unit) by model x task; models ordered by parameter count.

    When a (model, task) has several workloads (batch sizes, optimizers: a Zeus trace; request
    concurrencies: LoudVA), the rows are model / task, the columns the load — named from
    ``workloads`` (the sweep's table: its ``concurrency`` column when it has one, else the batch
    size) — and a cell holds the median over the rest. More than :data:`HEATMAP_WRAP` columns
    wrap into stacked panels on one colour scale, so 1 network x 112 loads reads like 9 x 9. On a
    joint dataset (``format_level`` given) each cell names its setting's clocks in MHz, coloured by
    the setting's index.
    """
    knob = knob or get_knob()
    sns.set_theme(style="white", context="paper")
    ordered = features.sort_values(["params_m", "model"])
    if ordered.duplicated(["model", "task"]).any():
        load = "batch_size"
        if workloads is not None and "concurrency" in workloads and workloads["concurrency"].notna().any():
            load = "concurrency"
            loads = workloads[["workload_id", "concurrency"]].assign(
                concurrency=lambda w: pd.to_numeric(w["concurrency"], errors="coerce"))
            ordered = ordered.drop(columns=["concurrency"], errors="ignore").merge(loads, on="workload_id", how="left")
        ordered = ordered.assign(row=ordered["model"] + " / " + ordered["task"])
        index, columns, agg, xlabel, note = "row", load, "median", LOAD_LABELS[load], ", median when several"
    else:
        index, columns, agg, xlabel, note = "model", "task", "first", "task", ""
    grid = ordered.pivot_table(index=index, columns=columns, values="opt_level", aggfunc=agg)
    grid = grid.reindex(ordered[index].drop_duplicates())
    grid.columns = [f"{c:g}" if isinstance(c, float) else c for c in grid.columns]  # batch size 8, not 8.0
    chunks = [grid.iloc[:, i:i + HEATMAP_WRAP] for i in range(0, max(grid.shape[1], 1), HEATMAP_WRAP)]
    label_in = 0.07 * max(len(str(r)) for r in grid.index) if len(grid.index) else 1.0
    width = 1.2 + label_in + 0.9 * min(grid.shape[1], HEATMAP_WRAP) + 1.2
    heights = [0.5 * c.shape[0] + 0.7 for c in chunks]
    fig, axes = plt.subplots(len(chunks), 1, figsize=(width, 0.8 + sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    lo, hi = float(np.nanmin(grid.to_numpy(float))), float(np.nanmax(grid.to_numpy(float)))
    for ax, chunk in zip(axes[:, 0], chunks, strict=True):
        annot = (chunk.apply(lambda col: col.map(lambda v: "" if pd.isna(v) else level_text(v, knob, format_level)))
                 if joint(knob, format_level) else True)
        sns.heatmap(chunk, annot=annot, fmt="" if annot is not True else "g", cmap="viridis", vmin=lo, vmax=hi, ax=ax,
                    cbar=False, annot_kws={"fontsize": 6} if annot is not True else None)
        ax.tick_params(axis="y", labelrotation=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("model (by size)" if index == "model" else "")
    fig = _finish(fig, f"Energy-optimal {knob.label}", simulated)
    unit = "setting index; the cells name its clocks" if joint(knob, format_level) else knob.unit
    fig.colorbar(axes[0, 0].collections[0], ax=axes[:, 0].tolist(), label=f"optimal level ({unit}){note}",
                 fraction=0.03 if len(chunks) > 1 else 0.08)
    return fig


def feature_relations(long: pd.DataFrame, simulated: bool, knob: Knob | None = None, note: str = "",
                      format_level: Callable[[float], str] | None = None) -> Figure:
    """Optimal level vs each feature (long form: feature, value, opt_level, model_type); with
    no feature at all, a figure saying ``note``."""
    sns.set_theme(style="whitegrid", context="paper")
    if long.empty:
        return _note(note or "no feature to show", "What the optimal level depends on", simulated)
    long = long.assign(model_type=long["model_type"].fillna("unknown"))  # seaborn drops a NaN hue
    g = sns.relplot(data=long, x="value", y="opt_level", col="feature", hue="model_type", col_wrap=3,
                    height=2.4, aspect=1.1, facet_kws={"sharex": False}, s=25)
    g.set_axis_labels("feature value", f"optimal level ({(knob or get_knob()).unit})")
    if joint(knob or get_knob(), format_level):
        for ax in g.axes.flat:
            level_axis(ax, knob, format_level, axis="y")
    g.set_titles("{col_name}")
    return _finish_grid(g, "What the optimal level depends on", simulated)


def cv_comparison(long: pd.DataFrame, simulated: bool, note: str = "") -> Figure:
    """Bars per model: accuracy, within-one accuracy and regret, LOOCV vs leave-one-model-out.

    ``long``: model, scheme, metric, value (see :func:`dvfslab.evaluation.selection.comparison`);
    empty (no cross-validation), a figure saying ``note``.
    """
    sns.set_theme(style="whitegrid", context="paper")
    if long.empty:
        return _note(note or "no cross-validation", "Model selection", simulated)
    g = sns.catplot(data=long, x="value", y="model", hue="scheme", col="metric", kind="bar", orient="h",
                    height=2.8, aspect=1.0, sharex=False, errorbar=None)
    for metric, ax in g.axes_dict.items():
        ax.set_title(METRIC_LABELS.get(metric, metric))
        ax.set_xlabel("")
    return _finish_grid(g, "Model selection: held-out accuracy and energy regret", simulated)


def tree_diagram(tree: Mapping[str, Any], simulated: bool, name: str = "decision tree",
                 knob: Knob | None = None, format_level: Callable[[float], str] | None = None) -> Figure:
    """Draw a dvfslab tree dict (splits as boxes, leaves as levels in the knob's unit, a joint
    setting's leaves as its clocks in MHz; left = condition true)."""
    knob = knob or get_knob()
    nodes: Sequence[Mapping[str, Any]] = tree["nodes"]
    pos: dict[int, tuple[float, int]] = {}
    leaves = [0]

    def place(i: int, depth: int) -> float:
        node = nodes[i]
        if "level" in node:
            x = float(leaves[0])
            leaves[0] += 1
        else:
            x = (place(node["left"], depth + 1) + place(node["right"], depth + 1)) / 2
        pos[i] = (x, depth)
        return x

    place(0, 0)
    depth = max(d for _, d in pos.values()) + 1
    fig, ax = plt.subplots(figsize=(max(4.0, 1.7 * leaves[0]), 1.2 + 1.1 * depth))
    for i, node in enumerate(nodes):
        if i not in pos:
            continue
        x, d = pos[i]
        if "level" in node:
            text, color = level_text(node["level"], knob, format_level), "#d9f0d3"
        else:
            text, color = f"{node['feature']}\n<= {node['threshold']:.4g}", "#e8eef7"
            for child, lab in ((node["left"], "yes"), (node["right"], "no")):
                cx, cd = pos[child]
                ax.plot([x, cx], [-d, -cd], color="grey", lw=1, zorder=1)
                ax.text((x + cx) / 2, -(d + cd) / 2, lab, fontsize=7, color="grey", ha="center")
        ax.text(x, -d, text, ha="center", va="center", fontsize=8, zorder=2,
                bbox={"boxstyle": "round", "fc": color, "ec": "grey"})
    ax.set_xlim(-0.7, leaves[0] - 0.3)
    ax.set_ylim(-depth + 0.4, 0.6)
    ax.axis("off")
    return _finish(fig, name, simulated)

