"""``dvfslab devices | clocks | run`` on fake boards, in-process and as sub-processes with signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.testing.fake_sysfs import FAKE_KERNEL_IO, build_board

ORIGINAL = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}
# the command run under `dvfslab run`: records its pid, then waits to be signalled
CHILD = "import os,sys,time; open(sys.argv[1] + '.tmp','w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(60)"


def limits(board) -> dict:
    s = board.state()
    return {k: s[k] for k in ORIGINAL}


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- in-process -----------------------------------------------------------------------------
def test_set_then_restore_acceptance(orin_jp6, capsys, fake_kernel_env):
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "612")
    assert rc == 0 and "612 MHz" in out
    s = orin_jp6.state()
    assert s["min_freq_hz"] == s["max_freq_hz"] == s["cur_freq_hz"] == 612000000
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--list")
    assert rc == 0 and "(locked)" in out and "306 408 510 612" in out and "MAXN (id 0)" in out
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--restore")
    assert rc == 0 and "restored" in out
    assert limits(orin_jp6) == ORIGINAL
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--restore")
    assert rc == 0 and "nothing to restore" in out


def test_the_option_injects_the_fake_kernel_the_tree_alone_does_not(orin_jp6, capsys, monkeypatch):
    monkeypatch.delenv("DVFSLAB_SYSFS_IO", raising=False)  # plain files: cur_freq never follows, and that is caught
    rc, _, err = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "612")
    assert rc == 2 and "cur_freq reads back 306 MHz" in err
    assert limits(orin_jp6) == ORIGINAL
    fake = ("--sysfs-root", orin_jp6.root, "--sysfs-io", FAKE_KERNEL_IO)
    assert cli(capsys, "clocks", *fake, "--set", "612")[0] == 0
    assert orin_jp6.state()["min_freq_hz"] == orin_jp6.state()["max_freq_hz"] == 612000000
    assert cli(capsys, "clocks", *fake, "--restore")[0] == 0
    assert limits(orin_jp6) == ORIGINAL


@pytest.mark.parametrize("command", [("clocks", "--list"), ("devices",), ("run", "--freq", "612", "--", "true")])
def test_a_custom_io_class_is_refused_for_the_real_root(capsys, monkeypatch, command):
    monkeypatch.delenv("DVFSLAB_SYSFS_IO", raising=False)
    rc, out, err = cli(capsys, *command[:1], "--sysfs-io", FAKE_KERNEL_IO, *command[1:])
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"--sysfs-io={FAKE_KERNEL_IO} refused: the sysfs root is the real '/'" in err
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", FAKE_KERNEL_IO)
    rc, out, err = cli(capsys, *command)
    assert rc == 2 and out == "" and f"DVFSLAB_SYSFS_IO={FAKE_KERNEL_IO} refused" in err


def test_non_level_rejected_on_one_line(orin_jp6, capsys, fake_kernel_env):
    rc, out, err = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "600")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "600 MHz is not a GPU level" in err
    assert "306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5" in err
    assert limits(orin_jp6) == ORIGINAL
    assert cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "600", "--nearest")[0] == 0
    assert orin_jp6.state()["max_freq_hz"] == 612000000


def test_read_only_tree_one_line_permission_error(orin_jp6, capsys, fake_kernel_env):
    orin_jp6.make_read_only()
    rc, _, err = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "612")
    assert rc == 2 and err.count("\n") == 1
    assert "permission denied" in err and "sudo" in err and "udev rule" in err and "usermod -aG dvfslab" in err
    assert "Traceback" not in err and limits(orin_jp6) == ORIGINAL
    rc, out, _ = cli(capsys, "devices", "--sysfs-root", orin_jp6.root)
    assert rc == 0 and "NOT writable" in out


def test_power_mode_cap_via_cli(orin_jp6, capsys, fake_kernel_env):
    orin_jp6.set_power_mode(2)
    rc, _, err = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "1300.5")
    assert rc == 2 and "612 MHz" in err and "MODE_30W (id 2)" in err and "nvpmodel -m 0" in err
    assert orin_jp6.state()["max_freq_hz"] == 612000000 and orin_jp6.state()["min_freq_hz"] == 306000000


def test_set_says_whether_the_bpmp_counter_confirms_the_lock(orin_jp6, capsys, fake_kernel_env):
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "714")
    assert rc == 0 and "measured 714 MHz (BPMP counter)" in out
    orin_jp6.set_bpmp_readable(False)
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--set", "408")
    assert rc == 0 and "lock unverified" in out and "pto_counter is not readable" in out
    assert cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--restore")[0] == 0
    assert limits(orin_jp6) == ORIGINAL


def test_list_and_devices_show_limits_rail_and_baseline(orin_jp6, capsys, fake_kernel_env):
    orin_jp6.set_power_mode(2)
    orin_jp6.set_throttle(510)
    rc, out, _ = cli(capsys, "clocks", "--sysfs-root", orin_jp6.root, "--list")
    assert rc == 0 and "GPU cap 612 MHz, TPC power-gating mask 240" in out
    assert "effective range: 306-510 MHz (limited by a thermal / cooling-device cap" in out
    assert "MAXN baseline: NOT ready: power mode is MODE_30W (id 2)" in out
    orin_jp6.set_throttle(None)
    orin_jp6.set_power_mode(0)
    orin_jp6.run_jetson_clocks()
    rc, out, _ = cli(capsys, "devices", "--sysfs-root", orin_jp6.root)
    assert rc == 0 and "rail-gating (power/control): on" in out
    assert "min_freq = max_freq = 1300.5 MHz" in out and "sudo jetson_clocks --restore" in out


def test_devices_on_a_fake_tree(tmp_path, capsys, fake_kernel_env):
    board = build_board(tmp_path / "nx", "orin-nx-jp6")
    rc, out, _ = cli(capsys, "devices", "--sysfs-root", board.root)
    assert rc == 0
    assert "NVIDIA Jetson Orin NX" in out and "JetPack 6" in out and "power mode MAXN (id 0)" in out
    assert "levels (MHz): 306 408 510 612 714 816 918" in out and "clock control: writable" in out
    assert "CPU+GPU = VDD_CPU_GPU_CV + VDD_SOC" in out and "nvml: not probed" in out


def test_devices_reports_an_unreadable_rail_without_hiding_the_rest(orin_jp6, capsys):
    (orin_jp6.hwmon_dirs["1-0040"] / "curr1_input").write_text("oops\n")
    rc, out, _ = cli(capsys, "devices", "--sysfs-root", orin_jp6.root)
    assert rc == 0 and "power rails: unreadable (cannot read rail VDD_GPU_SOC" in out
    assert "clock control: writable" in out and "temperatures: cpu-thermal" in out


def test_devices_without_jetson(tmp_path, capsys):
    rc, out, _ = cli(capsys, "devices", "--sysfs-root", tmp_path)
    assert rc == 1 and "jetson: not available" in out


def test_run_returns_child_exit_code_and_restores(orin_jp6, capsys, fake_kernel_env):
    check = (f"import sys; d = '{orin_jp6.devfreq_link}'; "
             "v = [int(open(d + '/' + f).read()) for f in ('min_freq', 'max_freq', 'cur_freq')]; "
             "sys.exit(7 if v == [816000000] * 3 else 1)")
    rc, _, err = cli(capsys, "run", "--freq", "816", "--sysfs-root", orin_jp6.root, "--", sys.executable, "-c", check)
    assert rc == 7 and "locked at 816 MHz" in err
    assert limits(orin_jp6) == ORIGINAL
    rc, _, err = cli(capsys, "run", "--freq", "816", "--sysfs-root", orin_jp6.root)
    assert rc == 2 and "no command given" in err
    rc, _, err = cli(capsys, "run", "--freq", "816", "--sysfs-root", orin_jp6.root, "--", "/nonexistent/cmd")
    assert rc == 2 and "cannot start" in err and limits(orin_jp6) == ORIGINAL


# -- sub-processes: signals and SIGKILL -----------------------------------------------------
def dvfslab(*argv, **kw) -> subprocess.Popen:
    env = {**os.environ, "DVFSLAB_SYSFS_IO": FAKE_KERNEL_IO}
    return subprocess.Popen([sys.executable, "-m", "dvfslab", *map(str, argv)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"child never started: {proc.communicate()}")
        time.sleep(0.02)
    return int(path.read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_run_forwards_restores_and_exits_128_plus(orin_jp6, tmp_path, sig):
    marker = tmp_path / f"child-{sig.name}.pid"
    proc = dvfslab("run", "--freq", "612", "--sysfs-root", orin_jp6.root, "--", sys.executable, "-c", CHILD, marker)
    child_pid = wait_for(marker, proc)
    assert orin_jp6.state()["min_freq_hz"] == orin_jp6.state()["max_freq_hz"] == 612000000
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + sig, err
    assert limits(orin_jp6) == ORIGINAL
    assert gone(child_pid), "the signal was not forwarded to the command"
    assert "clocks restored" in err


def test_sigkill_then_clocks_restore(orin_jp6, tmp_path):
    marker = tmp_path / "child.pid"
    proc = dvfslab("run", "--freq", "408", "--sysfs-root", orin_jp6.root, "--", sys.executable, "-c", CHILD, marker)
    child_pid = wait_for(marker, proc)
    proc.kill()
    proc.wait(timeout=20)
    os.kill(child_pid, signal.SIGKILL)  # orphaned by the SIGKILL (and holding its pipes)
    proc.communicate(timeout=20)
    assert orin_jp6.state()["max_freq_hz"] == 408000000  # left pinned
    restore = dvfslab("clocks", "--restore", "--sysfs-root", orin_jp6.root)
    out, err = restore.communicate(timeout=20)
    assert restore.returncode == 0, err
    assert "restored governor nvhost_podgov, min_freq 306000000, max_freq 1300500000" in out
    assert limits(orin_jp6) == ORIGINAL
