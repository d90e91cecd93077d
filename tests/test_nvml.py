"""The NVML backend against the fake pynvml module (injected as sys.modules["pynvml"]).

Expected values are hand computations from the fake's power profile and the NVML API
reference's statements (power usage is a 1 s average on Ampere except GA100 and newer; the
energy counter is mJ since the driver loaded, Volta and newer; locked clocks Volta and newer).
Time is a manual clock: nothing sleeps.
"""

from __future__ import annotations

import sys

import pytest

from dvfslab.hw import get_backend
from dvfslab.hw.base import (
    BackendUnavailableError,
    ClockControl,
    ClockPermissionError,
    FrequencyCappedError,
    PowerReader,
    PowerReadError,
    UnsupportedFrequencyError,
)
from dvfslab.hw.nvml import NvmlClocks, NvmlPowerReader, open_backend
from dvfslab.testing import fake_pynvml
from dvfslab.testing.fake_pynvml import FakeGpu

HOPPER, AMPERE, PASCAL = (fake_pynvml.NVML_DEVICE_ARCH_HOPPER, fake_pynvml.NVML_DEVICE_ARCH_AMPERE,
                          fake_pynvml.NVML_DEVICE_ARCH_PASCAL)


class ManualClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def no_sleep(_s: float) -> None:
    pass


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


def h100(**kw) -> FakeGpu:
    return FakeGpu(name="NVIDIA H100 80GB HBM3", arch=HOPPER, graphics_clocks_mhz=tuple(range(1980, 330, -15)),
                   **kw)


def step_profile(monkeypatch, gpu: FakeGpu):
    """100 W until t = 110 s, then 300 W; returns (module, clock) with the clock at 110.25 s."""
    clock = ManualClock()
    gpu.power_mw = 100_000.0
    mod = install(monkeypatch, [gpu], clock=clock)
    clock.t = 110.0
    mod.set_power(0, 300_000.0)
    clock.t = 110.25
    return mod, clock


# -- clocks ------------------------------------------------------------------------------------


def test_levels_lock_and_reset(nvml):
    mod, _ = nvml
    mod.fake_gpus[0].util_pct = 90
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


def test_a_lock_the_gpu_does_not_reach_is_refused_and_reset(monkeypatch):
    """Rule: verify the clock after nvmlDeviceSetGpuLockedClocks. A power cap holds the A100 at
    1200 MHz (the highest level <= 1200 in its 15 MHz table): locking 1410 must not pass."""
    mod = install(monkeypatch, [FakeGpu(util_pct=100, clock_cap_mhz=1200)])
    clocks = NvmlClocks()
    clocks.sleep = no_sleep  # the re-reads after a miss need no real pause on the fake
    with pytest.raises(FrequencyCappedError, match=r"1200 MHz.*1410 MHz.*software power cap"):
        clocks.lock(1410)
    assert mod.fake_gpus[0].locked_mhz is None  # reset, as on the Jetson backend
    assert clocks.lock(1200).cur_freq_mhz == 1200.0  # a level under the cap verifies
    clocks.reset()


def test_an_idle_gpu_below_the_lock_is_unverified_not_failed(monkeypatch):
    mod = install(monkeypatch, [FakeGpu(util_pct=0, idle_drops_clock=True)])
    clocks = NvmlClocks()
    clocks.sleep = no_sleep
    st = clocks.lock(1410)  # no error: the clock rises when work arrives
    assert st.cur_freq_mhz == 210.0 and mod.fake_gpus[0].locked_mhz == (1410, 1410)
    assert clocks.last_lock_check.status == "unverified" and clocks.last_lock_check.reasons == ("GPU idle",)
    assert "unverified until the GPU has work" in clocks.last_lock_check.why
    mod.fake_gpus[0].util_pct = 80
    from dvfslab.hw.nvml import verify_locked_clock
    check = verify_locked_clock(clocks.s.handle, 1410.0, clocks.levels_mhz(), mod, sleep=no_sleep)
    assert check.verified and check.measured_mhz == 1410.0
    clocks.reset()


