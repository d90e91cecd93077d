"""``GovernedRun`` (issue 35, the live runner): the replay board, the job's own length, windows
timed after the settle, the noise of repeated windows, whole-job accounting.

Every expected figure is worked out by hand in the comments from a hand-written cell. The
replay board's units and the sensor interval are binary fractions (0.125 s ...), so the hand
sums are exact in floating point.

The probe model these runs use (``dvfslab.job.live.live_probe_model``): with a time per unit
``tau`` at the default clock, a sensor interval ``i`` and a settle ``s``, a window reads
``ceil(SENSOR_SAMPLES i / tau)`` units after ``floor(s / tau) + 1`` settle units.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from dvfslab.governors.static import FixedGovernor
from dvfslab.job.board import JobBoard
from dvfslab.job.checks import window_noise
from dvfslab.job.log import JobLog
from dvfslab.job.policy import job_governor
from dvfslab.job.progress import (
    LineProgress,
    ProgressFeed,
    PrometheusProgress,
    job_units_from,
    sum_samples,
)
from dvfslab.job.replay import ReplayCell, govern_replay, per_sample_sigma
from dvfslab.job.runner import GovernedRun
from dvfslab.measure.windows import SENSOR_SAMPLES

# default (the board's own clock, running at the top level 800): 0.125 s, 1.0 J a unit;
# 400: 0.25 s, 0.8 J; 600: 0.1875 s, 0.625 J (the least energy); 800: as the default.
CELL = ReplayCell({400.0: (0.25, 0.8), 600.0: (0.1875, 0.625), 800.0: (0.125, 1.0)}, (0.125, 1.0))
INTERVAL_S, SETTLE_S = 0.125, 0.25


def test_one_sensor_sample_figure_for_the_replay_and_the_live_window():
    """The replay's probe model charges SENSOR_SAMPLES sensor samples; a live window reads the
    same figure (issue 35: live read 10, the replay charged 5)."""
    from dvfslab.evaluation import probes
    from dvfslab.job import live

    assert SENSOR_SAMPLES == 5 and live.READ_SAMPLES == SENSOR_SAMPLES and probes.SENSOR_SAMPLES == SENSOR_SAMPLES


def test_a_search_session_on_the_replay_board_costs_the_hand_figure_to_the_joule():
    """``search`` (no prior: it starts at the middle of the 3 levels) on the replay board, 100 units.

    tau = 0.125 s, interval 0.125 s, settle 0.25 s: the model's window is 5 read + (floor(0.25 /
    0.125) + 1 = 3) settle = 8 units; a window reads by time, at least 5 x 0.125 = 0.625 s.
    Unit 1 is start-up; the calibration reads units 2-6 (5 units, 0.625 s); two baseline windows
    of 5 units (no change of level: no settle). 16 units at the default so far.
    Probe 600: the settle skips the units whose progress comes before 0.25 s after the lock:
    0.1875 (< 0.25) and 0.375 (the unit the settle ends in) = 2 units; then 4 read (0.75 s >=
    0.625 s; 3 would be 0.5625 s): 6 units. Probe 400: 0.25 s ends the settle: 1 skipped + 3 read
    (0.75 s) = 4 units. 400 costs more: probe 800: 0.125, 0.25: 2 skipped + 5 read = 7 units. 600
    is the least of the three: held for the 100 - 33 = 67 units left.
    True energy: 16 x 1.0 + 7 x 1.0 (800) + 4 x 0.8 (400) + (6 + 67) x 0.625 (600)
               = 16 + 7 + 3.2 + 45.625 = 71.825 J; time: 23 x 0.125 + 4 x 0.25 + 73 x 0.1875 = 17.5625 s."""
    sigma = 0.02  # a sample; 5 samples a window: 0.9 % a reading, 28 of them below the 25 % gap 600 -> 800
    s = govern_replay(job_governor("search"), CELL, 100, seed=7, sigma_sample=sigma, interval_s=INTERVAL_S,
                      settle_s=SETTLE_S)
    assert s["chosen_level"] == 600.0 and s["probes"] == 3
    assert s["true_units_at"] == {"default": 16.0, "600": 73.0, "400": 4.0, "800": 7.0}
    assert s["true_energy_j"] == pytest.approx(71.825, abs=1e-9)
    assert s["true_time_s"] == pytest.approx(17.5625, abs=1e-9)
    # the log's own account of the job (every window; unit 1, start-up, is in none: 99 units) reads
    # the true 71.825 - 1.0 = 70.825 J through the noise: each reading's CV is 0.02 / sqrt(n >= 5),
    # so the sum is within 4 x 0.9 % of it
    assert s["job_units_seen"] == 99.0
    assert s["job_energy_j"] == pytest.approx(70.825, rel=4 * sigma / 5 ** 0.5)
    assert s["job_units"] == 100.0 and s["plan_job_units"] == 100.0 - 16.0


def test_a_static_governor_gets_the_whole_job_summary_by_hand(tmp_path):
    """FFG at 600 on the replay board, no noise, 60 units: start-up 1, calibration 5, baselines
    2 x 5 at the default (16 units); then hold 600: the first window settles 2 units and reads 4
    (0.75 s), the next ones read 4 each (9 of them) and the job ends 2 units into the last (44
    units at 600). Whole job over the 59 units in windows: energy 15 x 1.0 + 44 x 0.625 = 42.5 J,
    against the default's 59 x 1.0 = 59 J: saving 1 - 42.5/59 = 27.9661 %; time 15 x 0.125 +
    44 x 0.1875 = 10.125 s against 59 x 0.125 = 7.375 s: slowdown 10.125/7.375 - 1 = 37.2881 %.
    The held level alone: 1 - 0.625 = 37.5 %."""
    log = tmp_path / "ffg.jsonl"
    s = govern_replay(FixedGovernor(level=600).fit(), CELL, 60, sigma_sample=0.0, interval_s=INTERVAL_S,
                      settle_s=SETTLE_S, log=str(log))
    assert s["chosen_level"] == 600.0 and s["probes"] == 0
    assert s["job_units_seen"] == 59.0 and s["job_energy_j"] == pytest.approx(42.5, abs=1e-9)
    assert s["job_saving_pct"] == pytest.approx(27.9661, abs=1e-4)
    assert s["job_slowdown_pct"] == pytest.approx(37.2881, abs=1e-4)
    assert s["saving_pct"] == pytest.approx(37.5, abs=1e-9)
    lo, hi = s["job_saving_pct_ci"]
    assert lo <= s["job_saving_pct"] <= hi
    assert log.read_text().count('"summary": true') == 1


def test_voi_s_summary_is_the_sum_over_its_windows(tmp_path):
    """voi (untrained) on the replay board: its whole-job saving is the units-weighted energy of
    every window (calibration, baselines, probes, holds) against the default windows' mean, as
    read here line by line from the log."""
    import json

    log = tmp_path / "voi.jsonl"
    s = govern_replay(job_governor("voi"), CELL, 400, seed=3, sigma_sample=0.02, interval_s=INTERVAL_S,
                      settle_s=SETTLE_S, log=str(log))
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    win = [r for r in rows if r.get("phase") in ("calibration", "baseline", "probe", "hold") and r.get("measurement")]
    base = [r["energy_per_unit_j"] for r in win if r["phase"] in ("calibration", "baseline")]
    units = sum(r["units"] for r in win)
    energy = sum(r["units"] * r["energy_per_unit_j"] for r in win)
    assert s["probes"] >= 1 and any(r["phase"] == "probe" for r in win)
    assert units == 399.0  # every unit but the start-up one is in a window
    assert s["job_saving_pct"] == pytest.approx(100 * (1 - energy / (units * sum(base) / len(base))), abs=1e-9)
    assert s["plan_job_units"] == 400.0 - 16.0


def test_the_noise_of_hand_written_windows():
    """Energy per unit 1.0, 1.1, 0.9 at the default (mean 1.0, squared deviations 0.01 + 0.01) and
    2.0, 2.2 at 600 (mean 2.1, relative deviations +-0.1/2.1): pooled over 3 - 1 + 2 - 1 = 3
    degrees of freedom, cv = sqrt((0.01 + 0.01 + 2 (0.1/2.1)^2) / 3) = sqrt((0.02 + 0.0045351) / 3)
    = sqrt(0.0081784) = 0.0904344, over the mean 6 units read; a single window at 400 is no replicate."""
    w = [{"level": None, "energy_per_unit_j": e, "read_units": 6, "measurement": True} for e in (1.0, 1.1, 0.9)]
    w += [{"level": 600.0, "energy_per_unit_j": e, "read_units": 6, "measurement": True} for e in (2.0, 2.2)]
    w += [{"level": 400.0, "energy_per_unit_j": 5.0, "read_units": 6, "measurement": True}]
    cv, ref, n = window_noise(w)
    assert cv == pytest.approx(0.0904344, abs=1e-6) and ref == 6 and n == 5
    assert window_noise(w[-1:]) == (None, None, 1)
    # the residuals the whole job's interval redraws the baseline with: default windows reading
    # 1.0, 1.1, 0.9 J over 4 s each: deviations 0, +0.1, -0.1 of their mean, times sqrt(3/2) (the
    # mean's share) and sqrt(4 s): 0, +-0.244949
    from dvfslab.job.log import residuals

    rows = [{"phase": "baseline", "level": None, "energy_per_unit_j": e, "time_s": 4.0, "measurement": True}
            for e in (1.0, 1.1, 0.9)]
    assert residuals(rows) == pytest.approx([0.0, 0.244949, -0.244949], abs=1e-6)
    # the replay board's per-sample noise for a reading CV of 1 % over 8 units of 0.125 s with a
    # 0.25 s sensor: 4 samples, so 1 % x sqrt(4) = 2 % a sample
    assert per_sample_sigma(0.01, 8, 0.125, 0.25) == pytest.approx(0.02)


# -- the job's own length -------------------------------------------------------------------------
def test_the_job_length_from_each_progress_source(tmp_path):
    feed = ProgressFeed()
    LineProgress(feed, preset="hf").feed_text("\r 10%|#  | 6/60 [00:01<00:09,  6.0it/s]\r 12%|#  | 7/60 [")
    assert feed.job_units == 60 and "6/60" in feed.job_units_source
    feed = ProgressFeed()
    LineProgress(feed, preset="steps").feed_text("step 3/250 loss 0.4\nstep 4/250 loss 0.4\n")
    assert feed.job_units == 250
    feed = ProgressFeed()
    LineProgress(feed, regex=r"it (\d+) of (?P<total>\d+)").feed_text("it 9 of 1200\n")
    assert feed.job_units == 1200 and feed.total == 9
    feed = ProgressFeed()
    LineProgress(feed, preset="steps").feed_text("step 3 loss 0.4\n")
    assert feed.job_units is None  # no length stated
    page = ("# TYPE jobs_planned gauge\njobs_planned{worker=\"a\"} 300\njobs_planned{worker=\"b\"} 200\n"
            "# TYPE nv_inference_count counter\nnv_inference_count{model=\"m\"} 17\n")
    assert sum_samples(page, "jobs_planned") == 500 and sum_samples(page, "nv_inference_count") == 17
    prom = PrometheusProgress("http://127.0.0.1:9/metrics", "nv_inference_count", units_metric="jobs_planned")
    prom._text = page
    assert prom.length()[0] == 500

    class TrainerState:  # what a Trainer callback receives as ``state``
        max_steps = 60

    class LightningTrainer:
        estimated_stepping_batches = 640

    assert job_units_from(TrainerState())[0] == 60
    assert job_units_from(LightningTrainer())[0] == 640
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 10, "max_steps": 90}')
    assert job_units_from(tmp_path / "checkpoint-10")[0] == 90
    assert job_units_from(object())[0] is None


def test_without_a_length_the_run_says_what_the_governor_assumes():
    said = []
    board = _replay(80)
    run = GovernedRun(job_governor("voi"), board, say=said.append)
    run.run()
    run.finish()
    assert run.plan["job_units"] is None
    assert any("states no job length" in x and "default 1000 units" in x for x in said)


def _replay(units, sigma=0.0):
    from dvfslab.job.replay import ReplayBoard

    return ReplayBoard(CELL, units, sigma_sample=sigma, interval_s=INTERVAL_S, settle_s=SETTLE_S).job_board()


# -- a Python loop feeds the progress (a notebook) ------------------------------------------------
class LoopBoard:
    """A board on a virtual clock driven by the caller's own loop: ``step()`` runs one unit at the
    locked level once the run has handled the one before (its ``handled``), so every window reads
    exactly. Cell as CELL."""

    def __init__(self):
        self.t = self.e = 0.0
        self.level = None
        self.cond = threading.Condition()
        self.handled_units = -1.0

    def now(self):
        return self.t

    def handled(self, total):
        with self.cond:
            self.handled_units = total
            self.cond.notify_all()

    def step(self, k, free=False):
        """Run unit ``k`` (``free``: it reports in no time, as a burst of queued lines would)."""
        with self.cond:
            assert self.cond.wait_for(lambda: self.handled_units >= k - 1, timeout=60), "the run never handled"
        t, e = CELL.at(self.level)
        if not free:
            self.t, self.e = self.t + t, self.e + e

    def job_board(self):
        board = self

        class Meter:
            virtual, simulated, stamps_on_arrival = True, False, False

            def now(self):
                return board.t

            def sample_interval_s(self):
                return INTERVAL_S

            def begin(self):
                self.t0, self.e0 = board.t, board.e

            def event(self, units):
                pass

            def end(self):
                return board.t - self.t0, board.e - self.e0, int((board.t - self.t0) / INTERVAL_S)

            def close(self):
                pass

        return JobBoard("loop", [400.0, 600.0, 800.0], lambda f: setattr(self, "level", f),
                        lambda: setattr(self, "level", None), Meter(), settle_s=SETTLE_S, handled=self.handled)


def test_a_python_loop_governed_from_a_notebook():
    """The same FFG-at-600 job as above, its 60 units run by the caller's loop: the same whole-job
    figures (27.9661 % saving), and the clock given back at the end."""
    b = LoopBoard()
    with GovernedRun(FixedGovernor(level=600).fit(), b.job_board(), job_units=60) as run:
        for k in range(1, 61):
            b.step(k)
            run.report(k)
    assert run.result["job_saving_pct"] == pytest.approx(27.9661, abs=1e-4)
    assert run.result["job_units"] == 60 and b.level is None


def test_an_impossible_window_is_logged_and_read_again():
    """FFG at 600 as above, but units 40-45 report in no time (a burst). The hold windows at 600
    begin at unit 17 (settle 17-18, read 19-22), then 23-26, 27-30, 31-34, 35-38, then 39-...:
    that window reads 39 and the 6 free units, and keeps reading until 0.625 s have passed
    (units 46-48, 4 x 0.1875 s): 10 units in 0.75 s = 75 ms a unit. Against the default's 125 ms
    at 800, t = a + b/f allows at 600 no less than 125 ms x (1 - 4 x 5 %) = 100 ms: impossible,
    logged with why, and read again (units 49-52, 187.5 ms). The whole job charges the discarded
    window's 10 units at 600's mean: 15 x 1.0 + 44 x 0.625 = 42.5 J, as without the burst."""
    b = LoopBoard()
    with GovernedRun(FixedGovernor(level=600).fit(), b.job_board(), job_units=60) as run:
        for k in range(1, 61):
            b.step(k, free=40 <= k <= 45)
            run.report(k)
    bad = [r for r in run.log.lines if r.get("phase") == "hold" and r.get("measurement") is False]
    assert len(bad) == 1 and bad[0]["why"].startswith("impossible window") and bad[0]["units"] == 10
    assert bad[0]["time_s"] == pytest.approx(0.75) and "outside [100, " in bad[0]["why"]
    held = [r for r in run.log.lines if r.get("phase") == "hold" and r.get("measurement")]
    assert all(r["time_per_unit_s"] == pytest.approx(0.1875) for r in held)
    assert run.result["impossible_windows"] == 1
    assert run.result["job_energy_j"] == pytest.approx(42.5, abs=1e-9)


def test_a_gpu_utilisation_not_given_is_measured_over_the_default_windows():
    """The board's GPU load read after each default-clock window (the calibration and two
    baselines: 40, 60, 80 %): the workload gets their mean, 60 %, and the log says it was
    measured; a value the user gave is kept."""
    for given, expected in ((None, 60.0), (95.0, 95.0)):
        b = LoopBoard()
        board = b.job_board()
        loads = iter([40.0, 60.0, 80.0])
        board.gpu_load = loads.__next__
        workload = {} if given is None else {"gpu_util_pct": given}
        with GovernedRun(FixedGovernor(level=600).fit(), board, workload=workload, job_units=60) as run:
            for k in range(1, 61):
                b.step(k)
                run.report(k)
        assert run.workload["gpu_util_pct"] == expected
        feature = [r for r in run.log.lines if r.get("event") == "feature"]
        assert (feature[0]["gpu_util_pct"] == 60.0 and feature[0]["readings"] == 3) if given is None else not feature


# -- windows through a real pipe ------------------------------------------------------------------
JOB = """
import sys, time
path, n, top = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic()
for k in range(1, n + 1):
    with open(path) as fh:
        text = fh.read().strip()
    f = top if text == "default" else float(text)
    deadline += 0.008 + 15.0 / f  # the step: 8 ms + 15/f s at the clock it started at
    time.sleep(max(0.0, deadline - time.monotonic()))
    print(f"step {k}/{n}", flush=True)
