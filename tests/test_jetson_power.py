"""INA3221 rails (hwmon and JetPack 4 iio), GPU load, thermal zones, and open_backend."""

from __future__ import annotations

import os
import shutil

import pytest

from dvfslab.hw import get_backend
from dvfslab.hw.base import BackendUnavailableError, PowerReader, PowerReadError, Telemetry
from dvfslab.hw.jetson import JetsonPowerReader, JetsonTelemetry, open_backend
from dvfslab.testing.fake_sysfs import build_board

RAILS = {
    "agx-orin-jp5": (("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"), ("VDD_CPU_CV", "VDD_GPU_SOC")),
    "agx-orin-jp6": (("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"), ("VDD_CPU_CV", "VDD_GPU_SOC")),
    "orin-nx-jp6": (("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), ("VDD_CPU_GPU_CV", "VDD_SOC")),
    "agx-xavier-jp5": (("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"), ("CPU", "GPU")),
    "jp4-iio": (("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"), ("CPU", "GPU")),
}


def test_rails_and_total_rails_per_profile(any_board):
    reader = JetsonPowerReader(any_board.root)
    assert isinstance(reader, PowerReader)
    rails, total = RAILS[any_board.profile.name]
    assert reader.rails == rails  # in7 ("sum of shunt voltages") and unlabeled channels skipped
    assert reader.total_rails == total
    for i, rail in enumerate(rails):  # rail i draws 1000 + 250 i mW: 5000 mV x (200 + 50 i) mA
        if any_board.profile.rail_kind == "iio":
            any_board.set_rail(rail, 1000 + 250 * i)
        else:
            any_board.set_rail(rail, mv=5000, ma=200 + 50 * i)
    sample = reader.read()
    assert dict(sample.power_mw) == {r: 1000.0 + 250 * i for i, r in enumerate(rails)}
    # "CPU + GPU" = rails 0 and 1 (1000 + 1250 mW), on the Orin NX rails 1 and 2 (1250 + 1500 mW)
    assert sample.total_mw(reader.total_rails) == (2750.0 if any_board.profile.name == "orin-nx-jp6" else 2250.0)
    reader.close()


def test_hwmon_power_is_millivolts_times_milliamps(orin_jp6):
    assert orin_jp6.set_rail("VDD_GPU_SOC", mv=4984, ma=3211) == pytest.approx(4984 * 3211 / 1000)
    with JetsonPowerReader(orin_jp6.root) as reader:
        assert reader.read().power_mw["VDD_GPU_SOC"] == pytest.approx(16003.624)
        orin_jp6.set_rail("VDD_GPU_SOC", mv=5000, ma=100)  # kept file descriptors see new values
        assert reader.read().power_mw["VDD_GPU_SOC"] == 500.0


def test_disabled_channel_is_skipped(orin_jp6):
    (orin_jp6.hwmon_dirs["1-0040"] / "in3_enable").write_text("0\n")  # VIN_SYS_5V0 off
    (orin_jp6.hwmon_dirs["1-0040"] / "in1_enable").write_text("1\n")
    assert JetsonPowerReader(orin_jp6.root).rails == ("VDD_GPU_SOC", "VDD_CPU_CV", "VDDQ_VDD2_1V8AO")


def test_iio_rails_read_milliwatts(tmp_path):
    board = build_board(tmp_path / "b", "jp4-iio")
    board.set_rail("GPU", 7321)
    assert JetsonPowerReader(board.root).read().power_mw["GPU"] == 7321.0


def test_update_interval_read_or_estimated_from_the_channels(tmp_path):
    # the JP6 tree's update_interval file, as the L4T driver reports it: round(3 x 2 x 1.1 ms) = 7 ms
    assert JetsonPowerReader(build_board(tmp_path / "a", "agx-orin-jp6").root).update_interval_s == 0.007
    # no update_interval file: 3 channels x (bus + shunt) x 1.1 ms = 6.6 ms (L4T conversion time)
    assert JetsonPowerReader(build_board(tmp_path / "b", "agx-orin-jp5").root).update_interval_s == pytest.approx(0.0066)
    assert JetsonPowerReader(build_board(tmp_path / "c", "jp4-iio").root).update_interval_s is None


def test_sample_carries_load_and_frequency(orin_jp6):
    be = open_backend(orin_jp6.root, io=orin_jp6.io())
    orin_jp6.set_load(37.5)
    be.clocks.lock(714)
    s = be.power.read()
    assert s.gpu_util_pct == 37.5 and s.gpu_freq_mhz == 714.0
    be.close()
    assert orin_jp6.state()["max_freq_hz"] == 1300500000


def test_sample_is_stamped_by_the_injected_clock_between_before_and_after_the_rails(orin_jp6):
    ticks = iter([12.5, 13.75, 20.0, 20.5])
    reader = JetsonPowerReader(io=orin_jp6.io(), clock=lambda: next(ticks))
    assert [reader.read().t_s, reader.read().t_s] == [13.125, 20.25]  # two clock calls per read
    assert reader.last_read_cost_s == 0.5
    assert next(ticks, None) is None
    reader.close()


def test_unreadable_rail_names_the_rail(orin_jp6):
    (orin_jp6.hwmon_dirs["1-0040"] / "curr2_input").write_text("garbage\n")
    with pytest.raises(PowerReadError, match="VDD_CPU_CV"):
        JetsonPowerReader(orin_jp6.root).read()


def test_no_rails(orin_jp6):
    shutil.rmtree(orin_jp6.root / "sys/bus/i2c/drivers/ina3221")
    with pytest.raises(PowerReadError, match="no INA3221 rails"):
        JetsonPowerReader(orin_jp6.root)
    be = open_backend(orin_jp6.root)
    assert be.power is None and "no INA3221 rails" in be.description["power_error"]
    assert be.clocks is not None


@pytest.mark.parametrize("profile", ["agx-orin-jp5", "agx-orin-jp6", "jp4-iio"])
def test_gpu_load_per_mille_on_each_layout(tmp_path, profile):
    board = build_board(tmp_path / profile, profile)
    tel = open_backend(board.root).telemetry
    assert isinstance(tel, Telemetry)
    board.set_load(42.7)
    assert tel.gpu_load_pct() == pytest.approx(42.7)
    assert int(board.load_path.read_text()) == 427
    os.unlink(board.load_path)
    assert tel.gpu_load_pct() is None


def test_temperatures_by_zone_type(orin_jp6):
    tel = JetsonTelemetry(orin_jp6.root)
    orin_jp6.set_temp("gpu-thermal", 61.25)
    temps = tel.temperatures_c()
    assert temps["gpu-thermal"] == 61.25
    assert "cv0-thermal" not in temps  # reads -256 C when the CV cluster is off
    assert set(temps) >= {"cpu-thermal", "tj-thermal", "soc0-thermal"}


def test_open_backend_description_and_registry(orin_jp6):
    orin_jp6.set_power_mode(3)
    be = get_backend("jetson", sysfs_root=orin_jp6.root)
    d = be.description
    assert be.name == "jetson"
    assert d["board"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert d["jetpack"] == "L4T R36.3.0 (JetPack 6)"
    assert d["power_mode"] == "MODE_50W (id 3)"
    assert d["levels_mhz"][-1] == 1300.5 and d["clock_writable"] is True
    assert d["total_rails"] == ["VDD_CPU_CV", "VDD_GPU_SOC"]
    assert be.simulated is False and be.virtual_time is False and be.power.clock is be.clock
    assert get_backend("auto", sysfs_root=orin_jp6.root).name == "jetson"


def test_not_a_jetson(tmp_path):
    with pytest.raises(BackendUnavailableError, match="not a Jetson"):
        open_backend(tmp_path)
