"""``dvfslab simulate``: dataset generation from the twin (contract, determinism, CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dvfslab.cli import main
from dvfslab.core.errors import DvfsError
from dvfslab.data.catalog import MODELS
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation.findings import twin_findings
from dvfslab.hw.base import format_mhz
from dvfslab.sim.board import SimBoard
from dvfslab.sim.model import SimWorkload
from dvfslab.sweep.simulate import QUICK_MODELS, simulate_dataset, simulation_plan

FILES = ("meta.json", "workloads.csv", "runs.csv", "steps.csv")


@pytest.fixture(scope="module")
def xavier_quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("xavier")
    plan = simulation_plan(board="agx-xavier", seed=11, quick=True)
    return plan, simulate_dataset(out, plan, progress=False)


def test_quick_dataset_follows_the_contract_and_says_simulated(xavier_quick):
    plan, ds = xavier_quick
    again = load_dataset(ds.path)  # validates
    assert again.simulated and again.meta["device"]["simulated"] is True
    assert "SIMULATED, NOT A MEASUREMENT" in again.meta["note"]
    assert again.meta["seed"] == 11 and again.meta["generator"]["plan"]["board"] == "agx-xavier"
    assert len(again.freq_table_mhz) == 14 and again.baseline == "maxn"
    assert len(again.workloads) == len(QUICK_MODELS) * 4 and len(again.runs) == plan.n_runs()
    assert set(again.workloads["split"]) == {"characterization", "evaluation"}


def test_every_workload_has_every_level_times_reps_and_maxn_runs(xavier_quick):
    plan, ds = xavier_quick
    runs = ds.runs
    fixed = runs[runs["policy"] == "fixed"]
    counts = fixed.groupby(["workload_id", "gpu_freq_mhz"]).size()
    assert set(counts) == {plan.reps} and len(counts) == len(ds.workloads) * 14
    maxn = runs[runs["policy"] == "maxn"]
    assert set(maxn.groupby("workload_id").size()) == {plan.maxn_reps}
    assert maxn["gpu_freq_mhz"].isna().all() and maxn["mean_gpu_freq_mhz"].notna().all()
    assert (runs["steps"] == plan.steps).all() and runs["eval_metric"].isna().all()
    assert (runs["status"] == "ok").all()
    assert (runs["energy_j"] - runs["energy_gpu_j"] - runs["energy_cpu_j"]).abs().max() < 1e-3 * runs["energy_j"].max()
    assert runs["started_at"].is_monotonic_increasing  # virtual time, one board


def test_steps_csv_holds_the_first_steps_of_rep_zero(xavier_quick):
    plan, ds = xavier_quick
    steps, runs = ds.steps, ds.runs.set_index("run_id")
    assert set(runs.loc[steps["run_id"].unique(), "rep"]) == {0}
    assert set(steps.groupby("run_id").size()) == {plan.step_rows}
    per_run = steps.groupby("run_id")["time_s"].sum()
    assert (per_run <= runs.loc[per_run.index, "time_s"] + 1e-6).all()


def test_same_seed_same_bytes_other_seed_other_numbers(tmp_path):
    plan = simulation_plan(quick=True, seed=3, models=["bert-small", "pythia-70m"], steps=15, reps=1)
    for name in ("a", "b"):
        simulate_dataset(tmp_path / name, plan, progress=False)
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    other = simulation_plan(quick=True, seed=4, models=["bert-small", "pythia-70m"], steps=15, reps=1)
    simulate_dataset(tmp_path / "c", other, progress=False)
    assert (tmp_path / "a" / "runs.csv").read_bytes() != (tmp_path / "c" / "runs.csv").read_bytes()
    assert (tmp_path / "a" / "workloads.csv").read_bytes() == (tmp_path / "c" / "workloads.csv").read_bytes()


def test_cli_writes_a_dataset_that_validate_accepts(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["simulate", "--out", str(out), "--quick", "--models", "bert-small", "--steps", "10",
                 "--reps", "1", "--no-progress"]) == 0
    assert "SIMULATED" in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["source"] == "simulated" and meta["generator"]["plan"]["steps"] == 10


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "meta.json").write_text(json.dumps({"source": "measured"}))
    assert main(["simulate", "--out", str(measured), "--quick", "--no-progress"]) == 2
    assert "already holds a dataset (meta.json says source=measured)" in capsys.readouterr().err
    assert main(["simulate", "--out", str(tmp_path / "x"), "--models", "bert-hyper", "--no-progress"]) == 2
    assert "unknown model 'bert-hyper'" in capsys.readouterr().err
    assert main(["simulate", "--out", str(tmp_path / "x"), "--steps", "0", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == "dvfslab simulate: error: simulate: --steps must be at least 1, got 0"
    assert main(["simulate", "--out", str(tmp_path / "x"), "--reps", "-1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--reps must be at least 1, got -1" in err and "{" not in err  # a sentence, no Python dict
    with pytest.raises(SystemExit):
        main(["simulate", "--out", str(tmp_path / "x"), "--board", "thor"])


def test_plans():
    assert simulation_plan().n_runs() == 81 * (11 * 3 + 3)
    assert simulation_plan(models="all").models == tuple(MODELS)
    assert simulation_plan(models="pythia-70m,bert-base").models == ("pythia-70m", "bert-base")
    assert simulation_plan(steps=30).step_rows == 30
    with pytest.raises(DvfsError, match="unknown simulated board"):
        simulation_plan(board="agx-thor")


def _printed_tree_mhz(n_layers: float, avg_seq_len: float) -> float:
    """The tree as the paper prints it, for a workload busier than its 22 % utilization split."""
    if n_layers <= 7:
        return 510.0 if avg_seq_len <= 32.5 else 612.0
    return 714.0 if avg_seq_len <= 53.0 else 816.0


# nearest Xavier level to each of the tree's Orin levels, by hand (e.g. 714: 675.75 is 38.25 away, 828.75 is 114.75)
NEAREST_XAVIER_MHZ = {510.0: 522.75, 612.0: 624.75, 714.0: 675.75, 816.0: 828.75}


def test_findings_apply_the_papers_printed_tree(xavier_quick):
    _, ds = xavier_quick
    f = twin_findings(ds)
    assert f["paper_util_split_pct"] == 22.0 and f["maxn_util_pct"][0] > 22.0  # the util split never fires
    runs, wl = ds.ok_runs(), ds.workloads.set_index("workload_id")
    savings = {}
    for wid, row in wl[wl["split"] == "evaluation"].iterrows():
        level = NEAREST_XAVIER_MHZ[_printed_tree_mhz(row["n_layers"], row["avg_seq_len"])]
        mine = runs[runs["workload_id"] == wid]
        e_level = mine[(mine["policy"] == "fixed") & (mine["gpu_freq_mhz"] == level)]["energy_j"].mean()
        savings[wid] = 100 * (1 - e_level / mine[mine["policy"] == "maxn"]["energy_j"].mean())
    assert len(set(NEAREST_XAVIER_MHZ) & {_printed_tree_mhz(r.n_layers, r.avg_seq_len) for r in wl.itertuples()}) > 1
    got = f["saving_pct"]["paper_tree"]["all"]
    assert got["n"] == len(savings)
    assert got["mean"] == pytest.approx(np.mean(list(savings.values())))
    assert got["max"] == pytest.approx(max(savings.values())) and savings[got["argmax"]] == pytest.approx(got["max"])


def test_findings_follow_the_definitions(xavier_quick):
    _, ds = xavier_quick
    f = twin_findings(ds)
    sv = f["saving_pct"]
    assert sv["oracle"]["all"]["mean"] >= max(sv["ffg"]["all"]["mean"], sv["paper_tree"]["all"]["mean"])
    # recompute the oracle saving of one evaluation workload by hand
    runs = ds.ok_runs()
    wid = sv["oracle"]["all"]["argmax"]
    mine = runs[runs["workload_id"] == wid]
    e_level = mine[mine["policy"] == "fixed"].groupby("gpu_freq_mhz")["energy_j"].mean().min()
    e_base = mine[mine["policy"] == "maxn"]["energy_j"].mean()
    assert sv["oracle"]["all"]["max"] == pytest.approx(100 * (1 - e_level / e_base))
    assert f["interior_minimum"] == f["n_workloads"] == len(ds.workloads)
    assert f["ffg_mhz"] in ds.freq_table_mhz
    assert sum(f["optimal_level_counts"].values()) == f["n_workloads"]


def test_simulate_is_a_sweep_with_energy_read_by_the_sampler(tmp_path):
    # no window phases here, so that the 12 steps are the whole run (phases: the test below)
    plan = simulation_plan(quick=True, seed=5, models=["bert-small", "pythia-70m"], steps=12, reps=1, window_phases=())
    work = tmp_path / "work"
    ds = simulate_dataset(tmp_path / "a", plan, progress=False, work_dir=work)
    # the sweep's own directory: its plan and one record per run, in the sweep's order
    stored = json.loads((work / "plan.json").read_text())
    assert stored["order"] == "interleaved" and len(stored["run_ids"]) == plan.n_runs() == len(ds.runs)
    records = [json.loads((work / "runs" / f"{rid}.json").read_text()) for rid in stored["run_ids"]]
    assert [r["row"]["workload_id"] for r in records] == list(ds.runs["workload_id"])
    assert ds.meta["sweep"]["executor"]["class"].endswith("SimExecutor")
    # runs.csv holds the sampler's measurement, not the twin's exact integral (close to it)
    measured = ds.runs["energy_j"].to_numpy()
    exact = np.array([r["extras"]["twin"]["energy_j"] for r in records])
    assert np.allclose(measured, [r["row"]["energy_j"] for r in records], rtol=1e-5)
    assert not np.allclose(measured, exact, rtol=1e-6) and np.allclose(measured, exact, rtol=0.05)  # 1-2 s runs
    assert all(r["extras"]["n_samples"] >= 2 for r in records)
    # steps.csv: the same sampler, integrated over each step; the steps add up to the run
    runs = ds.runs.set_index("run_id")
    per_run = ds.steps.groupby("run_id")[["time_s", "energy_j"]].sum()
    whole = runs.loc[per_run.index]
    assert np.allclose(per_run["time_s"], whole["time_s"], rtol=1e-5)  # 12 steps = the whole run
    assert np.allclose(per_run["energy_j"], whole["energy_j"], rtol=1e-4)
    # the same work directory again: resumed, nothing re-run, the same files
    stamps = {p.name: p.stat().st_mtime_ns for p in (work / "runs").iterdir()}
    simulate_dataset(tmp_path / "b", plan, progress=False, work_dir=work)
    assert {p.name: p.stat().st_mtime_ns for p in (work / "runs").iterdir()} == stamps
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    with pytest.raises(DvfsError, match=f"--out {work} is --work {work}, which dvfslab simulate reads"):
        simulate_dataset(work, plan, progress=False, work_dir=work)


def test_run_noise_is_keyed_by_the_run_not_by_the_order(xavier_quick):
    """A fixed run's time is the twin's for its (policy, level, rep) key on a fresh board."""
    plan, ds = xavier_quick
    runs = ds.runs[ds.runs["policy"] == "fixed"]
    for row in runs.iloc[[0, len(runs) // 2, -1]].itertuples():
        board = SimBoard("agx-xavier", plan.seed)
        board.lock(row.gpu_freq_mhz)
        model, task = row.workload_id.split("/")
        twin = board.train(SimWorkload.from_catalog(model, task, window_phases=plan.window_phases), plan.steps,
                           run_key=f"fixed/{format_mhz(row.gpu_freq_mhz)}/{row.rep}")
        assert row.time_s == pytest.approx(twin.time_s, rel=1e-5)  # runs.csv keeps 6 digits


def test_window_phases_lengthen_the_run_by_the_stated_amortized_work(tmp_path):
    """With evaluation and checkpoints in the window (the default), a run is its training steps
    plus the phases; the checkpoint of bert-small (29.1 M parameters × 12 B at 200 MB/s, one
    save per 500 steps, amortized over 12 steps) lasts 12/500 · 29.1e6·12/200e6 s."""
    plan = simulation_plan(quick=True, seed=5, models=["bert-small"], steps=12, reps=1)
    assert plan.window_phases == ("evaluation", "checkpoint")
    work = tmp_path / "work"
    ds = simulate_dataset(tmp_path / "a", plan, progress=False, work_dir=work)
    stored = json.loads((work / "plan.json").read_text())
    records = [json.loads((work / "runs" / f"{rid}.json").read_text()) for rid in stored["run_ids"]]
    params = ds.workloads.set_index("workload_id").loc["bert-small/mrpc", "params_m"] * 1e6
    for rec in records:
        twin = rec["extras"]["twin"]
        phases = twin["phase_time_s"]
        assert set(phases) == {"train", "evaluation", "checkpoint"}
        assert sum(phases.values()) == pytest.approx(twin["time_s"], rel=1e-9)
        if rec["row"]["workload_id"] == "bert-small/mrpc":
            assert phases["checkpoint"] == pytest.approx(12 / 500 * params * 12 / 200e6, rel=1e-9)
    assert ds.meta["window_phases"]["inside"] == ["evaluation", "checkpoint"]
    assert (ds.runs["energy_board_j"] > ds.runs["energy_j"]).all()  # all four rails > CPU+GPU


def test_explain_terms_add_up_to_the_boards_energy_of_a_locked_run():
    """``decompose`` (explain) and ``SimBoard.train`` are separate paths: on a noise-free board
    without warm-up, CPU+GPU energy per step × steps = the locked run's energy, at every level."""
    import dataclasses

    from dvfslab.sim.explain import decompose
    from dvfslab.sim.profiles import AGX_ORIN_64GB

    quiet = dataclasses.replace(AGX_ORIN_64GB, sigma_run_cpu=0.0, sigma_run_gpu=0.0, sigma_run_power=0.0,
                                sigma_step_cpu=0.0, first_step_extra_s=0.0)
    rows = decompose("pythia-70m/rte", board=quiet, levels=[510.0, 1300.5], n_steps=30)
    for row in rows:
        board = SimBoard(quiet, seed=0)
        board.lock(row["freq_mhz"])
        res = board.train(SimWorkload.from_catalog("pythia-70m", "rte", window_phases=("evaluation", "checkpoint")),
                          30, run_key="x")
        assert row["cpu_gpu_j"] * 30 == pytest.approx(res.energy_j, rel=1e-9)
        assert row["step_time_s"] * 30 == pytest.approx(res.time_s, rel=1e-9)
    assert all(row[k] > 0 for row in rows for k in ("gpu_dynamic_j", "gpu_leakage_j", "cpu_j", "soc_memory_j"))


