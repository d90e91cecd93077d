"""The board's real kernel rules for GPU clocks (issue 15, items 1, 2, 3, 6, 7, 11), on the fakes.

Each rule is stated from its source (L4T kernel 5.10 / 5.15 devfreq + PM QoS, the real
``nvpmodel -p --verbose`` dump in tests/data/nvpmodel/, jetson_clocks, tegrastats / jtop); the
expected numbers come from that dump or from the level table, never from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.hw.base import FrequencyCappedError
from dvfslab.hw.jetson import JetsonClocks, find_gpu_devfreq
from dvfslab.hw.jetson.nvpmodel import parse_power_modes
from dvfslab.testing.fake_sysfs import FakeKernelIO, build_board

DUMP = Path(__file__).parent / "data" / "nvpmodel" / "agx_orin_64gb_nvpmodel_p_verbose.txt"
ORIGINAL = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}


def limits(board) -> dict:
    s = board.state()
    return {k: s[k] for k in ORIGINAL}


def clocks_for(board, **kw) -> JetsonClocks:
    return JetsonClocks(board.root, io=board.io(), **kw)


# -- 1. power-mode caps are nvpmodel's max_freq request, not a kernel limit -------------------
def test_the_real_nvpmodel_dump_gives_each_modes_gpu_cap_and_tpc_mask():
    modes = parse_power_modes(DUMP.read_text())
    # read off the dump by hand: "GPU MAX_FREQ 408000000", "TPC_PG_MASK 248", ...
    assert {i: (m.name, m.gpu_max_mhz, m.tpc_pg_mask) for i, m in modes.items()} == {
        0: ("MAXN", None, 0), 1: ("MODE_15W", 408.0, 248), 2: ("MODE_30W", 612.0, 240),
        3: ("MODE_50W", 816.0, 0)}
    assert [m.is_maxn for m in modes.values()] == [True, False, False, False]


def test_a_lock_above_the_modes_cap_is_refused_before_any_write(orin_jp6):
    orin_jp6.set_power_mode(2)  # nvpmodel -m 2 wrote max_freq = 612 MHz; the kernel keeps no cap
    writes = []

    class Spy(FakeKernelIO):
        def write(self, rel, value):
            writes.append((Path(rel).name, value))
            super().write(rel, value)

    clocks = JetsonClocks(orin_jp6.root, io=Spy(orin_jp6.root))
    with pytest.raises(FrequencyCappedError) as info:
        clocks.lock(1300.5)
    msg = str(info.value)
    assert "MODE_30W (id 2)" in msg and "612 MHz" in msg and "sudo nvpmodel -m 0" in msg
    assert "TPC power-gating mask 240" in msg
    assert writes == [] and orin_jp6.state()["max_freq_hz"] == 612000000
    assert not clocks.state_file.path.exists()


# -- 2. devfreq min/max are PM-QoS requests; the effective range is clamped on read -----------
def test_min_above_max_is_accepted_and_clamped_when_read(orin_jp6):
    io, d = orin_jp6.io(), orin_jp6.devfreq_link
    io.write(d / "max_freq", 612000000)
    io.write(d / "min_freq", 816000000)  # kernel 5.10: not EINVAL, min becomes max on read
    s = orin_jp6.state()
    assert (s["min_freq_hz"], s["max_freq_hz"], s["cur_freq_hz"]) == (612000000, 612000000, 612000000)
    io.write(d / "max_freq", 1300500000)  # the stored min request now applies
    assert (orin_jp6.state()["min_freq_hz"], orin_jp6.state()["max_freq_hz"]) == (816000000, 1300500000)
    io.write(d / "max_freq", 0)  # 0 removes the max request: the table's top
    assert orin_jp6.state()["max_freq_hz"] == 1300500000


def test_a_thermal_cap_is_a_lower_effective_max_reported_as_such(orin_jp6):
    orin_jp6.set_throttle(510)  # cooling device: another max request the user cannot see
    clocks = clocks_for(orin_jp6, settle_s=0.02)
    with pytest.raises(FrequencyCappedError) as info:
        clocks.lock(816)
    assert "max_freq reads back 510 MHz" in str(info.value) and "thermal" in str(info.value)
    assert "capped by the power mode" not in str(info.value)
    rng = clocks.effective_range()
    assert (rng.max_freq_mhz, rng.cause) == (510.0, "thermal_or_request") and "thermal" in rng.limited_by
    orin_jp6.set_power_mode(2)
    orin_jp6.set_throttle(None)
    rng = clocks.effective_range()
    assert (rng.max_freq_mhz, rng.cause) == (612.0, "power_mode") and "MODE_30W (id 2)" in rng.limited_by


# -- 3. cur_freq is the request; the BPMP counter is the clock reached --------------------------
def test_a_lock_is_verified_by_the_bpmp_counter_or_said_unverified(orin_jp6):
    orin_jp6.set_clock_ceiling(510)  # a clamp below devfreq: cur_freq still says 816
    clocks = clocks_for(orin_jp6)
    with pytest.raises(FrequencyCappedError, match="BPMP counter reads 510 MHz"):
        clocks.lock(816)
    assert limits(orin_jp6) == ORIGINAL
    orin_jp6.set_clock_ceiling(None)
    clocks.lock(816)
    assert (clocks.last_lock_check.measured_mhz, clocks.last_lock_check.verified) == (816.0, True)
    clocks.reset()
    orin_jp6.set_bpmp_readable(False)  # not root (debugfs)
    clocks.lock(816)
    check = clocks.last_lock_check
    assert check.measured_mhz is None and not check.verified and check.why.startswith("unverified")
    clocks.reset()


# -- 6. the GPU rail is held on during a lock, and given back --------------------------------
def test_the_rail_is_held_on_while_locked_and_restored(orin_jp6):
    rail = orin_jp6.railgate_path
    assert rail.read_text().strip() == "auto"
    clocks = clocks_for(orin_jp6)
    clocks.lock(612)
    assert rail.read_text().strip() == "on"
    assert clocks.state_file.load().railgate_control == "auto"
    clocks.reset()
    assert rail.read_text().strip() == "auto"
    clocks_for(orin_jp6).lock(408)  # never reset: as if SIGKILLed
    assert clocks_for(orin_jp6).restore_saved() is not None
    assert rail.read_text().strip() == "auto" and limits(orin_jp6) == ORIGINAL


# -- 7. the MAXN baseline is the default governor in MAXN --------------------------------------
def sweep(capsys, board, tmp_path, *extra) -> tuple[int, str]:
    rc = main(["sweep", "--backend", "jetson", "--sysfs-root", str(board.root), "--out", str(tmp_path / "sw"),
               "--workloads", "bert-small/sst2", "--freqs", "612", "--executor",
               "dvfslab.testing.executors:SleepExecutor", "--executor-opt", "seconds=0.01", "--idle-s", "0.01",
               "--no-progress", *extra])
    return rc, capsys.readouterr().err


@pytest.fixture
def sweep_env(fake_kernel_env, monkeypatch, tmp_path):
    monkeypatch.setenv("DVFSLAB_LOCK_DIR", str(tmp_path / "locks"))


@pytest.mark.parametrize("fault, fix", [
    ("jetson_clocks", "sudo jetson_clocks --restore"),
    ("performance", "sudo jetson_clocks --restore"),
    ("MODE_30W", "sudo nvpmodel -m 0"),
])
def test_a_jetson_sweep_refuses_a_board_that_is_not_at_its_maxn_baseline(
        orin_jp6, tmp_path, capsys, sweep_env, fault, fix):
    if fault == "jetson_clocks":
        orin_jp6.run_jetson_clocks()  # min = max = 1300.5 MHz, rail held on
    elif fault == "performance":
        orin_jp6.io().write(orin_jp6.devfreq_link / "governor", "performance")
    else:
        orin_jp6.set_power_mode(2)
    rc, err = sweep(capsys, orin_jp6, tmp_path)
    assert rc == 2 and "refusing to start a --backend jetson sweep" in err and fix in err
    assert not (tmp_path / "sw" / "runs").exists() or not any((tmp_path / "sw" / "runs").iterdir())


def test_power_mode_ok_accepts_another_mode_but_not_jetson_clocks(orin_jp6, tmp_path, capsys, sweep_env):
    orin_jp6.set_power_mode(3)  # MODE_50W: 816 MHz cap, 612 is allowed
    rc, err = sweep(capsys, orin_jp6, tmp_path, "--power-mode-ok")
    assert rc == 0, err
    orin_jp6.run_jetson_clocks()
    rc, err = sweep(capsys, orin_jp6, tmp_path / "again", "--power-mode-ok")
    assert rc == 2 and "min_freq = max_freq = 816 MHz" in err


def _run_records(out) -> dict:
    return {r["row"]["policy"]: r for r in (json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json")))}


@pytest.mark.parametrize("bpmp, measured, verified", [(True, 612.0, True), (False, None, False)])
def test_each_fixed_run_records_what_the_bpmp_counter_measured(orin_jp6, tmp_path, capsys, sweep_env,
                                                               bpmp, measured, verified):
    """Rule 3 in the data: cur_freq is the request, so every fixed run keeps the lock check
    (the counter's clock, or "unverified" without the counter); MAXN runs lock nothing."""
    orin_jp6.set_bpmp_readable(bpmp)
    rc, err = sweep(capsys, orin_jp6, tmp_path)
    assert rc == 0, err
    recs = _run_records(tmp_path / "sw")
    check = recs["fixed"]["extras"]["lock_check"]
    assert (check["requested_mhz"], check["measured_mhz"], check["verified"]) == (612.0, measured, verified)
    assert "lock_check" not in recs["maxn"]["extras"]


# -- 11. JetPack 6 (R36.4): the GPU is platform/17000000.gpu; found through sys/class/devfreq ---
def test_r36_4_device_path_is_found_through_the_devfreq_class(tmp_path):
    board = build_board(tmp_path / "r364", "agx-orin-jp6", device_dir="sys/devices/platform/17000000.gpu",
                        load_rel="sys/devices/platform/17000000.gpu/load")
    node = find_gpu_devfreq(board.io())
    assert node.rel == "sys/class/devfreq/17000000.gpu" and node.gpu == "gpu"
    clocks = clocks_for(board)
    clocks.lock(714)
    assert (board.root / "sys/devices/platform/17000000.gpu/power/control").read_text().strip() == "on"
    clocks.reset()
