"""Seaborn figures from tidy frames: no I/O and no analysis here, only drawing.

Every function returns a :class:`matplotlib.figure.Figure` and takes ``simulated``: when true,
the title says the data is simulated (the project's rule for data from the simulated board).
The frames come from :mod:`dvfslab.features`, :mod:`dvfslab.selection` and
:mod:`dvfslab.evaluate`; the notebooks save the figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

METRIC_LABELS = {"time_rel": "time / baseline", "power_rel": "power / baseline", "energy_rel": "energy / baseline",
                 "saving_pct": "energy saving vs baseline (%)", "slowdown_pct": "slowdown vs baseline (%)",
                 "regret_pct": "regret (% of baseline energy)", "accuracy": "accuracy",
                 "within_one": "accuracy within one level"}
SIZE_PALETTE = {"> 70M": "#d62728", "<= 70M": "#2c7fb8", "unknown": "#7f7f7f"}


def title(text: str, simulated: bool) -> str:
    """``text``, marked as simulated when it is."""
    return f"{text} — SIMULATED data" if simulated else text


def _finish(fig: Figure, text: str, simulated: bool) -> Figure:
    fig.suptitle(title(text, simulated), fontsize=12)
    fig.tight_layout()
    return fig


def _finish_grid(g: sns.FacetGrid, text: str, simulated: bool) -> Figure:
    """Like :func:`_finish` for seaborn grids (keeps room for their legend)."""
    g.figure.suptitle(title(text, simulated), fontsize=12)
    g.tight_layout()
    return g.figure


def sweep_curves(rel: pd.DataFrame, simulated: bool) -> Figure:
    """Time, power and energy relative to the baseline vs GPU level: one panel per metric,
    one line per workload, coloured by model (ordered by size).

    ``rel``: long form with columns workload_id, model, params_m, freq_mhz, metric, value (see
    :func:`dvfslab.features.relative_levels` and :func:`dvfslab.features.long_form`).
    """
    sns.set_theme(style="whitegrid", context="paper")
    order = rel.sort_values(["params_m", "model"])["model"].drop_duplicates().tolist()
    data = rel.assign(metric=rel["metric"].map(lambda m: METRIC_LABELS.get(m, m)))
    g = sns.relplot(data=data, x="freq_mhz", y="value", col="metric", hue="model", hue_order=order,
                    units="workload_id", estimator=None, kind="line", palette="viridis", lw=1, alpha=0.8,
                    height=3.0, aspect=1.05, facet_kws={"sharey": False})
    g.set_axis_labels("GPU level (MHz)", "relative to baseline (1 = baseline)")
    g.set_titles("{col_name}")
    for ax in g.axes.flat:
        ax.axhline(1.0, color="black", lw=0.7, ls=":")
    return _finish_grid(g, "Time, power and energy vs GPU frequency, one line per workload", simulated)


def u_curves(levels: pd.DataFrame, optima: pd.DataFrame, simulated: bool, col_wrap: int = 4) -> Figure:
    """Energy (kJ) vs GPU level per workload, one panel per model, the optimum starred.

    ``levels``: model, task, freq_mhz, energy_j; ``optima``: model, task, opt_freq_mhz, opt_energy_j.
    """
    sns.set_theme(style="whitegrid", context="paper")
    data = levels.assign(energy_kj=levels["energy_j"] / 1e3)
    order = optima.sort_values(["params_m", "model"])["model"].drop_duplicates().tolist()
    g = sns.relplot(data=data, x="freq_mhz", y="energy_kj", col="model", col_order=order, hue="task", kind="line",
                    marker="o", markersize=3, col_wrap=min(col_wrap, len(order)), height=2.3, aspect=1.2,
                    facet_kws={"sharey": False})
    for model, ax in g.axes_dict.items():
        opt = optima[optima["model"] == model]
        ax.scatter(opt["opt_freq_mhz"], opt["opt_energy_j"] / 1e3, marker="*", s=90, color="black", zorder=5,
                   label="least energy")
    g.set_axis_labels("GPU level (MHz)", "energy per run (kJ)")
    g.set_titles("{col_name}")
    return _finish_grid(g, "Energy U-curves, least-energy level starred", simulated)


def optimal_heatmap(features: pd.DataFrame, simulated: bool) -> Figure:
    """Energy-optimal level (MHz) by model x task; models ordered by parameter count."""
    sns.set_theme(style="white", context="paper")
    order = features.sort_values(["params_m", "model"])["model"].drop_duplicates()
    grid = features.pivot_table(index="model", columns="task", values="opt_freq_mhz", aggfunc="first").reindex(order)
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * grid.shape[1], 1.2 + 0.4 * grid.shape[0]))
    sns.heatmap(grid, annot=True, fmt="g", cmap="viridis", cbar_kws={"label": "optimal level (MHz)"}, ax=ax)
    ax.set_xlabel("task")
    ax.set_ylabel("model (by size)")
    return _finish(fig, "Energy-optimal GPU level", simulated)


def feature_relations(long: pd.DataFrame, simulated: bool) -> Figure:
    """Optimal level vs each feature (long form: feature, value, opt_freq_mhz, model_type)."""
    sns.set_theme(style="whitegrid", context="paper")
    g = sns.relplot(data=long, x="value", y="opt_freq_mhz", col="feature", hue="model_type", col_wrap=3,
                    height=2.4, aspect=1.1, facet_kws={"sharex": False}, s=25)
    g.set_axis_labels("feature value", "optimal level (MHz)")
    g.set_titles("{col_name}")
    return _finish_grid(g, "What the optimal level depends on", simulated)


def cv_comparison(long: pd.DataFrame, simulated: bool) -> Figure:
    """Bars per model: accuracy, within-one accuracy and regret, LOOCV vs leave-one-model-out.

    ``long``: model, scheme, metric, value (see :func:`dvfslab.selection.comparison`).
    """
    sns.set_theme(style="whitegrid", context="paper")
    g = sns.catplot(data=long, x="value", y="model", hue="scheme", col="metric", kind="bar", orient="h",
                    height=2.8, aspect=1.0, sharex=False, errorbar=None)
    for metric, ax in g.axes_dict.items():
        ax.set_title(METRIC_LABELS.get(metric, metric))
        ax.set_xlabel("")
    return _finish_grid(g, "Model selection: held-out accuracy and energy regret", simulated)


def tree_diagram(tree: Mapping[str, Any], simulated: bool, name: str = "decision tree") -> Figure:
    """Draw a dvfslab tree dict (splits as boxes, leaves as levels; left = condition true)."""
    nodes: Sequence[Mapping[str, Any]] = tree["nodes"]
    pos: dict[int, tuple[float, int]] = {}
    leaves = [0]

    def place(i: int, depth: int) -> float:
        node = nodes[i]
        if "freq_mhz" in node:
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
        if "freq_mhz" in node:
            text, color = f"{node['freq_mhz']:g} MHz", "#d9f0d3"
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


def savings_bars(per_workload: pd.DataFrame, simulated: bool) -> Figure:
    """Mean energy saving and slowdown per policy (bars) with each workload as a dot.

    ``per_workload``: long form with policy, metric (saving_pct | slowdown_pct), value,
    size_group.
    """
    sns.set_theme(style="whitegrid", context="paper")
    g = sns.catplot(data=per_workload, x="policy", y="value", col="metric", kind="bar", errorbar=None,
                    color="#9ecae1", height=3.2, aspect=1.2, sharey=False)
    g.map_dataframe(sns.stripplot, x="policy", y="value", hue="size_group", dodge=False, size=3, alpha=0.8,
                    palette=SIZE_PALETTE)
    for metric, ax in g.axes_dict.items():
        ax.set_title(METRIC_LABELS.get(metric, metric))
        ax.set_ylabel("%")
        ax.axhline(0.0, color="black", lw=0.8)
    g.add_legend(title="workload size")
    return _finish_grid(g, "Governors on the evaluation workloads: mean (bar) and per workload (dots)", simulated)


def saving_vs_slowdown(summary: pd.DataFrame, simulated: bool) -> Figure:
    """Mean saving vs mean slowdown, one point per policy (and size group when given)."""
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    hue = "size_group" if "size_group" in summary else None
    sns.scatterplot(data=summary, x="mean_slowdown_pct", y="mean_saving_pct", hue=hue, style="policy", s=70, ax=ax,
                    palette=SIZE_PALETTE if hue else None)
    ax.set_xlabel("mean slowdown vs baseline (%)")
    ax.set_ylabel("mean energy saving vs baseline (%)")
    ax.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return _finish(fig, "Energy saved vs time lost", simulated)
