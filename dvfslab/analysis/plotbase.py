"""What every figure of :mod:`dvfslab.analysis.plots` and :mod:`dvfslab.analysis.govplots` shares:
the metric labels, the size-group colours, the SIMULATED title and the finishing touches."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
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


def _note(text: str, heading: str, simulated: bool) -> Figure:
    """A figure that only says why there is nothing to draw (wrapped to its width)."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, textwrap.fill(text, 80), ha="center", va="center", fontsize=8)
    ax.axis("off")
    return _finish(fig, heading, simulated)
