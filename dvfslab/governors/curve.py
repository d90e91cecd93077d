"""Curve governor: predict energy and time per level from the workload's features, take the least.

The model is a :class:`~dvfslab.governors.curvemodel.CurveModel` (plain Python at decide time);
fitting it (scikit-learn) is :func:`dvfslab.governors.curvefit.fit_curve_model`, imported by
:meth:`CurveGovernor.fit` only.

**Complexity**: a decision predicts every level once, O(F · L) (``F`` features, ``L`` levels or
settings): linear in the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dvfslab.governors.base import Decision, Governor, GovernorTags, Probe
from dvfslab.governors.curvemodel import DEFAULT_ALPHA, Curves, FittedCurve
from dvfslab.governors.objective import LEAST_ENERGY, Objective

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData


class CurveGovernor(FittedCurve, Governor):
    """``curve``: predicts the whole energy and time curve over the levels from the workload's
    features (one ridge regression per level, penalty ``alpha``) and takes the objective's
    choice on it (least predicted energy, within a predicted slowdown limit). When nothing can be
    learned from the training workloads (one of them, one level, no feature that varies) it is
    their mean curve, which decides FFG's level
    (:mod:`dvfslab.governors.curvefit`)."""

    name = "curve"
    summary = "predicts energy and time per level from the features (ridge per level), takes the least energy"
    tags = GovernorTags(saves=("curve_",))

    def __init__(self, alpha: float = DEFAULT_ALPHA, objective: Objective = LEAST_ENERGY):
        self.alpha = alpha
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        from dvfslab.governors.curvefit import fit_curve_model

        data = self._require(data)
        self.curve_ = fit_curve_model(data.sweep, data.features, data.train_ids, alpha=float(self.alpha)).spec

    def predict_curves(self, workload: Mapping[str, Any]) -> Curves:
        return self.model.predict(workload)

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        c = self.predict_curves(workload)
        return Decision(self.objective.select(c["level"], c["energy_rel"], c["time_rel"]))
