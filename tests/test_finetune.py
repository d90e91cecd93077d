"""The fine-tuning harness on CPU: tiny random models, the fake Jetson, failures, the CLI.

Tiny BERT / GPT-NeoX configs train a few steps on the synthetic generator; the fake JetPack 6
AGX Orin tree (with its kernel rules) stands in for the board. Every test checks that the
clocks are back to the board's original values afterwards.
"""

from __future__ import annotations

import json  # noqa: E402
import threading  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")

from transformers import TrainerCallback  # noqa: E402

from dvfslab import cli  # noqa: E402
from dvfslab.core.errors import DvfsError  # noqa: E402
from dvfslab.data.contract import load_dataset  # noqa: E402
from dvfslab.harness import DvfsCallback, EnergyNotMeasuredWarning, FinetuneError, finetune  # noqa: E402
from dvfslab.hw import get_backend  # noqa: E402
from dvfslab.hw.base import (  # noqa: E402
    Backend,
    ClockPermissionError,
    UnsupportedFrequencyError,
)
from dvfslab.hw.jetson.backend import open_backend  # noqa: E402

TINY_BERT = dict(model_type="bert", vocab_size=400, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
TINY_NEOX = dict(model_type="gpt_neox", vocab_size=400, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
GPU_MW, CPU_MW = 7000.0, 3000.0  # fake rail readings: CPU + GPU = 10 W
QUICK = dict(batch_size=8, max_seq_len=32, n_train=48, n_eval=16, progress=False, sample_period_s=0.01)


@pytest.fixture
def board(orin_jp6):
    orin_jp6.set_rail("VDD_GPU_SOC", GPU_MW)
    orin_jp6.set_rail("VDD_CPU_CV", CPU_MW)
    orin_jp6.set_load(42.0)
    return orin_jp6


@pytest.fixture
def backend(board, tmp_path):
    return open_backend(io=board.io(), state_dir=tmp_path / "state")


class ClockSpy(TrainerCallback):
    """Records the fake devfreq files at every step end (what the kernel says during training)."""

    def __init__(self, board, fail_at: int | None = None, exc: BaseException | None = None):
        self.board, self.fail_at, self.exc, self.states = board, fail_at, exc, []

    def on_step_end(self, args, state, control, **kwargs):
        self.states.append(self.board.state())
        if self.fail_at is not None and state.global_step == self.fail_at:
            raise self.exc


def _hz(mhz: float) -> int:
    return int(round(mhz * 1e6))


@pytest.mark.parametrize("config, task", [(TINY_BERT, "synthetic:sst2"), (TINY_NEOX, "synthetic:mrpc")])
def test_tiny_models_lock_measure_restore_and_record(board, backend, tmp_path, config, task):
    original = board.state()
    spy = ClockSpy(board)
    out = tmp_path / "ds"
    res = finetune(config, task, backend=backend, freq_mhz=612, steps=6, warmup_steps=2, out_dir=out,
                   callbacks=[spy], **QUICK)
    assert len(spy.states) == 6
    assert all(s["min_freq_hz"] == s["max_freq_hz"] == s["cur_freq_hz"] == _hz(612) for s in spy.states)
    assert board.state()["min_freq_hz"] == original["min_freq_hz"]
    assert board.state()["max_freq_hz"] == original["max_freq_hz"]
    assert board.state()["governor"] == original["governor"]

    run = res.run
    assert run["status"] == "ok" and run["policy"] == "fixed" and run["gpu_freq_mhz"] == 612.0
    assert run["steps"] == 4 and run["warmup_steps"] == 2
    assert run["avg_power_w"] == pytest.approx((GPU_MW + CPU_MW) / 1000)
    assert run["energy_j"] == pytest.approx((GPU_MW + CPU_MW) / 1000 * run["time_s"])  # constant 10 W
    assert run["energy_gpu_j"] == pytest.approx(GPU_MW / 1000 * run["time_s"])
    assert run["energy_cpu_j"] == pytest.approx(CPU_MW / 1000 * run["time_s"])
    assert run["gpu_util_pct"] == pytest.approx(42.0) and run["mean_gpu_freq_mhz"] == pytest.approx(612.0)
    assert run["data"] == "synthetic" and run["eval_metric"] == res.metrics["metric"]
    assert 0.0 <= run["eval_metric"] <= 1.0
    assert [s["step"] for s in res.steps] == [1, 2, 3, 4, 5, 6]
    assert sum(s["time_s"] for s in res.steps[2:]) <= run["time_s"]
    assert all(s["energy_j"] == pytest.approx(10.0 * s["time_s"]) for s in res.steps)
    assert len(res.epochs) == 1 and res.epochs[0].time_s <= run["time_s"]

    ds = load_dataset(out)
    assert ds.meta["source"] == "measured" and ds.meta["synthetic_data"] is True
    assert ds.meta["energy_measured"] is True and 612.0 in ds.freq_table_mhz
    assert ds.meta["device"]["board"] == "NVIDIA Jetson AGX Orin Developer Kit"
    wl = ds.workloads.iloc[0]
    cfg = res.workload
    assert wl["task"] == task and wl["n_layers"] == 2 and wl["hidden_size"] == 32
    assert wl["model_type"] == ("decoder" if config is TINY_NEOX else "encoder")
    assert 0 < cfg["avg_seq_len"] <= 32 and cfg["params_m"] > 0
    assert len(ds.steps) == 6 and set(ds.steps["run_id"]) == {run["run_id"]}
    samples = pd.read_csv(out / "samples" / f"{run['run_id']}.csv")
    assert len(samples) >= 2 and (samples["VDD_GPU_SOC_mw"] == GPU_MW).all()
    sidecar = json.loads((out / "samples" / f"{run['run_id']}.meta.json").read_text())
    assert {w["name"] for w in sidecar["windows"]} == {"train", "epoch-1"}
    assert not [t for t in threading.enumerate() if t.name == "dvfslab-power-sampler"]


def test_runs_append_with_reps_and_new_workloads(backend, board, tmp_path):
    out = tmp_path / "ds"
    for freq in (612, 612, 1300.5):
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=freq, steps=2, out_dir=out, **QUICK)
    finetune(TINY_NEOX, "synthetic:sst2", backend=backend, steps=2, out_dir=out, policy="maxn", **QUICK)
    ds = load_dataset(out)
    assert list(ds.runs["rep"]) == [0, 1, 0, 0]
    assert list(ds.runs["policy"]) == ["fixed", "fixed", "fixed", "maxn"]
    assert pd.isna(ds.runs["gpu_freq_mhz"].iloc[3]) and ds.meta["baseline"] == "maxn"
    assert sorted(ds.workloads["model"]) == ["bert-random", "gpt_neox-random"]
    finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=612, steps=2, out_dir=out,
             **{**QUICK, "batch_size": 4})
    ds = load_dataset(out)
    assert "bert-random/synthetic:sst2/bs4-len32" in set(ds.workloads["workload_id"])
    assert board.state()["min_freq_hz"] == _hz(306) and board.state()["max_freq_hz"] == _hz(1300.5)


