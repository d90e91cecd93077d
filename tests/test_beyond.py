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

import math

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, _run

from dvfslab import analysis as F
from dvfslab import governors as G
from dvfslab.analysis import replay as E
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.governors.curve import CurveGovernor, CurveModel, pick_level
from dvfslab.governors.curvefit import export_curve, fit_curve_model, fit_curve_pipelines
from dvfslab.governors.fit import constraint_report
from dvfslab.governors.limits import ConstrainedOracle, SlowdownGuard, constrain
from dvfslab.governors.online import (
    OnlineGovernor,
    OnlineProfiler,
    StepRecords,
    neighbours,
    spread_levels,
)

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


def test_curve_model_finds_the_true_optimum_of_unseen_workloads(curve_sweep):
    sweep, table, train = curve_sweep
    model = fit_curve_model(sweep, table, train, alpha=1e-6)
    assert model.features == list(F.FEATURES)  # constant ones kept, harmless (unit scale, zero slope)
    gov = CurveGovernor(model)
    per = E.replay({"curve": gov}, sweep, table, sweep.workload_ids("evaluation"))
    for row in per.itertuples():
        layers = float(table.set_index("workload_id").loc[row.workload_id, "n_layers"])
        assert row.freq_mhz == true_best(layers), row.workload_id
    assert per["regret_pct"].abs().max() < 1e-9
    assert len(set(per["freq_mhz"])) >= 4  # the optimum really moves with the workload
    pred = model.predict({"n_layers": 12, "hidden_size": 512, "avg_seq_len": 40, "params_m": 10, "is_decoder": 0,
                          "gpu_util_pct": 60})
    np.testing.assert_allclose(pred["time_rel"], [t_rel(f) for f in ORIN_FREQS_MHZ], rtol=1e-5)  # CSV keeps ~7 digits


def test_curve_beats_one_fixed_level_when_the_optimum_moves(curve_sweep):
    sweep, table, train = curve_sweep
    ctx = G.GovernorContext(sweep, table, train)
    per = E.replay(G.build_governors(["ffg", "curve", "oracle"], ctx), sweep, table, sweep.workload_ids("evaluation"))
    regret = per.groupby("policy")["regret_pct"].mean()
    assert regret["curve"] < regret["ffg"] and regret["oracle"] == 0.0


def test_curve_model_saves_and_loads_as_json(curve_sweep, tmp_path):
    sweep, table, train = curve_sweep
    gov = CurveGovernor(fit_curve_model(sweep, table, train))
    gov.save(tmp_path / "curve.json")
    back = CurveGovernor.load(tmp_path / "curve.json")
    for w in table.to_dict("records"):
        assert back.predict_curves(w) == gov.predict_curves(w)
        assert back.decide(w) == gov.decide(w)
    w = {"n_layers": 8}  # every other feature missing: the training medians fill in
    assert back.decide(w) == gov.decide({**w, **gov.model.spec["impute"], "n_layers": 8})
    (tmp_path / "bad.json").write_text('{"format": "dvfslab-tree"}')
    with pytest.raises(G.GovernorError, match=r"bad\.json: not a dvfslab curve model"):
        CurveModel.load(tmp_path / "bad.json")
    with pytest.raises(G.GovernorError, match="missing — run notebook 05"):
        CurveModel.load(tmp_path / "none.json")


def test_json_predictor_equals_the_sklearn_pipeline_on_held_out_rows(curve_sweep):
    sweep, table, train = curve_sweep
    fit = fit_curve_pipelines(sweep, table, train, alpha=0.5)
    model = CurveModel(export_curve(fit))
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
        assert pred["freq_mhz"] == [612.0, 714.0]
        assert pred["energy_rel"] == pytest.approx([math.exp(ln_e), 1.0], rel=1e-6)
        assert pred["time_rel"] == pytest.approx([1.2, 1.1], rel=1e-6)
    assert CurveGovernor(model).decide({"n_layers": 16}) == 612.0


