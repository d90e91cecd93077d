"""Governors head-to-head: the same cross-validation folds for every policy, plus Pareto points.

:func:`cv_replay` holds out one workload (``loocv``) or one model with all its tasks
(``lomo``) of the training workloads (``sklearn.model_selection.LeaveOneGroupOut`` with the
workload or the model as the group), builds every governor from the rest — the learned tree
is refitted on the fold with the hyper-parameters notebook 03 selected, the curve model, the
profiled governor and FFG are refitted, the online governor and the oracle need no training — and replays the
held-out workloads. The result has :func:`dvfslab.analysis.replay.replay`'s columns plus
``scheme`` and ``held_out``, so :func:`dvfslab.analysis.replay.summarize` applies (``by=["scheme"]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from sklearn.model_selection import LeaveOneGroupOut
from tqdm.auto import tqdm

from dvfslab.analysis import replay as E
from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.base import GovernorContext, build_governors
from dvfslab.governors.curvefit import fit_curve_model
from dvfslab.governors.fit import ProbeSource
from dvfslab.governors.limits import constrain_all

#: scheme -> the column whose value is one group (held out together)
SCHEMES = {"loocv": "workload_id", "lomo": "model"}
STATIC = ("maxn", "online", "oracle", "mlg-paper")  # need no training workloads (mlg-paper: only fill-ins)


def fold_context(sweep: Sweep, features: pd.DataFrame, train_ids: list[str], tree_model: Any | None,
                 feature_cols: Sequence[str], options: Mapping[str, Any]) -> GovernorContext:
    """A :class:`GovernorContext` for one fold, with ``mlg`` refitted when ``tree_model`` is given."""
    from dvfslab.analysis.selection import fit_tree_governor_dict

    trees = {}
    if tree_model is not None:
        rows = features[features["workload_id"].isin(train_ids)]
        trees["mlg"] = fit_tree_governor_dict(tree_model, rows, feature_cols, sweep)
    return GovernorContext(sweep, features, train_ids, trees=trees, options=dict(options))


def cv_replay(sweep: Sweep, features: pd.DataFrame, names: Iterable[str], train_ids: Sequence[str], *,
              tree_model: Any | None = None, feature_cols: Sequence[str] = (), schemes: Iterable[str] = ("loocv", "lomo"),
              options: Mapping[str, Any] | None = None, max_slowdown_pct: float | None = None,
              progress: bool = False) -> pd.DataFrame:
    """Per held-out workload results of every governor under every scheme (see module doc).

    ``max_slowdown_pct``: replay the constrained governors (:mod:`dvfslab.governors.limits`),
    with the fold's curve model as the time model of the level-only governors.
    """
    names = list(names)
    options = with_probe_source(sweep, names, options)
    train_ids = list(train_ids)
    rows = features[features["workload_id"].isin(train_ids)].reset_index(drop=True)
    full = fold_context(sweep, features, train_ids, None, feature_cols, options)
    static = build_governors([n for n in names if n in STATIC], full)
    out = []
    for scheme, held, group in tqdm(list(cv_folds(rows, schemes)), desc="governor CV", disable=not progress):
        fold_train = [w for w in train_ids if w not in set(held)]
        ctx = fold_context(sweep, features, fold_train, tree_model if "mlg" in names else None, feature_cols, options)
        learned = build_governors([n for n in names if n not in STATIC], ctx)
        govs = {n: static.get(n, learned.get(n)) for n in names}
        if max_slowdown_pct is not None:
            govs = constrain_all(govs, max_slowdown_pct, time_model=fit_curve_model(sweep, features, fold_train),
                                 sweep=sweep)
        per = E.replay(govs, sweep, features, held)
        out.append(per.assign(scheme=scheme, held_out=group))
    if not out:
        return pd.DataFrame(columns=[*E.PER_WORKLOAD_COLUMNS, "scheme", "held_out"])
    return pd.concat(out, ignore_index=True)


def with_probe_source(sweep: Sweep, names: Iterable[str], options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` with the profiled governor's :class:`~dvfslab.governors.fit.ProbeSource` read once
    (when ``profiled`` is among ``names`` and none was given), so the folds do not re-read steps.csv."""
    options = dict(options or {})
    if "profiled" in names and not isinstance(options.get("probe_source"), ProbeSource):
        options["probe_source"] = ProbeSource.from_dataset(sweep)
    return options


def cv_folds(rows: pd.DataFrame, schemes: Iterable[str]) -> Iterable[tuple[str, list[str], Any]]:
    """``(scheme, held-out workload ids, group)`` per fold: ``LeaveOneGroupOut`` over the
    scheme's group column; a scheme with a single group has nothing to hold out."""
    for scheme in schemes:
        groups = rows[SCHEMES[scheme]].to_numpy()
        if len(set(groups)) < 2:
            continue
        for _, test in LeaveOneGroupOut().split(rows, groups=groups):
            yield scheme, list(rows["workload_id"].iloc[test]), groups[test[0]]


def pareto_points(summary: pd.DataFrame, keep: Sequence[str] = ()) -> pd.DataFrame:
    """Mean energy and time relative to the baseline per row of a :func:`dvfslab.analysis.replay.summarize`
    frame (for an energy-vs-time plot), the ``keep`` columns, and ``pareto``: no other row is
    both faster and cheaper."""
    pts = summary[["policy", *keep]].copy()
    pts["energy_rel"] = 1.0 - summary["mean_saving_pct"].to_numpy() / 100.0
    pts["time_rel"] = 1.0 + summary["mean_slowdown_pct"].to_numpy() / 100.0
    e, t = pts["energy_rel"].to_numpy(), pts["time_rel"].to_numpy()
    pts["pareto"] = [not ((e <= ei) & (t <= ti) & ((e < ei) | (t < ti))).any() for ei, ti in zip(e, t, strict=True)]
    return pts.reset_index(drop=True)