def test_pascal_lock_is_not_supported_with_a_discrete_gpu_hint(monkeypatch):
    """Locked clocks are Volta+; the NOT_SUPPORTED message must not send a dGPU user to Jetson."""
    install(monkeypatch, [FakeGpu(name="Tesla P100-PCIE-16GB", arch=PASCAL)])
    with pytest.raises(Exception, match="Volta") as info:
        NvmlClocks().lock(1410)
    assert "Tegra" not in str(info.value) and "jetson" not in str(info.value).lower()


# -- power -------------------------------------------------------------------------------------


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


def test_hopper_samples_are_instant_not_the_1s_average(monkeypatch):
    """Rule: on Ampere (non-GA100) and newer use NVML_FI_DEV_POWER_INSTANT. 0.25 s after a
    100 -> 300 W step the instant power is 300 W; the 1 s average would be
    0.75 x 100 + 0.25 x 300 = 150 W."""
    step_profile(monkeypatch, h100())
    assert NvmlPowerReader().read().power_mw["GPU"] == 300_000.0


def test_fake_power_usage_is_the_trailing_1s_average(monkeypatch):
    """The fake follows the API reference: Hopper usage = 1 s mean (150 W, as above); GA100
    (A100) usage = the power now (300 W)."""
    for gpu, expected_mw in ((h100(), 150_000), (FakeGpu(), 300_000)):
        mod, _ = step_profile(monkeypatch, gpu)
        mod.nvmlInit()
        assert mod.nvmlDeviceGetPowerUsage(mod.nvmlDeviceGetHandleByIndex(0)) == expected_mw


def test_the_1s_average_is_only_a_labelled_fallback(monkeypatch):
    """A driver without the instant field: the Hopper sample is the 1 s average (150 W, as
    above) and says so; a GA100 (A100) usage reading is instantaneous and says that."""
    _, clock = step_profile(monkeypatch, h100(supports_instant_field=False))
    reader = NvmlPowerReader()
    assert reader.read().power_mw["GPU"] == 150_000.0
    assert reader.power_source == "average-1s" and reader.averaging_s == 1.0
    _, clock = step_profile(monkeypatch, FakeGpu(supports_instant_field=False))
    reader = NvmlPowerReader()
    assert reader.power_source == "instant" and reader.read().power_mw["GPU"] == 300_000.0


def test_window_energy_is_the_counter_delta(monkeypatch):
    """Rule: window energy from nvmlDeviceGetTotalEnergyConsumption deltas. Window 100.05 s ..
    103.05 s, counter refreshed every 0.1 s: the edges read the refreshes at 100.0 and 103.0,
    so the delta is 2 s x 100 W + 1 s x 300 W = 500 J (the edge error is one refresh)."""
    from dvfslab.measure.energy import counter_energy_j
    clock = ManualClock()
    mod = install(monkeypatch, [h100(power_mw=100_000.0, energy_update_s=0.1)], clock=clock)
    reader = NvmlPowerReader(clock=clock)
    assert reader.energy_source == "energy-counter"
    clock.t = 100.05
    start = reader.counter()
    clock.t = 102.0
    mod.set_power(0, 300_000.0)
    clock.t = 103.05
    end = reader.counter()
    assert counter_energy_j(start, end) == pytest.approx(500.0)
    assert (start.t_s, end.t_s) == (100.05, 103.05)


def test_counter_going_back_is_an_error_not_negative_energy(monkeypatch):
    from dvfslab.hw.base import CounterReading
    from dvfslab.measure.energy import counter_energy_j
    with pytest.raises(PowerReadError, match="driver reloaded"):
        counter_energy_j(CounterReading(1.0, 5_000.0), CounterReading(2.0, 1_000.0))


