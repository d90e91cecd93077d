"""The dataset directory contract (schema version 1): read, validate, write atomically.

A dataset is a directory holding ``meta.json``, ``workloads.csv``, ``runs.csv`` and optionally
``steps.csv`` (and per-run power traces under ``samples/``). See docs/method.md and the data
dictionary in the README.

The *knob* is what a fixed-policy run sets: ``meta.json`` names it (``"knob": "gpu_freq_mhz"``,
the default when absent, so every older dataset loads unchanged, or ``"power_limit_w"``); the
runs.csv column holding each run's level and the meta.json key listing the levels follow it
(:data:`KNOBS`). A joint dataset (several clocks set together, issue #32) lists its clocks in
``"knobs"`` and the settings it ran in ``"settings"``; runs.csv carries one column per clock (as
read back) and the loader derives each fixed run's level, the index of its setting, into the
column ``setting`` (:func:`joint_levels`). Every problem is reported as a :class:`DatasetError` naming the
file, the column and the row (1-based data row; the CSV line is one more because of the
header), so ``dvfslab validate`` can print one line and exit 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.core.files import atomic_write_bytes, atomic_write_json, atomic_write_text  # noqa: F401  (re-exported)
from dvfslab.data.csvhints import missing_column
from dvfslab.data.journal import journal_path, read_journal
from dvfslab.data.knobs import (  # noqa: F401  (re-exported)
    DEFAULT_KNOB,
    JOINT_KNOBS,
    KNOBS,
    SETTING,
    Knob,
    get_knob,
)
from dvfslab.data.schema import (  # noqa: F401  (re-exported: the contract's public names)
    BASELINES,
    CLOCK_COLUMNS,
    META_REQUIRED,
    MODEL_TYPES,
    RUN_COLUMNS,
    RUN_EXTRA_COLUMNS,
    RUN_STATUSES,
    SCHEMA_VERSION,
    SOURCES,
    SPLITS,
    STEP_COLUMNS,
    WORKLOAD_COLUMNS,
    WORKLOAD_EXTRA_COLUMNS,
    Dataset,
    DatasetError,
    knob_name,
    run_columns,
)
from dvfslab.data.validation import (  # noqa: F401  (re-exported)
    clock_warnings,
    dataset_pins,
    joint_levels,
    validate,
)

# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def load_dataset(path: str | os.PathLike) -> Dataset:
    """Load and validate a dataset directory; raise :class:`DatasetError` on the first problem."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(root, "not a directory", fix="pass a dataset directory holding meta.json, workloads.csv and runs.csv")
    meta = _read_meta(root / "meta.json")
    workloads = _read_table(root / "workloads.csv", WORKLOAD_COLUMNS, WORKLOAD_EXTRA_COLUMNS)
    runs = read_runs(root, get_knob(knob_name(meta)))
    if knob_name(meta) == SETTING:
        runs[SETTING] = joint_levels(root / "runs.csv", runs, meta["knobs"], meta["settings"])
    steps_path = root / "steps.csv"
    steps = _read_table(steps_path, STEP_COLUMNS) if steps_path.exists() else None
    ds = Dataset(root, meta, workloads, runs, steps)
    validate(ds)
    return ds


