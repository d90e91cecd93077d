"""The replay board: one workload of a dataset served as a board on a virtual clock, so that a
governor replayed over a dataset runs the exact code ``dvfslab govern`` runs on a machine
(:class:`~dvfslab.job.runner.GovernedRun`: calibration windows, settle, sensor windows, the
decision, the hold, the log and its whole-job summary).

A :class:`ReplayCell` is what the board serves: each level's time and energy per unit, and the
default's (the dataset's baseline policy). The :class:`ReplayBoard` makes the job's progress
itself (its :class:`ReplayFeed` runs one unit at the locked level each time the runner waits for
progress, and ends after ``job_units``), keeps the job's true time and energy, and reads a
window's energy through a power sensor sampled every ``interval_s`` of virtual time: each sample
carries a standard normal draw, and a window of ``n`` samples reads its true energy times a
log-normal factor of mean 1 and coefficient of variation ``sigma_sample / sqrt(n)`` driven by the
mean of its ``n`` draws (never negative, as the replay's probes read, :mod:`dvfslab.analysis.steps`).
Time is read exactly (the progress events' times).

**The virtual clock's fast path.** A progress event may carry several units where the runner
would read them one by one to the same boundary: after a change of level the board runs, as one
event, the units up to the first unit boundary at or after the settle's end (the runner skips
exactly those); after the meter begins a window, the units up to the first boundary at or after
:data:`~dvfslab.measure.windows.SENSOR_SAMPLES` sensor intervals (the least the runner reads).
An event never spans more than :data:`CHUNK_INTERVALS` sensor intervals (the runner's stall
threshold is 10 of them) and never runs past the job's end, so every window reads the units,
time and energy it would read one unit at a time; one normal draw per window (the mean of its
``n`` samples' draws, times ``sqrt(n)``, is one standard normal) replaces the ``n`` draws.
The board keeps its trace (``trace``: ``[level, units]`` in the order run).

**The hold, fast** (``govern_replay(..., fast_hold=True)``, the evaluation's): once the runner
logs its decision, the board runs the rest of the job at the level the hold locks as one last
progress event. The job's true account (every unit at its level) is the same as window by
window — the hold's windows only feed the log's own estimate of the saving, which then covers
the job up to the hold (its summary is not the whole job's: the evaluation reads the board's
account). A job of hours read in 0.5 s windows (a Zeus training job) costs its probing only.

**Epochs.** ``cell.meta["epoch_units"]`` (units an epoch: a Zeus job served in iterations) is
the feed's ``epoch_units``: the runner's probe model carries it, so Zeus restarts a profiling
window an epoch end cuts (:mod:`dvfslab.governors.session`).

**Noise, a caller's argument** (this layer does not import the evaluation's estimators). The
caller passes ``sigma_sample``: the dataset's reading noise (a CV over ``u`` units read) is one
sample's ``sigma * sqrt(n)``, ``n`` the samples those units span (:func:`per_sample_sigma`).
Where nothing is estimated, the stated priors per sensor (:data:`SENSOR_NOISE_PRIOR`, never 0) are
assumptions, not measurements: ``ina3221`` (a Jetson's rails through tegrastats or sysfs) 2 %
a sample; ``nvml`` (a data-centre GPU's ``nvmlDeviceGetPowerUsage``, documented "accurate to
within +/- 5 watts", about 5 % of a 100 W reading) 5 % a sample.

:func:`govern_replay` runs one governor on one cell through :class:`GovernedRun` and returns
its summary, with the job's true totals beside it. Board side of the evaluation: no pandas
(:func:`cell_from_dataset` imports the analysis room to read a dataset).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.job.board import JobBoard
from dvfslab.job.log import JobLog
from dvfslab.job.progress import ENDED, ProgressFeed
from dvfslab.measure.windows import SENSOR_SAMPLES, SETTLE_S

#: per-sample reading noise (a CV) assumed of each sensor where no replicate measures it (module doc)
SENSOR_NOISE_PRIOR = {"ina3221": 0.02, "nvml": 0.05}
#: the sensor's sampling interval assumed where a dataset states none: tegrastats' default (1 s)
DEFAULT_INTERVAL_S = 1.0
#: the most sensor intervals one progress event of the board spans (module doc: the fast path)
CHUNK_INTERVALS = 9.0


@dataclass(frozen=True)
class ReplayCell:
    """One workload's figures per unit: ``levels`` ``{level: (time_s, energy_j)}`` and the
    default's ``default`` ``(time_s, energy_j)`` (the baseline policy: the board's own clock);
    ``unit``: the job's unit; ``source``: where the figures come from."""

    levels: Mapping[float, tuple[float, float]]
    default: tuple[float, float]
    unit: str = "step"
    source: str = "hand-written"
    simulated: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for level, (t, e) in [*self.levels.items(), (None, self.default)]:
            if not (t > 0 and e > 0 and math.isfinite(t) and math.isfinite(e)):
                raise DvfsError(f"{self.source}: level {level}: a unit needs time > 0 and energy > 0, got {t!r} s, "
                                f"{e!r} J")

    def at(self, level: float | None) -> tuple[float, float]:
        if level is None:
            return self.default
        try:
            return self.levels[float(level)]
        except KeyError:
            raise DvfsError(f"{self.source}: level {level:g} is not in the cell ({sorted(self.levels)})") from None


