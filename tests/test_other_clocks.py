"""The other clocks on the fake AGX Orin: the memory clock (EMC) and the CPU clusters pinned,
read back, refused above the power mode's caps, restored through the GPU's state file.

Expected values are the fake's setup and the real nvpmodel dump, by hand: EMC rates 204 /
665.6 / 2133 / 3199 MHz, unlocked at 2133 MHz (the BPMP's own DVFS on an idle board); three CPU
clusters (policy0 / 4 / 8, four cores each) with the table 115.2 + 76.8 k MHz (k = 0 ... 27) and
2201.6 MHz; nvpmodel writes scaling_min_freq 729.6 MHz in every mode; MODE_15W (id 1): 4 cores
online, CPU cap 1113.6 MHz, EMC cap 2133 MHz (docs/hardware.md, "Other clocks").
"""

from __future__ import annotations

import errno
import json

import pytest

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import UnsupportedFrequencyError
from dvfslab.hw.base import FrequencyCappedError
from dvfslab.hw.jetson.clocks import JetsonClocks
from dvfslab.testing.fake_sysfs import build_board, write_attr

GPU = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}
EMC_IDLE = {"rate_hz": 2133000000, "locked": 0}
CPU_MAXN = {"governor": "schedutil", "min": 729600, "max": 2201600}


@pytest.fixture
def board(tmp_path):
    return build_board(tmp_path / "orin", "agx-orin-jp6")


def clocks_for(board, tmp_path) -> JetsonClocks:
    return JetsonClocks(io=board.io(), state_dir=tmp_path / "state", handle_signals=False)


def gpu(board) -> dict:
    return {k: v for k, v in board.state().items() if k in GPU}


def limits(board) -> dict:
    """Each policy's governor and limits (cur is its governor's choice), None when inactive."""
    return {name: None if st is None else {k: st[k] for k in CPU_MAXN} for name, st in board.cpu_state().items()}


def saved(c: JetsonClocks) -> dict | None:
    return json.loads(c.state_file.path.read_text()) if c.state_file.path.exists() else None


# -- EMC -----------------------------------------------------------------------------------
def test_emc_pin_is_locked_read_back_and_restored_to_the_bpmps_dvfs(board, tmp_path):
    c = clocks_for(board, tmp_path)
    emc = c.other_clocks()["emc"]
    assert emc.support() is None and emc.levels_mhz() == [204.0, 665.6, 2133.0, 3199.0]
    assert emc.max_allowed_mhz() == 3199.0 and emc.read_mhz() == 2133.0
    check = emc.pin(665.6)
    assert check.verified and check.measured_mhz == 665.6 and check.source == "BPMP rate"
    assert board.emc_state() == {"rate_hz": 665600000, "locked": 1}
    # the originals went to the GPU's state file (one journal), the GPU's own untouched
    st = saved(c)
    assert st["others"]["emc"] == {"mrq_rate_locked": 0, "rate_hz": 2133000000}
    assert (st["min_freq_hz"], st["max_freq_hz"]) == (306000000, 1300500000) and gpu(board) == GPU
    c.reset()
    assert board.emc_state() == EMC_IDLE and saved(c) is None


def test_an_unlocked_emc_follows_its_dvfs_and_a_lock_holds_against_it(board, tmp_path):
    board.set_emc_dvfs(3199)
    assert board.emc_state() == {"rate_hz": 3199000000, "locked": 0}  # wandering while unlocked
    c = clocks_for(board, tmp_path)
    c.other_clocks()["emc"].pin(2133)
    board.set_emc_dvfs(665.6)
    assert board.emc_state() == {"rate_hz": 2133000000, "locked": 1}
    c.reset()
    assert board.emc_state() == {"rate_hz": 665600000, "locked": 0}  # handed back: DVFS's rate now


def test_an_unsupported_emc_rate_is_refused_before_anything_is_written(board, tmp_path):
    c = clocks_for(board, tmp_path)
    with pytest.raises(UnsupportedFrequencyError) as err:
        c.other_clocks()["emc"].pin(1600)
    assert str(err.value) == ("1600 MHz is not an EMC rate of this board; levels (MHz): 204, 665.6, 2133, 3199. "
                              "Pick --emc from these, or 'max'. Nothing was changed")
    assert board.emc_state() == EMC_IDLE and saved(c) is None and gpu(board) == GPU


