"""Analysis of a sweep: level means and optimal levels, the feature table, model selection,
replay of governors over the measured sweep, and the figures.

The public face (the notebooks, tests and the CLI use these names)::

    from dvfslab import analysis
    sweep = analysis.sweep_from_dataset(load_dataset("data/replay"))
    optima = analysis.optimal_levels(sweep)
    table = analysis.feature_table(sweep)

:mod:`~dvfslab.analysis.selection`, :mod:`~dvfslab.analysis.replay`,
:mod:`~dvfslab.analysis.govcv` and :mod:`~dvfslab.analysis.plots` are imported by name (they
pull in scikit-learn, the governors or matplotlib). Definitions: docs/method.md.
"""

from dvfslab.analysis.aggregate import (
    Sweep,
    SweepError,
    characterization_summary,
    optimal_levels,
    read_sweep,
    sweep_from_dataset,
    write_sweep,
)
from dvfslab.analysis.features import FEATURES, feature_table, pick_splits, usable_features

__all__ = ["FEATURES", "Sweep", "SweepError", "characterization_summary", "feature_table", "optimal_levels",
           "pick_splits", "read_sweep", "sweep_from_dataset", "usable_features", "write_sweep"]
