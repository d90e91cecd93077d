"""The interactive lab: a live power panel, a GPU frequency dial and a sweep panel (ipywidgets).

Each panel keeps its logic in plain methods that tests call directly
(:meth:`LivePowerPanel.refresh`, :meth:`FrequencyDial.lock`, :meth:`SweepPanel.add_run`); the
buttons and the refresh thread only call those methods. Plots are matplotlib figures rendered
to PNG into an ``ipywidgets.Image``, so a notebook executed headless (papermill,
``store_widget_state``) keeps the last frame in its saved widget state.

On the simulated board nothing moves by itself: the board lives on a virtual clock, and each
refresh of the live panel advances it by a background training load (:class:`SimLoad`). On a
Jetson the :class:`~dvfslab.measure.sampler.PowerSampler` thread samples in real time and a refresh only
redraws. Every title and readout of the twin says "simulated". Used by
``notebooks/00_live_lab.ipynb``; see docs/live_lab.md.
"""

from __future__ import annotations

from dvfslab.lab.common import SIM_LABEL, board_label, figure_png, is_simulated
from dvfslab.lab.dial import FrequencyDial
from dvfslab.lab.live import (
    LivePowerPanel,
    Readout,
    SimLoad,
    format_readout,
    live_panel,
    plot_live,
    read_readout,
)
from dvfslab.lab.sweep_panel import (
    SweepPanel,
    default_executor,
    lab_summary,
    plot_energy_curve,
)

__all__ = [
    "SIM_LABEL", "FrequencyDial", "LivePowerPanel", "Readout", "SimLoad",
    "SweepPanel", "board_label", "default_executor", "figure_png", "format_readout",
    "is_simulated", "lab_summary", "live_panel", "plot_energy_curve", "plot_live", "read_readout",
]