"""
PIPE_LEVELS = [306.0, 612.0, 816.0, 1300.5]
#: the pipe board's sensor interval: a window reads SENSOR_SAMPLES of them (1 s), long beside the
#: tens of ms by which a loaded machine can delay a line's arrival (that delay, at both ends of a
#: window, is the error of a window's time; at 0.04 s a window was 0.2 s and a run on a loaded
#: 2-core machine read 36.2 ms for 32.5 ms)
SAMPLE_S = 0.2


def step_s(level):
    return 0.008 + 15.0 / (1300.5 if level is None else level)


class PipeBoard:
    """A fake board on real time whose job is a child process reading the clock it holds from a
    file: a lock writes the file, then blocks LOCK_S (a clock lock reading back ``cur_freq``), so
    that the job's progress lines queue in the pipe meanwhile. Power 2 + (f/500)^2 W."""

    LOCK_S = 0.06

    def __init__(self, path):
        self.path = path
        self.level = None
        self._write("default")

    def _write(self, text):
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.path)

    def lock(self, level):
        self.level = float(level)
        self._write(format(level, "g"))
        time.sleep(self.LOCK_S)

    def reset(self):
        self.level = None
        self._write("default")

    def job_board(self):
        board = self

        class Meter:
            virtual, simulated, stamps_on_arrival = False, False, True

            def now(self):
                return time.monotonic()

            def sample_interval_s(self):
                return SAMPLE_S

            def begin(self):
                self.t0 = time.monotonic()

            def event(self, units):
                pass

            def end(self):
                dt = time.monotonic() - self.t0
                f = 1300.5 if board.level is None else board.level
                return dt, (2 + (f / 500) ** 2) * dt, int(dt / SAMPLE_S)

            def close(self):
                pass

        return JobBoard("pipe", PIPE_LEVELS, self.lock, self.reset, Meter(), settle_s=0.05)


