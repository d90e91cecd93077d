"""GLUE tasks for the fine-tuning harness: specs, loading, a synthetic generator, metrics.

Three sources for a task's data, chosen by :func:`load_task`:

* ``synthetic:<task>`` — an offline generator with the task's *shape* (text columns, number
  of labels, regression for STS-B, label meaning) and learnable labels. Its results are
  labelled synthetic everywhere they are recorded; they say nothing about GLUE accuracy.
* ``data_dir`` — local files with the Hugging Face GLUE column names: a ``save_to_disk``
  folder, or ``train.*`` and ``validation.*`` files (csv, tsv, json, jsonl, parquet).
* the Hugging Face hub (``nyu-mll/glue``), or its local cache when offline.

Metrics are implemented with numpy (no ``evaluate`` package): accuracy, binary F1, Matthews
correlation, and Pearson / Spearman for STS-B.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.data.catalog import GlueTask, UnknownWorkloadError, get_task

SYNTHETIC_PREFIX = "synthetic:"
HUB_DATASET = "nyu-mll/glue"


class TaskError(DvfsError):
    """An unknown task, or task data that cannot be loaded."""


def task_spec(task: str) -> GlueTask:
    """The catalog's :class:`~dvfslab.data.catalog.GlueTask` of a task name (``sst2``, ``SST-2``) or
    ``synthetic:<task>``; :class:`TaskError` naming the fix when unknown."""
    base = task[len(SYNTHETIC_PREFIX):] if task.startswith(SYNTHETIC_PREFIX) else task
    try:
        return get_task(base)
    except UnknownWorkloadError as err:
        raise TaskError(f"{err} Use synthetic:<task> for the offline generator.") from None


def is_synthetic(task: str) -> bool:
    return task.startswith(SYNTHETIC_PREFIX)


# --------------------------------------------------------------------------------------------
# Synthetic generator
# --------------------------------------------------------------------------------------------

_POSITIVE = ("good great excellent wonderful delightful superb brilliant charming moving "
             "beautiful fun enjoyable lovely fantastic remarkable").split()
_NEGATIVE = ("bad awful terrible boring dull poor weak tedious painful ugly stupid "
             "disappointing annoying mediocre horrible").split()
_FILLER = ("the a film movie story plot actor scene music city house day night man woman "
           "child dog road river book table window garden school office train car phone "
           "letter friend teacher doctor market island winter summer morning evening "
           "question answer company team game song picture voice idea place time year "
           "world water light paper door street room table chair river forest").split()
_BAD_BIGRAMS = ("of of", "the a", "is are", "to to", "a the", "was were")
_NEGATION = ("not", "never", "no")


def _words(rng: np.random.Generator, mean: int, pool: list[str] | tuple[str, ...]) -> list[str]:
    n = max(3, int(rng.poisson(mean)))
    return [pool[i] for i in rng.integers(0, len(pool), size=n)]


def _sentiment(rng: np.random.Generator, mean: int, label: int) -> str:
    words = _words(rng, mean, _FILLER)
    own, other = (_POSITIVE, _NEGATIVE) if label == 1 else (_NEGATIVE, _POSITIVE)
    inserts = [own[rng.integers(len(own))] for _ in range(2)]
    if rng.random() < 0.3:
        inserts.append(other[rng.integers(len(other))])
    for w in inserts:
        words.insert(int(rng.integers(0, len(words) + 1)), w)
    return " ".join(words)


def _acceptability(rng: np.random.Generator, mean: int, label: int) -> str:
    words = _words(rng, mean, _FILLER)
    if label == 0:
        words.insert(int(rng.integers(0, len(words) + 1)), _BAD_BIGRAMS[rng.integers(len(_BAD_BIGRAMS))])
    return " ".join(words)


def _pair(rng: np.random.Generator, spec: GlueTask, label: float) -> tuple[str, str]:
    """Second text derived from the first: overlap encodes the label."""
    first = _words(rng, spec.mean_words[0], _FILLER)
    n2 = max(3, int(rng.poisson(spec.mean_words[1])))
    fresh = [_FILLER[i] for i in rng.integers(0, len(_FILLER), size=n2)]
    borrowed = [first[i] for i in rng.integers(0, len(first), size=n2)]
    if spec.is_regression:  # stsb: score = 5 x share of borrowed words
        k = int(round(label / 5.0 * n2))
        second = borrowed[:k] + fresh[k:]
    elif spec.num_labels == 3:  # mnli: entailment, neutral, contradiction
        half = n2 // 2
        second = {0: borrowed, 1: borrowed[:half] + fresh[half:]}.get(int(label), borrowed)
        if int(label) == 2:
            second = [_NEGATION[rng.integers(len(_NEGATION))]] + second
    else:
        related = int(label) == (0 if spec.name in ("qnli", "rte") else 1)
        second = borrowed if related else fresh
    return " ".join(first), " ".join(second)


def synthetic_rows(spec: GlueTask, n: int, seed: int) -> dict[str, list]:
    """``n`` examples with the columns of ``spec`` (plus ``label`` and ``idx``), balanced labels."""
    rng = np.random.default_rng(seed)
    if spec.is_regression:
        labels = [float(round(x, 2)) for x in rng.uniform(0.0, 5.0, size=n)]
    else:
        labels = [int(i % spec.num_labels) for i in rng.permutation(n)]
    cols: dict[str, list] = {f: [] for f in spec.text_columns}
    for label in labels:
        if spec.is_pair:
            a, b = _pair(rng, spec, label)
            cols[spec.text_columns[0]].append(a)
            cols[spec.text_columns[1]].append(b)
        elif spec.name == "cola":
            cols["sentence"].append(_acceptability(rng, spec.mean_words[0], int(label)))
        else:
            cols["sentence"].append(_sentiment(rng, spec.mean_words[0], int(label)))
    cols["label"] = labels
    cols["idx"] = list(range(n))
    return cols


def synthetic_task(task: str, *, n_train: int = 512, n_eval: int = 128, seed: int = 0):
    """A ``datasets.DatasetDict`` (``train``, ``validation``) shaped like ``task``."""
    import datasets

    spec = task_spec(task)
    return datasets.DatasetDict({
        "train": datasets.Dataset.from_dict(synthetic_rows(spec, n_train, seed)),
        "validation": datasets.Dataset.from_dict(synthetic_rows(spec, n_eval, seed + 1)),
    })


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

_LOCAL_EXT = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def _find_split(root: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for ext in _LOCAL_EXT:
            if (root / f"{name}{ext}").is_file():
                return root / f"{name}{ext}"
    return None


def _load_local(spec: GlueTask, data_dir: Path):
    import datasets

    if not data_dir.is_dir():
        raise TaskError(f"--data-dir {data_dir} is not a directory; give a folder with train.* and validation.* files")
    if (data_dir / "dataset_dict.json").is_file():
        return datasets.load_from_disk(str(data_dir))
    train = _find_split(data_dir, ("train",))
    valid = _find_split(data_dir, (spec.eval_split, "validation", "dev"))
    if train is None or valid is None:
        raise TaskError(f"{data_dir}: need train.<ext> and validation.<ext> (ext: {', '.join(_LOCAL_EXT)}) "
                        f"with columns {', '.join(spec.text_columns)}, label")
    kw = {"delimiter": "\t"} if train.suffix == ".tsv" else {}
    files = {"train": str(train), "validation": str(valid)}
    return datasets.load_dataset(_LOCAL_EXT[train.suffix], data_files=files, **kw)


def _load_hub(spec: GlueTask):
    import datasets

    try:
        return datasets.load_dataset(HUB_DATASET, spec.name)
    except Exception as err:  # ConnectionError, OfflineModeIsEnabled, DatasetNotFoundError …
        offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
        why = "offline mode is on" if offline else f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
        raise TaskError(f"GLUE task {spec.name!r} cannot be loaded from the hub ({why}) and is not in "
                        f"the local cache; fix: run once online, pass --data-dir with local "
                        f"train/validation files, or use --task synthetic:{spec.name}") from None


def load_task(task: str, *, data_dir: str | os.PathLike | None = None, n_train: int | None = None,
              n_eval: int | None = None, seed: int = 0):
    """Load ``task`` as a ``DatasetDict`` with ``train`` and ``validation`` splits.

    ``n_train`` / ``n_eval`` cap the split sizes (a seeded random subset; for the synthetic
    generator they are the sizes, default 512 / 128).
    """
    import datasets

    spec = task_spec(task)
    if is_synthetic(task):
        return synthetic_task(task, n_train=n_train or 512, n_eval=n_eval or 128, seed=seed)
    raw = _load_local(spec, Path(data_dir)) if data_dir else _load_hub(spec)
    eval_name = next((s for s in (spec.eval_split, "validation", "dev") if s in raw), None)
    if "train" not in raw or eval_name is None:
        raise TaskError(f"task {task!r}: data has splits {list(raw)}; need train and {spec.eval_split}")
    out = datasets.DatasetDict({"train": raw["train"], "validation": raw[eval_name]})
    for split, cap in (("train", n_train), ("validation", n_eval)):
        missing = [c for c in (*spec.text_columns, "label") if c not in out[split].column_names]
        if missing:
            raise TaskError(f"task {task!r}, split {split}: columns {', '.join(missing)} are missing "
                            f"(have {', '.join(out[split].column_names)}); use the GLUE column names")
        if cap and cap < len(out[split]):
            out[split] = out[split].shuffle(seed=seed).select(range(cap))
    if spec.name != "stsb":  # GLUE test splits carry label -1; keep labelled rows only
        out = out.filter(lambda ex: ex["label"] >= 0)
    return out


# --------------------------------------------------------------------------------------------
# Tokenization
# --------------------------------------------------------------------------------------------


def build_local_tokenizer(texts, *, vocab_size: int, decoder: bool = False):
    """A word-level tokenizer trained in memory on ``texts`` (no download).

    For randomly initialised models when no pretrained tokenizer is available offline: ids
    stay below ``vocab_size``; encoders get BERT-style ``[CLS] a [SEP] b [SEP]``, decoders a
    GPT-style layout with pad = eos (``<|endoftext|>``) and ``[SEP]`` between the two texts.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if not decoder else ["<|endoftext|>", "[UNK]", "[SEP]"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=specials))
    sep = ("[SEP]", tok.token_to_id("[SEP]"))
    if decoder:
        tok.post_processor = processors.TemplateProcessing(single="$A", pair="$A [SEP] $B:1", special_tokens=[sep])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|endoftext|>",
                                       unk_token="[UNK]", sep_token="[SEP]",
                                       model_input_names=["input_ids", "attention_mask"])
    cls = ("[CLS]", tok.token_to_id("[CLS]"))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[cls, sep])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_input_names=["input_ids", "token_type_ids", "attention_mask"])


