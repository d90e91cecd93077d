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
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.core.errors import DvfsError
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

SCHEMA_VERSION = 1
SOURCES = ("measured", "simulated")
# "fmax": the highest level of a clock sweep; "max_level": the highest level of any knob (a
# power-limit sweep's default limit); both mean the same rule in the analysis
BASELINES = ("maxn", "fmax", "max_level")
RUN_STATUSES = ("ok", "failed")
#: a workload's model type: a transformer (encoder-only, decoder-only), a convolutional network, a
#: recurrent one (LSTM, GRU), or other; features that do not apply to it stay empty (is_decoder for a
#: CNN, avg_seq_len for an image model), never invented
MODEL_TYPES = ("encoder", "decoder", "cnn", "rnn", "other")
SPLITS = ("characterization", "evaluation")

# column -> kind: "str" (required, non-empty), "str?" (may be empty), "float", "float?",
# "int", "int?"
WORKLOAD_COLUMNS: dict[str, str] = {
    "workload_id": "str",
    "model": "str",
    "model_family": "str?",
    "model_type": "str?",
    "params_m": "float?",
    "n_layers": "int?",
    "hidden_size": "int?",
    "task": "str",
    "avg_seq_len": "float?",
    "max_seq_len": "int?",
    "batch_size": "int?",
    "split": "str",
}
# optional workloads.csv columns (kept, typed, checked when present). ``job_steps``: how many of
# the runs' units (the unit of runs.csv ``steps``: optimizer steps, or epochs / inferences in an
# imported trace; fractional allowed) the whole job runs; positive and finite. Without it the
# job is the measured run itself.
WORKLOAD_EXTRA_COLUMNS: dict[str, str] = {"job_steps": "float?"}
RUN_COLUMNS: dict[str, str] = {
    "run_id": "str",
    "workload_id": "str",
    "policy": "str",
    "gpu_freq_mhz": "float?",
    "rep": "int",
    "time_s": "float?",
    "energy_j": "float?",
    "energy_gpu_j": "float?",
    "energy_cpu_j": "float?",
    "avg_power_w": "float?",
    "peak_power_w": "float?",
    "gpu_util_pct": "float?",
    "mean_gpu_freq_mhz": "float?",
    "steps": "int?",
    "eval_metric": "float?",
    "status": "str",
    "started_at": "str?",
}
# optional columns a writer may add (kept, typed, not required). ``board_id``: the board a run
# ran on (sweeps record it; a fleet sweep's dataset holds several boards, each described under
# meta.json "boards"); ``energy_board_j``: the energy of every rail of the board (on AGX Orin
# VDD_GPU_SOC + VDD_CPU_CV + VIN_SYS_5V0 + VDDQ_VDD2_1V8AO) beside the CPU+GPU ``energy_j``.
# Datasets without these columns still load.
#
# ``emc_freq_mhz`` / ``cpu_freq_mhz``: the memory clock and the CPU clusters' clock as read back
# from the board right after the run's policy was set (a sweep records them when the backend can
# read them, pinned or not: docs/sweep.md, "The other clocks"); positive when given. A joint
# sweep over several knobs reuses them as the knobs' columns.
RUN_EXTRA_COLUMNS: dict[str, str] = {"error": "str?", "board_id": "str?", "energy_board_j": "float?",
                                     "emc_freq_mhz": "float?", "cpu_freq_mhz": "float?"}
#: the other clocks' runs.csv columns, by clock name
CLOCK_COLUMNS: dict[str, str] = {"emc": "emc_freq_mhz", "cpu": "cpu_freq_mhz"}
STEP_COLUMNS: dict[str, str] = {
    "run_id": "str",
    "step": "int",
    "time_s": "float",
    "energy_j": "float?",
}
META_REQUIRED = ("schema_version", "source", "device", "freq_table_mhz", "baseline")


