"""Jetson GPU clock control on fake sysfs trees: discovery, write order, lock, restore, safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvfslab.core.boards import ORIN_LEVELS_MHZ
from dvfslab.core.errors import DvfsError
from dvfslab.core.files import pid_alive
from dvfslab.hw.base import (
    BackendUnavailableError,
    ClockControl,
    ClockPermissionError,
    FrequencyCappedError,
    UnsupportedFrequencyError,
)
from dvfslab.hw.jetson import JetsonClocks, find_gpu_devfreq
from dvfslab.hw.jetson.clocks import plan_lock_writes, plan_range_writes
from dvfslab.hw.jetson.safety import StateFile, make_saved
from dvfslab.hw.jetson.sysfs import SysfsIO, default_io
from dvfslab.testing.fake_sysfs import FAKE_KERNEL_IO, FakeKernelIO, build_board, levels_hz

ORIGINAL = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}
EXPECTED_NODES = {"agx-orin-jp5": ("17000000.ga10b", "ga10b", 11), "agx-orin-jp6": ("17000000.gpu", "gpu", 11),
                  "orin-nx-jp6": ("17000000.gpu", "gpu", 7), "agx-xavier-jp5": ("17000000.gv11b", "gv11b", 14),
                  "jp4-iio": ("17000000.gv11b", "gv11b", 14)}


def limits(board) -> dict:
    s = board.state()
    return {k: s[k] for k in ORIGINAL}


def clocks_for(board, **kw) -> JetsonClocks:
    return JetsonClocks(board.root, io=board.io(), **kw)


# -- write planning (pure) ------------------------------------------------------------------
def test_plan_raising_writes_max_first_lowering_min_first():
    assert plan_lock_writes(306000000, 306000000, 612000000) == [("max_freq", 612000000), ("min_freq", 612000000)]
    assert plan_lock_writes(816000000, 816000000, 612000000) == [("min_freq", 612000000), ("max_freq", 612000000)]
    assert plan_lock_writes(306000000, 1300500000, 612000000) == [("min_freq", 612000000), ("max_freq", 612000000)]
    assert plan_lock_writes(612000000, 612000000, 612000000) == []
    with pytest.raises(ValueError):
        plan_range_writes(0, 10, 5, 4)


levels = st.sampled_from(levels_hz(ORIN_LEVELS_MHZ))


@given(levels, levels, levels, levels)
def test_plan_never_makes_min_above_max(a, b, c, d):
    cur = {"min_freq": min(a, b), "max_freq": max(a, b)}
    new_min, new_max = min(c, d), max(c, d)
    for name, value in plan_range_writes(cur["min_freq"], cur["max_freq"], new_min, new_max):
        cur[name] = value
        assert cur["min_freq"] <= cur["max_freq"]
    assert (cur["min_freq"], cur["max_freq"]) == (new_min, new_max)


# -- discovery ------------------------------------------------------------------------------
def test_discovery_and_levels_per_profile(any_board):
    node = find_gpu_devfreq(SysfsIO(any_board.root))
    name, gpu, n_levels = EXPECTED_NODES[any_board.profile.name]
    assert (node.name, node.gpu) == (name, gpu)
    clocks = clocks_for(any_board)
    assert isinstance(clocks, ClockControl)
    assert len(clocks.levels_mhz()) == n_levels
    assert clocks.levels_mhz() == sorted(clocks.levels_mhz())
    assert clocks.levels_mhz()[0] == any_board.profile.levels_hz[0] / 1e6


def test_xavier_table_and_orin_top_level(tmp_path):
    xavier = clocks_for(build_board(tmp_path / "x", "agx-xavier-jp5"))
    assert xavier.levels_mhz()[0] == 114.75 and xavier.levels_mhz()[-1] == 1377.0
    assert clocks_for(build_board(tmp_path / "o", "agx-orin-jp5")).levels_mhz()[-1] == 1300.5


def test_no_gpu_node_is_unavailable(tmp_path):
    board = build_board(tmp_path / "b", "agx-orin-jp6")
    os.unlink(board.devfreq_link)  # only the vic node is left
    with pytest.raises(BackendUnavailableError, match="15340000.vic"):
        find_gpu_devfreq(SysfsIO(board.root))
    with pytest.raises(BackendUnavailableError, match="no Jetson GPU devfreq"):
        find_gpu_devfreq(SysfsIO(tmp_path / "empty"))


# -- the fake kernel behaves like the kernel where it matters --------------------------------
def test_fake_kernel_rules(orin_jp6):
    io, d = orin_jp6.io(), orin_jp6.devfreq_link
    io.write(d / "min_freq", 816000000)
    assert orin_jp6.state()["cur_freq_hz"] == 816000000  # cur follows min up
    io.write(d / "min_freq", 306000000)
    io.write(d / "max_freq", 408000000)
    assert orin_jp6.state()["cur_freq_hz"] == 408000000  # and max down
    with pytest.raises(OSError) as info:
        io.write(d / "governor", "nonsense")
    assert info.value.errno == 22
    orin_jp6.make_read_only()
    assert not io.writable(d / "max_freq")
    with pytest.raises(PermissionError):
        io.write(d / "max_freq", 306000000)


# -- injecting the sysfs I/O class -----------------------------------------------------------
def test_the_fake_trees_rule_file_alone_selects_nothing(orin_jp6, monkeypatch):
    monkeypatch.delenv("DVFSLAB_SYSFS_IO", raising=False)
    assert (orin_jp6.root / ".fake_kernel.json").is_file()  # build_board still writes its rule state
    assert type(default_io(orin_jp6.root)) is SysfsIO
    clocks = JetsonClocks(orin_jp6.root, settle_s=0.0)
    assert type(clocks.io) is SysfsIO
    with pytest.raises(FrequencyCappedError, match="cur_freq reads back 306 MHz"):
        clocks.lock(612)  # plain files: nothing makes cur_freq follow the limits
    assert limits(orin_jp6) == ORIGINAL


def test_the_setting_or_the_argument_injects_the_class(orin_jp6, monkeypatch):
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", FAKE_KERNEL_IO)
    io = default_io(orin_jp6.root)
    assert type(io) is FakeKernelIO and io.root == orin_jp6.root
    clocks = JetsonClocks(orin_jp6.root)
    assert clocks.lock(612).cur_freq_mhz == 612.0  # the fake kernel moved cur_freq
    clocks.reset()
    monkeypatch.delenv("DVFSLAB_SYSFS_IO")
    assert type(default_io(orin_jp6.root, FAKE_KERNEL_IO)) is FakeKernelIO
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", "")
    assert type(default_io(orin_jp6.root)) is SysfsIO


@pytest.mark.parametrize("root", ["/", "link-to-root"])
def test_the_real_root_refuses_a_custom_class(tmp_path, monkeypatch, root):
    if root != "/":
        os.symlink("/", tmp_path / root)
        root = tmp_path / root
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", FAKE_KERNEL_IO)
    for make in (lambda: default_io(root), lambda: JetsonClocks(root)):
        with pytest.raises(DvfsError) as info:
            make()
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(f"DVFSLAB_SYSFS_IO={FAKE_KERNEL_IO} refused")
    monkeypatch.delenv("DVFSLAB_SYSFS_IO")
    with pytest.raises(DvfsError, match=r"^--sysfs-io=.* refused: the sysfs root is the real '/'"):
        default_io(root, FAKE_KERNEL_IO)
    assert type(default_io(root)) is SysfsIO


@pytest.mark.parametrize("target, why", [
    ("dvfslab.testing.fake_sysfs.FakeKernelIO", "must look like 'package.module:ClassName'"),
    ("dvfslab.testing.no_such_module:FakeKernelIO", "cannot load the sysfs I/O class"),
    ("dvfslab.testing.fake_sysfs:NoSuchClass", "cannot load the sysfs I/O class"),
    ("dvfslab.testing.fake_sysfs:FakeBoard", "is not a subclass of dvfslab.hw.jetson.sysfs.SysfsIO"),
])
def test_a_bad_class_name_is_one_line_naming_the_variable(orin_jp6, monkeypatch, target, why):
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", target)
    with pytest.raises(DvfsError) as info:
        default_io(orin_jp6.root)
    assert str(info.value).startswith(f"DVFSLAB_SYSFS_IO={target!r}") and why in str(info.value)


# -- lock / reset ---------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["agx-orin-jp5", "agx-orin-jp6", "orin-nx-jp6", "agx-xavier-jp5", "jp4-iio"])
def test_lock_every_level_then_reset(tmp_path, profile):
    board = build_board(tmp_path / profile, profile)
    before = limits(board)
    clocks = clocks_for(board)
    for f in clocks.levels_mhz()[::-1] + clocks.levels_mhz():  # down then up
        st_ = clocks.lock(f)
        assert st_.locked and st_.cur_freq_mhz == f
        assert board.state()["min_freq_hz"] == board.state()["max_freq_hz"] == round(f * 1e6)
    clocks.reset()
    assert limits(board) == before
    assert not clocks.state_file.path.exists()


def test_unsupported_level_lists_levels_and_writes_nothing(orin_jp6):
    clocks = clocks_for(orin_jp6)
    with pytest.raises(UnsupportedFrequencyError) as info:
        clocks.lock(600)
    assert "306, 408, 510, 612" in str(info.value) and "1300.5" in str(info.value)
    assert limits(orin_jp6) == ORIGINAL and not clocks.state_file.path.exists()
    assert clocks.lock(600, nearest=True).cur_freq_mhz == 612.0
    # half-way between 510 and 612 goes up, as the devfreq core serves the lowest level >= a target
    assert clocks.lock(561, nearest=True).cur_freq_mhz == 612.0
    assert orin_jp6.state()["min_freq_hz"] == orin_jp6.state()["max_freq_hz"] == 612000000
    clocks.reset()


def test_read_only_tree_gives_permission_error_naming_the_fix(orin_jp6):
    orin_jp6.make_read_only()
    clocks = clocks_for(orin_jp6)
    assert not clocks.writable()
    with pytest.raises(ClockPermissionError) as info:
        clocks.lock(612)
    msg = str(info.value)
    assert "\n" not in msg and "sudo" in msg and 'SUBSYSTEM=="devfreq", KERNEL=="17000000.gpu"' in msg
    assert limits(orin_jp6) == ORIGINAL and not clocks.state_file.path.exists()


def test_power_mode_cap_names_cap_and_mode_and_changes_nothing(orin_jp6):
    orin_jp6.set_power_mode(2)  # MODE_30W: GPU max 612 MHz
    before = limits(orin_jp6)
    clocks = clocks_for(orin_jp6)
    assert clocks.lock(612).cur_freq_mhz == 612.0
    clocks.reset()
    with pytest.raises(FrequencyCappedError) as info:
        clocks.lock(816)
    assert "612 MHz" in str(info.value) and "MODE_30W (id 2)" in str(info.value)
    assert "sudo nvpmodel -m 0" in str(info.value)
    assert (info.value.cap_mhz, info.value.requested_mhz) == (612.0, 816.0)
    assert limits(orin_jp6) == before and not clocks.state_file.path.exists()


def test_without_nvpmodel_the_mode_is_unknown_and_the_kernel_takes_the_write(tmp_path):
    board = build_board(tmp_path / "b", "agx-orin-jp6", nvpmodel=False)
    board.set_power_mode(1)  # MODE_15W wrote max_freq 408 MHz; nothing remembers it
    clocks = clocks_for(board)
    assert clocks.power_mode() is None
    assert clocks.lock(510).cur_freq_mhz == 510.0  # what a real 5.10 kernel does
    assert "power mode is unknown" in " ".join(clocks.baseline_check().problems)
    clocks.reset()
    assert board.state()["max_freq_hz"] == 408000000


def test_thermal_throttle_is_reported_not_hidden(orin_jp6):
    orin_jp6.set_throttle(510)
    with pytest.raises(FrequencyCappedError, match="max_freq reads back 510 MHz .*thermal") as info:
        clocks_for(orin_jp6, settle_s=0.02).lock(816)
    assert "capped by the power mode" not in str(info.value)
    orin_jp6.set_throttle(None)
    assert limits(orin_jp6) == ORIGINAL


# -- safety: state file, context manager, signals --------------------------------------------
def test_state_file_is_written_before_the_first_write(orin_jp6):
    seen = []

    class Spy(FakeKernelIO):
        def write(self, rel, value):
            seen.append(clocks.state_file.path.exists())
            super().write(rel, value)

    clocks = JetsonClocks(orin_jp6.root, io=Spy(orin_jp6.root))
    clocks.lock(714)
    assert seen and all(seen)
    saved = clocks.state_file.load()
    assert (saved.min_freq_hz, saved.max_freq_hz, saved.governor) == (306000000, 1300500000, "nvhost_podgov")
    clocks.reset()


def test_exception_inside_context_restores_everything(orin_jp6):
    with pytest.raises(RuntimeError, match="boom"):
        with clocks_for(orin_jp6) as clocks:
            clocks.lock(1020)
            orin_jp6.io().write(orin_jp6.devfreq_link / "governor", "performance")
            raise RuntimeError("boom")
    assert limits(orin_jp6) == ORIGINAL and not clocks.state_file.path.exists()


def test_killed_run_is_repaired_by_next_lock_or_restore(orin_jp6):
    clocks_for(orin_jp6).lock(612)  # never reset: as if SIGKILLed
    assert orin_jp6.state()["max_freq_hz"] == 612000000
    nxt = clocks_for(orin_jp6)
    nxt.lock(816)  # adopts the originals from the state file ...
    nxt.reset()  # ... so reset gives the true originals, not 612
    assert limits(orin_jp6) == ORIGINAL
    clocks_for(orin_jp6).lock(408)
    restored = clocks_for(orin_jp6).restore_saved()
    assert restored.max_freq_hz == 1300500000 and limits(orin_jp6) == ORIGINAL
    assert clocks_for(orin_jp6).restore_saved() is None


def test_clocks_held_by_another_live_process_are_not_taken(orin_jp6):
    clocks = clocks_for(orin_jp6)
    other = make_saved(str(orin_jp6.root), clocks.node.rel, "nvhost_podgov", 306000000, 1300500000)
    StateFile(orin_jp6.root, clocks.node.rel).save(other.__class__(**{**other.__dict__, "pid": os.getppid()}))
    with pytest.raises(DvfsError, match=f"pid {os.getppid()}"):
        clocks.lock(612)
    assert limits(orin_jp6) == ORIGINAL


def test_sigint_inside_context_restores_then_chains(orin_jp6):
    prev = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with clocks_for(orin_jp6) as clocks:
            clocks.lock(918)
            # raise_signal: to this thread, handled before it returns (os.kill may hand a
            # process-wide signal to another thread, handled later: after the block, under load)
            signal.raise_signal(signal.SIGINT)
    assert limits(orin_jp6) == ORIGINAL
    assert signal.getsignal(signal.SIGINT) is prev


def test_sigterm_restores_before_the_previous_handler_runs(orin_jp6):
    at_handler = []

    class Stop(Exception):
        pass

    def previous(signum, frame):
        at_handler.append(limits(orin_jp6))
        raise Stop

    old = signal.signal(signal.SIGTERM, previous)
    try:
        with pytest.raises(Stop):
            with clocks_for(orin_jp6) as clocks:
                clocks.lock(510)
                signal.raise_signal(signal.SIGTERM)
        assert at_handler == [ORIGINAL]
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, old)


def test_no_handlers_outside_the_main_thread(orin_jp6):
    result = {}

    def work():
        with clocks_for(orin_jp6) as clocks:
            clocks.lock(612)
            result["handler"] = signal.getsignal(signal.SIGTERM)
            result["locked"] = orin_jp6.state()["max_freq_hz"]

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert result["handler"] == signal.getsignal(signal.SIGTERM)
    assert result["locked"] == 612000000 and limits(orin_jp6) == ORIGINAL


def test_zombie_owner_counts_as_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 20
    while pid_alive(proc.pid) and time.monotonic() < deadline:  # exited but not reaped: a zombie
        time.sleep(0.01)
    assert not pid_alive(proc.pid)
    proc.wait()
    assert pid_alive(os.getpid())


LIBRARY_USER = """
import sys, time
from dvfslab.hw.jetson import JetsonClocks
with JetsonClocks(sys.argv[1]) as clocks:
    clocks.lock(1122)
    open(sys.argv[2], "w").close()
    time.sleep(60)
"""


def test_default_sigterm_restores_then_dies_by_the_signal(orin_jp6, tmp_path):
    marker = tmp_path / "locked"
    proc = subprocess.Popen([sys.executable, "-c", LIBRARY_USER, str(orin_jp6.root), str(marker)],
                            env={**os.environ, "DVFSLAB_SYSFS_IO": FAKE_KERNEL_IO},
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.02)
    assert orin_jp6.state()["max_freq_hz"] == 1122000000
    proc.terminate()
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGTERM  # the default action still happens
    assert limits(orin_jp6) == ORIGINAL
