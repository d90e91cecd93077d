"""Named energy windows: which are open, when they began, and the idle-power window.

:class:`WindowBook` is the bookkeeping behind ``PowerSampler.begin_window``/``end_window``
(names, start times, clear errors for a window begun twice or ended without being open);
:func:`measure_idle_window` measures idle power over a hidden window while ``wait`` lets time
pass. Integration itself is :func:`dvfslab.measure.energy.measure_window`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dvfslab.core.errors import DvfsError
from dvfslab.measure.energy import Measurement

IDLE_WINDOW = "dvfslab.measure.sampler:idle"  # distinct from any user window name

#: power-sensor samples one reading of a level needs: the ONE figure the replay's probe model
#: charges (:mod:`dvfslab.evaluation.probes`) and a live window reads (:mod:`dvfslab.job.live`)
SENSOR_SAMPLES = 5
#: the clock's settle time (s) before a reading: what dvfslab's own clock lock waits for
#: ``cur_freq`` to reach its target (``hw.jetson.clocks``, ``settle_s``)
SETTLE_S = 0.2


class SamplerError(DvfsError):
    """The sampler was used in a way it cannot serve (not started, no way to wait, ...)."""


class WindowError(SamplerError):
    """A window was begun twice, or ended without being open."""


@dataclass
class WindowResult:
    """Filled by :meth:`PowerSampler.window` when the ``with`` block exits."""

    name: str
    measurement: Measurement | None = None


class WindowBook:
    """Open windows (name -> start time, s) and the names already closed."""

    def __init__(self) -> None:
        self.open: dict[str, float] = {}
        self.closed: set[str] = set()

    def check_can_begin(self, name: str) -> None:
        if name in self.open:
            raise WindowError(f"window {name!r} is already open (began at t={self.open[name]:.6f} s); "
                              "end_window it first or use another name")

    def check_can_end(self, name: str) -> None:
        if name not in self.open:
            why = "it was already ended" if name in self.closed else "it was never begun"
            raise WindowError(f"cannot end window {name!r}: {why}; open windows: {sorted(self.open)}")

    def begin(self, name: str, t0_s: float) -> None:
        self.check_can_begin(name)
        self.open[name] = t0_s
        self.closed.discard(name)

    def end(self, name: str) -> float:
        """Close ``name``; return its start time."""
        self.check_can_end(name)
        self.closed.add(name)
        return self.open.pop(name)


def measure_idle_window(begin: Callable[[str], float], close: Callable[[str], Measurement],
                        seconds: float, wait: Callable[[float], None]) -> Measurement:
    """Measure over the hidden window :data:`IDLE_WINDOW` (opened by ``begin``, closed by
    ``close``: a sampler's ``begin_window`` / ``close_window``) while ``wait(seconds)`` lets
    time pass. The window is closed even if ``wait`` raises."""
    if not seconds > 0:
        raise SamplerError(f"idle measurement needs seconds > 0, got {seconds!r}")
    begin(IDLE_WINDOW)
    try:
        wait(seconds)
    finally:
        m = close(IDLE_WINDOW)
    return m
