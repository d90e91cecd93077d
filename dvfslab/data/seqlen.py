"""Average sequence length of a GLUE split, computed from the real data.

The catalog (:mod:`dvfslab.data.catalog`) holds *estimates* of tokens per example;
:func:`measure_avg_seq_len` counts them with a real tokenizer on local GLUE files or on the
``nyu-mll/glue`` dataset (online, or its local cache), for a measured ``avg_seq_len``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.data.catalog import GlueTask, get_task


def measure_avg_seq_len(task: str, tokenizer, split: str = "train", max_samples: int | None = None, *,
                        data_files: str | os.PathLike | None = None) -> float:
    """Average tokens per example of a GLUE split, computed from the real data.

    ``tokenizer`` is a Hugging Face tokenizer, a ``tokenizers.Tokenizer``, a hub id / local
    path (loaded with ``AutoTokenizer``), or any callable ``(text_a, text_b | None) -> int``.
    The data comes from ``data_files`` when given — a GLUE ``.tsv`` (original GLUE layout,
    CoLA without header included) or a ``.csv`` / ``.jsonl`` / ``.parquet`` file, or a directory
    holding ``<split>.<ext>`` or ``<TASK>/<split>.tsv`` — else from the ``nyu-mll/glue`` dataset
    through ``datasets`` (online, or its local cache). Raises :class:`DvfsError` naming the fix
    when neither is available (e.g. offline without files).
    """
    t = get_task(task)
    texts = _load_texts(t, split, data_files)
    if max_samples is not None:
        texts = texts[: int(max_samples)]
    if not texts:
        raise DvfsError(f"GLUE {t.display} {split}: no examples found in {data_files or 'nyu-mll/glue'}")
    count = _token_counter(tokenizer)
    return sum(count(a, b) for a, b in texts) / len(texts)


_COLUMN_ALIASES = {"sentence1": ("#1 String", "premise"), "sentence2": ("#2 String", "hypothesis"),
                   "premise": ("sentence1",), "hypothesis": ("sentence2",)}


def _load_texts(t: GlueTask, split: str, data_files) -> list[tuple[str, str | None]]:
    frame = _read_local(t, split, Path(data_files)) if data_files is not None else _read_hub(t, split)
    cols = []
    for col in t.text_columns:
        found = next((c for c in (col, *_COLUMN_ALIASES.get(col, ())) if c in frame.columns), None)
        if found is None:
            raise DvfsError(f"GLUE {t.display} data {data_files or 'nyu-mll/glue'}: column {col!r} is missing "
                            f"(columns: {', '.join(map(str, frame.columns))})")
        cols.append(frame[found].astype(str).tolist())
    second = cols[1] if t.is_pair else [None] * len(cols[0])
    return list(zip(cols[0], second, strict=True))


def _read_local(t: GlueTask, split: str, path: Path):
    if path.is_dir():
        names = [path / f"{split}{ext}" for ext in (".tsv", ".csv", ".jsonl", ".parquet")]
        names.append(path / t.display / f"{split}.tsv")
        found = next((p for p in names if p.is_file()), None)
        if found is None:
            raise DvfsError(f"{path}: no {split}.tsv/.csv/.jsonl/.parquet (nor {t.display}/{split}.tsv) for GLUE {t.display}")
        path = found
    if not path.is_file():
        raise DvfsError(f"{path}: file not found; pass a GLUE split file or a directory holding one")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".jsonl":
        return pd.read_json(path, lines=True)
    if suffix == ".tsv" and t.name == "cola" and not _has_header(path, "sentence"):
        return pd.read_csv(path, sep="\t", quoting=3, dtype=str, keep_default_na=False, header=None,
                           names=["source", "label", "star", "sentence"])
    sep = "\t" if suffix == ".tsv" else ","
    return pd.read_csv(path, sep=sep, quoting=3 if sep == "\t" else 0, dtype=str, keep_default_na=False,
                       on_bad_lines="skip")


def _has_header(path: Path, column: str) -> bool:
    with open(path, encoding="utf-8") as fh:
        return column in fh.readline().split("\t")


def _read_hub(t: GlueTask, split: str):
    if t.name == "mnli" and split == "validation":
        split = "validation_matched"
    try:
        import datasets

        return datasets.load_dataset("nyu-mll/glue", t.name, split=split).to_pandas()
    except ImportError as err:
        raise DvfsError("measuring sequence lengths from the hub needs `datasets` "
                        "(pip install 'dvfslab[finetune]'), or pass data_files=") from err
    except Exception as err:  # offline, no cache, unknown split …
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DvfsError(f"GLUE {t.display} ({split}) could not be loaded from the Hugging Face hub "
                        f"nyu-mll/glue: {first}. Go online once (it is then cached), or pass "
                        f"data_files= a local GLUE file or directory.") from None


def _token_counter(tokenizer) -> Callable[[str, str | None], int]:
    """Turn any supported tokenizer into ``(text_a, text_b | None) -> token count``."""
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        except Exception as err:
            raise DvfsError(f"tokenizer {str(tokenizer)!r} could not be loaded ({type(err).__name__}); "
                            "pass a local tokenizer directory or a tokenizer object") from None
    if not callable(tokenizer) and hasattr(tokenizer, "encode"):  # tokenizers.Tokenizer
        return lambda a, b: len(tokenizer.encode(a, b).ids)

    def count(a: str, b: str | None) -> int:
        out = tokenizer(a, b)  # HF tokenizers take text_pair=None for single sentences
        if isinstance(out, int):
            return out
        if isinstance(out, Mapping) or hasattr(out, "keys"):
            return len(out["input_ids"])
        return len(out)

    return count
