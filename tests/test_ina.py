"""The power monitors' real rules on the blocking fake INA3221 (issue 15, items 4, 5 and 10).

Expected values are hand computations from the driver's rule (docs/hardware.md, "Power
monitors"): a 3-channel INA3221 converts bus + shunt per channel at 1.1 ms, a 6.6 ms cycle;
each value read waits for a cycle end not yet consumed (+6.6 ms) and costs 0.2 ms of I2C.
"""

from __future__ import annotations

import logging
import shutil

import pytest

from dvfslab.cli import main
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.board import jetpack_release
from dvfslab.hw.jetson.ina import other_sensor_readers, sensor_update_period_s
from dvfslab.hw.jetson.power import JetsonPowerReader, JetsonTelemetry
from dvfslab.measure.loop import tick_loop
from dvfslab.measure.sampler import PowerSampler
from dvfslab.testing.fake_ina import BlockingInaIO, VirtualClock, install
from dvfslab.testing.fake_sysfs import build_board

CYCLE_S = 3 * 2 * 0.0011  # one conversion cycle of a 3-channel INA3221
WAIT_S = CYCLE_S + 0.0002  # a read that waits one cycle, plus its I2C transfer


def run_for(sampler: PowerSampler, clock: VirtualClock, seconds: float) -> None:
    """The sampler's own tick loop on the virtual clock for ``seconds``."""
    end = clock.t_s + seconds

    def wait(delay_s: float) -> bool:
        clock.advance(delay_s)
        return clock.t_s >= end

    tick_loop(sampler.period_s, clock, sampler.sample_once, wait)


def test_a_sample_is_stamped_at_the_midpoint_of_its_blocking_reads(orin_jp6):
    """Item 4: AGX Orin, 4 rails = 8 value reads: 0x40 holds 3 rails (6 reads: the first finds
    a fresh cycle, 5 wait), 0x41 one rail (2 reads: 1 fresh, 1 waits): 2 x 0.2 + 6 x 6.8 ms."""
    io = install(orin_jp6)
    reader = JetsonPowerReader(io=io, clock=io.clock)
    sample = reader.read()
    cost_s = 2 * 0.0002 + 6 * WAIT_S
    assert cost_s == pytest.approx(0.0412)
    assert reader.last_read_cost_s == pytest.approx(cost_s)
    assert sample.t_s == pytest.approx(cost_s / 2)  # not 0.0, when the first read began


def test_default_period_is_half_the_drivers_update_interval(orin_jp6):
    """Item 4: the driver reports round(6.6 ms) = 7 ms; the sampler defaults to 3.5 ms."""
    io = install(orin_jp6)
    assert sensor_update_period_s(io) == 0.007
    reader = JetsonPowerReader(io=io, clock=io.clock)
    assert PowerSampler(reader, clock=io.clock, threaded=False).period_s == pytest.approx(0.0035)


def test_sampler_reports_achieved_rate_and_read_cost_on_the_blocking_fake(orin_jp6):
    """Item 4: every sample needs at least the 5 waits of chip 0x40 (>= 34 ms) and at most all
    8 reads waiting (<= 54.4 ms), so 3.5 ms requested (286 Hz) yields < 29.4 Hz."""
    io = install(orin_jp6)
    sampler = PowerSampler(JetsonPowerReader(io=io, clock=io.clock), clock=io.clock, threaded=False)
    sampler.start()
    run_for(sampler, io.clock, 2.0)
    st = sampler.stats()
    assert st["requested_hz"] == pytest.approx(1 / 0.0035)
    assert 5 * WAIT_S <= st["read_cost_mean_s"] <= 8 * WAIT_S
    assert 1 / (8 * WAIT_S + 0.0035) <= st["achieved_hz"] <= 1 / (5 * WAIT_S)
    assert st["n_samples"] == pytest.approx(2.0 * st["achieved_hz"], abs=1.5)


def test_gpu_load_is_polled_at_most_once_a_second(orin_jp6):
    """Item 5: each read of ``load`` wakes the GPU; it is read at t = 0, 1, 2, 3, 4 s (5 reads,
    a 6th if a sample lands on 5 s) while power is sampled at ~25 Hz, and held in between: a
    load change at 0.5 s shows from the read at 1 s on."""
    io = install(orin_jp6)
    reader = JetsonPowerReader(io=io, clock=io.clock, devfreq_rel=orin_jp6.devfreq_rel)
    orin_jp6.set_load(40.0)
    sampler = PowerSampler(reader, clock=io.clock, threaded=False).start()
    run_for(sampler, io.clock, 0.5)
    orin_jp6.set_load(80.0)
    run_for(sampler, io.clock, 4.5)
    assert sampler.n_samples > 100
    assert 5 <= io.n_reads(orin_jp6.load_path) <= 6
    frame = sampler.samples()
    assert set(frame.loc[frame["t_s"] < 0.99, "gpu_util_pct"]) == {40.0}
    assert set(frame.loc[frame["t_s"] > 1.05, "gpu_util_pct"]) == {80.0}


