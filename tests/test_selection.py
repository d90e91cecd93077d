"""Model selection: LOOCV and leave-one-model-out CV on sweeps whose right answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_dataset, make_tiny_dataset

from dvfslab.analysis import aggregate as F
from dvfslab.analysis import features as FT
from dvfslab.analysis.training import TrainingData
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation import selection as S
from dvfslab.governors.base import without_answers
from dvfslab.governors.tree import TreeGovernor
from dvfslab.governors.treefit import fit_model


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """Training workloads whose optimal level is a function of n_layers and avg_seq_len."""
    ds = make_dataset(tmp_path_factory.mktemp("s") / "ds", tasks=["sst2", "qnli", "mrpc"])
    sweep = F.sweep_from_dataset(load_dataset(ds))
    table = FT.feature_table(sweep)
    return sweep, table


def test_the_tree_finds_the_known_rule(known):
    sweep, table = known
    keep = ("tree(depth=2,leaf=1,gini)", "tree(depth=2,leaf=2,entropy)", "tree(depth=none,leaf=1,gini)")
    models = {name: m for name, m in S.candidate_models(quick=True).items() if name in keep}
    preds = S.cross_validate(models, table, sweep, ["n_layers", "avg_seq_len"])
    summary = S.summarize_cv(S.fold_metrics(preds))
    best = S.select_best(summary)
    row = summary.set_index("model").loc[best]
    # the rule splits on n_layers > 7 and avg_seq_len > 40: every tree of depth >= 2 recovers it
    assert row["loocv_accuracy"] == 1.0 and row["loocv_regret_pct"] == 0.0
    assert row["lomo_accuracy"] == 1.0 and row["lomo_within_one"] == 1.0
    assert best == "tree(depth=2,leaf=1,gini)"  # first in candidate order among the ties


def test_a_single_uninformative_feature_cannot_be_perfect(known):
    sweep, table = known
    models = {"tree": S.candidate_models(quick=True)["tree(depth=2,leaf=1,gini)"]}
    preds = S.cross_validate(models, table, sweep, ["is_decoder"])  # says nothing about layers or length
    summary = S.summarize_cv(S.fold_metrics(preds)).iloc[0]
    assert summary["loocv_accuracy"] < 0.6
    assert summary["loocv_regret_pct"] > 0.0


def test_results_are_tidy_one_row_per_model_scheme_group_metric(known):
    sweep, table = known
    every = S.candidate_models(quick=True)
    models = {n: m for n, m in every.items() if S.family(n) != "tree" or n == "tree(depth=2,leaf=1,gini)"}
    preds = S.cross_validate(models, table, sweep, list(FT.FEATURES))
    metrics = S.fold_metrics(preds)
    n_wl, n_models = len(table), table["model"].nunique()
    assert len(metrics) == len(models) * (n_wl + n_models) * len(S.METRICS)
    assert not metrics.duplicated(["model", "scheme", "held_out", "metric"]).any()
    lomo = preds[preds["scheme"] == "lomo"]
    # every leave-one-model-out fold holds out all tasks of exactly one model
    assert (lomo.groupby("held_out")["workload_id"].apply(lambda w: {x.split("/")[0] for x in w}).map(len) == 1).all()
    assert set(lomo["held_out"]) == set(table["model"])
    assert (lomo.groupby(["model", "held_out"]).size() == 3).all()
    assert set(metrics["family"]) == {"tree", "random_forest", "knn", "logistic_regression", "gradient_boosting",
                                      "majority"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The hand-written sweep: sst2 -> 612 MHz (idx 3), qnli -> 714 (idx 4), mrpc -> 510 (idx 2)."""
    sweep = F.sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path_factory.mktemp("t") / "tiny")))
    return sweep, FT.feature_table(sweep)


