"""Replay of governors over a sweep: definitions of saving, slowdown, regret; summaries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import make_dataset

from dvfslab import analysis as F
from dvfslab import governors as G
from dvfslab.analysis import TrainingData
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation import replay as E
from dvfslab.governors import registry as R
from dvfslab.governors.base import GovernorTags, LevelGovernor


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    ds = load_dataset(make_dataset(tmp_path_factory.mktemp("e") / "ds"))
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    govs = G.build(["maxn", "ffg", "mlg-paper", "oracle"], TrainingData(sweep, table, train))
    govs["mlg"] = G.PaperTreeGovernor("root").fit(TrainingData(sweep, table, train))  # a tree to replay as mlg
    per = E.replay(govs, sweep, table, sweep.workload_ids("evaluation"))
    return sweep, table, govs, per


def test_definitions_per_workload(setup):
    sweep, table, govs, per = setup
    for _, row in per[per["policy"] == "ffg"].iterrows():
        wid, f = row["workload_id"], govs["ffg"].level_
        e, t = sweep.at(wid, f)
        e_b, t_b = sweep.baseline_of(wid)
        e_o = min(sweep.curve(wid)[1])
        assert row["level"] == f and not row["snapped"]
        assert row["saving_pct"] == pytest.approx(100 * (1 - e / e_b), rel=1e-12)
        assert row["slowdown_pct"] == pytest.approx(100 * (t / t_b - 1), rel=1e-12)
        assert row["regret_pct"] == pytest.approx(100 * (e - e_o) / e_b, rel=1e-12)


def test_baseline_and_oracle_rows(setup):
    sweep, table, govs, per = setup
    maxn = per[per["policy"] == "maxn"]
    assert (maxn["saving_pct"] == 0).all() and (maxn["slowdown_pct"] == 0).all() and maxn["level"].isna().all()
    oracle = per[per["policy"] == "oracle"].set_index("workload_id")
    assert (oracle["regret_pct"] == 0).all()
    for policy in ("ffg", "mlg", "mlg-paper"):
        other = per[per["policy"] == policy].set_index("workload_id")
        assert (other["saving_pct"] <= oracle.loc[other.index, "saving_pct"] + 1e-12).all()
    assert set(per["workload_id"]) == set(table.loc[table["split"] == "evaluation", "workload_id"])


def test_summary_of_a_hand_written_replay():
    """Three workloads, two sizes; the figures below are worked out by hand from the rows."""
    per = pd.DataFrame({
        "policy": ["p"] * 3 + ["q"] * 3, "workload_id": ["a", "b", "c"] * 2, "size_group": ["<= 70M", "> 70M", "> 70M"] * 2,
        "energy_j": [90.0, 80.0, 70.0, 1.0, 1.0, np.nan], "saving_pct": [10.0, 20.0, 30.0, 5.0, -5.0, np.nan],
        "slowdown_pct": [1.0, 2.0, 6.0, 0.0, 4.0, np.nan], "regret_pct": [3.0, 0.0, 0.0, 8.0, 2.0, np.nan],
        "job_saving_pct": [10.0, 20.0, 30.0, 9.0, 7.0, np.nan], "job_slowdown_pct": [1.0, 2.0, 6.0, 0.5, 1.5, np.nan],
        "job_regret_pct": [3.0, 0.0, 0.0, 4.0, 6.0, np.nan], "probe_share_pct": [0.0, 0.0, 0.0, 1.0, 3.0, np.nan],
        "profiling_steps": [0, 0, 0, 26, 26, 26], "probe_units": [0.0, 0.0, 0.0, 26.0, 26.0, 26.0]})
    s = E.summarize(per).set_index("policy")
    assert s.loc["p", ["n_workloads", "n_failed"]].tolist() == [3, 0]
    assert s.loc["p", ["mean_saving_pct", "max_saving_pct", "min_saving_pct"]].tolist() == [20.0, 30.0, 10.0]
    assert s.loc["p", ["mean_slowdown_pct", "max_slowdown_pct", "mean_regret_pct"]].tolist() == [3.0, 6.0, 1.0]
    assert s.loc["q", ["n_workloads", "n_failed", "mean_saving_pct", "mean_regret_pct"]].tolist() == [2, 1, 0.0, 5.0]
    d = E.summary_dict(E.summarize(per))
    assert {k: d["p"][k] for k in (*E.SUMMARY_KEYS, "n_workloads")} == {
        "mean_saving_pct": 20.0, "max_saving_pct": 30.0, "min_saving_pct": 10.0,
        "mean_slowdown_pct": 3.0, "mean_regret_pct": 1.0, "job_saving_pct": 20.0, "job_slowdown_pct": 3.0,
        "job_regret_pct": 1.0, "probe_share_pct": 0.0, "n_workloads": 3}
    # no FFG among the rows: no gap closed; the regret's interval over the 3 workloads (regrets 3, 0, 0; no
    # model column, so each is its own group): every resample's mean lies in [0, 3] and the point, 1, inside
    assert "gap_closed_pct" not in d["p"] and d["p"]["n_groups"] == 3
    lo, hi = d["p"]["job_regret_pct_ci"]
    assert 0.0 <= lo <= 1.0 <= hi <= 3.0
    # the probing one: whole-job means over its two decided workloads, (9 + 7) / 2 = 8 and so on
    assert d["q"]["profiling_steps"] == 26.0 and d["q"]["probe_units"] == 26.0
    assert [d["q"][k] for k in ("job_saving_pct", "job_slowdown_pct", "job_regret_pct", "probe_share_pct")] == \
        [8.0, 1.0, 5.0, 2.0]
    assert E.difference_pts(E.summarize(per), "p", "q") == 20.0
    assert E.difference_pts(E.summarize(per), "p", "nope") is None
    by = E.summarize(per, by=["size_group"]).set_index(["policy", "size_group"])
    assert by.loc[("p", "> 70M"), "mean_saving_pct"] == 25.0 and by.loc[("p", "> 70M"), "n_workloads"] == 2
    assert by.loc[("p", "<= 70M"), "mean_saving_pct"] == 10.0


def test_summary_keys(setup):
    _, _, _, per = setup
    d = E.summary_dict(E.summarize(per))
    assert set(d) == {"maxn", "ffg", "mlg-paper", "mlg", "oracle"}
    assert set(d["mlg"]) == set(E.SUMMARY_KEYS) | {"n_workloads"} | set(E.CI_KEYS)  # FFG among them: every key


class _Refuses(G.Governor):
    name = "refuses"

    def decide(self, workload, probe=None):
        raise G.GovernorError("no features")


def test_levels_off_the_table_snap_and_failures_are_recorded(setup):
    sweep, table, _, _ = setup
    per = E.replay({"at-1000": G.FixedGovernor(1000.0).fit(), "refuses": _Refuses()}, sweep, table,
                   sweep.workload_ids("evaluation"))
    snap = per[per["policy"] == "at-1000"]
    assert (snap["level"] == 1020.0).all() and snap["snapped"].all() and (snap["decided_level"] == 1000.0).all()
    bad = per[per["policy"] == "refuses"]
    assert bad["saving_pct"].isna().all() and (bad["error"] == "no features").all()
    summary = E.summarize(per).set_index("policy")
    assert summary.loc["refuses", "n_failed"] == len(bad) and summary.loc["refuses", "n_workloads"] == 0
    assert E.summary_dict(E.summarize(per))["refuses"]["mean_saving_pct"] is None


class LowestGovernor(LevelGovernor):
    """A new governor: the lowest level of the training data's table, for every workload."""

    name = "lowest"
    tags = GovernorTags(needs_training=False)

    def __init__(self, objective: G.Objective = G.LEAST_ENERGY):
        self.objective = objective

    def _fit(self, data):
        self.level_ = min(self._require(data).level_table)

    def level_for(self, workload):
        return self.level_


