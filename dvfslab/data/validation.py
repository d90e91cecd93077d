"""The dataset contract's cross-file rules: :func:`validate` (workloads, runs, their levels and
boards, steps), the joint level of a run (:func:`joint_levels`), and what a sweep did with the
other clocks (:func:`dataset_pins`, :func:`clock_warnings`).

Split out of :mod:`dvfslab.data.contract` (which re-exports these names and calls
:func:`validate` on loading and writing). Every problem is a one-line :class:`DatasetError`
naming the file, the column and the 1-based data row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.data.schema import (
    CLOCK_COLUMNS,
    MODEL_TYPES,
    RUN_STATUSES,
    SETTING,
    SPLITS,
    Dataset,
    DatasetError,
)


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

