"""Online governor: probe a few levels at the start of the run, fit the U-curve, hold the best.

No training data, no features: the governor learns the job it is running. Design (chosen on
principle, then evaluated; docs/governors.md):

* **Probe levels**: ``n_levels`` (default 5) levels spread evenly over the table, both ends
  included (306, 510, 816, 1122, 1300.5 MHz on the Orin). The minimum can be anywhere; an even
  spread brackets it, and the highest level doubles as the stand-in for the baseline's speed
  (MAXN's dynamic clock runs at or below it under load).
* **Schedule, coarse to fine**: ``warmup_steps`` (default 1) step, then ``coarse_steps``
  (default 2) steps at each probe level, round-robin (1, 2, ..., 5, 1, 2, ...), highest
  first, so that slow drifts (warm-up, temperature) spread over the levels instead of
  biasing the last ones; a first fit; then ``fine_steps`` (default 5) steps at each of the
  ``fine_levels`` (default 3) table levels around the coarse minimum, round-robin. In all
  1 + 5 x 2 + 3 x 5 = 26 profiling steps. The spread levels locate the minimum, the fine
  phase measures it well; most probing steps run near the optimum, where they cost little.
* **Fit** (:func:`dvfslab.governors.ucurve.fit_u_curve`): ``E(l) = P(l) T(l)`` with
  ``T(l) = a + b / l``; the final choice is the objective's among the fine phase's levels (a
  trust region: levels measured with two noisy steps are never held on the strength of an
  extrapolation). The objective's slowdown is against the fitted time at the highest probed level.
  ``T = a + b / l`` is the law of a *clock*; a GPU power limit caps power instead (the time at a
  limit is flat above the card's need and climbs steeply below it: a 100-300 W sweep of the
  Zeus A40 traces goes from 3x to 1.0x between 100 and 175 W). On such a knob (``model="auto"``
  with a power-limit dataset, or ``model="measured"``) nothing is fitted: each phase takes the
  objective's choice on the probed levels' measured means (:func:`~dvfslab.governors.ucurve.measured_curve`).
* **Charged**: the probing steps run at the probed levels; the :class:`~dvfslab.governors.base.Decision`
  carries them and the replay counts their energy and time over the whole job.
* **Any knob, any table**: the spread and the neighbours are table indices, so the same design
  runs on 6-15 power limits, 11-15 Jetson clocks or 60 datacenter clocks (a table of fewer than
  3 levels cannot be fitted: the governor is left out there, with that reason).
* **Probe size** (``step_units``): a probing step is one unit of the job when the dataset's unit
  is a step (an optimizer step, one inference); where the unit is a whole run — an epoch of an
  imported trace (the Zeus traces) — 26 epochs of probing would dwarf most jobs, so the whole
  profile takes one unit, each probing step ``1/26`` of it (the budget of Zeus's JIT profiler:
  one epoch). ``fit`` reads which from the dataset; a number sets it; live, a step is a step.

:class:`OnlineSession` is the live object (a training callback feeds it one step at a time:
:class:`dvfslab.harness.online_callback.OnlineDvfsCallback`); in a replay the governor drives it
with a probe that reads the dataset's recorded steps.

**Complexity**: a step is O(1); at the end of each phase it fits the U-curve to the steps probed
and selects over the ``L`` levels, O(n + L) (``n`` probed steps): linear in the settings. It refuses
a joint setting (its U-curve runs along one knob).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.data.knobs import DEFAULT_KNOB
from dvfslab.governors.base import GovernorTags, ProbeSession, ProbeStep, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Objective

if TYPE_CHECKING:
    import numpy as np

    from dvfslab.analysis.training import TrainingData


def spread_levels(level_table: Sequence[float], n: int) -> list[float]:
    """``n`` levels evenly spread over the table's indices, both ends included, ascending."""
    import numpy as np  # here, not at the top: loading a governor imports no numpy

    table = sorted(float(f) for f in level_table)
    if n >= len(table):
        return table
    if n < 3:
        raise GovernorError(f"online: a U-curve needs at least 3 probe levels, got {n}")
    idx = sorted({int(round(i)) for i in np.linspace(0, len(table) - 1, n)})
    return [table[i] for i in idx]


