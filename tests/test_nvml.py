"""The NVML backend against the fake pynvml module (injected as sys.modules["pynvml"])."""

from __future__ import annotations

import sys

import pytest

from dvfslab.hw import get_backend
from dvfslab.hw.base import (
    BackendUnavailableError,
    ClockControl,
    ClockPermissionError,
    PowerReader,
    PowerReadError,
    UnsupportedFrequencyError,
)
from dvfslab.hw.nvml import NvmlClocks, NvmlPowerReader, open_backend
from dvfslab.testing import fake_pynvml
from dvfslab.testing.fake_pynvml import FakeGpu


class ManualClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def nvml(monkeypatch):
    """Install a fake pynvml with one A100; returns (module, clock)."""
    clock = ManualClock()
    mod = fake_pynvml.make_module([FakeGpu(power_mw=60000.0)], clock=clock)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod, clock


def install(monkeypatch, gpus=None, **kw):
    mod = fake_pynvml.make_module(gpus, **kw)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod


def test_levels_lock_and_reset(nvml):
    mod, _ = nvml
    be = open_backend()
    assert isinstance(be.clocks, ClockControl) and isinstance(be.power, PowerReader)
    levels = be.clocks.levels_mhz()
    assert levels == sorted(levels) and levels[0] == 210.0 and levels[-1] == 1410.0
    st = be.clocks.lock(1005)
    assert st.locked and st.cur_freq_mhz == 1005.0 and mod.fake_gpus[0].locked_mhz == (1005, 1005)
    be.close()
    assert mod.fake_gpus[0].locked_mhz is None
    assert be.clocks.state().governor == "default"


def test_non_level_is_rejected_or_snapped(nvml):
    clocks = NvmlClocks()
    with pytest.raises(UnsupportedFrequencyError, match="1410"):
        clocks.lock(1000)
    assert clocks.lock(1000, nearest=True).cur_freq_mhz == 1005.0
    clocks.reset()


def test_lock_without_root_is_a_permission_error(monkeypatch):
    mod = install(monkeypatch, [FakeGpu(can_lock=False)])
    with pytest.raises(ClockPermissionError, match="root"):
        NvmlClocks().lock(1410)
    assert mod.fake_gpus[0].locked_mhz is None


def test_power_mw_and_energy_counter_mj(nvml):
    mod, clock = nvml
    reader = NvmlPowerReader()
    assert reader.rails == ("GPU",) and reader.total_rails == ("GPU",)
    assert reader.read().power_mw == {"GPU": 60000.0}
    e0 = reader.energy_mj()
    clock.t += 2.0
    mod.set_power(0, 30000.0)
    clock.t += 1.0
    assert reader.energy_mj() - e0 == pytest.approx(60000.0 * 2 + 30000.0 * 1)
    assert reader.read().power_mw["GPU"] == 30000.0


def test_energy_not_supported_is_a_power_read_error(monkeypatch):
    install(monkeypatch, [FakeGpu(supports_energy=False)])
    with pytest.raises(PowerReadError, match="not supported"):
        NvmlPowerReader().energy_mj()


def test_tegra_not_supported_is_reported_clearly(monkeypatch):
    install(monkeypatch, [FakeGpu(name="Orin (nvgpu)", tegra=True)])
    with pytest.raises(BackendUnavailableError, match=r"Orin \(nvgpu\).*Jetson \(Tegra\).*--backend jetson"):
        open_backend()


@pytest.mark.parametrize("code", [fake_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, fake_pynvml.NVML_ERROR_DRIVER_NOT_LOADED])
def test_no_driver_is_unavailable(monkeypatch, code):
    install(monkeypatch, init_error=code)
    with pytest.raises(BackendUnavailableError, match="NVIDIA driver"):
        open_backend()


def test_missing_package_and_bad_index(monkeypatch):
    install(monkeypatch)
    with pytest.raises(BackendUnavailableError, match="no GPU index 3"):
        open_backend(index=3)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(BackendUnavailableError, match=r"pip install 'dvfslab\[nvml\]'"):
        open_backend()


def test_auto_falls_back_to_nvml_when_no_jetson(nvml, tmp_path):
    be = get_backend("auto", sysfs_root=tmp_path)
    assert be.name == "nvml" and be.description["gpu"] == "NVIDIA A100-SXM4-40GB"
    assert be.simulated is False and be.virtual_time is False
