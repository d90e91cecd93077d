"""``zeus``: Zeus's live power-limit optimizer — wait, then per level warm-up + profile, then the selector's pick.

Zeus (You, Chung and Chowdhury, NSDI 2023; github.com/ml-energy/zeus, Apache-2.0) optimizes a
running job with ``GlobalPowerLimitOptimizer`` (``zeus/optimizer/power_limit.py`` at commit
75a8b93). Its state machine, as the source has it:

* the power limits are ``range(max, min - 1, -pl_step)``: from the highest down in strides of
  ``pl_step = 25`` W (lines 226, 263, 284), the limit set to the highest before the job starts
  (line 310);
* ``Ready(steps=wait_steps + 1)`` (line 308): the first ``wait_steps = 1`` step runs at the highest
  limit and is not measured (lines 362-373); then for each limit in that order ``Warmup`` for
  ``warmup_steps = 10`` steps (lines 375-388) and ``Profiling`` for ``profile_steps = 40`` steps,
  whose energy and time are measured (lines 386-407); the next limit's warm-up starts on the
  step after (lines 419-428);
* after the last limit, ``Done``: the ``optimum_selector`` picks the limit (lines 412-416, 447-451)
  — by default ``ZeusCost(eta_knob=0.5)`` (lines 257-260), whose ``min`` over a dict filled from
  the highest limit down keeps the first of equal costs: a tie goes to the **higher** limit.

Here, on any knob:

* **Levels.** On a power-limit knob the levels are Zeus's: the targets ``max - k * pl_step_w``
  (``k = 0, 1, ...``, down to the table's lowest), each snapped to the nearest level of the
  job's table (ties: the higher), a level taken once. On a clock knob there is no watt stride:
  every ``level_stride``-th level from the highest down (default 1: every clock; a Jetson has
  7-14 GPU clocks where a V100 has 7 limits 25 W apart).
* **Windows.** Without a probe model a level runs ``warmup_steps + profile_steps`` units (a unit
  is an optimizer step, live and in a dvfslab sweep) and the wait ``wait_steps`` units at the
  highest level first. With a probe model (the replay always passes one: on the Zeus and
  Perseus traces its window is these 10 + 40 iterations in epochs) a level runs the model's
  window ``model.window(level)``, and the wait is ``wait_steps / (warmup_steps + profile_steps)``
  of the highest level's window. The wait runs at the highest level, which is also the first
  profiled: it is charged as part of that level's probe (``1 + 10 + 40`` steps there), and it
  reads as one more warm-up step (a replay has no start-up transient to exclude).
* **Reading.** Each level's energy and time per unit of its probe; the selector is the
  ``objective`` (default ``ZeusCost(eta=0.5)``, Zeus's; a pipeline run passes its own, the least
  energy by default, so that every governor's regret is on the same objective), with MAXPOWER
  the highest limit on a power-limit knob (Zeus's) and the highest average power measured on a
  clock knob; the slowdown is against the highest level's time (the baseline's stand-in).

**Complexity**: each decision is the next limit of the schedule, O(1), and the final choice
selects over the levels measured, O(L); but it *probes every level* (L probes): on a joint
grid of thousands of settings its probing, not its arithmetic, is what does not scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.data.knobs import DEFAULT_KNOB
from dvfslab.governors.base import GovernorTags, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import Selector, ZeusCost
from dvfslab.governors.session import EPS, WindowSession

if TYPE_CHECKING:
    from dvfslab.governors.probemodel import ProbeModel

#: Zeus's default selector (``GlobalPowerLimitOptimizer``: ``ZeusCost(eta_knob=0.5)``)
ZEUS_DEFAULT_OBJECTIVE = ZeusCost(eta=0.5)
POWER_KNOB = "power_limit_w"


def zeus_levels(table: Sequence[float], knob: str, pl_step_w: float = 25.0, level_stride: int = 1) -> list[float]:
    """The levels Zeus profiles, in its order (highest first; module doc)."""
    levels = sorted({float(f) for f in table}, reverse=True)
    if not levels:
        raise GovernorError("zeus: no level to profile")
    if knob != POWER_KNOB:
        if int(level_stride) < 1:
            raise GovernorError(f"zeus: level_stride must be >= 1, got {level_stride!r}")
        return levels[::int(level_stride)]
    if not float(pl_step_w) > 0:
        raise GovernorError(f"zeus: pl_step_w must be > 0, got {pl_step_w!r}")
    out: list[float] = []
    top, low, k = levels[0], levels[-1], 0
    while top - k * float(pl_step_w) >= low - 1e-9:
        target = top - k * float(pl_step_w)
        near = min(levels, key=lambda f: (abs(f - target), -f))  # ties: the higher
        if near not in out:
            out.append(near)
        k += 1
    return out


class ZeusGovernor(ProbingGovernor):
    """Zeus's ``GlobalPowerLimitOptimizer`` (module doc): ``wait_steps`` at the highest level, then
    per level ``warmup_steps`` + ``profile_steps`` (or the probe model's window), then the
    ``objective``'s pick, held for the rest of the job."""

    name = "zeus"
    summary = ("Zeus's live optimizer: wait 1 step, then per level from the highest down 10 warm-up + 40 profiled "
               "steps, then the objective's pick (Zeus's default: eta = 0.5)")
    tags = GovernorTags(needs_training=False, probes=True,
                        saves=("wait_steps", "warmup_steps", "profile_steps", "pl_step_w", "level_stride"))

    def __init__(self, wait_steps: int = 1, warmup_steps: int = 10, profile_steps: int = 40, pl_step_w: float = 25.0,
                 level_stride: int = 1, objective: Selector = ZEUS_DEFAULT_OBJECTIVE):
        self.wait_steps = wait_steps
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step_w = pl_step_w
        self.level_stride = level_stride
        self.objective = objective

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model: ProbeModel | None = None
              ) -> ZeusSession:
        """A session on a job that can run ``levels``; ``model``: the probe model (None: windows in steps)."""
        return ZeusSession(self, levels, getattr(self, "knob_", DEFAULT_KNOB), model)


