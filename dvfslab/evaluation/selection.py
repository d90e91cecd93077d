"""Model selection: which classifier predicts the energy-optimal level best?

The target is the optimal level's index in the dataset's level table (``opt_level_idx``),
the inputs the workload features (:data:`dvfslab.analysis.features.FEATURES`). Two cross-validations
over the training (``characterization``) workloads, both run by scikit-learn's
``cross_val_predict``:

* ``loocv`` — leave one workload out (``LeaveOneOut``), as the paper did to tune its tree;
* ``lomo`` — leave one *model* out (``LeaveOneGroupOut`` over ``model``): every task of the
  held-out model is unseen, the honest test of generalization to a new network.

Metrics per held-out group: ``accuracy`` (exact level), ``within_one`` (at most one level
off) and ``regret_pct`` — the extra energy of the predicted level over the oracle's, in % of
the baseline energy, read from the sweep's measured means (the metric that matters).
Results are tidy: one row per model x scheme x held-out group x metric. The chosen tree becomes
the ``mlg`` governor (:class:`dvfslab.governors.tree.TreeGovernor`, fitted by
:func:`dvfslab.governors.treefit.fit_tree`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import LeaveOneGroupOut, LeaveOneOut, cross_val_predict
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.treefit import fit_model

METRICS = ("accuracy", "within_one", "regret_pct")
SCHEMES = ("loocv", "lomo")
_HIGHER_IS_BETTER = {"accuracy": True, "within_one": True, "regret_pct": False}


def tree_grid(quick: bool = False) -> list[dict[str, Any]]:
    """The decision-tree hyper-parameter grid (depth x min samples per leaf x criterion)."""
    depths = (2, 3, None) if quick else (2, 3, 4, None)
    leaves = (1, 2) if quick else (1, 2, 3)
    return [{"max_depth": d, "min_samples_leaf": m, "criterion": c}
            for d in depths for m in leaves for c in ("gini", "entropy")]


def tree_name(params: Mapping[str, Any]) -> str:
    """``tree(depth=3,leaf=1,gini)``."""
    d = "none" if params["max_depth"] is None else params["max_depth"]
    return f"tree(depth={d},leaf={params['min_samples_leaf']},{params['criterion']})"


def candidate_models(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Candidate sklearn pipelines by name (trees of the grid first, then the other families,
    then ``majority``: the most frequent training level, the yardstick every model must beat).

    Every pipeline imputes missing feature values with the training median; distance- and
    gradient-based models also standardize.
    """
    def imp() -> SimpleImputer:
        return SimpleImputer(strategy="median", keep_empty_features=True)

    models: dict[str, Any] = {}
    for p in tree_grid(quick):
        models[tree_name(p)] = Pipeline([("impute", imp()), ("model", DecisionTreeClassifier(random_state=seed, **p))])
    n_est = 10 if quick else 20
    models["random_forest"] = Pipeline([("impute", imp()), ("model", RandomForestClassifier(
        n_estimators=n_est, random_state=seed, n_jobs=1))])
    models["knn"] = Pipeline([("impute", imp()), ("scale", StandardScaler()), ("model", KNeighborsClassifier(n_neighbors=3))])
    models["logistic_regression"] = Pipeline([("impute", imp()), ("scale", StandardScaler()),
                                              ("model", LogisticRegression(max_iter=2000))])
    models["gradient_boosting"] = Pipeline([("impute", imp()), ("model", GradientBoostingClassifier(
        n_estimators=10, max_depth=2, random_state=seed))])
    # the yardstick: always the most frequent training level (what a single fixed level learns)
    models["majority"] = Pipeline([("impute", imp()), ("model", DummyClassifier(strategy="most_frequent"))])
    return models


def family(name: str) -> str:
    """``tree(depth=…)`` -> ``tree``; other names are their own family."""
    return name.split("(")[0]