def test_telemetry_load_can_be_rate_limited(orin_jp6):
    clock = VirtualClock()
    tel = JetsonTelemetry(io=BlockingInaIO(orin_jp6.root, clock), clock=clock, load_period_s=1.0)
    orin_jp6.set_load(10.0)
    assert tel.gpu_load_pct() == 10.0
    orin_jp6.set_load(90.0)
    clock.advance(0.5)
    assert tel.gpu_load_pct() == 10.0  # held: not read again within 1 s
    clock.advance(0.5)
    assert tel.gpu_load_pct() == 90.0


def _process(root, pid: int, comm: str, cmdline: str) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")


def test_other_readers_of_the_sensors_are_named_and_warned_about(orin_jp6, caplog):
    """Item 4: tegrastats and the jtop service poll the same chips."""
    _process(orin_jp6.root, 812, "tegrastats", "tegrastats --interval 100")
    _process(orin_jp6.root, 640, "python3", "/usr/bin/python3 /usr/local/bin/jtop --force")
    _process(orin_jp6.root, 900, "bash", "bash")
    assert sorted(other_sensor_readers(orin_jp6.io())) == ["jtop.service (pid 640)", "tegrastats (pid 812)"]
    with caplog.at_level(logging.WARNING, logger="dvfslab.hw.jetson.power"):
        JetsonPowerReader(io=orin_jp6.io())
    assert "tegrastats (pid 812)" in caplog.text and "jtop.service" in caplog.text


def test_no_other_readers_on_a_quiet_board(orin_jp6):
    _process(orin_jp6.root, 900, "bash", "bash")
    assert other_sensor_readers(orin_jp6.io()) == []
    (orin_jp6.root / "run").mkdir()
    (orin_jp6.root / "run/jtop.sock").write_text("")
    assert other_sensor_readers(orin_jp6.io()) == ["jtop.service (socket /run/jtop.sock)"]


@pytest.mark.parametrize("model, family", [
    ("NVIDIA Jetson Xavier NX Developer Kit", "Xavier NX"),
    ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit", "Orin NX / Orin Nano"),
])
def test_xavier_nx_rails_are_not_called_orin_nx(tmp_path, model, family):
    """Item 10: both boards label their rails VDD_IN / VDD_CPU_GPU_CV / VDD_SOC; the model
    string tells them apart."""
    board = build_board(tmp_path / "b", "orin-nx-jp6", model=model)
    reader = JetsonPowerReader(io=board.io())
    assert reader.board_family == family
    assert reader.total_rails == ("VDD_CPU_GPU_CV", "VDD_SOC")
    assert "untested" in reader.support_note


def test_devices_says_when_a_board_is_untested(tmp_path, capsys):
    """Item 10: AGX Orin is the board dvfslab is written against; others get a line saying so."""
    xavier_nx = build_board(tmp_path / "x", "orin-nx-jp6", model="NVIDIA Jetson Xavier NX Developer Kit")
    agx = build_board(tmp_path / "a", "agx-orin-jp6")
    main(["devices", "--sysfs-root", str(xavier_nx.root), "--state-dir", str(tmp_path / "s")])
    out = capsys.readouterr().out
    assert "untested: dvfslab is written against AGX Orin; the Xavier NX rail layout" in out
    main(["devices", "--sysfs-root", str(agx.root), "--state-dir", str(tmp_path / "s")])
    assert "untested" not in capsys.readouterr().out


def _thor_rail(root, addr: str, label: str, mv: int, ma: int, uw: int) -> None:
    d = root / "sys/bus/i2c/drivers/ina238" / addr / "hwmon" / f"hwmon{addr[-1]}"
    d.mkdir(parents=True)
    for name, value in (("name", "ina238"), ("in1_label", label), ("in1_input", mv),
                        ("curr1_input", ma), ("power1_input", uw)):
        (d / name).write_text(f"{value}\n")


def test_thor_ina238_rails_and_l4t_r39(tmp_path):
    """Item 10: Thor has no ina3221 hwmon; its INA238 chips give power1_input in uW, and
    L4T R39 is JetPack 7 (both unverified on a board: the mainline hwmon ABI)."""
    board = build_board(tmp_path / "t", "agx-orin-jp6", model="NVIDIA Jetson AGX Thor Developer Kit",
                        l4t="# R39 (release), REVISION: 0.0, GCID: 0, BOARD: generic, EABI: aarch64")
    shutil.rmtree(board.root / "sys/bus/i2c/drivers/ina3221")
    _thor_rail(board.root, "2-0040", "VDD_GPU", 19000, 1000, 19_250_000)
    _thor_rail(board.root, "2-0041", "VDD_CPU_SOC_MSS", 5000, 600, 3_000_000)
    reader = JetsonPowerReader(io=board.io())
    assert reader.rails == ("VDD_GPU", "VDD_CPU_SOC_MSS")
    assert reader.read().power_mw == {"VDD_GPU": 19250.0, "VDD_CPU_SOC_MSS": 3000.0}
    assert reader.board_family == "AGX Thor" and reader.total_rails == reader.rails
    assert reader.update_interval_s is None and "untested" in reader.support_note
    assert jetpack_release(board.io()) == "L4T R39.0.0 (JetPack 7)"
    assert open_backend(io=board.io()).power.rails == reader.rails
