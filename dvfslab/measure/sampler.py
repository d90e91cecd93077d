"""Power sampling in a background thread, named energy windows, saved traces and their replay.

:class:`PowerSampler` collects timestamped :class:`PowerSample`s from any
:class:`~dvfslab.hw.base.PowerReader`, either from its own thread (real time) or from
whoever calls :meth:`PowerSampler.sample_once` (the simulated board on its virtual clock).
The thread only stores samples; windows are cut and integrated afterwards by the pure
functions of :mod:`dvfslab.measure.energy` (trapezoid rule, interpolated window edges).

Saved traces (``save``; format in :mod:`dvfslab.measure.trace`) are CSV or parquet with one
column per rail (``<rail>_mw``) plus a sidecar ``<stem>.meta.json`` holding the rails, the
total rails and the sampler settings; :class:`ReplayPowerReader` serves such a trace back
through the same ``PowerReader`` API. See docs/power.md.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
import operator
import os
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.hw.base import DvfsError, PowerReader, PowerSample
from dvfslab.measure.energy import (
    EnergyInputError,
    Measurement,
    SampleArrays,
    integrate_energy,
    integrate_rails,
    integrate_total,
    integrate_window,
    measure_window,
)
from dvfslab.measure.trace import (
    ReplayPowerReader,
    SampleFileError,
    load_samples,
    rail_column,
    samples_frame,
    sidecar_path,
    write_trace,
)

__all__ = [
    "DEFAULT_PERIOD_S", "EnergyInputError", "Measurement", "PowerSampler", "ReplayPowerReader",
    "SampleFileError", "SamplerError", "WindowError", "default_period_s", "integrate_energy",
    "integrate_rails", "integrate_total", "integrate_window", "load_samples", "rail_column",
    "sidecar_path",
]

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 0.010  # when the reader does not expose its sensor's update interval
MIN_DEFAULT_PERIOD_S = 0.001  # floor for a default taken from update_interval_s
_IDLE_WINDOW = "dvfslab.measure.sampler:idle"  # distinct from any user window name
_LONG_WAIT_S = 0.05  # waits longer than this are interruptible by stop()
_MAX_LOST_SAVED = 1000


class SamplerError(DvfsError):
    """The sampler was used in a way it cannot serve (not started, no way to wait, ...)."""


class WindowError(SamplerError):
    """A window was begun twice, or ended without being open."""


def default_period_s(reader: PowerReader) -> float:
    """The reader's sensor refresh period when it exposes one (floored at 1 ms), else 10 ms."""
    interval = getattr(reader, "update_interval_s", None)
    if interval is not None and interval > 0:
        return max(float(interval), MIN_DEFAULT_PERIOD_S)
    return DEFAULT_PERIOD_S


def _cuda_synchronizer() -> Callable[[], None] | None:
    """``torch.cuda.synchronize`` when torch with CUDA is importable and available, else None."""
    try:
        import torch
    except ImportError:
        log.info("sync_cuda: torch is not importable; window edges are not synchronized")
        return None
    try:
        available = bool(torch.cuda.is_available())
    except Exception as err:  # a broken CUDA install must not break measurement
        log.warning("sync_cuda: torch.cuda.is_available() failed (%s); not synchronizing", err)
        return None
    return torch.cuda.synchronize if available else None


# --------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------


