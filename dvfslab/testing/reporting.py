"""A sweep executor for tests that reports from inside a run, so a test waits on what the
sweep process says, never on a sleep.

:class:`ReportingExecutor` is :class:`~dvfslab.testing.executors.SleepExecutor` that, once a
run's policy is set (its clocks pinned) and before its window, writes ``report`` atomically:
the run id and every other clock as the backend reads it back. A test waits for that file,
then signals or kills the sweep while the clocks are known to be pinned.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from dvfslab.hw.base import Backend
from dvfslab.testing.executors import SleepExecutor

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.measure.sampler import PowerSampler
    from dvfslab.sweep.plan import RunSpec


class ReportingExecutor(SleepExecutor):
    """FOR TESTS: a :class:`SleepExecutor` writing ``report`` (JSON: ``run_id``, ``policy``,
    ``clocks_mhz``) at the start of every run whose policy matches ``policy`` (default: fixed)."""

    def __init__(self, report: str, seconds: float = 0.05, warmup_s: float = 0.0, fail: str | None = None,
                 policy: str = "fixed"):
        super().__init__(seconds=seconds, warmup_s=warmup_s, fail=fail)
        self.report, self.policy = str(report), policy

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        if spec.policy == self.policy:
            others = backend.clocks.other_clocks() if backend.clocks is not None else {}
            doc = {"run_id": spec.run_id, "policy": spec.policy, "pid": os.getpid(),
                   "clocks_mhz": {name: c.read_mhz() for name, c in others.items()}}
            tmp = f"{self.report}.tmp"
            with open(tmp, "w") as fh:
                json.dump(doc, fh)
            os.replace(tmp, self.report)
        return super().run(spec, backend, sampler)


__all__ = ["ReportingExecutor"]
