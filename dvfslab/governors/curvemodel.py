"""The curve model, board side: energy and time per level predicted from a workload's features.

A curve spec (a dict, fitted by :func:`dvfslab.governors.curvefit.fit_curve_model` from a
scikit-learn ``Pipeline``; held by the ``curve`` and ``profiled`` governors) holds, for each of
two targets ``ln(E / E_baseline)`` and ``ln(T / T_baseline)`` and each level ``l`` of ``levels``::

    y(w, l) = intercept[l] + sum_j coef[j][l] * (x_j(w) - mean[j]) / scale[j]
    x_j(w)  = transform_j(value of feature j, or impute[j] when missing)

with ``transform`` ``"log"`` (natural log, for the size features), ``"pct"`` (/ 100) or
``"id"``. Prediction here is plain Python (``math``): no scikit-learn, numpy or pandas at
decide time, so ``dvfslab govern`` starts fast on a board.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dvfslab.governors.errors import GovernorError

TRANSFORMS = ("log", "pct", "id")
#: the floor of the log transform (a size of 0 would be -inf)
LOG_FLOOR = 1e-9
#: the ridge penalty of the fit (standardized features)
DEFAULT_ALPHA = 1.0

Curves = dict[str, list[float]]  # {"level": [...], "energy_rel": [...], "time_rel": [...]}


def transform(value: float, how: str) -> float:
    """One feature value as the model sees it (before standardizing)."""
    if how == "log":
        return math.log(max(float(value), LOG_FLOOR))
    if how == "pct":
        return float(value) / 100.0
    return float(value)


class CurveModel:
    """Per-level linear predictions of normalized energy and time, from a curve spec (module doc)."""

    def __init__(self, spec: Mapping[str, Any]):
        check_curve(spec)
        self.spec = dict(spec)
        self.levels = [float(f) for f in spec["levels"]]
        self.features = list(spec["features"])

    def standardized(self, workload: Mapping[str, Any]) -> list[float]:
        """The workload's standardized feature vector (missing values take the fill-ins)."""
        out = []
        for j, c in enumerate(self.features):
            v = workload.get(c)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                v = self.spec["impute"][c]
            out.append((transform(v, self.spec["transforms"][c]) - self.spec["mean"][j]) / self.spec["scale"][j])
        return out

    def _linear(self, part: str, x: list[float]) -> list[float]:
        p = self.spec[part]
        return [a + sum(xj * p["coef"][j][k] for j, xj in enumerate(x)) for k, a in enumerate(p["intercept"])]

    def predict(self, workload: Mapping[str, Any]) -> Curves:
        """``level``, ``energy_rel`` (E / E_baseline), ``time_rel`` (T / T_baseline) per level."""
        x = self.standardized(workload)
        return {"level": list(self.levels),
                "energy_rel": [math.exp(y) for y in self._linear("energy", x)],
                "time_rel": [math.exp(y) for y in self._linear("time", x)]}


def check_curve(spec: Mapping[str, Any]) -> None:
    """Raise :class:`GovernorError` unless ``spec`` is a well-formed curve model."""
    if not isinstance(spec, Mapping):
        raise GovernorError("curve model: not a JSON object")
    feats, n_l = list(spec.get("features", [])), len(spec.get("levels", []))
    if not n_l:
        raise GovernorError("curve model has no levels")
    for key in ("mean", "scale"):
        if len(spec.get(key, [])) != len(feats):
            raise GovernorError(f"curve model: {key} must have one value per feature ({len(feats)})")
    for c in feats:
        if spec.get("transforms", {}).get(c) not in TRANSFORMS or c not in spec.get("impute", {}):
            raise GovernorError(f"curve model: feature {c!r} needs a transform ({', '.join(TRANSFORMS)}) "
                                "and a fill-in value (impute)")
    for part in ("energy", "time"):
        p = spec.get(part, {})
        coef = p.get("coef", [])
        if len(p.get("intercept", [])) != n_l or len(coef) != len(feats) or any(len(r) != n_l for r in coef):
            raise GovernorError(f"curve model: {part} coefficients must be {len(feats)} features x {n_l} levels")


class FittedCurve:
    """The fitted state of a governor that decides from a curve model (``curve``, ``profiled``):
    ``curve_``, the model's ``dvfslab`` spec. Mixed in before :class:`~dvfslab.governors.base.Governor`."""

    @property
    def model(self) -> CurveModel:
        """The fitted model, ready to predict."""
        return CurveModel(self._fitted("curve_"))

    def check_state(self) -> None:
        check_curve(self._fitted("curve_"))

    def own_levels(self) -> list[float]:
        return [float(f) for f in self._fitted("curve_")["levels"]]
