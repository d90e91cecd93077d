"""Joint sweeps (issue #32 item 3): a plan over a product of knob tables, its designs, and a
3-knob sweep on the fake AGX Orin (EMC 204 / 665.6 / 2133 / 3199 MHz; CPU up to 2201.6 MHz)
that is interrupted and resumed. Runs use the test-only SleepExecutor.
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from dvfslab.cli import main
from dvfslab.core.errors import SweepError
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.sweep.plan import SweepPlan, design_settings, make_plan
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.session import Cooldown
from dvfslab.testing.executors import SleepExecutor
from dvfslab.testing.fake_sysfs import build_board

WORKLOAD = "bert-small/sst2"
QUICK = Cooldown(idle_measure_s=0.02, poll_s=0.02)
GPU = [306.0, 714.0, 1020.0, 1300.5]
EMC = [2133.0, 3199.0]
CPU = [1113.6, 1728.0, 2201.6]
TABLES = {"gpu": GPU, "emc": EMC, "cpu": CPU}


def test_the_full_design_is_the_product_in_order():
    # 4 x 2 x 3 = 24 settings, lexicographic: the first (306, 2133, 1113.6), the last every clock's top
    s = design_settings(TABLES)
    assert len(s) == 24 and s[0] == (306.0, 2133.0, 1113.6) and s[-1] == (1300.5, 3199.0, 2201.6)
    assert s[1] == (306.0, 2133.0, 1728.0) and s[3] == (306.0, 3199.0, 1113.6)
    with pytest.raises(SweepError, match="the grid has 24 settings"):
        design_settings(TABLES, "full", 12)


@pytest.mark.parametrize("design", ["lhs", "random"])
def test_a_stated_design_has_exactly_n_seeded_settings(design):
    a = design_settings(TABLES, design, 12, seed=5)
    assert len(a) == 12 and len(set(a)) == 12  # N distinct settings
    assert all(g in GPU and e in EMC and c in CPU for g, e, c in a)
    assert design_settings(TABLES, design, 12, seed=5) == a  # seeded: the same seed, the same settings
    with pytest.raises(SweepError, match=r"1 <= N <= 24"):
        design_settings(TABLES, design, 25)


def test_the_latin_hypercube_uses_each_knobs_levels_evenly():
    # N = 12 rows: each of the 4 GPU levels 12 / 4 = 3 times, each of the 2 EMC levels 12 / 2 = 6
    # times, each of the 3 CPU levels 12 / 3 = 4 times
    s = design_settings(TABLES, "lhs", 12, seed=5)
    assert Counter(g for g, _, _ in s) == {f: 3 for f in GPU}
    assert Counter(e for _, e, _ in s) == {f: 6 for f in EMC}
    assert Counter(c for _, _, c in s) == {f: 4 for f in CPU}
    # N = 3 < 4 GPU levels: the indices floor(i 4 / 3) = 0, 1, 2 -> 306, 714, 1020, once each
    small = design_settings(TABLES, "lhs", 3, seed=1)
    assert sorted(g for g, _, _ in small) == [306.0, 714.0, 1020.0]
    # N = 6 of 3 CPU levels: floor(i 3 / 6) = 0, 0, 1, 1, 2, 2 -> each twice
    assert Counter(c for _, _, c in design_settings(TABLES, "lhs", 6, seed=2)) == {f: 2 for f in CPU}


def test_a_joint_plan_round_trips_through_plan_json_and_keeps_gpu_only_plans_as_before():
    plan = make_plan([WORKLOAD], [], knob_tables=TABLES, design="lhs", n_settings=12, seed=5, maxn=False)
    assert len(plan) == 12 and SweepPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    run = plan.runs[0]
    assert run.freq_mhz == run.setting[0][1] and dict(run.pins)["emc"] == run.setting[1][1]
    assert run.run_id == f"bert-small--sst2__f{run.setting[0][1]:g}_emc{run.setting[1][1]:g}_cpu{run.setting[2][1]:g}__r0"
    old = make_plan([WORKLOAD], [306.0, 1300.5])
    assert not {"knobs", "design", "settings", "n_settings"} & set(old.settings())
    assert [r.run_id for r in old.runs][:1] == ["bert-small--sst2__f306__r0"]
    with pytest.raises(SweepError, match="both set the emc clock"):
        make_plan([WORKLOAD], [], knob_tables=TABLES, pins={"emc": 3199.0})
    with pytest.raises(SweepError, match="needs --knob gpu"):
        make_plan([WORKLOAD], [], knob_tables={"emc": EMC})


class StopAfter(SleepExecutor):
    """SleepExecutor that raises KeyboardInterrupt (Ctrl-C) when it starts run number ``n + 1``."""

    def __init__(self, n: int):
        super().__init__(seconds=0.01)
        self.n, self.started = n, 0

    def run(self, spec, backend, sampler):
        if self.started >= self.n:
            raise KeyboardInterrupt
        self.started += 1
        return super().run(spec, backend, sampler)


def _sweep(board, tmp_path, plan, executor):
    backend = open_backend(io=board.io(), state_dir=tmp_path / "state")
    try:
        return run_sweep(plan, backend, executor, tmp_path / "out", progress=False, lock_dir=tmp_path / "locks",
                         cooldown=QUICK, resume=plan is None)
    finally:
        backend.close()


def test_a_three_knob_design_sweeps_interrupted_then_resumed_into_the_same_runs(tmp_path, capsys):
    board = build_board(tmp_path / "orin", "agx-orin-jp6")
    plan = make_plan([WORKLOAD], [], knob_tables=TABLES, design="lhs", n_settings=12, seed=5, maxn=False)
    with pytest.raises(KeyboardInterrupt):
        _sweep(board, tmp_path, plan, StopAfter(5))
    ds = _sweep(board, tmp_path, None, SleepExecutor(seconds=0.01))  # resume from plan.json
    assert sorted(ds.runs["run_id"]) == sorted(r.run_id for r in plan.runs) and len(ds.runs) == 12
    assert (ds.runs["status"] == "ok").all()
    assert ds.meta["sweep"]["sessions"][-1]["runs_done_before"] == 5  # the resume ran only the 7 left
    assert ds.joint_knobs == ("gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz")
    assert ds.settings == list(plan.joint_settings) and ds.levels == [float(i) for i in range(12)]
    # each run read back the clocks of its setting, and its level is that setting's index
    for spec in plan.runs:
        row = ds.runs.set_index("run_id").loc[spec.run_id]
        want = dict(spec.setting)
        assert (row["gpu_freq_mhz"], row["emc_freq_mhz"], row["cpu_freq_mhz"]) == (
            want["gpu_freq_mhz"], want["emc_freq_mhz"], want["cpu_freq_mhz"])
        assert ds.settings[int(row["setting"])] == tuple(want.values())
    # the clocks a joint sweep moves on purpose are not reported as wandering
    capsys.readouterr()
    assert main(["validate", str(ds.path)]) == 0
    assert "wander" not in capsys.readouterr().err


def test_the_cli_plans_a_joint_sweep_and_the_twin_runs_it_at_each_pinned_clock(tmp_path, capsys):
    # a joint sweep on the twin passes the EMC pin to its physics (physical_pins) and reads it back
    code = main(["sweep", "--backend", "sim", "--out", str(tmp_path / "t"), "--workloads", WORKLOAD, "--no-progress",
                 "--knob", "gpu=306,1300.5", "--knob", "emc=2133,3199", "--idle-s", "0"])
    assert code == 0, capsys.readouterr().err
    runs = pd.read_csv(tmp_path / "t" / "runs.csv")
    fixed = runs[runs["policy"] == "fixed"]
    # 2 GPU levels x 2 EMC levels, each run's EMC read back as the one it was pinned at
    assert sorted(zip(fixed["gpu_freq_mhz"], fixed["emc_freq_mhz"], strict=True)) == [(306.0, 2133.0), (306.0, 3199.0),
                                                                          (1300.5, 2133.0), (1300.5, 3199.0)]
    code = main(["sweep", "--backend", "sim", "--out", str(tmp_path / "u"), "--workloads", WORKLOAD, "--no-progress",
                 "--knob", "gpu=306,500"])
    err = capsys.readouterr().err
    assert code == 2 and "500 MHz is not a GPU level" in err and "Pick --knob gpu=... from these" in err


def test_a_fleet_refuses_a_joint_knob_its_boards_cannot_read_back():
    from dvfslab.sweep.fleet import _split_fleet

    plan = make_plan([WORKLOAD], [], knob_tables={"gpu": [306.0], "emc": EMC}, maxn=False)
    infos = {"tcp://a": {"worker": "w0", "kind_id": "k", "kind": {"levels_mhz": GPU}, "error": None,
                         "reads_back": {"emc": False, "cpu": False}},
             "tcp://b": {"worker": "w1", "kind_id": "k", "kind": {"levels_mhz": GPU}, "error": None,
                         "reads_back": {"emc": True, "cpu": True}}}
    with pytest.raises(SweepError, match="--knob emc: the boards of workers w0 cannot read"):
        _split_fleet(infos, "k", plan)
    infos["tcp://a"]["reads_back"]["emc"] = True
    boards, refused = _split_fleet(infos, "k", plan)
    assert set(boards) == {"tcp://a", "tcp://b"} and refused == {}


def test_a_gpu_only_knob_is_the_plain_plan_of_the_levels_drawn():
    # lhs over 4 GPU levels with N = 2: the indices floor(i 4 / 2) = 0, 2 -> 306 and 1020 MHz
    plan = make_plan([WORKLOAD], [], knob_tables={"gpu": GPU}, design="lhs", n_settings=2, seed=0, maxn=False)
    assert not plan.joint and plan.levels_mhz == (306.0, 1020.0)
    assert plan == make_plan([WORKLOAD], [306.0, 1020.0], maxn=False)


def test_a_twin_joint_sweep_pins_the_cpu_clock_of_each_run_and_takes_the_boards_tables(tmp_path, capsys):
    """#37 item 4: the twin's joint space is the board's. ``emc=all`` is the AGX Orin's EMC table
    (204, 665.6, 2133, 3199 MHz: docs/hardware.md, E5), a ``cpu=`` subset is pinned per run and
    each run records its CPU clock as requested, pinned and read back at that value; ``cpu=all`` is
    the cpufreq table of the module record, 115.2 MHz in steps of 76.8 MHz to 2188.8, then the
    clusters' top, 2201.6 (28 + 1 = 29 levels)."""
    out = tmp_path / "t"
    code = main(["sweep", "--backend", "sim", "--out", str(out), "--workloads", WORKLOAD, "--no-progress", "--no-maxn",
                 "--knob", "gpu=306,1300.5", "--knob", "emc=all", "--knob", "cpu=729.6,2201.6",
                 "--steps", "4", "--warmup-steps", "1", "--step-rows", "0", "--idle-s", "0"])
    assert code == 0, capsys.readouterr().err
    runs = pd.read_csv(out / "runs.csv")
    want = sorted((g, e, c) for g in (306.0, 1300.5) for e in (204.0, 665.6, 2133.0, 3199.0) for c in (729.6, 2201.6))
    assert len(runs) == 16
    assert sorted(zip(runs["gpu_freq_mhz"], runs["emc_freq_mhz"], runs["cpu_freq_mhz"], strict=True)) == want
    meta = json.loads((out / "meta.json").read_text())
    assert meta["knobs"] == ["gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz"] and meta["source"] == "simulated"
    for run_id, cpu in zip(runs["run_id"], runs["cpu_freq_mhz"], strict=True):
        pin = json.loads((out / "runs" / f"{run_id}.json").read_text())["extras"]["pins"]["cpu"]
        assert pin["pinned"] and pin["verified"]
        assert pin["requested_mhz"] == pytest.approx(cpu, abs=1e-9) and pin["measured_mhz"] == pytest.approx(cpu, abs=1e-9)
        assert f"_cpu{cpu:g}__" in run_id
    out2 = tmp_path / "u"
    code = main(["sweep", "--backend", "sim", "--out", str(out2), "--workloads", WORKLOAD, "--no-progress", "--no-maxn",
                 "--knob", "gpu=306", "--knob", "cpu=all", "--steps", "2", "--warmup-steps", "0",
                 "--step-rows", "0", "--idle-s", "0"])
    assert code == 0, capsys.readouterr().err
    cpu_all = sorted(pd.read_csv(out2 / "runs.csv")["cpu_freq_mhz"])
    assert cpu_all == pytest.approx([115.2 + 76.8 * k for k in range(28)] + [2201.6], abs=1e-6)
