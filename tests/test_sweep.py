"""Sweep planning, ordering, records, resume, locks and clock restore on a virtual-time fake board.

The fake board below is deliberately simple physics (power and step time depend on the locked
level, the GPU heats while busy and cools exponentially when idle) on a virtual clock, so the
whole sweep machinery runs in milliseconds and every number it records can be checked
against a closed form.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections import Counter
from itertools import pairwise

import pandas as pd
import pytest

from dvfslab.core.errors import SweepError
from dvfslab.data.contract import WORKLOAD_COLUMNS, load_dataset
from dvfslab.hw.base import (
    Backend,
    ClockControl,
    FrequencyCappedError,
    PowerReader,
    PowerSample,
    check_level,
)
from dvfslab.sweep.executors import Executor, describe_executor, load_executor
from dvfslab.sweep.plan import MAXN, SweepPlan, make_plan, run_id_for, williams_rows
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.safety import SweepInterrupted, SweepLock, SweepLockedError, holder_alive
from dvfslab.sweep.session import (
    Cooldown,
    cool_down,
    gpu_temperature_c,
    measure_idle_power_w,
    start_session,
)

LEVELS = [306.0, 612.0, 918.0, 1300.5]
AMBIENT_C, BUSY_C, TAU_S = 30.0, 70.0, 20.0
IDLE_GPU_MW, IDLE_CPU_MW = 2000.0, 1000.0


# --------------------------------------------------------------------------------------------
# A fake board on a virtual clock
# --------------------------------------------------------------------------------------------


class FakeBoard(ClockControl):
    """Virtual clock + locked level + temperature; power and step time follow the level."""

    def __init__(self, capped=()):
        self.t = 0.0
        self.locked: float | None = None
        self.busy = False
        self.temp_c = AMBIENT_C
        self.capped = set(capped)
        self.lock_calls: list[float] = []
        self.reset_calls = 0

    # ClockControl
    def levels_mhz(self):
        return list(LEVELS)

    def state(self):  # pragma: no cover - not used by the sweep
        raise NotImplementedError

    def lock(self, freq_mhz):
        f = check_level(freq_mhz, LEVELS)
        if f in self.capped:
            raise FrequencyCappedError(f"fake cap at {f} MHz")
        self.locked = f
        self.lock_calls.append(f)

    def reset(self):
        self.locked = None
        self.reset_calls += 1

    # physics
    def freq_mhz(self) -> float:
        return self.locked if self.locked is not None else LEVELS[-1]  # MAXN: top level

    def gpu_mw(self) -> float:
        return IDLE_GPU_MW + (10.0 * self.freq_mhz() if self.busy else 0.0)

    def cpu_mw(self) -> float:
        return IDLE_CPU_MW + (500.0 if self.busy else 0.0)

    def step_s(self) -> float:
        return 300.0 / self.freq_mhz()

    def advance(self, seconds: float, sampler=None, dt: float = 0.5) -> None:
        """Advance virtual time in ticks, updating temperature and sampling at each tick."""
        end = self.t + seconds
        while self.t < end - 1e-12:
            h = min(dt, end - self.t)
            target = BUSY_C if self.busy else AMBIENT_C
            self.temp_c = target + (self.temp_c - target) * math.exp(-h / TAU_S)
            self.t += h
            if sampler is not None:
                sampler.sample_once()


class FakePower(PowerReader):
    rails = ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")
    total_rails = ("VDD_GPU_SOC", "VDD_CPU_CV")
    update_interval_s = None

    def __init__(self, board: FakeBoard):
        self.board = board

    def read(self) -> PowerSample:
        b = self.board
        return PowerSample(b.t, {"VDD_GPU_SOC": b.gpu_mw(), "VDD_CPU_CV": b.cpu_mw(), "VIN_SYS_5V0": 5000.0},
                           gpu_freq_mhz=b.freq_mhz())


class FakeTelemetry:
    def __init__(self, board: FakeBoard):
        self.board = board

    def gpu_load_pct(self):
        return 99.0 if self.board.busy else 0.0

    def temperatures_c(self):
        return {"cpu-thermal": 25.0, "gpu-thermal": self.board.temp_c}


def fake_backend(board: FakeBoard, telemetry: bool = True) -> Backend:
    return Backend("fake", clocks=board, power=FakePower(board),
                   telemetry=FakeTelemetry(board) if telemetry else None, clock=lambda: board.t,
                   description={"board": "fake board", "jetpack": "6.0", "power_mode": "MAXN"})


class VirtualExecutor(Executor):
    """Trains nothing: a run is ``steps`` steps of ``step_s`` virtual seconds at full load."""

    threaded_sampler = False

    def __init__(self, board: FakeBoard, fail: set[str] = frozenset(), interrupt_after: int | None = None):
        self.board = board
        self.fail = set(fail)
        self.interrupt_after = interrupt_after
        self.calls: list[str] = []
        self.seen_level: dict[str, float | None] = {}

    def wait(self, backend, sampler, seconds):
        self.board.advance(seconds, sampler)

    def run(self, spec, backend, sampler):
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append(spec.run_id)
        self.seen_level[spec.run_id] = self.board.locked
        if spec.run_id in self.fail:
            raise RuntimeError("boom: out of memory")
        self.board.busy = True
        try:
            self.board.advance(spec.warmup_steps * self.board.step_s(), sampler)
            sampler.begin_window(spec.run_id)
            self.board.advance(spec.steps * self.board.step_s(), sampler)
            m = sampler.end_window(spec.run_id)
        finally:
            self.board.busy = False
        return {"time_s": m.time_s, "energy_j": m.energy_j, "avg_power_w": m.avg_power_w,
                "peak_power_w": m.peak_power_w, "mean_gpu_freq_mhz": m.gpu_freq_mhz,
                "energy_gpu_j": m.energy_by_rail_j["VDD_GPU_SOC"], "note": "virtual"}


def workloads_frame(ids) -> pd.DataFrame:
    rows = [{"workload_id": w, "model": w.split("/")[0], "task": w.split("/")[1],
             "split": "characterization"} for w in ids]
    return pd.DataFrame(rows, columns=list(WORKLOAD_COLUMNS))


WORKLOADS = ["bert-small/sst2", "pythia-70m/mrpc"]
FAST = Cooldown(max_temp_c=40.0, timeout_s=600.0, poll_s=2.0, idle_measure_s=5.0)


def sweep(tmp_path, board, executor=None, plan=None, **kw):
    plan = plan if plan is not None else make_plan(WORKLOADS, LEVELS, reps=2, steps=20, warmup_steps=3)
    executor = executor or VirtualExecutor(board)
    kw.setdefault("cooldown", FAST)
    kw.setdefault("workloads", workloads_frame(WORKLOADS))
    return run_sweep(plan, fake_backend(board), executor, tmp_path / "out", progress=False,
                     lock_dir=tmp_path / "locks", **kw)


# --------------------------------------------------------------------------------------------
# Plan and order
# --------------------------------------------------------------------------------------------


def test_plan_covers_the_grid_with_deterministic_ids():
    plan = make_plan(WORKLOADS, LEVELS, reps=3, order="shuffled", seed=7)
    assert len(plan) == 30  # 2 workloads x (4 levels + MAXN) x 3 reps
    cells = {(r.workload_id, r.policy, r.freq_mhz, r.rep) for r in plan.runs}
    assert len(cells) == len(plan)
    assert sum(r.policy == MAXN for r in plan.runs) == len(WORKLOADS) * 3
    assert all(r.freq_mhz is None for r in plan.runs if r.policy == MAXN)
    # ids depend only on the cell, not on the order or the seed
    other = make_plan(WORKLOADS, LEVELS, reps=3, order="sequential")
    assert {r.run_id for r in plan.runs} == {r.run_id for r in other.runs}
    assert run_id_for("bert-base/sst2", "fixed", 1300.5, 2) == "bert-base--sst2__f1300.5__r2"
    assert run_id_for("bert-base/sst2", MAXN, None, 0) == "bert-base--sst2__maxn__r0"


def test_shuffled_is_seeded_and_sequential_is_blocked():
    a = [r.run_id for r in make_plan(WORKLOADS, LEVELS, reps=2, order="shuffled", seed=1).runs]
    b = [r.run_id for r in make_plan(WORKLOADS, LEVELS, reps=2, order="shuffled", seed=1).runs]
    c = [r.run_id for r in make_plan(WORKLOADS, LEVELS, reps=2, order="shuffled", seed=2).runs]
    assert a == b and a != c
    seq = make_plan(WORKLOADS, LEVELS, reps=2, order="sequential").runs
    assert [r.workload_id for r in seq[:10]] == [WORKLOADS[0]] * 10
    assert [r.freq_mhz for r in seq[:10:2]] == LEVELS + [None]


def test_sequential_and_interleaved_orders_written_out_by_hand():
    """3 workloads x 2 levels x 2 reps (no MAXN) = 12 runs, in the order each design states."""
    wls, levels = ["a/x", "b/y", "c/z"], [612.0, 306.0]  # levels are planned ascending
    seq = make_plan(wls, levels, reps=2, maxn=False, order="sequential")
    assert [r.run_id for r in seq.runs] == [
        "a--x__f306__r0", "a--x__f306__r1", "a--x__f612__r0", "a--x__f612__r1",
        "b--y__f306__r0", "b--y__f306__r1", "b--y__f612__r0", "b--y__f612__r1",
        "c--z__f306__r0", "c--z__f306__r1", "c--z__f612__r0", "c--z__f612__r1"]
    # interleaved: rep outermost; the (rep, workload) blocks take Williams rows AB, BA, AB, BA, ...
    inter = make_plan(wls, levels, reps=2, maxn=False, order="interleaved")
    assert [(r.workload_id, r.freq_mhz, r.rep) for r in inter.runs] == [
        ("a/x", 306.0, 0), ("a/x", 612.0, 0), ("b/y", 612.0, 0), ("b/y", 306.0, 0),
        ("c/z", 306.0, 0), ("c/z", 612.0, 0),
        ("a/x", 612.0, 1), ("a/x", 306.0, 1), ("b/y", 306.0, 1), ("b/y", 612.0, 1),
        ("c/z", 612.0, 1), ("c/z", 306.0, 1)]
    assert all(r.policy == "fixed" and (r.steps, r.warmup_steps) == (100, 10) for r in inter.runs)
    # with MAXN (3 conditions) the second block follows the second Williams row: 612, MAXN, 306
    maxn = make_plan(["a/x"], levels, reps=2, order="interleaved", steps=7, warmup_steps=2)
    assert [(r.policy, r.freq_mhz, r.rep) for r in maxn.runs] == [
        ("fixed", 306.0, 0), ("fixed", 612.0, 0), (MAXN, None, 0),
        ("fixed", 612.0, 1), (MAXN, None, 1), ("fixed", 306.0, 1)]
    assert [r.level_label for r in maxn.runs[:3]] == ["306 MHz", "612 MHz", "MAXN"]


def test_williams_rows_are_the_published_designs():
    # Williams (1949): four treatments ABDC / BCAD / CDBA / DACB; an odd n adds the mirror rows
    assert williams_rows(4) == [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    assert williams_rows(3) == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0], [0, 2, 1], [1, 0, 2]]
    assert williams_rows(1) == [[0], [0]] and williams_rows(0) == []


@pytest.mark.parametrize("n", [2, 3, 4, 5, 11, 12])
def test_williams_square_balances_positions_and_carry_over(n):
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    per_position = Counter((pos, c) for r in rows for pos, c in enumerate(r))
    assert set(per_position.values()) == {len(rows) // n}
    pairs = Counter(p for r in rows for p in pairwise(r))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) == 1


def test_interleaved_order_decorrelates_level_from_position():
    """Over a full Williams cycle each condition sits at each block position equally often."""
    conds = len(LEVELS) + 1  # 5 conditions: a cycle is 10 blocks
    workloads = [f"m{i}/t" for i in range(5)]
    plan = make_plan(workloads, LEVELS, reps=2, order="interleaved")
    positions = Counter((i % conds, r.freq_mhz) for i, r in enumerate(plan.runs))
    assert set(positions.values()) == {2}
    seq = make_plan(workloads, LEVELS, reps=2, order="sequential")
    seq_positions = Counter((i % conds, r.freq_mhz) for i, r in enumerate(seq.runs))
    assert max(seq_positions.values()) > 2  # the sequential order is confounded


def test_plan_json_round_trip_and_errors():
    plan = make_plan(WORKLOADS, LEVELS, reps=2, order="shuffled", seed=3, steps=7)
    assert SweepPlan.from_json(json.loads(json.dumps(plan.to_json()))).runs == plan.runs
    tampered = plan.to_json() | {"run_ids": plan.to_json()["run_ids"][::-1]}
    with pytest.raises(SweepError, match="stored run order"):
        SweepPlan.from_json(tampered)
    with pytest.raises(SweepError, match="unknown order"):
        make_plan(WORKLOADS, LEVELS, order="random")
    with pytest.raises(SweepError, match="same run id"):
        make_plan(["a/b", "a--b"], LEVELS)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def test_full_sweep_records_every_run_with_correct_physics(tmp_path):
    board = FakeBoard()
    ex = VirtualExecutor(board)
    ds = sweep(tmp_path, board, ex)
    plan = make_plan(WORKLOADS, LEVELS, reps=2, steps=20, warmup_steps=3)
    assert list(ds.runs["run_id"]) == [r.run_id for r in plan.runs]
    assert (ds.runs["status"] == "ok").all()
    assert ds.meta["baseline"] == "maxn" and ds.meta["source"] == "measured"
    assert ds.meta["freq_table_mhz"] == LEVELS
    assert ds.meta["sweep"]["plan"]["reps"] == 2 and ds.meta["sweep"]["cooldown"]["max_temp_c"] == 40.0
    # the level was set before each run (MAXN: default governor, nothing locked) and reset after
    for spec in plan.runs:
        assert ex.seen_level[spec.run_id] == spec.freq_mhz
    assert board.locked is None
    # energy = (busy CPU+GPU power) x time, time = steps x step time: closed forms
    for _, row in ds.runs.iterrows():
        f = row["gpu_freq_mhz"] if row["policy"] == "fixed" else LEVELS[-1]
        time_s = 20 * 300.0 / f
        power_w = (IDLE_GPU_MW + 10.0 * f + IDLE_CPU_MW + 500.0) / 1000.0
        assert row["time_s"] == pytest.approx(time_s, rel=1e-5)  # runs.csv keeps 6 significant digits
        assert row["energy_j"] == pytest.approx(power_w * time_s, rel=1e-5)  # runs.csv keeps 6 significant digits
        assert row["energy_gpu_j"] == pytest.approx((IDLE_GPU_MW + 10 * f) / 1000 * time_s, rel=1e-5)  # runs.csv keeps 6 significant digits
        assert row["mean_gpu_freq_mhz"] == pytest.approx(f)
    # the per-run records keep the cool-down and executor extras
    rec = json.loads((tmp_path / "out" / "runs" / f"{plan.runs[1].run_id}.json").read_text())
    assert rec["extras"]["note"] == "virtual"
    cd = rec["extras"]["cooldown"]
    assert cd["criterion"] == "temperature" and cd["gpu_temp_c"] < 40.0 and not cd["timed_out"]
    assert cd["waited_s"] > 0  # the previous run heated the GPU above 40 C
    session = ds.meta["sweep"]["sessions"][0]
    assert session["idle_power_w"] == pytest.approx((IDLE_GPU_MW + IDLE_CPU_MW) / 1000.0)
    assert not (tmp_path / "out" / ".sweep.lock").exists()


def test_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    board = FakeBoard(capped={918.0})
    plan = make_plan(WORKLOADS, LEVELS, reps=1, steps=5, warmup_steps=0)
    bad = plan.runs[2].run_id
    ex = VirtualExecutor(board, fail={bad})
    ds = sweep(tmp_path, board, ex, plan=plan)
    failed = ds.runs[ds.runs["status"] == "failed"].set_index("run_id")
    capped = {r.run_id for r in plan.runs if r.freq_mhz == 918.0}
    assert set(failed.index) == capped | {bad}
    assert "RuntimeError: boom: out of memory" == failed.loc[bad, "error"]
    assert all("FrequencyCappedError" in failed.loc[c, "error"] for c in capped)
    assert failed["time_s"].isna().all()
    assert (ds.runs["status"] == "ok").sum() == len(plan) - len(failed)
    rec = json.loads((tmp_path / "out" / "runs" / f"{bad}.json").read_text())
    assert "Traceback" in rec["extras"]["traceback"]

    # resume without retrying failed runs: nothing runs
    ex2 = VirtualExecutor(board)
    ds2 = sweep(tmp_path, board, ex2, plan=plan, resume=True, retry_failed=False)
    assert ex2.calls == [] and len(ds2.runs) == len(plan)
    # resume (default): the failed runs are retried, once each, and now succeed
    board.capped.clear()
    ex3 = VirtualExecutor(board)
    ds3 = sweep(tmp_path, board, ex3, plan=plan, resume=True)
    assert sorted(ex3.calls) == sorted(capped | {bad})
    assert (ds3.runs["status"] == "ok").all() and len(ds3.runs) == len(plan)
    assert len(ds3.meta["sweep"]["sessions"]) == 3


def test_interrupt_restores_clocks_and_resume_is_exact(tmp_path):
    board = FakeBoard()
    plan = make_plan(WORKLOADS, LEVELS, reps=2, steps=5, warmup_steps=1)
    with pytest.raises(KeyboardInterrupt):
        sweep(tmp_path, board, VirtualExecutor(board, interrupt_after=4), plan=plan)
    assert board.locked is None
    assert not (tmp_path / "out" / ".sweep.lock").exists()
    partial = load_dataset(tmp_path / "out")  # valid at every commit point
    assert list(partial.runs["run_id"]) == [r.run_id for r in plan.runs[:4]]
    with pytest.raises(SweepError, match="--resume"):
        sweep(tmp_path, board, plan=plan)
    with pytest.raises(SweepError, match="differs from the stored one"):
        sweep(tmp_path, board, plan=make_plan(WORKLOADS, LEVELS, reps=3), resume=True)
    ex = VirtualExecutor(board)
    ds = run_sweep(None, fake_backend(board), ex, tmp_path / "out", resume=True, progress=False,
                   cooldown=FAST, workloads=workloads_frame(WORKLOADS))
    assert ex.calls == [r.run_id for r in plan.runs[4:]]
    assert list(ds.runs["run_id"]) == [r.run_id for r in plan.runs]
    assert ds.runs["run_id"].is_unique


def test_sigterm_interrupts_the_sweep_and_restores_clocks(tmp_path):
    board = FakeBoard()

    class TermExecutor(VirtualExecutor):
        def run(self, spec, backend, sampler):
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not interrupt")  # pragma: no cover

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SweepInterrupted):
        sweep(tmp_path, board, TermExecutor(board))
    assert board.locked is None
    assert signal.getsignal(signal.SIGTERM) == before
    assert not list((tmp_path / "out" / "runs").glob("*.json"))  # the interrupted run is not recorded


def test_resume_of_nothing_and_foreign_directories(tmp_path):
    board = FakeBoard()
    with pytest.raises(SweepError, match="nothing to resume"):
        run_sweep(None, fake_backend(board), VirtualExecutor(board), tmp_path / "empty", resume=True)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "runs.csv").write_text("x\n")
    with pytest.raises(SweepError, match="not a sweep"):
        run_sweep(make_plan(WORKLOADS, LEVELS), fake_backend(board), VirtualExecutor(board), foreign)
    with pytest.raises(Exception, match="not a GPU level"):
        sweep(tmp_path, board, plan=make_plan(WORKLOADS, [700.0]))


# --------------------------------------------------------------------------------------------
# Cool-down
# --------------------------------------------------------------------------------------------


def test_cooldown_by_temperature_follows_the_cooling_curve():
    board = FakeBoard()
    board.temp_c = 70.0
    ex = VirtualExecutor(board)
    got = cool_down(fake_backend(board), ex, None, Cooldown(max_temp_c=40.0, poll_s=1.0, timeout_s=1e4), None)
    # T(t) = 30 + 40 exp(-t/20) < 40  <=>  t > 20 ln 4 = 27.7 s; polled every 1 s
    assert got["criterion"] == "temperature" and not got["timed_out"]
    assert 20 * math.log(4) <= got["waited_s"] < 20 * math.log(4) + 1.0 + 1e-9
    board.temp_c = 70.0
    got = cool_down(fake_backend(board), ex, None, Cooldown(max_temp_c=40.0, poll_s=1.0, timeout_s=10.0), None)
    assert got["timed_out"] and got["waited_s"] == pytest.approx(10.0)
    assert gpu_temperature_c(fake_backend(board, telemetry=False)) is None


def test_cooldown_by_power_without_a_temperature(tmp_path):
    from dvfslab.measure.sampler import PowerSampler

    board = FakeBoard()
    backend = fake_backend(board, telemetry=False)
    ex = VirtualExecutor(board)
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False).start()
    idle_w = (IDLE_GPU_MW + IDLE_CPU_MW) / 1000
    got = cool_down(backend, ex, sampler, Cooldown(poll_s=2.0), idle_w)
    assert got["criterion"] == "power" and got["power_w"] == pytest.approx(idle_w)
    assert got["waited_s"] == pytest.approx(2.0)  # one poll window at idle power suffices
    board.busy = True  # never settles: the timeout ends it
    got = cool_down(backend, ex, sampler, Cooldown(poll_s=2.0, timeout_s=6.0), idle_w)
    assert got["timed_out"] and got["waited_s"] == pytest.approx(6.0)


def test_idle_power_is_measured_in_board_time_and_leaves_the_sampler_as_it_was():
    from dvfslab.measure.sampler import PowerSampler

    board = FakeBoard()
    backend = fake_backend(board)
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False).start()
    idle_w = measure_idle_power_w(backend, VirtualExecutor(board), sampler, 5.0)
    assert idle_w == pytest.approx((IDLE_GPU_MW + IDLE_CPU_MW) / 1000.0)  # 2 W GPU + 1 W CPU
    assert board.t == pytest.approx(5.0)  # exactly the idle window, on the virtual clock
    assert sampler.idle_power_w is None and sampler.idle_measurement is None
    with sampler.window("run") as w:  # a later window: total energy, nothing taken off for idle
        board.advance(2.0, sampler)
    assert w.measurement.energy_j == pytest.approx(3.0 * 2.0)
    assert w.measurement.energy_above_idle_j is None
    assert measure_idle_power_w(backend, VirtualExecutor(board), None, 5.0) is None
    assert measure_idle_power_w(backend, VirtualExecutor(board), sampler, 0.0) is None


def test_session_start_repairs_clocks_cools_and_measures_idle():
    board = FakeBoard()
    board.locked, board.temp_c = 918.0, 70.0  # pinned and hot, as a killed sweep leaves it
    session: dict = {}
    idle_w = start_session(fake_backend(board), VirtualExecutor(board), FAST, session)
    assert board.locked is None and board.reset_calls == 1
    # T(t) = 30 + 40 exp(-t/20) < 40 after 20 ln 4 = 27.7 s, polled every 2 s: 28 s
    assert session["initial_cooldown"]["waited_s"] == pytest.approx(28.0)
    assert board.t == pytest.approx(28.0 + FAST.idle_measure_s)
    assert idle_w == session["idle_power_w"] == pytest.approx(3.0)


# --------------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------------


def test_load_executor_builds_the_named_class_and_names_the_fix():
    from dvfslab.core.errors import DvfsError
    from dvfslab.testing.executors import SleepExecutor

    ex = load_executor("dvfslab.testing.executors:SleepExecutor", {"seconds": 0.5, "fail": "f306"})
    assert isinstance(ex, SleepExecutor) and (ex.seconds, ex.warmup_s, ex.fail) == (0.5, 0.0, "f306")
    assert describe_executor(ex) == {"class": "dvfslab.testing.executors:SleepExecutor", "seconds": 0.5,
                                     "warmup_s": 0.0, "fail": "f306"}
    with pytest.raises(DvfsError, match="must look like 'package.module:ClassName'"):
        load_executor("dvfslab.testing.executors.SleepExecutor")
    with pytest.raises(DvfsError, match="cannot load executor"):
        load_executor("dvfslab.testing.executors:NoSuchExecutor")
    with pytest.raises(DvfsError, match="rejected its options"):
        load_executor("dvfslab.testing.executors:SleepExecutor", {"speed": 3})


def test_sleep_executor_on_the_virtual_clock_measures_its_window():
    """The test executor waits the board's way: on a virtual clock, exactly its seconds."""
    from dvfslab.measure.sampler import PowerSampler
    from dvfslab.testing.executors import SleepExecutor

    board = FakeBoard()

    class VirtualSleep(SleepExecutor):
        threaded_sampler = False

        def wait(self, backend, sampler, seconds):
            board.advance(seconds, sampler, dt=0.25)

    backend = Backend("fake", power=FakePower(board), clock=lambda: board.t)  # rails only, no clocks
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False).start()
    spec = make_plan(["a/x"], [612.0], maxn=False, steps=4).runs[0]
    row = VirtualSleep(seconds=3.0, warmup_s=1.0).run(spec, backend, sampler)
    assert board.t == pytest.approx(4.0)
    assert (row["time_s"], row["steps"]) == (pytest.approx(3.0), 4)
    assert row["energy_j"] == pytest.approx(3.0 * 3.0) and row["energy_gpu_j"] == pytest.approx(2.0 * 3.0)
    assert row["energy_cpu_j"] == pytest.approx(1.0 * 3.0)
    with pytest.raises(RuntimeError, match="injected failure"):
        VirtualSleep(seconds=1.0, fail="f612").run(spec, backend, sampler)


