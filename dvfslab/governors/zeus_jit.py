"""``zeus-sim``: Zeus's trace simulator's charge — the first unit split evenly over every level,
then the least measured energy for the rest of the job.

This is *not* Zeus's live optimizer (that is ``zeus``, :mod:`dvfslab.governors.zeus`: a wait,
10 warm-up + 40 profiled iterations per limit, Zeus's cost). It was registered as ``zeus-jit``
before issue 28; the name says now what it is: the simulator's rule. The module keeps its name
(``ZeusJitGovernor`` stays importable as an alias of :class:`ZeusSimGovernor`).

Zeus (You, Chung and Chowdhury, NSDI 2023; github.com/ml-energy/zeus, Apache-2.0) profiles the
power limits inside the job's first epoch. Its trace-driven simulator charges exactly this
(``zeus/_legacy/simulate.py``, ``_run_job`` with ``profile_power``): the first epoch is split
evenly into ``len(power_limits)`` slices, one per limit, so it costs ``(1/N) e_1 + ... + (1/N)
e_N`` (the mean of every limit's epoch energy, and the same for time); every later epoch runs at
the chosen limit. The choice (``_profile_power_limit``; live, ``GlobalPowerLimitOptimizer`` in
``zeus/optimizer/power_limit.py`` with the ``Energy`` selector) is the limit with the least
measured cost, the limits profiled from the highest to the lowest and Python's ``min`` keeping
the first of equal ones: a tie goes to the **higher** level. Zeus's default cost blends energy
and time (``ZeusCost``, ``eta_knob``); this governor's is its ``objective`` (least energy by
default; any selector of :mod:`dvfslab.governors.objective`), the time taken relative to the
highest level's (Zeus's ``MaxSlowdownConstraint`` compares with the highest limit's time likewise).

Here a *unit* is the dataset's (:mod:`dvfslab.analysis.steps`): an epoch in the Zeus traces, so
``units=1`` is Zeus's rule exactly; an optimizer step in a dvfslab sweep, where one unit split
over 11 clocks is a very short probe (Zeus's live optimizer spends 10 warm-up + 40 profiled
iterations per limit: ``units = 50 * len(levels)`` reproduces that). Live, the training callback
feeds one optimizer step at a time: each level gets at least one whole step.

**Complexity**: as ``zeus``: O(1) per decision, O(L) for the final choice, L probes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dvfslab.governors.base import GovernorTags, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Selector
from dvfslab.governors.session import WindowSession


class ZeusSimGovernor(ProbingGovernor):
    """The first ``units`` units of the job split evenly over every level (highest first), then the
    objective's pick on what it measured (least energy by default; ties: the higher level)."""

    name = "zeus-sim"
    summary = ("Zeus's trace simulator: the first unit (epoch) split evenly over every level, then the least "
               "measured energy")
    tags = GovernorTags(needs_training=False, probes=True, saves=("units",))

    def __init__(self, units: float = 1.0, objective: Selector = LEAST_ENERGY):
        self.units = units
        self.objective = objective

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model=None) -> ZeusSimSession:
        return ZeusSimSession(self, levels)


class ZeusSimSession(WindowSession):
    """One job under Zeus's JIT profiler: each level, highest first, runs ``units / L`` units (live:
    until it has run at least that much, one step at a time), then the choice holds."""

    def __init__(self, governor: ZeusSimGovernor, level_table: Sequence[float]):
        if not float(governor.units) > 0:
            raise GovernorError(f"zeus-sim: units must be > 0, got {governor.units!r}")
        self.objective = governor.objective
        self.schedule = sorted((float(f) for f in level_table), reverse=True)
        if not self.schedule:
            raise GovernorError("zeus-sim: no level to probe")
        self.share = float(governor.units) / len(self.schedule)
        self._begin()
        self.profiling_steps = len(self.schedule)
        self._units: list[float] = []
        self._energy: list[float] = []
        self._time: list[float] = []
        self._read(self.schedule[0], self.share)

    def _counted(self) -> None:
        """``profiling_steps`` is the levels profiled (fixed)."""

    def _window_read(self, units: float, energy_j: float, time_s: float) -> None:
        self._units.append(units)
        self._energy.append(energy_j)
        self._time.append(time_s)
        at = len(self._units)
        if at < len(self.schedule):
            self._read(self.schedule[at], self.share)
        else:
            self._hold(self._choose())

    def _choose(self) -> float | None:
        energy = [e / u for e, u in zip(self._energy, self._units, strict=True)]
        time = [t / u for t, u in zip(self._time, self._units, strict=True)]
        # the highest level, profiled first, is the baseline's stand-in; ties: the higher level
        return self.objective.select_measured(self.schedule, energy, time, ties_high=True)


#: the name before issue 28 (``zeus-jit``): the same class
ZeusJitGovernor = ZeusSimGovernor
ZeusJitSession = ZeusSimSession
