"""The recommended governor (FFG unless a learned one beats it beyond the CV noise) and the
profiled governor's probe and its charge. Datasets: tests/analysis_fixtures.py, hand-written."""

from __future__ import annotations

import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_signal_dataset, signal_frames

from dvfslab import analysis as F
from dvfslab.analysis import TrainingData
from dvfslab.analysis.steps import StepSource
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.evaluation import probes as P
from dvfslab.evaluation import replay as E
from dvfslab.evaluation import selection as S
from dvfslab.evaluation.govcv import cv_replay
from dvfslab.evaluation.recommend import compare, default_candidates, nested_recommended, recommend
from dvfslab.governors import registry as R
from dvfslab.governors.base import ProbeStep
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.profiled import ProfiledGovernor, probe_features

NAMES = ["ffg", "mlg", "curve", "profiled"]
MLG = {"estimator": S.candidate_models(True, 0)["tree(depth=2,leaf=1,gini)"],
       "features": ["n_layers", "avg_seq_len", "gpu_util_pct"]}


def _setup(root, signal):
    sweep = F.sweep_from_dataset(load_dataset(make_signal_dataset(root, signal)))
    table = F.feature_table(sweep)
    return sweep, table, list(table["workload_id"])


def _cv(sweep, table, ids):
    return cv_replay(R.make_all(NAMES, {"mlg": MLG}), TrainingData(sweep, table, ids), schemes=["lomo"])


def test_the_candidates_come_from_the_registry():
    # every governor but FFG and the yardsticks (the baseline, the oracle): learned, the paper's
    # tree and the probing ones, in registry order
    cands = default_candidates()
    assert cands == [n for n in R.names() if n not in ("ffg", "maxn", "oracle")] == R.recommendable_names()
    assert {"mlg-paper", "mlg", "curve", "online", "profiled", "search"} <= set(cands)


@pytest.fixture(scope="module")
def no_signal(tmp_path_factory):
    return _setup(tmp_path_factory.mktemp("nosig") / "ds", False)


@pytest.fixture(scope="module")
def with_signal(tmp_path_factory):
    return _setup(tmp_path_factory.mktemp("sig") / "ds", True)


def test_no_signal_falls_back_to_ffg(no_signal):
    # every fold holds out one model = one "low" and one "high" workload; whatever single level a
    # governor picks (all see identical features), one of the two costs (84 - 70) / 100 = 14 %:
    # mean regret 7 % for FFG and for every learned governor, difference 0 on every fold
    rec = recommend(_cv(*no_signal))
    assert rec.policy == "ffg"
    assert rec.ffg_cv_regret_pct == pytest.approx(7.0)
    assert rec.cv_regret_pct == pytest.approx(7.0)
    assert rec.n_folds == 6 and "no other governor beats ffg" in rec.reason
    assert not rec.table["beats_ffg"].any()
    d = rec.as_dict()
    assert set(d) >= {"policy", "cv_regret_pct", "ffg_cv_regret_pct", "reason"}
    assert d["candidates"]["mlg"]["diff_pts"] == pytest.approx(0.0)


def test_signal_picks_a_learned_governor(with_signal):
    # holding out a "low" model leaves 2 low + 3 high models: FFG picks 1020 MHz
    # (mean E/E_b: 408 -> (4*0.70 + 6*0.84)/10 = 0.784, 1020 -> (4*0.84 + 6*0.70)/10 = 0.756) and
    # pays 14 % on the held-out model; symmetric for a "high" one: FFG's CV regret is 14 %.
    # n_layers (4 vs 24) names the optimum: the tree and the curve model find it (0 %).
    rec = recommend(_cv(*with_signal))
    assert rec.policy in ("mlg", "curve")
    assert rec.cv_regret_pct == pytest.approx(0.0, abs=1e-9)
    assert rec.ffg_cv_regret_pct == pytest.approx(14.0)
    row = rec.table.set_index("policy").loc[rec.policy]
    assert row["diff_pts"] == pytest.approx(-14.0) and row["beats_ffg"]
    # the probe (identical for every workload here) carries no signal: profiled does not beat FFG
    assert not rec.table.set_index("policy").loc["profiled", "beats_ffg"]


def test_the_noise_is_the_standard_error_of_the_per_fold_difference():
    # folds a, b, c: candidate minus FFG = -1, -3, -2 points -> mean -2, sd 1, se 1 / sqrt(3) = 0.577
    rows = []
    for fold, (ffg, cand) in {"a": (5.0, 4.0), "b": (6.0, 3.0), "c": (4.0, 2.0)}.items():
        rows += [{"scheme": "lomo", "held_out": fold, "policy": "ffg", "job_regret_pct": ffg},
                 {"scheme": "lomo", "held_out": fold, "policy": "curve", "job_regret_pct": cand}]
    t = compare(pd.DataFrame(rows), ["curve"]).set_index("policy").loc["curve"]
    assert t["diff_pts"] == pytest.approx(-2.0)
    assert t["noise_pts"] == pytest.approx(3 ** -0.5)
    assert t["beats_ffg"]
    # a candidate that failed on a workload is never recommended
    rows.append({"scheme": "lomo", "held_out": "c", "policy": "curve", "job_regret_pct": float("nan")})
    assert recommend(pd.DataFrame(rows), ["curve"]).policy == "ffg"