@pytest.mark.slow
def test_windows_through_a_real_pipe_read_the_hand_step_time(tmp_path):
    """A real child process printing ``step k/N`` at 8 ms + 15/f s (f: the clock the board holds
    when the step starts), its lines through a real pipe; a lock blocks 60 ms, so 2-7 lines queue
    while the clock switches. Every measured window's time per step is within 10 % of the hand
    figure (306: 57.0 ms, 612: 32.5 ms, 816: 26.4 ms, 1300.5 / default: 19.5 ms): queued lines
    are not in a window. Real time: the tolerance is the issue's stated 10 %."""
    board = PipeBoard(str(tmp_path / "level"))
    feed = ProgressFeed()
    parser = LineProgress(feed, preset="steps")
    run = GovernedRun(job_governor("search"), board.job_board(), feed=feed, log=JobLog(tmp_path / "pipe.jsonl"))
    rc = run.run_command([sys.executable, "-c", JOB, board.path, "500", "1300.5"], parser)
    assert rc == 0
    windows = [r for r in run.log.lines if r.get("phase") in ("calibration", "baseline", "probe", "hold")
               and r.get("measurement")]
    assert run.plan["job_units"] == 500 and run.result["probes"] >= 3
    probes = [w for w in windows if w["phase"] == "probe"]
    assert len({w["level"] for w in probes}) >= 3
    for w in windows:
        if "job ended" in w.get("why", ""):
            continue  # a last window cut short by the job's end
        assert w["time_per_unit_s"] == pytest.approx(step_s(w["level"]), rel=0.10), w
        assert w["time_s"] >= SENSOR_SAMPLES * SAMPLE_S - 1e-9  # it read at least 5 sensor samples' time