def test_without_a_counter_the_reader_declares_none(monkeypatch):
    """Pre-Volta: no energy counter, so counter() is its null answer (the sampler then
    integrates the samples, labelled with what they are)."""
    from dvfslab.hw.nvml import nvml_power_source
    mod = install(monkeypatch, [h100(supports_energy=False, supports_instant_field=False)])
    reader = NvmlPowerReader()
    assert reader.energy_source == "average-1s" and reader.power_source == "average-1s"
    assert reader.counter() is None
    handle = mod.nvmlDeviceGetHandleByIndex(0)
    assert nvml_power_source(handle, mod) == "average-1s"
    mod.fake_gpus[0].supports_instant_field = True
    assert nvml_power_source(handle, mod) == "instant"
    mod.fake_gpus[0].supports_energy = True
    assert nvml_power_source(handle, mod) == "energy-counter"


def test_energy_not_supported_is_a_power_read_error_without_tegra(monkeypatch):
    """Rule: on a discrete GPU the NOT_SUPPORTED hint does not talk about Tegra / Jetson."""
    install(monkeypatch, [FakeGpu(name="Tesla P100-PCIE-16GB", arch=PASCAL)])
    with pytest.raises(PowerReadError, match="not supported") as info:
        NvmlPowerReader().energy_mj()
    msg = str(info.value)
    assert "Tegra" not in msg and "--backend jetson" not in msg and "Volta" in msg
    from dvfslab.hw.nvml import nvml_error
    other = nvml_error(fake_pynvml, fake_pynvml.NVMLError(fake_pynvml.NVML_ERROR_NOT_SUPPORTED), "clock info",
                       device_name="Tesla P100-PCIE-16GB")
    assert "nvidia-smi -q" in str(other) and "Tegra" not in str(other)


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
    assert be.description["energy_source"] == "energy-counter"
    assert be.simulated is False and be.virtual_time is False


def test_the_sampler_takes_a_windows_energy_from_the_counter(monkeypatch):
    """The PowerSampler uses the counter at its window edges. Window 100.05 .. 103.05 s, one
    sample at each edge (100 W, then 300 W after the step at 102 s): the trapezoid of the samples
    says (100 + 300) / 2 x 3 s = 600 J; the counter (refreshed every 0.1 s) says 2 s x 100 W +
    1 s x 300 W = 500 J, and that is what the window reports, labelled."""
    from dvfslab.measure.sampler import PowerSampler
    clock = ManualClock()
    mod = install(monkeypatch, [h100(power_mw=100_000.0, energy_update_s=0.1)], clock=clock)
    reader = NvmlPowerReader(clock=clock)
    sampler = PowerSampler(reader, period_s=0.5, clock=clock, threaded=False).start()
    clock.t = 100.05
    sampler.begin_window("w")
    clock.t = 102.0
    mod.set_power(0, 300_000.0)
    clock.t = 103.05
    m = sampler.end_window("w")
    assert m.energy_source == "energy-counter" and m.n_samples == 2
    assert m.energy_j == pytest.approx(500.0) and m.energy_by_rail_j == {"GPU": pytest.approx(500.0)}
    assert m.avg_power_w == pytest.approx(500.0 / 3.0)
    assert sampler.measure(100.05, 103.05).energy_j == pytest.approx(600.0)  # the samples alone


def test_without_a_counter_the_sampler_labels_what_its_samples_are(monkeypatch):
    """No energy counter: the window is the trapezoid of the instant samples, 600 J, labelled."""
    from dvfslab.measure.sampler import PowerSampler
    clock = ManualClock()
    mod = install(monkeypatch, [h100(power_mw=100_000.0, supports_energy=False)], clock=clock)
    reader = NvmlPowerReader(clock=clock)
    sampler = PowerSampler(reader, period_s=0.5, clock=clock, threaded=False).start()
    clock.t = 100.05
    sampler.begin_window("w")
    clock.t = 102.0
    mod.set_power(0, 300_000.0)
    clock.t = 103.05
    m = sampler.end_window("w")
    assert m.energy_source == "instant" and m.energy_j == pytest.approx(600.0)
