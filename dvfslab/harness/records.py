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

from dvfslab.core.files import OUTPUT_MARKER, file_lock, utc_now
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
        try:
            row["rep"] = append_run(out, ctx, row, steps)
        except Exception as err:  # the run is done: its record must outlive the failure to add it
            raise _kept(out, ctx, row, steps, err) from None
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
    return meta_of(ctx.backend, ctx.seed)


def meta_of(backend: Backend, seed: int) -> dict:
    """``meta.json`` for a dataset a run on ``backend`` would create."""
    clocks = backend.clocks
    meta = {"source": "simulated" if backend.simulated else "measured", "device": _device(backend),
            "freq_table_mhz": [float(f) for f in clocks.levels_mhz()] if clocks is not None else [],
            "baseline": "fmax", "created_at": utc_now(), "generator": "dvfslab finetune",
            "energy_measured": backend.power is not None, "clock_control": clocks is not None,
            "synthetic_data": False}
    if meta["source"] == "simulated":
        meta["seed"] = seed
    return meta


def check_target(out: str | Path, backend: Backend, seed: int) -> None:
    """Everything that would stop the run's record from joining the dataset at ``out``, checked
    before the model loads: a dataset that does not validate, another knob than the GPU clock
    (an imported power-limit dataset), a sweep's folder (its compaction rewrites ``runs.csv``
    from its own records), another source, energy or board levels (:func:`_merge_rules`)."""
    out = Path(out)
    if (out / "plan.json").exists():
        raise FinetuneError(f"{out} is a sweep's folder (plan.json): the sweep rewrites its runs.csv from its own "
                            "records, so this run would be lost there; write it to another --out directory")
    if not (out / "meta.json").exists():
        return
    ds = load_dataset(out)  # a DatasetError names the file and the fix
    if ds.knob.name != "gpu_freq_mhz":
        raise FinetuneError(f"{out / 'meta.json'}: the dataset's knob is {ds.knob.name} (levels "
                            f"{', '.join(ds.knob.format(v) for v in ds.levels)}), a fine-tuning run sets the GPU "
                            "clock (gpu_freq_mhz); write this run to another --out directory")
    _merge_rules(dict(ds.meta), meta_of(backend, seed), out)


def _merge_meta(meta: dict, new: dict, task: str, runs: pd.DataFrame, path: Path) -> dict:
    meta = _merge_rules(meta, new, path)
    meta["synthetic_data"] = bool(meta.get("synthetic_data")) or is_synthetic(task)
    meta["baseline"] = "maxn" if (runs["policy"] == "maxn").any() else "fmax"
    return meta