# -- the command line ---------------------------------------------------------------------------
def _govern(*argv, timeout=300):
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "dvfslab", "govern", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _whole_job_from_log(path):
    """The whole-job saving from every window line of a log, read here: each window's units at its
    read energy per unit; a window that is not a measurement (late units, an impossible window, a
    settle the job ended in) at the mean of the measured windows at its level; against the mean
    energy per unit of the default-clock windows."""
    import json

    rows = [json.loads(x) for x in path.read_text().splitlines()]
    phases = ("calibration", "baseline", "probe", "hold")
    win = [r for r in rows if r.get("phase") in phases]
    measured = [r for r in win if r["measurement"]]
    mean_at = {}
    for r in measured:
        mean_at.setdefault(r["level"], []).append(r["energy_per_unit_j"])
    units = energy = 0.0
    for r in win:
        if r["measurement"]:
            units, energy = units + r["units"], energy + r["units"] * r["energy_per_unit_j"]
        elif r["units"] and r["level"] in mean_at:
            e = mean_at[r["level"]]
            units, energy = units + r["units"], energy + r["units"] * sum(e) / len(e)
    base = [r["energy_per_unit_j"] for r in measured if r["phase"] in ("calibration", "baseline")]
    return 100 * (1 - energy / (units * sum(base) / len(base))), rows