class _SampleStore:
    """Append-only samples guarded by one lock, 8 bytes a value.

    ``t`` holds the timestamps (bisected to cut windows); ``rows`` holds one interleaved row
    per sample: ``t_s, rail_1 … rail_n, gpu_util_pct, gpu_freq_mhz`` (NaN when absent), so
    storing a sample is one ``extend`` (this runs in the sampler thread at every tick).
    """

    def __init__(self, rails: tuple[str, ...]):
        self.rails = rails
        self.width = len(rails) + 3
        pick = operator.itemgetter(*rails)  # one C call per sample instead of a comprehension
        self._rail_values = (lambda p: (pick(p),)) if len(rails) == 1 else pick
        self.lock = threading.Lock()
        self.t = array("d")
        self.rows = array("d")
        self.lost = array("d")
        self.has_util = self.has_freq = False

    def append(self, s: PowerSample) -> None:
        """Store one sample (caller holds ``lock``); KeyError for a missing rail, ValueError
        when time runs backwards. Nothing is stored unless the whole row is valid."""
        util, freq = s.gpu_util_pct, s.gpu_freq_mhz
        row = array("d", (s.t_s, *self._rail_values(s.power_mw),
                          math.nan if util is None else util, math.nan if freq is None else freq))
        if self.t and row[0] < self.t[-1]:
            raise ValueError(f"sample time {row[0]!r} s is before the previous sample {self.t[-1]!r} s")
        self.t.append(row[0])
        self.rows.extend(row)
        self.has_util = self.has_util or util is not None
        self.has_freq = self.has_freq or freq is not None

    def extend(self, t_s: np.ndarray, rails_mw: Mapping[str, np.ndarray], util: np.ndarray | None,
               freq: np.ndarray | None) -> None:
        """Store many samples at once (caller holds ``lock``); same checks as :meth:`append`."""
        t = np.asarray(t_s, dtype=float)
        if t.size == 0:
            return
        cols = [t, *(np.broadcast_to(np.asarray(rails_mw[r], dtype=float), t.shape) for r in self.rails)]
        cols += [np.full(t.shape, math.nan) if v is None else np.broadcast_to(np.asarray(v, dtype=float), t.shape)
                 for v in (util, freq)]
        if np.any(np.diff(t) < 0) or (self.t and t[0] < self.t[-1]):
            raise ValueError("sample times must not decrease (within the block and after the stored samples)")
        self.t.frombytes(t.tobytes())
        self.rows.frombytes(np.column_stack(cols).tobytes())
        self.has_util = self.has_util or util is not None
        self.has_freq = self.has_freq or freq is not None

    def arrays(self, t0_s: float | None = None, t1_s: float | None = None) -> SampleArrays:
        """Copy of the samples covering ``[t0_s, t1_s]`` plus one neighbour on each side."""
        with self.lock:
            lo = 0 if t0_s is None else max(bisect.bisect_left(self.t, t0_s) - 1, 0)
            hi = len(self.t) if t1_s is None else bisect.bisect_right(self.t, t1_s) + 1
            block = self.rows[lo * self.width:hi * self.width]  # an array copy, not a view
            lost = np.array(self.lost)
            has_util, has_freq = self.has_util, self.has_freq
        table = np.frombuffer(block, dtype=float).reshape(-1, self.width) if block else np.empty((0, self.width))
        return SampleArrays(
            t_s=table[:, 0],
            rails_mw={r: table[:, 1 + i] for i, r in enumerate(self.rails)},
            gpu_util_pct=table[:, -2] if has_util else None,
            gpu_freq_mhz=table[:, -1] if has_freq else None,
            lost_t_s=lost,
        )


@dataclass
class WindowResult:
    """Filled by :meth:`PowerSampler.window` when the ``with`` block exits."""

    name: str
    measurement: Measurement | None = None


# --------------------------------------------------------------------------------------------
# Sampler
# --------------------------------------------------------------------------------------------


