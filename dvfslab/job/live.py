"""A running command as a governor's :class:`~dvfslab.governors.base.Probe`: lock a level, wait
for the units the command reports, read the energy over them.

:class:`LiveProbe` is what ``dvfslab govern`` hands a measuring governor: the governor's own
``decide(workload, probe)`` drives its :class:`~dvfslab.governors.base.ProbeSession` with it, the
same code path as the replay's (:mod:`dvfslab.evaluation.replay`), so probe windows, noise and
the selector are one implementation. ``measure(level, units)`` locks ``level`` (None: the
board's default clock), lets the settle part of the level's window pass unread (the unit running
when the clock changed ran partly at the old level, and the power sensor averages over one
update interval), then reads the energy of the rest from the power sampler and returns the
per-unit figures times ``units``.

The probe model (:func:`live_probe_model`) is built from what the first window at the default
clock measured: ``tau`` (s per unit), the sensor's update interval and the clock's settle
time (docs/hardware.md, "Govern a running command"). Windows are timed by the progress events
(stamped as they arrive from the command, :class:`~dvfslab.job.progress.ProgressFeed`): a window
after a change of level starts at the first unit boundary after the settle *by time*, so units
that queued in the pipe while the clock switched are not in it; it reads at least
:data:`READ_SAMPLES` sensor intervals (``dvfslab.measure.windows.SENSOR_SAMPLES``, the replay's
figure) and one unit. A window whose time per unit is impossible (no time, or outside what
``t = a + b/f`` allows against the default-clock windows, :mod:`dvfslab.job.checks`) is logged
as not a measurement, with why, and read again. A window in which the command reported no
progress for ``stall_s`` (loading, evaluating, saving a checkpoint) is not a measurement: the
read restarts, and the log says so.

Meters: :class:`SamplerMeter` (a :class:`~dvfslab.measure.sampler.PowerSampler` on the backend's
power reader; on a virtual clock — an injected fake tree — it samples at each progress event
instead of from a thread) and :class:`SimMeter` (the digital twin: each unit the command reports
is one simulated training step at the locked level; every figure is simulated).
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.job.checks import MAX_REREADS, Z_IMPOSSIBLE, cv, time_bounds
from dvfslab.job.progress import ENDED, EPOCH_END, ProgressFeed
from dvfslab.measure.windows import SENSOR_SAMPLES

#: sensor readings a probe window reads at the least: the replay's figure (one constant)
READ_SAMPLES = SENSOR_SAMPLES
#: a gap between progress events this many times the unit's time is a stall (no progress)
STALL_FACTOR = 10.0
#: units the first window at the default clock reads at the least
CALIBRATION_UNITS = 2


class JobEnded(Exception):
    """The command exited while the governor waited for its progress."""


@dataclass
class Window:
    """One line of the log: what a window measured (or why it is not a measurement)."""

    phase: str  # calibration, baseline, probe, hold, no-progress
    level: float | None
    units: float = 0.0
    read_units: float = 0.0
    time_s: float = 0.0
    energy_j: float = 0.0
    t_end_s: float = 0.0
    measurement: bool = True
    why: str = ""
    n_samples: int = 0
    late: bool = False  # units that ran at the previous level (queued while the governor was busy)

    @property
    def energy_per_unit_j(self) -> float | None:
        return self.energy_j / self.read_units if self.measurement and self.read_units > 0 else None

    @property
    def time_per_unit_s(self) -> float | None:
        return self.time_s / self.read_units if self.measurement and self.read_units > 0 else None

    def record(self) -> dict[str, Any]:
        d = dict(self.__dict__)  # the fields are plain scalars: no deep copy (asdict) needed
        d["energy_per_unit_j"], d["time_per_unit_s"] = self.energy_per_unit_j, self.time_per_unit_s
        return d


def live_probe_model(tau_s: float, interval_s: float, settle_s: float, *, unit: str = "step",
                     sigma_ref: float = 0.0, read_samples: int = READ_SAMPLES) -> ProbeModel:
    """The probe model of a live job whose unit takes ``tau_s``: a window reads at least
    ``read_samples`` sensor intervals (and one unit), after a settle of ``settle_s`` and the unit
    the settle ends in, not read (``floor(settle_s / tau) + 1`` units); ``sigma_ref``: the
    reading noise over one unit (set again from the job's own windows,
    :meth:`LiveProbe.with_noise`)."""
    if not (tau_s > 0 and interval_s > 0 and settle_s >= 0):
        raise DvfsError(f"a live probe model needs tau_s > 0, interval_s > 0, settle_s >= 0; got {tau_s!r}, "
                        f"{interval_s!r}, {settle_s!r}")
    read = max(1, math.ceil(read_samples * interval_s / tau_s - 1e-9))
    settle = math.floor(settle_s / tau_s + 1e-9) + 1
    window = float(read + settle)
    return ProbeModel(default_window=window, read_fraction=read / window, sigma_ref=sigma_ref, ref_units=1.0,
                      sigma_source="none yet (set from the default-clock windows' spread)",
                      unit=unit, window_source=(f"live: {settle} {unit}(s) settle (>= {settle_s * 1000:g} ms) + {read} "
                                                f"read (>= {read_samples} x {interval_s * 1000:g} ms sensor interval) "
                                                f"at {tau_s * 1000:.4g} ms per {unit}"))


class SamplerMeter:
    """Energy over a window from the backend's power reader (module doc)."""

    simulated = False
    stamps_on_arrival = True  # the job's clock moves with the job: a progress event's time is its arrival

    def __init__(self, reader, clock: Callable[[], float], *, virtual: bool, interval_s: float | None = None):
        from dvfslab.measure.sampler import PowerSampler

        self.clock, self.virtual = clock, virtual
        self.sampler = PowerSampler(reader, period_s=interval_s, clock=clock, threaded=not virtual, edge_samples=True)
        self.interval_s = float(interval_s or getattr(reader, "update_interval_s", None) or self.sampler.period_s)
        self.sampler.start()

    def now(self) -> float:
        return self.clock()

    def sample_interval_s(self) -> float:
        """Time between two fresh readings: the sensor's update interval, or what one sample's
        reads cost when that is longer (an AGX Orin's blocking INA3221 reads: about 40 ms)."""
        cost = self.sampler.read_cost
        mean = cost.total_s / cost.n if cost.n else 0.0
        return max(self.interval_s, mean)

    def begin(self) -> None:
        self.sampler.begin_window("govern")

    def event(self, units: float) -> None:
        if self.virtual:
            self.sampler.sample_once()

    def end(self) -> tuple[float, float, int]:
        m = self.sampler.close_window("govern")
        return m.time_s, m.energy_j, m.n_samples

    def close(self) -> None:
        self.sampler.stop()


