"""Fine-tuning harness: the Hugging Face ``Trainer`` with dvfslab attached as a callback.

:class:`DvfsCallback` locks the GPU clock (or applies a governor) when training begins, runs a
:class:`~dvfslab.measure.sampler.PowerSampler`, opens an energy window for the whole run and one per
epoch (after a configurable number of warm-up steps), times every optimizer step, and gives
the clocks back when training ends. A ``Trainer`` does not call callbacks when ``train()``
raises, so the cleanup is :meth:`DvfsCallback.close`, idempotent, which :func:`finetune` calls
from a ``finally`` block (do the same in your own scripts, or use the callback as a context
manager).

:func:`finetune` is the whole experiment: model (``AutoModelForSequenceClassification``),
GLUE data (:mod:`dvfslab.harness.glue`), dynamic padding, training, the task metric, and one row
appended to a dataset directory (see :mod:`dvfslab.harness.records`).
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback

from dvfslab.core.files import utc_now
from dvfslab.hw.base import Backend, DvfsError, check_level, rail_energy_split_j
from dvfslab.measure.energy import Measurement

log = logging.getLogger(__name__)

RUN_WINDOW = "train"


class FinetuneError(DvfsError):
    """A fine-tuning run cannot start or finish (bad input, no memory, no clock control)."""


class EnergyNotMeasuredWarning(UserWarning):
    """The backend has no power reader: time and steps are recorded, energy is left empty."""


@dataclass
class StepSpan:
    """One optimizer step: its global number and begin/end times on the backend's clock."""

    step: int
    t0_s: float
    t1_s: float

    @property
    def time_s(self) -> float:
        return self.t1_s - self.t0_s


@dataclass
class _Poll:
    """GPU load and clock readings taken at step ends while measuring (throttled).

    Only for what the power samples do not carry (the Jetson reader's samples carry both).
    """

    util_pct: list[float] = field(default_factory=list)
    freq_mhz: list[float] = field(default_factory=list)
    last_t_s: float = -math.inf
    want_util: bool = True
    want_freq: bool = True


