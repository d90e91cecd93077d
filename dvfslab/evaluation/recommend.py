"""Which governor the pipeline recommends, and why: grouped CV regret over whole jobs, FFG unless
clearly beaten.

The candidates (every registered governor but FFG and the yardsticks, ``maxn`` and ``oracle``:
the learned ones, the paper's tree and the probing ones, ``online``, ``profiled``, ``zeus-sim``,
``search``; :func:`default_candidates`) and FFG are replayed under a grouped CV on the training
workloads (:func:`dvfslab.evaluation.govcv.cv_replay`): leave-one-model-out (``lomo``: a model's
tasks are held out together, so a governor is judged on models it has never seen), or, on a
dataset of one model, leave-one-block-out (``lobo``: five contiguous blocks of batch size /
concurrency; :func:`dvfslab.evaluation.govcv.grouping` says which, and the recommendation
records it). The figure is the **whole-job regret** (``job_regret_pct``: the job of
``job_steps`` units, probing charged; the run itself where the dataset gives no job). Then:

* a candidate's CV regret is its mean whole-job regret over the held-out workloads (as
  :func:`dvfslab.evaluation.replay.summarize` computes it);
* **the CV noise** is the standard error of the per-fold difference: for each fold ``k`` (one
  held-out group), ``d_k`` = the candidate's mean regret on the fold minus FFG's; the noise is
  ``sd(d_k) / sqrt(K)`` over the ``K`` folds (sample standard deviation). The folds, not the
  workloads, are the independent units: a model's tasks share its errors;
* a candidate **beats FFG** when it decided every held-out workload and ``-mean(d_k)`` (how
  much less regret it has, in points) exceeds the noise — a one-standard-error rule;
* the recommendation is the candidate with the least CV regret among those that beat FFG, or
  FFG itself when none does (also with fewer than 2 folds, where the noise cannot be estimated).

:func:`nested_recommended` evaluates the rule itself honestly: in each outer fold the
recommendation is made by an inner CV on the remaining groups only, then replayed on the
held-out group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.training import TrainingData
from dvfslab.evaluation.govcv import SCHEME_WORDS, cv_folds, cv_replay, fit_fold, grouping
from dvfslab.evaluation.replay import num_or_none, plan_units, replay
from dvfslab.governors.base import Governor
from dvfslab.governors.registry import registry

FALLBACK = "ffg"
SCHEME = "lomo"
#: the figure the recommendation compares: regret over the whole job, probing charged
METRIC = "job_regret_pct"


@dataclass
class Recommendation:
    """The recommended policy, its CV regret next to FFG's, the reason, and the candidates' table."""

    policy: str
    cv_regret_pct: float | None
    ffg_cv_regret_pct: float | None
    reason: str
    scheme: str = SCHEME
    n_folds: int = 0
    table: pd.DataFrame = field(default_factory=pd.DataFrame)

    def as_dict(self) -> dict[str, Any]:
        """The ``recommended`` section of summary.json."""
        cands = {str(r["policy"]): {k: num_or_none(r[k]) for k in ("cv_regret_pct", "diff_pts", "noise_pts")}
                 | {"beats_ffg": bool(r["beats_ffg"]), "n_failed": int(r["n_failed"])}
                 for _, r in self.table.iterrows()}
        return {"policy": self.policy, "cv_regret_pct": self.cv_regret_pct, "ffg_cv_regret_pct": self.ffg_cv_regret_pct,
                "reason": self.reason, "scheme": self.scheme, "grouping": SCHEME_WORDS.get(self.scheme, self.scheme),
                "metric": METRIC, "n_folds": self.n_folds, "candidates": cands}


def default_candidates() -> list[str]:
    """The governors that may replace FFG: every registered one but FFG, the baseline and the
    oracle (``recommendable``), in registry order."""
    return [n for n, cls in registry().items() if cls.recommendable and n != FALLBACK]


def scheme_of(cv: pd.DataFrame) -> str:
    """The grouped scheme of CV rows: ``lomo`` when present, else ``lobo``, else ``lomo``."""
    present = set(cv["scheme"]) if "scheme" in cv else set()
    return next((s for s in ("lomo", "lobo") if s in present), SCHEME)


def compare(cv: pd.DataFrame, candidates: Iterable[str], fallback: str = FALLBACK, scheme: str | None = None,
            metric: str = METRIC) -> pd.DataFrame:
    """Per candidate: ``cv_regret_pct``, ``n_failed``, ``diff_pts`` (mean over folds of the fold's mean
    regret minus the fallback's), ``noise_pts`` (standard error of that difference), ``n_folds``,
    ``beats_ffg``. ``cv``: :func:`~dvfslab.evaluation.govcv.cv_replay` rows (``scheme``, ``held_out``);
    ``metric``: the regret compared (default: over the whole job)."""
    scheme = scheme or scheme_of(cv)
    rows = cv[cv["scheme"] == scheme]
    by_fold = rows.groupby(["policy", "held_out"])[metric].mean().unstack("policy")
    out = []
    for name in candidates:
        mine = rows[rows["policy"] == name]
        if mine.empty or fallback not in by_fold:
            continue
        d = (by_fold[name] - by_fold[fallback]).to_numpy(float)
        k = int(np.isfinite(d).sum())
        failed = int(mine[metric].isna().sum())
        noise = float(np.nanstd(d, ddof=1) / math.sqrt(k)) if k >= 2 else math.nan
        diff = float(np.nanmean(d)) if k else math.nan
        beats = failed == 0 and k >= 2 and -diff > noise
        out.append({"policy": name, "cv_regret_pct": float(mine[metric].mean()), "n_failed": failed,
                    "diff_pts": diff, "noise_pts": noise, "n_folds": k, "beats_ffg": bool(beats)})
    return pd.DataFrame(out, columns=["policy", "cv_regret_pct", "n_failed", "diff_pts", "noise_pts", "n_folds",
                                      "beats_ffg"])


def recommend(cv: pd.DataFrame, candidates: Iterable[str] | None = None, fallback: str = FALLBACK,
              scheme: str | None = None, metric: str = METRIC) -> Recommendation:
    """The recommendation from CV rows (module doc); ``candidates`` default: :func:`default_candidates`;
    ``scheme`` default: the grouped scheme the rows hold (:func:`scheme_of`)."""
    candidates = default_candidates() if candidates is None else list(candidates)
    scheme = scheme or scheme_of(cv)
    rows = cv[(cv["scheme"] == scheme) & (cv["policy"] == fallback)]
    ffg = num_or_none(rows[metric].mean()) if len(rows) else None
    n_folds = int(rows["held_out"].nunique()) if len(rows) else 0
    table = compare(cv, [c for c in candidates if c != fallback], fallback, scheme, metric)
    words = SCHEME_WORDS.get(scheme, scheme)
    if ffg is None:
        return Recommendation(fallback, None, None, f"no {words} CV of {fallback} was possible (fewer than 2 groups of "
                              f"training workloads): {fallback} by default", scheme, n_folds, table)
    winners = table[table["beats_ffg"]].sort_values(["cv_regret_pct", "policy"])
    if len(winners):
        w = winners.iloc[0]
        return Recommendation(str(w["policy"]), float(w["cv_regret_pct"]), ffg,
                              f"{w['policy']} has the least {words} whole-job regret among the governors that beat "
                              f"{fallback}: {w['cv_regret_pct']:.2f} % vs {fallback} {ffg:.2f} %, {-w['diff_pts']:.2f} "
                              f"points less per fold, more than the CV noise ({w['noise_pts']:.2f} points, the standard "
                              f"error of the per-fold difference over {int(w['n_folds'])} folds)", scheme, n_folds, table)
    return Recommendation(fallback, ffg, ffg, _fallback_reason(table, ffg, fallback, words, n_folds), scheme, n_folds, table)


def _fallback_reason(table: pd.DataFrame, ffg: float, fallback: str, words: str, n_folds: int) -> str:
    if n_folds < 2:
        return f"only {n_folds} {words} fold: the CV noise cannot be estimated, so {fallback} is kept"
    ok = table[table["n_failed"] == 0].sort_values("cv_regret_pct")
    if ok.empty:
        return f"no other governor decided every held-out workload; {fallback} ({ffg:.2f} % regret) is kept"
    b = ok.iloc[0]
    return (f"no other governor beats {fallback} by more than the CV noise: the best, {b['policy']}, has "
            f"{b['cv_regret_pct']:.2f} % whole-job regret vs {fallback} {ffg:.2f} % ({b['diff_pts']:+.2f} ± "
            f"{b['noise_pts']:.2f} points per fold over {int(b['n_folds'])} {words} folds) — neither the features nor "
            f"probing the job find better levels than one fixed level does, by more than the noise")


def versus_fallback(cv: pd.DataFrame, nested: pd.DataFrame, fallback: str = FALLBACK,
                    scheme: str | None = None, metric: str = METRIC) -> dict[str, Any]:
    """The nested recommendation (:func:`nested_recommended`) judged against ``fallback`` on the same
    folds, as :func:`compare` judges a candidate: ``diff_pts`` (mean per-fold regret difference,
    recommended minus FFG) and ``noise_pts`` (its standard error). "Never below FFG" is
    ``diff_pts <= noise_pts``."""
    scheme = scheme or scheme_of(cv)
    name = str(nested["policy"].iloc[0]) if len(nested) else "recommended"
    both = pd.concat([cv[(cv["policy"] == fallback) & (cv["scheme"] == scheme)], nested], ignore_index=True)
    row = compare(both, [name], fallback, scheme, metric)
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.iloc[0].items()} if len(row) else {}


def nested_recommended(governors: Mapping[str, Governor], data: TrainingData, candidates: Sequence[str] | None = None, *,
                       scheme: str | None = None, name: str = "recommended") -> pd.DataFrame:
    """Per held-out workload, the replay of the governor the rule recommends *without* the held-out group.

    ``governors``: name -> unfitted governor, FFG and the candidates among them; ``scheme``
    default: :func:`~dvfslab.evaluation.govcv.grouping` of the training workloads. Rows as
    :func:`dvfslab.evaluation.replay.replay`'s with ``policy = name``, plus ``scheme``,
    ``held_out`` and ``chosen`` (the policy recommended in that fold)."""
    candidates = [c for c in (default_candidates() if candidates is None else candidates) if c != FALLBACK]
    protos = {n: governors[n] for n in [FALLBACK, *candidates]}
    rows = data.rows().reset_index(drop=True)
    scheme = scheme or grouping(rows)
    out = []
    for _, held, group in cv_folds(rows, [scheme]):
        inner = data.subset([w for w in data.train_ids if w not in set(held)])
        rec = recommend(cv_replay(protos, inner, schemes=[scheme]), candidates, FALLBACK, scheme)
        gov = fit_fold({rec.policy: protos[rec.policy]}, inner)
        per = replay(gov, data.sweep, data.features, held, data.steps(), plan_units(data.steps(), inner.train_ids))
        out.append(per.assign(policy=name, scheme=scheme, held_out=group, chosen=rec.policy))
    if not out:
        return pd.DataFrame(columns=["policy", "workload_id", "scheme", "held_out", "chosen"])
    return pd.concat(out, ignore_index=True)


__all__ = ["FALLBACK", "METRIC", "Recommendation", "compare", "default_candidates", "grouping", "nested_recommended",
           "recommend", "scheme_of", "versus_fallback"]
