"""One Hugging Face ``TrainerCallback`` for clock control, power sampling and step timing.

:class:`DvfsCallback` asks a level policy (:mod:`dvfslab.harness.policy`) which GPU level to
run at: a fixed level, a governor's decision, or the online profiler, step by step. Whatever the
policy, the callback does the same work: it holds the clocks and the power sampler in one
:class:`contextlib.ExitStack` (:mod:`dvfslab.harness.leases`) from ``on_train_begin``; opens an
energy window for the measured run and one per epoch (after ``warmup_steps`` optimizer steps);
times every step on the backend's clock; measures a probing step's energy for the policy; and at
``on_train_end`` closes the windows and unwinds the stack (sampler stopped, clocks reset).

A ``Trainer`` calls no callback when ``train()`` raises, so use the callback as a context
manager around ``train()`` (or call :meth:`DvfsCallback.close`, idempotent, from ``finally``):
the stack then unwinds all the same. :class:`~dvfslab.harness.online_callback.OnlineDvfsCallback`
is this callback with the online policy, named for callers.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping

from transformers import TrainerCallback

from dvfslab.core.files import utc_now
from dvfslab.harness.leases import ClockLease
from dvfslab.harness.policy import LevelPolicy, policy_for
from dvfslab.harness.poll import TelemetryPoll, mean_or_none
from dvfslab.harness.types import RUN_WINDOW, FinetuneError, StepSpan
from dvfslab.hw.base import Backend, rail_energy_split_j
from dvfslab.measure.energy import Measurement
from dvfslab.measure.sampler import sampler_lease

#: the sampler window of one probing step (distinct from the run and epoch windows)
PROBE_WINDOW = "online-probe-step"


class DvfsCallback(TrainerCallback):
    """Clock control by a level policy, power sampling and step timing for a ``Trainer``.

    The policy: ``policy``, or built from ``freq_mhz`` (one exact level) / ``governor`` (a
    :class:`~dvfslab.governors.base.Governor`: its ``decide(features).level``, snapped to the
    nearest level, or None); with
    none of them the clocks are not touched. ``warmup_steps`` optimizer steps run before the
    measured windows open. ``sampler``: an existing :class:`~dvfslab.measure.sampler.PowerSampler`
    (a sweep's; started and stopped by its owner when it runs); otherwise one is made on the
    backend's power reader at ``sample_period_s`` and owned here. ``clock`` (default
    ``backend.clock``, the power reader's time base) times steps and windows. ``sync_cuda``
    synchronizes CUDA at window edges; per-step times are not synchronized.
    """

    def __init__(self, backend: Backend, *, freq_mhz: float | None = None, governor=None,
                 features: Mapping | None = None, policy: LevelPolicy | None = None,
                 warmup_steps: int = 0, sample_period_s: float | None = None, sampler=None,
                 sync_cuda: bool = False, poll_period_s: float = 0.1,
                 clock: Callable[[], float] | None = None):
        if policy is not None and (freq_mhz is not None or governor is not None):
            raise FinetuneError("give a policy, or freq_mhz / a governor, not both")
        if warmup_steps < 0:
            raise FinetuneError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.policy = policy or policy_for(freq_mhz, governor, features)
        self.backend = backend
        self.clock = clock or backend.clock
        self.warmup_steps = int(warmup_steps)
        self.sample_period_s = sample_period_s
        self.sync_cuda = sync_cuda
        self.sampler = sampler
        self.gpu_freq_mhz: float | None = None  # the level locked when training began
        self.started_at: str | None = None
        self.steps: list[StepSpan] = []
        self.levels_by_step: list[float | None] = []  # per-step policies: the level of each step
        self.measurement: Measurement | None = None
        self.epochs: list[Measurement | None] = []
        self.error: str | None = None
        self._clocks = ClockLease(backend)
        self._poll = TelemetryPoll(backend, poll_period_s)
        self._stack: contextlib.ExitStack | None = None
        self._started = self._closed = self._probe_open = False
        self._epoch = 0
        self._t_step: float | None = None
        self._step_level: float | None = None
        self._t_run: tuple[float | None, float | None] = (None, None)
        self._open: set[str] = set()

    # -- Trainer events ---------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self.start()

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._epoch += 1
        if self.measuring:
            self._begin(f"epoch-{self._epoch}")

    def on_step_begin(self, args, state, control, **kwargs):
        if self.policy.per_step:
            self._step_level = self._lock_step_level()
        if self.policy.probing:
            self.sampler.begin_window(PROBE_WINDOW)
            self._probe_open = True
        self._t_step = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        t1 = self.clock()
        if self._probe_open:
            self._probe_open = False
            m = self.sampler.end_window(PROBE_WINDOW)
            self.policy.observe(self._step_level, m.energy_j, m.time_s)
        self.steps.append(StepSpan(int(state.global_step), t1 if self._t_step is None else self._t_step, t1))
        if self.measuring:
            self._poll.maybe_poll(t1)
        elif len(self.steps) >= self.warmup_steps:
            self._open_run()

    def on_epoch_end(self, args, state, control, **kwargs):
        tell = getattr(self.policy, "epoch_end", None)  # a probing session that restarts at epoch ends (zeus)
        if tell is not None:
            tell()
        name = f"epoch-{self._epoch}"
        if name in self._open:
            self.epochs.append(self._end(name))

    def on_train_end(self, args, state, control, **kwargs):
        self.close()

    # -- life cycle -------------------------------------------------------------------------

    @property
    def measuring(self) -> bool:
        return RUN_WINDOW in self._open

    def start(self) -> None:
        """Lock the policy's level, start the sampler, open the windows when there is no warm-up.

        Clocks and sampler are entered in one ExitStack; if anything here fails, what was
        taken is given back before the error propagates.
        """
        if self._started:
            return
        self._started = True
        self.started_at = utc_now()
        with contextlib.ExitStack() as stack:
            stack.enter_context(self._clocks)
            request = self.policy.start_mhz()
            if request is not None:
                self.gpu_freq_mhz = self._clocks.lock(request, nearest=self.policy.nearest)
            self.sampler = stack.enter_context(sampler_lease(self.sampler or self._new_sampler()))
            if self.policy.needs_energy and self.sampler is None:
                raise FinetuneError(f"policy {self.policy.name!r} needs each step's energy, but backend "
                                    f"{self.backend.name!r} has no power reader and no sampler was given")
            self._stack = stack.pop_all()
        self._poll.skip_what(self.sampler)
        if self.warmup_steps == 0:
            self._open_run()

    def close(self, error: BaseException | str | None = None) -> None:
        """Close open windows, then unwind the stack: stop our sampler, reset the clocks. Idempotent."""
        if error is not None and self.error is None:
            self.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if self._closed:
            return
        self._closed = True
        stack, self._stack = self._stack, None
        with stack or contextlib.ExitStack():
            self._close_windows()

    def __enter__(self) -> DvfsCallback:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)

    # -- clocks and windows -----------------------------------------------------------------

    def _new_sampler(self):
        if self.backend.power is None:
            return None
        from dvfslab.measure.sampler import PowerSampler

        # a virtual-time board has no wall time to sample in: edge samples only
        return PowerSampler(self.backend.power, self.sample_period_s, clock=self.clock,
                            threaded=not self.backend.virtual_time, sync_cuda=self.sync_cuda)

    def _lock_step_level(self) -> float | None:
        """Per-step policies: lock the level asked for, or give the clocks back on None."""
        request = self.policy.step_mhz()
        level = None if request is None else self._clocks.lock(request, nearest=self.policy.nearest)
        if level is None:
            self._clocks.release()
        self.levels_by_step.append(level)
        return level

    def _close_windows(self) -> None:
        if self._probe_open:
            self._probe_open = False
            self.sampler.end_window(PROBE_WINDOW)
        for name in sorted(self._open - {RUN_WINDOW}):
            self.epochs.append(self._end(name))
        if self.measuring:
            self.measurement = self._end(RUN_WINDOW)

    def _open_run(self) -> None:
        self._begin(RUN_WINDOW)
        if self._epoch:
            self._begin(f"epoch-{self._epoch}")

    def _sync(self) -> None:
        if self.sync_cuda and self.sampler is None:  # a sampler made with sync_cuda syncs itself
            _cuda_sync()

    def _begin(self, name: str) -> None:
        if self.sampler is not None:
            t0 = self.sampler.begin_window(name)
        else:
            self._sync()
            t0 = self.clock()
        self._open.add(name)
        if name == RUN_WINDOW:
            self._t_run = (t0, None)

    def _end(self, name: str) -> Measurement | None:
        self._open.discard(name)
        if self.sampler is not None:
            m = self.sampler.end_window(name)
            t1 = m.t1_s
        else:
            self._sync()
            m, t1 = None, self.clock()
        if name == RUN_WINDOW:
            self._t_run = (self._t_run[0], t1)
        return m

    # -- results ----------------------------------------------------------------------------

    @property
    def time_s(self) -> float | None:
        """Duration of the measured window (s, callback clock); None before it closed."""
        t0, t1 = self._t_run
        return None if t0 is None or t1 is None else t1 - t0

    @property
    def measured_steps(self) -> int:
        return max(len(self.steps) - self.warmup_steps, 0)

    def gpu_util_pct(self) -> float | None:
        m = self.measurement
        if m is not None and m.gpu_util_pct is not None:
            return m.gpu_util_pct
        return mean_or_none(self._poll.util_pct)

    def mean_gpu_freq_mhz(self) -> float | None:
        m = self.measurement
        if m is not None and m.gpu_freq_mhz is not None:
            return m.gpu_freq_mhz
        return mean_or_none(self._poll.freq_mhz)

    def run_fields(self) -> dict:
        """The measurement columns of a ``runs.csv`` row (energy empty without a power reader)."""
        m = self.measurement
        gpu_j, cpu_j = _rail_split(m, self.sampler)
        return {
            "gpu_freq_mhz": self.gpu_freq_mhz, "time_s": self.time_s,
            "energy_j": _finite(m.energy_j) if m else None, "energy_gpu_j": gpu_j, "energy_cpu_j": cpu_j,
            "avg_power_w": _finite(m.avg_power_w) if m else None,
            "peak_power_w": _finite(m.peak_power_w) if m else None,
            "gpu_util_pct": self.gpu_util_pct(), "mean_gpu_freq_mhz": self.mean_gpu_freq_mhz(),
            "steps": self.measured_steps, "started_at": self.started_at,
        }

    def step_rows(self, run_id: str) -> list[dict]:
        """One ``steps.csv`` row per optimizer step (warm-up included), energy from the samples."""
        sampled = self.sampler is not None and self.sampler.n_samples
        return [{"run_id": run_id, "step": s.step, "time_s": s.time_s,
                 "energy_j": _finite(self.sampler.measure(s.t0_s, s.t1_s).energy_j) if sampled else None}
                for s in self.steps]


def _cuda_sync() -> None:
    """``torch.cuda.synchronize()`` when CUDA is in use; nothing otherwise."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _rail_split(m: Measurement | None, sampler) -> tuple[float | None, float | None]:
    """GPU and CPU energy of the measured window (see :func:`dvfslab.hw.base.split_rails`)."""
    if m is None or sampler is None:
        return None, None
    gpu_j, cpu_j = rail_energy_split_j(m.energy_by_rail_j, sampler.total_rails)
    return _finite(gpu_j), _finite(cpu_j)
