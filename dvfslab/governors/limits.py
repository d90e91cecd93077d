"""Slowdown limits: any governor picks the least-energy level that keeps training fast enough.

``max_slowdown_pct`` bounds ``T_p / T_baseline - 1`` (in %, docs/method.md). Each kind of
governor meets it the way that is coherent with what it knows:

* governors that predict curves (``curve``; ``online`` after probing) choose the least
  predicted energy among the levels whose *predicted* slowdown meets the limit;
* ``oracle`` uses the *measured* times: the least-energy measured level meeting the limit
  (the constrained upper bound, against which constrained regret is measured);
* a governor that only names a level (``mlg``, ``mlg-paper``, ``ffg``) is wrapped in a
  :class:`SlowdownGuard`: keep its level if a time model (a fitted :class:`CurveModel`)
  predicts it meets the limit, else step *up* to the lowest level that does. On a U-shaped
  energy curve whose minimum is at or below the governor's pick, that is the least-energy
  level meeting the limit; the governor's own energy judgement is kept otherwise;
* ``maxn`` is the baseline (slowdown 0) and always meets a limit >= 0.

When no level is predicted to meet the limit, every governor returns ``None``: the board's
default dynamic clock (the baseline), which meets it by definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.base import Governor, GovernorError, MaxnGovernor, OracleGovernor
from dvfslab.governors.curve import CurveModel, pick_level


class SlowdownGuard:
    """Wrap a level-naming governor: step up from its pick until predicted slowdown <= limit."""

    def __init__(self, base: Governor, max_slowdown_pct: float, time_model: CurveModel, name: str | None = None):
        self.base = base
        self.max_slowdown_pct = float(max_slowdown_pct)
        self.time_model = time_model
        self.name = name or base.name

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        f0 = self.base.decide(workload)
        if f0 is None:
            return None
        curves = self.time_model.predict(workload)
        limit = 1.0 + self.max_slowdown_pct / 100.0
        levels = curves["freq_mhz"].to_numpy(float)
        start = levels[np.abs(levels - float(f0)).argmin()]
        for f, t in zip(levels, curves["time_rel"].to_numpy(float), strict=True):
            if f >= start and t <= limit:
                return float(f) if f != start else float(f0)
        return None


class ConstrainedOracle:
    """The least-energy measured level whose measured slowdown meets the limit (else None)."""

    def __init__(self, choice_mhz: Mapping[str, float | None], max_slowdown_pct: float, name: str = "oracle"):
        self.choice_mhz = dict(choice_mhz)
        self.max_slowdown_pct = float(max_slowdown_pct)
        self.name = name

    @classmethod
    def from_sweep(cls, sweep: Sweep, max_slowdown_pct: float, name: str = "oracle") -> ConstrainedOracle:
        return cls({w: constrained_oracle_freq(sweep, w, max_slowdown_pct) for w in sweep.workload_ids()},
                   max_slowdown_pct, name)

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        wid = workload.get("workload_id")
        if wid not in self.choice_mhz:
            raise GovernorError(f"oracle: workload {wid!r} was not swept; the oracle knows only measured workloads")
        return self.choice_mhz[wid]


def constrained_oracle_freq(sweep: Sweep, workload_id: str, max_slowdown_pct: float) -> float | None:
    """Least-energy measured level with ``T / T_b - 1 <= limit`` (None: only the baseline does)."""
    freqs, energy, time = sweep.curve(workload_id)
    t_b = sweep.baseline_of(workload_id)[1]
    curves = pd.DataFrame({"freq_mhz": freqs, "energy_rel": energy, "time_rel": time / t_b})
    return pick_level(curves, max_slowdown_pct)


def constrain(governor: Governor, max_slowdown_pct: float, *, time_model: CurveModel | None = None,
              sweep: Sweep | None = None) -> Governor:
    """The constrained version of ``governor`` (see the module docstring for each kind)."""
    if max_slowdown_pct < 0:
        raise GovernorError(f"max_slowdown_pct must be >= 0, got {max_slowdown_pct:g}")
    if hasattr(governor, "with_max_slowdown"):
        return governor.with_max_slowdown(max_slowdown_pct)
    if hasattr(governor, "predict_curves") and hasattr(governor, "model"):  # CurveGovernor
        return type(governor)(governor.model, max_slowdown_pct, name=governor.name)
    if isinstance(governor, MaxnGovernor):
        return governor
    if isinstance(governor, OracleGovernor):
        if sweep is None:
            raise GovernorError("oracle: a slowdown limit needs the sweep's measured times")
        return ConstrainedOracle.from_sweep(sweep, max_slowdown_pct, governor.name)
    if time_model is None:
        raise GovernorError(f"{governor.name}: a slowdown limit needs a time model (a curve model: "
                            "models/curve.json from notebook 05, or --time-model FILE)")
    return SlowdownGuard(governor, max_slowdown_pct, time_model)


def constrain_all(governors: Mapping[str, Governor], max_slowdown_pct: float, *, time_model: CurveModel | None,
                  sweep: Sweep) -> dict[str, Governor]:
    """:func:`constrain` each governor of a registry-built dict."""
    return {k: constrain(g, max_slowdown_pct, time_model=time_model, sweep=sweep) for k, g in governors.items()}


def constraint_report(constrained: pd.DataFrame, unconstrained: pd.DataFrame, sweep: Sweep,
                      max_slowdown_pct: float) -> pd.DataFrame:
    """Per policy: how often the limit held (measured slowdown), and what it cost.

    Columns: ``policy``, ``limit_pct`` (the limit), ``n_workloads``, ``held_pct`` (% of workloads
    whose measured slowdown <= limit), ``worst_slowdown_pct``, ``mean_saving_pct`` (with the
    limit), ``unconstrained_saving_pct``, ``cost_pts`` (saving given up, points),
    ``mean_regret_pct`` (vs the constrained oracle, % of baseline energy).
    """
    c = constrained.copy()
    best = {}
    for w in c["workload_id"].unique():
        f = constrained_oracle_freq(sweep, w, max_slowdown_pct)
        best[w] = sweep.baseline_of(w)[0] if f is None else sweep.at(w, f)[0]
    c["c_oracle_energy_j"] = c["workload_id"].map(best)
    c["c_regret_pct"] = 100.0 * (c["energy_j"] - c["c_oracle_energy_j"]) / c["baseline_energy_j"]
    c["held"] = c["slowdown_pct"] <= max_slowdown_pct + 1e-9
    g = c.groupby("policy", sort=False)
    u = unconstrained.groupby("policy", sort=False)["saving_pct"].mean()
    out = pd.DataFrame({"n_workloads": g["energy_j"].count(), "held_pct": 100.0 * g["held"].mean(),
                        "worst_slowdown_pct": g["slowdown_pct"].max(), "mean_saving_pct": g["saving_pct"].mean(),
                        "mean_regret_pct": g["c_regret_pct"].mean()})
    out["unconstrained_saving_pct"] = u.reindex(out.index)
    out["cost_pts"] = out["unconstrained_saving_pct"] - out["mean_saving_pct"]
    out.insert(0, "limit_pct", float(max_slowdown_pct))
    return out.reset_index()[["policy", "limit_pct", "n_workloads", "held_pct", "worst_slowdown_pct",
                              "mean_saving_pct", "unconstrained_saving_pct", "cost_pts", "mean_regret_pct"]]
