"""The per-workload feature table: what a governor may look at, next to the level it should pick.

:mod:`dvfslab.analysis.aggregate` turns runs into a :class:`~dvfslab.analysis.aggregate.Sweep`
(level means, baselines, optimal levels); this module turns a sweep into one row per workload
with the model's features (:data:`FEATURES`) and the labels of
:func:`~dvfslab.analysis.aggregate.optimal_levels`, and decides which features and which
splits the learned policies use. Definitions: docs/method.md ("Phase 2 — features").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep, optimal_levels
from dvfslab.core.answers import ANSWER_COLUMNS  # noqa: F401  (re-exported: the one list)

# Feature columns, in the order the paper lists them; ``params_m`` is ours (an extra).
PAPER_FEATURES: tuple[str, ...] = ("is_decoder", "gpu_util_pct", "n_layers", "hidden_size", "avg_seq_len")
FEATURES: tuple[str, ...] = PAPER_FEATURES + ("params_m",)
# also in the feature table, offered by notebook 02: the batch size, fixed in a clock sweep (then
# dropped as constant) but what varies most in a power-limit trace such as Zeus'
EXTRA_FEATURES: tuple[str, ...] = ("batch_size",)
SIZE_SPLIT_M = 70.0  # the paper's size groups: params > 70M vs <= 70M
SIZE_GROUPS = ("> 70M", "<= 70M")


def size_group(params_m: pd.Series) -> pd.Series:
    """The paper's size groups: ``"> 70M"`` / ``"<= 70M"``; unknown size -> ``"unknown"``."""
    out = np.where(params_m > SIZE_SPLIT_M, SIZE_GROUPS[0], SIZE_GROUPS[1])
    return pd.Series(np.where(params_m.isna(), "unknown", out), index=params_m.index)


def feature_table(sweep: Sweep) -> pd.DataFrame:
    """One row per workload: identity, split, the features of :data:`FEATURES` and
    :data:`EXTRA_FEATURES`, the labels.

    ``gpu_util_pct`` comes from the baseline runs (what a governor can observe before it picks
    a level); ``is_decoder`` encodes ``model_type`` (NaN when unknown). Labels are those of
    :func:`optimal_levels`.
    """
    wl = sweep.workloads.copy()
    wl["is_decoder"] = wl["model_type"].map({"decoder": 1.0, "encoder": 0.0}).astype(float)
    util = sweep.baseline["gpu_util_pct"].rename("gpu_util_pct")
    wl = wl.merge(util, left_on="workload_id", right_index=True, how="left")
    wl["size_group"] = size_group(wl["params_m"].astype(float))
    for col in FEATURES + EXTRA_FEATURES:
        wl[col] = wl[col].astype(float)
    keep = ["workload_id", "model", "model_family", "model_type", "task", "split", "size_group", *FEATURES,
            *EXTRA_FEATURES]
    labels = optimal_levels(sweep).drop(columns=["model", "task", "split", "params_m"])
    return wl[keep].merge(labels, on="workload_id")


def governor_row(row: dict, plan_job_units: float | None = None) -> dict:
    """What a governor may see of one feature-table row (a dict): the row without
    :data:`ANSWER_COLUMNS`, with ``plan_job_units``: the job length it could know (the training
    workloads' median job, or a user-given figure; None: left out)."""
    out = {k: v for k, v in row.items() if k not in ANSWER_COLUMNS}
    if plan_job_units is not None:
        out["plan_job_units"] = float(plan_job_units)
    return out


def usable_features(features: pd.DataFrame, candidates: Iterable[str] = FEATURES) -> tuple[list[str], dict[str, str]]:
    """Split candidate feature columns into used ones and dropped ones with the reason.

    A column is dropped when it is absent, has no value at all in ``features`` (the training
    rows), or has one and the same value in every training row that has one (it cannot separate
    anything: e.g. the batch size of a sweep that kept it fixed); partly missing columns are kept
    and imputed (median) by the models. Each reason is a sentence that names its column:
    ``"batch_size is 32 in every training workload"``. No column may be left: then
    :func:`cannot_learn` says what that means.
    """
    used, dropped = [], {}
    for col in candidates:
        if col not in features.columns:
            dropped[col] = f"{col} is not in the feature table"
        elif features[col].isna().all():
            dropped[col] = f"{col} has no value in any training workload"
        elif features[col].nunique(dropna=True) == 1:
            some = " that has one" if features[col].isna().any() else ""
            dropped[col] = f"{col} is {features[col].dropna().iloc[0]:g} in every training workload{some}"
        else:
            used.append(col)
    return used, dropped


#: what the learned governors do when :func:`cannot_learn` gives a reason
FALLBACK = ("model selection has nothing to choose and the learned governors fall back to FFG: one level for "
            "every workload, the one of least mean energy over the training workloads (the curve model still "
            "learns how the curves move when all that is constant is the optimal level)")


def cannot_learn(sweep: Sweep, train: pd.DataFrame, candidates: Iterable[str] = FEATURES,
                 curves: bool = False) -> str:
    """Why no governor can learn a level from the features of the training rows ``train`` (a
    slice of :func:`feature_table`), or ``""`` when one can.

    Nothing can be learned from fewer than two training workloads, from a single measured
    level, from training workloads whose optimal level is one and the same, or when no
    candidate feature varies over them (:func:`usable_features`): a learned governor would
    answer one level for every workload, and FFG's is the best single level
    (:data:`FALLBACK`). The reason names what is constant. ``curves``: for a model of the
    energy and time at every level (the curve model), which still learns how the curves move
    with the features when every training workload has the same optimal level; that is then
    no reason.
    """
    n = len(train)
    if n < 2:
        return "no training workload" if n == 0 else \
            f"one training workload ({train['workload_id'].iloc[0]}): nothing to generalize from"
    ids = set(train["workload_id"])
    measured = sorted(set(sweep.levels.loc[sweep.levels["workload_id"].isin(ids), "level"]))
    if len(measured) < 2:
        return f"one {sweep.knob.label} was measured ({', '.join(map(sweep.format_level, measured)) or 'none'})"
    why = []
    optima = {sweep.oracle_level(w) for w in ids}
    if len(optima) == 1 and not curves:
        why.append(f"every training workload has its least energy at {sweep.format_level(optima.pop())}")
    used, dropped = usable_features(train, candidates)
    if not used:
        why.append(f"no feature varies over the {n} training workloads ({'; '.join(dropped.values()) or 'none offered'})")
    return "; ".join(why)


def pick_splits(features: pd.DataFrame) -> tuple[str, str]:
    """``(train_split, eval_split)``: characterization / evaluation, or the one split present.

    A dataset with a single split trains and evaluates on it (the notebooks say so: the
    learned policies' figures are then optimistic).
    """
    present = set(features["split"])
    train = "characterization" if "characterization" in present else "evaluation"
    test = "evaluation" if "evaluation" in present else "characterization"
    return train, test