def neighbours(level_table: Sequence[float], center: float, n: int) -> list[float]:
    """``n`` consecutive table levels centred on ``center`` (shifted inward at the ends)."""
    table = sorted(float(f) for f in level_table)
    n = min(n, len(table))
    if n == 0:
        return []
    c = table.index(snap_mhz(center, table))
    lo = min(max(c - (n - 1) // 2, 0), len(table) - n)
    return table[lo:lo + n]


class OnlineGovernor(ProbingGovernor):
    """Probes the job's first steps at spread, then nearby levels; holds the fitted best (module doc).

    ``probe_levels``: the coarse phase's levels (default: ``n_levels`` spread over the table).
    """

    name = "online"
    summary = "probes 5 spread levels, then 3 around the first estimate (26 steps), fits E(l), holds the best"
    tags = GovernorTags(
        needs_training=False, probes=True, knobs=("gpu_freq_mhz", "power_limit_w"),  # one knob's U-curve
        saves=("n_levels", "coarse_steps", "fine_levels", "fine_steps", "warmup_steps", "probe_levels", "step_units",
               "model"),
        not_on_command_line="the online governor probes levels during training and needs each step's energy, which a "
                            "plain command cannot report; add dvfslab.harness.online_callback.OnlineDvfsCallback to "
                            "your Trainer's callbacks (docs/governors.md), or use --policy mlg, curve or ffg here")

    def __init__(self, n_levels: int = 5, coarse_steps: int = 2, fine_levels: int = 3, fine_steps: int = 5,
                 warmup_steps: int = 1, probe_levels: Sequence[float] | None = None,
                 step_units: float | None = None, model: str = "auto", objective: Objective = LEAST_ENERGY):
        self.n_levels = n_levels
        self.coarse_steps = coarse_steps
        self.fine_levels = fine_levels
        self.fine_steps = fine_steps
        self.warmup_steps = warmup_steps
        self.probe_levels = probe_levels
        self.step_units = step_units
        self.model = model
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        """The units of a probing step on ``data`` (module doc: one, or the profile in one unit)."""
        if self.step_units is not None or data is None:
            self.step_units_ = None
            return
        source = data.steps()
        whole_runs = not all(source.counts_steps(w) for w in data.sweep.workload_ids())
        fits = not self.steps_reason(data)  # else it is left out
        self.step_units_ = 1.0 / self.start({}, data.level_table).profiling_steps if whole_runs and fits else None

    def fits_u_curve(self) -> bool:
        """Whether the U-curve is fitted (``model``: ``u-curve``; ``auto``: on a clock knob, also live)
        or the measured means are taken (``measured``; ``auto`` on another knob)."""
        if self.model not in ("auto", "u-curve", "measured"):
            raise GovernorError(f"online: model must be auto, u-curve or measured, got {self.model!r}")
        return self.model == "u-curve" or (self.model == "auto" and getattr(self, "knob_", DEFAULT_KNOB) == DEFAULT_KNOB)

    def units_per_step(self) -> float:
        """The units of one probing step: ``step_units``, else what ``fit`` found, else one."""
        if self.step_units is not None:
            return float(self.step_units)
        return getattr(self, "step_units_", None) or 1.0

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model=None) -> OnlineSession:
        return OnlineSession(self, levels)

    def steps_reason(self, data: TrainingData) -> str:
        fewest = min((len(data.sweep.curve(w)[0]) for w in data.sweep.workload_ids()), default=0)
        if fewest >= 3:
            return ""
        return f"a U-curve needs at least 3 measured levels; a workload here was measured at {fewest}"


class OnlineSession(ProbeSession):
    """The online governor on one job: ask :meth:`next_level`, run one step there,
    :meth:`observe` it; repeat. Two phases (module doc); after :attr:`profiling_steps` observed
    steps :attr:`done` is true and :meth:`next_level` returns the chosen level."""

    def __init__(self, governor: OnlineGovernor, level_table: Sequence[float]):
        g = governor
        if g.coarse_steps < 1 or g.fine_steps < 0 or g.fine_levels < 0 or g.warmup_steps < 0:
            raise GovernorError(f"online: coarse_steps must be >= 1 and fine_steps, fine_levels, warmup_steps >= 0, "
                                f"got {g.coarse_steps}, {g.fine_steps}, {g.fine_levels}, {g.warmup_steps}")
        self.objective = g.objective
        self.level_table = sorted(float(f) for f in level_table)
        self.probe_levels = (sorted(float(f) for f in g.probe_levels) if g.probe_levels
                             else spread_levels(self.level_table, int(g.n_levels)))
        if len(self.probe_levels) < 3:
            raise GovernorError(f"online: needs at least 3 probe levels, got {self.probe_levels}")
        self.fine_levels, self.fine_steps, self.warmup_steps = int(g.fine_levels), int(g.fine_steps), int(g.warmup_steps)
        self.step_units = g.units_per_step()
        self.fits_u_curve = g.fits_u_curve()
        if not (self.step_units > 0 and math.isfinite(self.step_units)):
            raise GovernorError(f"online: step_units must be > 0, got {self.step_units!r}")
        order = self.probe_levels[::-1]  # highest first: the warm-up runs at the fastest level
        self.schedule: list[float] = [order[0]] * self.warmup_steps + order * int(g.coarse_steps)
        self._coarse_end = len(self.schedule)
        self.profiling_steps = self._coarse_end + min(self.fine_levels, len(self.level_table)) * self.fine_steps
        self.observed: list[ProbeStep] = []
        self.coarse_level: float | None = None
        self.fine_phase: list[float] = []
        self.chosen_level: float | None = None
        self.curves: dict[str, np.ndarray] | None = None

    @property
    def level(self) -> float | None:
        return self.chosen_level

    def next_level(self) -> float | None:
        """The level to run the next step at (the chosen one once probing is over)."""
        if not self.done:
            return self.schedule[len(self.observed)]
        return self.chosen_level

    def next_probe(self) -> tuple[float | None, float]:
        return self.next_level(), self.step_units if not self.done else 1.0

    def observe(self, step: ProbeStep) -> None:
        """Record one step run at ``step.level``; fit at the end of each phase."""
        from dvfslab.governors.ucurve import fit_u_curve, measured_curve

        fit = fit_u_curve if self.fits_u_curve else measured_curve
        if self.done:
            return
        t, e = float(step.time_s), float(step.energy_j)
        if not (t > 0 and e > 0 and math.isfinite(t) and math.isfinite(e)):
            raise GovernorError(f"online: a step needs a positive time and energy, got {step.time_s!r} s, "
                                f"{step.energy_j!r} J")
        self.observed.append(ProbeStep(float(step.level), t, e, float(step.units)))
        n = len(self.observed)
        if n == self._coarse_end:
            c = fit(self.observed[self.warmup_steps:], self.level_table)
            self.coarse_level = (self.objective.select(c["level"], c["energy_rel"], c["time_rel"])
                                 or max(self.probe_levels))
            self.fine_phase = neighbours(self.level_table, self.coarse_level, self.fine_levels)
            self.schedule += self.fine_phase * self.fine_steps
        if n == self.profiling_steps:
            c = self.curves = fit(self.observed[self.warmup_steps:], self.level_table)
            # trust region: choose among the levels the fine phase measured (when it ran)
            keep = [i for i, f in enumerate(c["level"]) if not self.fine_phase or f in self.fine_phase]
            self.chosen_level = self.objective.select([c["level"][i] for i in keep], [c["energy_rel"][i] for i in keep],
                                                      [c["time_rel"][i] for i in keep])
