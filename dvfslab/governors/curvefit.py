"""Fitting the curve governor: a scikit-learn ``Pipeline`` per target, exported to JSON.

For every level ``l`` that all training workloads were measured at, two multi-output
regressions (one output per level) on the workload features::

    ln(E(w, l) / E_baseline(w))    and    ln(T(w, l) / T_baseline(w))

Each is ``Pipeline(SimpleImputer(median) -> ColumnTransformer(log of the size features,
the others as they are) -> StandardScaler -> Ridge(alpha))``: the intercept is not penalized,
one alpha for every level. :func:`export_curve` writes the fitted medians, scaler mean/scale,
coefficients and intercepts as a curve spec, which :class:`dvfslab.governors.curve.CurveModel`
evaluates with plain Python on a board. The profiled governor fits the same model on the
measurements of its probe (``candidates``: its probe features).

The candidates with a value for some training workload are used (a constant one gets a zero
slope: harmless). When nothing can be learned (:func:`dvfslab.analysis.features.cannot_learn`
with ``curves``: one training workload, one level, no feature that varies) the model is the
training workloads' mean curve, ``ln`` of the mean of ``E / E_baseline`` (and ``T / T_baseline``)
per level, the same for every workload: its least energy is FFG's level. Its ``info`` then says
``fallback: "ffg"`` and ``cannot_learn``: why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from dvfslab.analysis.features import cannot_learn
from dvfslab.governors.curvemodel import DEFAULT_ALPHA, LOG_FLOOR, CurveModel
from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    import pandas as pd

    from dvfslab.analysis.aggregate import Sweep

#: feature -> transform before standardizing: "log" for sizes (effects are multiplicative)
CURVE_FEATURES: dict[str, str] = {"is_decoder": "id", "gpu_util_pct": "id", "n_layers": "log",
                                  "hidden_size": "log", "avg_seq_len": "log", "params_m": "log"}
TARGETS = {"energy": "ln(E / E_baseline)", "time": "ln(T / T_baseline)"}


def safe_log(x: np.ndarray) -> np.ndarray:
    """Natural log with the board-side predictor's floor (:data:`~dvfslab.governors.curve.LOG_FLOOR`)."""
    return np.log(np.maximum(x, LOG_FLOOR))


def make_curve_pipeline(transforms: Sequence[str], alpha: float = DEFAULT_ALPHA) -> Pipeline:
    """The unfitted estimator: impute (median) -> log of the ``"log"`` columns -> scale -> ridge.

    The column transformer keeps the column order (one entry per column)."""
    cols = ColumnTransformer([(f"x{j}", FunctionTransformer(safe_log, feature_names_out="one-to-one")
                               if how == "log" else "passthrough", [j]) for j, how in enumerate(transforms)])
    return Pipeline([("impute", SimpleImputer(strategy="median")), ("transform", cols),
                     ("scale", StandardScaler()), ("ridge", Ridge(alpha=alpha))])


@dataclass
class CurveFit:
    """The fitted pipelines of one training set and what the export needs besides them."""

    features: list[str]
    transforms: list[str]
    levels: list[float]
    pipelines: dict[str, Pipeline]  # "energy", "time"
    alpha: float
    info: dict[str, Any] = field(default_factory=dict)

    def design(self, rows: Iterable[Mapping[str, Any]]) -> np.ndarray:
        """The raw feature matrix (NaN where missing) of workload rows, in model order."""
        rows = list(rows)
        return np.array([[_num(r.get(c)) for c in self.features] for r in rows], dtype=float
                        ).reshape(len(rows), len(self.features))


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def training_targets(sweep: Sweep, train_ids: Sequence[str]) -> tuple[list[float], dict[str, np.ndarray]]:
    """The levels every training workload was measured at and ``{target: (n_train, n_levels)}``."""
    levels = sorted(set.intersection(*(set(sweep.curve(w)[0]) for w in train_ids)))
    if not levels:
        raise GovernorError(f"curve: no {sweep.knob.label} level was measured for every training workload")
    y = {part: np.log([[sweep.at(w, f)[k] / sweep.baseline_of(w)[k] for f in levels] for w in train_ids])
         for k, part in enumerate(TARGETS)}
    return [float(f) for f in levels], y


def fit_curve_pipelines(sweep: Sweep, features: pd.DataFrame, train_ids: Iterable[str],
                        alpha: float = DEFAULT_ALPHA, candidates: Mapping[str, str] = CURVE_FEATURES) -> CurveFit:
    """Fit both pipelines on the training workloads' measured curves (the module doc: the
    features with a value; the mean curve when nothing can be learned)."""
    train_ids = list(train_ids)
    if not train_ids:
        raise GovernorError("curve: needs at least one training workload")
    rows = features.set_index("workload_id").loc[train_ids]
    why = cannot_learn(sweep, rows.reset_index(), candidates, curves=True)
    used = [] if why else [c for c in candidates if c in rows and rows[c].notna().any()]
    levels, y = training_targets(sweep, train_ids)
    fit = CurveFit(used, [candidates[c] for c in used], levels, {}, float(alpha),
                   {"n_train": len(train_ids), "dataset": str(sweep.dataset), "source": sweep.source,
                    "baseline": sweep.baseline_kind, **({"fallback": "ffg", "cannot_learn": why} if why else {})})
    x = fit.design(rows.reset_index().to_dict("records"))
    for part in TARGETS:
        model = make_curve_pipeline(fit.transforms, alpha) if used else Pipeline([("ridge", DummyRegressor(
            strategy="constant", constant=np.log(np.exp(y[part]).mean(axis=0))))])
        fit.pipelines[part] = model.fit(x, y[part])
    return fit


def export_curve(fit: CurveFit) -> dict:
    """The curve spec of fitted pipelines (see :mod:`dvfslab.governors.curve`)."""
    first = fit.pipelines["energy"]
    featured = bool(fit.features)  # else the mean curve (a constant DummyRegressor), no scaling
    spec: dict[str, Any] = {
        "features": fit.features,
        "transforms": dict(zip(fit.features, fit.transforms, strict=True)),
        "impute": dict(zip(fit.features, first["impute"].statistics_.tolist(), strict=True)) if featured else {},
        "mean": first["scale"].mean_.tolist() if featured else [],
        "scale": first["scale"].scale_.tolist() if featured else [], "alpha": fit.alpha,
        "levels": fit.levels, "info": fit.info}
    for part, target in TARGETS.items():
        last = fit.pipelines[part]["ridge"]
        intercept = last.intercept_ if featured else np.ravel(last.constant_)
        coef = np.asarray(last.coef_ if featured else [], dtype=float).reshape(len(fit.levels),
                                                                              len(fit.features))
        spec[part] = {"target": target, "intercept": np.atleast_1d(intercept).tolist(), "coef": coef.T.tolist()}
    return spec


def fit_curve_model(sweep: Sweep, features: pd.DataFrame, train_ids: Iterable[str],
                    alpha: float = DEFAULT_ALPHA, candidates: Mapping[str, str] = CURVE_FEATURES) -> CurveModel:
    """Fit (:func:`fit_curve_pipelines`) and export: the board-side model."""
    return CurveModel(export_curve(fit_curve_pipelines(sweep, features, train_ids, alpha, candidates)))
