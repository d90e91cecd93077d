"""``dvfslab govern`` around a running command (issue 29): measuring governors probe a synthetic
job on the fake AGX Orin tree and end at the hand-computed optimum; progress from output lines
(``step N``, the Hugging Face tqdm bar), a file and a Prometheus counter; a stretch with no
progress is not a measurement; failure, SIGINT and SIGKILL restore (or leave for repair) the clocks.

The synthetic job (:mod:`dvfslab.testing.fake_job`) runs on a virtual clock and waits for govern
to handle each step, so every window reads exactly its level's figures; the U-curve below is
written by hand and its energies computed by hand in the comments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from test_cli_hardware import ORIGINAL, gone, limits, wait_for

from dvfslab.job.progress import LineProgress, ProgressFeed
from dvfslab.testing.fake_job import write_spec
from dvfslab.testing.fake_sysfs import build_board

FAKE_JOB_IO = "dvfslab.testing.fake_job:FakeJobIO"
LEVELS = [306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5]
# the hand-written U-curve: step time t(l) = 0.02 + 6 / l s; GPU rail P(l) mW (a rounded
# 2000 + 0.004 l^2); the CPU rail is held at 1000 mW, so a step costs E(l) = (P(l) + 1000) t(l) mJ:
STEP_TIME_S = {306: 0.02 + 6 / 306, 408: 0.02 + 6 / 408, 510: 0.02 + 6 / 510, 612: 0.02 + 6 / 612,
               714: 0.02 + 6 / 714, 816: 0.02 + 6 / 816, 918: 0.02 + 6 / 918, 1020: 0.02 + 6 / 1020,
               1122: 0.02 + 6 / 1122, 1224: 0.02 + 6 / 1224, 1300.5: 0.02 + 6 / 1300.5}
GPU_MW = {306: 2375, 408: 2666, 510: 3040, 612: 3498, 714: 4039, 816: 4663, 918: 5371, 1020: 6162,
          1122: 7036, 1224: 7993, 1300.5: 8765}
# E(l), J per step, by hand:
#   306: 3.375 W x 0.039608 s = 0.133676     408: 3.666 W x 0.034706 s = 0.127232
#   510: 4.040 W x 0.031765 s = 0.128329     612: 4.498 W x 0.029804 s = 0.134059
#   816: 5.663 W x 0.027353 s = 0.154899     1300.5: 9.765 W x 0.024614 s = 0.240352
# so the least energy per step is at 408 MHz (0.127232 J), 510 next (0.128329 J, 0.9 % more).
HAND_E_J = {306: 0.133676, 408: 0.127232, 510: 0.128329, 612: 0.134059, 816: 0.154899, 1300.5: 0.240352}
OPTIMUM = 408.0
CPU_MW = 1000


def fake_job_board(tmp_path):
    """The fake AGX Orin running this module's hand-written synthetic job."""
    board = build_board(tmp_path / "orin", "agx-orin-jp6")
    board.set_rail("VDD_CPU_CV", CPU_MW, mv=1000, ma=CPU_MW)
    write_spec(board.root, {**STEP_TIME_S, "default": STEP_TIME_S[1300.5]}, {**GPU_MW, "default": GPU_MW[1300.5]})
    return board


@pytest.fixture
def job_board(tmp_path):
    return fake_job_board(tmp_path)