def test_a_new_governor_is_a_class_and_one_registry_line(setup, monkeypatch):
    sweep, table, _, _ = setup
    monkeypatch.setattr(R, "GOVERNORS", (*R.GOVERNORS, "test_evaluate:LowestGovernor"))
    R.registry.cache_clear()
    try:
        assert "lowest" in R.names()
        per = E.replay(R.build(["lowest", "maxn"], TrainingData(sweep, table, [])), sweep, table)
        assert (per.loc[per["policy"] == "lowest", "level"] == 306.0).all()
    finally:
        monkeypatch.undo()
        R.registry.cache_clear()
    assert "lowest" not in R.names()


def test_fmax_dataset_baseline_is_the_top_level(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", baseline="fmax", models=["bert-tiny", "bert-base"]))
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    per = E.replay({"maxn": G.MaxnGovernor(), "top": G.FixedGovernor(1300.5).fit()}, sweep, table)
    assert (per["saving_pct"] == 0).all() and (per["slowdown_pct"] == 0).all()
    # no MAXN runs here: the baseline row is the highest clock, and named so
    assert set(per["policy"]) == {"max-clock", "top"} and sweep.baseline_name == "max-clock"


def test_the_baseline_row_is_maxn_only_where_the_dataset_ran_maxn(tmp_path):
    ds = load_dataset(make_dataset(tmp_path / "ds", baseline="maxn", models=["bert-tiny"]))
    sweep = F.sweep_from_dataset(ds)
    per = E.replay({"maxn": G.MaxnGovernor()}, sweep, F.feature_table(sweep))
    assert set(per["policy"]) == {"maxn"}


def test_paper_comparison_table(setup):
    _, _, _, per = setup
    summary = {"governors": E.summary_dict(E.summarize(per)), "characterization": {"optimal_level_range": {"min": 612, "max": 1020}},
               "model_selection": {"loocv_accuracy": 0.5, "grouped_accuracy": None}}
    table = E.paper_comparison(summary, E.summarize(per, by=["size_group"])).set_index("figure")
    assert table.loc["energy-optimal level range (MHz)", "dvfslab"] == "612–1020"
    assert table.loc["leave-one-model-out accuracy", "dvfslab"] == "n/a"
    mlg = summary["governors"]["mlg"]["mean_saving_pct"]
    assert table.loc["MLG mean saving vs baseline (%)", "dvfslab"] == f"{mlg:.2f}"
    assert not math.isnan(float(table.loc["MLG mean saving, models > 70M (%)", "dvfslab"]))
    assert np.all(table["paper"].str.len() > 0)
