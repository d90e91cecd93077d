"""Crash safety of ``dvfslab sweep`` as a real process on a fake Jetson tree.

The sweep runs in a sub-process (``python -m dvfslab sweep``) against a fake AGX Orin sysfs
tree whose devfreq rules the sub-process emulates (the fake kernel injected through
``DVFSLAB_SYSFS_IO``), with the test-only ``SleepExecutor`` (each run waits a little, its
energy is what the sampler reads from the fake INA3221 rails). It is SIGKILLed at seeded random points, once while the GPU is
verifiably pinned, then resumed: the dataset must hold every planned run exactly once,
validate, and the fake clocks must be back where they started.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dvfslab.data.contract import load_dataset
from dvfslab.data.journal import read_journal
from dvfslab.sweep.plan import make_plan
from dvfslab.sweep.store import committed_run_ids
from dvfslab.testing.fake_sysfs import FAKE_KERNEL_IO, build_board

WORKLOADS = ["bert-small/sst2", "pythia-70m/mrpc"]
FREQS = ["306", "612", "1300.5"]
FAIL = "pythia-70m--mrpc__f612__r1"


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, DVFSLAB_SYSFS_IO=FAKE_KERNEL_IO, DVFSLAB_STATE_DIR=str(tmp_path / "state"),
             DVFSLAB_LOCK_DIR=str(tmp_path / "locks"), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    e["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), e.get("PYTHONPATH", "")])
    return e


def sweep_cmd(root: Path, out: Path, *extra: str, seconds: float = 0.15) -> list[str]:
    return [sys.executable, "-m", "dvfslab", "sweep", "--backend", "jetson", "--sysfs-root", str(root),
            "--out", str(out), "--workloads", *WORKLOADS, "--freqs", *FREQS, "--reps", "2",
            "--order", "shuffled", "--seed", "5", "--executor", "dvfslab.testing.executors:SleepExecutor",
            "--executor-opt", f"seconds={seconds}", "--idle-s", "0.05", "--cooldown-poll-s", "0.05",
            "--no-progress", *extra]


def clock_files(board) -> dict:
    """The fake devfreq state; retried because the fake tree's files are rewritten in place."""
    for _ in range(100):
        try:
            return board.state()
        except ValueError:  # read while the sub-process was rewriting the file
            time.sleep(0.005)
    return board.state()


def pinned(board) -> bool:
    st = clock_files(board)
    return st["min_freq_hz"] == st["max_freq_hz"] == st["cur_freq_hz"]


def settings(state: dict) -> dict:
    """What restoring gives back: governor and limits (cur_freq is the governor's to choose)."""
    return {k: state[k] for k in ("governor", "min_freq_hz", "max_freq_hz")}


def n_done(out: Path) -> int:
    """Runs committed so far: in the journal or already compacted into runs/."""
    return len(committed_run_ids(out))


def wait_until(pred, timeout_s: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"sweep exited early with {proc.returncode}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the sweep")
        time.sleep(0.01)


def test_sigkill_at_random_points_then_resume_gives_every_run_once(tmp_path, env):
    board = build_board(tmp_path / "root", "agx-orin-jp6")
    original = settings(board.state())
    out = tmp_path / "out"
    cmd = sweep_cmd(board.root, out, "--resume", "--executor-opt", f"fail={FAIL}", seconds=0.25)
    rng = random.Random(20261202)
    kills = pinned_kills = 0
    while kills < 4 and n_done(out) < 14:
        before = n_done(out)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if kills == 0:  # once while the GPU is verifiably pinned at a level
            wait_until(lambda: pinned(board), proc=proc)
            time.sleep(0.03)
        else:  # else at a random moment after the next commit (away from the fake's clock writes,
            # which, unlike real sysfs attributes, a kill could leave half-written)
            wait_until(lambda b=before: n_done(out) > b, proc=proc)
            time.sleep(rng.uniform(0.03, 0.25))
        proc.kill()
        proc.communicate()
        kills += 1
        if pinned(board):
            pinned_kills += 1
            assert list((tmp_path / "state").glob("gpu-clocks-*.json")), "pinned without a state file"
    assert kills == 4 and pinned_kills >= 1

    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 1, final.stderr  # 1: finished, with the injected failed run
    ds = load_dataset(out)
    plan = make_plan(WORKLOADS, [float(f) for f in FREQS], reps=2, order="shuffled", seed=5)
    assert sorted(ds.runs["run_id"]) == sorted(r.run_id for r in plan.runs)
    assert ds.runs["run_id"].is_unique and len(ds.runs) == 16
    status = ds.runs.set_index("run_id")["status"]
    assert status[FAIL] == "failed" and (status.drop(FAIL) == "ok").all()
    assert settings(clock_files(board)) == original
    assert not list((tmp_path / "state").glob("gpu-clocks-*.json"))
    # every MAXN run saw the board's own range, even right after a kill that left it pinned
    for path in (out / "runs").glob("*__maxn__*.json"):
        clocks = json.loads(path.read_text())["extras"]["clock_state"]
        assert clocks["min_freq_mhz"] == 306.0 and clocks["max_freq_mhz"] == 1300.5, path.name
    sessions = ds.meta["sweep"]["sessions"]
    assert len(sessions) == kills + 1
    assert any(s.get("clock_repair") for s in sessions[1:])  # a start repaired a pinned board