class ZeusSession(WindowSession):
    """One job under Zeus's optimizer: each level of :func:`zeus_levels` runs its window (the first
    also the wait), fed whole (a replay) or in pieces (live: until it has run its units); with the
    job's epoch length known, a window cut by an epoch end starts again (module doc)."""

    restarts_at_epoch_end = True
    completes_at_epoch_end = False

    def __init__(self, governor: ZeusGovernor, table: Sequence[float], knob: str, model: ProbeModel | None):
        g = governor
        for what, value, least in (("wait_steps", g.wait_steps, 0), ("warmup_steps", g.warmup_steps, 0),
                                   ("profile_steps", g.profile_steps, 1)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= least):
                raise GovernorError(f"zeus: {what} must be a number >= {least}, got {value!r}")
        self.objective = g.objective
        self.schedule = zeus_levels(table, knob, g.pl_step_w, g.level_stride)
        self.knob = knob
        per_level = float(g.warmup_steps) + float(g.profile_steps)
        if model is None:
            self.level_windows = [per_level] * len(self.schedule)
            wait = float(g.wait_steps)
        else:
            self.level_windows = [float(model.window(f)) for f in self.schedule]
            wait = float(g.wait_steps) / per_level * self.level_windows[0]
        #: one step (iteration) in the job's units: a level's window over its warm-up + profiled steps
        self.step_units = [w / per_level for w in self.level_windows] if per_level > 0 else [0.0] * len(self.schedule)
        self.windows = list(self.level_windows)
        self.windows[0] += wait  # the wait runs at the highest level, the first profiled
        self._begin(model)
        self.profiling_steps = len(self.schedule)
        self.restarts = 0
        self._measured: list[tuple[float, float, float]] = []
        self._start_level(0)

    def _counted(self) -> None:
        """``profiling_steps`` is the levels profiled (fixed)."""

    def _start_level(self, at: int) -> None:
        """Read level ``at``, or — its window and the step that closes it longer than an epoch,
        which Zeus restarts at every epoch end — hold it: its profiling never completes."""
        self._at = at
        level = self.schedule[at]
        need = self.level_windows[at] + self.step_units[at]
        if self.epoch_units is not None and need > self.epoch_units + EPS:
            self._hold(level, f"zeus: the profiling window of {level:g} and the step that closes it ({need:.4g} units) "
                              f"do not fit in an epoch ({self.epoch_units:.4g} units); Zeus restarts the window at every "
                              f"epoch end, so it never completes and {level:g} is held for the rest of the job")
            return
        self._read(level, self.windows[at])

    def _epoch_end(self) -> None:
        """Zeus's ``on_epoch_end``: the warm-up / profiling of the level is cancelled and starts
        again (warm-up first) on the next epoch's first step; the wait is not run again."""
        self.restarts += 1
        self._read(self.schedule[self._at], self.level_windows[self._at])

    def _window_read(self, units: float, energy_j: float, time_s: float) -> None:
        self._measured.append((self.schedule[self._at], energy_j / units, time_s / units))
        if self._at + 1 < len(self.schedule):
            self._start_level(self._at + 1)
        else:
            self._at += 1
            note = (f"zeus: {self.restarts} profiling window(s) restarted at an epoch end" if self.restarts else "")
            self._hold(self._choose(), note)

    def measurements(self) -> list[tuple[float, float, float]]:
        """``(level, energy_j, time_s)`` per unit, in profiling order (Zeus's ``PowerLimitMeasurement``)."""
        return list(self._measured)

    def _choose(self) -> float | None:
        m = self.measurements()
        max_power_w = max(self.schedule) if self.knob == POWER_KNOB else None
        return self.objective.select_measured([x[0] for x in m], [x[1] for x in m], [x[2] for x in m],
                                              max_power_w=max_power_w, ties_high=True)
