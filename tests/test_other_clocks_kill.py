"""The other clocks survive signals: a sweep SIGKILLed while the GPU, the EMC and the CPU clusters
are pinned is repaired by the next start, and ``dvfslab run --emc max --cpu max`` restores all
three on SIGTERM. The processes are real (``python -m dvfslab``) on the fake AGX Orin, the fake
kernel injected by ``DVFSLAB_SYSFS_IO``; each test waits on what the child reports (the sweep's
ReportingExecutor writes a file once a run's clocks are pinned; the command of ``dvfslab run``
writes its pid once started), never on a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dvfslab.data.contract import load_dataset
from dvfslab.testing.fake_sysfs import FAKE_KERNEL_IO, build_board

WORKLOAD = "bert-small/sst2"
GPU = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}
EMC_IDLE = {"rate_hz": 2133000000, "locked": 0}
CPU_MAXN = {"governor": "schedutil", "min": 729600, "max": 2201600}
CHILD = ("import os,sys,time; open(sys.argv[1] + '.tmp','w').write(str(os.getpid())); "
         "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(120)")


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, DVFSLAB_SYSFS_IO=FAKE_KERNEL_IO, DVFSLAB_STATE_DIR=str(tmp_path / "state"),
             DVFSLAB_LOCK_DIR=str(tmp_path / "locks"), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    e["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), e.get("PYTHONPATH", "")])
    return e


def gpu(board) -> dict:
    return {k: v for k, v in board.state().items() if k in GPU}


def cpu_limits(board) -> dict:
    return {name: {k: st[k] for k in CPU_MAXN} for name, st in board.cpu_state().items()}


def wait_for_report(path: Path, proc: subprocess.Popen, timeout_s: float = 120.0) -> dict:
    """The child's report, once it has written it (the child's own exit or a timeout fails)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the child exited with {proc.returncode} before reporting: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no report from the child: {proc.communicate()}")
        time.sleep(0.02)
    return json.loads(path.read_text())


def sweep_cmd(board, out: Path, report: Path, seconds: float, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dvfslab", "sweep", "--backend", "jetson", "--sysfs-root", str(board.root),
            "--out", str(out), "--workloads", WORKLOAD, "--freqs", "612", "1300.5", "--order", "sequential",
            "--executor", "dvfslab.testing.reporting:ReportingExecutor", "--executor-opt", f"report={report}",
            "--executor-opt", f"seconds={seconds}", "--idle-s", "0.02", "--cooldown-poll-s", "0.02",
            "--no-progress", *extra]


def test_sigkill_mid_sweep_leaves_all_three_pinned_and_the_next_start_repairs_them(tmp_path, env):
    board = build_board(tmp_path / "orin", "agx-orin-jp6")
    out, report = tmp_path / "out", tmp_path / "report.json"
    proc = subprocess.Popen(sweep_cmd(board, out, report, 120.0), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    said = wait_for_report(report, proc)  # the first fixed run (612 MHz), its clocks pinned
    assert said["run_id"] == "bert-small--sst2__f612__r0" and said["clocks_mhz"] == {"emc": 3199.0, "cpu": 2201.6}
    proc.kill()
    proc.communicate(timeout=60)
    # left as they were when killed: the GPU at 612 MHz, the EMC locked at 3199, every cluster at 2201.6
    assert board.state()["min_freq_hz"] == board.state()["max_freq_hz"] == 612000000
    assert board.emc_state() == {"rate_hz": 3199000000, "locked": 1}
    assert all(st["min"] == st["max"] == 2201600 for st in board.cpu_state().values())
    (state_file,) = (tmp_path / "state").glob("gpu-clocks-*.json")
    saved = json.loads(state_file.read_text())
    assert saved["others"]["emc"] == {"mrq_rate_locked": 0, "rate_hz": 2133000000}
    assert saved["others"]["cpu"]["policies"]["policy0"] == {"governor": "schedutil", "min_khz": 729600,
                                                              "max_khz": 2201600}

    report.unlink()
    resumed = subprocess.run(sweep_cmd(board, out, report, 0.02, "--resume"), env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    ds = load_dataset(out)
    assert sorted(ds.runs["run_id"]) == ["bert-small--sst2__f1300.5__r0", "bert-small--sst2__f612__r0",
                                         "bert-small--sst2__maxn__r0"]
    # the repair ran first: the MAXN run saw the board's own EMC, the fixed runs the pins
    runs = ds.runs.set_index("run_id")
    assert runs.loc["bert-small--sst2__maxn__r0", "emc_freq_mhz"] == 2133.0
    assert (runs[runs["policy"] == "fixed"]["emc_freq_mhz"] == 3199.0).all()
    repair = ds.meta["sweep"]["sessions"][-1]["clock_repair"]["restored_from_state_file"]
    assert "others={'emc'" in repair
    assert gpu(board) == GPU and board.emc_state() == EMC_IDLE
    assert cpu_limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")}
    assert not list((tmp_path / "state").glob("gpu-clocks-*.json"))


def test_sigterm_to_run_restores_the_gpu_the_emc_and_the_cpus(tmp_path, env):
    board = build_board(tmp_path / "orin", "agx-orin-jp6")
    marker = tmp_path / "child.pid"
    proc = subprocess.Popen([sys.executable, "-m", "dvfslab", "run", "--freq", "612", "--emc", "max", "--cpu", "1728",
                             "--sysfs-root", str(board.root), "--", sys.executable, "-c", CHILD, str(marker)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_report(marker, proc)  # the command runs: every clock was pinned before it started
    assert board.emc_state() == {"rate_hz": 3199000000, "locked": 1}
    assert all(st["min"] == st["max"] == st["cur"] == 1728000 for st in board.cpu_state().values())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "EMC (memory clock) pinned at 3199 MHz; read back 3199 MHz (BPMP rate)" in err
    assert gpu(board) == GPU and board.emc_state() == EMC_IDLE
    assert cpu_limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")}
    assert not list((tmp_path / "state").glob("gpu-clocks-*.json"))