def test_cli_explain_prints_the_decomposition(capsys):
    assert main(["simulate", "--explain", "bert-small/rte"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "<- lowest CPU+GPU" in out and "GPU dyn" in out
    assert main(["simulate"]) == 2  # neither --out nor --explain: a clear error, exit 2
    assert "--out DIR is required" in capsys.readouterr().err


def test_explain_of_a_model_without_a_task_asks_for_model_task(capsys):
    """Issue 25, item 4: ``--explain bert-base`` said ``unknown task ''``."""
    assert main(["simulate", "--explain", "bert-base"]) == 2
    err = capsys.readouterr().err.strip()
    assert "model/task" in err and "bert-base/rte" in err and "unknown task" not in err
    assert len(err.splitlines()) == 1


ENSEMBLE_ARGS = ["--quick", "--models", "bert-small,pythia-410m", "--steps", "8", "--reps", "1", "--no-progress"]


def test_ensemble_writes_ordered_bands_of_every_finding(tmp_path, capsys):
    """A tiny grid (2 models, one ≤ 70M and one > 70M, × 4 tasks, 1 rep, 8 steps) and 3 parameter sets."""
    out = tmp_path / "ens"
    assert main(["simulate", "--ensemble", "3", "--out", str(out), *ENSEMBLE_ARGS]) == 0
    assert "SIMULATED" in capsys.readouterr().out
    doc = json.loads((out / "ensemble.json").read_text())
    assert doc["source"] == "simulated" and doc["n_members"] == 3
    # members whose weight is below MIN_WEIGHT_SHARE of the largest are drawn but not simulated
    assert len(doc["members"]) + len(doc["draws_not_simulated"]) == 3 and doc["members"]
    weights = [m["weight"] for m in doc["members"] + doc["draws_not_simulated"]]
    assert sum(weights) == pytest.approx(1.0) and doc["weighting"]["scale"] >= 1.0
    assert 1.0 <= doc["weighting"]["effective_members"] <= 3.0
    scalars = ("oracle_saving_pct", "oracle_saving_le70m_pct", "oracle_saving_gt70m_pct", "mlg_paper_saving_pct",
               "ffg_minus_oracle_pts", "mlg_minus_ffg_pts")
    bands = doc["bands"]
    for key in scalars:
        b = bands[key]
        assert b["p5"] <= b["p50"] <= b["p95"], key
        assert key in doc["central"]
    shares = bands["optimum_share_pct"]
    assert set(shares) == {format_mhz(f) for f in doc_levels()}
    for b in shares.values():
        assert 0.0 <= b["p5"] <= b["p50"] <= b["p95"] <= 100.0
    for m in doc["members"]:  # each member's optimum shares cover every workload once
        assert sum(m["metrics"]["optimum_share_pct"].values()) == pytest.approx(100.0)
        assert m["metrics"]["ffg_minus_oracle_pts"] <= 1e-9  # no fixed level beats the per-workload best
    assert doc["paper"]["mlg_saving_pct"] == 13.11


def doc_levels():
    from dvfslab.sim.profiles import AGX_ORIN_64GB

    return AGX_ORIN_64GB.levels_mhz


def test_ensemble_members_are_drawn_inside_the_stated_ranges_and_seeded():
    from dvfslab.sim.calibration import ASSUMED_RANGES, sample_profile

    a = sample_profile(np.random.default_rng(np.random.SeedSequence([0, 1])))[1]
    b = sample_profile(np.random.default_rng(np.random.SeedSequence([0, 1])))[1]
    assert a == b
    for name, (lo, hi, _why) in ASSUMED_RANGES.items():
        assert lo <= a[name] <= hi


def test_ensemble_needs_an_out_dir_and_two_members(tmp_path, capsys):
    assert main(["simulate", "--ensemble", "1", "--out", str(tmp_path / "e"), *ENSEMBLE_ARGS]) == 2
    assert "at least 2 parameter sets" in capsys.readouterr().err
    assert main(["simulate", "--ensemble", "3", *ENSEMBLE_ARGS]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
