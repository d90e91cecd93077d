"""What a governor learns from: the sweep, the feature table, the training workloads, the steps.

:class:`TrainingData` is the one argument of every governor's ``fit`` (``dvfslab.governors``).
A cross-validation fold is :meth:`TrainingData.subset` of it: the same sweep, features and
step records, fewer training workloads; :meth:`TrainingData.with_probe_noise` makes the probes of
a replay read with noise. The dataset's per-step records
(:class:`~dvfslab.analysis.steps.StepSource`) are read on first use and shared by every subset,
so the folds do not read ``steps.csv`` again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.analysis.steps import StepSource
from dvfslab.data.knobs import Knob


@dataclass
class TrainingData:
    """The sweep, its feature table (one row per workload) and the workloads a governor may learn from."""

    sweep: Sweep
    features: pd.DataFrame
    train_ids: list[str]
    _steps: dict[str, StepSource] = field(default_factory=dict, repr=False)  # shared by every subset

    @property
    def knob(self) -> Knob:
        return self.sweep.knob

    @property
    def level_table(self) -> tuple[float, ...]:
        return self.sweep.level_table

    def rows(self) -> pd.DataFrame:
        """The feature-table rows of the training workloads (in the table's order)."""
        return self.features[self.features["workload_id"].isin(self.train_ids)]

    def train_medians(self, columns: Iterable[str]) -> dict[str, float]:
        """Median of each column over the training workloads (fill-in for missing features)."""
        rows = self.rows()
        return {c: float(rows[c].median()) for c in columns if c in rows and rows[c].notna().any()}

    def steps(self) -> StepSource:
        """The sweep's per-step records (read from its dataset once, then shared)."""
        if "source" not in self._steps:
            self._steps["source"] = StepSource.from_sweep(self.sweep)
        return self._steps["source"]

    def with_probe_noise(self, cv: float | None, seed: int = 0) -> TrainingData:
        """The same data whose probes read with noise of coefficient of variation ``cv`` (None:
        the probe model's own; :meth:`StepSource.with_noise`), seeded by ``seed``; its subsets (CV
        folds) share it."""
        return dataclasses.replace(self, _steps={"source": self.steps().with_noise(cv, seed)})

    def subset(self, train_ids: Sequence[str]) -> TrainingData:
        """The same sweep, features and steps with other training workloads (a CV fold)."""
        return dataclasses.replace(self, train_ids=list(train_ids))

    def with_steps(self, steps: StepSource) -> TrainingData:
        """The same data whose probes read from ``steps`` (e.g. with probe models attached)."""
        return dataclasses.replace(self, _steps={"source": steps})