class DvfsCallback(TrainerCallback):
    """Clock control, power sampling and step timing for a Hugging Face ``Trainer``.

    ``freq_mhz`` locks one GPU level (exact level, MHz); ``governor`` is any object whose
    ``decide(features)`` returns a level in MHz (snapped to the nearest level) or ``None``
    for "leave the clocks alone"; with neither, the clocks are not touched. ``warmup_steps``
    optimizer steps run before the measured windows open. ``sampler``: an existing
    :class:`~dvfslab.measure.sampler.PowerSampler` to use (a sweep's); otherwise one is made on the
    backend's power reader at ``sample_period_s`` and owned (started and stopped) here.
    All times come from ``backend.clock``. ``sync_cuda`` synchronizes the CUDA device at window
    edges (when CUDA is in use), so queued kernels are charged to the right window; per-step
    times are not synchronized (that would change what is measured).
    """

    def __init__(self, backend: Backend, *, freq_mhz: float | None = None, governor=None,
                 features: Mapping | None = None, warmup_steps: int = 0,
                 sample_period_s: float | None = None, sampler=None, sync_cuda: bool = False,
                 poll_period_s: float = 0.1):
        if freq_mhz is not None and governor is not None:
            raise FinetuneError("give either freq_mhz or a governor, not both")
        if warmup_steps < 0:
            raise FinetuneError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.backend = backend
        self.clock = backend.clock
        self.freq_mhz = freq_mhz
        self.governor = governor
        self.features = dict(features or {})
        self.warmup_steps = int(warmup_steps)
        self.sample_period_s = sample_period_s
        self.sync_cuda = sync_cuda
        self.poll_period_s = poll_period_s
        self.sampler = sampler
        self._own_sampler = False
        self.gpu_freq_mhz: float | None = None  # the level locked for this run
        self.started_at: str | None = None
        self.steps: list[StepSpan] = []
        self.measurement: Measurement | None = None
        self.epochs: list[Measurement] = []
        self.error: str | None = None
        self._locked = False
        self._started = self._closed = False
        self._epoch = 0
        self._t_step: float | None = None
        self._t_run: tuple[float | None, float | None] = (None, None)
        self._open: set[str] = set()
        self._poll = _Poll()

    # -- Trainer events ---------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self.start()

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._epoch += 1
        if self.measuring:
            self._begin(f"epoch-{self._epoch}")

    def on_step_begin(self, args, state, control, **kwargs):
        self._t_step = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        t1 = self.clock()
        t0 = self._t_step if self._t_step is not None else t1
        self.steps.append(StepSpan(int(state.global_step), t0, t1))
        if self.measuring:
            self._maybe_poll(t1)
        elif len(self.steps) >= self.warmup_steps:
            self._open_run()

    def on_epoch_end(self, args, state, control, **kwargs):
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
        """Apply the clock policy, start sampling, open the windows when there is no warm-up."""
        if self._started:
            return
        self._started = True
        self.started_at = utc_now()
        self._apply_clocks()
        self._start_sampler()
        if self.warmup_steps == 0:
            self._open_run()

    def close(self, error: BaseException | str | None = None) -> None:
        """Close open windows, stop the sampler we started, restore the clocks. Idempotent."""
        if error is not None and self.error is None:
            self.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if self._closed:
            return
        self._closed = True
        try:
            for name in sorted(self._open - {RUN_WINDOW}):
                self.epochs.append(self._end(name))
            if self.measuring:
                self.measurement = self._end(RUN_WINDOW)
        finally:
            try:
                if self._own_sampler and self.sampler is not None and self.sampler.running:
                    self.sampler.stop()
            finally:
                if self._locked and self.backend.clocks is not None:
                    self.backend.clocks.reset()
                    self._locked = False

    def __enter__(self) -> DvfsCallback:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)

    # -- clocks and sampling ----------------------------------------------------------------

    def _target_mhz(self) -> float | None:
        if self.governor is None:
            return self.freq_mhz
        choice = self.governor.decide(self.features)
        return None if choice is None else float(choice)

    def _apply_clocks(self) -> None:
        target = self._target_mhz()
        if target is None:
            return
        clocks = self.backend.clocks
        if clocks is None:
            raise FinetuneError(f"backend {self.backend.name!r} has no GPU clock control, so "
                                f"{target:g} MHz cannot be locked; use --backend jetson or nvml, or drop --freq")
        level = check_level(target, clocks.levels_mhz(), nearest=self.governor is not None)
        self._locked = True  # reset() even if lock() fails half-way
        clocks.lock(level)
        self.gpu_freq_mhz = level

    def _start_sampler(self) -> None:
        if self.sampler is None and self.backend.power is not None:
            from dvfslab.measure.sampler import PowerSampler

            self.sampler = PowerSampler(self.backend.power, self.sample_period_s, clock=self.clock,
                                        sync_cuda=self.sync_cuda)
        if self.sampler is not None and not self.sampler.running:
            self.sampler.start()
            self._own_sampler = True
        if self.sampler is not None:  # poll only what the samples lack
            try:
                probe = self.sampler.reader.read()
                self._poll.want_util = probe.gpu_util_pct is None
                self._poll.want_freq = probe.gpu_freq_mhz is None
            except Exception as err:  # the sampler counts read failures itself
                log.debug("probe read failed: %s", err)
        self._poll.want_util &= self.backend.telemetry is not None
        self._poll.want_freq &= self.backend.clocks is not None

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

    def _maybe_poll(self, t_s: float) -> None:
        """Read GPU load and clock every ``poll_period_s`` (fallback when samples lack them)."""
        poll = self._poll
        if not (poll.want_util or poll.want_freq) or t_s - poll.last_t_s < self.poll_period_s:
            return
        poll.last_t_s = t_s
        try:
            load = self.backend.telemetry.gpu_load_pct() if poll.want_util else None
            if load is not None:
                poll.util_pct.append(float(load))
            if poll.want_freq:
                poll.freq_mhz.append(float(self.backend.clocks.state().cur_freq_mhz))
        except Exception as err:  # telemetry must never stop training
            log.debug("telemetry poll failed: %s", err)

    # -- results ----------------------------------------------------------------------------

    @property
    def time_s(self) -> float | None:
        """Wall time of the measured window (s, backend clock); None before it closed."""
        t0, t1 = self._t_run
        return None if t0 is None or t1 is None else t1 - t0

    @property
    def measured_steps(self) -> int:
        return max(len(self.steps) - self.warmup_steps, 0)

    def gpu_util_pct(self) -> float | None:
        m = self.measurement
        if m is not None and m.gpu_util_pct is not None:
            return m.gpu_util_pct
        return _mean(self._poll.util_pct)

    def mean_gpu_freq_mhz(self) -> float | None:
        m = self.measurement
        if m is not None and m.gpu_freq_mhz is not None:
            return m.gpu_freq_mhz
        return _mean(self._poll.freq_mhz)

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
        rows = []
        for s in self.steps:
            energy = None
            if self.sampler is not None and self.sampler.n_samples:
                energy = _finite(self.sampler.measure(s.t0_s, s.t1_s).energy_j)
            rows.append({"run_id": run_id, "step": s.step, "time_s": s.time_s, "energy_j": energy})
        return rows