class FoldSafe(ClassifierMixin, BaseEstimator):
    """``estimator`` fitted by :func:`fit_model`: ``cross_val_predict`` clones and fits it once
    per fold, so k-NN's k and the one-class case are adapted to each fold's training set."""

    def __init__(self, estimator: Any = None):
        self.estimator = estimator

    def fit(self, x: np.ndarray, y: np.ndarray) -> FoldSafe:
        self.fitted_ = fit_model(self.estimator, x, y)
        self.classes_ = np.unique(y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.fitted_.predict(x)


def _regret_pct(sweep: Sweep, wid: str, level_idx: int) -> float:
    """Extra energy of the predicted level over the oracle, % of baseline energy."""
    level = sweep.nearest_level(wid, sweep.level_table[level_idx])
    energy = sweep.at(wid, level)[0]
    oracle = sweep.at(wid, sweep.oracle_level(wid))[0]
    return 100.0 * (energy - oracle) / sweep.baseline_of(wid)[0]


def cross_validate(models: Mapping[str, Any], features: pd.DataFrame, sweep: Sweep, feature_cols: Sequence[str],
                   schemes: Iterable[str] = SCHEMES, progress: bool = False) -> pd.DataFrame:
    """Held-out predictions of every model under every scheme, one row per held-out workload.

    Columns: model, family, scheme, held_out, workload_id, true_idx, pred_idx, pred_level,
    regret_pct. A scheme with fewer than two groups is skipped (nothing to hold out).
    """
    x = features[list(feature_cols)].to_numpy(float)
    y = features["opt_level_idx"].to_numpy(int)
    wids = features["workload_id"].to_numpy()
    rows = []
    jobs = [(s, m) for s in schemes for m in models]
    # tiny fits: BLAS threads only oversubscribe the cores, and input checks dominate the time
    with threadpool_limits(limits=1), config_context(assume_finite=True, skip_parameter_validation=True):
        for scheme, name in tqdm(jobs, desc="cross-validation", disable=not progress):
            rows += _cv_one(models[name], name, scheme, x, y, wids, features["model"].to_numpy(), sweep)
    return pd.DataFrame(rows, columns=["model", "family", "scheme", "held_out", "workload_id", "true_idx",
                                       "pred_idx", "pred_level", "regret_pct"])


def _cv_one(model: Any, name: str, scheme: str, x: np.ndarray, y: np.ndarray, wids: np.ndarray,
            models_col: np.ndarray, sweep: Sweep) -> list[dict]:
    """Prediction rows of one model under one scheme, grouped by held-out group."""
    groups = wids if scheme == "loocv" else models_col
    if len(pd.unique(groups)) < 2:
        return []
    cv = LeaveOneOut() if scheme == "loocv" else LeaveOneGroupOut()
    pred = cross_val_predict(FoldSafe(model), x, y, groups=None if scheme == "loocv" else groups, cv=cv)
    order = np.argsort(pd.factorize(groups)[0], kind="stable")  # held-out groups in order of appearance
    return [{"model": name, "family": family(name), "scheme": scheme, "held_out": groups[i],
             "workload_id": wids[i], "true_idx": int(y[i]), "pred_idx": int(pred[i]),
             "pred_level": sweep.level_table[int(pred[i])],
             "regret_pct": _regret_pct(sweep, wids[i], int(pred[i]))} for i in order]


def fold_metrics(predictions: pd.DataFrame) -> pd.DataFrame:
    """Tidy metrics: one row per model x scheme x held-out group x metric (``n`` = workloads)."""
    p = predictions.assign(accuracy=(predictions["pred_idx"] == predictions["true_idx"]).astype(float),
                           within_one=((predictions["pred_idx"] - predictions["true_idx"]).abs() <= 1).astype(float))
    keys = ["model", "family", "scheme", "held_out"]
    per = p.groupby(keys, sort=False)[list(METRICS)].mean()
    per["n"] = p.groupby(keys, sort=False).size()
    per = per.reset_index()
    return per.melt(id_vars=keys + ["n"], value_vars=list(METRICS), var_name="metric", value_name="value")


def summarize_cv(metrics: pd.DataFrame, models: Iterable[str] | None = None) -> pd.DataFrame:
    """Per model and scheme, each metric pooled over workloads (fold means weighted by ``n``).

    Wide: one row per model, columns ``<scheme>_<metric>`` (e.g. ``loocv_accuracy``), in the
    candidates' order. With no CV result at all (a single training workload) the frame lists
    ``models`` with no metric column.
    """
    if metrics.empty:
        names = list(models or [])
        return pd.DataFrame({"model": names, "family": [family(n) for n in names]})
    m = metrics.assign(weighted=metrics["value"] * metrics["n"])
    g = m.groupby(["model", "family", "scheme", "metric"], sort=False)
    pooled = (g["weighted"].sum() / g["n"].sum()).rename("value").reset_index()
    pooled["column"] = pooled["scheme"] + "_" + pooled["metric"]
    wide = pooled.pivot(index=["model", "family"], columns="column", values="value")
    order = list(dict.fromkeys(metrics["model"]))
    return wide.reindex(order, level="model").reset_index().rename_axis(columns=None)


def comparison(summary: pd.DataFrame, best_tree: str) -> pd.DataFrame:
    """Long-form rows (model, scheme, metric, value) of the chosen tree and every other family."""
    keep = summary[(summary["model"] == best_tree) | (summary["family"] != "tree")]
    long = keep.melt(id_vars=["model", "family"], var_name="column", value_name="value")
    if long.empty:  # no CV was possible (a single training workload)
        return pd.DataFrame(columns=["model", "family", "value", "scheme", "metric"])
    long[["scheme", "metric"]] = long["column"].str.split("_", n=1, expand=True)
    return long.drop(columns="column")


def select_best(summary: pd.DataFrame, family_name: str | None = "tree", metric: str = "accuracy",
                scheme: str = "loocv") -> str:
    """The best model of ``family_name`` (all families if None) by ``<scheme>_<metric>``.

    Ties are broken by the scheme's regret, then by candidate order (simplest tree first).
    With a single training workload (no CV possible) the first candidate is returned.
    """
    s = summary if family_name is None else summary[summary["family"] == family_name]
    primary, regret = f"{scheme}_{metric}", f"{scheme}_regret_pct"
    if primary not in s or s[primary].isna().all():
        return str(s["model"].iloc[0])
    key = pd.DataFrame({"a": s[primary] * (-1 if _HIGHER_IS_BETTER[metric] else 1),
                        "b": s[regret] if regret in s else 0.0, "order": np.arange(len(s))}, index=s.index)
    return str(s.loc[key.sort_values(["a", "b", "order"]).index[0], "model"])
