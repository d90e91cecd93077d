"""Each governor: MAXN, FFG, the paper's tree (both readings), learned trees, oracle, registry;
the estimator contract (parameters, clone); one file format; the one snap rule; the board side
loads and decides without pandas or dvfslab.analysis."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, _run

from dvfslab import analysis as F
from dvfslab.analysis import TrainingData
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.evaluation import replay as E
from dvfslab.governors import registry as R
from dvfslab.governors.curve import CurveGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.io import decide
from dvfslab.governors.profiled import ProfiledGovernor
from dvfslab.governors.static import FixedGovernor, MaxnGovernor, OracleGovernor
from dvfslab.governors.tree import PaperTreeGovernor, TreeGovernor, paper_tree
from dvfslab.governors.treefit import prune

# A hand-written sweep, three levels, baselines 100 J and 10 J (MAXN runs). By hand:
#   E / E_b     510    612    714
#   A (100 J)  0.95   0.80   0.78   -> A's least energy: 714 MHz
#   B (10 J)   0.60   0.80   0.90   -> B's least energy: 510 MHz
#   mean       0.775  0.80   0.84   -> FFG: 510 MHz (raw joules would say 714: 101, 88, 87 J)
HAND = {"A": (100.0, {510.0: 95.0, 612.0: 80.0, 714.0: 78.0}),
        "B": (10.0, {510.0: 6.0, 612.0: 8.0, 714.0: 9.0})}


def write_sweep(path, energies, layers=None, times=None):
    """A simulated toy dataset: ``energies`` = {model: (baseline_j, {freq: energy_j})}."""
    wl, runs = [], []
    for model, (e_b, curve) in energies.items():
        wid = f"{model}/t"
        wl.append({"workload_id": wid, "model": model, "model_family": "toy", "model_type": "encoder",
                   "params_m": 10.0, "n_layers": (layers or {}).get(model, 4), "hidden_size": 256, "task": "t",
                   "avg_seq_len": 40.0, "max_seq_len": 128, "batch_size": 16, "split": "characterization"})
        for f, e in curve.items():
            t = (times or {}).get(f, 100.0 * 1300.5 / f)
            runs.append(_run(wid, "fixed", f, 0, t, e, 60.0, f))
        runs.append(_run(wid, "maxn", None, 0, 100.0, e_b, 60.0, 1300.5))
    runs = pd.DataFrame(runs)
    runs.insert(0, "run_id", [f"r{i:04d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_governors.py (hand-written)", "seed": 0}
    write_dataset(path, meta, pd.DataFrame(wl), runs)
    return F.sweep_from_dataset(load_dataset(path))


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    sweep = write_sweep(tmp_path_factory.mktemp("hand") / "ds", HAND)
    return sweep, F.feature_table(sweep)


def trained(sweep, table, ids):
    return TrainingData(sweep, table, list(ids))


def test_maxn_leaves_the_default_governor():
    assert MaxnGovernor().decide({"workload_id": "x"}).level is None


def test_ffg_is_the_least_mean_normalized_energy_stated_by_hand(hand):
    sweep, table = hand
    ffg = FixedGovernor().fit(trained(sweep, table, ["A/t", "B/t"]))
    assert ffg.level_ == 510.0 and ffg.decide({"workload_id": "anything"}).level == 510.0
    assert FixedGovernor().fit(trained(sweep, table, ["A/t"])).level_ == 714.0
    with pytest.raises(GovernorError, match="at least one"):
        FixedGovernor().fit(trained(sweep, table, []))


def test_ffg_only_considers_levels_every_training_workload_ran_at(tmp_path):
    holed = {"A": HAND["A"], "B": (10.0, {612.0: 8.0, 714.0: 9.0})}  # B never ran at 510
    sweep = write_sweep(tmp_path / "holed", holed)
    ffg = FixedGovernor().fit(trained(sweep, F.feature_table(sweep), ["A/t", "B/t"]))
    assert ffg.level_ == 612.0  # means: 612 -> 0.80, 714 -> 0.84


def test_oracle_is_each_workloads_least_energy_level_stated_by_hand(hand):
    oracle = OracleGovernor().fit(trained(*hand, []))
    assert oracle.decide({"workload_id": "A/t"}).level == 714.0
    assert oracle.decide({"workload_id": "B/t"}).level == 510.0
    with pytest.raises(GovernorError, match="not swept"):
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
    assert PaperTreeGovernor("long-seq").fit().decide(w).level == long_seq
    assert PaperTreeGovernor("root").fit().decide(w).level == root


def test_paper_tree_reading_must_be_known():
    with pytest.raises(GovernorError, match="long-seq"):
        paper_tree("middle")
    with pytest.raises(GovernorError, match="long-seq"):
        PaperTreeGovernor("middle").fit()


def tree_gov(tree, impute=None):
    """A TreeGovernor holding ``tree`` (as a loaded file would), with extra fill-in values."""
    gov = TreeGovernor()
    gov.tree_, gov.knob_ = {**tree, "impute": {**tree["impute"], **(impute or {})}}, "gpu_freq_mhz"
    return gov


def test_missing_feature_uses_the_fill_in_value_or_says_what_is_missing():
    tree = paper_tree()
    with pytest.raises(GovernorError, match="avg_seq_len"):
        tree_gov(tree).decide({"workload_id": "w", "n_layers": 4, "avg_seq_len": float("nan"), "gpu_util_pct": 50})
    gov = tree_gov(tree, impute={"avg_seq_len": 40.0})
    assert gov.decide({"n_layers": 4, "avg_seq_len": None, "gpu_util_pct": 50}).level == 612.0


def test_a_tree_saves_and_loads(tmp_path):
    gov = tree_gov(paper_tree("root"), impute={"gpu_util_pct": 40.0})
    save_governor(gov, tmp_path / "t.json")
    spec = json.loads((tmp_path / "t.json").read_text())
    assert (spec["format"], spec["version"], spec["policy"], spec["knob"]) == ("dvfslab-governor", 2, "mlg", "gpu_freq_mhz")
    back = load_governor(tmp_path / "t.json")
    assert type(back) is TreeGovernor and back.tree_["impute"] == {"gpu_util_pct": 40.0}
    assert back.decide({"n_layers": 4, "avg_seq_len": 20, "gpu_util_pct": 10}).level == 1020.0
    assert back.decide({"n_layers": 12, "avg_seq_len": 90, "gpu_util_pct": None}).level == 816.0  # 40 % filled in
    assert "if gpu_util_pct <= 22" in back.describe()
    with pytest.raises(GovernorError, match="holds a 'mlg' governor, not 'ffg'"):
        load_governor(tmp_path / "t.json", policy="ffg")


def _file(policy="mlg", **state):
    return json.dumps({"format": "dvfslab-governor", "version": 2, "policy": policy, "knob": "gpu_freq_mhz",
                       "params": {}, "state": state})


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    (json.dumps({"format": "other"}), "not a dvfslab governor"),
    (json.dumps({"format": "dvfslab-governor", "version": 9}), "unknown governor file version 9"),
    (_file("nope"), "unknown governor 'nope'"),
    (_file(tree={"nodes": [{"feature": "x", "threshold": 1, "left": 0, "right": 5}]}), "children"),
    (_file(tree={"nodes": [{"feature": "x"}]}), "neither a leaf"),
    (_file(), "a mlg governor saves tree; this file has nothing"),
    # a file of an older dvfslab: one line saying how to regenerate it
    (json.dumps({"format": "dvfslab-tree", "version": 1, "nodes": []}),
     "older dvfslab .* regenerate it: `dvfslab pipeline --data DATASET --out DIR`"),
])
def test_bad_governor_files_name_the_file_and_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(GovernorError, match=message) as err:
        load_governor(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_governor_file_says_how_to_make_one(tmp_path):
    with pytest.raises(GovernorError, match="dvfslab pipeline"):
        load_governor(tmp_path / "none.json")


def test_registry_builds_every_governor(hand):
    sweep, table = hand
    mlg = {"estimator": _tree_pipeline(), "features": ["n_layers", "avg_seq_len"]}
    govs = R.build(["maxn", "ffg", "mlg-paper", "mlg", "oracle"], trained(sweep, table, ["A/t", "B/t"]), {"mlg": mlg})
    assert {name: g.name for name, g in govs.items()} == {n: n for n in govs}
    assert govs["ffg"].level_ == 510.0 and govs["oracle"].decide({"workload_id": "A/t"}).level == 714.0
    with pytest.raises(GovernorError, match="unknown governor 'nope'"):
        R.build(["nope"], trained(sweep, table, ["A/t"]))
    with pytest.raises(GovernorError, match="notebook 03"):
        R.build(["mlg"], trained(sweep, table, ["A/t"]))
    # options are typed parameters: a misspelt one is an error, not a silent default
    with pytest.raises(GovernorError, match="unexpected keyword argument 'n_level'.*n_levels"):
        R.make("online", n_level=3)
    with pytest.raises(GovernorError, match="unknown governor 'curv'"):
        R.make_all(["curve"], {"curv": {"alpha": 2.0}})
    # dvfslab govern takes the governors that decide before the run; the probing ones and the yardsticks it refuses
    assert {"ffg", "mlg-paper", "mlg", "curve"} <= set(R.command_line_names())
    assert not {"maxn", "online", "profiled", "oracle"} & set(R.command_line_names())


def _tree_pipeline():
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.tree import DecisionTreeClassifier

    return Pipeline([("impute", SimpleImputer(strategy="median")), ("model", DecisionTreeClassifier(random_state=0))])


def test_governors_follow_the_estimator_contract_so_clone_rebuilds_them(hand):
    """get_params / set_params / sklearn's clone on every registered governor: the clone has the
    same parameters and nothing learned (a CV fold refits it)."""
    from sklearn.base import clone

    sweep, table = hand
    for name in R.names():
        gov = R.make(name)
        params = gov.get_params()
        twin = clone(gov)
        assert type(twin) is type(gov) and twin is not gov and twin.get_params() == params, name
    online = R.make("online", n_levels=4, fine_steps=2)
    assert clone(online).get_params()["n_levels"] == 4
    assert online.set_params(fine_steps=3) is online and online.fine_steps == 3
    mlg = R.make("mlg", estimator=_tree_pipeline())  # nested parameters, as sklearn's
    assert mlg.set_params(estimator__model__max_depth=2).get_params()["estimator__model__max_depth"] == 2
    with pytest.raises(GovernorError, match="unknown parameter 'fine_step'"):
        online.set_params(fine_step=3)
    ffg = FixedGovernor().fit(trained(sweep, table, ["A/t", "B/t"]))
    assert not hasattr(clone(ffg), "level_")  # learned state is not cloned
    limited = ffg.with_params(objective=R.governor_class("ffg")().objective)
    assert limited.level_ == 510.0 and limited is not ffg  # with_params keeps what was learned


def test_paper_tree_in_the_registry_fills_missing_values_from_training(tmp_path):
    sweep = write_sweep(tmp_path / "ds", {**HAND, "C": HAND["B"]}, layers={"A": 2, "B": 4, "C": 12})
    table = F.feature_table(sweep)
    gov = R.build(["mlg-paper"], trained(sweep, table, ["A/t", "B/t", "C/t"]))["mlg-paper"]
    assert gov.tree_["impute"]["n_layers"] == 4.0  # median of 2, 4, 12
    root = R.build(["mlg-paper"], trained(sweep, table, ["A/t"]), {"mlg-paper": {"util_split": "root"}})
    assert root["mlg-paper"].tree_["info"]["util_split"] == "root"


def test_prune_collapses_splits_that_decide_the_same_level():
    nodes = [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"level": 612.0, "n": 3},
             {"feature": "b", "threshold": 5.0, "left": 3, "right": 4}, {"level": 612.0, "n": 1},
             {"level": 612.0, "n": 2}]
    assert prune(nodes) == [{"level": 612.0, "n": 6}]
    mixed = [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"level": 510.0},
             {"feature": "b", "threshold": 5.0, "left": 3, "right": 4}, {"level": 714.0}, {"level": 714.0}]
    assert prune(mixed) == [{"feature": "a", "threshold": 1.0, "left": 1, "right": 2}, {"level": 510.0},
                            {"level": 714.0, "n": 0}]
    assert prune(paper_tree()["nodes"]) == paper_tree()["nodes"]


# --------------------------------------------------------------------------------------------
# One snap rule: half-way between two levels goes up (devfreq's ceil), when run and when replayed
# --------------------------------------------------------------------------------------------


def _leaf_tree(level, table=ORIN_FREQS_MHZ):
    return {"features": [], "impute": {}, "nodes": [{"level": level}], "level_table": list(table), "info": {}}


def test_a_663_mhz_leaf_runs_and_is_replayed_at_714(hand):
    sweep, table = hand
    on_table, bare = tree_gov(_leaf_tree(663.0)), tree_gov(_leaf_tree(663.0, table=()))
    assert decide(on_table, {})[0] == 714.0  # 663 is half-way between 612 and 714
    assert decide(bare, {}, level_table=ORIN_FREQS_MHZ) == (714.0, "mlg: 714 MHz (nearest level to 663 MHz)")
    assert decide(FixedGovernor(663.0).fit(), {}, level_table=ORIN_FREQS_MHZ)[0] == 714.0
    per = E.replay({"leaf": on_table}, sweep, table)
    assert (per["level"] == 714.0).all() and not per["snapped"].any()
    per = E.replay({"leaf": bare}, sweep, table)  # the replay snaps a bare 663 the same way
    assert (per["level"] == 714.0).all() and per["snapped"].all()
    assert per.set_index("workload_id").loc["A/t", "energy_j"] == pytest.approx(78.0)


def test_fixed_governor_snaps_onto_its_table(hand):
    data = trained(*hand, ["A/t"])  # a sweep of the Orin's table
    assert FixedGovernor(663.0).fit(data).level_ == 714.0
    assert FixedGovernor(650.0).fit(data).level_ == 612.0
    assert FixedGovernor(663.0).fit().level_ == 663.0  # no table: as given (the clocks snap it)


# --------------------------------------------------------------------------------------------
# Board side: loading a saved governor and deciding imports neither pandas nor the analysis
# --------------------------------------------------------------------------------------------

LOAD_AND_DECIDE = textwrap.dedent("""
    import sys
    import dvfslab.governors.io as m
    feats = {"n_layers": 12, "avg_seq_len": 60.0, "gpu_util_pct": 50.0, "hidden_size": 768, "params_m": 110,
             "is_decoder": 0}
    for policy, path in [("mlg", sys.argv[1]), ("ffg", sys.argv[2]), ("curve", sys.argv[3])]:
        level, why = m.decide(m.load_policy(policy, path), feats)
        print(policy, level)
    level, _ = m.decide(m.load_policy("ffg", sys.argv[2], max_slowdown_pct=10, time_model=sys.argv[3]), feats)
    from dvfslab.governors.base import ProbeStep
    from dvfslab.governors.files import load_governor
    profiled = load_governor(sys.argv[4], policy="profiled")
    for joules in (1.0, 0.1):  # A's probe (1 J per 1 s step), then B's (0.1 J per 1 s step)
        session = profiled.start({"gpu_util_pct": 60.0}, [])
        while not session.done:
            session.observe(ProbeStep(session.next_level(), 1.0, joules))
        print("profiled", session.decision().level)
    heavy = [k for k in sys.modules if k in ("pandas", "numpy") or k.startswith(("dvfslab.analysis", "sklearn"))]
    assert not heavy, heavy
