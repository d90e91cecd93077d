"""``dvfslab govern`` applies a joint model's setting live (issue 37 item 3): the GPU, the EMC and the
CPU clusters locked together on the fake AGX Orin, verified in its files, restored after the job
and, after SIGKILL, by the next start; a setting the board cannot set is refused before the job.

The joint FFG below is written by hand: three settings, its level the index 1 =
GPU 612 MHz x EMC 3199 MHz x CPU 1728 MHz. The fake Orin's tables (docs/hardware.md): EMC 204,
665.6, 2133, 3199 MHz (2133 unlocked at rest); CPU 115.2 ... 2201.6 MHz (schedutil, 729.6-2201.6
at rest). The processes are real (``python -m dvfslab``), the synthetic job waits for govern's
handshake (tests/test_govern_job.py); each test waits on what the child reports, never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from test_cli_hardware import ORIGINAL, cli, limits
from test_govern_job import FAKE_JOB_IO, fake_job_board, govern, read_log
from test_other_clocks_kill import CPU_MAXN, EMC_IDLE, wait_for_report

from dvfslab.governors.files import save_governor
from dvfslab.governors.registry import make
from dvfslab.testing.fake_sysfs import build_board

KNOBS = ["gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz"]
SETTINGS = [[306.0, 2133.0, 729.6], [612.0, 3199.0, 1728.0], [1300.5, 3199.0, 2201.6]]
ORIN = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


@pytest.fixture
def job_board(tmp_path):
    """The fake AGX Orin running tests/test_govern_job.py's hand-written synthetic job."""
    return fake_job_board(tmp_path)


def _joint_run(tmp_path, settings=SETTINGS, level=1.0):
    gov = make("ffg")
    gov.level_, gov.level_table_, gov.knob_ = level, [float(i) for i in range(len(settings))], "setting"
    run = tmp_path / "run"
    (run / "models").mkdir(parents=True, exist_ok=True)
    save_governor(gov, run / "models" / "ffg.json", {"name": "Jetson AGX Orin", "knob": "setting",
                                                     "levels": gov.level_table_, "knobs": KNOBS, "settings": settings})
    return run


def _pinned(board) -> tuple[dict, dict, dict]:
    cpu = {p: (st["min"], st["max"]) for p, st in board.cpu_state().items()}
    return limits(board), board.emc_state(), cpu


def _at_rest(board) -> bool:
    cpu = {p: {k: st[k] for k in CPU_MAXN} for p, st in board.cpu_state().items()}
    return limits(board) == ORIGINAL and board.emc_state() == EMC_IDLE and all(v == CPU_MAXN for v in cpu.values())


def test_the_dry_run_names_the_setting_s_clocks(tmp_path, orin_jp6, capsys, fake_kernel_env):
    run = _joint_run(tmp_path)
    rc, out, err = cli(capsys, "govern", "--policy", "ffg", "--model", f"{run}/", "--sysfs-root", orin_jp6.root,
                       "--dry-run")
    assert rc == 0, err
    assert out.strip() == "setting 1: GPU 612 MHz × EMC 3199 MHz × CPU 1728 MHz"
    assert "3 joint settings of GPU × EMC × CPU" in err


def test_a_joint_setting_is_locked_verified_and_restored_after_the_job(job_board, tmp_path):
    run = _joint_run(tmp_path)
    log = tmp_path / "joint.jsonl"
    rc, _, err = govern(job_board, "--policy", "ffg", "--model", f"{run}/", "--progress", "steps", "--log", log,
                        steps=150)
    assert rc == 0, err
    windows, summary = read_log(log)
    decision = next(json.loads(x) for x in log.read_text().splitlines() if '"event": "decision"' in x)
    assert decision["level"] == 1.0 and decision["setting"] == "setting 1: GPU 612 MHz × EMC 3199 MHz × CPU 1728 MHz"
    assert {w["level"] for w in windows if w["phase"] == "hold"} == {1.0}
    assert summary["chosen_level"] == 1.0
    assert _at_rest(job_board), _pinned(job_board)