@pytest.mark.slow
def test_a_60_step_hf_job_on_the_simulated_board_plans_for_60_and_accounts_every_window(tmp_path):
    """The issue's acceptance run: a 60-step job printing the Trainer's tqdm bar ``k/60`` under
    ``--policy voi --backend sim``: the plan line says 60 (from the bar), and the logged whole-job
    saving is the one read from every window of the log."""
    job = ("import sys\nfor k in range(1, 61):\n"
           "    sys.stderr.write(f'\\r{100 * k // 60:3d}%|##  | {k}/60 [00:01<00:02,  9.00it/s]')\n"
           "    sys.stderr.flush()\n")
    log = tmp_path / "sim.jsonl"
    r = _govern("--backend", "sim", "--policy", "voi", "--progress", "hf", "--log", log, "--", sys.executable, "-c", job)
    assert r.returncode == 0, r.stderr
    pct, rows = _whole_job_from_log(log)
    s = rows[-1]
    plan = next(x for x in rows if x.get("event") == "plan")
    assert plan["job_units"] == 60 and "60" in plan["source"] and s["job_units"] == 60
    assert s["simulated"] and "SIMULATED" in r.stderr
    assert s["job_saving_pct"] == pytest.approx(pct, abs=1e-9)
    assert f"saving {s['job_saving_pct']:.2f} %" in r.stderr and "whole job vs the default clock" in r.stderr


def test_the_replay_backend_runs_a_dataset_workload_through_the_same_runner(tmp_path):
    """``--backend replay:DATASET --workload W`` with no command: the replay board makes the
    progress; its summary is the log's, and its length (500) is what the governor planned with."""
    log = tmp_path / "replay.jsonl"
    r = _govern("--backend", "replay:data/replay", "--workload", "bert-small/sst2", "--policy", "search",
                "--replay-units", 500, "--noise", 0.01, "--log", log)
    assert r.returncode == 0, r.stderr
    pct, rows = _whole_job_from_log(log)
    s = rows[-1]
    assert s["job_units"] == 500 and s["probes"] >= 2 and s["chosen_level"] is not None
    assert s["job_units_seen"] == 499  # every unit but the start-up one
    assert s["job_saving_pct"] == pytest.approx(pct, abs=1e-9)
    assert "reading noise 1 % a sample (given)" in r.stderr
    bad = _govern("--backend", "replay:data/replay", "--policy", "search")
    assert bad.returncode != 0 and "add --workload ID" in bad.stderr and "Traceback" not in bad.stderr