def test_exception_mid_training_restores_clocks_and_records_failure(backend, board, tmp_path):
    original = board.state()
    spy = ClockSpy(board, fail_at=2, exc=RuntimeError("injected failure"))
    out = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="injected failure"):
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=408, steps=5, out_dir=out,
                 callbacks=[spy], **QUICK)
    assert spy.states[0]["max_freq_hz"] == _hz(408)
    assert board.state() == {**original, "cur_freq_hz": board.state()["cur_freq_hz"]}
    assert not [t for t in threading.enumerate() if t.name == "dvfslab-power-sampler"]
    ds = load_dataset(out)
    row = ds.runs.iloc[0]
    assert row["status"] == "failed" and "injected failure" in row["error"]


def test_out_of_memory_is_one_line_naming_the_fix_and_restores(backend, board, tmp_path):
    spy = ClockSpy(board, fail_at=1, exc=torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    with pytest.raises(FinetuneError) as err:
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=816, steps=3, callbacks=[spy], **QUICK)
    msg = str(err.value)
    assert "does not fit in memory" in msg and "--batch-size" in msg and "--max-seq-len" in msg and "\n" not in msg
    assert board.state()["max_freq_hz"] == _hz(1300.5) and board.state()["min_freq_hz"] == _hz(306)


def test_bad_level_and_read_only_clocks_change_nothing(backend, board, tmp_path):
    original = board.state()
    with pytest.raises(UnsupportedFrequencyError, match="612"):
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=600, steps=2, **QUICK)
    assert board.state() == original
    board.make_read_only()
    with pytest.raises(ClockPermissionError):
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, freq_mhz=612, steps=2, out_dir=tmp_path / "ds", **QUICK)
    assert board.state() == original


