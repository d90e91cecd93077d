"""Writing a fine-tuning run into a dataset directory (the contract of :mod:`dvfslab.data.contract`).

* :func:`measured_workload_row` and :func:`features_of`: the ``workloads.csv`` row and what a governor
  sees of it before the run;
* :func:`record_success` / :func:`record_failure`: the ``runs.csv`` row (``status`` ok or
  failed), the step rows and the power trace;
* :func:`append_run`: appends one run under a lock, validating the merged dataset in a scratch
  copy before any file of the real directory is replaced; :func:`new_meta` is ``meta.json``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from dvfslab.core.files import file_lock, utc_now
from dvfslab.data.catalog import GlueTask, workload_record
from dvfslab.data.contract import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    WORKLOAD_COLUMNS,
    load_dataset,
    write_dataset,
)
from dvfslab.harness.glue import is_synthetic
from dvfslab.harness.hf import ModelSource, is_decoder
from dvfslab.harness.types import FinetuneError, FinetuneResult
from dvfslab.hw.base import Backend

if TYPE_CHECKING:  # the callback pulls in transformers; records only read its results
    from dvfslab.harness.callback import DvfsCallback

log = logging.getLogger(__name__)


def measured_workload_row(source: ModelSource, model, task: str, avg_len: float, max_seq_len: int,
                          batch_size: int, split: str | None) -> dict:
    """The ``workloads.csv`` row (:func:`dvfslab.data.catalog.workload_record`) with the features
    of the loaded model (its config and parameter count) and of the tokenized training split."""
    cfg = model.config
    dec = is_decoder(cfg)
    model_type = source.model_type or (None if dec is None else ("decoder" if dec else "encoder"))
    return workload_record(
        f"{source.label}/{task}", source.label, task,
        model_family=source.family or ("pythia" if "pythia" in source.label.lower() else cfg.model_type),
        model_type=model_type, params_m=round(sum(p.numel() for p in model.parameters()) / 1e6, 4),
        n_layers=getattr(cfg, "num_hidden_layers", None), hidden_size=getattr(cfg, "hidden_size", None),
        avg_seq_len=round(avg_len, 2), max_seq_len=max_seq_len, batch_size=batch_size, split=split)


def features_of(workload: Mapping) -> dict:
    """What a governor's ``decide`` sees before the run (GPU utilization is not known yet)."""
    keys = ("workload_id", "model", "model_type", "params_m", "n_layers", "hidden_size", "avg_seq_len",
            "task", "batch_size", "max_seq_len")
    out = {k: workload[k] for k in keys}
    out["is_decoder"] = None if workload["model_type"] is None else float(workload["model_type"] == "decoder")
    return out


@dataclass
class RunContext:
    """Everything :func:`record_success` / :func:`record_failure` need besides the trainer."""

    source: ModelSource
    spec: GlueTask
    task: str
    backend: Backend
    cb: DvfsCallback
    workload: dict
    policy: str | None
    seed: int
    out_dir: str | Path | None
    run_id: str = field(default_factory=lambda: f"ft-{utc_now().replace(':', '').replace('-', '')}-{uuid.uuid4().hex[:6]}")


def _policy(ctx: RunContext) -> str:
    """The run's policy name: given by the caller, else the callback's level policy's."""
    return ctx.policy or ctx.cb.policy.name


def _run_row(ctx: RunContext, status: str, eval_metric: float | None, error: str | None = None) -> dict:
    row = {"run_id": ctx.run_id, "workload_id": ctx.workload["workload_id"], "policy": _policy(ctx), "rep": 0,
           **ctx.cb.run_fields(), "eval_metric": eval_metric, "status": status, "error": error,
           "eval_metric_name": ctx.spec.metric, "data": "synthetic" if is_synthetic(ctx.task) else "glue",
           "backend": ctx.backend.name, "warmup_steps": ctx.cb.warmup_steps, "seed": ctx.seed,
           "tokenizer": ctx.source.tokenizer_kind, "init": "pretrained" if ctx.source.weights else "random"}
    return row