def test_a_joint_setting_held_in_the_files_and_repaired_after_sigkill(job_board, tmp_path):
    run = _joint_run(tmp_path)
    ready = tmp_path / "ready"
    proc = govern(job_board, "--policy", "ffg", "--model", f"{run}/", "--progress", "steps", steps=600,
                  job_args=["--ready", ready, "--ready-at", "400", "--hang"], wait=False)
    child = wait_for_report(ready, proc, timeout_s=300)  # govern handled step 400: the setting is held
    gpu, emc, cpu = _pinned(job_board)
    assert gpu["min_freq_hz"] == gpu["max_freq_hz"] == 612000000
    assert job_board.state()["cur_freq_hz"] == 612000000
    assert emc == {"rate_hz": 3199000000, "locked": 1}
    assert set(cpu.values()) == {(1728000, 1728000)}
    proc.kill()
    proc.wait(timeout=30)
    os.kill(child, signal.SIGKILL)  # orphaned, waiting for govern's handshake
    proc.communicate(timeout=30)
    assert _pinned(job_board) == (gpu, emc, cpu)  # left as killed: the state file holds the originals
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_JOB_IO}
    r = subprocess.run([sys.executable, "-m", "dvfslab", "clocks", "--restore", "--sysfs-root", job_board.root],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert _at_rest(job_board), _pinned(job_board)


def test_a_setting_the_board_cannot_set_is_refused_before_the_job(job_board, tmp_path):
    """EMC 1600 MHz is no level of the fake Orin's EMC (204, 665.6, 2133, 3199): refused in one line
    naming the setting, nothing changed; so is one on the twin, whose EMC clock is not read back."""
    run = _joint_run(tmp_path, settings=[SETTINGS[0], [612.0, 1600.0, 1728.0], SETTINGS[2]])
    rc, out, err = govern(job_board, "--policy", "ffg", "--model", f"{run}/", "--progress", "steps", steps=10)
    assert rc == 2 and err.count("\n") == 1, err
    assert "joint setting 1 (GPU 612 MHz × EMC 1600 MHz × CPU 1728 MHz)" in err and "not a level of the EMC" in err
    assert "refused before the job starts" in err and out == ""
    assert _at_rest(job_board)
    run = _joint_run(tmp_path)
    rc, _, err = govern(job_board, "--policy", "ffg", "--model", f"{run}/", "--emc", "max", "--progress", "steps",
                        steps=10)
    assert rc == 2 and "drop --emc" in err and _at_rest(job_board)
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "ffg", "--model", f"{run}/",
                        "--backend", "sim", "--progress", "steps", "--", "true"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "EMC (memory clock, simulated), which cannot be read back here" in r.stderr, r.stderr


def test_the_python_api_locks_a_joint_setting_and_gives_every_clock_back(tmp_path):
    """``joint_board(jetson_board(io), governor)``: the board a ``GovernedRun`` takes; its level 1
    locks the three clocks of setting 1, the default gives them back."""
    from dvfslab.governors.files import load_governor
    from dvfslab.job import jetson_board, joint_board
    from dvfslab.testing.fake_kernel import FakeKernelIO

    board = build_board(tmp_path / "orin", "agx-orin-jp6")
    gov = load_governor(_joint_run(tmp_path) / "models" / "ffg.json", policy="ffg")
    jb = joint_board(jetson_board(FakeKernelIO(board.root), tmp_path / "state"), gov)
    assert jb.levels == [0.0, 1.0, 2.0] and not jb.clock_knob
    jb.set_level(1.0)
    gpu, emc, cpu = _pinned(board)
    assert gpu["min_freq_hz"] == gpu["max_freq_hz"] == 612000000 and emc == {"rate_hz": 3199000000, "locked": 1}
    assert set(cpu.values()) == {(1728000, 1728000)}
    jb.set_level(None)
    assert _at_rest(board)
    jb.close()


def test_a_joint_sweep_s_board_record_carries_its_settings():
    from types import SimpleNamespace

    from dvfslab.governors.files import board_of

    sweep = SimpleNamespace(dataset="", knob=SimpleNamespace(name="setting"), level_table=[0, 1],
                            joint_knobs=("gpu_freq_mhz", "emc_freq_mhz"), settings=((306, 2133), (612, 3199)))
    assert board_of(sweep) == {"name": "unnamed board", "knob": "setting", "levels": [0.0, 1.0],
                               "knobs": ["gpu_freq_mhz", "emc_freq_mhz"],
                               "settings": [[306.0, 2133.0], [612.0, 3199.0]]}
