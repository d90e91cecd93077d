"""Governors with no model at decide time: MAXN (the baseline), FFG (one fixed level) and the
oracle (each swept workload's best measured level).

FFG's fit and the oracle's read the sweep through its methods only: no pandas or numpy here.

**Complexity** (``L`` levels or settings, ``W`` training workloads): a decision is O(1) (MAXN,
FFG, the oracle hold a level); FFG's fit is O(W · L), the oracle's O(workloads · L).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import Decision, Governor, GovernorTags, LevelGovernor, Probe
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Objective

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData


class MaxnGovernor(Governor):
    """MAXN (nvpmodel mode 0) with the board's dynamic GPU governor: the paper's baseline.

    Replaying it uses the dataset's baseline runs (MAXN, or the highest level when the dataset
    has no MAXN run). It meets any slowdown limit (its slowdown is 0).
    """

    name = "maxn"
    summary = "the baseline: the board's default (MAXN's dynamic clock, or the highest level)"
    tags = GovernorTags(needs_training=False, recommendable=False,
                        not_on_command_line="maxn is the board's default: run the command without dvfslab govern (or "
                                            "`dvfslab clocks --restore` first)")

    def __init__(self, objective: Objective = LEAST_ENERGY):
        self.objective = objective

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        return Decision(None)


class FixedGovernor(LevelGovernor):
    """FFG: one level for every workload.

    ``level`` None (the default): ``fit`` learns the level minimizing the mean over the training
    workloads of ``E(w, f) / E_b(w)``, among the levels every training workload was measured at
    (docs/method.md; ties: the lower level). A number: that level, snapped onto the training
    data's level table when there is one.
    """

    name = "ffg"
    summary = "one fixed level for every workload: the least mean energy / baseline over the training workloads"
    tags = GovernorTags(saves=("level_", "level_table_"), recommendable=False)  # FFG is the default, not a candidate

    def __init__(self, level: float | None = None, objective: Objective = LEAST_ENERGY):
        self.level = level
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        if self.level is not None and data is None:  # a level given by hand, no table to snap it onto
            self.level_, self.level_table_ = float(self.level), []
            return
        data = self._require(data)
        self.level_table_ = list(data.level_table)
        if self.level is not None:
            self.level_ = snap_mhz(float(self.level), self.level_table_)
            return
        sweep, train_ids = data.sweep, list(data.train_ids)
        if not train_ids:
            raise GovernorError("FFG needs at least one training workload")
        common = set.intersection(*(set(sweep.curve(w)[0]) for w in train_ids))
        if not common:
            raise GovernorError(f"FFG: no {sweep.knob.label} level was measured for every training workload")
        best, best_score = math.nan, math.inf
        for f in sorted(common):
            score = sum(sweep.at(w, f)[0] / sweep.baseline_of(w)[0] for w in train_ids) / len(train_ids)
            if score < best_score:
                best, best_score = f, score
        self.level_ = float(best)

    def own_levels(self) -> list[float]:
        return [float(f) for f in self._fitted("level_table_")]

    def level_for(self, workload: Mapping[str, Any]) -> float:
        return float(self._fitted("level_"))


class OracleGovernor(Governor):
    """The least-energy measured level of each swept workload: the upper bound on saving.

    ``fit`` reads every workload's measured curve (not only the training ones: it is a yardstick,
    not a governor you can run); under a slowdown limit it takes the least-energy level whose
    *measured* slowdown meets it (the constrained upper bound).
    """

    name = "oracle"
    summary = "the least-energy measured level of each workload: the upper bound"
    tags = GovernorTags(needs_training=False, recommendable=False,
                        not_on_command_line="the oracle knows only the measured answer of the workloads of a sweep")

    def __init__(self, objective: Objective = LEAST_ENERGY):
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        sweep = self._require(data).sweep
        self.curves_ = {}
        for w in sweep.workload_ids():
            levels, energy, time = sweep.curve(w)
            t_b = sweep.baseline_of(w)[1]
            self.curves_[w] = (levels.tolist(), energy.tolist(), [t / t_b for t in time])

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        wid = workload.get("workload_id")
        curves = self._fitted("curves_")
        if wid not in curves:
            raise GovernorError(f"oracle: workload {wid!r} was not swept; the oracle knows only measured workloads")
        return Decision(self.objective.select(*curves[wid]))