def test_an_emc_rate_above_the_modes_cap_is_refused_naming_the_cap(board, tmp_path):
    board.set_power_mode(1)  # MODE_15W: EMC MAX_FREQ 2133000000, written to emc_iso_cap too
    c = clocks_for(board, tmp_path)
    emc = c.other_clocks()["emc"]
    assert emc.max_allowed_mhz() == 2133.0
    with pytest.raises(FrequencyCappedError) as err:
        emc.pin(3199)
    msg = str(err.value)
    assert msg.startswith("EMC 3199 MHz is above the EMC cap of 2133 MHz (EMC MAX_FREQ of power mode MODE_15W (id 1)")
    assert "emc_iso_cap = 2133000000" in msg and "pick --emc 2133" in msg and msg.endswith("Nothing was changed")
    assert err.value.cap_mhz == 2133.0 and board.emc_state() == EMC_IDLE and saved(c) is None


def test_an_emc_held_below_the_pin_fails_and_every_clock_is_restored(board, tmp_path):
    board.set_emc_ceiling(2133)  # a firmware clamp: the locked rate reads lower
    c = clocks_for(board, tmp_path)
    c.lock(612)
    with pytest.raises(FrequencyCappedError, match="EMC rate reads 2133 MHz .* although 3199 MHz was requested"):
        c.other_clocks()["emc"].pin(3199)
    assert board.emc_state() == EMC_IDLE and gpu(board) == GPU and saved(c) is None


def test_the_fakes_emc_rules(board, tmp_path):
    io, d = board.io(), board.emc_dir
    with pytest.raises(OSError) as err:
        io.write(d / "mrq_rate_locked", 2)
    assert err.value.errno == errno.EINVAL
    io.write(d / "rate", 204000000)  # unlocked: the rate waits for the lock
    assert board.emc_state() == EMC_IDLE
    io.write(d / "mrq_rate_locked", 1)
    assert board.emc_state() == {"rate_hz": 204000000, "locked": 1}
    io.write(d / "rate", 1000000000)  # not a rate of the table: rounded up (the fake's choice, unverified)
    assert board.emc_state()["rate_hz"] == 2133000000


def test_without_root_the_emc_cannot_be_pinned_and_says_why(board, tmp_path):
    board.set_emc_access(False)  # debugfs is root's: a user sees nothing there
    c = clocks_for(board, tmp_path)
    emc = c.other_clocks()["emc"]
    assert "needs root and a mounted debugfs" in emc.support() and "--emc none" in emc.support()
    assert emc.read_mhz() is None
    with pytest.raises(DvfsError, match="cannot pin the EMC"):
        emc.pin(3199)
    assert saved(c) is None


# -- CPU clusters --------------------------------------------------------------------------
def test_cpu_pin_holds_every_cluster_and_restores_nvpmodels_limits(board, tmp_path):
    c = clocks_for(board, tmp_path)
    cpu = c.other_clocks()["cpu"]
    levels = cpu.levels_mhz()
    assert len(levels) == 29 and levels[:3] == [115.2, 192.0, 268.8] and levels[-2:] == [2188.8, 2201.6]
    assert cpu.max_allowed_mhz() == 2201.6
    assert limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")}
    check = cpu.pin(1728)
    assert check.verified and check.why == "3 active policies at 1728 MHz, cpuinfo_cur_freq confirms"
    assert all(st == {"governor": "schedutil", "min": 1728000, "max": 1728000, "cur": 1728000}
               for st in board.cpu_state().values())
    assert saved(c)["others"]["cpu"]["policies"]["policy4"] == {"governor": "schedutil", "min_khz": 729600,
                                                                  "max_khz": 2201600}
    c.reset()
    assert limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")} and saved(c) is None