def test_nested_recommendation_never_sees_the_held_out_model(with_signal):
    sweep, table, ids = with_signal
    per = nested_recommended(R.make_all(["ffg", "mlg", "curve"], {"mlg": MLG}), TrainingData(sweep, table, ids),
                             ["mlg", "curve"])
    assert len(per) == 12 and per["held_out"].nunique() == 6
    assert set(per["chosen"]) <= {"mlg", "curve"}  # with 5 models inside every fold, a learned one wins
    assert per["regret_pct"].max() == pytest.approx(0.0, abs=1e-9)


# --------------------------------------------------------------------------------------------
# The profiled governor: probe features and the charge of its probing, by hand
# --------------------------------------------------------------------------------------------


def _always_1020() -> ProfiledGovernor:
    """A curve model on one probe feature with zero slopes whose least energy is 1020 MHz."""
    gov = ProfiledGovernor(probe_steps=5, warmup_steps=1)
    gov.knob_, gov.curve_ = "gpu_freq_mhz", {
        "features": ["probe_power_w"], "transforms": {"probe_power_w": "log"}, "impute": {"probe_power_w": 10.0},
        "mean": [0.0], "scale": [1.0], "levels": [408.0, 1020.0],
        "energy": {"intercept": [-0.1, -0.3], "coef": [[0.0, 0.0]]}, "time": {"intercept": [0.5, 0.2], "coef": [[0.0, 0.0]]}}
    return gov


def test_probe_features_by_hand():
    # warm-up (2.5 J, 0.3 s) charged, not measured; then 2 J in 0.1 s and 1 J in 0.1 s
    f = probe_features([(2.5, 0.3), (2.0, 0.1), (1.0, 0.1)], warmup_steps=1, gpu_util_pct=55.0)
    assert f == {"probe_step_time_s": pytest.approx(0.1), "probe_power_w": pytest.approx(15.0), "gpu_util_pct": 55.0}
    with pytest.raises(GovernorError, match="no probing step"):
        probe_features([(2.5, 0.3)], warmup_steps=1)


def test_profiled_replay_charges_its_probe_by_hand(tmp_path):
    meta, wl, runs = signal_frames(signal=True)
    # recorded steps of m1/t0 (a "low" workload: 84 J, 12 s at 1020 MHz; optimum 70 J at 408):
    # its MAXN run (s0004) and its 1020 MHz run (s0003); step 0 is the warm-up
    ids = runs.set_index(["workload_id", "policy", "gpu_freq_mhz"])["run_id"]
    maxn, lvl = runs[(runs.workload_id == "m1/t0") & (runs.policy == "maxn")]["run_id"].iloc[0], ids[("m1/t0", "fixed", 1020.0)]
    steps = [(maxn, i, 0.3 if i == 0 else 0.1, 2.5 if i == 0 else 1.0) for i in range(8)]
    steps += [(lvl, i, 0.3 if i == 0 else 0.12, 2.0 if i == 0 else 0.84) for i in range(8)]
    write_dataset(tmp_path / "ds", meta, wl, runs, pd.DataFrame(steps, columns=["run_id", "step", "time_s", "energy_j"]))
    sweep = F.sweep_from_dataset(load_dataset(tmp_path / "ds"))
    table = F.feature_table(sweep)
    idealised = P.idealised(StepSource.from_sweep(sweep))  # instant, exact probes: the charge by hand
    per = E.replay({"profiled": _always_1020()}, sweep, table, ["m1/t0", "m2/t0"], idealised).set_index("workload_id")
    assert (per["level"] == 1020.0).all() and (per["profiling_steps"] == 6).all()
    # recorded: E = 84 - (2.0 + 5 * 0.84) + (2.5 + 5 * 1.0) = 84 - 6.2 + 7.5 = 85.3 J,
    #           T = 12 - (0.3 + 5 * 0.12) + (0.3 + 5 * 0.1) = 12 - 0.9 + 0.8 = 11.9 s
    assert per.loc["m1/t0", "energy_j"] == pytest.approx(85.3)
    assert per.loc["m1/t0", "time_s"] == pytest.approx(11.9)
    assert per.loc["m1/t0", "regret_pct"] == pytest.approx(15.3)  # (85.3 - 70) / 100
    # no steps recorded for m2/t0: mean steps of 100-step runs, 6 x (100/100 - 84/100) J extra
    assert per.loc["m2/t0", "energy_j"] == pytest.approx(84.0 - 6 * 0.84 + 6 * 1.0)
    assert per.loc["m2/t0", "time_s"] == pytest.approx(12.0 - 6 * 0.12 + 6 * 0.1)