def _merge_rules(meta: dict, new: dict, path: Path) -> dict:
    """``meta`` of the dataset at ``path`` with a run whose own would be ``new``; FinetuneError
    when the two cannot share a dataset."""
    if meta.get("source") != new["source"]:
        raise FinetuneError(f"{path / 'meta.json'}: dataset is {meta.get('source')}, this run is {new['source']}; "
                            "write it to another --out directory")
    if meta.get("energy_measured", True) and not new["energy_measured"]:
        raise FinetuneError(f"{path}: dataset holds energy-measured runs but backend {new['device']['backend']!r} "
                            "measures no energy; write this run to another --out directory")
    levels = new["freq_table_mhz"]
    if meta.get("freq_table_mhz") and levels and sorted(map(float, meta["freq_table_mhz"])) != sorted(levels):
        raise FinetuneError(f"{path / 'meta.json'}: freq_table_mhz {meta['freq_table_mhz']} differs from this "
                            f"board's levels {levels}; write this run to another --out directory")
    if not meta.get("freq_table_mhz"):
        meta["freq_table_mhz"] = levels
    meta["clock_control"] = bool(meta["freq_table_mhz"])
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

    Under a lock file (removed when done); the merged dataset is written and validated in a
    scratch directory first, then each file replaces the real one atomically.
    """
    run, wl = append_record(out, new_meta(ctx), ctx.task, ctx.workload, run, steps)
    ctx.workload["workload_id"] = wl["workload_id"]
    return run["rep"]


def append_record(out: Path, new: dict, task: str, workload: Mapping, run: Mapping,
                  steps: list[dict]) -> tuple[dict, dict]:
    """Append one run record (its ``runs.csv`` row, ``workloads.csv`` row and steps; ``new``: the
    ``meta.json`` a dataset created by it would have) to the dataset at ``out``; return the row
    and the workload as written (their ``rep`` and ``workload_id`` set)."""
    with file_lock(out / ".dvfslab.lock"):
        if (out / "meta.json").exists():
            ds = load_dataset(out)
            meta, workloads, runs = dict(ds.meta), ds.workloads, ds.runs
            old_steps = ds.steps
        else:
            meta, workloads, runs, old_steps = dict(new), pd.DataFrame(columns=list(WORKLOAD_COLUMNS)), \
                pd.DataFrame(columns=list(RUN_COLUMNS)), None
        wl = dict(workload, workload_id=_workload_id(workloads, workload))
        run = dict(run, workload_id=wl["workload_id"])
        same = runs[(runs["workload_id"] == wl["workload_id"]) & (runs["policy"] == run["policy"])]
        freq = run["gpu_freq_mhz"]
        same = same[same["gpu_freq_mhz"].isna()] if freq is None else same[(same["gpu_freq_mhz"] - freq).abs() < 0.5]
        run["rep"] = len(same)
        if wl["workload_id"] not in set(workloads["workload_id"]):
            workloads = _concat(workloads, wl)
        runs = _concat(runs, run)
        meta = _merge_meta(meta, new, task, runs, out)
        step_frame = _concat(old_steps if old_steps is not None else pd.DataFrame(columns=list(STEP_COLUMNS)),
                             *steps) if (steps or old_steps is not None) else None
        with tempfile.TemporaryDirectory(prefix=".scratch-", dir=out) as scratch:
            write_dataset(scratch, meta, workloads, runs, step_frame)  # validates
            for name in ("workloads.csv", "runs.csv", "steps.csv", "meta.json"):
                if (Path(scratch) / name).exists():
                    os.replace(Path(scratch) / name, out / name)
        # the folder now holds a run no command can write again: its writer's --force may not replace it
        (out / OUTPUT_MARKER).unlink(missing_ok=True)
        return run, wl


#: where a finished run whose record could not join its dataset is kept (journal format,
#: :mod:`dvfslab.data.journal`), until ``dvfslab finetune --recover --out DIR`` adds it
PENDING_JOURNAL = "finetune.journal"


def _kept(out: Path, ctx: RunContext, row: dict, steps: list[dict], err: Exception) -> FinetuneError:
    """Keep a finished run's record in ``out``'s :data:`PENDING_JOURNAL`; the error to raise."""
    from dvfslab.data.journal import RunJournal

    reason = f"{type(err).__name__}: {err}".splitlines()[0]
    where = out / PENDING_JOURNAL
    try:
        out.mkdir(parents=True, exist_ok=True)
        journal = RunJournal(out, PENDING_JOURNAL)
        journal.append({"row": row, "workload": ctx.workload, "steps": steps, "meta": new_meta(ctx),
                        "task": ctx.task})
        journal.close()
    except Exception as keep_err:  # noqa: BLE001 - say both
        return FinetuneError(f"run {ctx.run_id} finished but could not be added to {out} ({reason}), nor kept in "
                             f"{where} ({type(keep_err).__name__}: {keep_err}); its figures are in the log above")
    return FinetuneError(f"run {ctx.run_id} finished but could not be added to {out} ({reason}); its record (runs.csv "
                         f"row, workload, {len(steps)} steps) is kept in {where} and the dataset's files are "
                         f"unchanged: fix the cause, then add it with: dvfslab finetune --recover --out {out}")


def recover_runs(out: str | Path) -> list[dict]:
    """Add the runs kept in ``out``'s :data:`PENDING_JOURNAL` to the dataset at ``out``, then
    remove the journal; return their rows as written. A record that still cannot join stops
    here with the reason (the journal is kept, those added before are removed from it)."""
    from dvfslab.data.journal import RunJournal, read_journal

    out = Path(out)
    records = [rec for _, rec in read_journal(out, PENDING_JOURNAL)]
    if not records:
        raise FinetuneError(f"{out / PENDING_JOURNAL}: no run is kept there: nothing to recover")
    added = []
    for i, rec in enumerate(records):
        try:
            row, _ = append_record(out, rec["meta"], rec["task"], rec["workload"], rec["row"], rec["steps"])
        except Exception as err:
            journal = RunJournal(out, PENDING_JOURNAL)
            journal.reset()
            for left in records[i:]:
                journal.append(left)
            journal.close()
            raise FinetuneError(f"{out}: run {rec['row'].get('run_id')} still cannot be added "
                                f"({type(err).__name__}: {err}); it stays in {out / PENDING_JOURNAL}") from None
        added.append(row)
    (out / PENDING_JOURNAL).unlink()
    return added


def _concat(frame: pd.DataFrame, *rows: Mapping) -> pd.DataFrame:
    if not rows:
        return frame
    add = pd.DataFrame([dict(r) for r in rows])
    if frame.empty:
        return add.reindex(columns=list(dict.fromkeys([*frame.columns, *add.columns])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # concat with all-NA columns
        return pd.concat([frame, add], ignore_index=True)


__all__ = ["PENDING_JOURNAL", "RunContext", "append_record", "append_run", "check_target", "features_of",
           "meta_of", "recover_runs", "measured_workload_row", "new_meta", "record_failure",
           "record_success"]