def run_columns(knob: Knob) -> dict[str, str]:
    """:data:`RUN_COLUMNS` with the level column named after ``knob`` (same position); a joint
    dataset keeps ``gpu_freq_mhz`` (its level column, ``setting``, is derived on loading)."""
    if knob.name == SETTING:
        return dict(RUN_COLUMNS)
    return {(knob.name if col == DEFAULT_KNOB else col): kind for col, kind in RUN_COLUMNS.items()}


class DatasetError(DvfsError):
    """A dataset directory breaks the contract. ``str(err)`` is one line naming the place."""

    def __init__(self, file: str | os.PathLike, problem: str, *, column: str | None = None,
                 row: int | None = None, fix: str | None = None):
        self.file = str(file)
        self.column = column
        self.row = row
        self.problem = problem
        where = self.file
        if column is not None:
            where += f": column '{column}'"
        if row is not None:
            where += f", row {row} (line {row + 1})"
        super().__init__(f"{where}: {problem}" + (f" — {fix}" if fix else ""))


@dataclass
class Dataset:
    """A loaded, validated dataset directory."""

    path: Path
    meta: dict
    workloads: pd.DataFrame
    runs: pd.DataFrame
    steps: pd.DataFrame | None = None

    @property
    def source(self) -> str:
        return self.meta["source"]

    @property
    def knob(self) -> Knob:
        """What the fixed-policy runs set (meta.json ``knob``; default ``gpu_freq_mhz``; a joint
        dataset's: :data:`SETTING`)."""
        return get_knob(knob_name(self.meta))

    @property
    def levels(self) -> list[float]:
        """The knob's levels, in its unit (``freq_table_mhz`` or ``power_limit_table_w``; a
        joint dataset's: the setting indices 0, 1, ..., N-1)."""
        if self.knob.name == SETTING:
            return [float(i) for i in range(len(self.meta["settings"]))]
        return [float(f) for f in self.meta[self.knob.table_key]]

    @property
    def joint_knobs(self) -> tuple[str, ...]:
        """The clocks of a joint dataset (runs.csv columns, meta.json ``knobs``); ``()`` otherwise."""
        return tuple(self.meta.get("knobs") or ()) if self.knob.name == SETTING else ()

    @property
    def settings(self) -> list[tuple[float, ...]]:
        """A joint dataset's settings (level ``i`` is ``settings[i]``); ``[]`` otherwise."""
        return [tuple(float(v) for v in s) for s in self.meta.get("settings") or []] if self.joint_knobs else []

    @property
    def freq_table_mhz(self) -> list[float]:
        if self.knob.name != DEFAULT_KNOB:
            raise DatasetError(self.path / "meta.json", f"the knob is {self.knob.name}, not the GPU clock: "
                                                        "there is no freq_table_mhz", fix="use Dataset.levels")
        return self.levels

    @property
    def baseline(self) -> str:
        return self.meta["baseline"]

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"

    def ok_runs(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] == "ok"]

    def summary_line(self) -> str:
        return f"ok: {len(self.workloads)} workloads, {len(self.runs)} runs ({self.source})"


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


def knob_name(meta: Mapping) -> str:
    """The knob a meta.json names: ``knob``, else :data:`SETTING` when it lists ``knobs`` (a
    joint dataset), else the GPU clock."""
    return meta.get("knob") or (SETTING if "knobs" in meta else DEFAULT_KNOB)


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


