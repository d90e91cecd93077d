"""Curve governor: predict the whole energy and time curve of a workload, pick the cheapest level.

The paper's tree learns *which label* is optimal from 27 points; the curve model learns *how
energy and time move with the clock*, which uses every measured level of every training
workload (27 x 11 points) and lets one ask "least energy under a deadline" as well.

Model (a small, physics-shaped regression fitted per level). For each GPU level ``f`` that
every training workload was measured at::

    ln(E(w, f) / E_b(w)) = a_E(f) + x(w) . b_E(f)
    ln(T(w, f) / T_b(w)) = a_T(f) + x(w) . b_T(f)

with ``x(w)`` the standardized workload features, size features on a log scale (compute per
step grows like layers x hidden^2 x tokens, so their effects are multiplicative):
``is_decoder``, ``gpu_util_pct / 100``, ``ln n_layers``, ``ln hidden_size``, ``ln avg_seq_len``,
``ln params_m``. Ridge regression (``alpha``; intercept not penalized), closed form, no
scikit-learn needed to predict. Missing features are filled with the training medians.

:class:`CurveGovernor` picks the level with the least predicted normalized energy; with
``max_slowdown_pct`` only levels whose predicted slowdown meets the limit are eligible (none:
``None``, i.e. the baseline's default clock, whose slowdown is 0 by definition).

Saved as JSON (``"format": "dvfslab-curve"``), like the trees.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.data.contract import atomic_write_json
from dvfslab.governors.base import (
    GovernorContext,
    GovernorError,
    read_model_json,
    register_governor,
)

CURVE_FORMAT = "dvfslab-curve"
CURVE_VERSION = 1
# feature -> transform; "log" = natural log (values must be > 0), "pct" = / 100, "id" = as is
CURVE_FEATURES: dict[str, str] = {"is_decoder": "id", "gpu_util_pct": "pct", "n_layers": "log",
                                  "hidden_size": "log", "avg_seq_len": "log", "params_m": "log"}
DEFAULT_ALPHA = 1.0


def _transform(value: float, how: str) -> float:
    if how == "log":
        return math.log(max(float(value), 1e-9))
    if how == "pct":
        return float(value) / 100.0
    return float(value)


def _ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge with an unpenalized intercept; ``y`` may have several columns. Returns (a, B)."""
    xm, ym = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - xm, y - ym
    coef = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ yc)
    return ym - xm @ coef, coef


