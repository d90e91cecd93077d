"""Beyond the paper: curve governor, slowdown limits, online governor — on data with known answers.

The datasets here are closed-form toys (labelled simulated), never the bundled data:

* curve: ``ln(E / E_b) = C (ln f - mu(w))^2`` with ``mu`` linear in ``ln n_layers``, and
  ``T / T_b = 0.3 + 0.7 f_max / f`` — the per-level regression can represent the level
  dependence exactly, so the predicted optimum is the true one;
* online: per-step time ``w_i (a + b / f)`` and power ``p0 + p1 f + p2 f^2`` — the online
  fit's model family — so the fitted U-curve's minimum is the true one, and the probing cost
  can be computed by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, _run

from dvfslab import analysis as F
from dvfslab import governors as G
from dvfslab.analysis import TrainingData
from dvfslab.analysis.steps import StepSource
from dvfslab.core.errors import SweepError
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.evaluation import probes as P
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.limits import constrain, constraint_report
from dvfslab.governors.base import ProbeStep, without_answers
from dvfslab.governors.curvefit import export_curve, fit_curve_model, fit_curve_pipelines
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.online import OnlineGovernor, neighbours, spread_levels

CURV = 0.8
FMAX = ORIN_FREQS_MHZ[-1]
LAYERS = [2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32]


def mu(layers: float) -> float:
    """ln of the true optimum (continuous): 400 MHz at 2 layers, ~1000 MHz at 32."""
    return math.log(400.0) + 0.33 * math.log(layers / 2.0)


def e_rel(f: float, layers: float) -> float:
    return math.exp(CURV * (math.log(f) - mu(layers)) ** 2)


def t_rel(f: float) -> float:
    return 0.3 + 0.7 * FMAX / f


def true_best(layers: float, limit_pct: float | None = None) -> float | None:
    ok = [f for f in ORIN_FREQS_MHZ if limit_pct is None or t_rel(f) <= 1 + limit_pct / 100]
    return min(ok, key=lambda f: e_rel(f, layers)) if ok else None


@pytest.fixture(scope="module")
def curve_sweep(tmp_path_factory):
    wl, runs = [], []
    for layers in LAYERS:
        for task, split in (("a", "characterization"), ("b", "evaluation")):
            wid = f"toy-{layers}/{task}"
            wl.append({"workload_id": wid, "model": f"toy-{layers}", "model_family": "toy", "model_type": "encoder",
                       "params_m": 10.0, "n_layers": layers, "hidden_size": 512, "task": task, "avg_seq_len": 40.0,
                       "max_seq_len": 128, "batch_size": 16, "split": split})
            e_b, t_b = 1000.0 * layers, 100.0 + layers
            for f in ORIN_FREQS_MHZ:
                runs.append(_run(wid, "fixed", f, 0, t_b * t_rel(f), e_b * e_rel(f, layers), 60.0, f))
            runs.append(_run(wid, "maxn", None, 0, t_b, e_b, 60.0, FMAX))
    runs = pd.DataFrame(runs)
    runs.insert(0, "run_id", [f"r{i:05d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_beyond.py (closed form)", "seed": 0}
    ds = write_dataset(tmp_path_factory.mktemp("curve") / "ds", meta, pd.DataFrame(wl), runs)
    sweep = F.sweep_from_dataset(load_dataset(ds.path))
    table = F.feature_table(sweep)
    return sweep, table, list(table.loc[table["split"] == "characterization", "workload_id"])


def curve_gov(model):
    """A curve governor holding a fitted model."""
    gov = G.CurveGovernor()
    gov.curve_, gov.knob_ = model.spec, "gpu_freq_mhz"
    return gov


def test_curve_model_finds_the_true_optimum_of_unseen_workloads(curve_sweep):
    sweep, table, train = curve_sweep
    model = fit_curve_model(sweep, table, train, alpha=1e-6)
    assert model.features == list(F.FEATURES)  # constant ones kept, harmless (unit scale, zero slope)
    gov = curve_gov(model)
    per = E.replay({"curve": gov}, sweep, table, sweep.workload_ids("evaluation"))
    for row in per.itertuples():
        layers = float(table.set_index("workload_id").loc[row.workload_id, "n_layers"])
        assert row.level == true_best(layers), row.workload_id
    assert per["regret_pct"].abs().max() < 1e-9
    assert len(set(per["level"])) >= 4  # the optimum really moves with the workload
    pred = model.predict({"n_layers": 12, "hidden_size": 512, "avg_seq_len": 40, "params_m": 10, "is_decoder": 0,
                          "gpu_util_pct": 60})
    np.testing.assert_allclose(pred["time_rel"], [t_rel(f) for f in ORIN_FREQS_MHZ], rtol=1e-5)  # CSV keeps ~7 digits


def test_curve_beats_one_fixed_level_when_the_optimum_moves(curve_sweep):
    sweep, table, train = curve_sweep
    govs = G.build(["ffg", "curve", "oracle"], TrainingData(sweep, table, train))
    per = E.replay(govs, sweep, table, sweep.workload_ids("evaluation"))
    regret = per.groupby("policy")["regret_pct"].mean()
    assert regret["curve"] < regret["ffg"] and regret["oracle"] == 0.0


def test_curve_model_saves_and_loads_as_json(curve_sweep, tmp_path):
    sweep, table, train = curve_sweep
    gov = G.CurveGovernor().fit(TrainingData(sweep, table, train))
    save_governor(gov, tmp_path / "curve.json")
    back = load_governor(tmp_path / "curve.json", policy="curve")
    for w in map(without_answers, table.to_dict("records")):
        assert back.predict_curves(w) == gov.predict_curves(w)
        assert back.decide(w) == gov.decide(w)
    w = {"n_layers": 8}  # every other feature missing: the training medians fill in
    assert back.decide(w) == gov.decide({**w, **gov.curve_["impute"], "n_layers": 8})
    spec = json.loads((tmp_path / "curve.json").read_text())
    spec["state"]["curve"]["mean"] = []
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    with pytest.raises(G.GovernorError, match=r"bad\.json: curve model: mean must have one value per feature"):
        load_governor(tmp_path / "bad.json")


def test_json_predictor_equals_the_sklearn_pipeline_on_held_out_rows(curve_sweep):
    sweep, table, train = curve_sweep
    fit = fit_curve_pipelines(sweep, table, train, alpha=0.5)
    model = G.CurveModel(export_curve(fit))
    held = table[table["split"] == "evaluation"].to_dict("records")
    held.append({"n_layers": 7.0, "gpu_util_pct": float("nan")})  # missing features: the medians fill in
    x = fit.design(held)
    for part, key in (("energy", "energy_rel"), ("time", "time_rel")):
        want = np.exp(fit.pipelines[part].predict(x))  # sklearn's path: impute, log, scale, ridge
        got = np.array([model.predict(w)[key] for w in held])  # the board's path: JSON and math
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_curve_prediction_by_hand_for_a_one_feature_toy(tmp_path):
    """Two workloads, 2 and 8 layers; at 612 MHz ln(E/E_b) = -0.1 and -0.3, at 714 MHz 0.

    log layers: ln 2, ln 8 -> mean ln 4, (population) scale ln 2 -> standardized -1, +1.
    Ridge (alpha 2, unpenalized intercept) at 612 MHz: intercept = mean y = -0.2,
    slope = sum(x (y - mean)) / (sum x^2 + alpha) = (-0.1 - 0.1) / (2 + 2) = -0.05.
    16 layers: x = (ln 16 - ln 4) / ln 2 = 2 -> ln(E/E_b) = -0.2 - 0.1 = -0.3.
    """
    wl, runs = [], []
    for layers, y612 in ((2, -0.1), (8, -0.3)):
        wid = f"toy-{layers}/a"
        wl.append({"workload_id": wid, "model": f"toy-{layers}", "model_family": "toy", "model_type": "encoder",
                   "params_m": 10.0, "n_layers": layers, "hidden_size": 512, "task": "a", "avg_seq_len": 40.0,
                   "max_seq_len": 128, "batch_size": 16, "split": "characterization"})
        runs += [_run(wid, "fixed", 612.0, 0, 120.0, 1000.0 * math.exp(y612), 60.0, 612.0),
                 _run(wid, "fixed", 714.0, 0, 110.0, 1000.0, 60.0, 714.0),
                 _run(wid, "maxn", None, 0, 100.0, 1000.0, 60.0, FMAX)]
    runs = pd.DataFrame(runs)
    runs.insert(0, "run_id", [f"r{i}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_beyond.py (hand computed)", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(tmp_path / "ds", meta, pd.DataFrame(wl), runs))
    model = fit_curve_model(sweep, F.feature_table(sweep), ["toy-2/a", "toy-8/a"], alpha=2.0,
                            candidates={"n_layers": "log"})
    assert model.spec["mean"] == pytest.approx([math.log(4)]) and model.spec["scale"] == pytest.approx([math.log(2)])
    for layers, ln_e in ((16, -0.3), (4, -0.2), (2, -0.15)):
        pred = model.predict({"n_layers": layers})
        assert pred["level"] == [612.0, 714.0]
        assert pred["energy_rel"] == pytest.approx([math.exp(ln_e), 1.0], rel=1e-6)
        assert pred["time_rel"] == pytest.approx([1.2, 1.1], rel=1e-6)
    assert curve_gov(model).decide({"n_layers": 16}).level == 612.0


@pytest.mark.parametrize("limit", [0.0, 20.0, 60.0, 150.0])
def test_every_governor_meets_a_slowdown_limit_when_its_time_model_is_right(curve_sweep, limit):
    sweep, table, train = curve_sweep
    govs = G.build(["maxn", "ffg", "curve", "oracle"], TrainingData(sweep, table, train))
    time_model = fit_curve_model(sweep, table, train, alpha=1e-6)
    limited = constrain(govs, G.Objective(limit, time_model=time_model))
    test = sweep.workload_ids("evaluation")
    per_c = E.replay(limited, sweep, table, test)
    per_u = E.replay(govs, sweep, table, test)
    report = constraint_report(per_c, per_u, sweep, limit).set_index("policy")
    assert (report["held_pct"] == 100.0).all(), report
    assert (per_c["slowdown_pct"] <= limit + 1e-9).all()
    # oracle and curve pick the least-energy level meeting the limit: zero constrained regret
    assert report.loc["oracle", "mean_regret_pct"] == pytest.approx(0.0, abs=1e-9)
    assert report.loc["curve", "mean_regret_pct"] == pytest.approx(0.0, abs=1e-9)
    for row in per_c[per_c["policy"] == "curve"].itertuples():
        layers = float(table.set_index("workload_id").loc[row.workload_id, "n_layers"])
        want = true_best(layers, limit)
        assert (row.level == want) if want is not None else math.isnan(row.level)
    assert (report["cost_pts"] >= -1e-9).all()  # a limit never makes a governor save more
    if limit >= t_rel(ORIN_FREQS_MHZ[0]) * 100:
        assert report["cost_pts"].abs().max() < 1e-9  # a limit nothing violates costs nothing


class _SlowEverywhere:
    """A time model that predicts every level twice as slow as the baseline."""

    def predict(self, workload):
        return {"level": list(ORIN_FREQS_MHZ), "energy_rel": [1.0] * 11, "time_rel": [2.0] * 11}


def _fixed(level, objective=G.LEAST_ENERGY):
    return G.FixedGovernor(level, objective=objective).fit()


def test_a_limit_nothing_can_meet_falls_back_to_the_baseline():
    slow = _SlowEverywhere()
    assert _fixed(612.0, G.Objective(50.0, time_model=slow)).decide({}).level is None
    assert _fixed(612.0, G.Objective(100.0, time_model=slow)).decide({}).level == 612.0
    c = slow.predict({})
    assert G.Objective(50.0).select(c["level"], c["energy_rel"], c["time_rel"]) is None
    assert G.LEAST_ENERGY.select(c["level"], c["energy_rel"], c["time_rel"]) == ORIN_FREQS_MHZ[0]  # ties: the lowest
    with pytest.raises(G.GovernorError, match=">= 0"):
        G.Objective(-1.0)
    assert G.MaxnGovernor(objective=G.Objective(0.0)).decide({}).level is None


def test_a_level_only_governor_steps_up_from_a_level_that_is_too_slow(curve_sweep):
    sweep, table, train = curve_sweep
    model = fit_curve_model(sweep, table, train, alpha=1e-6)
    row = without_answers(table.iloc[0].to_dict())  # what a governor is given
    limit = 100.0 * (t_rel(612.0) - 1.0) + 1e-6  # 612 MHz is the lowest level within the limit
    objective = G.Objective(limit, time_model=model)
    assert _fixed(306.0, objective).decide(row).level == 612.0
    assert _fixed(816.0, objective).decide(row).level == 816.0  # fast enough: kept
    oracle = G.OracleGovernor(objective=objective).fit(TrainingData(sweep, table, train))
    assert oracle.decide(row).level >= 612.0
    with pytest.raises(G.GovernorError, match="needs a time model"):
        _fixed(306.0, G.Objective(10.0)).decide(row)


def test_cv_replay_holds_out_each_workload_once_per_scheme(curve_sweep):
    from dvfslab.evaluation.govcv import cv_replay

    sweep, table, train = curve_sweep
    protos = G.registry.make_all(["ffg", "curve", "oracle"], {"curve": {"alpha": 1e-6}})
    cv = cv_replay(protos, TrainingData(sweep, table, train))
    for (scheme, policy), g in cv.groupby(["scheme", "policy"]):
        assert sorted(g["workload_id"]) == sorted(train), (scheme, policy)
    assert set(cv["scheme"]) == {"loocv", "lomo"}
    assert (cv.loc[cv["policy"] == "oracle", "regret_pct"] == 0).all()
    # held-out workloads inside the training range of layers: the curve model still finds their optimum
    inner = cv[(cv["policy"] == "curve") & ~cv["workload_id"].isin([f"toy-{LAYERS[0]}/a", f"toy-{LAYERS[-1]}/a"])]
    assert inner["regret_pct"].max() < 1e-9
    lomo = cv[cv["scheme"] == "lomo"]
    assert (lomo["held_out"] == lomo["workload_id"].str.split("/").str[0]).all()


def test_pareto_front():
    from dvfslab.evaluation.govcv import pareto_points

    s = pd.DataFrame({"policy": ["a", "b", "c", "d"], "mean_saving_pct": [0.0, 20.0, 10.0, 25.0],
                      "mean_slowdown_pct": [0.0, 50.0, 60.0, 90.0]})
    pts = pareto_points(s).set_index("policy")
    assert pts["pareto"].to_dict() == {"a": True, "b": True, "c": False, "d": True}  # c: slower and costlier than b
    assert pts.loc["b", "energy_rel"] == pytest.approx(0.8) and pts.loc["b", "time_rel"] == pytest.approx(1.5)


# --------------------------------------------------------------------------------------------
# Online
# --------------------------------------------------------------------------------------------

P0, P1, P2 = 4.0, 0.004, 6e-6  # power (W) = P0 + P1 f + P2 f^2
A_S, B_S = 0.05, 120.0  # time per step (s) = w_i (A + B / f)


def step_te(f: float, w: float = 1.0) -> tuple[float, float]:
    t = w * (A_S + B_S / f)
    return t, (P0 + P1 * f + P2 * f * f) * t


def test_spread_and_neighbours():
    assert spread_levels(ORIN_FREQS_MHZ, 5) == [306.0, 510.0, 816.0, 1122.0, 1300.5]
    assert neighbours(ORIN_FREQS_MHZ, 306.0, 3) == [306.0, 408.0, 510.0]
    assert neighbours(ORIN_FREQS_MHZ, 1300.5, 3) == [1122.0, 1224.0, 1300.5]
    assert neighbours(ORIN_FREQS_MHZ, 700.0, 3) == [612.0, 714.0, 816.0]


def _probe_by_hand(session, factors=None):
    """Feed a session exact steps (``factors``: the work of each step, default 1); the levels it ran."""
    seen = []
    while not session.done:
        f = session.next_level()
        t, e = step_te(f, 1.0 if factors is None else factors[len(seen)])
        seen.append(f)
        session.observe(ProbeStep(f, t, e))
    return seen


def test_online_finds_the_minimum_of_an_exact_u_curve():
    truth = min(ORIN_FREQS_MHZ, key=lambda f: step_te(f)[1])
    session = OnlineGovernor().start({}, ORIN_FREQS_MHZ)
    assert session.profiling_steps == 1 + 5 * 2 + 3 * 5 <= 30
    with pytest.raises(G.GovernorError, match="chosen during the run"):
        session.decision()
    with pytest.raises(G.GovernorError, match="chosen during the run"):
        OnlineGovernor().decide({})  # no probe: nothing to decide from
    seen = _probe_by_hand(session)
    assert session.chosen_level == truth == session.decision().level == session.next_level()
    assert len(seen) == session.profiling_steps and seen[0] == max(seen)  # warm-up at the fastest level
    assert set(seen[-15:]) == set(neighbours(ORIN_FREQS_MHZ, truth, 3))  # fine phase around the optimum
    assert [s.level for s in session.decision().probed] == seen  # the decision carries what it probed
    # batch-to-batch variation of the work per step (same factor for time and energy) is averaged out
    rng = np.random.default_rng(0)
    session = OnlineGovernor().start({}, ORIN_FREQS_MHZ)
    _probe_by_hand(session, np.exp(rng.normal(0, 0.02, size=session.profiling_steps)))
    assert abs(ORIN_FREQS_MHZ.index(session.chosen_level) - ORIN_FREQS_MHZ.index(truth)) <= 1


def _stepped_dataset(path, factors, n_steps=200):
    """One workload (evaluation split) at every Orin level and a MAXN run at the top level: each
    run's first steps have the work ``factors`` (shared by every level: same data order) and are
    recorded in steps.csv; the run's energy and time add ``n_steps - len(factors)`` unit steps."""
    wl = pd.DataFrame([{"workload_id": "toy/a", "model": "toy", "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "a", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "evaluation"}])
    runs, steps = [], []
    for j, (policy, f) in enumerate([("fixed", f) for f in ORIN_FREQS_MHZ] + [("maxn", FMAX)]):
        rid = f"r{j:03d}"
        te = [step_te(f, w) for w in factors]
        rest_t, rest_e = step_te(f)
        run = _run("toy/a", policy, f if policy == "fixed" else None, 0, sum(t for t, _ in te) + (n_steps - len(te)) * rest_t,
                   sum(e for _, e in te) + (n_steps - len(te)) * rest_e, 50.0, f)
        runs.append({"run_id": rid, **run, "steps": n_steps})
        steps += [{"run_id": rid, "step": i, "time_s": t, "energy_j": e} for i, (t, e) in enumerate(te)]
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_beyond.py", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(path, meta, wl, pd.DataFrame(runs), pd.DataFrame(steps)))
    return sweep, F.feature_table(sweep)


def test_online_replay_charges_its_probing_steps(tmp_path):
    factors = np.exp(np.random.default_rng(1).normal(0, 0.01, size=50))
    sweep, table = _stepped_dataset(tmp_path / "ds", factors)
    gov = OnlineGovernor().fit(TrainingData(sweep, table, []))
    truth = min(ORIN_FREQS_MHZ, key=lambda f: step_te(f)[1])
    # idealised probes (instant, exact: one step per probe, as the hand schedule below)
    row = E.replay({"online": gov}, sweep, table, steps=P.idealised(StepSource.from_sweep(sweep))).iloc[0]
    assert row["level"] == truth and row["error"] == ""
    # the probed schedule on the recorded steps (step i at the level asked for step i)
    session = gov.start({}, ORIN_FREQS_MHZ)
    _probe_by_hand(session, factors)
    n = session.profiling_steps
    assert row["profiling_steps"] == n == 26
    # by hand: the 200-step run at the chosen level, its first n steps replaced by the probed ones
    run_e = sum(step_te(truth, w)[1] for w in factors) + 150 * step_te(truth)[1]
    probe_e = sum(step_te(f, factors[i])[1] for i, f in enumerate(session.schedule))
    same_e = sum(step_te(truth, factors[i])[1] for i in range(n))
    assert row["energy_j"] == pytest.approx(run_e - same_e + probe_e)
    assert row["energy_j"] > run_e  # probing away from the optimum costs energy: visible in the total
    assert row["time_s"] != pytest.approx(sweep.at("toy/a", truth)[1])
    # a workload the dataset has not measured: the replay says so instead of inventing a probe
    source = StepSource.from_sweep(sweep)
    with pytest.raises(SweepError, match="'other/b' has no ok fixed-level runs"):
        gov.decide({"workload_id": "other/b"}, source.probe("other/b"))


def test_online_in_replay_and_summary_reports_profiling_steps(tmp_path):
    sweep, table = _stepped_dataset(tmp_path / "ds", np.ones(40), n_steps=100)
    govs = G.build(["online", "oracle"], TrainingData(sweep, table, ["toy/a"]))
    per = E.replay(govs, sweep, table, steps=P.idealised(StepSource.from_sweep(sweep)))  # one step per probe
    s = E.summary_dict(E.summarize(per))
    assert s["online"]["profiling_steps"] == 26 and "profiling_steps" not in s["oracle"]
    on, orc = per.set_index("policy").loc["online"], per.set_index("policy").loc["oracle"]
    assert on["level"] == orc["level"]  # same level ...
    assert on["regret_pct"] > 0 and on["energy_j"] > orc["energy_j"]  # ... but the probing is paid for


def test_online_live_on_the_simulated_board():
    from dvfslab.evaluation.probing import run_on_board
    from dvfslab.sim.board import SimBoard

    row = {"workload_id": "bert-base/sst2", "model": "bert-base", "n_layers": 12, "hidden_size": 768,
           "params_m": 109.48, "task": "sst2", "avg_seq_len": 13.3, "max_seq_len": 128, "batch_size": 32}
    board = SimBoard(seed=3)
    per_level = {}
    for f in ORIN_FREQS_MHZ:  # the twin's own curve: energy per step at each level
        board.lock(f)
        per_level[f] = board.train(row, 30, run_key=f"curve-{f}").step_energy_j.mean()
    board.unlock()
    out = run_on_board(OnlineGovernor(), board, row, ORIN_FREQS_MHZ, total_steps=60)
    assert out["profiling_steps"] == 26 and board.locked_mhz is None
    best = min(per_level, key=per_level.get)
    ranked = sorted(per_level, key=per_level.get)
    assert out["level"] in ranked[:3], (out["level"], best, per_level)
    assert out["energy_j"] > out["probe_energy_j"] > 0


# --------------------------------------------------------------------------------------------
# Notebook 05 in the pipeline (papermill)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_05_in_the_pipeline_on_a_simulated_sweep(tmp_path):
    """A small twin sweep (5 models, 1 rep, with steps.csv): 05 runs after 01-04 and its
    summary figures agree with the package recomputed here."""
    from dvfslab import cli
    from dvfslab.evaluation.recommend import default_candidates
    from dvfslab.pipeline import runner as PL
    from dvfslab.pipeline.summary import read_summary

    data = tmp_path / "sim"
    assert cli.main(["simulate", "--out", str(data), "--models", "bert-small,pythia-70m,bert-base,pythia-160m,bert-large",
                     "--reps", "1", "--no-progress"]) == 0
    out = PL.run_pipeline(data, tmp_path / "run", quick=True, html=False, progress=False, log=lambda s: None)
    summary = read_summary(out)
    gov = summary["governors"]
    assert {"maxn", "ffg", "mlg", "mlg-paper", "oracle", "curve", "online"} <= set(gov)
    # online probes 26 steps; through the live runner a job that ends while probing counts those it ran
    assert 0 < gov["online"]["profiling_steps"] <= 26 and "profiling_steps" not in gov["curve"]
    for name in ("curve", "online"):
        assert gov[name]["mean_regret_pct"] >= 0 and gov[name]["mean_saving_pct"] <= gov["oracle"]["mean_saving_pct"] + 1e-9
    beyond = summary["beyond"]
    # notebooks 04 and 05 replay every registered governor (the pipeline passes them the registry's
    # list; each is usable on the twin's data), and notebook 04 recommends one
    assert set(beyond["cv"]) == {"loocv", "lomo"} and set(beyond["cv"]["lomo"]) == set(gov) == set(G.registry.names())
    assert gov["profiled"]["profiling_steps"] == 6
    rec = summary["recommended"]
    assert rec["policy"] in {"ffg", *default_candidates()} and rec["ffg_cv_regret_pct"] >= 0 and rec["reason"]
    assert rec["scheme"] == "lomo" and rec["metric"] == "job_regret_pct"
    assert rec["policy"] != "ffg" or rec["cv_regret_pct"] == rec["ffg_cv_regret_pct"]
    assert beyond["limit"]["oracle"]["held_pct"] == 100.0 and beyond["limit"]["maxn"]["held_pct"] == 100.0
    assert all(0 <= v["held_pct"] <= 100 for v in beyond["limit"].values())
    on = beyond["online"]
    assert on["choice_regret_pct"] + on["probing_cost_pct"] == pytest.approx(gov["online"]["mean_regret_pct"])
    assert on["probing_cost_pct"] > 0  # probing is never free
    # the notebook's curve figure is the package's, recomputed from the same dataset
    sweep = F.sweep_from_dataset(load_dataset(data))
    table = F.feature_table(sweep)
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    per = E.replay({"curve": G.CurveGovernor().fit(TrainingData(sweep, table, train))}, sweep, table,
                   sweep.workload_ids("evaluation"))
    assert per["regret_pct"].mean() == pytest.approx(gov["curve"]["mean_regret_pct"], rel=1e-9)
    assert load_governor(out / "models" / "curve.json").decide(without_answers(table.iloc[0].to_dict())).level is not None
    assert load_governor(out / "models" / "ffg.json").level_ == summary["evaluation"]["ffg_level"]
    for fig in PL.FIGURES["05_beyond_the_paper"]:
        assert (out / "figures" / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"


def test_curve_without_any_feature_is_the_mean_training_curve(tmp_path):
    """When no training workload has any feature (e.g. a held-out fold of networks whose size is
    unknown), nothing can be learned: the curve model is the training workloads' mean curve
    (the mean of E / E_baseline per level, FFG's rule), the same for every workload. Hand-written
    sweep (analysis_fixtures.TINY_RUNS), energies / MAXN: sst2 105/122, 92/122, 98/122 and mrpc
    48/80, 50/80, 54/80 at 510, 612, 714 MHz; the means are (0.86066 + 0.6) / 2 = 0.73033,
    (0.75410 + 0.625) / 2 = 0.68955, (0.80328 + 0.675) / 2 = 0.73914, so the least is 612 MHz,
    FFG's level."""
    from analysis_fixtures import make_tiny_dataset

    sweep = F.sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path / "ds")))
    no_features = pd.DataFrame({"workload_id": ["tiny-enc/sst2", "tiny-enc/mrpc", "big-dec/qnli"]})
    save_governor(curve_gov(fit_curve_model(sweep, no_features, ["tiny-enc/sst2", "tiny-enc/mrpc"])),
                  tmp_path / "curve.json")
    loaded = load_governor(tmp_path / "curve.json")
    curves = loaded.predict_curves({"workload_id": "big-dec/qnli"})
    assert curves["level"] == [510.0, 612.0, 714.0] and loaded.curve_["features"] == []
    assert curves["energy_rel"] == pytest.approx([0.73033, 0.68955, 0.73914], abs=5e-5)
    assert loaded.decide({"workload_id": "anything"}).level == 612.0
    assert loaded.curve_["info"]["fallback"] == "ffg"
    assert loaded.curve_["info"]["cannot_learn"].startswith("no feature varies over the 2 training workloads "
                                                            "(is_decoder is not in the feature table; ")


def test_curve_on_one_training_workload_is_its_curve(tmp_path):
    """One training workload (tiny-enc/sst2): nothing to generalize from; the model is its curve,
    105/122, 92/122, 98/122 = 0.86066, 0.75410, 0.80328 at 510, 612, 714 MHz, least at 612."""
    from analysis_fixtures import make_tiny_dataset

    sweep = F.sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path / "ds")))
    table = F.feature_table(sweep)
    gov = G.CurveGovernor().fit(TrainingData(sweep, table, ["tiny-enc/sst2"]))
    curves = gov.predict_curves(table.set_index("workload_id").loc["big-dec/qnli"].to_dict())
    assert curves["energy_rel"] == pytest.approx([0.86066, 0.75410, 0.80328], abs=5e-5)
    assert gov.decide({}).level == 612.0 and gov.curve_["features"] == []
    assert gov.curve_["info"]["cannot_learn"] == "one training workload (tiny-enc/sst2): nothing to generalize from"
