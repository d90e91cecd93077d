"""The online governor inside a Hugging Face ``Trainer``: probe, fit, lock, live.

:class:`OnlineDvfsCallback` is :class:`~dvfslab.harness.callback.DvfsCallback` with the
:class:`~dvfslab.harness.policy.OnlineLevel` policy: the step, window, sampler and clock logic is
the callback's; this module only checks the backend and builds the profiler.
"""

from __future__ import annotations

from collections.abc import Callable

from dvfslab.core.errors import DvfsError
from dvfslab.governors.online import OnlineProfiler
from dvfslab.harness.callback import DvfsCallback
from dvfslab.harness.policy import OnlineLevel
from dvfslab.hw.base import Backend


class OnlineDvfsCallback(DvfsCallback):
    """The callback with the online policy: probe levels on the first steps, fit, lock the best.

    Before each probing step the level the :class:`~dvfslab.governors.online.OnlineProfiler` asks
    for is locked and the step's CPU + GPU energy measured (edge samples at both ends, so even a
    short step has a measurement); then the chosen level holds for the rest of training (or the
    clocks go back to the board when no level meets a slowdown limit). Steps should last several
    power-sensor periods (the INA3221 updates every few ms to tens of ms).
    """

    def __init__(self, backend: Backend, profiler: OnlineProfiler | None = None, *, sampler=None,
                 sample_period_s: float | None = None, clock: Callable[[], float] | None = None,
                 **profiler_kw):
        if backend.clocks is None:
            raise DvfsError(f"backend {backend.name!r} has no GPU clock control: the online governor cannot probe levels")
        if backend.power is None and sampler is None:
            raise DvfsError(f"backend {backend.name!r} has no power reader: the online governor needs each step's energy")
        self.profiler = profiler or OnlineProfiler(backend.clocks.levels_mhz(), **profiler_kw)
        super().__init__(backend, policy=OnlineLevel(self.profiler), sampler=sampler,
                         sample_period_s=sample_period_s, clock=clock)
