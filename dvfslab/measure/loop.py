"""The sampler's timing: its period, the thread's tick loop, how that loop waits, what reads cost.

The default period is half the sensor's update period (:func:`default_period_s`, as zeus
samples Jetson rails), so every fresh conversion is seen at least once. :func:`tick_loop` is
the body of the sampler thread: sample, then wait to the next absolute deadline. How it waits
is injected (:data:`Wait`): in real time :func:`stop_event_wait`; in a test or on a virtual
clock, any function that advances that clock and says when to stop. :class:`ReadCost` keeps
what each ``reader.read()`` cost, since on a Jetson the reads block (docs/power.md).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from dvfslab.hw.base import PowerReader
from dvfslab.measure.windows import SamplerError

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 0.010  # when the reader does not expose its sensor's update interval
MIN_DEFAULT_PERIOD_S = 0.001  # floor for a default taken from update_interval_s
PERIOD_PER_UPDATE = 0.5  # default period = this x the sensor's update period
_LONG_WAIT_S = 0.05  # waits longer than this are interruptible by stop()

#: ``wait(delay_s) -> bool``: let ``delay_s`` pass; True when sampling should stop
Wait = Callable[[float], bool]


def default_period_s(reader: PowerReader) -> float:
    """Half the reader's sensor update period when it exposes one (floored at 1 ms), else 10 ms."""
    interval = reader.update_interval_s
    if interval is not None and interval > 0:
        return max(PERIOD_PER_UPDATE * float(interval), MIN_DEFAULT_PERIOD_S)
    return DEFAULT_PERIOD_S


def resolve_period(reader: PowerReader, period_s: float | None) -> float:
    if period_s is None:
        return default_period_s(reader)
    if not period_s > 0:
        raise SamplerError(f"period_s must be > 0 s, got {period_s!r}")
    interval = reader.update_interval_s
    if interval and period_s < PERIOD_PER_UPDATE * interval:
        log.warning("period %.4g s is shorter than half the sensor's update interval %.4g s: "
                    "consecutive samples will repeat readings", period_s, interval)
    return float(period_s)


def cuda_synchronizer() -> Callable[[], None] | None:
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


def tick_loop(period_s: float, clock: Callable[[], float], sample: Callable[[], object],
              wait: Wait) -> int:
    """Sample, then wait to the next absolute deadline (no drift; missed deadlines are skipped),
    until ``wait`` returns True. Returns the number of ticks. The sampler thread's body."""
    deadline, n = clock(), 0
    while True:
        sample()
        n += 1
        deadline += period_s
        now = clock()
        if now > deadline:
            deadline += math.ceil((now - deadline) / period_s) * period_s
        if wait(max(deadline - now, 0.0)):
            return n


def stop_event_wait(stop: threading.Event) -> Wait:
    """Real-time :data:`Wait`: short delays ``time.sleep`` (its wake-up costs about half the CPU
    of ``Event.wait``), long ones wait on ``stop`` so that stop() stays prompt."""
    def wait(delay_s: float) -> bool:
        if delay_s > _LONG_WAIT_S:
            return stop.wait(delay_s)
        if delay_s > 0:
            time.sleep(delay_s)
        return stop.is_set()
    return wait


class ReadCost:
    """What ``reader.read()`` costs: count, total, max and the last one, in s of the sampler's
    clock (thread-safe enough: updated under the sample store's lock)."""

    def __init__(self) -> None:
        self.n, self.total_s, self.max_s, self.last_s = 0, 0.0, 0.0, math.nan

    def add(self, cost_s: float) -> None:
        self.n += 1
        self.total_s += cost_s
        self.max_s = max(self.max_s, cost_s)
        self.last_s = cost_s

    def summary(self) -> dict:
        """``read_cost_mean_s``, ``read_cost_max_s``, ``read_cost_last_s`` (NaN before a read)."""
        mean = self.total_s / self.n if self.n else math.nan
        return {"read_cost_mean_s": mean, "read_cost_max_s": self.max_s if self.n else math.nan,
                "read_cost_last_s": self.last_s}