class PowerSampler:
    """Collect power samples and measure named energy windows.

    ``threaded=True``: a daemon thread reads the sensor every ``period_s`` (sleeping to
    absolute deadlines, so there is no drift). ``threaded=False``: nothing runs by itself; a
    virtual-time driver (the simulated board) calls :meth:`sample_once` at each tick and the
    sampler never sleeps. ``clock`` must be the reader's time base (``PowerSample.t_s``).
    ``edge_samples`` takes one extra reading at each window edge, so the edges interpolate
    between real readings rather than holding the last one.
    """

    def __init__(self, reader: PowerReader, period_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, threaded: bool = True,
                 sync_cuda: bool = False, *, edge_samples: bool = True,
                 sleep: Callable[[float], None] | None = None):
        self.reader = reader
        self.rails = tuple(reader.rails)
        self.total_rails = tuple(reader.total_rails)
        unknown = [r for r in self.total_rails if r not in self.rails]
        if unknown:
            raise SamplerError(f"reader {type(reader).__name__}: total rails {unknown} are not in its rails {list(self.rails)}")
        self.period_s = self._resolve_period(reader, period_s)
        self.clock = clock
        self.threaded = threaded
        self.edge_samples = edge_samples
        self._sleep = sleep
        self._sync = _cuda_synchronizer() if sync_cuda else None
        self.idle_power_w: float | None = None
        self.idle_measurement: Measurement | None = None
        self.measurements: list[Measurement] = []
        self.last_error: BaseException | None = None
        self._store = _SampleStore(self.rails)
        self._open: dict[str, float] = {}
        self._closed: set[str] = set()
        self._running = False
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.thread_cpu_s = 0.0  # CPU s used by the sampler thread(s), added when one ends
        self.thread_wall_s = 0.0  # wall s they ran

    @staticmethod
    def _resolve_period(reader: PowerReader, period_s: float | None) -> float:
        if period_s is None:
            return default_period_s(reader)
        if not period_s > 0:
            raise SamplerError(f"period_s must be > 0 s, got {period_s!r}")
        interval = getattr(reader, "update_interval_s", None)
        if interval and period_s < interval:
            log.warning("period %.4g s is shorter than the sensor's update interval %.4g s: "
                        "consecutive samples will repeat readings", period_s, interval)
        return float(period_s)

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> PowerSampler:
        """Start sampling (a thread when ``threaded``; else just mark the sampler running)."""
        if self._running:
            raise SamplerError("the sampler is already running; stop() it before starting again")
        self._running = True
        self._stop_event.clear()
        if self.threaded:
            self._thread = threading.Thread(target=self._loop, name="dvfslab-power-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (if any) and wait for it; stored samples and windows are kept."""
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=max(2.0, 20 * self.period_s))
            if self._thread.is_alive():
                log.warning("sampler thread did not stop within its timeout (reader blocked?)")
            self._thread = None
        self._running = False

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        """Thread body: sample, then sleep to the next absolute deadline (skip missed ones).

        Nothing else happens per tick, so the thread costs one wake-up plus one read; its CPU
        time (``time.thread_time``) is added to ``thread_cpu_s`` when it ends.
        """
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        period, clock, sample, sleep = self.period_s, self.clock, self.sample_once, time.sleep
        stopped, wait_stop = self._stop_event.is_set, self._stop_event.wait
        deadline = clock()
        try:
            while not stopped():
                sample()
                deadline += period
                now = clock()
                if now > deadline:
                    deadline += math.ceil((now - deadline) / period) * period
                # short waits: time.sleep (its wake-up costs about half the CPU of Event.wait);
                # long ones wait on the stop event so that stop() stays prompt
                delay = deadline - now
                if delay > _LONG_WAIT_S:
                    wait_stop(delay)
                elif delay > 0:
                    sleep(delay)
        finally:
            self.thread_cpu_s += time.thread_time() - cpu0
            self.thread_wall_s += time.perf_counter() - wall0

    # -- sampling ------------------------------------------------------------------------------

    @property
    def n_samples(self) -> int:
        return len(self._store.t)

    @property
    def n_lost(self) -> int:
        return len(self._store.lost)

    def sample_once(self) -> PowerSample | None:
        """Read one sample and store it; on any reader error count and log it, return None.

        Read and store happen under one lock, so samples taken at window edges (caller's
        thread) and by the sampler thread are stored in time order.
        """
        store = self._store
        with store.lock:
            try:
                sample = self.reader.read()
                store.append(sample)
            except Exception as err:  # a sensor hiccup must never kill sampling
                store.lost.append(self.clock())
                n_lost, self.last_error = len(store.lost), err
            else:
                return sample
        err = self.last_error
        if n_lost <= 3 or n_lost % 100 == 0:
            log.warning("power read failed (%d lost so far): %s: %s", n_lost, type(err).__name__, err)
        return None

    def extend(self, t_s, rails_mw: Mapping[str, object], gpu_util_pct=None, gpu_freq_mhz=None) -> int:
        """Store readings taken at the times ``t_s`` (an array; rails in mW, one array per rail).

        For virtual-time drivers that compute a whole stretch of readings at once (the simulated
        board's :meth:`~dvfslab.sim.board.SimPowerReader.read_ticks`); the samples then go
        through the same windows and integration as those of :meth:`sample_once`. Raises
        ``KeyError`` for a missing rail and ``ValueError`` when time runs backwards (nothing is
        stored then). Returns the number of samples stored.
        """
        with self._store.lock:
            self._store.extend(t_s, rails_mw, gpu_util_pct, gpu_freq_mhz)
        return int(np.size(t_s))

    # -- windows -------------------------------------------------------------------------------

    def _sync_device(self) -> None:
        if self._sync is not None:
            self._sync()

    def begin_window(self, name: str) -> float:
        """Open window ``name`` now; return its start time (s, sampler clock)."""
        if name in self._open:
            raise WindowError(f"window {name!r} is already open (began at t={self._open[name]:.6f} s); "
                              "end_window it first or use another name")
        if not self._running:
            raise SamplerError(f"cannot begin window {name!r}: the sampler is not running; "
                               "call start() or use it as a context manager")
        self._sync_device()
        if self.edge_samples:
            self.sample_once()
        t0 = self.clock()
        self._open[name] = t0
        self._closed.discard(name)
        return t0

    def end_window(self, name: str) -> Measurement:
        """Close window ``name`` and return what it measured."""
        m = self._close(name)
        self.measurements.append(m)
        return m

    def _close(self, name: str) -> Measurement:
        if name not in self._open:
            why = "it was already ended" if name in self._closed else "it was never begun"
            raise WindowError(f"cannot end window {name!r}: {why}; open windows: {sorted(self._open)}")
        self._sync_device()
        t1 = self.clock()
        if self.edge_samples:
            self.sample_once()
        t0 = self._open.pop(name)
        self._closed.add(name)
        return self.measure(t0, t1, name=name)

    @contextlib.contextmanager
    def window(self, name: str) -> Iterator[WindowResult]:
        """``with sampler.window("epoch-1") as w: ...``; then ``w.measurement``."""
        result = WindowResult(name)
        self.begin_window(name)
        try:
            yield result
        finally:
            result.measurement = self.end_window(name)

    def measure(self, t0_s: float, t1_s: float, name: str = "") -> Measurement:
        """Measurement over any interval of the stored samples (no window bookkeeping)."""
        arrays = self._store.arrays(t0_s, t1_s)
        return measure_window(arrays, t0_s, t1_s, self.total_rails, name=name,
                              idle_power_w=self.idle_power_w)

    def measure_idle(self, seconds: float, sleep: Callable[[float], None] | None = None) -> float:
        """Measure idle CPU+GPU power (W) over ``seconds``; later windows report energy above it.

        ``sleep`` waits ``seconds``: ``time.sleep`` by default when threaded; a virtual-time
        sampler needs the simulated board's own advance function (here or in the constructor).
        """
        wait = sleep or self._sleep or (time.sleep if self.threaded else None)
        if wait is None:
            raise SamplerError("a virtual-time sampler cannot wait for idle power by itself: pass "
                               "sleep= (the simulated board's advance function) or set idle_power_w")
        if not seconds > 0:
            raise SamplerError(f"idle measurement needs seconds > 0, got {seconds!r}")
        self.idle_power_w = None
        self.begin_window(_IDLE_WINDOW)
        try:
            wait(seconds)
        finally:
            m = self._close(_IDLE_WINDOW)
        self.idle_measurement = m
        self.idle_power_w = m.avg_power_w
        return m.avg_power_w

    # -- data ---------------------------------------------------------------------------------

    def arrays(self) -> SampleArrays:
        """All stored samples as arrays (a copy)."""
        return self._store.arrays()

    def samples(self) -> pd.DataFrame:
        """Tidy frame: ``t_s``, ``<rail>_mw`` per rail, ``total_mw``, and util/freq if known."""
        return samples_frame(self.arrays(), self.total_rails)

    def stats(self) -> dict:
        """Counters: samples, lost reads, period, the thread's CPU and wall s (after stop())."""
        cpu, wall = self.thread_cpu_s, self.thread_wall_s
        return {"n_samples": self.n_samples, "n_lost": self.n_lost, "period_s": self.period_s,
                "thread_cpu_s": cpu, "thread_wall_s": wall,
                "thread_cpu_fraction": cpu / wall if wall > 0 else math.nan}

    def save(self, path: str | os.PathLike, meta: Mapping | None = None) -> Path:
        """Write the samples (``.csv``, or ``.parquet`` with pyarrow) and the sidecar JSON.

        Both files are written atomically (see :mod:`dvfslab.measure.trace`); ``meta`` (e.g.
        ``{"source": "simulated"}``) goes into the sidecar. Returns the samples path.
        """
        lost = [float(t) for t in self._store.lost]
        sidecar = {
            "rails": list(self.rails), "total_rails": list(self.total_rails),
            "columns": {r: rail_column(r) for r in self.rails},
            "update_interval_s": getattr(self.reader, "update_interval_s", None),
            "period_s": self.period_s, "threaded": self.threaded,
            "reader": type(self.reader).__name__, "n_samples": self.n_samples,
            "n_lost": len(lost), "lost_t_s": lost[:_MAX_LOST_SAVED],
            "idle_power_w": self.idle_power_w,
            "windows": [m.to_dict() for m in self.measurements],
            "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "meta": dict(meta or {}),
        }
        return write_trace(path, self.samples(), sidecar)