# --------------------------------------------------------------------------------------------
# Locks
# --------------------------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_refuses_a_live_holder_and_takes_over_a_dead_one(tmp_path):
    path = tmp_path / "out" / ".sweep.lock"
    with SweepLock(path):
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder_alive(holder)
        with pytest.raises(SweepLockedError, match=f"pid {os.getpid()}"):
            SweepLock(path).acquire()
        board = FakeBoard()
        with pytest.raises(SweepLockedError):  # a sweep into the same directory is refused
            sweep(tmp_path, board)
    assert not path.exists()
    # a lock left by a dead process is stale and taken over
    path.write_text(json.dumps(holder | {"pid": _dead_pid()}))
    with SweepLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    # same pid but another process start time (pid reused), or another boot: stale
    if sys.platform.startswith("linux"):
        assert holder["start_ticks"] is not None and holder["boot_id"]
        assert not holder_alive(holder | {"start_ticks": holder["start_ticks"] + 1})
        assert not holder_alive(holder | {"boot_id": "another-boot"})
    assert holder_alive(holder | {"host": "another-host"})  # cannot check: assume alive
    path.write_text("")  # creator died between create and write
    with SweepLock(path):
        pass


def test_board_lock_stops_a_second_sweep_on_the_same_board(tmp_path):
    from dvfslab.sweep.safety import board_lock_path

    board = FakeBoard()
    backend = fake_backend(board)
    backend.description["sysfs_root"] = str(tmp_path / "root")
    lock = board_lock_path(backend, tmp_path / "locks")
    assert lock is not None and lock.parent == tmp_path / "locks"
    with SweepLock(lock, "board"), pytest.raises(SweepLockedError, match="board"):
        run_sweep(make_plan(WORKLOADS, LEVELS), backend, VirtualExecutor(board), tmp_path / "other",
                  lock_dir=tmp_path / "locks", workloads=workloads_frame(WORKLOADS), progress=False)
    assert board_lock_path(Backend("twin", clocks=board, simulated=True)) is None  # declared, not named


def test_progress_without_a_terminal_is_one_line_per_run(tmp_path, capsys):
    board = FakeBoard()
    plan = make_plan(WORKLOADS[:1], LEVELS[:2], reps=1, steps=2, warmup_steps=0)
    run_sweep(plan, fake_backend(board), VirtualExecutor(board), tmp_path / "out", progress=True,
              cooldown=FAST, workloads=workloads_frame(WORKLOADS[:1]), lock_dir=tmp_path / "locks")
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [f"sweep [{i}/3] {r.run_id}" for i, r in enumerate(plan.runs, 1)]
    assert all("ok; ETA " in line for line in lines)