def test_lock_refuses_a_second_sweep_on_the_same_output_or_board(tmp_path, env):
    board = build_board(tmp_path / "root", "agx-orin-jp6")
    out = tmp_path / "out"
    first = subprocess.Popen(sweep_cmd(board.root, out, seconds=5.0), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (out / ".sweep.lock").exists() and (out / "plan.json").exists(), proc=first)
        holder = json.loads((out / ".sweep.lock").read_text())
        assert holder["pid"] == first.pid
        same_out = subprocess.run(sweep_cmd(board.root, out, "--resume"), env=env, capture_output=True,
                                  text=True, timeout=60)
        assert same_out.returncode == 2 and f"another sweep (pid {first.pid}" in same_out.stderr
        other_out = subprocess.run(sweep_cmd(board.root, tmp_path / "out2"), env=env, capture_output=True,
                                   text=True, timeout=60)
        assert other_out.returncode == 2 and "holds this board" in other_out.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=30)
    assert first.returncode == 130, err  # SIGTERM: interrupted cleanly
    assert not (out / ".sweep.lock").exists()
    assert clock_files(board)["min_freq_hz"] == 306_000_000 and clock_files(board)["max_freq_hz"] == 1_300_500_000


def test_sweep_does_not_take_over_clocks_a_live_process_holds(tmp_path, env):
    from dataclasses import replace

    from dvfslab.hw.jetson.backend import open_backend
    from dvfslab.hw.jetson.safety import make_saved

    board = build_board(tmp_path / "root", "agx-orin-jp6")
    backend = open_backend(io=board.io(), state_dir=tmp_path / "state")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        st = board.state()
        saved = make_saved(str(board.root), backend.clocks.node.rel, st["governor"], st["min_freq_hz"],
                           st["max_freq_hz"])
        backend.clocks.state_file.save(replace(saved, pid=holder.pid))
        out = tmp_path / "out"
        res = subprocess.run(sweep_cmd(board.root, out), env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and f"another dvfslab process (pid {holder.pid}" in res.stderr
        assert not (out / "runs").exists() or not list((out / "runs").glob("*.json"))
    finally:
        holder.kill()
        holder.wait()


def test_sigkill_between_journal_append_and_compaction(tmp_path, env):
    """Killed while a run is in progress after at least 3 commits: the committed runs are only in
    the journal (runs.csv still as the session began). A separate reader process validates the
    directory with every committed run; the resumed sweep runs the others, each run once."""
    board = build_board(tmp_path / "root", "agx-orin-jp6")
    out = tmp_path / "out"
    proc = subprocess.Popen(sweep_cmd(board.root, out, seconds=0.25), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_until(lambda: n_done(out) >= 3, proc=proc)
    wait_until(lambda: pinned(board), proc=proc)  # inside a run's measured window, away from the
    time.sleep(0.03)                               # fake's clock writes (see above)
    proc.kill()
    proc.communicate()
    committed = [rec["row"]["run_id"] for _, rec in read_journal(out)]
    assert len(committed) >= 3 and not list((out / "runs").glob("*.json"))
    assert (out / "runs.csv").read_text().count("\n") == 1  # header only: nothing compacted yet
    check = subprocess.run([sys.executable, "-m", "dvfslab", "validate", str(out)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and f"{len(committed)} runs" in check.stdout, check.stdout + check.stderr
    assert list(load_dataset(out).runs["run_id"]) == committed
    final = subprocess.run(sweep_cmd(board.root, out, "--resume"), env=env, capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    ds = load_dataset(out)
    assert len(ds.runs) == 16 and ds.runs["run_id"].is_unique and (ds.runs["status"] == "ok").all()
    assert ds.meta["sweep"]["sessions"][-1]["runs_done_before"] == len(committed)
    assert read_journal(out) == []


def test_ctrl_c_names_the_command_that_resumes_and_that_command_finishes_the_sweep(tmp_path, env):
    board = build_board(tmp_path / "root", "agx-orin-jp6")
    out = tmp_path / "out"
    cmd = [w for w in sweep_cmd(board.root, out, seconds=0.25) if w != "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the child reports each committed run on standard error (not a terminal): wait for the first
    # report, then for the fake clocks to be pinned by the next run; no sleep, whatever the load
    seen = []
    while not seen or not seen[-1].startswith("sweep [1/16] "):
        line = proc.stderr.readline()
        assert line, f"sweep exited early with {proc.wait()}: {''.join(seen)}"
        seen.append(line)
    wait_until(lambda: pinned(board), proc=proc)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    # the same board, executor and session options; the plan's own are in plan.json
    resume = (f"dvfslab sweep --backend jetson --out {out} --resume --sysfs-root {board.root} "
              "--cooldown-poll-s 0.05 --idle-s 0.05 "
              "--executor dvfslab.testing.executors:SleepExecutor --executor-opt seconds=0.25")
    assert err.strip().splitlines()[-1] == (f"dvfslab sweep: interrupted; the runs finished so far are saved in "
                                            f"{out}; continue with: {resume}")
    words = shlex.split(resume)
    assert words[0] == "dvfslab"
    final = subprocess.run([sys.executable, "-m", "dvfslab", *words[1:]], env=env, capture_output=True,
                           text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    ds = load_dataset(out)
    assert len(ds.runs) == 16 and ds.runs["run_id"].is_unique
    assert settings(clock_files(board))["max_freq_hz"] == 1_300_500_000