def test_a_cpu_policy_with_two_of_three_clusters_offline(board, tmp_path):
    board.set_power_mode(1)  # MODE_15W: cores 0-3 online, so policy4 and policy8 are inactive
    assert limits(board) == {"policy0": {"governor": "schedutil", "min": 729600, "max": 1113600},
                             "policy4": None, "policy8": None}
    io = board.io()
    for attr in ("scaling_cur_freq", "related_cpus"):  # an inactive policy answers EBUSY to a read ...
        with pytest.raises(OSError) as err:
            io.read_text(board.policy_dir(4) / attr)
        assert err.value.errno == errno.EBUSY
    with pytest.raises(OSError) as err:  # ... and to a write
        io.write(board.policy_dir(8) / "scaling_min_freq", 1113600)
    assert err.value.errno == errno.EBUSY
    c = clocks_for(board, tmp_path)
    cpu = c.other_clocks()["cpu"]
    assert cpu.max_allowed_mhz() == 1113.6
    with pytest.raises(FrequencyCappedError) as capped:
        cpu.pin(1190.4)
    assert str(capped.value).startswith("CPU 1190.4 MHz is above the CPU cap of power mode MODE_15W (id 1): 1113.6 MHz")
    check = cpu.pin(1113.6)
    assert check.verified and check.why.endswith("; policy4, policy8 offline (not pinned)")
    assert board.cpu_state()["policy0"] == {"governor": "schedutil", "min": 1113600, "max": 1113600, "cur": 1113600}
    assert list(saved(c)["others"]["cpu"]["policies"]) == ["policy0"]
    c.reset()
    assert limits(board)["policy0"] == {"governor": "schedutil", "min": 729600, "max": 1113600}


def test_more_cores_online_than_the_mode_allows_is_refused(board, tmp_path):
    board.set_power_mode(1)
    board.set_cpu_online(4, True)  # by hand: policy4 active again, 5 cores online
    assert limits(board)["policy4"] is not None
    c = clocks_for(board, tmp_path)
    with pytest.raises(FrequencyCappedError) as err:
        c.other_clocks()["cpu"].pin(1113.6)
    assert str(err.value).startswith("5 CPU cores are online but power mode MODE_15W (id 1) allows 4 (CPU_ONLINE")
    assert saved(c) is None


def test_a_cpu_cooling_cap_fails_the_pin_and_restores(board, tmp_path):
    # a 1500 MHz cap: the effective max is 1500 MHz, no table frequency lies in [1500, 1500],
    # so cpufreq raises the max to the next one (1574.4 = 115.2 + 76.8 x 19) and the min to 1500
    board.set_cpu_throttle(1500)
    c = clocks_for(board, tmp_path)
    with pytest.raises(FrequencyCappedError, match="policy0 \\(cpu0-3\\) limits read 1500-1574.4 MHz after pinning "
                                                   "1728 MHz"):
        c.other_clocks()["cpu"].pin(1728)
    assert saved(c) is None and gpu(board) == GPU


def test_the_fakes_cpufreq_rules(board):
    io, d = board.io(), board.policy_dir(0)
    io.write(d / "scaling_max_freq", 1000000)  # a QoS request: between table levels, kept as asked
    io.write(d / "scaling_min_freq", 2000000)  # min above max: lowered to the max when read
    st = board.cpu_state()["policy0"]
    # min 2000 lowered to the max 1000; [1000, 1000] holds no table frequency, so the max goes
    # to the next one, 1036.8 MHz (115.2 + 76.8 x 12)
    assert (st["min"], st["max"]) == (1000000, 1036800)
    io.write(d / "scaling_max_freq", 9999999)  # above cpuinfo_max_freq: clamped
    assert board.cpu_state()["policy0"]["max"] == 2201600