def _cuda_sync() -> None:
    """``torch.cuda.synchronize()`` when CUDA is in use; nothing otherwise."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _rail_split(m: Measurement | None, sampler) -> tuple[float | None, float | None]:
    """GPU and CPU energy from the total rails: the rail naming GPU (not CPU) and vice versa."""
    if m is None or sampler is None:
        return None, None
    gpu_j, cpu_j = rail_energy_split_j(m.energy_by_rail_j, sampler.total_rails)
    return _finite(gpu_j), _finite(cpu_j)


# --------------------------------------------------------------------------------------------
# finetune()
# --------------------------------------------------------------------------------------------


@dataclass
class FinetuneResult:
    """What :func:`finetune` measured and wrote."""

    run: dict
    workload: dict
    metrics: dict
    steps: list[dict]
    epochs: list[Measurement]
    measurement: Measurement | None
    log_history: list[dict]
    dataset_dir: Path | None = None
    samples_path: Path | None = None


def _open_backend(backend: Backend | str, sysfs_root: str | None) -> tuple[Backend, bool]:
    if isinstance(backend, Backend):
        return backend, False
    from dvfslab.hw import get_backend

    kwargs = {"sysfs_root": sysfs_root} if sysfs_root else {}
    return get_backend(backend, **kwargs), True


def _check_backend(backend: Backend) -> None:
    """Refuse a virtual-time backend: real training does not advance the twin's clock."""
    if backend.simulated or backend.virtual_time:
        raise FinetuneError(
            f"backend {backend.name!r} runs on a virtual clock that real training does not advance, so its "
            "time and energy would be meaningless; simulate fine-tuning with `dvfslab sweep --backend sim`, "
            "or fine-tune for real with --backend jetson, nvml or none")


def _check_args(steps: int | None, epochs: float | None, batch_size: int, max_seq_len: int,
                warmup_steps: int) -> None:
    for name, value in (("steps", steps), ("epochs", epochs)):
        if value is not None and not value > 0:
            raise FinetuneError(f"--{name} must be > 0, got {value}")
    if batch_size < 1 or max_seq_len < 8:
        raise FinetuneError(f"need --batch-size >= 1 and --max-seq-len >= 8, got {batch_size} and {max_seq_len}")
    if steps is not None and warmup_steps >= steps:
        raise FinetuneError(f"--warmup-steps {warmup_steps} leaves nothing to measure in {steps} steps; "
                            "use fewer warm-up steps or more --steps")


def is_oom(err: BaseException) -> bool:
    """A CUDA or host out-of-memory error from torch."""
    import torch

    if isinstance(err, torch.OutOfMemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "not enough memory" in text
                                              or "can't allocate memory" in text)


def oom_error(model: str, batch_size: int, max_seq_len: int) -> FinetuneError:
    return FinetuneError(f"model {model!r} does not fit in memory with batch size {batch_size} and max "
                         f"sequence length {max_seq_len}; fix: lower --batch-size or --max-seq-len "
                         "(or pick a smaller model)")


