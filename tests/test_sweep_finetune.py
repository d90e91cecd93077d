"""The fine-tuning executor in a sweep: tiny random models on CPU, the fake Jetson's clocks and rails."""

from __future__ import annotations

import json  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("transformers")

from dvfslab.hw.jetson.backend import open_backend  # noqa: E402
from dvfslab.sweep import Cooldown, FinetuneExecutor, make_plan, run_sweep  # noqa: E402

TINY_BERT = dict(model_type="bert", vocab_size=400, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
GPU_MW, CPU_MW = 7000.0, 3000.0


def test_finetune_executor_sweeps_levels_and_maxn_on_the_fake_jetson(orin_jp6, tmp_path):
    orin_jp6.set_rail("VDD_GPU_SOC", GPU_MW)
    orin_jp6.set_rail("VDD_CPU_CV", CPU_MW)
    limits = ("governor", "min_freq_hz", "max_freq_hz")  # cur_freq is the governor's choice
    original = {k: orin_jp6.state()[k] for k in limits}
    backend = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "state")
    executor = FinetuneExecutor(models={"tiny-bert": TINY_BERT}, batch_size=8, max_seq_len=32,
                                n_train=48, n_eval=16, step_rows=2)
    plan = make_plan(["tiny-bert/synthetic:sst2"], [306.0, 1300.5], reps=1, steps=3, warmup_steps=1)
    ds = run_sweep(plan, backend, executor, tmp_path / "out", progress=False, lock_dir=tmp_path / "locks",
                   cooldown=Cooldown(idle_measure_s=0.05, poll_s=0.05))

    assert (ds.runs["status"] == "ok").all(), ds.runs["error"].tolist()
    assert sorted(ds.runs["policy"]) == ["fixed", "fixed", "maxn"]
    assert (ds.runs["steps"] == 3).all()
    # the fake rails read 10 W CPU + GPU throughout: energy = 10 W x measured time
    assert (ds.runs["avg_power_w"] - (GPU_MW + CPU_MW) / 1000).abs().max() < 1e-6
    assert ds.runs["energy_j"].to_numpy() == pytest.approx(10.0 * ds.runs["time_s"].to_numpy(), rel=1e-4)
    assert ds.runs["energy_gpu_j"].to_numpy() == pytest.approx(7.0 * ds.runs["time_s"].to_numpy(), rel=1e-4)
    # the level was locked during each fixed run (the fake kernel's cur_freq while training)
    fixed = ds.runs[ds.runs["policy"] == "fixed"].set_index("gpu_freq_mhz")
    assert fixed["mean_gpu_freq_mhz"].to_dict() == {306.0: 306.0, 1300.5: 1300.5}
    # the harness's workload row (real parameter count of the tiny model) replaced the guess
    wl = ds.workloads.set_index("workload_id").loc["tiny-bert/synthetic:sst2"]
    assert wl["n_layers"] == 2 and wl["hidden_size"] == 32 and 0 < wl["params_m"] < 1
    rec = json.loads(next((tmp_path / "out" / "runs").glob("*maxn*.json")).read_text())
    assert rec["extras"]["metrics"] and rec["extras"]["eval_metric_name"]
    # steps.csv: the first 2 measured steps (warm-up left out) of each run, 10 W x step time
    assert ds.steps is not None and ds.steps.groupby("run_id").size().eq(2).all()
    assert set(ds.steps["run_id"]) == set(ds.runs["run_id"])
    assert ds.steps["energy_j"].to_numpy() == pytest.approx(10.0 * ds.steps["time_s"].to_numpy(), rel=1e-3)
    assert {k: orin_jp6.state()[k] for k in limits} == original