@pytest.mark.parametrize("limit", [0.0, 20.0, 60.0, 150.0])
def test_every_governor_meets_a_slowdown_limit_when_its_time_model_is_right(curve_sweep, limit):
    sweep, table, train = curve_sweep
    ctx = G.GovernorContext(sweep, table, train)
    govs = G.build_governors(["maxn", "ffg", "curve", "oracle"], ctx)
    time_model = fit_curve_model(sweep, table, train, alpha=1e-6)
    limited = {k: constrain(g, limit, time_model=time_model, sweep=sweep) for k, g in govs.items()}
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
        assert (row.freq_mhz == want) if want is not None else math.isnan(row.freq_mhz)
    assert (report["cost_pts"] >= -1e-9).all()  # a limit never makes a governor save more
    if limit >= t_rel(ORIN_FREQS_MHZ[0]) * 100:
        assert report["cost_pts"].abs().max() < 1e-9  # a limit nothing violates costs nothing


class _SlowEverywhere:
    """A time model that predicts every level twice as slow as the baseline."""

    def predict(self, workload):
        return pd.DataFrame({"freq_mhz": ORIN_FREQS_MHZ, "energy_rel": 1.0, "time_rel": 2.0})


def test_a_limit_nothing_can_meet_falls_back_to_the_baseline():
    assert SlowdownGuard(G.FixedGovernor(612.0), 50.0, _SlowEverywhere()).decide({}) is None
    assert SlowdownGuard(G.FixedGovernor(612.0), 100.0, _SlowEverywhere()).decide({}) == 612.0
    assert pick_level(_SlowEverywhere().predict({}), 50.0) is None
    assert pick_level(_SlowEverywhere().predict({}), None) == ORIN_FREQS_MHZ[0]  # ties: the lowest level
    with pytest.raises(G.GovernorError, match=">= 0"):
        constrain(G.MaxnGovernor(), -1.0)
    assert constrain(G.MaxnGovernor(), 0.0).decide({}) is None


def test_slowdown_guard_steps_up_from_a_level_that_is_too_slow(curve_sweep):
    sweep, table, train = curve_sweep
    model = fit_curve_model(sweep, table, train, alpha=1e-6)
    row = table.iloc[0].to_dict()
    limit = 100.0 * (t_rel(612.0) - 1.0) + 1e-6  # 612 MHz is the lowest level within the limit
    assert SlowdownGuard(G.FixedGovernor(306.0), limit, model).decide(row) == 612.0
    assert SlowdownGuard(G.FixedGovernor(816.0), limit, model).decide(row) == 816.0  # fast enough: kept
    oracle = ConstrainedOracle.from_sweep(sweep, limit)
    assert oracle.decide(row) >= 612.0
    with pytest.raises(G.GovernorError, match="needs a time model"):
        constrain(G.FixedGovernor(306.0), 10.0)


def test_cv_replay_holds_out_each_workload_once_per_scheme(curve_sweep):
    from dvfslab.analysis.govcv import cv_replay

    sweep, table, train = curve_sweep
    cv = cv_replay(sweep, table, ["ffg", "curve", "oracle"], train, options={"curve_alpha": 1e-6})
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
    from dvfslab.analysis.govcv import pareto_points

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


def test_profiler_finds_the_minimum_of_an_exact_u_curve():
    truth = min(ORIN_FREQS_MHZ, key=lambda f: step_te(f)[1])
    prof = OnlineProfiler(ORIN_FREQS_MHZ)
    assert prof.profiling_steps == 1 + 5 * 2 + 3 * 5 <= 30
    with pytest.raises(G.GovernorError, match="chosen during the run"):
        prof.decide({})
    rng = np.random.default_rng(0)
    seen = []
    while not prof.done:
        f = prof.next_level()
        seen.append(f)
        t, e = step_te(f)
        prof.observe(f, e, t)
    assert prof.chosen_mhz == truth == prof.decide({}) == prof.next_level()
    assert len(seen) == prof.profiling_steps and seen[0] == max(seen)  # warm-up at the fastest level
    assert set(seen[-15:]) == set(neighbours(ORIN_FREQS_MHZ, truth, 3))  # fine phase around the optimum
    # batch-to-batch variation of the work per step (same factor for time and energy) is averaged out
    prof = OnlineProfiler(ORIN_FREQS_MHZ)
    while not prof.done:
        f = prof.next_level()
        t, e = step_te(f, w=float(np.exp(rng.normal(0, 0.02))))
        prof.observe(f, e, t)
    assert abs(ORIN_FREQS_MHZ.index(prof.chosen_mhz) - ORIN_FREQS_MHZ.index(truth)) <= 1


