"""Curve governor, board side: predict energy and time per level from a JSON model, take the least.

The model (``dvfslab-curve`` JSON, written by :func:`dvfslab.governors.curvefit.fit_curve_model`
from a scikit-learn ``Pipeline``) holds, for each of two targets ``ln(E / E_baseline)`` and
``ln(T / T_baseline)`` and each level ``f``::

    y(w, f) = intercept[f] + sum_j coef[j][f] * (x_j(w) - mean[j]) / scale[j]
    x_j(w)  = transform_j(value of feature j, or impute[j] when missing)

with ``transform`` ``"log"`` (natural log, for the size features), ``"pct"`` (/ 100, older
files) or ``"id"``. Prediction here is plain Python (``math``): no scikit-learn, numpy or
pandas at decide time, so ``dvfslab govern`` starts fast on a board.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dvfslab.core.files import atomic_write_json
from dvfslab.governors.errors import GovernorError, check_format, read_model_json

CURVE_FORMAT = "dvfslab-curve"
CURVE_VERSION = 1
TRANSFORMS = ("log", "pct", "id")
#: the floor of the log transform (a size of 0 would be -inf)
LOG_FLOOR = 1e-9

Curves = dict[str, list[float]]  # {"freq_mhz": [...], "energy_rel": [...], "time_rel": [...]}


def transform(value: float, how: str) -> float:
    """One feature value as the model sees it (before standardizing)."""
    if how == "log":
        return math.log(max(float(value), LOG_FLOOR))
    if how == "pct":
        return float(value) / 100.0
    return float(value)


class CurveModel:
    """Per-level linear predictions of normalized energy and time, from a curve spec (JSON)."""

    def __init__(self, spec: Mapping[str, Any]):
        check_curve(spec)
        self.spec = dict(spec)
        self.levels_mhz = [float(f) for f in spec["levels_mhz"]]
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
        """``freq_mhz``, ``energy_rel`` (E / E_baseline), ``time_rel`` (T / T_baseline) per level."""
        x = self.standardized(workload)
        return {"freq_mhz": list(self.levels_mhz),
                "energy_rel": [math.exp(y) for y in self._linear("energy", x)],
                "time_rel": [math.exp(y) for y in self._linear("time", x)]}

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, self.spec)

    @classmethod
    def load(cls, path: str | os.PathLike) -> CurveModel:
        spec = read_model_json(path, "curve model file",
                               "run notebook 05 (or `dvfslab pipeline`) to train one (models/curve.json)")
        try:
            return cls(spec)
        except GovernorError as err:
            raise GovernorError(f"{Path(path)}: {err}") from None


def check_curve(spec: Mapping[str, Any]) -> None:
    """Raise :class:`GovernorError` unless ``spec`` is a well-formed curve model."""
    check_format(spec, CURVE_FORMAT, CURVE_VERSION, "curve model")
    feats, n_l = list(spec.get("features", [])), len(spec.get("levels_mhz", []))
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


def pick_level(curves: Mapping[str, Any], max_slowdown_pct: float | None = None) -> float | None:
    """Least ``energy_rel`` level, among those with ``time_rel <= 1 + limit`` when a limit is set
    (ties: the lower level); ``None`` when no level meets the limit (stay on the baseline).

    ``curves``: columns ``freq_mhz``, ``energy_rel``, ``time_rel`` (a dict of lists or a frame).
    """
    limit = math.inf if max_slowdown_pct is None else 1.0 + max_slowdown_pct / 100.0
    rows = zip(curves["freq_mhz"], curves["energy_rel"], curves["time_rel"], strict=True)
    ok = [(float(e), float(f)) for f, e, t in rows if float(t) <= limit]
    return min(ok)[1] if ok else None


class CurveGovernor:
    """Least predicted energy (under an optional slowdown limit) from a :class:`CurveModel`."""

    def __init__(self, model: CurveModel, max_slowdown_pct: float | None = None, name: str = "curve"):
        self.model = model
        self.max_slowdown_pct = None if max_slowdown_pct is None else float(max_slowdown_pct)
        self.name = name

    def predict_curves(self, workload: Mapping[str, Any]) -> Curves:
        return self.model.predict(workload)

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        return pick_level(self.model.predict(workload), self.max_slowdown_pct)

    def with_max_slowdown(self, max_slowdown_pct: float) -> CurveGovernor:
        return CurveGovernor(self.model, max_slowdown_pct, name=self.name)

    def save(self, path: str | os.PathLike) -> None:
        self.model.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike, max_slowdown_pct: float | None = None) -> CurveGovernor:
        return cls(CurveModel.load(path), max_slowdown_pct)
