"""Sweep tables, baselines, labels and the feature table (dvfslab.analysis.aggregate)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_dataset, optimal_freq

from dvfslab.analysis import aggregate as F
from dvfslab.data.contract import load_dataset, write_dataset


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return load_dataset(make_dataset(tmp_path_factory.mktemp("f") / "ds", reps=3, failed_runs=4))


def _manual_mean(runs: pd.DataFrame, wid: str, col: str, policy: str = "fixed", freq: float | None = None) -> float:
    values = [r[col] for _, r in runs.iterrows()
              if r["workload_id"] == wid and r["policy"] == policy and r["status"] == "ok"
              and (freq is None or r["gpu_freq_mhz"] == freq)]
    return sum(values) / len(values)


def test_level_means_average_only_ok_fixed_runs(ds):
    sweep = F.sweep_from_dataset(ds)
    wid = ds.workloads["workload_id"].iloc[0]  # the failed runs were added to the first workloads
    assert (ds.runs["status"] == "failed").sum() == 4
    row = sweep.levels[(sweep.levels["workload_id"] == wid) & (sweep.levels["freq_mhz"] == ORIN_FREQS_MHZ[0])].iloc[0]
    assert row["n_ok"] == 3
    assert row["energy_j"] == pytest.approx(_manual_mean(ds.runs, wid, "energy_j", freq=ORIN_FREQS_MHZ[0]), rel=1e-12)
    assert row["time_s"] == pytest.approx(_manual_mean(ds.runs, wid, "time_s", freq=ORIN_FREQS_MHZ[0]), rel=1e-12)
    assert len(sweep.levels) == len(ds.workloads) * len(ORIN_FREQS_MHZ)


def test_maxn_baseline_is_the_mean_of_maxn_runs(ds):
    sweep = F.sweep_from_dataset(ds)
    wid = ds.workloads["workload_id"].iloc[3]
    assert sweep.baseline.loc[wid, "baseline"] == "maxn"
    assert np.isnan(sweep.baseline.loc[wid, "freq_mhz"])
    assert sweep.baseline_of(wid)[0] == pytest.approx(_manual_mean(ds.runs, wid, "energy_j", policy="maxn"), rel=1e-12)


def test_fmax_baseline_and_fallback_for_a_workload_without_maxn(tmp_path):
    fmax = load_dataset(make_dataset(tmp_path / "fmax", baseline="fmax", models=["bert-tiny", "bert-base"]))
    sweep = F.sweep_from_dataset(fmax)
    assert set(sweep.baseline["baseline"]) == {"fmax"}
    assert set(sweep.baseline["freq_mhz"]) == {1300.5}
    wid = "bert-base/rte"
    assert sweep.baseline_of(wid) == sweep.at(wid, 1300.5)

    ds = load_dataset(make_dataset(tmp_path / "maxn", models=["bert-tiny", "bert-base"]))
    runs = ds.runs[~((ds.runs["workload_id"] == wid) & (ds.runs["policy"] == "maxn"))]
    part = write_dataset(tmp_path / "part", ds.meta, ds.workloads, runs)
    base = F.sweep_from_dataset(part).baseline
    assert base.loc[wid, "baseline"] == "fmax" and base.loc[wid, "freq_mhz"] == 1300.5
    assert base.loc["bert-tiny/rte", "baseline"] == "maxn"


def test_measured_frequencies_snap_to_the_table(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", models=["bert-tiny"], tasks=["sst2"]))
    runs = ds.runs.copy()
    runs.loc[runs["gpu_freq_mhz"] == 1300.5, "gpu_freq_mhz"] = 1300.0  # within the contract's 0.5 MHz tolerance
    levels = F.level_means(runs, ds.freq_table_mhz)
    assert 1300.5 in set(levels["freq_mhz"]) and 1300.0 not in set(levels["freq_mhz"])


def test_optimal_levels_find_the_known_optimum(ds):
    sweep = F.sweep_from_dataset(ds)
    optima = F.optimal_levels(sweep)
    wl = ds.workloads.set_index("workload_id")
    for _, row in optima.iterrows():
        expected = optimal_freq(ORIN_FREQS_MHZ, wl.loc[row["workload_id"], "n_layers"], wl.loc[row["workload_id"], "avg_seq_len"])
        assert row["opt_freq_mhz"] == expected
        assert ORIN_FREQS_MHZ[row["opt_level_idx"]] == expected
    assert optima["u_shaped"].all()
    ranks = sorted(optima["opt_freq_mhz"].unique())
    assert all(optima["paper_label"] == optima["opt_freq_mhz"].map(lambda f: ranks.index(f) + 1))
    summary = F.characterization_summary(optima)
    assert summary["sweet_spot_mhz"] == {"min": ranks[0], "max": ranks[-1]}
    assert summary["u_shaped_fraction"] == 1.0


def test_u_shape_is_false_when_the_minimum_is_at_an_end(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", models=["bert-tiny"], tasks=["sst2"],
                                   freqs_mhz=[510.0, 612.0]))  # the optimum lies at the lowest level
    optima = F.optimal_levels(F.sweep_from_dataset(ds))
    assert not optima["u_shaped"].any()
    assert F.characterization_summary(optima)["u_shaped_fraction"] == 0.0


def test_feature_table_columns_and_values(ds):
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep).set_index("workload_id")
    assert set(F.FEATURES) <= set(table.columns)
    assert table.loc["pythia-70m/sst2", "is_decoder"] == 1.0 and table.loc["bert-base/sst2", "is_decoder"] == 0.0
    wid = "bert-base/qnli"
    assert table.loc[wid, "gpu_util_pct"] == pytest.approx(_manual_mean(ds.runs, wid, "gpu_util_pct", policy="maxn"))
    assert table.loc["pythia-70m/sst2", "size_group"] == "> 70M"
    assert table.loc["bert-small/sst2", "size_group"] == "<= 70M"


def test_usable_features_drop_empty_columns_and_keep_partial_ones(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", missing={"hidden_size": 1.0, "avg_seq_len": 0.4}))
    table = F.feature_table(F.sweep_from_dataset(ds))
    used, dropped = F.usable_features(table)
    assert "hidden_size" not in used and "no value" in dropped["hidden_size"]
    assert "avg_seq_len" in used and table["avg_seq_len"].isna().any()
    with pytest.raises(F.SweepError, match="no usable feature"):
        F.usable_features(table, ["hidden_size", "not_a_column"])


def test_sweep_round_trips_through_files_exactly(ds, tmp_path):
    sweep = F.sweep_from_dataset(ds)
    F.write_sweep(sweep, tmp_path)
    back = F.read_sweep(tmp_path)
    pd.testing.assert_frame_equal(back.levels, sweep.levels)
    pd.testing.assert_frame_equal(back.baseline.reset_index(drop=True), sweep.baseline.reset_index(drop=True),
                                  check_dtype=False)
    assert back.freq_table_mhz == sweep.freq_table_mhz and back.source == "simulated"
    assert json.loads((tmp_path / "sweep.json").read_text())["baseline"] == "maxn"


def test_read_sweep_names_the_missing_step(tmp_path):
    with pytest.raises(F.SweepError, match="01_characterization"):
        F.read_sweep(tmp_path)


def test_dataset_without_energy_is_refused(ds, tmp_path):
    meta = {**ds.meta, "energy_measured": False}
    no_energy = write_dataset(tmp_path / "ne", meta, ds.workloads, ds.runs)
    with pytest.raises(F.SweepError, match="energy_measured"):
        F.sweep_from_dataset(no_energy)


def test_pick_splits_with_one_split():
    one = pd.DataFrame({"split": ["characterization"] * 3})
    assert F.pick_splits(one) == ("characterization", "characterization")
    both = pd.DataFrame({"split": ["evaluation", "characterization"]})
    assert F.pick_splits(both) == ("characterization", "evaluation")