class SimMeter:
    """The digital twin as the meter: each unit reported is one simulated step at the locked level."""

    simulated = True
    virtual = True
    stamps_on_arrival = False  # the twin's clock moves when a unit is handled

    def __init__(self, board, workload, interval_s: float = 0.01):
        self.board, self.workload, self.interval_s = board, workload, float(interval_s)
        self._open = False
        self._acc = [0.0, 0.0, 0]
        self._done = 0.0
        self._n = 0
        self.gpu_util_pct: float | None = None

    def now(self) -> float:
        return self.board.now()

    def sample_interval_s(self) -> float:
        return self.interval_s

    def begin(self) -> None:
        self._open, self._acc = True, [0.0, 0.0, 0]

    def event(self, units: float) -> None:
        self._done += units
        steps = int(math.floor(self._done + 1e-9)) - self._n
        if steps <= 0:
            return
        self._n += steps
        r = self.board.train(self.workload, steps, run_key=f"govern-{self._n}")
        self.gpu_util_pct = float(r.gpu_util_pct)  # the twin's GPU load over the steps just run
        if self._open:
            self._acc[0] += float(r.step_time_s.sum())
            self._acc[1] += float(r.step_energy_j.sum())
            self._acc[2] += steps

    def end(self) -> tuple[float, float, int]:
        self._open = False
        return self._acc[0], self._acc[1], int(self._acc[2])

    def close(self) -> None:
        pass


