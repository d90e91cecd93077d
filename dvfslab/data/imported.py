"""Rules the importers of other people's measurements share (:mod:`dvfslab.data.zeus`,
:mod:`dvfslab.data.loudva`): which configurations are kept, and which go to the evaluation split.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dvfslab.data.contract import DatasetError


def read_source_csv(path: str | os.PathLike, columns: Sequence[str], what: str) -> pd.DataFrame:
    """A CSV of others' measurements, every cell as text; a missing column is one line naming the
    file and the column (``what``: the kind of file, e.g. ``"a Zeus power trace"``)."""
    path = Path(path)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise DatasetError(path, "column is missing" + (f" (and {', '.join(missing[1:])})" if missing[1:] else ""),
                           column=missing[0], fix=f"{what} has {', '.join(columns)}")
    return raw


def bad_rows(path: Path, raw: pd.DataFrame, col: str, bad: pd.Series,
             problem: str = "{value!r} is not a positive number") -> None:
    """Raise a :class:`DatasetError` naming the file, ``col`` and the first row where ``bad`` holds
    (``problem`` may quote that row's ``{value}``)."""
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        raise DatasetError(path, problem.format(value=raw[col].iloc[row - 1]), column=col, row=row)


def complete_sweeps(frame: pd.DataFrame, key: Sequence[str], level: str) -> tuple[pd.DataFrame, pd.Series]:
    """The rows of the configurations (``key`` columns) measured at every level of ``frame``, and a
    mask of the others. The fixed-level governor picks among the levels every training workload
    was measured at, so a configuration with a gap would confine it to the levels it has."""
    n_levels = frame[level].nunique()
    complete = frame.groupby(list(key))[level].transform("nunique") == n_levels
    return frame[complete], ~complete


def alternate_splits(ranks: Sequence[int] | pd.Series, eval_every: int) -> list[str]:
    """``evaluation`` for every ``eval_every``-th configuration (0-based ``ranks`` within a family in
    ascending order: the 2nd, 4th, … for 2), ``characterization`` for the others; 0 keeps all."""
    return ["evaluation" if eval_every > 0 and int(k) % eval_every == eval_every - 1 else "characterization"
            for k in ranks]