def _records(workload: str, factors: np.ndarray) -> StepRecords:
    """StepRecords of one workload: every level's run shares the batch factors (same data order)."""
    runs, steps = [], []
    for j, f in enumerate(ORIN_FREQS_MHZ):
        rid = f"r{j:03d}"
        runs.append({"run_id": rid, "workload_id": workload, "policy": "fixed", "gpu_freq_mhz": f, "rep": 0, "status": "ok"})
        for i, w in enumerate(factors):
            t, e = step_te(f, w)
            steps.append({"run_id": rid, "step": i, "time_s": t, "energy_j": e})
    return StepRecords(pd.DataFrame(steps), pd.DataFrame(runs), ORIN_FREQS_MHZ)


def test_online_replay_charges_its_probing_steps():
    factors = np.exp(np.random.default_rng(1).normal(0, 0.01, size=50))
    gov = OnlineGovernor(_records("toy/a", factors), ORIN_FREQS_MHZ)
    chosen = gov.decide({"workload_id": "toy/a"})
    truth = min(ORIN_FREQS_MHZ, key=lambda f: step_te(f)[1])
    assert chosen == truth
    n = gov.profiling_steps
    # a 200-step run at the chosen level, as the sweep would have measured it
    run_e = sum(step_te(chosen, w)[1] for w in factors) + 150 * step_te(chosen)[1]
    run_t = sum(step_te(chosen, w)[0] for w in factors) + 150 * step_te(chosen)[0]
    e, t, steps = gov.charge("toy/a", chosen, run_e, run_t)
    prof = gov.profile("toy/a")
    probe_e = sum(step_te(f, factors[i])[1] for i, f in enumerate(prof.schedule))
    same_e = sum(step_te(chosen, factors[i])[1] for i in range(n))
    assert steps == n and e == pytest.approx(run_e - same_e + probe_e)
    assert e > run_e  # probing away from the optimum costs energy: visible in the total
    assert t != pytest.approx(run_t)
    with pytest.raises(G.GovernorError, match="has no steps of 'other/b'"):
        gov.decide({"workload_id": "other/b"})