def per_sample_sigma(sigma: float, units_read: float, time_per_unit_s: float, interval_s: float) -> float:
    """One sensor sample's CV so that a window of ``units_read`` units (``units_read *
    time_per_unit_s / interval_s`` samples, at least one) reads with CV ``sigma``."""
    n = max(1.0, units_read * time_per_unit_s / interval_s)
    return float(sigma) * math.sqrt(n)


class ReplayFeed(ProgressFeed):
    """The board's own progress: each :meth:`get` runs one unit at the locked level (module doc)."""

    def __init__(self, board: ReplayBoard):
        super().__init__()
        self.board = board
        self.unit = board.cell.unit
        epoch = board.cell.meta.get("epoch_units")
        self.epoch_units: float | None = float(epoch) if epoch else None

    def get(self, timeout_s: float | None) -> tuple[float, float | None] | None:
        if self.board.units >= self.board.job_units - 1e-9:
            return ENDED
        self.board.run_units(self.board.chunk())
        self.total = self.board.units
        return self.total, self.board.now()


class ReplayMeter:
    """The replay board's power sensor (module doc): energy read over a window with per-sample noise."""

    simulated = False
    virtual = True
    stamps_on_arrival = False

    def __init__(self, board: ReplayBoard):
        self.board = board
        self._t0 = self._e0 = 0.0

    def now(self) -> float:
        return self.board.now()

    def sample_interval_s(self) -> float:
        return self.board.interval_s

    def begin(self) -> None:
        self._t0, self._e0 = self.board.time_s, self.board.energy_j
        self.board.run_to(self.board.time_s + SENSOR_SAMPLES * self.board.interval_s)

    def event(self, units: float) -> None:
        pass

    def end(self) -> tuple[float, float, int]:
        dt, de = self.board.time_s - self._t0, self.board.energy_j - self._e0
        n = max(1, int(math.floor(dt / self.board.interval_s + 1e-9)))
        sigma = self.board.sigma_sample
        if sigma <= 0:
            return dt, de, n
        # n samples' draws, their mean a N(0, sigma / sqrt(n)): one standard normal draw z for the window
        # (module doc); read as a log-normal factor of that CV (mean 1, never negative), as the replay's
        # probes read (dvfslab.analysis.steps)
        z = self.board.rng.gauss(0.0, 1.0)
        s = math.sqrt(math.log1p(sigma * sigma / n))
        return dt, de * math.exp(s * z - s * s / 2.0), n

    def close(self) -> None:
        pass


class ReplayBoard:
    """A dataset's cell as a board on a virtual clock (module doc)."""

    def __init__(self, cell: ReplayCell, job_units: float, *, sigma_sample: float, interval_s: float = DEFAULT_INTERVAL_S,
                 settle_s: float = SETTLE_S, seed: int = 0):
        if not job_units > 0:
            raise DvfsError(f"a replayed job needs job_units > 0, got {job_units!r}")
        if not (sigma_sample >= 0 and interval_s > 0 and settle_s >= 0):
            raise DvfsError(f"the replay board needs sigma_sample >= 0, interval_s > 0, settle_s >= 0; got "
                            f"{sigma_sample!r}, {interval_s!r}, {settle_s!r}")
        self.cell, self.job_units = cell, float(job_units)
        self.sigma_sample, self.interval_s, self.settle_s = float(sigma_sample), float(interval_s), float(settle_s)
        self.rng = random.Random(seed)
        self.level: float | None = None
        self.units = self.time_s = self.energy_j = 0.0
        self.units_at: dict[float | None, float] = {}  # the units run at each level (the true account)
        self.trace: list[list] = []  # [level, units] in the order run
        self._until: float | None = None  # the next event runs to the first unit boundary at or after this time
        self.hold_rest = False  # the runner decided: the next event runs the rest of the job (module doc)

    def now(self) -> float:
        return self.time_s

    def run_unit(self) -> None:
        self.run_units(1)

    def run_units(self, k: int) -> None:
        """``k`` units at the locked level, as one progress event."""
        t, e = self.cell.at(self.level)
        self.units += k
        self.time_s += k * t
        self.energy_j += k * e
        self.units_at[self.level] = self.units_at.get(self.level, 0.0) + k
        if self.trace and self.trace[-1][0] == self.level:
            self.trace[-1][1] += k
        else:
            self.trace.append([self.level, float(k)])

    def run_to(self, t_s: float) -> None:
        """The next event runs to the first unit boundary at or after ``t_s`` (module doc)."""
        self._until = t_s

    def chunk(self) -> int:
        """The units of the next progress event (module doc: one unless a boundary is pending)."""
        if self.hold_rest:  # the decision is logged and the hold's level locked: the rest of the job
            return max(1, math.ceil(self.job_units - self.units - 1e-9))
        if self._until is None:
            return 1
        t = self.cell.at(self.level)[0]
        need = self._until - self.time_s
        if need <= 1e-12:
            self._until = None
            return 1
        k = max(1, math.ceil((need - 1e-12) / t))
        k = min(k, max(1, int(CHUNK_INTERVALS * self.interval_s / t)), max(1, math.ceil(self.job_units - self.units - 1e-9)))
        if self.time_s + k * t >= self._until - 1e-12:
            self._until = None
        return k

    def lock(self, level: float) -> None:
        self.cell.at(level)  # refuses a level not in the cell
        changed = self.level is None or abs(self.level - float(level)) > 1e-9  # levels are table values
        self.level = float(level)
        if changed and self.units > 0:
            self.run_to(self.time_s + self.settle_s)

    def reset(self) -> None:
        changed = self.level is not None
        self.level = None
        if changed and self.units > 0:
            self.run_to(self.time_s + self.settle_s)

    def job_board(self) -> JobBoard:
        return JobBoard(f"the replay of {self.cell.source}", sorted(self.cell.levels), self.lock, self.reset,
                        ReplayMeter(self), settle_s=self.settle_s, simulated=self.cell.simulated, feed=ReplayFeed(self),
                        restored=lambda: "the replay board's clock is back at its default")


