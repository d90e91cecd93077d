"""One probe session for every governor that reads a level over a window: ``search``, ``voi``,
``zeus``, ``zeus-sim``, ``bo``.

A :class:`WindowSession` reads one level at a time. The governor's session names the level and
the window (units of the job; :meth:`WindowSession._read`); the steps run there are fed to
:meth:`~WindowSession.observe` whole (a replay: one probe of the window) or in pieces (live: one
optimizer step at a time) and summed; when the window is complete its sums ``(units, energy_j,
time_s)`` go to the governor's :meth:`~WindowSession._window_read`, which names the next window
or holds a level (:meth:`WindowSession._hold`, with a note). After the hold, :meth:`next_level`
is the held level for the rest of the job.

**Settle.** A window may start with ``settle`` units (``_read(level, window, settle)``) that run
at the level and are charged like any unit but are not read: the time a clock other than the
one the window reads takes to settle after a move (``bo``: a Jetson's EMC or CPU clock,
``ceil(settle_s / time per unit)`` units). The probe asked is ``settle + window`` units; a step
that lies wholly in the settle is not read, a step that ends past it is read whole (a replay runs
the probe in one piece, at one level: its energy per unit is the window's). The window's sums
are those read; :attr:`~WindowSession.last_window_units` is what it ran, settle included. A
session that names no settle (every governor but ``bo``) reads every unit of its window.

**Epochs.** A job's epochs matter to a profiler that restarts an unfinished window at an epoch
end (Zeus's ``GlobalPowerLimitOptimizer.on_epoch_end``: a warm-up or profiling window cut by the
end of an epoch is cancelled and started again on the next epoch's first step). A session whose
class sets ``restarts_at_epoch_end`` and that knows the job's epoch length (``epoch_units``, from
the probe model's :attr:`~dvfslab.governors.probemodel.ProbeModel.epoch_units`) asks no probe
past the end of an epoch (:meth:`next_probe`), and when a window is open at an epoch end calls
:meth:`~WindowSession._epoch_end` (the steps already run stay charged). A live caller that hears
of an epoch end (a callback's ``on_epoch_end``) calls :meth:`epoch_end`. Where the epoch length
is not known, no epoch end is ever modelled.

**Re-planning as the job's length becomes known.** A live job may state its length only after
the session started (a ``Trainer``'s bar after a preamble, a gauge set late, a ``k/N`` line) or
change it (more epochs on a resume). :meth:`~WindowSession.replan` hands the session the units
of the job left after the window open now completes (live: the caller calls it when a probe
window has ended, before the session observes it). It takes effect when that window completes,
before the governor's :meth:`~WindowSession._window_read` weighs the next probe: the session
then plans with ``units_run + units_left`` units from its start (``units_run``, the units it has
observed, the window included), and decides again against the new length — in a live run every
window the probe measures is whole, so that is at once. A governor whose plan depends on the length sets
``plans_with_length`` and implements :meth:`~WindowSession._replanned`: ``voi`` (the units left
it weighs a probe's gain over) and ``bo`` (the rest of the job its expected improvement is
over, and its probe budget, a share of the job). ``search``, ``zeus`` and ``zeus-sim`` plan
without the job's length (a fixed search, a fixed profiling window per limit): they ignore it.
After the hold a new length changes nothing in the session (the caller's log still records it).

**Not here: ``online`` and ``profiled``.** Their sessions (:class:`~dvfslab.governors.online.OnlineSession`,
:class:`~dvfslab.governors.profiled.ProfiledSession`) count *steps*, not units, and keep each step:
``online`` runs a fixed schedule of ``profiling_steps`` probing steps (round-robin over its probe
levels, the fine phase chosen after the coarse one) and fits its U-curve to the steps one by one;
``profiled`` runs ``warmup + probe_steps`` steps at the default clock and drops the first
``warmup`` *steps* whatever their units. A replay stretches each of their steps to the level's
window, so a step there is many units: a window of units summed here would end after one step
and change both. They use :class:`~dvfslab.governors.base.ProbeSession`'s step-count protocol
(``done`` after ``profiling_steps`` observed steps), which has no window sums to share.

Board side: plain Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvfslab.governors.base import ProbeSession, ProbeStep

if TYPE_CHECKING:
    from dvfslab.governors.probemodel import ProbeModel

#: the tolerance on sums of units (fractions of an epoch add up inexactly)
EPS = 1e-9


class WindowSession(ProbeSession):
    """A session reading one level at a time over a window of units (module doc). A subclass
    calls :meth:`_begin` in its ``__init__``, then :meth:`_read` or :meth:`_hold`, and implements
    :meth:`_window_read`."""

    #: an unfinished window is started again after an epoch end (Zeus's profiler)
    restarts_at_epoch_end: bool = False
    #: a window whose last unit is the epoch's last is complete (False: Zeus, which closes a
    #: window on the *next* step's ``on_step_begin``, after ``on_epoch_end`` has cancelled it)
    completes_at_epoch_end: bool = True
    #: the session's plan depends on the job's length (``voi``, ``bo``): :meth:`replan` re-plans it
    plans_with_length: bool = False

    def _begin(self, model: ProbeModel | None = None) -> None:
        """The state every session starts with; ``model``: the probe model (its epoch length)."""
        self.observed: list[ProbeStep] = []
        self.profiling_steps = 0
        self._acc = [0.0, 0.0, 0.0, 0.0]  # units run, units read, energy read, time read: the open window
        self._reading: tuple[float | None, float] | None = None  # (level, window units) being read
        self._settle = 0.0  # units of the open window run first, charged but not read
        #: the units the last complete window ran, its settle included
        self.last_window_units = 0.0
        self._held = False
        self._level: float | None = None
        self._note = ""
        epoch = getattr(model, "epoch_units", None) if model is not None else None
        #: units in one epoch of the job (None: unknown, no epoch end modelled)
        self.epoch_units: float | None = float(epoch) if epoch else None
        #: units of the job run so far (the probes are its first units)
        self.units_run = 0.0
        self._cut = False  # the last probe asked stops at an epoch end
        self._replan_units: float | None = None  # a new length, applied when the open window completes

    # ---- what a subclass calls ---------------------------------------------------------------

    def _read(self, level: float | None, window: float, settle: float = 0.0) -> None:
        """Read ``level`` next, over ``window`` units, after ``settle`` units run there unread
        (module doc, *Settle*)."""
        self._reading = (level, float(window))
        self._settle = float(settle)
        self._acc = [0.0, 0.0, 0.0, 0.0]

    def _hold(self, level: float | None, note: str = "") -> None:
        """Stop probing and hold ``level`` (None: the default) for the rest of the job."""
        self._reading = None
        self._held = True
        self._level = level
        self._note = note

    def _window_read(self, units: float, energy_j: float, time_s: float) -> None:
        """A window of the level being read is complete: its sums. Name the next or hold."""
        raise NotImplementedError

    def _replanned(self, plan_job_units: float) -> None:
        """The job's length changed: plan with ``plan_job_units`` units from the session's start
        (as ``workload["plan_job_units"]``; only a session with ``plans_with_length``; called
        before :meth:`_window_read`)."""
        raise NotImplementedError

    def _epoch_end(self) -> None:
        """An epoch ended while a window was open (only with ``restarts_at_epoch_end``): by
        default the window starts again, the units already run there not counted in it (nor
        in its settle: the clock stays where it settled)."""
        self._settle = max(self._settle - self._acc[0], 0.0)
        self._acc = [0.0, 0.0, 0.0, 0.0]

    # ---- the session protocol ------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._held

    @property
    def reading_level(self) -> float | None:
        """The level being read (None once the level is held, or the default clock)."""
        return None if self._reading is None else self._reading[0]

    def next_level(self) -> float | None:
        return self._level if self.done else self._reading[0]

    def _to_epoch_end(self) -> float | None:
        """Units left in the current epoch (None: no epoch end modelled)."""
        if not (self.restarts_at_epoch_end and self.epoch_units):
            return None
        into = self.units_run % self.epoch_units
        if self.epoch_units - into <= EPS:
            into = 0.0
        return self.epoch_units - into

    def next_probe(self) -> tuple[float | None, float]:
        if self.done:
            return self._level, 1.0
        level, window = self._reading
        want = self._settle + window - self._acc[0]
        to_end = self._to_epoch_end()
        self._cut = to_end is not None and to_end < want - EPS
        return level, (to_end if self._cut else want)

    def stretch(self, level: float | None, units: float, model: ProbeModel | None) -> float:
        """The units a replay runs for a probe of ``units`` asked: at least the level's window,
        unless the probe stops at an epoch end (the job's epoch ends there, whatever the window)."""
        if self._cut:
            return float(units)
        return super().stretch(level, units, model)

    def observe(self, step: ProbeStep) -> None:
        if self.done:
            return
        self.observed.append(step)
        self._counted()
        acc = self._acc
        ran = acc[0]
        acc[0] += float(step.units)
        if not (acc[0] <= self._settle + EPS and ran < self._settle):  # not all of it in the settle: read
            acc[1] += float(step.units)
            acc[2] += float(step.energy_j)
            acc[3] += float(step.time_s)
        before = self.units_run
        self.units_run += float(step.units)
        crossed = self._crossed_epoch_end(before)
        if acc[0] >= self._settle + self._reading[1] - EPS and not (crossed and not self.completes_at_epoch_end):
            self.last_window_units, units, energy, time = acc
            self._acc = [0.0, 0.0, 0.0, 0.0]
            if self._replan_units is not None:
                left, self._replan_units = self._replan_units, None
                self._replanned(self.units_run + left)
            self._window_read(units, energy, time)
        elif crossed:
            self._epoch_end()

    def replan(self, units_left: float) -> bool:
        """The job's length became known or changed: ``units_left``, the units of the job left
        after the window open now completes. Applied when it completes (module doc,
        *Re-planning*). Returns whether it changes the plan: False after the hold, or for a
        governor whose plan does not depend on the length."""
        n = float(units_left)
        if not n >= 0:
            raise ValueError(f"replan: the units left must be >= 0, got {units_left!r}")
        if self.done or not self.plans_with_length:
            return False
        self._replan_units = n
        return True

    def epoch_end(self) -> None:
        """Live: the job's epoch ended (a callback's ``on_epoch_end``); an open window of a
        session that restarts at epoch ends starts again."""
        if self.restarts_at_epoch_end and not self.done and self._acc[0] > 0:
            self._epoch_end()

    def _crossed_epoch_end(self, before: float) -> bool:
        if not (self.restarts_at_epoch_end and self.epoch_units):
            return False
        e = self.epoch_units
        return int((self.units_run + EPS) // e) > int((before + EPS) // e)

    def _counted(self) -> None:
        """Book-keeping when a step is observed (``profiling_steps`` counts them by default)."""
        self.profiling_steps = len(self.observed)

    @property
    def note(self) -> str:
        return self._note

    @property
    def level(self) -> float | None:
        return self._level