def test_the_hardwares_cpu_reading_decides_verified_unverified_or_failed(board, tmp_path):
    c = clocks_for(board, tmp_path)
    c.other_clocks()["cpu"].pin(1728)
    cpus = c.other_clocks()["cpu"].impl  # the CpuClusters behind the pin
    hw = board.policy_dir(4) / "cpuinfo_cur_freq"
    write_attr(hw, 1700000)  # 28 MHz below: within 2 % of 1728 (34.56 MHz)
    assert cpus.verify(1728000).status == "verified"
    write_attr(hw, 1600000)  # 128 MHz below: an idle core's counters, unverified (not a failure)
    check = cpus.verify(1728000)
    assert check.status == "unverified" and check.why.startswith("policy4 (cpu4-7): cpuinfo_cur_freq reads 1600 MHz")
    write_attr(hw, 1804800)  # above the pin: not locked, a failure
    assert cpus.verify(1728000).status == "not-locked"
    c.reset()


def test_a_board_without_root_cannot_pin_the_cpus(board, tmp_path):
    board.make_cpu_read_only()
    cpu = clocks_for(board, tmp_path).other_clocks()["cpu"]
    assert cpu.support().startswith("not writable by this user: ") and "--cpu none" in cpu.support()


# -- one journal: crash repair -------------------------------------------------------------
def test_a_process_that_died_pinned_is_repaired_by_the_next_one(board, tmp_path):
    dead = clocks_for(board, tmp_path)
    dead.lock(408)
    dead.other_clocks()["emc"].pin(204)
    dead.other_clocks()["cpu"].pin(729.6)
    # never reset: as if SIGKILLed; everything stays pinned and the state file says how to undo it
    assert board.emc_state() == {"rate_hz": 204000000, "locked": 1}
    assert sorted(saved(dead)["others"]) == ["cpu", "emc"]
    fresh = clocks_for(board, tmp_path)
    restored = fresh.recover()
    assert restored is not None and "others={'emc'" in restored
    assert gpu(board) == GPU and board.emc_state() == EMC_IDLE
    assert limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")}
    assert saved(fresh) is None


def test_a_later_lock_adopts_the_originals_a_dead_process_saved(board, tmp_path):
    dead = clocks_for(board, tmp_path)
    dead.other_clocks()["emc"].pin(3199)  # the EMC alone: the GPU's originals are saved with it
    c = clocks_for(board, tmp_path)
    c.other_clocks()["emc"].pin(665.6)  # adopts the file: its originals are still the board's
    assert saved(c)["others"]["emc"] == {"mrq_rate_locked": 0, "rate_hz": 2133000000}
    c.reset()
    assert board.emc_state() == EMC_IDLE and gpu(board) == GPU


# -- the commands ----------------------------------------------------------------------------
def test_clocks_set_pins_all_three_and_restore_gives_them_back(board, tmp_path, fake_kernel_env, capsys):
    from dvfslab.cli import main

    root = ["--sysfs-root", str(board.root), "--state-dir", str(tmp_path / "state")]
    assert main(["clocks", "--set", "612", "--emc", "2133", "--cpu", "max", *root]) == 0
    out = capsys.readouterr().out
    assert "EMC (memory clock) pinned at 2133 MHz; read back 2133 MHz (BPMP rate)" in out
    assert "CPU clusters (cpufreq) pinned at 2201.6 MHz; read back 2201.6 MHz (cpuinfo_cur_freq)" in out
    assert board.emc_state() == {"rate_hz": 2133000000, "locked": 1}
    assert main(["clocks", "--restore", *root]) == 0
    assert "and the cpu and emc clocks" in capsys.readouterr().out
    assert gpu(board) == GPU and board.emc_state() == EMC_IDLE
    assert limits(board) == {p: CPU_MAXN for p in ("policy0", "policy4", "policy8")}


def test_clocks_set_with_a_refused_emc_leaves_nothing_pinned(board, tmp_path, fake_kernel_env, capsys):
    from dvfslab.cli import main

    board.set_power_mode(1)
    rc = main(["clocks", "--set", "408", "--emc", "3199", "--sysfs-root", str(board.root),
               "--state-dir", str(tmp_path / "state")])
    assert rc == 2 and "above the EMC cap of 2133 MHz" in capsys.readouterr().err
    assert board.state()["min_freq_hz"] == 306000000 and board.emc_state() == EMC_IDLE
    assert not list((tmp_path / "state").glob("*.json"))