class CurveModel:
    """Per-level ridge predictions of normalized energy and time (see the module docstring)."""

    def __init__(self, spec: Mapping[str, Any]):
        check_curve(spec)
        self.spec = dict(spec)
        self.levels_mhz = np.asarray(spec["levels_mhz"], dtype=float)
        self.features = list(spec["features"])
        self._mean = np.asarray(spec["mean"], dtype=float)
        self._scale = np.asarray(spec["scale"], dtype=float)
        self._e = (np.asarray(spec["energy"]["intercept"]), np.asarray(spec["energy"]["coef"]))
        self._t = (np.asarray(spec["time"]["intercept"]), np.asarray(spec["time"]["coef"]))

    @classmethod
    def fit(cls, sweep: Sweep, features: pd.DataFrame, train_ids: Iterable[str], alpha: float = DEFAULT_ALPHA,
            candidates: Mapping[str, str] = CURVE_FEATURES) -> CurveModel:
        """Fit on the training workloads' measured curves (levels they were all run at).

        With a single training workload the slopes are zero: the prediction is its curve."""
        train_ids = list(train_ids)
        if not train_ids:
            raise GovernorError("curve: needs at least one training workload")
        rows = features.set_index("workload_id").loc[train_ids]
        used = [c for c in candidates if c in rows and rows[c].notna().any()]
        impute = {c: float(rows[c].median()) for c in used}
        x = np.array([[_transform(v if pd.notna(v) else impute[c], candidates[c]) for c, v in
                       zip(used, r, strict=True)] for r in rows[used].to_numpy(float)]).reshape(len(train_ids), len(used))
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale == 0] = 1.0
        xs = (x - mean) / scale
        levels = sorted(set.intersection(*(set(sweep.curve(w)[0]) for w in train_ids)))
        if not levels:
            raise GovernorError("curve: no GPU level was measured for every training workload")
        ye = np.array([[math.log(sweep.at(w, f)[0] / sweep.baseline_of(w)[0]) for f in levels] for w in train_ids])
        yt = np.array([[math.log(sweep.at(w, f)[1] / sweep.baseline_of(w)[1]) for f in levels] for w in train_ids])
        a_e, b_e = _ridge(xs, ye, alpha)
        a_t, b_t = _ridge(xs, yt, alpha)
        spec = {"format": CURVE_FORMAT, "version": CURVE_VERSION, "name": "curve", "features": used,
                "transforms": {c: candidates[c] for c in used}, "impute": impute, "mean": mean.tolist(),
                "scale": scale.tolist(), "alpha": float(alpha), "levels_mhz": [float(f) for f in levels],
                "energy": {"target": "ln(E / E_baseline)", "intercept": a_e.tolist(), "coef": b_e.tolist()},
                "time": {"target": "ln(T / T_baseline)", "intercept": a_t.tolist(), "coef": b_t.tolist()},
                "info": {"n_train": len(train_ids), "dataset": sweep.dataset, "source": sweep.source,
                         "baseline": sweep.baseline_kind}}
        return cls(spec)

    def _x(self, workload: Mapping[str, Any]) -> np.ndarray:
        vals = []
        for c in self.features:
            v = workload.get(c)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                v = self.spec["impute"][c]
            vals.append(_transform(v, self.spec["transforms"][c]))
        return (np.asarray(vals) - self._mean) / self._scale

    def predict(self, workload: Mapping[str, Any]) -> pd.DataFrame:
        """``freq_mhz``, ``energy_rel`` (E / E_baseline), ``time_rel`` (T / T_baseline) per level."""
        x = self._x(workload)
        return pd.DataFrame({"freq_mhz": self.levels_mhz, "energy_rel": np.exp(self._e[0] + x @ self._e[1]),
                             "time_rel": np.exp(self._t[0] + x @ self._t[1])})

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
    if not isinstance(spec, Mapping) or spec.get("format") != CURVE_FORMAT:
        raise GovernorError(f"not a dvfslab curve model (expected \"format\": \"{CURVE_FORMAT}\")")
    if spec.get("version") != CURVE_VERSION:
        raise GovernorError(f"unknown curve model version {spec.get('version')!r}; this dvfslab reads {CURVE_VERSION}")
    n_f, n_l = len(spec.get("features", [])), len(spec.get("levels_mhz", []))
    if not n_l:
        raise GovernorError("curve model has no levels")
    for part in ("energy", "time"):
        coef = np.asarray(spec.get(part, {}).get("coef", []), dtype=float)
        if len(spec.get(part, {}).get("intercept", [])) != n_l or coef.shape != (n_f, n_l):
            raise GovernorError(f"curve model: {part} coefficients must be {n_f} features x {n_l} levels")


def pick_level(curves: pd.DataFrame, max_slowdown_pct: float | None = None) -> float | None:
    """Least ``energy_rel`` level, among those with ``time_rel <= 1 + limit`` when a limit is set
    (ties: the lower level); ``None`` when no level meets the limit (stay on the baseline)."""
    ok = curves if max_slowdown_pct is None else curves[curves["time_rel"] <= 1.0 + max_slowdown_pct / 100.0]
    if ok.empty:
        return None
    return float(ok.sort_values(["energy_rel", "freq_mhz"]).iloc[0]["freq_mhz"])


class CurveGovernor:
    """Least predicted energy (under an optional slowdown limit) from a :class:`CurveModel`."""

    def __init__(self, model: CurveModel, max_slowdown_pct: float | None = None, name: str = "curve"):
        self.model = model
        self.max_slowdown_pct = None if max_slowdown_pct is None else float(max_slowdown_pct)
        self.name = name

    def predict_curves(self, workload: Mapping[str, Any]) -> pd.DataFrame:
        return self.model.predict(workload)

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        return pick_level(self.model.predict(workload), self.max_slowdown_pct)

    def save(self, path: str | os.PathLike) -> None:
        self.model.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike, max_slowdown_pct: float | None = None) -> CurveGovernor:
        return cls(CurveModel.load(path), max_slowdown_pct)


@register_governor("curve")
def _build_curve(ctx: GovernorContext) -> CurveGovernor:
    if "curve" in ctx.options and isinstance(ctx.options["curve"], CurveModel):
        model = ctx.options["curve"]
    else:
        model = CurveModel.fit(ctx.sweep, ctx.features, ctx.train_ids, alpha=ctx.options.get("curve_alpha", DEFAULT_ALPHA))
    return CurveGovernor(model)


def level_curves(sweep: Sweep, workload_ids: Sequence[str]) -> pd.DataFrame:
    """Measured normalized curves (workload_id, freq_mhz, energy_rel, time_rel) for plots and tests."""
    rows = []
    for w in workload_ids:
        freqs, energy, time = sweep.curve(w)
        e_b, t_b = sweep.baseline_of(w)
        rows += [{"workload_id": w, "freq_mhz": f, "energy_rel": e / e_b, "time_rel": t / t_b}
                 for f, e, t in zip(freqs, energy, time, strict=True)]
    return pd.DataFrame(rows)