def govern(board, *argv, steps: int, job_args=(), wait: bool = True, **kw):
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_JOB_IO}
    cmd = [sys.executable, "-m", "dvfslab", "govern", *map(str, argv), "--sysfs-root", str(board.root), "--",
           sys.executable, "-m", "dvfslab.testing.fake_job", str(board.root), "--steps", str(steps), *map(str, job_args)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def read_log(path: Path) -> tuple[list[dict], dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [r for r in rows if "phase" in r], rows[-1]


def check_energies(windows: list[dict]) -> set[float]:
    """Every probe and hold window's energy per step is the hand figure of its level (to 0.1 %,
    the rounding of the hand figures to six digits)."""
    seen = set()
    for w in windows:
        if w["phase"] in ("probe", "hold") and w["measurement"] and w["level"] in HAND_E_J:
            assert w["energy_per_unit_j"] == pytest.approx(HAND_E_J[w["level"]], rel=1e-3), w
            seen.add(w["level"])
        if w["phase"] == "baseline":
            assert w["energy_per_unit_j"] == pytest.approx(HAND_E_J[1300.5], rel=1e-3), w
    return seen


@pytest.mark.parametrize("policy, steps", [("search", 120), ("online", 200)])
def test_a_measuring_governor_ends_at_the_hand_optimum(job_board, tmp_path, policy, steps):
    log = tmp_path / "govern.jsonl"
    rc, out, err = govern(job_board, "--policy", policy, "--progress", "steps", "--log", log, steps=steps)
    assert rc == 0, err
    # the command's output passed through byte for byte (govern writes only to stderr)
    assert out == "fake job: loading\n" + "".join(f"step {k} loss 0.5\n" for k in range(1, steps + 1))
    windows, s = read_log(log)
    assert s["summary"] is True and s["chosen_level"] == OPTIMUM and s["decided"] and s["probes"] >= 3
    seen = check_energies(windows)
    assert OPTIMUM in seen and ({306.0, 510.0} <= seen)  # the neighbours were probed and read as by hand
    # the saving against the default clock: 1 - 0.127232 / 0.240352 = 47.06 %; every window reads exactly
    assert s["saving_pct"] == pytest.approx(47.06, abs=0.1)
    assert s["saving_pct_ci"][0] <= s["saving_pct"] <= s["saving_pct_ci"][1]
    assert limits(job_board) == ORIGINAL and "clocks restored" in err


@pytest.mark.parametrize("policy, extra, steps", [("voi", (), 200), ("zeus", ("--eta", "1"), 800)])
def test_voi_and_zeus_end_at_the_hand_optimum(job_board, tmp_path, policy, extra, steps):
    """voi from its untrained prior (no pipeline folder: U-shaped curves only) and Zeus's live
    optimizer (every level from the top down; eta = 1: energy alone, so the hand optimum is its
    pick) end at 408 MHz; every level they read, they read as by hand."""
    log = tmp_path / "govern.jsonl"
    rc, _, err = govern(job_board, "--policy", policy, *extra, "--progress", "steps", "--log", log, steps=steps)
    assert rc == 0, err
    windows, s = read_log(log)
    assert s["chosen_level"] == OPTIMUM and s["probes"] >= 2
    assert OPTIMUM in check_energies(windows)
    assert limits(job_board) == ORIGINAL and "clocks restored" in err


def test_replay_prints_the_summary_again(job_board, tmp_path):
    log = tmp_path / "govern.jsonl"
    rc, _, err = govern(job_board, "--policy", "zeus-sim", "--progress", "steps", "--log", log, steps=80)
    assert rc == 0, err
    again = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--replay", str(log)], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0
    assert "zeus-sim: held 408" in again.stdout and "whole job vs the default clock: saving" in again.stdout
    assert "held level vs the default clock" in again.stdout


# A recorded Hugging Face Trainer run's stderr (tqdm bar with carriage returns, an evaluation
# bar of another total in between, the Trainer's log dicts on stdout): 5 training steps.
HF_RECORDED = ("  0%|          | 0/5 [00:00<?, ?it/s]\r 20%|##        | 1/5 [00:01<00:04,  1.02s/it]"
               "\r 40%|####      | 2/5 [00:02<00:03,  1.01s/it]\n"
               "{'loss': 0.6931, 'grad_norm': 1.23, 'learning_rate': 4e-05, 'epoch': 0.4}\n"
               "\n  0%|          | 0/12 [00:00<?, ?it/s]\r 50%|#####     | 6/12 [00:00<00:00, 40.1it/s]"
               "\r100%|##########| 12/12 [00:00<00:00, 41.0it/s]\n"
               "{'eval_loss': 0.69, 'eval_runtime': 0.3, 'epoch': 0.4}\n"
               "\r 60%|######    | 3/5 [00:04<00:03,  1.40s/it]\r 80%|########  | 4/5 [00:05<00:01,  1.20s/it]"
               "\r100%|##########| 5/5 [00:06<00:00,  1.10s/it]\n")


def test_the_hf_preset_reads_the_training_bar_of_a_recorded_trainer_output():
    feed = ProgressFeed()
    parser = LineProgress(feed, preset="hf")
    for i in range(0, len(HF_RECORDED), 7):  # in chunks, as a pipe delivers it
        parser.feed_text(HF_RECORDED[i:i + 7])
    parser.flush()
    totals = []
    while not feed._q.empty():
        totals.append(feed.get(0)[0])
    # the training bar's steps 1..5 in order; the 12-step evaluation bar is not progress
    assert totals == [1, 2, 3, 4, 5] and feed.unit == "step"
    # the job's length is the training bar's total (.../5), not the evaluation bar's 12
    assert feed.job_units == 5
    logs_only = ProgressFeed()
    p2 = LineProgress(logs_only, preset="hf")
    p2.feed_text("{'loss': 0.69, 'epoch': 0.25}\n{'loss': 0.5, 'epoch': 0.5}\n")
    assert [logs_only.get(0)[0], logs_only.get(0)[0]] == [0.25, 0.5] and logs_only.unit == "epoch"


def test_hf_preset_drives_the_search_to_the_optimum(job_board, tmp_path):
    log = tmp_path / "hf.jsonl"
    rc, _, err = govern(job_board, "--policy", "search", "--progress", "hf", "--log", log, steps=120,
                        job_args=["--format", "hf"])
    assert rc == 0, err
    assert "120/120 [" in err  # the bar reached the terminal unchanged
    windows, s = read_log(log)
    assert s["chosen_level"] == OPTIMUM and OPTIMUM in check_energies(windows)


class _Counter(BaseHTTPRequestHandler):
    path_file: Path

    def do_GET(self):  # noqa: N802 (http.server's name)
        try:
            n = float(self.server.counter_file.read_text())
        except (FileNotFoundError, ValueError):
            n = 0.0
        body = ("# HELP nv_inference_count Number of inferences performed\n# TYPE nv_inference_count counter\n"
                f'nv_inference_count{{model="bert",version="1"}} {n}\n'
                'nv_inference_count{model="other",version="1"} 0\n'
                "# TYPE nv_gpu_utilization gauge\nnv_gpu_utilization{gpu_uuid=\"GPU-0\"} 0.5\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_prometheus_counter_is_the_progress(job_board, tmp_path):
    counter = tmp_path / "count.txt"
    server = HTTPServer(("127.0.0.1", 0), _Counter)
    server.counter_file = counter
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        log = tmp_path / "prom.jsonl"
        rc, _, err = govern(job_board, "--policy", "search", "--progress-url", url, "--progress-metric",
                            "nv_inference_count", "--poll-s", "0.01", "--log", log, steps=120,
                            job_args=["--format", "count", "--progress-file", counter])
    finally:
        server.shutdown()
    assert rc == 0, err
    windows, s = read_log(log)
    assert s["chosen_level"] == OPTIMUM and s["unit"] == "request" and OPTIMUM in check_energies(windows)


def test_a_progress_file_with_one_line_per_unit(job_board, tmp_path):
    log = tmp_path / "file.jsonl"
    rc, _, err = govern(job_board, "--policy", "search", "--progress-file", tmp_path / "steps.log", "--poll-s",
                        "0.01", "--log", log, steps=120, job_args=["--format", "file", "--progress-file",
                                                                     tmp_path / "steps.log"])
    assert rc == 0, err
    windows, s = read_log(log)
    assert s["chosen_level"] == OPTIMUM and OPTIMUM in check_energies(windows)


def test_a_stretch_with_no_progress_is_not_a_measurement(job_board, tmp_path):
    log = tmp_path / "silent.jsonl"
    # after step 25 (while probing) the job evaluates for 60 virtual s without a step
    rc, _, err = govern(job_board, "--policy", "search", "--progress", "steps", "--log", log, steps=140,
                        job_args=["--silent-after", "25", "--silent-s", "60"])
    assert rc == 0, err
    windows, s = read_log(log)
    silent = [w for w in windows if not w["measurement"]]
    assert len(silent) == 1 and "no progress" in silent[0]["why"] and "not a measurement" in silent[0]["why"]
    assert "not a measurement" in err and s["no_progress_windows"] == 1
    # no measured window contains the 60 s: each still reads its level's hand figure
    assert s["chosen_level"] == OPTIMUM and OPTIMUM in check_energies(windows)


def test_a_failing_command_restores_the_clocks_and_says_the_job_ended_while_probing(job_board, tmp_path):
    log = tmp_path / "fail.jsonl"
    rc, _, err = govern(job_board, "--policy", "search", "--progress", "steps", "--log", log, steps=120,
                        job_args=["--fail-at", "20"])
    assert rc == 3, err
    _, s = read_log(log)
    assert s["decided"] is False and "ended" in s["note"] and s["exit_code"] == 3
    assert limits(job_board) == ORIGINAL


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_restores_and_exits_128_plus_it(job_board, tmp_path, sig):
    ready = tmp_path / "ready"
    proc = govern(job_board, "--policy", "search", "--progress", "steps", "--log", tmp_path / "sig.jsonl",
                  steps=500, job_args=["--ready", ready, "--ready-at", "20", "--hang"], wait=False)
    child = wait_for(ready, proc)
    st = job_board.state()
    assert st["min_freq_hz"] == st["max_freq_hz"]  # probing: a level is locked
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert limits(job_board) == ORIGINAL and gone(child)
    _, s = read_log(tmp_path / "sig.jsonl")
    assert s["exit_code"] == 128 + sig and signal.Signals(sig).name in s["note"]


def test_sigkill_leaves_the_state_file_for_the_repair(job_board, tmp_path):
    ready = tmp_path / "ready"
    proc = govern(job_board, "--policy", "search", "--progress", "steps", steps=500,
                  job_args=["--ready", ready, "--ready-at", "20", "--hang"], wait=False)
    child = wait_for(ready, proc)
    proc.kill()
    proc.wait(timeout=30)
    os.kill(child, signal.SIGKILL)  # orphaned, waiting for govern's handshake
    proc.communicate(timeout=30)
    st = job_board.state()
    assert st["min_freq_hz"] == st["max_freq_hz"]  # left pinned
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_JOB_IO}
    # the next governed run adopts the state file and restores the originals at its end
    rc, _, err = govern(job_board, "--policy", "search", "--progress", "steps", steps=120)
    assert rc == 0, err
    assert limits(job_board) == ORIGINAL
    again = subprocess.run([sys.executable, "-m", "dvfslab", "clocks", "--restore", "--sysfs-root", job_board.root],
                           env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing to restore" in again.stdout


def test_a_measuring_governor_without_a_progress_source_is_refused_in_one_line(job_board):
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_JOB_IO}
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "online", "--sysfs-root",
                        str(job_board.root), "--", "true"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "progress source" in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "oracle", "--progress", "steps",
                        "--sysfs-root", str(job_board.root), "--", "true"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "cannot govern a new job" in r.stderr and r.stderr.count("\n") == 1
    # Zeus's eta is a weight in [0, 1] (zeus/utils/metric.py): 2 is refused in one line
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "search", "--eta", "2",
                        "--progress", "steps", "--sysfs-root", str(job_board.root), "--", "true"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "eta must be between 0 and 1" in r.stderr and r.stderr.count("\n") == 1


def test_the_rehearsal_runs_the_doctor_on_a_fake_orin_tree():
    r = subprocess.run([sys.executable, "-m", "dvfslab.testing.rehearse"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("REHEARSAL: dvfslab doctor on a fake agx-orin-jp6 tree")
    assert "ok    lock: 306 and 1300.5 MHz locked" in r.stdout and "0 fail" in r.stdout
    help_text = subprocess.run([sys.executable, "-m", "dvfslab", "doctor", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    assert "python -m dvfslab.testing.rehearse" in help_text


def test_the_simulated_board_runs_end_to_end_and_says_so(tmp_path):
    log = tmp_path / "sim.jsonl"
    job = "import sys\nfor i in range(1, 121): print('step', i)\n"
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "search", "--backend", "sim",
                        "--progress", "steps", "--log", str(log), "--", sys.executable, "-c", job],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    windows, s = read_log(log)
    assert s["simulated"] is True and all(w["simulated"] for w in windows) and "SIMULATED" in r.stderr
    assert s["decided"] and s["chosen_level"] in LEVELS and s["probes"] >= 3


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """A pipeline output folder as `dvfslab pipeline` leaves it: summary.json with the
    recommendation and models/ffg.json (FFG fitted on a toy sweep)."""
    from analysis_fixtures import make_dataset

    from dvfslab import analysis as F
    from dvfslab.data.contract import load_dataset
    from dvfslab.governors.files import save_governor
    from dvfslab.governors.static import FixedGovernor

    root = tmp_path_factory.mktemp("run")
    sweep = F.sweep_from_dataset(load_dataset(make_dataset(root / "ds")))
    table = F.feature_table(sweep)
    data = F.TrainingData(sweep, table, list(table.loc[table["split"] == "characterization", "workload_id"]))
    (root / "out" / "models").mkdir(parents=True)
    ffg = FixedGovernor().fit(data)
    ffg.level_ = 1122.0  # not the table's middle (816), where a search without a prior starts
    save_governor(ffg, root / "out" / "models" / "ffg.json")
    return root / "out"


def test_the_recommended_governor_runs_from_the_pipeline_folder(job_board, tmp_path, pipeline_run):
    from dvfslab.core.levels import snap_mhz

    (pipeline_run / "summary.json").write_text(json.dumps({"recommended": {"policy": "search"}}))
    log = tmp_path / "rec.jsonl"
    rc, _, err = govern(job_board, "--policy", "recommended", "--model", f"{pipeline_run}/", "--progress", "steps",
                        "--log", log, steps=140)
    assert rc == 0, err
    windows, s = read_log(log)
    assert s["policy"] == "search" and s["chosen_level"] == OPTIMUM
    ffg_level = json.loads((pipeline_run / "models" / "ffg.json").read_text())["state"]["level"]
    first_probe = next(w for w in windows if w["phase"] == "probe")
    assert first_probe["level"] == snap_mhz(ffg_level, LEVELS) == 1122  # started from the run's FFG level
    (pipeline_run / "summary.json").write_text(json.dumps({"recommended": {"policy": "zeus-sim"}}))
    rc, _, err = govern(job_board, "--policy", "recommended", "--model", pipeline_run, "--progress", "steps",
                        "--log", log, steps=80)
    assert rc == 0, err
    _, s = read_log(log)
    assert s["policy"] == "zeus-sim" and s["chosen_level"] == OPTIMUM
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_JOB_IO}
    r = subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", "recommended", "--progress", "steps",
                        "--sysfs-root", str(job_board.root), "--", "true"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "needs --model RUN/" in r.stderr and r.stderr.count("\n") == 1


def test_the_nvml_backend_probes_a_discrete_gpu_and_resets_its_locked_clocks(monkeypatch, capsys, tmp_path):
    """On a fake A100 (pynvml; real time, constant 60 W): the search probes, holds a level of the
    card's table, the locked clocks are reset at the end. The job prints a step every few ms."""
    from dvfslab.cli import main
    from dvfslab.testing import fake_pynvml

    mod = fake_pynvml.make_module([fake_pynvml.FakeGpu(power_mw=60000.0)])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    log = tmp_path / "nvml.jsonl"
    job = "import time\nfor i in range(1, 401):\n    time.sleep(0.005)\n    print('step', i, flush=True)\n"
    rc = main(["govern", "--policy", "search", "--backend", "nvml", "--progress", "steps", "--log", str(log), "--",
               sys.executable, "-c", job])
    out, err = capsys.readouterr()
    assert rc == 0, err
    windows, s = read_log(log)
    levels = mod.fake_gpus[0].graphics_clocks_mhz
    assert s["decided"] and s["chosen_level"] in levels and s["probes"] >= 3 and not s["simulated"]
    assert all(w["level"] in levels for w in windows if w["phase"] == "probe")
    assert out.count("step ") == 400
    assert mod.fake_gpus[0].locked_mhz is None  # nvmlDeviceResetGpuLockedClocks was called


def test_the_power_limit_knob_on_nvml_reads_the_limit_as_the_power_and_restores_it(monkeypatch, capsys, tmp_path):
    """A fake A100 drawing 300 W unless capped (limits 100-400 W; NVML's rule: the set limit caps
    the power): the search probes limits of the card's table and holds one it probed; the original
    limit is back at the end. This job runs in real time (it sleeps per step), so a window's energy
    and its steps are read at instants that load can pull apart (a 250 W window read 257 W under a
    CPU hog): what a window reads is checked on the virtual clock of the fake Jetson job instead
    (test_a_measuring_governor_ends_at_the_hand_optimum), not here."""
    from dvfslab.cli import main
    from dvfslab.testing import fake_pynvml

    mod = fake_pynvml.make_module([fake_pynvml.FakeGpu(power_mw=300000.0)])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    log = tmp_path / "limit.jsonl"
    job = "import time\nfor i in range(1, 601):\n    time.sleep(0.005)\n    print('step', i, flush=True)\n"
    rc = main(["govern", "--policy", "search", "--backend", "nvml", "--knob", "power-limit", "--progress", "steps",
               "--log", str(log), "--", sys.executable, "-c", job])
    _, err = capsys.readouterr()
    assert rc == 0, err
    windows, s = read_log(log)
    probes = [w for w in windows if w["phase"] == "probe"]
    assert len(probes) >= 3 and all(w["level"] in [100 + 25 * k for k in range(13)] for w in probes)
    # which limit it holds rests on real step times (the job sleeps), which load can stretch: not
    # asserted; what is exact here is that it probes the card's limits and holds one it probed
    assert s["decided"] and s["chosen_level"] in {w["level"] for w in probes}
    assert mod.fake_gpus[0].limit_mw == 400000 and "power limit restored: 400 W" in err


def test_a_power_limit_left_by_a_killed_run_is_restored_by_the_next(monkeypatch, tmp_path):
    from dvfslab.job.nvml_limit import NvmlPowerLimit
    from dvfslab.testing import fake_pynvml

    mod = fake_pynvml.make_module([fake_pynvml.FakeGpu(power_mw=300000.0)])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    first = NvmlPowerLimit(state_dir=tmp_path)
    first.lock(150)
    assert mod.fake_gpus[0].limit_mw == 150000
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    state = json.loads(first.state_file.read_text())
    first.state_file.write_text(json.dumps({**state, "pid": int(dead.stdout)}))  # as a SIGKILLed run leaves it
    second = NvmlPowerLimit(state_dir=tmp_path)
    assert second.repaired == "restored the power limit a killed run left: 400 W"
    assert mod.fake_gpus[0].limit_mw == 400000 and not first.state_file.exists()


def drain(feed: ProgressFeed) -> list[float]:
    out = []
    while not feed._q.empty():
        out.append(feed.get(0)[0])
    return out


def test_the_lightning_preset_counts_batches_across_epochs():
    # PyTorch Lightning's bar restarts each epoch: Epoch K's batch N of M is K * M + N batches done
    text = ("Epoch 0:  50%|#####     | 2/4 [00:01<00:01,  2.00it/s, v_num=0, train_loss=0.7]\r"
            "Epoch 0: 100%|##########| 4/4 [00:02<00:00,  2.00it/s, v_num=0, train_loss=0.6]\n"
            "Validation DataLoader 0: 100%|##########| 3/3 [00:00<00:00, 30.0it/s]\n"
            "Epoch 1:  25%|##5       | 1/4 [00:00<00:01,  2.00it/s, v_num=0, train_loss=0.5]\n")
    feed = ProgressFeed()
    LineProgress(feed, preset="lightning").feed_text(text)
    assert drain(feed) == [2, 4, 5] and feed.unit == "batch"  # 0*4+2, 0*4+4, 1*4+1; validation is not progress


def test_a_regex_with_a_group_is_the_total_and_without_one_counts_lines():
    feed = ProgressFeed()
    LineProgress(feed, regex=r"global_step=(\d+)").feed_text("x global_step=3\nnoise\nglobal_step=7 loss\n")
    assert drain(feed) == [3, 7]
    feed = ProgressFeed()
    LineProgress(feed, regex=r"^done ").feed_text("done a\nnot done\ndone b\n")
    assert drain(feed) == [1, 2]
    from dvfslab.job.progress import ProgressError

    with pytest.raises(ProgressError, match="not a regular expression"):
        LineProgress(ProgressFeed(), regex="(")


def test_a_progress_file_is_a_counter_or_one_line_per_unit(tmp_path):
    from dvfslab.job.progress import FileProgress

    f = tmp_path / "p"
    src = FileProgress(f)
    assert src.read() is None  # not written yet
    f.write_text("12\n")
    assert src.read() == 12  # one number: a counter
    f.write_text("step 1\nstep 2\nstep 3\nstep")
    assert src.read() == 3  # lines; the fourth is still being written