def test_online_in_replay_and_summary_reports_profiling_steps(tmp_path):
    factors = np.ones(40)
    records = _records("toy/a", factors)
    wl = pd.DataFrame([{"workload_id": "toy/a", "model": "toy", "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "a", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "evaluation"}])
    runs = [_run("toy/a", "fixed", f, 0, step_te(f)[0] * 100, step_te(f)[1] * 100, 50.0, f) for f in ORIN_FREQS_MHZ]
    runs.append(_run("toy/a", "maxn", None, 0, step_te(FMAX)[0] * 100, step_te(FMAX)[1] * 100, 50.0, FMAX))
    runs = pd.DataFrame(runs)
    runs.insert(0, "run_id", [f"r{i:03d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_beyond.py", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(tmp_path / "ds", meta, wl, runs))
    table = F.feature_table(sweep)
    govs = G.build_governors(["online", "oracle"], G.GovernorContext(sweep, table, ["toy/a"],
                                                                     options={"step_records": records}))
    per = E.replay(govs, sweep, table)
    s = E.summary_dict(E.summarize(per))
    assert s["online"]["profiling_steps"] == 26 and "profiling_steps" not in s["oracle"]
    on, orc = per.set_index("policy").loc["online"], per.set_index("policy").loc["oracle"]
    assert on["freq_mhz"] == orc["freq_mhz"]  # same level ...
    assert on["regret_pct"] > 0 and on["energy_j"] > orc["energy_j"]  # ... but the probing is paid for


def test_online_live_on_the_simulated_board():
    from dvfslab.governors.online import profile_on_board
    from dvfslab.sim.board import SimBoard

    row = {"workload_id": "bert-base/sst2", "model": "bert-base", "n_layers": 12, "hidden_size": 768,
           "params_m": 109.48, "task": "sst2", "avg_seq_len": 13.3, "max_seq_len": 128, "batch_size": 32}
    board = SimBoard(seed=3)
    per_level = {}
    for f in ORIN_FREQS_MHZ:  # the twin's own curve: energy per step at each level
        board.lock(f)
        per_level[f] = board.train(row, 30, run_key=f"curve-{f}").step_energy_j.mean()
    board.unlock()
    prof = OnlineProfiler(ORIN_FREQS_MHZ)
    out = profile_on_board(board, row, prof, total_steps=60)
    assert out["profiling_steps"] == prof.profiling_steps == 26 and board.locked_mhz is None
    best = min(per_level, key=per_level.get)
    ranked = sorted(per_level, key=per_level.get)
    assert out["freq_mhz"] in ranked[:3], (out["freq_mhz"], best, per_level)
    assert out["energy_j"] > out["probe_energy_j"] > 0


# --------------------------------------------------------------------------------------------
# Notebook 05 in the pipeline (papermill)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_05_in_the_pipeline_on_a_simulated_sweep(tmp_path):
    """A small twin sweep (5 models, 1 rep, with steps.csv): 05 runs after 01-04 and its
    summary figures agree with the package recomputed here."""
    from dvfslab import cli
    from dvfslab.governors.static import load_fixed
    from dvfslab.pipeline import runner as PL

    data = tmp_path / "sim"
    assert cli.main(["simulate", "--out", str(data), "--models", "bert-small,pythia-70m,bert-base,pythia-160m,bert-large",
                     "--reps", "1", "--no-progress"]) == 0
    out = PL.run_pipeline(data, tmp_path / "run", quick=True, html=False, progress=False, log=lambda s: None)
    summary = PL.read_summary(out)
    gov = summary["governors"]
    assert {"maxn", "ffg", "mlg", "mlg-paper", "oracle", "curve", "online"} <= set(gov)
    assert gov["online"]["profiling_steps"] == 26 and "profiling_steps" not in gov["curve"]
    for name in ("curve", "online"):
        assert gov[name]["mean_regret_pct"] >= 0 and gov[name]["mean_saving_pct"] <= gov["oracle"]["mean_saving_pct"] + 1e-9
    beyond = summary["beyond"]
    # notebook 04 replays the profiled governor (not among notebook 05's CV policies) and recommends one
    assert set(beyond["cv"]) == {"loocv", "lomo"} and set(beyond["cv"]["lomo"]) == set(gov) - {"profiled"}
    assert gov["profiled"]["profiling_steps"] == 6
    rec = summary["recommended"]
    assert rec["policy"] in {"ffg", "mlg", "curve", "profiled"} and rec["ffg_cv_regret_pct"] >= 0 and rec["reason"]
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
    per = E.replay({"curve": CurveGovernor(fit_curve_model(sweep, table, train))}, sweep, table,
                   sweep.workload_ids("evaluation"))
    assert per["regret_pct"].mean() == pytest.approx(gov["curve"]["mean_regret_pct"], rel=1e-9)
    assert CurveGovernor.load(out / "models" / "curve.json").decide(table.iloc[0].to_dict()) is not None
    assert load_fixed(out / "models" / "ffg.json").freq_mhz == summary["evaluation"]["ffg_freq_mhz"]
    for fig in PL.FIGURES["05_beyond_the_paper"]:
        assert (out / "figures" / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"


def test_curve_without_any_feature_is_the_mean_training_curve(tmp_path):
    """When no training workload has any feature (e.g. a held-out fold of networks whose size is
    unknown), the curve model is the training workloads' mean log curve, the same for every
    workload. Hand-written sweep (analysis_fixtures.TINY_RUNS), energies / MAXN:
    sst2 105/122, 92/122, 98/122 and mrpc 48/80, 50/80, 54/80 at 510, 612, 714 MHz; the
    geometric means are sqrt(105/122 * 48/80) = 0.71859, sqrt(92/122 * 50/80) = 0.68652,
    sqrt(98/122 * 54/80) = 0.73636, so the least is 612 MHz."""
    from analysis_fixtures import make_tiny_dataset

    sweep = F.sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path / "ds")))
    no_features = pd.DataFrame({"workload_id": ["tiny-enc/sst2", "tiny-enc/mrpc", "big-dec/qnli"]})
    model = fit_curve_model(sweep, no_features, ["tiny-enc/sst2", "tiny-enc/mrpc"])
    model.save(tmp_path / "curve.json")
    loaded = CurveModel.load(tmp_path / "curve.json")
    curves = loaded.predict({"workload_id": "big-dec/qnli"})
    assert curves["freq_mhz"] == [510.0, 612.0, 714.0] and loaded.spec["features"] == []
    assert curves["energy_rel"] == pytest.approx([0.71859, 0.68652, 0.73636], abs=5e-5)
    assert CurveGovernor(loaded).decide({"workload_id": "anything"}) == 612.0