def test_majority_yardstick_under_both_schemes_by_hand(tiny):
    """Every prediction and regret below is worked out by hand from analysis_fixtures.TINY_RUNS.

    ``majority`` predicts the most frequent training level; on a tie sklearn's
    DummyClassifier(most_frequent) returns the smallest label (the lowest level).
    Regret = 100 (E(predicted) - E(oracle)) / E(MAXN); a level a workload was not measured at
    is read at its nearest measured level (ties: the higher).
    """
    sweep, table = tiny
    preds = S.cross_validate({"majority": S.candidate_models(quick=True)["majority"]}, table, sweep, ["n_layers"])
    got = preds.set_index(["scheme", "workload_id"])
    loocv = {  # held out: trained on the other two (labels) -> prediction -> regret
        "tiny-enc/sst2": (2, 100 * (105 - 92) / 122),  # {4, 2} tie -> 2 = 510 MHz: 105 J vs 92 J
        "big-dec/qnli": (2, 100 * (200 - 175) / 250),  # {3, 2} tie -> 2 = 510, not measured -> 612: 200 J
        "tiny-enc/mrpc": (3, 100 * (50 - 48) / 80),    # {3, 4} tie -> 3 = 612: 50 J vs 48 J
    }
    lomo = {  # held out: every task of one model
        "tiny-enc/sst2": (4, 100 * (98 - 92) / 122),   # trained on big-dec only: {4} -> 714: 98 J
        "tiny-enc/mrpc": (4, 100 * (54 - 48) / 80),    # same fold -> 714: 54 J
        "big-dec/qnli": (2, 100 * (200 - 175) / 250),  # trained on tiny-enc: {3, 2} tie -> 2 -> 612
    }
    for scheme, expected in (("loocv", loocv), ("lomo", lomo)):
        for wid, (idx, regret) in expected.items():
            row = got.loc[(scheme, wid)]
            assert (row["pred_idx"], row["pred_level"]) == (idx, ORIN_FREQS_MHZ[idx]), (scheme, wid)
            assert row["regret_pct"] == pytest.approx(regret), (scheme, wid)
    assert list(preds.loc[preds["scheme"] == "lomo", "held_out"]) == ["tiny-enc", "tiny-enc", "big-dec"]

    summary = S.summarize_cv(S.fold_metrics(preds)).set_index("model").loc["majority"]
    assert summary["loocv_accuracy"] == 0.0
    assert summary["loocv_within_one"] == pytest.approx(2 / 3)  # |2-3| = 1, |2-4| = 2, |3-2| = 1
    assert summary["loocv_regret_pct"] == pytest.approx((1300 / 122 + 10.0 + 2.5) / 3)
    assert summary["lomo_within_one"] == pytest.approx(1 / 3)   # |4-3| = 1, |4-2| = 2, |2-4| = 2
    # pooled over the 3 workloads, not over the 2 folds ((6.209 + 10) / 2 = 8.10 would be wrong)
    assert summary["lomo_regret_pct"] == pytest.approx((600 / 122 + 7.5 + 10.0) / 3)


def test_fit_model_handles_one_class_and_tiny_training_sets():
    models = S.candidate_models(quick=True)
    x = np.array([[1.0], [2.0]])
    const = fit_model(models["logistic_regression"], x, np.array([4, 4]))
    assert list(const.predict(np.array([[9.0]]))) == [4]
    knn = fit_model(models["knn"], x, np.array([3, 5]))  # k=3 > 2 samples: k shrinks
    assert knn.named_steps["model"].n_neighbors == 2
    assert knn.predict(np.array([[1.1]]))[0] in (3, 5)