def _read_meta(path: Path) -> dict:
    if not path.exists():
        raise DatasetError(path, "file is missing", fix="every dataset needs meta.json (see the README's data dictionary)")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DatasetError(path, f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    if not isinstance(meta, dict):
        raise DatasetError(path, "must hold a JSON object")
    name = knob_name(meta)
    if name not in KNOBS:
        raise DatasetError(path, f"knob {name!r} is not one of {', '.join(KNOBS)}",
                           fix="name the quantity the runs set, or leave 'knob' out for the GPU clock")
    knob = KNOBS[name]
    required = tuple(knob.table_key if k == "freq_table_mhz" else k for k in META_REQUIRED)
    for key in required:
        if key not in meta:
            raise DatasetError(path, f"key '{key}' is missing", fix=f"required keys: {', '.join(required)}")
    if meta["schema_version"] != SCHEMA_VERSION:
        raise DatasetError(path, f"unknown schema_version {meta['schema_version']!r}; this dvfslab reads version {SCHEMA_VERSION}",
                           fix="upgrade dvfslab or convert the dataset")
    if meta["source"] not in SOURCES:
        raise DatasetError(path, f"source {meta['source']!r} is not one of {', '.join(SOURCES)}")
    if meta["baseline"] not in BASELINES:
        raise DatasetError(path, f"baseline {meta['baseline']!r} is not one of {', '.join(BASELINES)}")
    if name == SETTING:
        _check_joint_meta(path, meta)
        return meta
    table = meta[knob.table_key]
    # a dataset recorded without clock control (meta "clock_control": false, e.g. a
    # `dvfslab finetune --backend none` run) has no levels to list
    empty_ok = meta.get("clock_control") is False
    if (not isinstance(table, list) or (not table and not empty_ok)
            or not all(isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in table)):
        raise DatasetError(path, f"{knob.table_key} must be a non-empty list of positive numbers ({knob.unit})")
    return meta



def _check_joint_meta(path: Path, meta: Mapping) -> None:
    """A joint dataset's ``knobs`` (distinct clock columns) and ``settings`` (distinct tuples of
    positive MHz, one value per knob)."""
    knobs = meta.get("knobs")
    allowed = ", ".join(JOINT_KNOBS.values())
    if (not isinstance(knobs, list) or not knobs or len(set(map(str, knobs))) != len(knobs)
            or not set(knobs) <= set(JOINT_KNOBS.values())):
        raise DatasetError(path, f"knobs must be a non-empty list of distinct clock columns ({allowed}), got {knobs!r}",
                           fix="list the clocks the joint sweep set, e.g. [\"gpu_freq_mhz\", \"emc_freq_mhz\"]")
    if meta.get("knob", SETTING) != SETTING:
        raise DatasetError(path, f"a joint dataset (it lists knobs) has knob '{SETTING}', not {meta['knob']!r}",
                           fix=f"drop 'knob' or set it to '{SETTING}'")
    settings = meta["settings"]
    ok = isinstance(settings, list) and settings and all(
        isinstance(s, list) and len(s) == len(knobs)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in s) for s in settings)
    if not ok:
        raise DatasetError(path, f"settings must be a non-empty list of [{', '.join(knobs)}] lists of positive MHz",
                           fix="one list per setting the sweep ran, its values in the order of 'knobs'")
    seen: dict[tuple, int] = {}
    for i, s in enumerate(settings):
        key = tuple(float(v) for v in s)
        if key in seen:
            raise DatasetError(path, f"settings {seen[key]} and {i} are the same setting {list(s)}",
                               fix="list each setting once")
        seen[key] = i



def read_runs(path: str | os.PathLike, knob: Knob | None = None) -> pd.DataFrame:
    """``runs.csv`` of a dataset directory, typed, with the runs a sweep in progress has
    committed to its journal since (:mod:`dvfslab.data.journal`; a run retried after a failure
    replaces its earlier row). Not validated: :func:`load_dataset` does that."""
    root = Path(path)
    journal = read_journal(root)  # before runs.csv: a compaction writes runs.csv, then empties the journal
    columns = run_columns(knob or get_knob(None))
    runs = _read_table(root / "runs.csv", columns, RUN_EXTRA_COLUMNS)
    if not journal:
        return runs
    raw = pd.DataFrame([{k: "" if v is None else str(v) for k, v in rec["row"].items()} for _, rec in journal],
                       dtype=str).reindex(columns=list(runs.columns), fill_value="")
    tail = _typed(journal_path(root), raw, columns, RUN_EXTRA_COLUMNS)
    return pd.concat([runs, tail], ignore_index=True).drop_duplicates("run_id", keep="last", ignore_index=True)