class LiveProbe:
    """The running command as a :class:`~dvfslab.governors.base.Probe` (module doc).

    ``set_level(level)``: lock a level (None: give the clock back to the board); ``on_window``
    receives every :class:`Window`; ``handled(total)`` is called before each wait for progress
    (an injected virtual clock's handshake with its synthetic job; None on a board);
    ``default_level``: the clock the default runs the job at (None: the table's top), the
    reference of the time model that finds a window impossible (:mod:`dvfslab.job.checks`);
    ``clock_knob``: a level is a clock (``t = a + b/f`` bounds a window's time per unit); False
    (a power limit): only a window of no time is impossible."""

    def __init__(self, levels: Sequence[float], meter, feed: ProgressFeed, set_level: Callable[[float | None], Any],
                 on_window: Callable[[Window], None], *, handled: Callable[[float], None] | None = None,
                 stall_s: float | None = None, settle_s: float = 0.0, unit: str = "step", wait_s: float = 0.5,
                 default_level: float | None = None, clock_knob: bool = True):
        self.levels = sorted(float(f) for f in levels)
        self.meter, self.feed, self._set, self.on_window = meter, feed, set_level, on_window
        self.handled, self.stall_s, self.settle_s, self.unit, self.wait_s = handled, stall_s, float(settle_s), unit, wait_s
        self.default_level, self.clock_knob = default_level, clock_knob
        #: called (in the governor's thread, in order with the units) when the feed reports an epoch end
        self.on_epoch_end: Callable[[], None] | None = None
        #: the probe session a probing governor opened on this probe (``on_session``), told of epoch ends
        self.session = None
        self.model: ProbeModel | None = None
        self.phase = "probe"
        self.total = 0.0  # units reported so far
        self.level: float | None = None
        self._level_set = False
        self._t_event: float | None = None  # the time of the last unit boundary (a progress event)
        self.ended = False
        self.tau_s: float | None = None
        self.interval_s: float | None = None
        self.default_tpu: list[float] = []  # time per unit of the default-clock windows (the time model's reference)
        self._said_silent = False  # a stretch with no progress already logged while waiting
        self.level_before: float | None = None
        self.phase_before = "calibration"
        self._restarted = 0.0  # units of reads a stall restarted in the window running (charged to it)
        self._partial = (0.0, 0.0, 0.0, 0.0)  # (settle units, read units, read start, last event) of the window running
        self._epoch_cut = False  # an epoch ended while a restarting session's read was open
        if getattr(meter, "stamps_on_arrival", False) and feed.clock is None:
            feed.clock = meter.now

    # -- progress -----------------------------------------------------------------------------
    def _next(self) -> tuple[float, bool, float]:
        """Wait for the next total: ``(units it adds, whether a stall preceded it, its time)``."""
        if self.ended:
            raise JobEnded
        if self.handled is not None:
            self.handled(self.total)
        silent_logged = False
        while True:
            try:
                got = self.feed.get(self.wait_s)
            except queue.Empty:
                if (self.stall_s is not None and self._t_event is not None and not silent_logged
                        and not self.meter.virtual and self.meter.now() - self._t_event > self.stall_s):
                    silent_logged = self._said_silent = True
                    self.on_window(Window("no-progress", self.level, t_end_s=self.meter.now(), measurement=False,
                                          why=f"no progress for more than {self.stall_s:g} s (loading, evaluating or "
                                              "saving?): not a measurement; the governor waits"))
                continue
            if got is ENDED:
                self.ended = True
                raise JobEnded
            if got is EPOCH_END:
                if self.on_epoch_end is not None:
                    self.on_epoch_end()
                s = self.session
                if s is not None and getattr(s, "restarts_at_epoch_end", False) and not s.done:
                    self._epoch_cut = True  # the read open now restarts after the epoch end (Zeus)
                continue
            total, stamp = got
            delta = total - self.total
            self.total = total
            self.meter.event(delta)
            now = self.meter.now() if stamp is None else stamp
            stalled = silent_logged or (self.stall_s is not None and self._t_event is not None
                                        and now - self._t_event > self.stall_s)
            self._t_event = now
            return delta, stalled, now

    def _settle(self, t_change: float, level: float | None) -> float:
        """Let the settle pass unread, by time: every unit whose progress arrived before
        ``t_change + settle_s`` (queued while the clock switched, or run during the settle) and
        the unit the settle ends in; returns the units skipped."""
        end = t_change + self.settle_s
        skipped = late = 0.0
        self._partial = (0.0, 0.0, 0.0, 0.0)
        while True:
            delta, stalled, stamp = self._next()
            if stamp < t_change and not stalled:  # ran before the lock: at the level before
                late += delta
                continue
            if late:
                self.on_window(Window(self.phase_before, self.level_before, units=late, t_end_s=t_change,
                                      measurement=False, late=True,
                                      why=f"{late:g} {self.unit}(s) reported before the lock ran at the level before "
                                          "(queued while the governor decided): charged there, not read"))
                late = 0.0
            skipped += delta
            self._partial = (skipped, 0.0, 0.0, 0.0)
            if stalled and self._said_silent:
                self._said_silent = False
            elif stalled:
                self.on_window(Window("no-progress", level, units=delta, t_end_s=stamp, measurement=False,
                                      why=f"a stretch with no progress (over {self.stall_s:g} s) in the settle after "
                                          "a change of level: not a measurement (the settle is not read anyway)"))
            if stamp >= end - 1e-12:
                return skipped

    def min_read_s(self) -> float:
        """The least time a window reads: :data:`READ_SAMPLES` sensor intervals."""
        interval = self.interval_s if self.interval_s is not None else self.meter.sample_interval_s()
        return READ_SAMPLES * interval

    def _read(self, units: float, phase: str, level: float | None, min_s: float) -> Window:
        """Read at least ``units`` units and ``min_s`` seconds in one window, from the last unit
        boundary on; a stall restarts the read. Its time is the boundaries' (the progress events'
        times), its energy the meter's mean power over the read times that time."""
        self.meter.begin()
        t0 = self._t_event if self._t_event is not None else self.meter.now()
        done, t_last = 0.0, t0
        self._partial = (0.0, 0.0, 0.0, 0.0)
        self._epoch_cut = False
        while done < units - 1e-9 or t_last - t0 < min_s - 1e-12:
            self._partial = (0.0, done, t0, t_last)
            delta, stalled, stamp = self._next()
            if self._epoch_cut and not stalled:
                # Zeus's on_epoch_end: the window open at an epoch end is cancelled and read again
                # from the epoch's first unit on; what ran stays the window's units (charged)
                self._epoch_cut = False
                self.meter.end()
                self.on_window(Window("epoch-end", level, units=done + delta, t_end_s=stamp, measurement=False,
                                      why=f"an epoch ended {done:g} {self.unit}(s) into this read: the session "
                                          "restarts the window after it (Zeus's on_epoch_end); not a measurement"))
                self.meter.begin()
                self._restarted += done + delta
                t0, done, t_last = stamp, 0.0, stamp
                continue
            if stalled:
                self.meter.end()
                if self._said_silent:  # said while waiting (real time): restart without a second line
                    self._said_silent = False
                else:
                    self.on_window(Window("no-progress", level, units=done + delta, t_end_s=stamp, measurement=False,
                                          why=f"a stretch with no progress (over {self.stall_s:g} s; the window had run "
                                              f"{stamp - t0:.4g} s): not a measurement; the read restarts after it"))
                self.meter.begin()
                self._restarted += done + delta  # ran at the level, not read: the window's units still
                t0, done, t_last = stamp, 0.0, stamp
                continue
            done, t_last = done + delta, stamp
        meter_s, meter_j, n = self.meter.end()
        time_s = t_last - t0
        energy_j = meter_j * time_s / meter_s if meter_s > 0 else meter_j
        return Window(phase, level, units=done, read_units=done, time_s=time_s, energy_j=energy_j,
                      t_end_s=t_last, n_samples=n)

    def _ended_in(self, phase: str, level: float | None, settle: float) -> None:
        """The job ended inside a window: log what of it ran (a read part of at least one unit is a
        measurement of fewer units; a settle alone is charged at its level's mean in the summary)."""
        skipped, done, t0, t_last = self._partial
        units = settle + skipped
        why = "the job ended in this window"
        if done > 0 and t_last > t0:
            meter_s, meter_j, n = self.meter.end()
            time_s = t_last - t0
            energy_j = meter_j * time_s / meter_s if meter_s > 0 else meter_j
            self.on_window(Window(phase, level, units=units + done, read_units=done, time_s=time_s, energy_j=energy_j,
                                  t_end_s=t_last, n_samples=n, why=why + f" ({done:g} {self.unit}(s) read)"))
        elif units + done > 0:
            self.on_window(Window(phase, level, units=units + done, t_end_s=self.meter.now(), measurement=False,
                                  why=why + " before any unit was read (charged at its level's mean)"))

    def impossible(self, w: Window) -> str:
        """Why ``w``'s time per unit is impossible against the default-clock windows (``""``: it is not)."""
        tpu = w.time_s / w.read_units if w.read_units > 0 else 0.0
        if not tpu > 0:
            return f"{w.read_units:g} {self.unit}(s) in {w.time_s:.4g} s: no time per {self.unit}"
        if not self.default_tpu or not self.clock_knob:
            return ""
        ref = sorted(self.default_tpu)[len(self.default_tpu) // 2]
        ref_level = self.default_level if self.default_level is not None else max(self.levels)
        lo, hi = time_bounds(ref, cv(self.default_tpu), w.level if w.level is not None else ref_level, ref_level)
        if lo <= tpu <= hi:
            return ""
        return (f"{tpu * 1000:.4g} ms per {self.unit}, outside [{lo * 1000:.4g}, {hi * 1000:.4g}] ms that t = a + b/f "
                f"allows against the default clock's {ref * 1000:.4g} ms (as {ref_level:g}) +- {Z_IMPOSSIBLE:g} "
                "spreads")

    # -- the Probe protocol ---------------------------------------------------------------------
    def on_session(self, session) -> None:
        """A probing governor's session on this probe (:meth:`ProbingGovernor.decide` hands it over)."""
        self.session = session

    def set_level(self, level: float | None) -> bool:
        """Lock ``level``; True when it changed (the next window settles first)."""
        level = None if level is None else float(level)
        if self._level_set and level == self.level:
            return False
        self._set(level)
        self.level, self._level_set = level, True
        return True

    def measure(self, level: float | None, units: float = 1.0) -> tuple[float, float]:
        """Run the command's next ``units`` units at ``level``; ``(time_s, energy_j)`` scaled from
        the read part of the window (module doc)."""
        w = self.window(level, units, self.phase)
        return w.time_per_unit_s * units, w.energy_per_unit_j * units

    def window(self, level: float | None, units: float, phase: str) -> Window:
        """One window at ``level``: the settle (after a change), then a read of at least one unit
        and :meth:`min_read_s` (the rest of ``units`` when the governor asks for more than the
        probe model's window at the level); a read whose time per unit is
        impossible is logged as not a measurement and read again (at most ``MAX_REREADS`` times)."""
        self.level_before = self.level
        changed = self.set_level(level)
        t_change = self.meter.now()
        try:
            settle = self._settle(t_change, level) if changed and self.model is not None else 0.0
        except JobEnded:
            self._ended_in(phase, level, 0.0)
            raise
        # a window the probe model sizes reads by time (>= READ_SAMPLES sensor intervals), as the
        # replay charges it; a longer one the governor asks for reads its units
        minimal = self.model is None or float(units) <= self.model.window(level) + 1e-9
        read = 1.0 if minimal else max(float(units) - settle, 1.0)
        for attempt in range(MAX_REREADS + 1):
            try:
                w = self._read(read, phase, level, self.min_read_s())
            except JobEnded:
                self._ended_in(phase, level, settle)
                raise
            why = self.impossible(w)
            if not why:
                break
            if attempt == MAX_REREADS:
                w.why = f"kept after {MAX_REREADS} re-reads, each impossible: {why}"
                break
            self.on_window(Window(phase, level, units=w.units, read_units=w.read_units, time_s=w.time_s,
                                  energy_j=w.energy_j, t_end_s=w.t_end_s, measurement=False, n_samples=w.n_samples,
                                  why=f"impossible window ({why}): not a measurement; read again"))
        w.units = settle + self._restarted + w.read_units
        self._restarted = 0.0
        if level is None and w.measurement:
            self.default_tpu.append(w.time_s / w.read_units)
        self.phase_before = phase
        self.on_window(w)
        return w

    def calibrate(self, interval_s: float | None = None) -> Window:
        """The first window, at the default clock: from the first progress on (what came before
        is start-up), until it has read ``READ_SAMPLES`` sensor intervals and
        ``CALIBRATION_UNITS`` units; sets :attr:`model` from it. ``interval_s`` (default: the
        meter's time between fresh readings, asked again at the end) sizes the read."""
        fixed = interval_s
        self.interval_s = fixed if fixed is not None else self.meter.sample_interval_s()
        self.set_level(None)
        self._next()  # start-up ends with the first progress the command reports
        w = self._read(CALIBRATION_UNITS, "calibration", None, self.min_read_s())
        self.interval_s = fixed if fixed is not None else self.meter.sample_interval_s()
        if not w.time_s > 0:
            raise DvfsError(f"the first window at the default clock read {w.read_units:g} {self.unit}(s) in no time: "
                            "the progress source reports units faster than the clock it is timed with")
        self.tau_s = w.time_s / w.read_units
        self.default_tpu.append(self.tau_s)
        self.on_window(w)
        self.model = live_probe_model(self.tau_s, self.interval_s, self.settle_s, unit=self.unit)
        epoch = getattr(self.feed, "epoch_units", None)  # a source that knows the epoch (the replay board's)
        if epoch:
            self.model = replace(self.model, epoch_units=float(epoch))
        if self.stall_s is None:
            self.stall_s = STALL_FACTOR * max(self.tau_s, self.interval_s)
        return w

    def with_noise(self, sigma: float, ref_units: float, source: str) -> None:
        """Carry the reading noise the job's own windows show (:func:`~dvfslab.job.checks.window_noise`)
        in the probe model the governor plans with."""
        if self.model is not None:
            self.model = replace(self.model, sigma_ref=float(sigma), ref_units=float(ref_units), sigma_source=source)


def describe_model(model: ProbeModel | None) -> Mapping[str, Any] | None:
    return None if model is None else model.describe()
