"""A sweep executor for tests: each run waits, and measures what the sampler reads meanwhile."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dvfslab.hw.base import Backend
from dvfslab.sweep.executors import Executor, measurement_row

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.measure.sampler import PowerSampler
    from dvfslab.sweep.plan import RunSpec


class SleepExecutor(Executor):
    """FOR TESTS: each run waits ``warmup_s`` then measures a ``seconds`` long window.

    Nothing is trained: the row holds the time and the energy the sampler measured while
    waiting (on a fake sysfs tree, the fake rails). Runs whose id matches the regular
    expression ``fail`` raise ``RuntimeError`` (to test failure records).
    """

    def __init__(self, seconds: float = 0.05, warmup_s: float = 0.0, fail: str | None = None):
        self.seconds = float(seconds)
        self.warmup_s = float(warmup_s)
        self.fail = fail

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        self.wait(backend, sampler, self.warmup_s)
        if self.fail and re.search(self.fail, spec.run_id):
            raise RuntimeError(f"SleepExecutor: injected failure for {spec.run_id}")
        if sampler is None:
            t0 = backend.clock()
            self.wait(backend, sampler, self.seconds)
            return {"time_s": backend.clock() - t0, "steps": spec.steps}
        sampler.begin_window(spec.run_id)
        try:
            self.wait(backend, sampler, self.seconds)
        finally:
            m = sampler.end_window(spec.run_id)
        row = measurement_row(m, sampler.total_rails, spec.steps)
        if backend.clocks is not None:  # what the clocks were during the run, for the tests
            st = backend.clocks.state()
            row["clock_state"] = {"min_freq_mhz": st.min_freq_mhz, "max_freq_mhz": st.max_freq_mhz,
                                  "governor": st.governor}
        return row