def _save_samples(ctx: RunContext, out: Path | None, extra: Mapping) -> Path | None:
    sampler = ctx.cb.sampler
    if out is None or sampler is None or not sampler.n_samples:
        return None
    meta = {"run_id": ctx.run_id, "workload_id": ctx.workload["workload_id"], "backend": ctx.backend.name,
            "source": "simulated" if ctx.backend.simulated else "measured", **extra}
    return sampler.save(out / "samples" / f"{ctx.run_id}.csv", meta=meta)


def record_success(ctx: RunContext, trainer, train_out, metrics: Mapping, record_steps: bool,
                   save_samples: bool, phases_s: Mapping | None = None) -> FinetuneResult:
    """Assemble the run row; append it (and steps, samples) to ``ctx.out_dir`` when given.

    ``phases_s``: wall seconds of the non-training phases and of ``train()`` (tokenization,
    training, evaluation), kept in the result and the samples file, not in the energy window.
    """
    row = _run_row(ctx, "ok", metrics.get("metric"))
    row["train_loss"] = float(train_out.training_loss)
    steps = ctx.cb.step_rows(ctx.run_id) if record_steps else []
    out = Path(ctx.out_dir) if ctx.out_dir is not None else None
    phases = {k: float(v) for k, v in (phases_s or {}).items()}
    samples = _save_samples(ctx, out, {"metrics": dict(metrics), "phases_s": phases}) if save_samples else None
    if out is not None:
        row["rep"] = append_run(out, ctx, row, steps)
    return FinetuneResult(run=row, workload=ctx.workload, metrics=dict(metrics), steps=steps,
                          epochs=[m for m in ctx.cb.epochs if m is not None], measurement=ctx.cb.measurement,
                          log_history=list(trainer.state.log_history), dataset_dir=out, samples_path=samples,
                          phases_s=phases)


def record_failure(ctx: RunContext, err: BaseException, save_samples: bool) -> None:
    """Append a ``status=failed`` row (with the error) so nothing is lost; never raises."""
    if ctx.out_dir is None:
        return
    try:
        out = Path(ctx.out_dir)
        row = _run_row(ctx, "failed", None, f"{type(err).__name__}: {err}".splitlines()[0][:300])
        if save_samples:
            _save_samples(ctx, out, {"error": row["error"]})
        append_run(out, ctx, row, [])
    except Exception as rec_err:  # the original error matters more
        log.warning("could not record the failed run %s: %s", ctx.run_id, rec_err)


# --------------------------------------------------------------------------------------------
# Appending to a dataset directory
# --------------------------------------------------------------------------------------------


