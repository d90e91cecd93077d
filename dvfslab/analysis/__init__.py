"""The facts of a sweep, below the governors: level means and optimal levels, the feature table,
the per-step records, what a governor trains on, board-to-board spread, and the figures.

The public face (the notebooks, tests and the CLI use these names)::

    from dvfslab import analysis
    sweep = analysis.sweep_from_dataset(load_dataset("data/replay"))
    optima = analysis.optimal_levels(sweep)
    table = analysis.feature_table(sweep)

:mod:`~dvfslab.analysis.steps` (a dataset's steps, one by one), :mod:`~dvfslab.analysis.training`
(:class:`TrainingData`, what a governor's ``fit`` takes; re-exported), :mod:`~dvfslab.analysis.boards` and
:mod:`~dvfslab.analysis.plots` (matplotlib; the governors' figures in :mod:`~dvfslab.analysis.govplots`) are imported by name. The evaluation of governors
(replay, cross-validation, model selection, the recommendation) is :mod:`dvfslab.evaluation`,
above the governors. Definitions: docs/method.md.
"""

from dvfslab.analysis.aggregate import (
    Sweep,
    characterization_summary,
    optimal_levels,
    read_sweep,
    sweep_from_dataset,
    write_sweep,
)
from dvfslab.analysis.features import FEATURES, feature_table, pick_splits, usable_features
from dvfslab.analysis.training import TrainingData

__all__ = ["FEATURES", "Sweep", "TrainingData", "characterization_summary", "feature_table",
           "optimal_levels", "pick_splits", "read_sweep", "sweep_from_dataset", "usable_features", "write_sweep"]