def test_bad_input_is_a_dvfs_error_before_anything_runs(backend, board, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    original = board.state()
    with pytest.raises(FinetuneError, match="no tokenizer for 'bert-tiny'.*--random-init"):
        finetune("bert-tiny", "synthetic:sst2", backend=backend, freq_mhz=612, steps=2, **QUICK)
    with pytest.raises(DvfsError, match="unknown task 'sst3'"):
        finetune(TINY_BERT, "sst3", backend=backend, freq_mhz=612, steps=2, **QUICK)
    with pytest.raises(DvfsError, match="unknown model 'bert-bse'.*Did you mean bert-base"):
        finetune("bert-bse", "synthetic:sst2", backend=backend, freq_mhz=612, steps=2, **QUICK)
    with pytest.raises(FinetuneError, match="bert-xlarge has no public pretrained checkpoint; pass --random-init"):
        finetune("bert-xlarge", "synthetic:sst2", backend=backend, freq_mhz=612, steps=2, **QUICK)
    with pytest.raises(FinetuneError, match="warmup-steps 3 leaves nothing"):
        finetune(TINY_BERT, "synthetic:sst2", backend=backend, steps=3, warmup_steps=3, **QUICK)
    with pytest.raises(DvfsError, match="cannot be loaded.*synthetic:qqp"):
        finetune(TINY_BERT, "qqp", backend=backend, freq_mhz=612, steps=2, **QUICK)
    assert board.state() == original


def test_backend_none_records_time_not_energy(backend, tmp_path):
    out = tmp_path / "ds"
    with pytest.warns(EnergyNotMeasuredWarning, match="energy is left empty"):
        res = finetune(TINY_BERT, "synthetic:cola", backend="none", steps=3, out_dir=out, **QUICK)
    run = res.run
    assert run["time_s"] > 0 and run["steps"] == 3 and run["policy"] == "default"
    for col in ("energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w", "peak_power_w", "gpu_freq_mhz"):
        assert run[col] is None
    ds = load_dataset(out)
    assert ds.meta["energy_measured"] is False and ds.meta["clock_control"] is False
    assert ds.runs["energy_j"].isna().all() and ds.runs["eval_metric_name"].iloc[0] == "matthews_correlation"
    assert ds.steps["energy_j"].isna().all() and not (out / "samples").exists()
    with pytest.raises(FinetuneError, match="no GPU clock control"):  # refused before anything is loaded
        finetune(TINY_BERT, "synthetic:cola", backend="none", freq_mhz=612, steps=2, **QUICK)
    measured = tmp_path / "measured"  # a dataset with energy never takes a run without it
    finetune(TINY_BERT, "synthetic:cola", backend=backend, freq_mhz=612, steps=2, out_dir=measured, **QUICK)
    with pytest.warns(EnergyNotMeasuredWarning), pytest.raises(FinetuneError, match="measures no energy"):
        finetune(TINY_BERT, "synthetic:cola", backend="none", steps=2, out_dir=measured, **QUICK)
    assert len(load_dataset(measured).runs) == 1


def test_without_rails_util_and_clock_come_from_polling(backend, board):
    """A board whose rails are missing: no energy, but GPU load and clock are still recorded."""
    no_rails = Backend(name="jetson", clocks=backend.clocks, power=None, telemetry=backend.telemetry,
                       description=backend.description)
    with pytest.warns(EnergyNotMeasuredWarning):
        res = finetune(TINY_BERT, "synthetic:sst2", backend=no_rails, freq_mhz=510, steps=3, **QUICK)
    assert res.run["energy_j"] is None and res.run["time_s"] > 0
    assert res.run["gpu_util_pct"] == pytest.approx(42.0) and res.run["mean_gpu_freq_mhz"] == pytest.approx(510.0)
    assert board.state()["max_freq_hz"] == _hz(1300.5)


class HalfwayGovernor:
    name = "halfway"

    def __init__(self):
        self.seen = None

    def decide(self, workload, probe=None):
        from dvfslab.governors.base import Decision

        self.seen = dict(workload)
        return Decision(700.0)  # not a level: the callback snaps to the nearest (714)


def test_governor_decides_from_workload_features(backend, board):
    gov, spy = HalfwayGovernor(), ClockSpy(board)
    res = finetune(TINY_NEOX, "synthetic:qnli", backend=backend, governor=gov, steps=2, callbacks=[spy], **QUICK)
    assert gov.seen["n_layers"] == 2 and gov.seen["hidden_size"] == 32 and gov.seen["is_decoder"] == 1.0
    assert gov.seen["avg_seq_len"] == res.workload["avg_seq_len"]
    assert spy.states[0]["cur_freq_hz"] == _hz(714) and res.run["policy"] == "halfway"
    assert board.state()["max_freq_hz"] == _hz(1300.5)


def test_callback_close_is_idempotent_and_safe_before_start(backend, board):
    cb = DvfsCallback(backend, freq_mhz=510, sample_period_s=0.01)
    cb.close()  # never started: nothing to undo
    cb = DvfsCallback(backend, freq_mhz=510, sample_period_s=0.01)
    cb.start()
    assert board.state()["max_freq_hz"] == _hz(510) and cb.sampler.running
    cb.close(RuntimeError("boom"))
    cb.close()
    assert board.state()["max_freq_hz"] == _hz(1300.5) and not cb.sampler.running
    assert cb.error == "RuntimeError: boom" and cb.measurement is not None  # exact times: test_online_callback
    with pytest.raises(FinetuneError, match="either freq_mhz or a governor"):
        DvfsCallback(backend, freq_mhz=510, governor=HalfwayGovernor())


def test_cli_on_fake_jetson_tree(board, tmp_path, fake_kernel_env, capsys):
    out = tmp_path / "ds"
    args = ["finetune", "--model", "bert-tiny", "--random-init", "--task", "synthetic:sst2", "--freq", "918",
            "--backend", "jetson", "--sysfs-root", str(board.root), "--steps", "2", "--batch-size", "4",
            "--max-seq-len", "32", "--n-train", "16", "--n-eval", "8", "--sample-period-ms", "10",
            "--no-progress", "--out", str(out)]
    assert cli.main(args) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "bert-tiny/synthetic:sst2, 918 MHz" in line and "J CPU+GPU" in line and "accuracy" in line
    ds = load_dataset(out)
    wl = ds.workloads.iloc[0]
    assert (wl["model"], wl["n_layers"], wl["hidden_size"], wl["model_family"]) == ("bert-tiny", 2, 128, "bert")
    assert ds.runs["tokenizer"].iloc[0] == "local-wordlevel" and ds.runs["init"].iloc[0] == "random"
    assert board.state()["max_freq_hz"] == _hz(1300.5)
    assert cli.main(args[:5] + ["sst3"] + args[6:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown task 'sst3'" in err[0]


def test_cli_backend_none_warns_and_sim_is_refused(tmp_path, capsys):
    out = tmp_path / "ds"
    base = ["finetune", "--model", "pythia-14m", "--random-init", "--task", "synthetic:wnli", "--steps", "2",
            "--batch-size", "4", "--max-seq-len", "32", "--n-train", "16", "--n-eval", "8", "--no-progress",
            "--out", str(out)]
    assert cli.main(base + ["--backend", "none"]) == 0
    captured = capsys.readouterr()
    assert "warning: backend 'none' has no power reader" in captured.err
    assert "energy not measured" in captured.out
    assert load_dataset(out).workloads["model_type"].iloc[0] == "decoder"
    assert get_backend("sim").virtual_time
    assert cli.main(base + ["--backend", "sim"]) == 2
    assert "virtual clock" in capsys.readouterr().err