def _device(backend: Backend) -> dict:
    dev = {k: v for k, v in backend.description.items() if isinstance(v, (str, int, float, bool, list, type(None)))}
    dev["backend"] = backend.name
    try:
        import torch

        dev["torch_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - description only
        dev["torch_device"] = "unknown"
    return dev


def new_meta(ctx: RunContext) -> dict:
    """``meta.json`` for a dataset created by this run."""
    clocks = ctx.backend.clocks
    meta = {"source": "simulated" if ctx.backend.simulated else "measured", "device": _device(ctx.backend),
            "freq_table_mhz": [float(f) for f in clocks.levels_mhz()] if clocks is not None else [],
            "baseline": "fmax", "created_at": utc_now(), "generator": "dvfslab finetune",
            "energy_measured": ctx.backend.power is not None, "clock_control": clocks is not None,
            "synthetic_data": False}
    if meta["source"] == "simulated":
        meta["seed"] = ctx.seed
    return meta


def _merge_meta(meta: dict, ctx: RunContext, runs: pd.DataFrame, path: Path) -> dict:
    new = new_meta(ctx)
    if meta.get("source") != new["source"]:
        raise FinetuneError(f"{path / 'meta.json'}: dataset is {meta.get('source')}, this run is {new['source']}; "
                            "write it to another --out directory")
    if meta.get("energy_measured", True) and not new["energy_measured"]:
        raise FinetuneError(f"{path}: dataset holds energy-measured runs but backend {ctx.backend.name!r} "
                            "measures no energy; write this run to another --out directory")
    levels = new["freq_table_mhz"]
    if meta.get("freq_table_mhz") and levels and sorted(map(float, meta["freq_table_mhz"])) != sorted(levels):
        raise FinetuneError(f"{path / 'meta.json'}: freq_table_mhz {meta['freq_table_mhz']} differs from this "
                            f"board's levels {levels}; write this run to another --out directory")
    if not meta.get("freq_table_mhz"):
        meta["freq_table_mhz"] = levels
    meta["clock_control"] = bool(meta["freq_table_mhz"])
    meta["synthetic_data"] = bool(meta.get("synthetic_data")) or is_synthetic(ctx.task)
    meta["baseline"] = "maxn" if (runs["policy"] == "maxn").any() else "fmax"
    return meta


def _workload_id(workloads: pd.DataFrame, row: dict) -> str:
    """Reuse the id when the existing workload has the same batch and length settings."""
    same = workloads[workloads["workload_id"] == row["workload_id"]]
    if same.empty or (int(same["batch_size"].iloc[0]) == row["batch_size"]
                      and int(same["max_seq_len"].iloc[0]) == row["max_seq_len"]):
        return row["workload_id"]
    return f"{row['workload_id']}/bs{row['batch_size']}-len{row['max_seq_len']}"


def append_run(out: Path, ctx: RunContext, run: dict, steps: list[dict]) -> int:
    """Append ``run`` (and its workload, steps) to the dataset at ``out``; return its ``rep``.

    Under a lock file; the merged dataset is written and validated in a scratch directory
    first, then each file replaces the real one atomically.
    """
    with file_lock(out / ".dvfslab.lock"):
        if (out / "meta.json").exists():
            ds = load_dataset(out)
            meta, workloads, runs = dict(ds.meta), ds.workloads, ds.runs
            old_steps = ds.steps
        else:
            meta, workloads, runs, old_steps = new_meta(ctx), pd.DataFrame(columns=list(WORKLOAD_COLUMNS)), \
                pd.DataFrame(columns=list(RUN_COLUMNS)), None
        wl = dict(ctx.workload, workload_id=_workload_id(workloads, ctx.workload))
        run = dict(run, workload_id=wl["workload_id"])
        same = runs[(runs["workload_id"] == wl["workload_id"]) & (runs["policy"] == run["policy"])]
        freq = run["gpu_freq_mhz"]
        same = same[same["gpu_freq_mhz"].isna()] if freq is None else same[(same["gpu_freq_mhz"] - freq).abs() < 0.5]
        run["rep"] = len(same)
        if wl["workload_id"] not in set(workloads["workload_id"]):
            workloads = _concat(workloads, wl)
        runs = _concat(runs, run)
        meta = _merge_meta(meta, ctx, runs, out)
        step_frame = _concat(old_steps if old_steps is not None else pd.DataFrame(columns=list(STEP_COLUMNS)),
                             *steps) if (steps or old_steps is not None) else None
        with tempfile.TemporaryDirectory(prefix=".scratch-", dir=out) as scratch:
            write_dataset(scratch, meta, workloads, runs, step_frame)  # validates
            for name in ("workloads.csv", "runs.csv", "steps.csv", "meta.json"):
                if (Path(scratch) / name).exists():
                    os.replace(Path(scratch) / name, out / name)
        ctx.workload["workload_id"] = wl["workload_id"]
        return run["rep"]


def _concat(frame: pd.DataFrame, *rows: Mapping) -> pd.DataFrame:
    if not rows:
        return frame
    add = pd.DataFrame([dict(r) for r in rows])
    if frame.empty:
        return add.reindex(columns=list(dict.fromkeys([*frame.columns, *add.columns])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # concat with all-NA columns
        return pd.concat([frame, add], ignore_index=True)


__all__ = ["RunContext", "append_run", "features_of", "measured_workload_row", "new_meta", "record_failure",
           "record_success"]