def _read_table(path: Path, columns: Mapping[str, str], extra: Mapping[str, str] | None = None) -> pd.DataFrame:
    if not path.exists():
        raise DatasetError(path, "file is missing")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DatasetError(path, f"not a readable CSV: {str(err).splitlines()[0]}") from None
    return _typed(path, raw, columns, extra)


def _typed(path: Path, raw: pd.DataFrame, columns: Mapping[str, str],
           extra: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The text table ``raw`` (read from ``path``) with each column converted to its kind."""
    for col in columns:
        if col not in raw.columns:
            problem, fix = missing_column(col, list(raw.columns), list(columns), (extra or {}).keys())
            raise DatasetError(path, problem, column=col, fix=fix)
    kinds = dict(columns)
    kinds.update({k: v for k, v in (extra or {}).items() if k in raw.columns})
    out = {}
    for col, kind in kinds.items():
        out[col] = _convert(path, col, raw[col], kind)
    others = [c for c in raw.columns if c not in kinds]
    frame = pd.DataFrame(out)
    for c in others:  # unknown extra columns are kept as text
        frame[c] = raw[c]
    return frame


def _convert(path: Path, col: str, values: pd.Series, kind: str) -> pd.Series:
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    stripped = values.str.strip()
    empty = stripped == ""
    if not optional and empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0]) + 1
        raise DatasetError(path, "empty value in a required column", column=col, row=row)
    if base == "str":
        return stripped.where(~empty, None).astype(object)
    numeric = pd.to_numeric(stripped.where(~empty, None), errors="coerce")
    literal_nan = stripped.str.lower() == "nan"
    bad = numeric.isna() & ~empty & ~literal_nan
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
        raise DatasetError(path, f"wrong type: {values.iloc[row - 1]!r} is not a number", column=col, row=row)
    if not optional and literal_nan.any():
        row = int(np.flatnonzero(literal_nan.to_numpy())[0]) + 1
        raise DatasetError(path, "NaN in a required column", column=col, row=row)
    if base == "int":
        frac = numeric.notna() & (numeric != np.round(numeric))
        if frac.any():
            row = int(np.flatnonzero(frac.to_numpy())[0]) + 1
            raise DatasetError(path, f"wrong type: {values.iloc[row - 1]!r} is not an integer", column=col, row=row)
        return numeric.round().astype("Int64")
    return numeric.astype(float)




# --------------------------------------------------------------------------------------------
# Writing (atomic)
# --------------------------------------------------------------------------------------------


def atomic_write_csv(path: str | os.PathLike, frame: pd.DataFrame, columns: Iterable[str] | None = None) -> None:
    """Write a frame as CSV atomically; float formatting is fixed so output is reproducible."""
    if columns is not None:
        cols = list(columns)
        frame = frame.reindex(columns=cols + [c for c in frame.columns if c not in cols])
    atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n", float_format="%.6g"))


def write_dataset(path: str | os.PathLike, meta: Mapping, workloads: pd.DataFrame, runs: pd.DataFrame,
                  steps: pd.DataFrame | None = None, *, check: bool = True) -> Dataset:
    """Write a dataset directory file by file, each atomically, then (by default) validate it.

    ``meta`` gets ``schema_version`` and ``dvfslab_version`` filled in when absent.
    """
    from dvfslab import __version__

    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    meta = dict(meta)
    meta.setdefault("schema_version", SCHEMA_VERSION)
    meta.setdefault("dvfslab_version", __version__)
    atomic_write_csv(root / "workloads.csv", workloads, WORKLOAD_COLUMNS)
    knob = get_knob(knob_name(meta))
    if knob.name == SETTING:  # derived on loading, never stored
        runs = runs.drop(columns=[SETTING], errors="ignore")
    atomic_write_csv(root / "runs.csv", runs, run_columns(knob))
    if steps is not None:
        atomic_write_csv(root / "steps.csv", steps, STEP_COLUMNS)
    atomic_write_json(root / "meta.json", meta)
    return load_dataset(root) if check else Dataset(root, meta, workloads, runs, steps)
