"""``dvfslab doctor`` on the fake trees: a healthy AGX Orin, each fault of issue 15, and NVML.

The board is the fake JetPack 6 AGX Orin read through the blocking fake INA3221
(``dvfslab.testing.fake_ina``), so the sample runs on its virtual clock. Expected lines are
written by hand from the fake's setup (build_board: MAXN, nvhost_podgov, 306-1300.5 MHz,
thermal zone i at 40 + 0.5 i deg C, tj-thermal = zone 8 = 44.0 C; the EMC unlocked at 2133 of
204 / 665.6 / 2133 / 3199 MHz, the CPU clusters' top level 2201.6 MHz, schedutil keeping the
last rate within its limits) and the rules of
docs/hardware.md; the sampler figures come from the INA3221 timing rule (tests/test_ina.py):
a 4-rail sample is 2 immediate reads + 6 that wait a cycle, 2 x 0.2 + 6 x (cycle + 0.2) ms.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from dvfslab.cli import build_parser, main
from dvfslab.cli.doctor import TimeSource, run
from dvfslab.testing import fake_pynvml
from dvfslab.testing.fake_ina import install
from dvfslab.testing.fake_pynvml import FakeGpu
from dvfslab.testing.fake_sysfs import build_board, write_attr

BLOCKING_IO = "dvfslab.testing.fake_ina:BlockingInaIO"
ORIGINAL = {"governor": "nvhost_podgov", "min_freq_hz": 306000000, "max_freq_hz": 1300500000}
HEALTHY = """\
dvfslab doctor: jetson
ok    board: NVIDIA Jetson AGX Orin Developer Kit, L4T R36.3.0 (JetPack 6) (AGX Orin)
ok    power mode: MAXN (id 0), no GPU cap
ok    governor: nvhost_podgov (follows the load)
ok    jetson_clocks: not applied (min 306 MHz, max 1300.5 MHz)
ok    rail-gating: allowed (power/control = auto)
ok    permissions: min_freq, max_freq, power/control writable
ok    sensors: 4 rails (VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0, VDDQ_VDD2_1V8AO); CPU+GPU = VDD_CPU_CV + VDD_GPU_SOC; update interval 7 ms
ok    other readers: none (no tegrastats, no jtop.service)
ok    thermal: tj-thermal 44.0 C, 55.0 C below its passive trip (99 C); no cooling cap on the GPU
warn  sampler: SAMPLER
      fix: stop them for the sweep: `sudo systemctl stop jtop.service`, end tegrastats; or ask for the rate the reads allow (--sample-period-ms on finetune)
