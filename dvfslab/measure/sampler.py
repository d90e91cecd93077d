"""Power sampling: a thread (or a virtual-time driver) reads the rails; windows measure energy.

:class:`PowerSampler` collects timestamped :class:`PowerSample`s from any
:class:`~dvfslab.hw.base.PowerReader`, either from its own thread (real time, :func:`tick_loop`)
or from whoever calls :meth:`PowerSampler.sample_once` (the simulated board on its virtual
clock). It is assembled from small parts: the samples live in a
:class:`~dvfslab.measure.store.SampleStore`; windows are booked by
:class:`~dvfslab.measure.windows.WindowBook` and integrated afterwards by the pure functions of
:mod:`dvfslab.measure.energy` (trapezoid rule, interpolated window edges); the idle baseline is
:func:`~dvfslab.measure.windows.measure_idle_window`; ``save`` is
:func:`dvfslab.measure.trace.save_sampler` (CSV/parquet plus a sidecar JSON), and
:class:`ReplayPowerReader` serves a saved trace back. See docs/power.md.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.hw.base import CounterReading, PowerReader, PowerSample
from dvfslab.measure.energy import (
    Measurement,
    SampleArrays,
    counter_energy_j,
    measure_window,
    with_counter_energy,
)
from dvfslab.measure.loop import (
    DEFAULT_PERIOD_S,
    ReadCost,
    Wait,
    cuda_synchronizer,
    default_period_s,
    resolve_period,
    stop_event_wait,
    tick_loop,
)
from dvfslab.measure.store import SampleStore
from dvfslab.measure.trace import ReplayPowerReader, samples_frame, save_sampler
from dvfslab.measure.windows import (
    SamplerError,
    WindowBook,
    WindowError,
    WindowResult,
    measure_idle_window,
)

__all__ = [  # the sampler and the names its callers use with it
    "DEFAULT_PERIOD_S", "PowerSampler", "ReplayPowerReader", "SamplerError", "WindowError",
    "WindowResult", "default_period_s",
]

log = logging.getLogger(__name__)


class PowerSampler:
    """Collect power samples and measure named energy windows.

    ``threaded=True``: a daemon thread reads the sensor every ``period_s`` (:func:`tick_loop`;
    ``tick_wait`` replaces its real-time wait, e.g. by a virtual clock's). ``threaded=False``:
    nothing runs by itself; a virtual-time driver (the simulated board) calls
    :meth:`sample_once` at each tick and the sampler never sleeps. ``clock`` must be the
    reader's time base (``PowerSample.t_s``). ``edge_samples`` takes one extra reading at each
    window edge, so the edges interpolate between real readings rather than holding the last
    one. ``sleep`` is how :meth:`measure_idle` lets time pass when not given one.
    """

    def __init__(self, reader: PowerReader, period_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, threaded: bool = True,
                 sync_cuda: bool = False, *, edge_samples: bool = True,
                 sleep: Callable[[float], None] | None = None, tick_wait: Wait | None = None):
        self.reader = reader
        self.rails = tuple(reader.rails)
        self.total_rails = tuple(reader.total_rails)
        unknown = [r for r in self.total_rails if r not in self.rails]
        if unknown:
            raise SamplerError(f"reader {type(reader).__name__}: total rails {unknown} are not in its rails {list(self.rails)}")
        self.period_s = resolve_period(reader, period_s)
        self.clock = clock
        self.threaded = threaded
        self.edge_samples = edge_samples
        self._sleep = sleep
        self._sync = cuda_synchronizer() if sync_cuda else None
        self.idle_power_w: float | None = None
        self.idle_measurement: Measurement | None = None
        self.measurements: list[Measurement] = []
        self.last_error: BaseException | None = None
        self._store = SampleStore(self.rails)
        self.read_cost = ReadCost()
        self._windows = WindowBook()
        # a reader with an energy counter (NVML, Volta+) gives window energy as a counter delta
        self._counter_at: dict[str, CounterReading] = {}
        self._running = False
        self._stop_event = threading.Event()
        self._tick_wait = tick_wait or stop_event_wait(self._stop_event)
        self._thread: threading.Thread | None = None
        self.thread_cpu_s = 0.0  # CPU s used by the sampler thread(s), added when one ends
        self.thread_wall_s = 0.0  # wall s they ran

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
        """Thread body: :func:`tick_loop`; its CPU time (``time.thread_time``) and wall time are
        added to ``thread_cpu_s`` / ``thread_wall_s`` when it ends."""
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        try:
            tick_loop(self.period_s, self.clock, self.sample_once, self._tick_wait)
        finally:
            self.thread_cpu_s += time.thread_time() - cpu0
            self.thread_wall_s += time.perf_counter() - wall0

    # -- sampling ------------------------------------------------------------------------------

    @property
    def n_samples(self) -> int:
        return len(self._store)

    @property
    def n_lost(self) -> int:
        return len(self._store.lost)

    def lost_t_s(self) -> list[float]:
        """Times (sampler clock, s) of the reads that failed."""
        with self._store.lock:
            return [float(t) for t in self._store.lost]

    def sample_once(self) -> PowerSample | None:
        """Read one sample and store it; on any reader error count and log it, return None.

        Read and store happen under one lock, so samples taken at window edges (caller's
        thread) and by the sampler thread are stored in time order.
        """
        store = self._store
        with store.lock:
            try:
                t0 = self.clock()
                sample = self.reader.read()
                self.read_cost.add(self.clock() - t0)
                store.append(sample)
            except Exception as err:  # a sensor hiccup must never kill sampling
                store.lost.append(self.clock())
                n_lost, self.last_error = len(store.lost), err
            else:
                return sample
        err = self.last_error  # the except clause unbinds its name
        if n_lost <= 3 or n_lost % 100 == 0:
            log.warning("power read failed (%d lost so far): %s: %s", n_lost, type(err).__name__, err)
        return None

    def extend(self, t_s, rails_mw: Mapping[str, object], gpu_util_pct=None, gpu_freq_mhz=None) -> int:
        """Store readings taken at the times ``t_s`` (an array; rails in mW, one array per rail).

        For virtual-time drivers that compute a whole stretch of readings at once (the simulated
        board's :meth:`~dvfslab.sim.backend.SimPowerReader.read_ticks`); the samples then go
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
        self._windows.check_can_begin(name)
        if not self._running:
            raise SamplerError(f"cannot begin window {name!r}: the sampler is not running; "
                               "call start() or use it as a context manager")
        self._sync_device()
        if self.edge_samples:
            self.sample_once()
        t0 = self.clock()
        self._windows.begin(name, t0)
        start = self.reader.counter()  # None: no counter, the samples' integral is the energy
        if start is not None:
            self._counter_at[name] = start
        return t0

    def end_window(self, name: str) -> Measurement:
        """Close window ``name``, keep its measurement in ``measurements`` and return it."""
        m = self.close_window(name)
        self.measurements.append(m)
        return m

    def close_window(self, name: str) -> Measurement:
        """Close window ``name`` and return what it measured, without keeping it."""
        self._windows.check_can_end(name)
        self._sync_device()
        t1 = self.clock()
        if self.edge_samples:
            self.sample_once()
        t0 = self._windows.end(name)
        m = self.measure(t0, t1, name=name)
        start = self._counter_at.pop(name, None)
        end = self.reader.counter() if start is not None else None
        return m if end is None else with_counter_energy(m, counter_energy_j(start, end))

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
        m = measure_window(arrays, t0_s, t1_s, self.total_rails, name=name,
                           idle_power_w=self.idle_power_w)
        source = self.reader.power_source  # what the samples are, when the reader labels them
        return m if source is None else replace(m, energy_source=source)

    def measure_idle(self, seconds: float, sleep: Callable[[float], None] | None = None) -> float:
        """Measure idle CPU+GPU power (W) over ``seconds``; later windows report energy above it.

        ``sleep`` waits ``seconds``: ``time.sleep`` by default when threaded; a virtual-time
        sampler needs the simulated board's own advance function (here or in the constructor).
        """
        wait = sleep or self._sleep or (time.sleep if self.threaded else None)
        if wait is None:
            raise SamplerError("a virtual-time sampler cannot wait for idle power by itself: pass "
                               "sleep= (the simulated board's advance function) or set idle_power_w")
        self.idle_power_w = None
        m = measure_idle_window(self.begin_window, self.close_window, seconds, wait)
        self.idle_measurement, self.idle_power_w = m, m.avg_power_w
        return m.avg_power_w

    # -- data ---------------------------------------------------------------------------------

    def arrays(self) -> SampleArrays:
        """All stored samples as arrays (a copy)."""
        return self._store.arrays()

    def samples(self) -> pd.DataFrame:
        """Tidy frame: ``t_s``, ``<rail>_mw`` per rail, ``total_mw``, and util/freq if known."""
        return samples_frame(self.arrays(), self.total_rails)

    def achieved_hz(self) -> float:
        """Samples per s over the stored span: (n - 1) / (last - first timestamp); NaN below 2."""
        with self._store.lock:
            t = self._store.t
            n, span = len(t), (t[-1] - t[0]) if len(t) > 1 else 0.0
        return (n - 1) / span if span > 0 else math.nan

    def stats(self) -> dict:
        """Counters: samples, lost reads, period (requested) and achieved rate, what one
        ``reader.read()`` cost (mean / max / last, s), the thread's CPU and wall s (after stop())."""
        cpu, wall = self.thread_cpu_s, self.thread_wall_s
        return {"n_samples": self.n_samples, "n_lost": self.n_lost, "period_s": self.period_s,
                "requested_hz": 1.0 / self.period_s, "achieved_hz": self.achieved_hz(),
                **self.read_cost.summary(),
                "thread_cpu_s": cpu, "thread_wall_s": wall,
                "thread_cpu_fraction": cpu / wall if wall > 0 else math.nan}

    def save(self, path: str | os.PathLike, meta: Mapping | None = None) -> Path:
        """Write the samples (``.csv``, or ``.parquet`` with pyarrow) and the sidecar JSON.

        Both files are written atomically (see :mod:`dvfslab.measure.trace`); ``meta`` (e.g.
        ``{"source": "simulated"}``) goes into the sidecar. Returns the samples path.
        """
        return save_sampler(self, path, meta)


@contextlib.contextmanager
def sampler_lease(sampler: PowerSampler | None) -> Iterator[PowerSampler | None]:
    """Run ``sampler`` for the block: start it unless it runs already (a sweep's), and stop
    on exit only a sampler started here. ``None`` (no power reader) passes through."""
    if sampler is None or sampler.running:
        yield sampler
        return
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()
