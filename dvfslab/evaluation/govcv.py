"""Governors head-to-head: the same cross-validation folds for every governor, plus Pareto points.

:func:`cv_replay` holds out one workload (``loocv``), one model with all its tasks (``lomo``) or,
where every workload is the same model (the LoudVA import: one network at many request
concurrencies), one of :data:`BLOCKS` contiguous blocks of workloads ordered by batch size (the
concurrency there), then id (``lobo``): a governor is judged on a range of loads it has not seen,
which leave-one-workload-out would not do (neighbouring concurrencies behave alike). Folds are
``sklearn.model_selection.LeaveOneGroupOut`` with the workload, the model or the block as the
group. In each fold every governor that learns from the training workloads
(``needs_training``: ``ffg``, ``mlg``, ``curve``, ``profiled``) is cloned
(``sklearn.base.clone``: same parameters, nothing learned) and fitted on the rest — the learned
tree with the hyper-parameters notebook 03 selected; the others (``maxn``, ``online``,
``oracle``, ``mlg-paper``: its fill-ins only) are fitted once on all training workloads — and
the held-out workloads are replayed, the governors planning with the median job of the fold's
training workloads (:func:`dvfslab.evaluation.replay.plan_units`). The result has :func:`dvfslab.evaluation.replay.replay`'s
columns plus ``scheme`` and ``held_out``, so :func:`dvfslab.evaluation.replay.summarize` applies
(``by=["scheme"]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import LeaveOneGroupOut
from tqdm.auto import tqdm

from dvfslab.analysis.training import TrainingData
from dvfslab.evaluation import replay as E
from dvfslab.governors.base import Governor

#: scheme -> the column whose value is one group (held out together); ``block``: :func:`blocks`
SCHEMES = {"loocv": "workload_id", "lomo": "model", "lobo": "block"}
SCHEME_WORDS = {"loocv": "leave-one-workload-out", "lomo": "leave-one-model-out",
                "lobo": "leave-one-block-out"}
#: contiguous blocks of the ``lobo`` scheme
BLOCKS = 5


def blocks(rows: pd.DataFrame, k: int = BLOCKS) -> pd.Series:
    """Each row's block (``lobo``): the rows ordered by ``batch_size`` then ``workload_id``, cut into
    ``k`` contiguous blocks of (nearly) equal size, each named by its first and last workload."""
    order = rows.assign(_b=pd.to_numeric(rows.get("batch_size"), errors="coerce")).sort_values(["_b", "workload_id"])
    n = len(order)
    k = max(1, min(k, n))
    idx = [i * k // n for i in range(n)]  # block of the i-th row in order
    first = {b: order["workload_id"].iloc[idx.index(b)] for b in set(idx)}
    last = {b: order["workload_id"].iloc[n - 1 - idx[::-1].index(b)] for b in set(idx)}
    names = [f"{first[b]} .. {last[b]}" for b in idx]
    return pd.Series(names, index=order.index).reindex(rows.index)


def grouping(rows: pd.DataFrame) -> str:
    """The honest scheme for a recommendation on ``rows``: ``lomo`` when they hold two models or
    more, else ``lobo`` (one model: see the module doc)."""
    return "lomo" if rows["model"].nunique() >= 2 else "lobo"


def fit_fold(governors: Mapping[str, Governor], data: TrainingData) -> dict[str, Governor]:
    """Each governor cloned and fitted on ``data`` (one fold's training workloads)."""
    return {n: clone(g).fit(data) for n, g in governors.items()}


def cv_replay(governors: Mapping[str, Governor], data: TrainingData, *, schemes: Iterable[str] = ("loocv", "lomo"),
              progress: bool = False) -> pd.DataFrame:
    """Per held-out workload results of every governor under every scheme (see module doc).

    ``governors``: name -> unfitted governor (its parameters are kept in every fold).
    """
    static = fit_fold({n: g for n, g in governors.items() if not g.needs_training}, data)
    rows = data.rows().reset_index(drop=True)
    steps = data.steps()  # the probes, and the units of every run and job
    out = []
    for scheme, held, group in tqdm(list(cv_folds(rows, schemes)), desc="governor CV", disable=not progress):
        fold = data.subset([w for w in data.train_ids if w not in set(held)])
        learned = fit_fold({n: g for n, g in governors.items() if g.needs_training}, fold)
        govs = {n: static.get(n, learned.get(n)) for n in governors}
        per = E.replay(govs, data.sweep, data.features, held, steps, E.plan_units(steps, fold.train_ids))
        out.append(per.assign(scheme=scheme, held_out=group))
    if not out:
        return pd.DataFrame(columns=[*E.PER_WORKLOAD_COLUMNS, "scheme", "held_out"])
    return pd.concat(out, ignore_index=True)


def cv_folds(rows: pd.DataFrame, schemes: Iterable[str]) -> Iterable[tuple[str, list[str], Any]]:
    """``(scheme, held-out workload ids, group)`` per fold: ``LeaveOneGroupOut`` over the
    scheme's group column; a scheme with a single group has nothing to hold out."""
    for scheme in schemes:
        groups = (blocks(rows) if scheme == "lobo" else rows[SCHEMES[scheme]]).to_numpy()
        if len(set(groups)) < 2:
            continue
        for _, test in LeaveOneGroupOut().split(rows, groups=groups):
            yield scheme, list(rows["workload_id"].iloc[test]), groups[test[0]]


#: the yardsticks' rows (the baseline is named from the dataset: maxn, max-clock, max-limit)
YARDSTICKS = ("maxn", "max-clock", "max-limit", "oracle")


def governor_family(name: str) -> str:
    """The family a figure colours a policy by: ``yardstick`` (the baseline, the oracle), ``fixed
    level`` (FFG), ``probes the job`` (the registry's probing governors), ``from the features``
    (every other registered governor: the trees, the curve model); ``other`` for a name the
    registry does not hold."""
    from dvfslab.governors.errors import GovernorError
    from dvfslab.governors.registry import governor_class

    if name in YARDSTICKS:
        return "yardstick"
    if name == "ffg":
        return "fixed level"
    try:
        cls = governor_class(name)
    except GovernorError:
        return "other"
    return "probes the job" if cls.tags.probes else "from the features"


def with_family(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (with a ``policy`` column) with ``family`` (:func:`governor_family`) beside it."""
    return frame.assign(family=frame["policy"].astype(str).map(governor_family))


def pareto_points(summary: pd.DataFrame, keep: Sequence[str] = ()) -> pd.DataFrame:
    """Mean energy and time relative to the baseline per row of a :func:`dvfslab.evaluation.replay.summarize`
    frame (for an energy-vs-time plot), the ``keep`` columns, ``family`` (:func:`governor_family`:
    the figure's colour) and ``pareto``: no other row is both faster and cheaper."""
    pts = with_family(summary[["policy", *keep]].copy())
    pts["energy_rel"] = 1.0 - summary["mean_saving_pct"].to_numpy() / 100.0
    pts["time_rel"] = 1.0 + summary["mean_slowdown_pct"].to_numpy() / 100.0
    e, t = pts["energy_rel"].to_numpy(), pts["time_rel"].to_numpy()
    pts["pareto"] = [not ((e <= ei) & (t <= ti) & ((e < ei) | (t < ti))).any() for ei, ti in zip(e, t, strict=True)]
    return pts.reset_index(drop=True)
