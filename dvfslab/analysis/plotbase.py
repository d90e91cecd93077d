"""What every figure of :mod:`dvfslab.analysis.plots` and :mod:`dvfslab.analysis.govplots` shares:
the metric labels, the size-group colours, the SIMULATED title and the finishing touches."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from dvfslab.data.knobs import SETTING, Knob

#: ticks on an axis of joint settings (each tick names a setting's clocks, several lines)
SETTING_TICKS = 4

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


def joint(knob: Knob, format_level: Callable[[float], str] | None) -> bool:
    """Whether a figure names its levels as joint settings: the knob is :data:`SETTING` (a level
    is a setting's index) and ``format_level`` (``Sweep.format_level``) names them."""
    return format_level is not None and knob.name == SETTING


def level_text(level: float, knob: Knob, format_level: Callable[[float], str] | None, sep: str = "\n",
               unit: bool = True) -> str:
    """A level as a figure writes it: a joint setting's clocks one per line (``"GPU 714\nEMC 2133
    MHz"``: ``Sweep.format_level``'s words; without the unit, for a tick on an axis that names it:
    ``"GPU 714\nEMC 2133"``), else the knob's (``"714 MHz"``)."""
    if not joint(knob, format_level):
        return knob.format(float(level))
    parts = [p.removesuffix(" MHz") for p in format_level(float(level)).split(" × ")]
    return sep.join(parts) + (" MHz" if unit else "")


def level_axis(ax, knob: Knob, format_level: Callable[[float], str] | None = None, axis: str = "x") -> None:
    """Label an axis of levels from the knob (``"GPU level (MHz)"``); on a joint dataset (a level is
    a setting's index) at most :data:`SETTING_TICKS` whole-index ticks, each naming its setting's
    clocks in MHz (:func:`level_text`) instead of the index."""
    if not joint(knob, format_level):
        (ax.set_xlabel if axis == "x" else ax.set_ylabel)(knob.axis_label)
        return

    def name(value: float, _pos: int) -> str:
        index = round(value)
        if abs(value - index) > 1e-9 or format_level(index) == knob.format(index):  # no setting's index
            return ""
        return level_text(index, knob, format_level, unit=False)

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(MaxNLocator(nbins=SETTING_TICKS, integer=True))
    target.set_major_formatter(FuncFormatter(name))
    ax.tick_params(axis=axis, labelsize=6)
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)("joint setting (MHz)")