def govern_replay(governor, cell: ReplayCell, job_units: float, seed: int = 0, *, sigma_sample: float,
                  interval_s: float = DEFAULT_INTERVAL_S, settle_s: float = SETTLE_S,
                  known_units: float | None | str = "job", workload: Mapping[str, Any] | None = None,
                  baseline_windows: int = 3, log=None, fast_hold: bool = False) -> dict[str, Any]:
    """One governor over one replayed job through :class:`~dvfslab.job.runner.GovernedRun` (the
    code ``dvfslab govern`` runs): its summary line, with ``true_energy_j``, ``true_time_s``,
    ``true_units_at`` and ``true_trace`` (the job the board ran), ``decision_probes`` (the probes
    the governor's decision lists; the log's ``probes`` counts windows) and ``default_energy_j`` / ``default_time_s`` (the
    same job at the default). ``known_units``: the length the progress source states (``"job"``:
    ``job_units``; None: none, the governor assumes its own); ``fast_hold``: the rest of the job
    after the decision in one event (module doc; ``log`` then a path or None)."""
    from dvfslab.job.runner import GovernedRun

    board = ReplayBoard(cell, job_units, sigma_sample=sigma_sample, interval_s=interval_s, settle_s=settle_s, seed=seed)
    if fast_hold:
        if isinstance(log, JobLog):
            raise DvfsError("govern_replay: fast_hold needs log as a path or None (it watches the log for the decision)")
        log = _HoldLog(log, board)
    run = GovernedRun(governor, board.job_board(), workload=workload, log=log, baseline_windows=baseline_windows,
                      job_units=job_units if known_units == "job" else known_units, unit=cell.unit,
                      require_features=False)  # a dataset's workload: its missing features are the dataset's
    run.run()
    out = dict(run.finish())
    t, e = cell.default
    out.update(true_energy_j=board.energy_j, true_time_s=board.time_s, true_units=board.units,
               true_units_at={("default" if k is None else format(k, "g")): v for k, v in board.units_at.items()},
               true_trace=[(lv, u) for lv, u in board.trace],
               decision_probes=None if run.decision is None else len(run.decision.probed),
               default_energy_j=e * board.units, default_time_s=t * board.units)
    return out


class _HoldLog(JobLog):
    """The runner's log, watched for its decision (``fast_hold``: module doc)."""

    def __init__(self, path, board: ReplayBoard):
        super().__init__(path)
        self.board = board

    def write(self, record: Mapping[str, Any]) -> None:
        super().write(record)
        if record.get("event") == "decision":
            self.board.hold_rest = True


def cell_from_dataset(path, workload_id: str) -> ReplayCell:
    """The cell of one workload of a dataset folder: each level's and the baseline's rep means per
    unit (``steps`` of a run; one unit a run without), from :class:`~dvfslab.analysis.steps.StepSource`."""
    from dvfslab.analysis import sweep_from_dataset
    from dvfslab.analysis.steps import StepSource
    from dvfslab.core.errors import SweepError
    from dvfslab.data.contract import load_dataset

    ds = load_dataset(path)
    sweep = sweep_from_dataset(ds)
    src = StepSource(sweep, ds.runs, None)
    if workload_id not in sweep.workload_ids():
        some = ", ".join(sweep.workload_ids()[:5])
        raise DvfsError(f"{path}: no workload {workload_id!r} with level runs and a baseline (e.g. {some}); "
                        "give one of them with --workload")
    try:
        levels = {float(f): src.per_unit(workload_id, float(f)) for f in sweep.curve(workload_id)[0]}
        default = src.per_unit(workload_id, None)
    except SweepError as err:
        raise DvfsError(f"{path}: {err}") from None
    return ReplayCell(levels, default, unit="step" if src.units(workload_id) > 1 else "run",
                      source=f"{path} {workload_id}", simulated=sweep.simulated, meta=dict(ds.meta))