def joint_levels(path: Path, runs: pd.DataFrame, knobs: Sequence[str], settings: Sequence[Sequence[float]]) -> pd.Series:
    """Each fixed run's level in a joint dataset: the index of its setting in ``settings``.

    Each knob's column (as read back) must hold, within 0.5 MHz, one of that knob's values in
    ``settings`` and the run's tuple must be one of the settings; runs of other policies get NaN.
    """
    fixed = (runs["policy"] == "fixed").to_numpy()
    index = {tuple(float(v) for v in s): i for i, s in enumerate(settings)}
    matched = np.zeros((len(runs), len(knobs)))
    for k, col in enumerate(knobs):
        if col not in runs.columns:
            raise DatasetError(path, "column is missing", column=col,
                               fix=f"a joint dataset carries one column per knob of meta.json knobs ({', '.join(knobs)})")
        values = sorted({float(s[k]) for s in settings})
        read = runs[col].astype(float).to_numpy()
        for r in np.flatnonzero(fixed):
            hit = [v for v in values if abs(v - read[r]) < 0.5] if not np.isnan(read[r]) else []
            if not hit:
                got = "empty" if np.isnan(read[r]) else f"{read[r]:g}"
                raise DatasetError(path, f"{col} {got} is not one of the knob's values in meta.json settings "
                                         f"({', '.join(f'{v:g}' for v in values)})", column=col, row=int(r) + 1,
                                   fix="a fixed run of a joint sweep records every clock as read back")
            matched[r, k] = hit[0]
    out = np.full(len(runs), np.nan)
    for r in np.flatnonzero(fixed):
        key = tuple(float(v) for v in matched[r])
        if key not in index:
            raise DatasetError(path, f"setting ({', '.join(f'{v:g}' for v in key)}) of ({', '.join(knobs)}) is not "
                                     "in meta.json settings", row=int(r) + 1,
                               fix="add the setting to meta.json settings or mark the run failed")
        out[r] = index[key]
    return pd.Series(out, index=runs.index, name=SETTING)


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
# Validation
# --------------------------------------------------------------------------------------------


def _first(mask: pd.Series) -> int | None:
    idx = np.flatnonzero(np.asarray(mask, dtype=bool))
    return int(idx[0]) + 1 if idx.size else None


def validate(ds: Dataset) -> None:
    """Check the cross-file rules of the contract; raise :class:`DatasetError` on the first."""
    _validate_workloads(ds.path / "workloads.csv", ds.workloads)
    _validate_runs(ds)
    if ds.steps is not None:
        _validate_steps(ds.path / "steps.csv", ds.steps, ds.runs)


def _validate_workloads(wpath: Path, wl: pd.DataFrame) -> None:
    if (row := _first(wl["workload_id"].duplicated())) is not None:
        raise DatasetError(wpath, f"duplicate workload_id {wl['workload_id'].iloc[row - 1]!r}", column="workload_id", row=row)
    _check_set(wpath, wl, "split", SPLITS)
    _check_set(wpath, wl, "model_type", MODEL_TYPES, optional=True)
    for col in ("params_m", "n_layers", "hidden_size", "avg_seq_len", "max_seq_len", "batch_size"):
        vals = wl[col].astype(float)
        if (row := _first(vals <= 0)) is not None:
            raise DatasetError(wpath, f"must be positive, got {vals.iloc[row - 1]}", column=col, row=row)
    if "job_steps" in wl.columns:
        jobs = wl["job_steps"].astype(float)
        if (row := _first((jobs <= 0) | np.isinf(jobs))) is not None:
            raise DatasetError(wpath, f"must be a positive finite number of the runs' units, got {jobs.iloc[row - 1]}",
                               column="job_steps", row=row,
                               fix="give the whole job's length in the unit of runs.csv steps, or leave the cell empty")


