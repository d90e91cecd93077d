"""The digital twin of the Jetson: a simulated board on a virtual clock. Everything it yields is
simulated, not measured.

* :mod:`dvfslab.sim.profiles` — board profiles: every parameter (sources in docs/calibration.md),
  the AGX Orin's power modes from a real nvpmodel dump and its fitted parameters from the
  checked-in calibration file;
* :mod:`dvfslab.sim.readings` — the real rail readings (quoted lines) the twin is fitted to and
  checked against, with their stated uncertainty;
* :mod:`dvfslab.sim.calibration` — the weighted least-squares fit (``dvfslab calibrate``), the
  assumed parameters' ranges and the ensemble's parameter draws;
* :mod:`dvfslab.sim.spec` — one workload by its totals in any power mode (``simulate --workload``);
* :mod:`dvfslab.sim.model` — physics: step time, memory clock, rail power (pure functions);
* :mod:`dvfslab.sim.phases` — evaluation and checkpoints inside a run's measured window;
* :mod:`dvfslab.sim.explain` — energy per step by term (``dvfslab simulate --explain``);
* :mod:`dvfslab.sim.validation` — the twin against the validation readings, leave-one-out;
* :mod:`dvfslab.sim.board` — :class:`SimBoard`, which steps a profile through training and idle
  on a :class:`~dvfslab.sim.clock.VirtualClock` with a :class:`~dvfslab.sim.thermal.ThermalModel`
  and the emulated ``nvhost_podgov`` (:mod:`dvfslab.sim.podgov`);
* :mod:`dvfslab.sim.backend` — :func:`open_backend`: the board behind the :mod:`dvfslab.hw.base`
  protocols (``get_backend("sim")``);

The twin as a sweep executor (:class:`~dvfslab.sweep.twin.SimExecutor`) and ``dvfslab simulate``
(:mod:`dvfslab.sweep.simulate`) run sweeps, so they live in the sweep room, above this one.
Parameters and checks: docs/calibration.md.
"""

from __future__ import annotations

from dvfslab.sim.backend import SimBackend, open_backend
from dvfslab.sim.board import SimBoard, TickStates, TrainResult
from dvfslab.sim.model import PROFILES, BoardProfile, SimWorkload, get_profile

__all__ = [
    "PROFILES", "BoardProfile", "SimBackend", "SimBoard", "SimWorkload", "TickStates", "TrainResult",
    "get_profile", "open_backend",
]
