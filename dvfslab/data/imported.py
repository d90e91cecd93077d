"""Rules the importers of other people's measurements share (:mod:`dvfslab.data.zeus`,
:mod:`dvfslab.data.loudva`): which configurations are kept, and which go to the evaluation split.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


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
