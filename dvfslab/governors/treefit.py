"""Fitting the tree governor (sweep side): a scikit-learn classifier, exported as a plain tree.

:func:`fit_model` fits a classifier safely on a tiny training set (model selection's
cross-validation uses it in every fold); :func:`fit_tree` fits notebook 03's chosen tree on the
training workloads and exports it as the dict :class:`~dvfslab.governors.tree.TreeGovernor`
walks with plain Python on a board (:func:`tree_from_sklearn`). When nothing can be learned
(:func:`dvfslab.analysis.features.cannot_learn`: one training workload, one level, one optimal
level, no feature that varies) the tree is one leaf at FFG's level (:func:`ffg_tree`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import clone
from sklearn.dummy import DummyClassifier

from dvfslab.analysis.features import EXTRA_FEATURES, FEATURES, cannot_learn
from dvfslab.governors.static import FixedGovernor

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData


def fit_model(model: Any, x: np.ndarray, y: np.ndarray) -> Any:
    """Clone and fit ``model``, made safe for tiny training sets.

    k-NN's k shrinks to the number of training rows; a training set with a single class gets
    ``DummyClassifier(strategy="most_frequent")`` (some sklearn classifiers, e.g. logistic
    regression, refuse one class).
    """
    if len(np.unique(y)) == 1:
        return DummyClassifier(strategy="most_frequent").fit(x, y)
    fitted = clone(model)
    final = fitted.steps[-1][1] if hasattr(fitted, "steps") else fitted
    if hasattr(final, "n_neighbors"):
        final.set_params(n_neighbors=min(final.n_neighbors, len(y)))
    return fitted.fit(x, y)


def fit_tree(model: Any, data: TrainingData, feature_cols: Sequence[str], info: Mapping[str, Any] | None = None) -> dict:
    """Fit a tree pipeline (imputer, then a ``DecisionTreeClassifier``) on the training workloads
    of ``data`` to predict ``opt_level_idx`` and export it as a tree dict; the imputer's medians
    become the tree's fill-in values. When nothing can be learned: :func:`ffg_tree` (with no
    feature given, the reason is said of the feature table's candidate features)."""
    rows = data.rows()
    why = cannot_learn(data.sweep, rows, feature_cols or (*FEATURES, *EXTRA_FEATURES))
    if not why and not feature_cols:
        why = "no feature was given to the tree"
    if why:
        return ffg_tree(data, why, info)
    x = rows[list(feature_cols)].to_numpy(float)
    fitted = fit_model(model, x, rows["opt_level_idx"].to_numpy(int))
    medians = dict(zip(feature_cols, fitted.named_steps["impute"].statistics_, strict=True))
    return tree_from_sklearn(fitted.named_steps["model"], feature_cols, data.level_table, impute=medians, info=info)


def ffg_tree(data: TrainingData, why: str, info: Mapping[str, Any] | None = None) -> dict:
    """One leaf at FFG's level (the least mean energy / baseline over the training workloads),
    no feature; ``info`` records ``fallback: "ffg"`` and ``cannot_learn``: why."""
    level = FixedGovernor().fit(data).level_
    return {"features": [], "impute": {}, "nodes": [{"level": float(level), "n": len(data.rows())}],
            "level_table": sorted(float(f) for f in data.level_table),
            "info": {**(info or {}), "fallback": "ffg", "cannot_learn": why}}


def tree_from_sklearn(estimator: Any, features: Sequence[str], level_table: Sequence[float],
                      impute: Mapping[str, float] | None = None, info: Mapping[str, Any] | None = None) -> dict:
    """Convert a fitted ``DecisionTreeClassifier`` whose classes are level indices into a tree dict."""
    t = estimator.tree_
    table = sorted(float(f) for f in level_table)
    nodes: list[dict] = []
    for i in range(t.node_count):
        if t.children_left[i] == -1:
            cls = estimator.classes_[int(t.value[i][0].argmax())]
            nodes.append({"level": table[int(cls)], "n": int(t.n_node_samples[i])})
        else:
            nodes.append({"feature": features[int(t.feature[i])], "threshold": float(t.threshold[i]),
                          "left": int(t.children_left[i]), "right": int(t.children_right[i])})
    return {"features": list(features), "impute": {k: float(v) for k, v in (impute or {}).items()},
            "nodes": prune(nodes), "level_table": table, "info": dict(info or {})}


def prune(nodes: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Collapse splits whose two sides decide the same level (sklearn keeps them); renumber.

    Decisions are unchanged; the tree reads (and draws) as the rule it really is.
    """
    out: list[dict] = []

    def build(i: int) -> dict:
        node = dict(nodes[i])
        if "level" in node:
            return node
        left, right = build(node["left"]), build(node["right"])
        if "level" in left and "level" in right and left["level"] == right["level"]:
            return {"level": left["level"], "n": left.get("n", 0) + right.get("n", 0)}
        return {**node, "left": left, "right": right}

    def flatten(node: dict) -> int:
        idx = len(out)
        out.append(node)
        if "level" not in node:
            left, right = node["left"], node["right"]
            node["left"] = flatten(left)
            node["right"] = flatten(right)
        return idx

    flatten(build(0))
    return out
