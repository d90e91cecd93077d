"""Governors built from a sweep (analysis side): FFG, the oracle, the registry's builders, and
the report of a slowdown limit over a replay.

This is the module the notebooks, the pipeline and :mod:`dvfslab.analysis` use; a board never
imports it (it needs a :class:`~dvfslab.analysis.aggregate.Sweep` and pandas). The curve
model's fitting is in :mod:`dvfslab.governors.curvefit`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd

from dvfslab.governors.base import Governor, GovernorContext, register_governor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.limits import constrained_oracle_freq
from dvfslab.governors.static import FixedGovernor, MaxnGovernor, OracleGovernor
from dvfslab.governors.tree import TreeGovernor, paper_tree

if TYPE_CHECKING:
    from dvfslab.analysis.aggregate import Sweep


def fit_ffg(sweep: Sweep, train_ids: Iterable[str], name: str = "ffg") -> FixedGovernor:
    """FFG: the level minimizing the mean over ``train_ids`` of E(w, f) / E_b(w), among the
    levels every training workload was measured at (docs/method.md); ties: the lower level."""
    train_ids = list(train_ids)
    if not train_ids:
        raise GovernorError("FFG needs at least one training workload")
    common = set.intersection(*(set(sweep.curve(w)[0]) for w in train_ids))
    if not common:
        raise GovernorError("FFG: no GPU level was measured for every training workload")
    best, best_score = math.nan, math.inf
    for f in sorted(common):
        score = sum(sweep.at(w, f)[0] / sweep.baseline_of(w)[0] for w in train_ids) / len(train_ids)
        if score < best_score:
            best, best_score = f, score
    return FixedGovernor(best, name=name, levels_mhz=sweep.freq_table_mhz)


def oracle_from_sweep(sweep: Sweep, name: str = "oracle") -> OracleGovernor:
    """The oracle of a sweep: each workload's least-energy measured level."""
    return OracleGovernor({w: sweep.oracle_freq(w) for w in sweep.workload_ids()}, name=name)


# --------------------------------------------------------------------------------------------
# Registry builders (the curve one is in curvefit, the online one in online)
# --------------------------------------------------------------------------------------------


@register_governor("maxn")
def _build_maxn(ctx: GovernorContext) -> Governor:
    return MaxnGovernor()


@register_governor("ffg")
def _build_ffg(ctx: GovernorContext) -> Governor:
    return fit_ffg(ctx.sweep, ctx.train_ids)


@register_governor("mlg-paper")
def _build_paper(ctx: GovernorContext) -> Governor:
    tree = paper_tree(ctx.options.get("paper_util_split", "long-seq"))
    return TreeGovernor(tree, name="mlg-paper", impute=ctx.train_medians(tree["features"]))


@register_governor("mlg")
def _build_mlg(ctx: GovernorContext) -> Governor:
    if "mlg" not in ctx.trees:
        raise GovernorError("mlg: no learned tree in the context — run notebook 03 (models/mlg.json) first")
    return TreeGovernor(ctx.trees["mlg"], name="mlg")


@register_governor("oracle")
def _build_oracle(ctx: GovernorContext) -> Governor:
    return oracle_from_sweep(ctx.sweep)


# --------------------------------------------------------------------------------------------
# Slowdown limits over a replay
# --------------------------------------------------------------------------------------------


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
