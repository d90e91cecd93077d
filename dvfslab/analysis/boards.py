"""Board as a factor: how much the same run differs from board to board, and per-board datasets.

A fleet sweep (docs/fleet.md) records the board of every run in the ``board_id`` column of
``runs.csv``. :func:`board_spread` compares the boards on the cells they all ran (same
workload, policy and level of the dataset's knob): the mean of each board over its ok
repetitions, then the spread of those board means. :func:`by_board` splits a dataset into one dataset per board, so any
evaluation (``sweep_from_dataset``, the governor replay) can be run and compared per board;
:func:`per_board` does that and stacks the results with a ``board_id`` column, e.g. the governor
replay grouped by board::

    from dvfslab.analysis.aggregate import sweep_from_dataset
    from dvfslab.analysis.features import feature_table
    from dvfslab.evaluation.replay import replay

    def evaluate(d):
        sweep = sweep_from_dataset(d)
        return replay(governors, sweep, feature_table(sweep))

    per_board(ds, evaluate)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pandas as pd

from dvfslab.analysis.aggregate import snap_levels
from dvfslab.data.contract import Dataset

CELL = ["workload_id", "policy", "level"]


def board_ids(ds: Dataset) -> list[str]:
    """The boards of a dataset, sorted (empty when runs.csv has no ``board_id`` column)."""
    if "board_id" not in ds.runs.columns:
        return []
    return sorted(str(b) for b in ds.runs["board_id"].dropna().unique())


def board_means(ds: Dataset, measure: str = "energy_j") -> pd.DataFrame:
    """Mean of ``measure`` over the ok repetitions of each (workload, policy, level, board).

    ``level``: the run's setting of the dataset's knob put on its level table
    (:func:`~dvfslab.analysis.aggregate.snap_levels`); NaN for runs that set none (MAXN).
    """
    if not board_ids(ds):
        return pd.DataFrame(columns=[*CELL, "board_id", measure, "n_reps"])
    ok = ds.runs[(ds.runs["status"] == "ok") & ds.runs["board_id"].notna()].copy()
    ok["level"] = snap_levels(ok[ds.knob.name], ds.levels)
    ok[measure] = ok[measure].astype(float)
    grouped = ok.groupby([*CELL, "board_id"], dropna=False, sort=True)[measure]
    return grouped.agg(["mean", "size"]).rename(columns={"mean": measure, "size": "n_reps"}).reset_index()


def board_spread(ds: Dataset, measure: str = "energy_j") -> pd.DataFrame:
    """One row per cell run on two boards or more: ``n_boards``, the mean, lowest and highest
    board mean, ``spread_pct`` = 100 (highest - lowest) / mean and ``cv_pct`` = 100 × the
    standard deviation (ddof=1) of the board means / their mean."""
    per_board = board_means(ds, measure)
    cols = [*CELL, "n_boards", "mean", "min", "max", "spread_pct", "cv_pct"]
    if per_board.empty:
        return pd.DataFrame(columns=cols)
    cells = per_board.groupby(CELL, dropna=False, sort=True)[measure]
    out = cells.agg(n_boards="size", mean="mean", min="min", max="max", std="std").reset_index()
    out = out[out["n_boards"] >= 2].copy()
    out["spread_pct"] = 100.0 * (out["max"] - out["min"]) / out["mean"]
    out["cv_pct"] = 100.0 * out["std"] / out["mean"]
    return out[cols].reset_index(drop=True)


def by_board(ds: Dataset) -> dict[str, Dataset]:
    """One dataset per board (its runs and their steps; meta ``boards`` narrowed to it)."""
    out = {}
    for board in board_ids(ds):
        runs = ds.runs[ds.runs["board_id"] == board].reset_index(drop=True)
        steps = None if ds.steps is None else ds.steps[ds.steps["run_id"].isin(set(runs["run_id"]))]
        meta = dict(ds.meta)
        if isinstance(meta.get("boards"), dict):
            meta["boards"] = {board: meta["boards"].get(board)}
        out[board] = dataclasses.replace(ds, meta=meta, runs=runs, steps=steps)
    return out


def per_board(ds: Dataset, evaluate: Callable[[Dataset], pd.DataFrame]) -> pd.DataFrame:
    """``evaluate`` on each board's dataset (:func:`by_board`), stacked with a ``board_id`` column first."""
    frames = [evaluate(part).assign(board_id=board) for board, part in by_board(ds).items()]
    if not frames:
        return pd.DataFrame(columns=["board_id"])
    out = pd.concat(frames, ignore_index=True)
    return out[["board_id", *[c for c in out.columns if c != "board_id"]]]
