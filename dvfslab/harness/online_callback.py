"""A probing governor inside a Hugging Face ``Trainer``: probe, fit, hold the level, live.

:class:`OnlineDvfsCallback` is :class:`~dvfslab.harness.callback.DvfsCallback` with the
:class:`~dvfslab.harness.policy.OnlineLevel` policy: the step, window, sampler and clock logic is
the callback's; this module only checks the backend and starts the governor's session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.governors.base import ProbingGovernor
from dvfslab.governors.online import OnlineGovernor
from dvfslab.harness.callback import DvfsCallback
from dvfslab.harness.policy import OnlineLevel
from dvfslab.hw.base import Backend


class OnlineDvfsCallback(DvfsCallback):
    """The callback with a probing governor (default: the online one): probe on the first steps,
    then hold its level.

    Before each probing step the level the governor's session asks for is locked (None: the
    board's default clock) and the step's CPU + GPU energy measured (edge samples at both ends,
    so even a short step has a measurement); then the chosen level holds for the rest of
    training (or the clocks go back to the board when no level meets a slowdown limit). Steps
    should last several power-sensor periods (the INA3221 updates every few ms to tens of ms).
    ``workload``: the job's features, for a governor that uses them (``profiled``: GPU
    utilization and the static features). ``profiler``: the session (:class:`~dvfslab.governors.base.ProbeSession`).
    """

    def __init__(self, backend: Backend, governor: ProbingGovernor | None = None, *,
                 workload: Mapping[str, Any] | None = None, sampler=None, sample_period_s: float | None = None,
                 clock: Callable[[], float] | None = None):
        if backend.clocks is None:
            raise DvfsError(f"backend {backend.name!r} has no GPU clock control: a probing governor cannot probe levels")
        if backend.power is None and sampler is None:
            raise DvfsError(f"backend {backend.name!r} has no power reader: a probing governor needs each step's energy")
        governor = governor if governor is not None else OnlineGovernor()
        self.profiler = governor.start(dict(workload or {}), backend.clocks.levels_mhz())
        super().__init__(backend, policy=OnlineLevel(self.profiler, governor.name), sampler=sampler,
                         sample_period_s=sample_period_s, clock=clock)