def _validate_runs(ds: Dataset) -> None:
    runs, rpath = ds.runs, ds.path / "runs.csv"
    if (row := _first(runs["run_id"].duplicated())) is not None:
        raise DatasetError(rpath, f"duplicate run_id {runs['run_id'].iloc[row - 1]!r}", column="run_id", row=row)
    _check_set(rpath, runs, "status", RUN_STATUSES)
    known = set(ds.workloads["workload_id"])
    if (row := _first(~runs["workload_id"].isin(known))) is not None:
        raise DatasetError(rpath, f"workload_id {runs['workload_id'].iloc[row - 1]!r} is not in workloads.csv",
                           column="workload_id", row=row, fix="add the workload to workloads.csv or fix the id")
    if (row := _first(runs["rep"] < 0)) is not None:
        raise DatasetError(rpath, "rep must be >= 0", column="rep", row=row)
    _validate_measures(rpath, runs, energy_measured=ds.meta.get("energy_measured", True))
    _validate_levels(ds)
    _validate_boards(ds)
    for col in CLOCK_COLUMNS.values():
        if col in runs.columns:
            v = runs[col]
            if (row := _first((v <= 0) | np.isinf(v.fillna(1.0)))) is not None:
                raise DatasetError(rpath, f"{col} must be a positive finite clock in MHz, got {v.iloc[row - 1]}",
                                   column=col, row=row, fix="leave the cell empty when the clock was not read")


def _validate_measures(rpath: Path, runs: pd.DataFrame, *, energy_measured: bool) -> None:
    ok = runs["status"] == "ok"
    measures = ["time_s"] + (["energy_j"] if energy_measured else [])
    for col in measures:
        v = runs[col]
        if (row := _first(ok & v.isna())) is not None:
            raise DatasetError(rpath, f"NaN or empty {col} in a status=ok run", column=col, row=row,
                               fix="mark the run status=failed or re-measure it")
    for col in ("time_s", "energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w", "peak_power_w"):
        v = runs[col]
        if (row := _first((v < 0) | np.isinf(v.fillna(0.0)))) is not None:
            raise DatasetError(rpath, f"{col} must be a finite number >= 0, got {v.iloc[row - 1]}", column=col, row=row)


def _on_table(values: pd.Series, table) -> dict:
    """Each distinct value of ``values``: whether it is within 0.5 of a level of ``table``
    (``math.isclose(abs_tol=0.5)``; NaN: True), by a binary search of the sorted table, O(log L)
    per value: a joint table of thousands of settings stays cheap to check."""
    ordered = np.sort(np.asarray([float(t) for t in table], dtype=float))
    out = {}
    for f in pd.unique(values):
        if pd.isna(f):
            out[f] = True
            continue
        i = int(np.searchsorted(ordered, float(f)))
        near = ordered[max(i - 1, 0):i + 1]
        out[f] = any(math.isclose(float(f), float(t), abs_tol=0.5) for t in near)
    return out


def _validate_levels(ds: Dataset) -> None:
    runs, rpath, table, knob = ds.runs, ds.path / "runs.csv", ds.levels, ds.knob
    if knob.name == SETTING and SETTING not in runs.columns:  # built in memory, not loaded
        runs = runs.assign(**{SETTING: joint_levels(rpath, runs, ds.joint_knobs, ds.settings)})
    fixed = runs["policy"] == "fixed"
    level = runs[knob.name]
    if (row := _first(fixed & level.isna())) is not None:
        raise DatasetError(rpath, f"a fixed-policy run needs {knob.name}", column=knob.name, row=row)
    in_table = level.map(_on_table(level, table)).fillna(True).astype(bool)  # NaN: no level set (MAXN)
    if (row := _first(fixed & ~in_table)) is not None:
        raise DatasetError(rpath, f"{knob.name} {level.iloc[row - 1]:g} is not in meta.json {knob.table_key} "
                                  f"({', '.join(f'{t:g}' for t in table)})", column=knob.name, row=row)
    if ds.meta["baseline"] == "maxn" and not (runs["policy"] == "maxn").any():
        raise DatasetError(ds.path / "meta.json", "baseline is 'maxn' but runs.csv has no policy=maxn run",
                           fix="set baseline to 'fmax' or add the MAXN runs")


