"""A slowdown limit over a replay: every governor under one objective, and what the limit cost.

:func:`constrain` gives every governor the same :class:`~dvfslab.governors.objective.Objective`
(least energy within ``max_slowdown_pct``; its ``time_model`` predicts the time of the governors
that only name a level); :func:`constraint_report` compares the replay with and without it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.base import Governor
from dvfslab.governors.objective import Objective


def constrain(governors: Mapping[str, Governor], objective: Objective) -> dict[str, Governor]:
    """Each fitted governor with ``objective`` instead of its own (nothing refitted)."""
    return {n: g.with_params(objective=objective) for n, g in governors.items()}


def constrained_oracle_energy(sweep: Sweep, workload_id: str, max_slowdown_pct: float) -> float:
    """Energy of the least-energy measured level whose measured slowdown meets the limit (the
    baseline's when none does): the constrained upper bound."""
    levels, energy, time = sweep.curve(workload_id)
    e_b, t_b = sweep.baseline_of(workload_id)
    best = Objective(max_slowdown_pct).select(levels, energy, [t / t_b for t in time])
    return e_b if best is None else sweep.at(workload_id, best)[0]


def constraint_report(constrained: pd.DataFrame, unconstrained: pd.DataFrame, sweep: Sweep,
                      max_slowdown_pct: float) -> pd.DataFrame:
    """Per policy: how often the limit held (measured slowdown), and what it cost.

    Columns: ``policy``, ``limit_pct`` (the limit), ``n_workloads``, ``held_pct`` (% of workloads
    whose measured slowdown <= limit), ``worst_slowdown_pct``, ``mean_saving_pct`` (with the
    limit), ``unconstrained_saving_pct``, ``cost_pts`` (saving given up, points),
    ``mean_regret_pct`` (vs the constrained oracle, % of baseline energy).
    """
    c = constrained.copy()
    best = {w: constrained_oracle_energy(sweep, w, max_slowdown_pct) for w in c["workload_id"].unique()}
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
