"""Sweep tables, baselines and labels (dvfslab.analysis.aggregate) and the feature table
(dvfslab.analysis.features).

Expected numbers come from the hand-written sweep of ``analysis_fixtures.TINY_RUNS``; each
assertion says how it was computed by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import (
    ORIN_FREQS_MHZ,
    make_dataset,
    make_tiny_dataset,
    optimal_freq,
    tiny_frames,
)

from dvfslab.analysis import aggregate as F
from dvfslab.analysis import features as FT
from dvfslab.core.errors import SweepError
from dvfslab.data.contract import load_dataset, write_dataset


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return F.sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path_factory.mktemp("t") / "tiny")))


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return load_dataset(make_dataset(tmp_path_factory.mktemp("f") / "ds", reps=3, failed_runs=4))


def _level(sweep: F.Sweep, wid: str, level: float) -> pd.Series:
    lv = sweep.levels
    return lv[(lv["workload_id"] == wid) & (lv["level"] == level)].iloc[0]


def test_level_means_average_only_ok_fixed_runs(tiny):
    row = _level(tiny, "tiny-enc/sst2", 612.0)
    assert row["n_ok"] == 2                      # the failed 1 J run is not counted
    assert row["energy_j"] == pytest.approx(92.0)  # (90 + 94) / 2; with the failed run it would be 61.67
    assert row["time_s"] == pytest.approx(20.0)
    assert row["avg_power_w"] == pytest.approx(4.6)  # (90/20 + 94/20) / 2
    assert len(tiny.levels) == 9                 # 3 workloads x 3 measured levels


def test_a_663_mhz_run_on_the_orin_table_aggregates_to_714(tiny):
    # 663 MHz lies exactly half-way between 612 and 714 (the Orin table: ..., 612, 714, ...).
    # The one snap rule (dvfslab.core.levels.snap_mhz) sends a tie to the higher level.
    _, _, runs = tiny_frames()
    second_714 = (runs["workload_id"] == "big-dec/qnli") & (runs["gpu_freq_mhz"] == 714.0) & (runs["rep"] == 1)
    runs.loc[second_714, "gpu_freq_mhz"] = 663.0
    levels = F.level_means(runs, ORIN_FREQS_MHZ).set_index(["workload_id", "level"])
    assert 663.0 not in set(levels.index.get_level_values("level"))
    assert levels.loc[("big-dec/qnli", 714.0), "n_ok"] == 2
    assert levels.loc[("big-dec/qnli", 714.0), "energy_j"] == pytest.approx(175.0)  # (170 + 180) / 2
    assert levels.loc[("big-dec/qnli", 612.0), "n_ok"] == 2                          # 612 gets nothing extra


def test_measured_frequencies_snap_to_the_table(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", models=["bert-tiny"], tasks=["sst2"]))
    runs = ds.runs.copy()
    runs.loc[runs["gpu_freq_mhz"] == 1300.5, "gpu_freq_mhz"] = 1300.0  # within the contract's 0.5 MHz tolerance
    levels = F.level_means(runs, ds.levels)
    assert 1300.5 in set(levels["level"]) and 1300.0 not in set(levels["level"])


def test_nearest_measured_level_breaks_ties_upwards(tiny):
    # big-dec/qnli was measured at 612, 714 and 1020 MHz; 867 is half-way between 714 and 1020
    assert tiny.nearest_level("big-dec/qnli", 867.0) == 1020.0
    assert tiny.nearest_level("big-dec/qnli", 866.0) == 714.0
    assert tiny.nearest_level("big-dec/qnli", 306.0) == 612.0  # below every measured level


def test_maxn_baseline_is_the_mean_of_maxn_runs(tiny):
    assert tiny.baseline.loc["tiny-enc/sst2", "baseline"] == "maxn"
    assert np.isnan(tiny.baseline.loc["tiny-enc/sst2", "level"])
    assert tiny.baseline_of("tiny-enc/sst2") == pytest.approx((122.0, 10.0))  # (120 + 124) / 2 J, 10 s
    assert tiny.baseline_of("big-dec/qnli") == pytest.approx((250.0, 20.0))


def test_fmax_baseline_and_fallback_for_a_workload_without_maxn(tmp_path):
    fmax = load_dataset(make_dataset(tmp_path / "fmax", baseline="fmax", models=["bert-tiny", "bert-base"]))
    sweep = F.sweep_from_dataset(fmax)
    assert set(sweep.baseline["baseline"]) == {"fmax"}
    assert set(sweep.baseline["level"]) == {1300.5}

    meta, wl, runs = tiny_frames()
    runs = runs[~((runs["workload_id"] == "big-dec/qnli") & (runs["policy"] == "maxn"))]
    base = F.sweep_from_dataset(write_dataset(tmp_path / "part", meta, wl, runs))
    # big-dec/qnli lost its MAXN runs: its baseline is its highest measured level, 1020 MHz
    assert base.baseline.loc["big-dec/qnli", "baseline"] == "fmax"
    assert base.baseline.loc["big-dec/qnli", "level"] == 1020.0
    assert base.baseline_of("big-dec/qnli") == pytest.approx((192.0, 25.0))  # (190 + 194) / 2 J at 1020
    assert base.baseline.loc["tiny-enc/sst2", "baseline"] == "maxn"


def test_optimal_levels_by_hand(tiny):
    optima = F.optimal_levels(tiny).set_index("workload_id")
    # least mean energy: sst2 612 (92 J), qnli 714 (175 J), mrpc 510 (48 J)
    assert optima["opt_level"].to_dict() == {"tiny-enc/sst2": 612.0, "big-dec/qnli": 714.0, "tiny-enc/mrpc": 510.0}
    # 0-based index in the Orin table 306, 408, 510, 612, 714, ...
    assert optima["opt_level_idx"].to_dict() == {"tiny-enc/sst2": 3, "big-dec/qnli": 4, "tiny-enc/mrpc": 2}
    # saving vs MAXN: 100 (1 - 92/122), 100 (1 - 175/250), 100 (1 - 48/80)
    assert optima.loc["tiny-enc/sst2", "oracle_saving_pct"] == pytest.approx(24.590163934426229)
    assert optima.loc["big-dec/qnli", "oracle_saving_pct"] == pytest.approx(30.0)
    assert optima.loc["tiny-enc/mrpc", "oracle_saving_pct"] == pytest.approx(40.0)
    # mrpc's optimum is its lowest measured level: not a U-curve
    assert optima["u_shaped"].to_dict() == {"tiny-enc/sst2": True, "big-dec/qnli": True, "tiny-enc/mrpc": False}
    # paper labels rank the optima that occur: 510 -> 1, 612 -> 2, 714 -> 3
    assert optima["paper_label"].to_dict() == {"tiny-enc/sst2": 2, "big-dec/qnli": 3, "tiny-enc/mrpc": 1}
    summary = F.characterization_summary(optima.reset_index(), tiny)
    assert summary == {"optimal_level_range": {"min": 510.0, "max": 714.0}, "u_shaped_fraction": pytest.approx(2 / 3),
                       "n_workloads": 3, "knob": "gpu_freq_mhz", "knob_unit": "MHz", "level_table": ORIN_FREQS_MHZ}


def test_optimal_levels_find_the_closed_form_optimum(ds):
    # the toy generator puts each workload's minimum at optimal_freq(...) by construction
    optima = F.optimal_levels(F.sweep_from_dataset(ds))
    wl = ds.workloads.set_index("workload_id")
    for _, row in optima.iterrows():
        w = wl.loc[row["workload_id"]]
        assert row["opt_level"] == optimal_freq(ORIN_FREQS_MHZ, w["n_layers"], w["avg_seq_len"])
    assert optima["u_shaped"].all()


def test_u_shape_is_false_when_the_minimum_is_at_an_end(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", models=["bert-tiny"], tasks=["sst2"],
                                   freqs_mhz=[510.0, 612.0]))  # the optimum lies at the lowest level
    sweep = F.sweep_from_dataset(ds)
    optima = F.optimal_levels(sweep)
    assert not optima["u_shaped"].any()
    assert F.characterization_summary(optima, sweep)["u_shaped_fraction"] == 0.0


def test_relative_levels_by_hand(tiny):
    rel = F.relative_levels(tiny).set_index(["workload_id", "level"])
    row = rel.loc[("tiny-enc/sst2", 612.0)]
    assert row["time_rel"] == pytest.approx(2.0)               # 20 s / 10 s
    assert row["energy_rel"] == pytest.approx(92.0 / 122.0)    # 0.754
    assert row["power_rel"] == pytest.approx(4.6 / 12.2)       # (4.5 + 4.7)/2 W over (12 + 12.4)/2 W


def test_feature_table_columns_and_values(tiny):
    table = FT.feature_table(tiny).set_index("workload_id")
    assert set(FT.FEATURES) <= set(table.columns)
    assert table["is_decoder"].to_dict() == {"tiny-enc/sst2": 0.0, "big-dec/qnli": 1.0, "tiny-enc/mrpc": 0.0}
    assert table.loc["tiny-enc/sst2", "gpu_util_pct"] == pytest.approx(42.0)  # MAXN runs: (40 + 44) / 2
    assert table.loc["big-dec/qnli", "gpu_util_pct"] == pytest.approx(90.0)
    assert table.loc["big-dec/qnli", "size_group"] == "> 70M"                 # 162.3 M parameters
    assert table.loc["tiny-enc/sst2", "size_group"] == "<= 70M"               # 4.4 M
    assert table.loc["big-dec/qnli", "opt_level_idx"] == 4


def test_size_groups_at_the_boundary():
    groups = FT.size_group(pd.Series([70.0, 70.4, np.nan]))
    assert list(groups) == ["<= 70M", "> 70M", "unknown"]  # the paper: > 70M vs <= 70M


def test_usable_features_drop_empty_columns_and_keep_partial_ones(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", missing={"hidden_size": 1.0, "avg_seq_len": 0.4}))
    table = FT.feature_table(F.sweep_from_dataset(ds))
    used, dropped = FT.usable_features(table)
    assert "hidden_size" not in used and "no value" in dropped["hidden_size"]
    assert "avg_seq_len" in used and table["avg_seq_len"].isna().any()
    # no usable feature is not an error: cannot_learn says what that means
    assert FT.usable_features(table, ["hidden_size", "not_a_column"]) == (
        [], {"hidden_size": "hidden_size has no value in any training workload",
             "not_a_column": "not_a_column is not in the feature table"})


def test_sweep_round_trips_through_files_exactly(ds, tmp_path):
    sweep = F.sweep_from_dataset(ds)
    F.write_sweep(sweep, tmp_path)
    back = F.read_sweep(tmp_path)
    pd.testing.assert_frame_equal(back.levels, sweep.levels)
    pd.testing.assert_frame_equal(back.baseline.reset_index(drop=True), sweep.baseline.reset_index(drop=True),
                                  check_dtype=False)
    assert back.level_table == sweep.level_table and back.source == "simulated"
    assert json.loads((tmp_path / "sweep.json").read_text())["baseline"] == "maxn"


def test_read_sweep_names_the_missing_step(tmp_path):
    with pytest.raises(SweepError, match="01_characterization"):
        F.read_sweep(tmp_path)


def test_a_sweep_written_by_an_older_dvfslab_says_how_to_regenerate(ds, tmp_path):
    F.write_sweep(F.sweep_from_dataset(ds), tmp_path)
    meta = json.loads((tmp_path / "sweep.json").read_text())
    meta["freq_table_mhz"] = meta.pop("level_table")  # the key before levels were knob-neutral
    (tmp_path / "sweep.json").write_text(json.dumps(meta))
    with pytest.raises(SweepError, match=r"older dvfslab .*rerun `dvfslab pipeline --out") as err:
        F.read_sweep(tmp_path)
    assert "\n" not in str(err.value)


def test_dataset_without_energy_is_refused(ds, tmp_path):
    meta = {**ds.meta, "energy_measured": False}
    no_energy = write_dataset(tmp_path / "ne", meta, ds.workloads, ds.runs)
    with pytest.raises(SweepError, match="energy_measured"):
        F.sweep_from_dataset(no_energy)


def test_pick_splits_with_one_split():
    one = pd.DataFrame({"split": ["characterization"] * 3})
    assert FT.pick_splits(one) == ("characterization", "characterization")
    both = pd.DataFrame({"split": ["evaluation", "characterization"]})
    assert FT.pick_splits(both) == ("characterization", "evaluation")


def test_public_face_names_the_defining_modules():
    import dvfslab.analysis as A

    assert A.Sweep is F.Sweep and A.feature_table is FT.feature_table and A.FEATURES == FT.FEATURES


def test_a_feature_with_one_value_in_training_is_dropped():
    # batch size fixed at 32 (as in a clock sweep), layers 2 / 12 / 12: only n_layers can separate
    train = pd.DataFrame({"batch_size": [32.0, 32.0, 32.0], "n_layers": [2.0, 12.0, 12.0]})
    used, dropped = FT.usable_features(train, ["batch_size", "n_layers"])
    assert used == ["n_layers"]
    assert dropped == {"batch_size": "batch_size is 32 in every training workload"}
    # one value where there is one (the third is unknown): still constant, and said so
    train.loc[2, "batch_size"] = np.nan
    assert FT.usable_features(train, ["batch_size"])[1] == {
        "batch_size": "batch_size is 32 in every training workload that has one"}
    assert "batch_size" in FT.EXTRA_FEATURES  # in the table, used where it varies (a Zeus power-limit trace)


def _train(sweep: F.Sweep, ids: list[str]) -> pd.DataFrame:
    table = FT.feature_table(sweep)
    return table[table["workload_id"].isin(ids)]


def test_cannot_learn_from_one_workload_or_one_level(tiny, tmp_path):
    assert FT.cannot_learn(tiny, _train(tiny, ["tiny-enc/sst2"])) == \
        "one training workload (tiny-enc/sst2): nothing to generalize from"
    # bert-tiny and bert-small on sst2 and qnli, all measured at 612 MHz only
    one = F.sweep_from_dataset(load_dataset(make_dataset(tmp_path / "one", freqs_mhz=[612.0],
                                                         models=["bert-tiny", "bert-small"], tasks=["sst2", "qnli"])))
    assert FT.cannot_learn(one, _train(one, one.workload_ids())) == "one GPU level was measured (612 MHz)"
    assert FT.cannot_learn(tiny, _train(tiny, tiny.workload_ids())) == ""  # optima 612, 714, 510; features vary


def test_cannot_learn_says_what_is_constant(tiny, tmp_path):
    # tiny-enc on sst2 and mrpc: 2 layers, hidden 128 in both (optima 612 and 510 MHz differ)
    train = _train(tiny, ["tiny-enc/sst2", "tiny-enc/mrpc"])
    assert FT.cannot_learn(tiny, train, ["n_layers", "hidden_size"]) == (
        "no feature varies over the 2 training workloads (n_layers is 2 in every training workload; "
        "hidden_size is 128 in every training workload)")
    assert FT.cannot_learn(tiny, train, ["n_layers", "avg_seq_len"]) == ""  # 13.3 vs 53.2 tokens
    # bert-tiny (2 layers) and bert-small (4 layers) on sst2 (13.3 tokens): the fixture puts both
    # optima at position 0.3 of the Orin table, level 3 = 612 MHz; the layers still vary
    same = F.sweep_from_dataset(load_dataset(make_dataset(tmp_path / "same", models=["bert-tiny", "bert-small"],
                                                          tasks=["sst2"])))
    assert FT.cannot_learn(same, _train(same, same.workload_ids())) == \
        "every training workload has its least energy at 612 MHz"
    assert FT.cannot_learn(same, _train(same, same.workload_ids()), ["batch_size"]) == (
        "every training workload has its least energy at 612 MHz; no feature varies over the 2 training "
        "workloads (batch_size is 16 in every training workload)")


def test_a_power_limit_sweep_keeps_its_knob_through_files(tmp_path):
    runs = pd.DataFrame({"run_id": ["a", "b"], "workload_id": ["w", "w"], "policy": ["fixed", "fixed"],
                         "power_limit_w": [100.0, 250.0], "rep": [0, 0], "time_s": [20.0, 10.0],
                         "energy_j": [1800.0, 2000.0], "status": ["ok", "ok"]})
    workloads = pd.DataFrame({"workload_id": ["w"], "model": ["m"], "task": ["t"], "split": ["characterization"]})
    meta = {"source": "measured", "device": {}, "knob": "power_limit_w", "power_limit_table_w": [100, 250],
            "baseline": "max_level"}
    sweep = F.sweep_from_dataset(write_dataset(tmp_path / "ds", meta, workloads, runs))
    assert sweep.knob.name == "power_limit_w"
    assert sweep.baseline_of("w") == (2000.0, 10.0)  # the highest limit, 250 W
    assert sweep.oracle_level("w") == 100.0             # 1800 J < 2000 J
    summary = F.characterization_summary(F.optimal_levels(sweep), sweep)
    assert summary["optimal_level_range"] == {"min": 100.0, "max": 100.0} and summary["level_table"] == [100.0, 250.0]
    assert (summary["knob"], summary["knob_unit"]) == ("power_limit_w", "W")
    F.write_sweep(sweep, tmp_path / "out")
    back = F.read_sweep(tmp_path / "out")
    assert back.knob.name == "power_limit_w" and back.level_table == (100.0, 250.0)
    with pytest.raises(SweepError, match="not measured at 175 W"):
        back.at("w", 175.0)