def task_texts(data, spec: GlueTask) -> list[str]:
    """Every text of a split, for training a local tokenizer."""
    return [t for f in spec.text_columns for t in data[f]]


def tokenize_task(data, tokenizer, spec: GlueTask, max_seq_len: int):
    """Tokenize every split (truncation at ``max_seq_len``, no padding: the collator pads)."""

    def encode(batch):
        texts = [batch[f] for f in spec.text_columns]
        return tokenizer(*texts, truncation=True, max_length=max_seq_len)

    drop = [c for c in data["train"].column_names if c != "label"]
    out = data.map(encode, batched=True, remove_columns=drop, desc=None)
    if spec.is_regression:
        out = out.cast_column("label", _float_feature())
    return out.rename_column("label", "labels")


def _float_feature():
    import datasets

    return datasets.Value("float32")


def avg_seq_len(tokenized_split) -> float:
    """Mean number of tokens per example (after truncation) of a tokenized split."""
    lengths = [len(ids) for ids in tokenized_split["input_ids"]]
    return float(np.mean(lengths)) if lengths else float("nan")


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def _f1(pred: np.ndarray, ref: np.ndarray) -> float:
    tp = float(np.sum((pred == 1) & (ref == 1)))
    fp = float(np.sum((pred == 1) & (ref == 0)))
    fn = float(np.sum((pred == 0) & (ref == 1)))
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def _matthews(pred: np.ndarray, ref: np.ndarray) -> float:
    tp = float(np.sum((pred == 1) & (ref == 1)))
    tn = float(np.sum((pred == 0) & (ref == 0)))
    fp = float(np.sum((pred == 1) & (ref == 0)))
    fn = float(np.sum((pred == 0) & (ref == 1)))
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / den) if den else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank), like ``scipy.stats.rankdata``."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def compute_metrics(spec: GlueTask, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Task metrics from model outputs (logits, or scores for regression) and references.

    The key ``"metric"`` holds the task's headline figure (``spec.metric``, as in the catalog):
    accuracy; F1 for MRPC and QQP; Matthews correlation for CoLA; Pearson for STS-B (Spearman
    is reported next to it).
    """
    preds = np.asarray(predictions)
    ref = np.asarray(labels)
    if spec.is_regression:
        score = preds.reshape(-1).astype(float)
        pearson, spearman = _pearson(score, ref.astype(float)), _pearson(_ranks(score), _ranks(ref.astype(float)))
        out = {"pearson": pearson, "spearman": spearman}
    else:
        pred = preds.argmax(axis=-1) if preds.ndim > 1 else preds
        out = {"accuracy": float(np.mean(pred == ref)) if len(ref) else float("nan")}
        if spec.num_labels == 2:
            out["f1"] = _f1(pred, ref)
            out["matthews_correlation"] = _matthews(pred, ref)
    out["metric"] = out[spec.metric]
    return out
