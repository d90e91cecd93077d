"""``dvfslab govern`` on a fake Jetson tree: decision, lock, run, restore (success, failure,
SIGTERM); saved governors; Hugging Face configs; the DvfsCallback with the new governors."""

from __future__ import annotations

import json
import signal
import sys

import pytest
from analysis_fixtures import make_dataset
from test_cli_hardware import CHILD, ORIGINAL, cli, dvfslab, gone, limits, wait_for

from dvfslab import analysis as F
from dvfslab.data.contract import load_dataset
from dvfslab.governors import registry as R
from dvfslab.governors.curve import CurveGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.io import features_from_hf_config, load_policy
from dvfslab.governors.static import FixedGovernor

# the command run under `dvfslab govern`: exits with 7 when the GPU is pinned at the given Hz, else 1
PINNED = ("import sys; d, hz = sys.argv[1], int(sys.argv[2]); "
          "v = [int(open(d + '/' + f).read()) for f in ('min_freq', 'max_freq', 'cur_freq')]; "
          "sys.exit(7 if v == [hz] * 3 else 1)")
PAPER = ["--policy", "mlg-paper", "--layers", "12", "--avg-seq-len", "60", "--gpu-util", "50"]  # -> 816 MHz


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A curve model and an FFG file fitted on a toy sweep (closed-form U-curves)."""
    root = tmp_path_factory.mktemp("govern")
    sweep = F.sweep_from_dataset(load_dataset(make_dataset(root / "ds")))
    table = F.feature_table(sweep)
    data = F.TrainingData(sweep, table, list(table.loc[table["split"] == "characterization", "workload_id"]))
    save_governor(CurveGovernor().fit(data), root / "curve.json")
    save_governor(FixedGovernor().fit(data), root / "ffg.json")
    return root


def test_success_locks_the_decided_level_and_restores(orin_jp6, capsys, fake_kernel_env):
    rc, _, err = cli(capsys, "govern", *PAPER, "--sysfs-root", orin_jp6.root, "--",
                     sys.executable, "-c", PINNED, orin_jp6.devfreq_link, 816000000)
    assert rc == 7, err  # the command saw the GPU pinned at 816 MHz and its exit code came back
    assert "mlg-paper: 816 MHz" in err and "GPU locked at 816 MHz" in err and "clocks restored" in err
    assert limits(orin_jp6) == ORIGINAL


def test_failure_propagates_the_exit_code_and_restores(orin_jp6, capsys, fake_kernel_env):
    rc, _, err = cli(capsys, "govern", *PAPER, "--sysfs-root", orin_jp6.root, "--",
                     sys.executable, "-c", "import sys; sys.exit(3)")
    assert rc == 3 and limits(orin_jp6) == ORIGINAL
    rc, _, err = cli(capsys, "govern", *PAPER, "--sysfs-root", orin_jp6.root, "--", "/nonexistent/cmd")
    assert rc == 2 and "cannot start" in err and limits(orin_jp6) == ORIGINAL


def test_sigterm_to_govern_forwards_restores_and_exits_143(orin_jp6, tmp_path):
    marker = tmp_path / "child.pid"
    proc = dvfslab("govern", *PAPER, "--sysfs-root", orin_jp6.root, "--", sys.executable, "-c", CHILD, marker)
    child_pid = wait_for(marker, proc)
    assert orin_jp6.state()["min_freq_hz"] == orin_jp6.state()["max_freq_hz"] == 816000000
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert limits(orin_jp6) == ORIGINAL and gone(child_pid) and "clocks restored" in err


def test_refusals_are_one_line_and_touch_nothing(orin_jp6, capsys, fake_kernel_env, tmp_path):
    # a measuring governor needs a progress source (issue 29: it runs here with one, tests/test_govern_job.py)
    rc, _, err = cli(capsys, "govern", "--policy", "online", "--sysfs-root", orin_jp6.root, "--", "true")
    assert rc == 2 and "online measures the job" in err and "--progress" in err and err.count("\n") == 1
    rc, _, err = cli(capsys, "govern", "--policy", "profiled", "--model", tmp_path / "profiled.json",
                     "--sysfs-root", orin_jp6.root, "--", "true")
    assert rc == 2 and "profiled.json" in err and err.count("\n") == 1
    rc, _, err = cli(capsys, "govern", "--policy", "profiled", "--sysfs-root", orin_jp6.root, "--progress", "steps",
                     "--", "true")
    assert rc == 2 and "needs --model FILE" in err and err.count("\n") == 1
    rc, _, err = cli(capsys, "govern", "--policy", "nope", "--", "true")
    assert rc == 2 and "unknown governor 'nope'" in err and err.count("\n") == 1
    rc, _, err = cli(capsys, "govern", "--policy", "mlg", "--layers", "4", "--", "true")
    assert rc == 2 and "needs --model FILE" in err and "mlg-paper" in err
    rc, _, err = cli(capsys, "govern", "--policy", "mlg-paper", "--layers", "12", "--avg-seq-len", "60",
                     "--sysfs-root", orin_jp6.root, "--", "true")
    assert rc == 2 and "reads gpu_util_pct" in err and "never filled in" in err and "pass --gpu-util" in err
    rc, _, err = cli(capsys, "govern", *PAPER, "--sysfs-root", tmp_path, "--", "true")
    assert rc == 2 and "no Jetson GPU clock control" in err and "--backend sim" in err
    rc, _, err = cli(capsys, "govern", *PAPER, "--max-slowdown", "10", "--", "true")
    assert rc == 2 and "needs a time model" in err and "--time-model FILE" in err
    assert limits(orin_jp6) == ORIGINAL


def test_govern_accepts_what_its_help_and_the_readme_list(capsys):
    """--policy's choices come from the registry: every governor, and ``recommended``."""
    import re
    from pathlib import Path

    names = [*R.names(), "recommended"]
    from dvfslab.cli import main

    with pytest.raises(SystemExit) as done:
        main(["govern", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "--policy {" + ",".join(names) + "}" in out
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    row = re.search(r"`dvfslab govern --policy \{([^}]*)\}", readme)
    assert row and row.group(1).split(",") == names


def test_a_power_limit_governor_is_refused_by_govern(models, tmp_path):
    ffg = load_governor(models / "ffg.json")
    ffg.knob_ = "power_limit_w"
    save_governor(ffg, tmp_path / "watts.json")
    with pytest.raises(GovernorError, match="decides GPU power limit levels .W.; dvfslab govern sets the GPU clock"):
        load_policy("ffg", tmp_path / "watts.json")


def test_saved_curve_and_ffg_files_drive_govern(models, orin_jp6, capsys, fake_kernel_env):
    ffg = load_governor(models / "ffg.json")
    rc, out, _ = cli(capsys, "govern", "--policy", "ffg", "--model", models / "ffg.json", "--dry-run")
    assert rc == 0 and out.strip() == f"{ffg.level_:g}"
    feats = {"n_layers": 24, "hidden_size": 1024, "avg_seq_len": 50, "params_m": 335, "is_decoder": 0, "gpu_util_pct": 80}
    curve = load_governor(models / "curve.json", policy="curve")
    want = curve.decide(feats).level
    args = ["--layers", "24", "--hidden-size", "1024", "--avg-seq-len", "50", "--params-m", "335",
            "--model-type", "encoder", "--gpu-util", "80"]
    rc, out, _ = cli(capsys, "govern", "--policy", "curve", "--model", models / "curve.json", *args, "--dry-run")
    assert rc == 0 and float(out) == want
    # with a 0 % limit only levels predicted at least as fast as the baseline qualify (or none: default clock)
    limited = load_policy("curve", models / "curve.json", max_slowdown_pct=0.0).decide(feats).level
    hz = 0 if limited is None else round(limited * 1e6)
    rc, _, err = cli(capsys, "govern", "--policy", "curve", "--model", models / "curve.json", *args,
                     "--max-slowdown", "0", "--sysfs-root", orin_jp6.root, "--",
                     sys.executable, "-c", PINNED, orin_jp6.devfreq_link, hz)
    assert rc == (1 if limited is None else 7), err
    assert ("left to the board's default governor" in err) == (limited is None)
    assert limits(orin_jp6) == ORIGINAL
    # a level-only governor with a limit uses the curve model's time curve
    guarded = load_policy("ffg", models / "ffg.json", max_slowdown_pct=5.0, time_model=models / "curve.json")
    curves = curve.predict_curves(feats)
    pred = dict(zip(curves["level"], curves["time_rel"], strict=True))
    got = guarded.decide(feats).level
    assert got is None or pred[got] <= 1.05


def test_hf_config_features(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "num_hidden_layers": 6, "hidden_size": 512,
        "intermediate_size": 2048, "vocab_size": 50304}))
    feats = features_from_hf_config(tmp_path)
    assert feats["n_layers"] == 6 and feats["hidden_size"] == 512 and feats["is_decoder"] == 1.0
    assert feats["params_m"] == pytest.approx((6 * (4 * 512**2 + 2 * 512 * 2048) + 50304 * 512) / 1e6)
    rc, out, err = cli(capsys, "govern", "--policy", "mlg-paper", "--hf-config", tmp_path / "config.json",
                       "--avg-seq-len", "20", "--dry-run")
    assert rc == 0 and out.strip() == "510" and "mlg-paper: 510 MHz" in err  # 6 layers <= 7, 20 tokens <= 32.5
    rc, _, err = cli(capsys, "govern", "--policy", "mlg-paper", "--hf-config", tmp_path / "none.json", "--dry-run")
    assert rc == 2 and "none.json: Hugging Face config is missing" in err
    assert "save_pretrained" in err and "pipeline" not in err  # the pipeline writes no HF config