""")


def test_loading_and_deciding_needs_no_pandas_nor_analysis(hand, tmp_path):
    sweep, table = hand
    data = trained(sweep, table, ["A/t", "B/t"])
    save_governor(tree_gov(paper_tree()), tmp_path / "mlg.json")
    save_governor(FixedGovernor().fit(data), tmp_path / "ffg.json")
    save_governor(CurveGovernor().fit(data), tmp_path / "curve.json")
    # the profiled governor fitted on the two workloads' probes (per-step means of their MAXN runs)
    save_governor(ProfiledGovernor().fit(data), tmp_path / "profiled.json")
    out = subprocess.run([sys.executable, "-c", LOAD_AND_DECIDE, *(str(tmp_path / f"{n}.json") for n in
                                                                  ("mlg", "ffg", "curve", "profiled"))],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["mlg 816.0", "ffg 510.0"]
    # profiled: one informative feature (probe power, standardized to +-1 for A and B), ridge alpha 1
    # keeps 2/3 of each half-difference of ln(E/E_b) around the mean: A -> 714 MHz
    # (ln .78 = -.2485, ln .9 = -.1054: -.1769 + 2/3 (-.0716) = -.2246 < ln .8 = -.2231 at 612),
    # B -> 510 MHz (-.2810 - 2/3 (.2300) = -.4343)
    assert out.stdout.split("\n")[3:5] == ["profiled 714.0", "profiled 510.0"]