def test_partly_missing_features_are_imputed(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", tasks=["sst2", "qnli"], missing={"avg_seq_len": 0.5, "hidden_size": 1.0}))
    sweep = F.sweep_from_dataset(ds)
    table = FT.feature_table(sweep)
    used, dropped = FT.usable_features(table)
    assert "hidden_size" in dropped
    models = {n: S.candidate_models(quick=True)[n] for n in ("tree(depth=3,leaf=1,gini)", "knn", "logistic_regression")}
    preds = S.cross_validate(models, table, sweep, used)
    assert preds["pred_idx"].between(0, len(ORIN_FREQS_MHZ) - 1).all()


def test_exported_tree_decides_like_the_sklearn_tree(known):
    sweep, table = known
    table = table.copy()
    table.loc[table.index[:4], "avg_seq_len"] = np.nan  # some rows need the stored fill-in value
    cols = ["n_layers", "avg_seq_len", "gpu_util_pct"]
    model = S.candidate_models(quick=True)["tree(depth=3,leaf=1,gini)"]
    gov = TreeGovernor(model, cols).fit(TrainingData(sweep, table, list(table["workload_id"])))
    fitted = fit_model(model, table[cols].to_numpy(float), table["opt_level_idx"].to_numpy(int))
    expected = [ORIN_FREQS_MHZ[i] for i in fitted.predict(table[cols].to_numpy(float))]
    assert [gov.decide(without_answers(r)).level for r in table.to_dict("records")] == expected
    assert gov.tree_["impute"]["avg_seq_len"] == pytest.approx(table["avg_seq_len"].median())


def test_select_best_breaks_ties_by_regret_then_order():
    summary = pd.DataFrame({"model": ["tree(a)", "tree(b)", "tree(c)", "knn"], "family": ["tree", "tree", "tree", "knn"],
                            "loocv_accuracy": [0.5, 0.8, 0.8, 0.9], "loocv_regret_pct": [0.1, 2.0, 1.0, 0.0]})
    assert S.select_best(summary) == "tree(c)"
    assert S.select_best(summary, family_name=None) == "knn"
    assert S.select_best(summary, metric="regret_pct") == "tree(a)"


def test_one_training_workload_skips_cv(known):
    sweep, table = known
    one = table.iloc[:1]
    models = S.candidate_models(quick=True)
    preds = S.cross_validate(models, one, sweep, ["n_layers"])
    assert preds.empty
    summary = S.summarize_cv(S.fold_metrics(preds), models)
    assert list(summary["model"]) == list(models)
    assert S.select_best(summary) == next(iter(models))
    assert S.comparison(summary, next(iter(models))).empty


def test_mlg_falls_back_to_ffg_when_no_feature_varies(tiny, tmp_path):
    """tiny-enc on sst2 and mrpc (analysis_fixtures.TINY_RUNS) share n_layers 2 and hidden 128.
    FFG's level by hand, mean E / E_MAXN: 510 -> (105/122 + 48/80) / 2 = 0.7303,
    612 -> (92/122 + 50/80) / 2 = 0.6895, 714 -> (98/122 + 54/80) / 2 = 0.7391: 612 MHz."""
    from dvfslab.governors.files import load_governor, save_governor

    sweep, table = tiny
    model = S.candidate_models(quick=True)["tree(depth=2,leaf=1,gini)"]
    data = TrainingData(sweep, table, ["tiny-enc/sst2", "tiny-enc/mrpc"])
    gov = TreeGovernor(model, ["n_layers", "hidden_size"], info={"model": "tree(depth=2,leaf=1,gini)"}).fit(data)
    assert gov.tree_["nodes"] == [{"level": 612.0, "n": 2}] and gov.tree_["features"] == []
    assert gov.tree_["info"] == {"model": "tree(depth=2,leaf=1,gini)", "fallback": "ffg", "cannot_learn": (
        "no feature varies over the 2 training workloads (n_layers is 2 in every training workload; "
        "hidden_size is 128 in every training workload)")}
    save_governor(gov, tmp_path / "mlg.json")  # the saved-file format is the tree's own: one leaf
    back = load_governor(tmp_path / "mlg.json", policy="mlg")
    assert back.decide({"workload_id": "big-dec/qnli", "n_layers": 12.0}).level == 612.0
    # one training workload: its own optimum, 612 MHz (92 J, the least of 105, 92, 98)
    one = TreeGovernor(model, ["n_layers", "avg_seq_len"]).fit(data.subset(["tiny-enc/sst2"]))
    assert one.tree_["nodes"] == [{"level": 612.0, "n": 1}]
    assert one.tree_["info"]["cannot_learn"] == "one training workload (tiny-enc/sst2): nothing to generalize from"
    # what can be learned is learned: avg_seq_len 13.3 (612 MHz) vs 53.2 (510 MHz) splits the two
    learned = TreeGovernor(model, ["avg_seq_len"]).fit(data).tree_
    assert "fallback" not in learned["info"] and {n.get("level") for n in learned["nodes"]} >= {510.0, 612.0}
