"""Governors built from a sweep (analysis side): FFG, the oracle, the profiled governor's fit and
replay, the registry's builders, and the report of a slowdown limit over a replay.

This is the module the notebooks, the pipeline and :mod:`dvfslab.analysis` use; a board never
imports it (it needs a :class:`~dvfslab.analysis.aggregate.Sweep` and pandas). The curve
model's fitting is in :mod:`dvfslab.governors.curvefit`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from dvfslab.governors.base import Governor, GovernorContext, register_governor
from dvfslab.governors.curvefit import CURVE_FEATURES, DEFAULT_ALPHA, fit_curve_model
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.limits import constrained_oracle_freq
from dvfslab.governors.online import StepRecords
from dvfslab.governors.profiled import (
    DEFAULT_PROBE_STEPS,
    DEFAULT_WARMUP_STEPS,
    PROBE_FEATURES,
    ProfiledGovernor,
    probe_features,
)
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
# The profiled governor: its probe in a dataset, its fit and its replay
# --------------------------------------------------------------------------------------------


class ProbeSource:
    """The steps a probe at the default clock ran for each workload, and the steps it replaced.

    Recorded steps (``steps.csv``) are used when the dataset has both the baseline run's steps
    (its lowest ok repetition: MAXN, or the top level for a ``fmax`` baseline) and the chosen
    level's; otherwise every step is the run's mean step (run energy and time / ``steps`` of
    runs.csv), so a dataset without per-step records is still replayed, with the probe's cost
    spread evenly.
    """

    def __init__(self, sweep: Sweep, runs: pd.DataFrame, steps: pd.DataFrame | None = None, path: str = "steps.csv"):
        self.sweep, self.path = sweep, path
        ok = runs[runs["status"] == "ok"]
        counts = ok.groupby("workload_id")["steps"].mean() if "steps" in ok else pd.Series(dtype=float)
        self._n_steps = {str(w): float(n) for w, n in counts.items() if pd.notna(n) and n > 0}
        self.records = StepRecords(steps, runs, sweep.freq_table_mhz, path) if steps is not None else None
        self._maxn: dict[str, tuple[Any, Any]] = {}
        if steps is not None:
            by_run = {r: g.sort_values("step") for r, g in steps.groupby("run_id")}
            for wid, g in ok[ok["policy"] == "maxn"].sort_values("rep").groupby("workload_id"):
                rid = next((r for r in g["run_id"] if r in by_run), None)
                if rid is not None:
                    self._maxn[str(wid)] = (by_run[rid]["time_s"].to_numpy(float), by_run[rid]["energy_j"].to_numpy(float))

    @classmethod
    def from_dataset(cls, sweep: Sweep) -> ProbeSource:
        from dvfslab.data.contract import load_dataset

        ds = load_dataset(sweep.dataset)
        return cls(sweep, ds.runs, ds.steps, f"{sweep.dataset}/steps.csv")

    def _recorded_default(self, wid: str, n: int) -> tuple[Any, Any] | None:
        row = self.sweep.baseline.loc[wid]
        if row["baseline"] == "maxn":
            got = self._maxn.get(wid)
            return (got[0][:n], got[1][:n]) if got is not None and len(got[0]) >= n else None
        return self._recorded_level(wid, float(row["freq_mhz"]), n)

    def _recorded_level(self, wid: str, freq_mhz: float, n: int) -> tuple[Any, Any] | None:
        if self.records is None:
            return None
        try:
            return self.records.get(wid, freq_mhz, n)
        except GovernorError:
            return None

    def _mean(self, wid: str, freq_mhz: float | None, n: int) -> tuple[list[float], list[float]]:
        if wid not in self._n_steps:
            raise GovernorError(f"profiled: {self.path} has no steps of {wid!r} and runs.csv no `steps` count for it "
                                "— the probe needs per-step records or the number of steps per run")
        e, t = self.sweep.baseline_of(wid) if freq_mhz is None else self.sweep.at(wid, freq_mhz)
        k = self._n_steps[wid]
        return [t / k] * n, [e / k] * n

    def covers(self, workload_ids: Iterable[str], n: int = DEFAULT_WARMUP_STEPS + DEFAULT_PROBE_STEPS) -> bool:
        """Whether every workload has a probe of ``n`` steps (recorded, or a step count in runs.csv)."""
        return all(str(w) in self._n_steps or self._recorded_default(str(w), n) is not None for w in workload_ids)

    def default_steps(self, wid: str, n: int) -> tuple[Any, Any]:
        """``(time_s, energy_j)`` of the first ``n`` steps at the default clock."""
        return self._recorded_default(wid, n) or self._mean(wid, None, n)

    def replaced(self, wid: str, freq_mhz: float, n: int) -> tuple[Any, Any, Any, Any]:
        """``(t_default, e_default, t_level, e_level)`` of the first ``n`` steps, from one source."""
        d, lv = self._recorded_default(wid, n), self._recorded_level(wid, freq_mhz, n)
        if d is None or lv is None:
            d, lv = self._mean(wid, None, n), self._mean(wid, freq_mhz, n)
        return d[0], d[1], lv[0], lv[1]


class ProfiledReplay:
    """A :class:`ProfiledGovernor` replayed over a sweep: the probe from :class:`ProbeSource`,
    the probing charged (:meth:`charge`)."""

    def __init__(self, governor: ProfiledGovernor, source: ProbeSource):
        self.governor, self.source = governor, source
        self.name = governor.name
        self.max_slowdown_pct = governor.max_slowdown_pct

    @property
    def profiling_steps(self) -> int:
        return self.governor.profiling_steps

    def features(self, workload: Mapping[str, Any]) -> dict[str, Any]:
        """The workload's row with the probe's measurements added."""
        t, e = self.source.default_steps(str(workload.get("workload_id")), self.profiling_steps)
        util = workload.get("gpu_util_pct")
        util = None if util is None or util != util else float(util)
        return {**workload, **probe_features(list(zip(e, t, strict=True)), self.governor.warmup_steps, util)}

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        return self.governor.decide(self.features(workload))

    def charge(self, workload_id: str, freq_mhz: float | None, energy_j: float, time_s: float) -> tuple[float, float, int]:
        """The run at the locked level with its first steps replaced by the probe at the default clock:
        ``E = E(f*) - sum_{i<n} e(f*, i) + sum_{i<n} e(default, i)`` (same for time); a run left
        on the default clock (``freq_mhz`` None) probed on its own steps and pays nothing extra."""
        n = self.profiling_steps
        if freq_mhz is None:
            return energy_j, time_s, n
        t_d, e_d, t_l, e_l = self.source.replaced(workload_id, float(freq_mhz), n)
        return (energy_j - float(sum(e_l)) + float(sum(e_d)), time_s - float(sum(t_l)) + float(sum(t_d)), n)

    def with_max_slowdown(self, max_slowdown_pct: float) -> ProfiledReplay:
        return ProfiledReplay(self.governor.with_max_slowdown(max_slowdown_pct), self.source)


def probe_table(features: pd.DataFrame, source: ProbeSource, workload_ids: Iterable[str],
                probe_steps: int = DEFAULT_PROBE_STEPS, warmup_steps: int = DEFAULT_WARMUP_STEPS) -> pd.DataFrame:
    """The rows of ``workload_ids`` with the probe features added (what the fit sees)."""
    rows = features[features["workload_id"].isin(set(workload_ids))].copy()
    probe = [probe_features(list(zip(e, t, strict=True)), warmup_steps)
             for t, e in (source.default_steps(str(w), warmup_steps + probe_steps) for w in rows["workload_id"])]
    for col in ("probe_step_time_s", "probe_power_w"):
        rows[col] = [p[col] for p in probe]
    return rows


def fit_profiled(sweep: Sweep, features: pd.DataFrame, train_ids: Sequence[str], source: ProbeSource, *,
                 probe_steps: int = DEFAULT_PROBE_STEPS, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 alpha: float = DEFAULT_ALPHA, with_static: bool = False) -> ProfiledGovernor:
    """Fit the profiled governor's curve model on the training workloads' probes (and static
    features besides when ``with_static``)."""
    candidates = dict(PROBE_FEATURES)
    if with_static:
        candidates.update({k: v for k, v in CURVE_FEATURES.items() if k not in candidates})
    rows = probe_table(features, source, train_ids, probe_steps, warmup_steps)
    model = fit_curve_model(sweep, rows, train_ids, alpha=alpha, candidates=candidates)
    model.spec["name"] = "profiled"
    return ProfiledGovernor(model, probe_steps, warmup_steps)


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


@register_governor("profiled")
def _build_profiled(ctx: GovernorContext) -> Governor:
    source = ctx.options.get("probe_source")
    if not isinstance(source, ProbeSource):
        source = ProbeSource.from_dataset(ctx.sweep)
    gov = fit_profiled(ctx.sweep, ctx.features, ctx.train_ids, source,
                       probe_steps=int(ctx.options.get("probe_steps", DEFAULT_PROBE_STEPS)),
                       warmup_steps=int(ctx.options.get("probe_warmup_steps", DEFAULT_WARMUP_STEPS)),
                       alpha=float(ctx.options.get("curve_alpha", DEFAULT_ALPHA)),
                       with_static=bool(ctx.options.get("profiled_static", False)))
    return ProfiledReplay(gov, source)


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