def test_profiled_governor_saves_loads_and_decides_from_its_probe(tmp_path):
    save_governor(_always_1020(), tmp_path / "profiled.json")
    back = load_governor(tmp_path / "profiled.json", policy="profiled")
    assert back.profiling_steps == 6 and back.own_levels() == [408.0, 1020.0]
    session = back.start({"gpu_util_pct": 60.0}, [])
    for t, e in [(0.3, 2.5)] + [(0.1, 1.0)] * 5:
        assert session.next_level() is None  # every probing step runs at the default clock
        session.observe(ProbeStep(None, t, e))
    assert session.decision().level == 1020.0 == session.next_level()
    partial = back.start({}, [])
    partial.observe(ProbeStep(None, 0.1, 1.0))
    with pytest.raises(GovernorError, match="1 of 6 probing steps"):
        partial.decision()
    (tmp_path / "bad.json").write_text('{"format": "dvfslab-curve", "version": 1}')
    with pytest.raises(GovernorError, match="bad.json: a dvfslab-curve file of an older dvfslab"):
        load_governor(tmp_path / "bad.json")


def test_profiled_fitted_in_the_registry_on_the_bundled_table_levels(with_signal):
    sweep, table, ids = with_signal
    gov = R.build(["profiled"], TrainingData(sweep, table, ids))["profiled"]
    # every workload's probe is the same here (0.1 s and 10 W a step, 60 % utilization: the fixture's
    # MAXN runs): nothing to learn from, so the model is the mean curve (FFG's level), and says why
    assert gov.model.features == [] and gov.curve_["info"]["cannot_learn"] == (
        "no feature varies over the 12 training workloads (probe_step_time_s is 0.1 in every training workload; "
        "probe_power_w is 10 in every training workload; gpu_util_pct is 60 in every training workload)")
    assert gov.own_levels() == [f for f in ORIN_FREQS_MHZ if f in (408.0, 612.0, 816.0, 1020.0)]


def test_the_pipeline_prints_the_recommendation_and_why():
    from dvfslab.pipeline.summary import recommendation_line

    assert recommendation_line({}) is None
    line = recommendation_line({"recommended": {"policy": "ffg", "cv_regret_pct": 7.0, "ffg_cv_regret_pct": 7.0,
                                                "reason": "no learned governor beats ffg"}})
    assert line == "recommended governor: ffg (leave-one-model-out CV regret 7.00 %, FFG 7.00 %): no learned governor beats ffg"
    line = recommendation_line({"recommended": {"policy": "zeus-sim", "cv_regret_pct": 0.5, "ffg_cv_regret_pct": 5.25,
                                                "grouping": "leave-one-block-out", "metric": "job_regret_pct",
                                                "reason": "zeus-sim beats ffg"}})
    assert line == ("recommended governor: zeus-sim (leave-one-block-out CV whole-job regret 0.50 %, FFG 5.25 %): "
                    "zeus-sim beats ffg")


def test_the_pipeline_prints_whole_job_figures_when_the_run_has_them():
    from dvfslab.pipeline.summary import governor_lines

    per_run = {"governors": {"ffg": {"mean_saving_pct": 20.0, "mean_slowdown_pct": 50.0, "mean_regret_pct": 1.0},
                             "online": {"mean_saving_pct": 18.5, "mean_slowdown_pct": 60.25, "mean_regret_pct": 2.5,
                                        "profiling_steps": 26.0}}}
    assert governor_lines(per_run, ["maxn", "ffg", "online"]) == [
        "governors per run, mean over the evaluated workloads:",
        "        ffg: saving  20.00 %  slowdown  50.00 %  regret   1.00 %",
        "     online: saving  18.50 %  slowdown  60.25 %  regret   2.50 %  (26 profiling steps)"]
    job = {"governors": {"ffg": {**per_run["governors"]["ffg"], "job_saving_pct": 21.0, "job_slowdown_pct": 49.0,
                                 "job_regret_pct": 0.75, "probe_share_pct": 0.0},
                         "zeus-sim": {"mean_saving_pct": 19.0, "mean_slowdown_pct": 70.0, "mean_regret_pct": 2.0,
                                      "job_saving_pct": 22.5, "job_slowdown_pct": 61.0, "job_regret_pct": 0.25,
                                      "probe_share_pct": 0.125}}}
    assert governor_lines(job, ["ffg", "zeus-sim"]) == [
        "governors over whole jobs (probing charged), mean over the evaluated workloads:",
        "        ffg: saving  21.00 %  slowdown  49.00 %  regret   0.75 %",
        "   zeus-sim: saving  22.50 %  slowdown  61.00 %  regret   0.25 %  (probing 0.12 % of the job)"]
    assert governor_lines({}, ["ffg"]) == []