def _validate_boards(ds: Dataset) -> None:
    """``board_id`` (optional column): one token per board; with meta.json ``boards`` (an object
    board_id -> identity), every board_id in runs.csv must be described there."""
    if "board_id" not in ds.runs.columns:
        return
    rpath, ids = ds.path / "runs.csv", ds.runs["board_id"]
    if (row := _first(ids.map(lambda v: isinstance(v, str) and any(c.isspace() for c in v)))) is not None:
        raise DatasetError(rpath, f"board_id {ids.iloc[row - 1]!r} holds whitespace", column="board_id", row=row,
                           fix="a board_id is one token such as a hostname or serial")
    boards = ds.meta.get("boards")
    if boards is None:
        return
    if not isinstance(boards, dict):
        raise DatasetError(ds.path / "meta.json", "boards must be an object board_id -> board identity")
    if (row := _first(ids.notna() & ~ids.isin(set(boards)))) is not None:
        raise DatasetError(rpath, f"board_id {ids.iloc[row - 1]!r} is not described in meta.json boards",
                           column="board_id", row=row, fix="add the board to meta.json boards or fix the id")


def dataset_pins(meta: Mapping) -> dict[str, str | float]:
    """What a sweep's fixed runs did with the other clocks (meta.json ``sweep.plan.pins``:
    ``"max"``, ``"none"`` or MHz per clock); empty when the dataset does not say."""
    plan = (meta.get("sweep") or {}).get("plan") or {}
    return dict(plan.get("pins") or {})


def clock_warnings(ds: Dataset) -> list[str]:
    """Lines warning that a dataset's other clocks wandered across its fixed runs: a pinned clock
    read back at more than one level (the pin did not hold), or a clock left to the board read at
    several (its level then differs from run to run and mixes into every comparison of levels).
    Readings within 0.5 MHz are one level. Empty when nothing wandered or nothing was recorded."""
    rpath, pins, out = ds.path / "runs.csv", dataset_pins(ds.meta), []
    fixed = ds.ok_runs()[ds.ok_runs()["policy"] == "fixed"]
    for name, col in CLOCK_COLUMNS.items():
        if col not in fixed.columns or col in ds.joint_knobs:  # a joint sweep's knob moves on purpose
            continue
        values = fixed[col].dropna().astype(float)
        if values.empty:
            continue
        ordered = sorted(float(v) for v in values)
        n_levels = 1 + sum(b - a >= 0.5 for a, b in zip(ordered, ordered[1:], strict=False))
        if n_levels < 2:
            continue
        span = f"{ordered[0]:g}-{ordered[-1]:g} MHz ({n_levels} levels over {len(values)} fixed runs)"
        setting = pins.get(name)
        if setting not in (None, "none"):
            out.append(f"{rpath}: {col} reads {span} although the sweep pinned the {name} clock ({name}={setting}): "
                       "the pin did not hold in every run; see the runs' lock checks (runs/<run_id>.json, extras.pins)")
        else:
            out.append(f"{rpath}: the {name} clock was left to the board and wandered: {col} reads {span}; its "
                       f"level mixes into every comparison of levels. Sweep again with it pinned (--{name} max, the "
                       "default)")
    return out


def _validate_steps(spath: Path, steps: pd.DataFrame, runs: pd.DataFrame) -> None:
    if (row := _first(~steps["run_id"].isin(set(runs["run_id"])))) is not None:
        raise DatasetError(spath, f"run_id {steps['run_id'].iloc[row - 1]!r} is not in runs.csv", column="run_id", row=row)
    for col in ("time_s", "energy_j"):
        v = steps[col]
        if (row := _first(v < 0)) is not None:
            raise DatasetError(spath, f"{col} must be >= 0", column=col, row=row)


def _check_set(path: Path, frame: pd.DataFrame, col: str, allowed: Iterable[str], optional: bool = False) -> None:
    allowed = tuple(allowed)
    vals = frame[col]
    bad = ~vals.isin(allowed)
    if optional:
        bad &= vals.notna()
    if (row := _first(bad)) is not None:
        raise DatasetError(path, f"{vals.iloc[row - 1]!r} is not one of {', '.join(allowed)}", column=col, row=row)


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

