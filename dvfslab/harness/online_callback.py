"""The online governor inside a Hugging Face ``Trainer``: probe, fit, lock — live.

:class:`OnlineDvfsCallback` drives an :class:`~dvfslab.governors.online.OnlineProfiler` with real steps:
before each probing step it locks the level the profiler asks for, measures the step's CPU + GPU
energy with a :class:`~dvfslab.measure.sampler.PowerSampler` window (edge samples at both ends, so even a
short step has a measurement), and feeds it back; once probing is over it locks the chosen level
for the rest of training (or hands the clock back to the board when a slowdown limit cannot be
met). The clocks are restored when training ends, and by :meth:`close` (idempotent) when it
raises — call it from a ``finally`` block, as :func:`dvfslab.harness.finetune.finetune` does for its own
callback. Steps should last several power-sensor periods (the INA3221 updates every few ms to
tens of ms); shorter steps give noisy energies.

It can run next to a :class:`~dvfslab.harness.finetune.DvfsCallback` that locks nothing (no
``freq_mhz``, no governor) and measures the whole run.
"""

from __future__ import annotations

from transformers import TrainerCallback

from dvfslab.governors.online import OnlineProfiler
from dvfslab.hw.base import Backend, DvfsError

WINDOW = "online-probe-step"


class OnlineDvfsCallback(TrainerCallback):
    """Online probing during the first steps of training (see the module docstring)."""

    def __init__(self, backend: Backend, profiler: OnlineProfiler | None = None, *, sampler=None,
                 sample_period_s: float | None = None, **profiler_kw):
        if backend.clocks is None:
            raise DvfsError(f"backend {backend.name!r} has no GPU clock control: the online governor cannot probe levels")
        if backend.power is None and sampler is None:
            raise DvfsError(f"backend {backend.name!r} has no power reader: the online governor needs each step's energy")
        self.backend = backend
        self.profiler = profiler or OnlineProfiler(backend.clocks.levels_mhz(), **profiler_kw)
        self.sampler = sampler
        self.sample_period_s = sample_period_s
        self._own_sampler = False
        self._level: float | None = None
        self._locked = False
        self._probing = False
        self._closed = False
        self.levels_by_step: list[float | None] = []  # the level each step ran at

    def on_train_begin(self, args, state, control, **kwargs):
        if self.sampler is None:
            from dvfslab.measure.sampler import PowerSampler

            self.sampler = PowerSampler(self.backend.power, self.sample_period_s, clock=self.backend.clock)
        if not self.sampler.running:
            self.sampler.start()
            self._own_sampler = True

    def on_step_begin(self, args, state, control, **kwargs):
        level = self.profiler.next_level()
        if level is None:
            if self._locked:
                self.backend.clocks.reset()
                self._locked = False
        elif level != self._level or not self._locked:
            self._locked = True  # reset() even if lock() fails half-way
            self.backend.clocks.lock(level)
        self._level = level
        self.levels_by_step.append(level)
        self._probing = not self.profiler.done
        if self._probing:
            self.sampler.begin_window(WINDOW)

    def on_step_end(self, args, state, control, **kwargs):
        if self._probing:
            self._probing = False
            m = self.sampler.end_window(WINDOW)
            self.profiler.observe(self._level, m.energy_j, m.time_s)

    def on_train_end(self, args, state, control, **kwargs):
        self.close()

    def close(self) -> None:
        """End an open probe window, stop the sampler we started, restore the clocks. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._probing and self.sampler is not None:
                self._probing = False
                self.sampler.end_window(WINDOW)
            if self._own_sampler and self.sampler is not None and self.sampler.running:
                self.sampler.stop()
        finally:
            if self._locked:
                self.backend.clocks.reset()
                self._locked = False
