"""Each governor: MAXN, FFG, the paper's tree (both readings), learned trees, oracle, registry."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_dataset

from dvfslab import analysis as F
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.governors import base as G


@pytest.fixture(scope="module")
def sweep_table(tmp_path_factory):
    ds = load_dataset(make_dataset(tmp_path_factory.mktemp("g") / "ds", models=["bert-tiny", "pythia-70m", "bert-base",
                                                                              "pythia-410m"]))
    sweep = F.sweep_from_dataset(ds)
    return sweep, F.feature_table(sweep)


def test_maxn_leaves_the_default_governor():
    assert G.MaxnGovernor().decide({"workload_id": "x"}) is None


def test_ffg_picks_the_least_mean_normalized_energy(sweep_table):
    sweep, table = sweep_table
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    ffg = G.FixedGovernor.fit(sweep, train)
    scores = {f: np.mean([sweep.at(w, f)[0] / sweep.baseline_of(w)[0] for w in train]) for f in ORIN_FREQS_MHZ}
    assert ffg.freq_mhz == min(scores, key=scores.get)
    assert ffg.decide({"workload_id": "anything"}) == ffg.freq_mhz


def test_ffg_only_considers_levels_every_training_workload_ran_at(tmp_path, sweep_table):
    sweep, table = sweep_table
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    best = G.FixedGovernor.fit(sweep, train).freq_mhz
    ds = load_dataset(sweep.dataset)
    drop = (ds.runs["workload_id"] == train[0]) & (ds.runs["gpu_freq_mhz"] == best)
    holed = F.sweep_from_dataset(write_dataset(tmp_path / "holed", ds.meta, ds.workloads, ds.runs[~drop]))
    assert G.FixedGovernor.fit(holed, train).freq_mhz != best


def test_oracle_is_the_least_energy_level(sweep_table):
    sweep, _ = sweep_table
    oracle = G.OracleGovernor.from_sweep(sweep)
    for wid in sweep.workload_ids():
        freqs, energy, _ = sweep.curve(wid)
        assert oracle.decide({"workload_id": wid}) == freqs[np.argmin(energy)]
    with pytest.raises(G.GovernorError, match="not swept"):
        oracle.decide({"workload_id": "unknown/model"})


@pytest.mark.parametrize(("layers", "seq", "util", "long_seq", "root"), [
    (4, 20.0, 50.0, 510.0, 510.0),
    (7, 32.5, 50.0, 510.0, 510.0),     # thresholds are inclusive: <= goes left
    (7, 33.0, 50.0, 612.0, 612.0),
    (12, 40.0, 50.0, 714.0, 714.0),
    (12, 53.0, 50.0, 714.0, 714.0),
    (12, 60.0, 50.0, 816.0, 816.0),
    (12, 60.0, 22.0, 1020.0, 1020.0),  # the utilization split, in both readings
    (12, 60.0, 10.0, 1020.0, 1020.0),
    (4, 20.0, 10.0, 510.0, 1020.0),    # the readings differ only for low-utilization workloads elsewhere
    (12, 40.0, 15.0, 714.0, 1020.0),
])
def test_paper_tree_as_printed(layers, seq, util, long_seq, root):
    w = {"n_layers": layers, "avg_seq_len": seq, "gpu_util_pct": util}
    assert G.TreeGovernor(G.paper_tree("long-seq")).decide(w) == long_seq
    assert G.TreeGovernor(G.paper_tree("root")).decide(w) == root


def test_paper_tree_reading_must_be_known():
    with pytest.raises(G.GovernorError, match="long-seq"):
        G.paper_tree("middle")


def test_missing_feature_uses_the_fill_in_value_or_says_what_is_missing():
    tree = G.paper_tree()
    with pytest.raises(G.GovernorError, match="avg_seq_len"):
        G.TreeGovernor(tree).decide({"workload_id": "w", "n_layers": 4, "avg_seq_len": float("nan"), "gpu_util_pct": 50})
    gov = G.TreeGovernor(tree, impute={"avg_seq_len": 40.0})
    assert gov.decide({"n_layers": 4, "avg_seq_len": None, "gpu_util_pct": 50}) == 612.0


def test_tree_saves_and_loads(tmp_path):
    gov = G.TreeGovernor(G.paper_tree("root"), name="mine", impute={"gpu_util_pct": 40.0})
    gov.save(tmp_path / "t.json")
    back = G.TreeGovernor.load(tmp_path / "t.json")
    assert back.name == "mine" and back.impute == {"gpu_util_pct": 40.0}
    for w in ({"n_layers": 4, "avg_seq_len": 20, "gpu_util_pct": 10}, {"n_layers": 12, "avg_seq_len": 90, "gpu_util_pct": None}):
        assert back.decide(w) == gov.decide(w)
    assert "if gpu_util_pct <= 22" in back.describe()


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    (json.dumps({"format": "other"}), "not a dvfslab tree"),
    (json.dumps({"format": "dvfslab-tree", "version": 9, "nodes": []}), "unknown tree version"),
    (json.dumps({"format": "dvfslab-tree", "version": 1, "nodes": [{"feature": "x", "threshold": 1, "left": 0,
                                                                    "right": 5}]}), "children"),
    (json.dumps({"format": "dvfslab-tree", "version": 1, "nodes": [{"feature": "x"}]}), "neither a leaf"),
])
def test_bad_tree_files_name_the_file_and_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(G.GovernorError, match=message) as err:
        G.TreeGovernor.load(path)
    assert str(path) in str(err.value)


def test_missing_tree_file_says_how_to_make_one(tmp_path):
    with pytest.raises(G.GovernorError, match="notebook 03"):
        G.TreeGovernor.load(tmp_path / "none.json")


def test_registry_builds_every_governor(sweep_table):
    sweep, table = sweep_table
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    tree = {**G.paper_tree(), "name": "mlg"}
    ctx = G.GovernorContext(sweep, table, train, trees={"mlg": tree})
    govs = G.build_governors(["maxn", "ffg", "mlg-paper", "mlg", "oracle"], ctx)
    assert {name: g.name for name, g in govs.items()} == {n: n for n in govs}
    assert all(isinstance(g, G.Governor) for g in govs.values())
    with pytest.raises(G.GovernorError, match="unknown governor 'nope'"):
        G.build_governors(["nope"], ctx)
    with pytest.raises(G.GovernorError, match="notebook 03"):
        G.build_governors(["mlg"], G.GovernorContext(sweep, table, train))


def test_paper_tree_in_the_registry_fills_missing_values_from_training(sweep_table):
    sweep, table = sweep_table
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    gov = G.build_governors(["mlg-paper"], G.GovernorContext(sweep, table, train))["mlg-paper"]
    assert gov.impute["avg_seq_len"] == pytest.approx(table.loc[table["workload_id"].isin(train), "avg_seq_len"].median())
    root = G.build_governors(["mlg-paper"], G.GovernorContext(sweep, table, train, options={"paper_util_split": "root"}))
    assert root["mlg-paper"].tree["info"]["util_split"] == "root"


def test_prune_collapses_splits_that_decide_the_same_level():
    nodes = [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"freq_mhz": 612.0, "n": 3},
             {"feature": "b", "threshold": 5.0, "left": 3, "right": 4}, {"freq_mhz": 612.0, "n": 1},
             {"freq_mhz": 612.0, "n": 2}]
    assert G.prune(nodes) == [{"freq_mhz": 612.0, "n": 6}]
    mixed = [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"freq_mhz": 510.0},
             {"feature": "b", "threshold": 5.0, "left": 3, "right": 4}, {"freq_mhz": 714.0}, {"freq_mhz": 714.0}]
    pruned = G.prune(mixed)
    assert pruned == [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"freq_mhz": 510.0},
                      {"freq_mhz": 714.0, "n": 0}]
    base = {k: v for k, v in G.paper_tree().items() if k != "nodes"}
    for a, b in ((0.5, 9.0), (3.0, 1.0), (3.0, 7.0)):
        w = {"a": a, "b": b}
        assert G.TreeGovernor({**base, "nodes": mixed}).decide(w) == G.TreeGovernor({**base, "nodes": pruned}).decide(w)
    assert G.prune(G.paper_tree()["nodes"]) == G.paper_tree()["nodes"]
