"""A sweep with the other clocks: pinned by default at the power mode's highest level, read back
into runs.csv every run, left alone on request, refused where they cannot be pinned, and a past
dataset whose clocks wandered found by ``dvfslab validate`` and ``dvfslab doctor --dataset``.

Runs use the fake AGX Orin (EMC 204 / 665.6 / 2133 / 3199 MHz, idle at 2133; CPU top 2201.6 MHz;
MODE_15W caps: EMC 2133, CPU 1113.6 MHz, 4 cores) and the test-only SleepExecutor.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dvfslab.cli import main
from dvfslab.core.errors import DvfsError
from dvfslab.data.contract import clock_warnings, write_dataset
from dvfslab.hw.base import Backend, ClockControl, ClockState
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.sweep.plan import SweepPlan, make_plan
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.session import Cooldown, check_pins
from dvfslab.testing.executors import SleepExecutor
from dvfslab.testing.fake_sysfs import build_board

WORKLOAD = "bert-small/sst2"
QUICK = Cooldown(idle_measure_s=0.02, poll_s=0.02)


@pytest.fixture
def board(tmp_path):
    return build_board(tmp_path / "orin", "agx-orin-jp6")


def sweep(board, tmp_path, out="out", plan=None, on_run=None, **kw):
    backend = open_backend(io=board.io(), state_dir=tmp_path / "state", **kw)
    try:
        return run_sweep(plan or make_plan([WORKLOAD], [306.0, 1300.5]), backend, SleepExecutor(seconds=0.01),
                         tmp_path / out, progress=False, lock_dir=tmp_path / "locks", cooldown=QUICK, on_run=on_run)
    finally:
        backend.close()


def record(ds, run_id) -> dict:
    return json.loads((ds.path / "runs" / f"{run_id}.json").read_text())


def test_a_sweep_pins_both_clocks_at_the_modes_max_and_records_them(board, tmp_path):
    ds = sweep(board, tmp_path)
    runs = ds.runs.set_index("run_id")
    fixed = runs[runs["policy"] == "fixed"]
    assert (fixed["emc_freq_mhz"] == 3199.0).all() and (fixed["cpu_freq_mhz"] == 2201.6).all()
    # MAXN runs leave every clock to the board: the EMC at its DVFS's idle rate
    assert runs.loc["bert-small--sst2__maxn__r0", "emc_freq_mhz"] == 2133.0
    rec = record(ds, "bert-small--sst2__f306__r0")["extras"]
    assert rec["pins"]["emc"] == {"setting": "max", "pinned": True, "requested_mhz": 3199.0, "measured_mhz": 3199.0,
                                  "verified": True, "why": "EMC rate reads 3199 MHz (locked)"}
    assert rec["clocks"] == {"start_mhz": {"emc": 3199.0, "cpu": 2201.6}, "end_mhz": {"emc": 3199.0, "cpu": 2201.6}}
    assert "pins" not in record(ds, "bert-small--sst2__maxn__r0")["extras"]
    assert ds.meta["sweep"]["plan"]["pins"] == {"emc": "max", "cpu": "max"}
    assert ds.meta["sweep"]["sessions"][-1]["pins_mhz"] == {"emc": 3199.0, "cpu": 2201.6}
    assert clock_warnings(ds) == []
    # everything given back: EMC unlocked at its idle rate, no state file
    assert board.emc_state() == {"rate_hz": 2133000000, "locked": 0}
    assert not list((tmp_path / "state").glob("*.json"))


def test_in_mode_15w_max_means_the_modes_caps(board, tmp_path):
    board.set_power_mode(1)
    plan = make_plan([WORKLOAD], [306.0, 408.0], maxn=False)
    ds = sweep(board, tmp_path, plan=plan, power_mode_ok=True)
    assert (ds.runs["emc_freq_mhz"] == 2133.0).all() and (ds.runs["cpu_freq_mhz"] == 1113.6).all()
    pins = record(ds, "bert-small--sst2__f408__r0")["extras"]["pins"]["cpu"]
    assert pins["why"] == "1 active policy at 1113.6 MHz, cpuinfo_cur_freq confirms; policy4, policy8 offline (not pinned)"


def test_left_to_the_board_the_emc_wanders_and_the_dataset_says_so(board, tmp_path):
    rates = iter([3199.0, 665.6, 2133.0, 204.0])
    plan = make_plan([WORKLOAD], [306.0, 612.0, 1300.5], maxn=False, pins={"emc": "none", "cpu": "none"},
                     order="sequential")
    board.set_emc_dvfs(next(rates))
    ds = sweep(board, tmp_path, plan=plan, on_run=lambda rec: board.set_emc_dvfs(next(rates)))
    assert ds.runs["emc_freq_mhz"].tolist() == [3199.0, 665.6, 2133.0]  # read back, not requested
    assert "pins" not in record(ds, "bert-small--sst2__f306__r0")["extras"]
    assert clock_warnings(ds) == [
        f"{ds.path / 'runs.csv'}: the emc clock was left to the board and wandered: emc_freq_mhz reads "
        "665.6-3199 MHz (3 levels over 3 fixed runs); its level mixes into every comparison of levels. Sweep again "
        "with it pinned (--emc max, the default)"]


def test_validate_and_doctor_report_a_pin_that_did_not_hold(tmp_path, capsys):
    # a hand-made dataset: the plan pinned the EMC, yet one fixed run read 2133 MHz, the others 3199
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "workload_id": "w", "policy": "fixed",
                         "gpu_freq_mhz": [306.0, 612.0, 1300.5], "rep": 0, "time_s": 1.0, "energy_j": 5.0,
                         "status": "ok", "emc_freq_mhz": [3199.0, 2133.0, 3199.0],
                         "cpu_freq_mhz": [2201.6, 2201.6, 2201.6]})
    workloads = pd.DataFrame({"workload_id": ["w"], "model": "m", "task": "t", "split": "characterization"})
    meta = {"source": "measured", "device": {}, "freq_table_mhz": [306.0, 612.0, 1300.5], "baseline": "fmax",
            "sweep": {"plan": {"pins": {"emc": "max", "cpu": "max"}}}}
    ds = write_dataset(tmp_path / "ds", meta, workloads, runs)
    expected = (f"{tmp_path / 'ds' / 'runs.csv'}: emc_freq_mhz reads 2133-3199 MHz (2 levels over 3 fixed runs) "
                "although the sweep pinned the emc clock (emc=max): the pin did not hold in every run; see the runs' "
                "lock checks (runs/<run_id>.json, extras.pins)")
    assert clock_warnings(ds) == [expected]
    assert main(["validate", str(tmp_path / "ds")]) == 0
    out, err = capsys.readouterr()
    assert out == "ok: 1 workloads, 3 runs (measured)\n" and err == f"warning: {expected}\n"
    assert main(["doctor", "--dataset", str(tmp_path / "ds"), "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["emc (dataset)"]["status"] == "warn" and checks["emc (dataset)"]["detail"] == expected
    assert checks["cpu (dataset)"] == {"name": "cpu (dataset)", "status": "ok", "fix": None,
                                       "detail": "cpu_freq_mhz held one level over the fixed runs (pinned: cpu=max)"}


def test_a_clock_column_must_be_a_positive_clock(tmp_path):
    runs = pd.DataFrame({"run_id": ["a"], "workload_id": "w", "policy": "fixed", "gpu_freq_mhz": [306.0], "rep": 0,
                         "time_s": 1.0, "energy_j": 5.0, "status": "ok", "emc_freq_mhz": [0.0]})
    workloads = pd.DataFrame({"workload_id": ["w"], "model": "m", "task": "t", "split": "characterization"})
    meta = {"source": "measured", "device": {}, "freq_table_mhz": [306.0], "baseline": "fmax"}
    with pytest.raises(DvfsError, match="column 'emc_freq_mhz', row 1 .*must be a positive finite clock"):
        write_dataset(tmp_path / "ds", meta, workloads, runs)


def test_a_sweep_refuses_to_start_when_it_cannot_pin_what_it_was_asked_to(board, tmp_path):
    board.set_emc_access(False)  # not root: the BPMP's debugfs is out of reach
    with pytest.raises(DvfsError, match="the sweep pins the EMC \\(memory clock\\) \\(emc=max\\) but .*needs root"):
        sweep(board, tmp_path)
    assert not list((tmp_path / "out" / "runs").glob("*.json"))
    plan = make_plan([WORKLOAD], [306.0], maxn=False, pins={"emc": "none"})
    ds = sweep(board, tmp_path, out="out2", plan=plan)  # told to leave it: the CPU is still pinned
    assert "emc_freq_mhz" not in ds.runs.columns and (ds.runs["cpu_freq_mhz"] == 2201.6).all()


class BareClocks(ClockControl):
    """A backend's clocks without other clocks (as NVML's)."""

    def levels_mhz(self):
        return [100.0, 200.0]

    def state(self):
        return ClockState(100.0, 100.0, 200.0)

    def lock(self, freq_mhz, nearest=False):
        return self.state()

    def reset(self):
        pass


def test_a_backend_without_other_clocks_skips_the_default_and_refuses_a_rate():
    backend = Backend(name="bare", clocks=BareClocks())
    assert check_pins(backend, (("emc", "max"), ("cpu", "none"))) == {
        "emc": "not pinned: backend 'bare' has no emc clock", "cpu": "left to the board (none)"}
    with pytest.raises(DvfsError, match="backend 'bare' cannot pin the emc clock .*Jetson-only"):
        check_pins(backend, (("emc", 2133.0),))


def test_the_simulated_board_accepts_the_pins_and_says_it_does_not_model_them(tmp_path):
    from dvfslab.sim.backend import open_backend as open_sim
    from dvfslab.sweep.twin import SimExecutor

    backend = open_sim(seed=1)
    plan = make_plan([WORKLOAD], [306.0], maxn=False, steps=3, warmup_steps=1)
    ds = run_sweep(plan, backend, SimExecutor(step_rows=0), tmp_path / "sim", progress=False,
                   lock_dir=tmp_path / "locks")
    assert (ds.runs["status"] == "ok").all() and "emc_freq_mhz" not in ds.runs.columns
    pins = record(ds, "bert-small--sst2__f306__r0")["extras"]["pins"]
    assert pins["emc"]["requested_mhz"] == 3199.0 and pins["emc"]["verified"] is False
    assert "does not model a pinned emc clock" in pins["emc"]["why"]


def test_the_plan_keeps_its_pins_and_an_old_plan_left_them_alone():
    plan = make_plan([WORKLOAD], [306.0], pins={"cpu": 1728})
    assert plan.to_json()["pins"] == {"emc": "max", "cpu": 1728.0}
    assert [r.pins for r in plan.runs] == [(("emc", "max"), ("cpu", 1728.0)), ()]  # fixed, then MAXN
    assert SweepPlan.from_json(json.loads(json.dumps(plan.to_json()))).runs == plan.runs
    old = {k: v for k, v in plan.to_json().items() if k != "pins"}
    assert SweepPlan.from_json(old).pins == (("emc", "none"), ("cpu", "none"))
    assert all(r.pins == () for r in SweepPlan.from_json(old).runs)


def test_resume_refuses_another_pin(board, tmp_path, fake_kernel_env, capsys):
    args = ["sweep", "--backend", "jetson", "--sysfs-root", str(board.root), "--out", str(tmp_path / "out"),
            "--workloads", WORKLOAD, "--freqs", "306", "--no-maxn", "--executor",
            "dvfslab.testing.executors:SleepExecutor", "--executor-opt", "seconds=0.01", "--idle-s", "0.02",
            "--cooldown-poll-s", "0.02", "--no-progress", "--emc", "none"]
    assert main(args) == 0
    capsys.readouterr()
    rc = main(["sweep", "--backend", "jetson", "--sysfs-root", str(board.root), "--out", str(tmp_path / "out"),
               "--resume", "--emc", "max"])
    err = capsys.readouterr().err
    assert rc == 2 and "--emc max (the sweep has emc=none)" in err


class GivesClocksBack(SleepExecutor):
    """Like the fine-tuning harness: gives every clock back when its work ends."""

    def run(self, spec, backend, sampler):
        row = super().run(spec, backend, sampler)
        backend.clocks.reset()
        return row


def test_an_executor_that_gives_the_clocks_back_leaves_no_end_reading(board, tmp_path, capsys):
    backend = open_backend(io=board.io(), state_dir=tmp_path / "state")
    plan = make_plan([WORKLOAD], [306.0], maxn=False)
    ds = run_sweep(plan, backend, GivesClocksBack(seconds=0.01), tmp_path / "out", progress=False,
                   lock_dir=tmp_path / "locks", cooldown=QUICK)
    backend.close()
    clocks = record(ds, "bert-small--sst2__f306__r0")["extras"]["clocks"]
    assert clocks == {"start_mhz": {"emc": 3199.0, "cpu": 2201.6}, "end_mhz": None}
    assert main(["doctor", "--dataset", str(ds.path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"] == {"ok": 3, "warn": 0, "fail": 0}


def test_a_fixed_run_whose_pin_moved_during_the_run_is_found_by_the_doctor(board, tmp_path, capsys):
    class Clamped(SleepExecutor):  # a firmware clamp arrives mid-run: the locked EMC reads 2133
        def run(self, spec, backend, sampler):
            board.set_emc_ceiling(2133)
            return super().run(spec, backend, sampler)

    backend = open_backend(io=board.io(), state_dir=tmp_path / "state")
    ds = run_sweep(make_plan([WORKLOAD], [306.0], maxn=False), backend, Clamped(seconds=0.01), tmp_path / "out",
                   progress=False, lock_dir=tmp_path / "locks", cooldown=QUICK)
    backend.close()
    assert main(["doctor", "--dataset", str(ds.path), "--json"]) == 0
    emc = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}["emc (dataset)"]
    assert emc["status"] == "warn" and emc["detail"] == ("1 fixed runs ended at another emc clock than they started: "
                                                         "bert-small--sst2__f306__r0 (3199 -> 2133 MHz)")