def finetune(model_name_or_config, task: str, *, backend: Backend | str = "none",
             freq_mhz: float | None = None, governor=None, steps: int | None = None,
             epochs: float | None = None, batch_size: int = 32, max_seq_len: int = 128,
             seed: int = 0, out_dir: str | Path | None = None, warmup_steps: int = 0,
             learning_rate: float = 2e-5, sample_period_s: float | None = None, sampler=None,
             sysfs_root: str | None = None, data_dir: str | Path | None = None,
             n_train: int | None = None, n_eval: int | None = None, random_init: bool = False,
             tokenizer=None, model_label: str | None = None, policy: str | None = None,
             split: str | None = None, record_steps: bool = True, save_samples: bool = True,
             logging_steps: int = 50, progress: bool = True, callbacks: Sequence = (),
             trainer_kwargs: Mapping | None = None, sync_cuda: bool = True) -> FinetuneResult:
    """Fine-tune a sequence classifier on a GLUE task with the clock locked and energy measured.

    ``model_name_or_config``: a catalog name (``bert-base``, ``pythia-70m``), a hub id, a
    local model directory, or a ``PretrainedConfig`` / config dict (random init). ``task``: a
    GLUE task or ``synthetic:<task>``. ``steps`` wins over ``epochs`` (default: 1 epoch).
    ``backend``: a :class:`Backend` or a name for :func:`~dvfslab.hw.get_backend` (a
    backend opened here is closed here). With ``out_dir`` the run is appended to that dataset
    directory. Clocks are restored whatever happens.
    """
    from dvfslab.harness import glue
    from dvfslab.harness import records as rec

    _check_args(steps, epochs, batch_size, max_seq_len, warmup_steps)
    spec = glue.task_spec(task)
    task = (glue.SYNTHETIC_PREFIX if glue.is_synthetic(task) else "") + spec.name
    source = rec.resolve_model(model_name_or_config, random_init=random_init, label=model_label)
    data = glue.load_task(task, data_dir=data_dir, n_train=n_train, n_eval=n_eval, seed=seed)
    tok = rec.resolve_tokenizer(source, tokenizer, glue.task_texts(data["train"], spec))
    tokenized = glue.tokenize_task(data, tok, spec, max_seq_len)
    backend, opened = _open_backend(backend, sysfs_root)
    try:
        _check_backend(backend)
        if backend.power is None:
            warnings.warn(f"backend {backend.name!r} has no power reader: time and steps are recorded, "
                          "energy is left empty (not measured)", EnergyNotMeasuredWarning, stacklevel=2)
        model = rec.build_model(source, spec, tok, seed, batch_size, max_seq_len)
        workload = rec.workload_row(source, model, task, glue.avg_seq_len(tokenized["train"]),
                                    max_seq_len, batch_size, split)
        cb = DvfsCallback(backend, freq_mhz=freq_mhz, governor=governor, features=rec.features_of(workload),
                          warmup_steps=warmup_steps, sample_period_s=sample_period_s, sampler=sampler,
                          sync_cuda=sync_cuda)
        with tempfile.TemporaryDirectory(prefix="dvfslab-trainer-") as tmp:
            trainer = rec.make_trainer(model, tok, tokenized, tmp, [cb, *callbacks], steps=steps, epochs=epochs,
                                       batch_size=batch_size, seed=seed, learning_rate=learning_rate,
                                       logging_steps=logging_steps, progress=progress, extra=trainer_kwargs)
            context = rec.RunContext(source=source, spec=spec, task=task, backend=backend, cb=cb,
                                     workload=workload, policy=policy, seed=seed, out_dir=out_dir)
            t_wall = time.perf_counter()
            try:
                train_out = trainer.train()
            except BaseException as err:
                cb.close(err)
                rec.record_failure(context, err, trainer, save_samples)
                if isinstance(err, Exception) and is_oom(err):
                    raise oom_error(source.label, batch_size, max_seq_len) from None
                raise
            finally:
                cb.close()
            log.info("training took %.1f s wall", time.perf_counter() - t_wall)
            metrics = rec.evaluate(trainer, tokenized["validation"], spec)
        return rec.record_success(context, trainer, train_out, metrics, record_steps, save_samples)
    finally:
        if opened:
            backend.close()