ok    lock: 306 and 1300.5 MHz locked, BPMP counter read 306 and 1300.5 MHz; clocks restored (min 306, max 1300.5 MHz)
ok    emc pin: EMC (memory clock) pinned at 3199 MHz, read back 3199 MHz (BPMP rate); restored, now 2133 MHz
ok    cpu pin: CPU clusters (cpufreq) pinned at 2201.6 MHz, read back 2201.6 MHz (cpuinfo_cur_freq); restored, now 2201.6 MHz
summary: 12 ok, 1 warn, 0 fail
"""
SAMPLER = re.compile(r"achieved (\d+) Hz of 286 Hz requested over 2 s; one sample's reads take (\d+) ms \(max 41 ms\)")


@pytest.fixture
def board(tmp_path):
    b = build_board(tmp_path / "orin", "agx-orin-jp6")
    b.set_trip_point("tj-thermal", 99.0)  # an illustrative trip point (the fake has none by default)
    return b


def limits(board) -> dict:
    s = board.state()
    return {k: s[k] for k in ORIGINAL}


def doctor(capsys, board, *extra) -> tuple[int, str]:
    rc = main(["doctor", "--sysfs-root", str(board.root), "--sysfs-io", BLOCKING_IO, *map(str, extra)])
    return rc, capsys.readouterr().out


def checks(capsys, board, *extra) -> tuple[int, dict]:
    rc, out = doctor(capsys, board, "--json", *extra)
    return rc, {c["name"]: c for c in json.loads(out)["checks"]}


def test_a_healthy_board_is_all_ok_and_the_clocks_are_restored(board, capsys):
    rc, out = doctor(capsys, board)
    line = next(x for x in out.splitlines() if x.startswith("warn  sampler: "))
    m = SAMPLER.search(line)
    assert m, line
    # one sample costs 34.4 ms (5 waits) to 41.2 ms; then the next 3.5 ms grid point: 22-29 Hz, under half
    # of the 286 Hz requested (143 Hz): the reads cannot keep up, a warning (issue 36)
    assert 22 <= int(m.group(1)) <= 29 and 34 <= int(m.group(2)) <= 41
    assert line.endswith("under 50% of the rate requested, the reads cannot keep up (windows are sampled coarser "
                         "than planned)")
    assert out == HEALTHY.replace("SAMPLER", line.split("sampler: ")[1])
    assert rc == 0 and limits(board) == ORIGINAL
    assert board.railgate_path.read_text().strip() == "auto"


def test_json_has_every_check_with_status_detail_and_fix(board, capsys):
    rc, out = doctor(capsys, board, "--json", "--no-lock")
    doc = json.loads(out)
    assert rc == 0 and doc["backend"] == "jetson" and doc["ok"] is True
    assert doc["summary"] == {"ok": 11, "warn": 1, "fail": 0}  # the sampler: 22-29 of 286 Hz requested
    assert [c["name"] for c in doc["checks"]] == ["board", "power mode", "governor", "jetson_clocks", "rail-gating",
                                                  "permissions", "sensors", "other readers", "thermal", "sampler",
                                                  "emc pin", "cpu pin"]
    assert set(doc["checks"][0]) == {"name", "status", "detail", "fix"}


def test_power_mode_not_maxn_fails_unless_allowed(board, capsys):
    board.set_power_mode(2)
    rc, c = checks(capsys, board)
    assert rc == 1 and c["power mode"]["status"] == "fail"
    assert c["power mode"]["detail"] == ("MODE_30W (id 2), GPU cap 612 MHz, TPC power-gating mask 240: not MAXN "
                                         "(a sweep refuses it)")
    assert "sudo nvpmodel -m 0" in c["power mode"]["fix"] and "--power-mode-ok" in c["power mode"]["fix"]
    assert c["lock"]["status"] == "ok" and c["lock"]["detail"].startswith("306 and 612 MHz locked")  # the mode's cap
    assert c["thermal"]["status"] == "ok"  # the mode's cap is not a thermal cap
    rc, c = checks(capsys, board, "--power-mode-ok")
    assert rc == 0 and c["power mode"]["status"] == "warn"


def test_jetson_clocks_applied_fails_and_rail_held_on_warns(board, capsys):
    board.run_jetson_clocks()
    rc, c = checks(capsys, board)
    assert rc == 1 and c["jetson_clocks"]["status"] == "fail"
    assert c["jetson_clocks"]["detail"] == "min 1300.5 MHz, max 1300.5 MHz: min = max (jetson_clocks applied?)"
    assert "sudo jetson_clocks --restore" in c["jetson_clocks"]["fix"]
    assert c["rail-gating"]["status"] == "warn" and "power/control = on" in c["rail-gating"]["detail"]
    assert board.state()["min_freq_hz"] == 1300500000  # the doctor restored what it found


def test_a_lock_left_behind_fails_and_is_not_touched(board, capsys, tmp_path):
    """A killed run left the GPU pinned and its state file: the doctor says how to restore and
    neither locks nor restores itself."""
    state = tmp_path / "state"
    assert main(["clocks", "--sysfs-root", str(board.root), "--sysfs-io", BLOCKING_IO, "--state-dir", str(state),
                 "--set", "612"]) == 0
    capsys.readouterr()
    rc, c = checks(capsys, board, "--state-dir", state)
    assert rc == 1 and c["jetson_clocks"]["status"] == "fail" and c["jetson_clocks"]["fix"] == "run `dvfslab clocks --restore`"
    assert c["lock"]["status"] == "warn" and c["lock"]["detail"].startswith("not tried: a dvfslab state file is pending")
    assert board.state()["min_freq_hz"] == board.state()["max_freq_hz"] == 612000000


def test_a_governor_that_holds_one_rate_fails(board, capsys):
    board.io().write(board.devfreq_dir / "governor", "userspace")
    rc, c = checks(capsys, board, "--no-lock")
    assert rc == 1 and c["governor"]["status"] == "fail"
    assert c["governor"]["detail"] == "'userspace' holds one rate: the MAXN runs would not follow the load"
    assert "jetson_clocks --restore" in c["governor"]["fix"]


def test_a_thermal_cap_warns_and_the_top_level_lock_fails(board, capsys):
    board.set_throttle(816)
    rc, c = checks(capsys, board)
    assert c["thermal"]["status"] == "warn"
    assert c["thermal"]["detail"].startswith("GPU max is 816 MHz now: a thermal / cooling-device cap")
    assert rc == 1 and c["lock"]["status"] == "fail"
    assert "lock to 1300.5 MHz failed" in c["lock"]["detail"] and "max_freq reads back 816 MHz" in c["lock"]["detail"]
    board.set_throttle(None)
    assert limits(board) == ORIGINAL


def test_rail_gating_left_on_warns(board, capsys):
    write_attr(board.railgate_path, "on")
    rc, c = checks(capsys, board)
    assert rc == 0 and c["rail-gating"]["status"] == "warn"
    control = board.devfreq_link / "device" / "power" / "control"  # = board.railgate_path, through the class link
    assert control.resolve() == board.railgate_path.resolve()
    assert c["rail-gating"]["fix"] == f"`echo auto | sudo tee {control}` (or `sudo jetson_clocks --restore`)"
    assert board.railgate_path.read_text().strip() == "on"  # restored to what it was


def test_an_unreadable_bpmp_counter_leaves_the_lock_unverified(board, capsys):
    board.set_bpmp_readable(False)
    rc, c = checks(capsys, board)
    assert rc == 0 and c["lock"]["status"] == "warn"
    assert c["lock"]["detail"].startswith("306 and 1300.5 MHz locked (cur_freq followed) but unverified: ")
    assert "needs root and debugfs" in c["lock"]["detail"] and "sudo" in c["lock"]["fix"]
    assert limits(board) == ORIGINAL


def test_a_lock_the_gpu_does_not_reach_fails_and_restores(board, capsys):
    board.set_clock_ceiling(918)  # a BPMP clamp below devfreq: only the counter shows it
    rc, c = checks(capsys, board)
    assert rc == 1 and c["lock"]["status"] == "fail"
    assert c["lock"]["detail"].startswith("lock to 1300.5 MHz failed: GPU did not reach 1300.5 MHz: "
                                          "pto_counter reads back 918 MHz")
    assert limits(board) == ORIGINAL


def test_permission_denied_on_max_freq_fails_with_the_udev_rule(board, capsys):
    (board.devfreq_dir / "max_freq").chmod(0o444)
    rc, c = checks(capsys, board)
    assert rc == 1 and c["permissions"]["status"] == "fail"
    assert c["permissions"]["detail"] == f"not writable by this user: {board.devfreq_link / 'max_freq'}"
    fix = c["permissions"]["fix"]
    assert 'SUBSYSTEM=="devfreq", KERNEL=="17000000.gpu", ACTION=="add"' in fix and "udevadm trigger" in fix
    assert "platform" not in fix  # power/control is writable here
    assert c["lock"]["status"] == "warn" and c["lock"]["detail"].startswith("not tried")


def test_a_read_only_gpu_power_control_adds_the_platform_rule(board, capsys):
    """A lock holds the rail on (power/control = on), so a non-root user needs that file too."""
    board.railgate_path.chmod(0o444)
    rc, c = checks(capsys, board)
    assert rc == 1 and c["permissions"]["detail"].endswith("power/control")
    fix = c["permissions"]["fix"]
    assert 'SUBSYSTEM=="platform", KERNEL=="17000000.gpu", ACTION=="add"' in fix
    assert "--subsystem-match=platform --sysname-match=17000000.gpu" in fix
    assert c["lock"]["status"] == "warn" and limits(board) == ORIGINAL


def test_another_reader_of_the_sensors_warns(board, capsys):
    d = board.root / "proc" / "812"
    d.mkdir(parents=True)
    (d / "comm").write_text("tegrastats\n")
    (d / "cmdline").write_bytes(b"tegrastats\0--interval\0100\0")
    rc, c = checks(capsys, board, "--no-lock")
    assert rc == 0 and c["other readers"]["status"] == "warn"
    assert c["other readers"]["detail"].startswith("tegrastats (pid 812) also read the power monitors")
    assert "systemctl stop jtop.service" in c["other readers"]["fix"]


def test_a_slow_sampler_warns(board, capsys):
    """The INA3221's longest conversion (8.244 ms, TI datasheet): a 49.5 ms cycle, so a 4-rail
    sample costs 2 x 0.2 + 6 x 49.66 = 298.4 ms: about 3 Hz, below the 10 Hz the doctor wants."""
    io = install(board, conversion_s=0.008244)
    args = build_parser().parse_args(["doctor", "--sysfs-root", str(board.root), "--json", "--no-lock"])
    rc = run(args, io=io)
    c = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert rc == 0 and c["sampler"]["status"] == "warn"
    # requested: half of round(49.464) = 49 ms -> 24.5 ms, 40.8 Hz
    assert c["sampler"]["detail"].startswith("achieved 3 Hz of 41 Hz requested over 2 s; one sample's reads take ")
    assert "(max 298 ms): below 10 Hz" in c["sampler"]["detail"]


def test_no_jetson_under_the_root_is_one_failing_line(tmp_path, capsys):
    rc = main(["doctor", "--sysfs-root", str(tmp_path), "--backend", "jetson"])
    out = capsys.readouterr().out
    assert rc == 1 and "fail  backend: no GPU backend found: jetson: no Jetson GPU devfreq node" in out
    # a laptop: the fix line names the rehearsal on a fake board
    assert "without a board, rehearse these checks on a fake AGX Orin: python -m dvfslab.testing.rehearse" in out


def test_the_twins_own_sweep_is_not_warned_for_clocks_it_does_not_read(tmp_path, capsys):
    """A sweep of the simulated board pins EMC and CPU at max (the default) but the twin models
    them rather than reading them back: nothing is wrong with the dataset (issue 36)."""
    out = tmp_path / "sweep"
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--workloads", "bert-base/sst2", "--freqs", "612",
                 "--steps", "5", "--warmup-steps", "1", "--idle-s", "1", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["doctor", "--dataset", str(out)]) == 0
    report = capsys.readouterr().out
    assert report.splitlines()[-1] == "summary: 3 ok, 0 warn, 0 fail"
    assert ("ok    emc (dataset): runs.csv has no emc_freq_mhz: a simulated dataset, whose emc clock is the twin's "
            "model, not a reading (a joint sweep of the twin records it)") in report


def test_rehearse_with_an_unknown_profile_is_one_usage_line(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "dvfslab.testing.rehearse", "--profile", "nope"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1].startswith("python -m dvfslab.testing.rehearse: error: --profile: unknown board "
                                                "profile 'nope'; choose one of agx-orin-jp5, agx-orin-jp6")


# -- NVML ----------------------------------------------------------------------------------------
class ManualClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def nvml_doctor(monkeypatch, capsys, gpu: FakeGpu) -> tuple[int, dict]:
    clock = ManualClock()
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module([gpu], clock=clock))
    args = build_parser().parse_args(["doctor", "--backend", "nvml", "--json"])
    rc = run(args, TimeSource(clock, clock.advance))
    return rc, {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}


def h100(**kw) -> FakeGpu:
    return FakeGpu(name="NVIDIA H100 80GB HBM3", arch=fake_pynvml.NVML_DEVICE_ARCH_HOPPER,
                   graphics_clocks_mhz=tuple(range(1980, 330, -15)), **kw)


def test_nvml_path_on_the_fake_pynvml(monkeypatch, capsys):
    gpu = h100()
    rc, c = nvml_doctor(monkeypatch, capsys, gpu)
    assert rc == 0 and list(c) == ["gpu", "power source", "thermal", "sampler", "lock", "other clocks"]
    assert "Jetson-only" in c["other clocks"]["detail"]
    assert c["gpu"]["detail"] == "NVML GPU 0: NVIDIA H100 80GB HBM3"
    assert c["power source"]["detail"] == "window energy from the driver's energy counter (mJ; Volta and newer)"
    assert c["thermal"]["detail"] == "no thermal or power slowdown reported (GPU idle)"
    # no update interval: the 10 ms default; the manual clock does not move during a read
    assert c["sampler"]["detail"] == ("achieved 100 Hz of 100 Hz requested over 2 s; one sample's reads take 0 ms "
                                      "(max 0 ms)")
    # levels 1980, 1965, ... 345 MHz; each lock read back at its level; reset afterwards
    assert c["lock"] == {"name": "lock", "status": "ok", "fix": None,
                         "detail": "345 and 1980 MHz locked, graphics clock read 345 and 1980 MHz; clocks reset"}
    assert gpu.locked_mhz is None


def test_nvml_without_root_fails_the_lock(monkeypatch, capsys):
    rc, c = nvml_doctor(monkeypatch, capsys, h100(can_lock=False))
    assert rc == 1 and c["lock"]["status"] == "fail" and "insufficient permissions" in c["lock"]["detail"]


def test_nvml_power_capped_gpu_warns_and_fails_the_top_lock(monkeypatch, capsys):
    rc, c = nvml_doctor(monkeypatch, capsys, h100(clock_cap_mhz=1500, util_pct=100))
    assert c["thermal"]["status"] == "warn" and c["thermal"]["detail"] == "the GPU is held back now: software power cap"
    assert rc == 1 and c["lock"]["detail"].startswith("lock to 1980 MHz failed: NVML NVIDIA H100 80GB HBM3: "
                                                      "graphics clock 1500 MHz after locking 1980 MHz")
