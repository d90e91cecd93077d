"""The whole fine-tuning experiment: :func:`finetune`.

Model and tokenizer (:mod:`dvfslab.harness.hf`), GLUE data (:mod:`dvfslab.harness.glue`), the
``Trainer`` with :class:`~dvfslab.harness.callback.DvfsCallback` attached (clock policy, power
sampling, step timing), the task metric, and one row appended to a dataset directory
(:mod:`dvfslab.harness.records`). The callback is entered as a context manager around
``train()``, so the clocks are reset and the sampler stopped whatever happens.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dvfslab.data.catalog import GlueTask
from dvfslab.harness import glue, hf
from dvfslab.harness import records as rec
from dvfslab.harness.callback import DvfsCallback
from dvfslab.harness.leases import lockable_level
from dvfslab.harness.types import EnergyNotMeasuredWarning, FinetuneError, FinetuneResult
from dvfslab.hw.base import Backend

log = logging.getLogger(__name__)

__all__ = ["DvfsCallback", "EnergyNotMeasuredWarning", "FinetuneError", "FinetuneResult", "finetune"]


@dataclass
class _Prepared:
    """Model source, task spec, tokenizer and tokenized splits of one run (before any clock)."""

    source: hf.ModelSource
    spec: GlueTask
    task: str
    tokenizer: object
    tokenized: object


def _open_backend(backend: Backend | str, sysfs_root: str | None) -> tuple[Backend, bool]:
    if isinstance(backend, Backend):
        return backend, False
    from dvfslab.hw import get_backend

    kwargs = {"sysfs_root": sysfs_root} if sysfs_root else {}
    return get_backend(backend, **kwargs), True


def _check_backend(backend: Backend, freq_mhz: float | None) -> None:
    """Refuse a virtual-time backend (real training does not advance the twin's clock) and a
    level the backend cannot lock, before anything runs (so no failed run is recorded for a
    request that never started); warn when there is no power reader."""
    if backend.simulated or backend.virtual_time:
        raise FinetuneError(
            f"backend {backend.name!r} runs on a virtual clock that real training does not advance, so its "
            "time and energy would be meaningless; simulate fine-tuning with `dvfslab sweep --backend sim`, "
            "or fine-tune for real with --backend jetson, nvml or none")
    if freq_mhz is not None:
        lockable_level(backend, freq_mhz)  # the fixed policy's exact level (FixedLevel.nearest is False)
    if backend.power is None:
        warnings.warn(f"backend {backend.name!r} has no power reader: time and steps are recorded, "
                      "energy is left empty (not measured)", EnergyNotMeasuredWarning, stacklevel=3)


def _check_out(out_dir, model, tokenizer, data_dir, sysfs_root) -> None:
    """--out is not, does not contain and does not lie inside what the run reads."""
    from dvfslab.core.files import refuse_overlap

    def local(path):
        return path if isinstance(path, (str, Path)) and Path(path).exists() else None

    root = sysfs_root if sysfs_root and Path(sysfs_root).resolve() != Path("/") else None
    refuse_overlap(out_dir, {"--model": local(model), "--tokenizer": local(tokenizer), "--data-dir": data_dir,
                             "--sysfs-root": root}, "dvfslab finetune")


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


def _prepare(model, task: str, *, random_init: bool, model_label: str | None, data_dir, n_train,
             n_eval, seed: int, tokenizer, max_seq_len: int) -> _Prepared:
    spec = glue.task_spec(task)
    task = (glue.SYNTHETIC_PREFIX if glue.is_synthetic(task) else "") + spec.name
    source = hf.resolve_model(model, random_init=random_init, label=model_label)
    data = glue.load_task(task, data_dir=data_dir, n_train=n_train, n_eval=n_eval, seed=seed)
    tok = hf.resolve_tokenizer(source, tokenizer, glue.task_texts(data["train"], spec))
    return _Prepared(source, spec, task, tok, glue.tokenize_task(data, tok, spec, max_seq_len))


def _train(trainer, cb: DvfsCallback, context: rec.RunContext, save_samples: bool, batch_size: int,
           max_seq_len: int):
    """``trainer.train()`` inside the callback's context; a failure is recorded, then raised."""
    t_wall = time.perf_counter()
    try:
        with cb:  # clocks reset and sampler stopped, even when train() raises
            out = trainer.train()
    except BaseException as err:
        rec.record_failure(context, err, save_samples)
        if isinstance(err, Exception) and hf.is_oom(err):
            raise hf.oom_error(context.source.label, batch_size, max_seq_len) from None
        raise
    log.info("training took %.1f s wall", time.perf_counter() - t_wall)
    return out


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
    _check_args(steps, epochs, batch_size, max_seq_len, warmup_steps)
    if out_dir is not None:
        _check_out(out_dir, model_name_or_config, tokenizer, data_dir, sysfs_root)
    phases: dict[str, float] = {}
    backend, opened = _open_backend(backend, sysfs_root)
    with contextlib.ExitStack() as stack:
        if opened:
            stack.callback(backend.close)
        _check_backend(backend, freq_mhz)  # before the minutes of loading: a refusal comes at once
        if out_dir is not None:
            rec.check_target(out_dir, backend, seed)  # the dataset's knob, levels, source: before, not after
        t0 = time.perf_counter()
        p = _prepare(model_name_or_config, task, random_init=random_init, model_label=model_label,
                     data_dir=data_dir, n_train=n_train, n_eval=n_eval, seed=seed, tokenizer=tokenizer,
                     max_seq_len=max_seq_len)
        phases["tokenization"] = time.perf_counter() - t0
        model = hf.build_model(p.source, p.spec, p.tokenizer, seed, batch_size, max_seq_len)
        workload = rec.measured_workload_row(p.source, model, p.task, glue.avg_seq_len(p.tokenized["train"]),
                                             max_seq_len, batch_size, split)
        cb = DvfsCallback(backend, freq_mhz=freq_mhz, governor=governor, features=rec.features_of(workload),
                          warmup_steps=warmup_steps, sample_period_s=sample_period_s, sampler=sampler,
                          sync_cuda=sync_cuda)
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="dvfslab-trainer-"))
        trainer = hf.make_trainer(model, p.tokenizer, p.tokenized, tmp, [cb, *callbacks], steps=steps,
                                  epochs=epochs, batch_size=batch_size, seed=seed, learning_rate=learning_rate,
                                  logging_steps=logging_steps, progress=progress, extra=trainer_kwargs)
        context = rec.RunContext(source=p.source, spec=p.spec, task=p.task, backend=backend, cb=cb,
                                 workload=workload, policy=policy, seed=seed, out_dir=out_dir)
        t0 = time.perf_counter()
        train_out = _train(trainer, cb, context, save_samples, batch_size, max_seq_len)
        phases["training"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        metrics = hf.evaluate(trainer, p.tokenized["validation"], p.spec)
        phases["evaluation"] = time.perf_counter() - t0
        return rec.record_success(context, trainer, train_out, metrics, record_steps, save_samples, phases)