def test_sim_backend_locks_the_twin_not_this_machine(capsys):
    rc, _, err = cli(capsys, "govern", *PAPER, "--backend", "sim", "--", sys.executable, "-c", "pass")
    assert rc == 0 and "SIMULATED board" in err and "GPU locked at 816 MHz" in err and "clocks restored" in err


def test_dvfs_callback_takes_the_new_governors(models, orin_jp6, tmp_path):
    pytest.importorskip("transformers")
    from dvfslab.governors.online import OnlineGovernor
    from dvfslab.harness.finetune import DvfsCallback
    from dvfslab.hw.jetson.backend import open_backend

    backend = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "state")
    feats = {"n_layers": 24, "hidden_size": 1024, "avg_seq_len": 50, "params_m": 335, "is_decoder": 0, "gpu_util_pct": 80}
    curve = load_governor(models / "curve.json")
    for gov in (curve, load_policy("curve", models / "curve.json", max_slowdown_pct=150.0)):
        want = gov.decide(feats).level
        cb = DvfsCallback(backend, governor=gov, features=feats)
        cb.start()
        if want is not None:
            assert orin_jp6.state()["max_freq_hz"] == orin_jp6.state()["min_freq_hz"] == round(want * 1e6)
        cb.close()
        assert limits(orin_jp6) == ORIGINAL
    cb = DvfsCallback(backend, governor=OnlineGovernor(), features=feats)
    with pytest.raises(GovernorError, match="chosen during the run"):
        cb.start()
    cb.close()
    assert limits(orin_jp6) == ORIGINAL
