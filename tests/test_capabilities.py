"""Declared capabilities (dvfslab.hw.base, dvfslab.sweep.executors): each one present on the
backend that has it, absent (its null implementation) on one that lacks it, and a backend with
nothing but the required members goes through a sweep session, a sampler window and close
without an AttributeError."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from dvfslab.core.errors import DvfsError
from dvfslab.hw import get_backend
from dvfslab.hw.base import (
    Backend,
    ClockControl,
    ClockState,
    CounterReading,
    LockCheck,
    PowerReader,
    PowerSample,
    lock_status,
)
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.sysfs import SysfsIO
from dvfslab.hw.nvml import NvmlPowerReader
from dvfslab.measure.sampler import PowerSampler
from dvfslab.sweep.executors import Executor, describe_executor, load_executor
from dvfslab.sweep.plan import RunSpec
from dvfslab.sweep.session import check_baseline, repair_clocks, set_policy
from dvfslab.sweep.twin import SimExecutor
from dvfslab.testing import fake_pynvml
from dvfslab.testing.fake_ina import install as install_blocking_ina
from dvfslab.testing.fake_pynvml import FakeGpu

LEVELS = (100.0, 200.0)


class BareClocks(ClockControl):
    """Only what every clock control must have: no lock check, no baseline, no saved state."""

    def __init__(self):
        self.locked: float | None = None

    def levels_mhz(self) -> list[float]:
        return list(LEVELS)

    def state(self) -> ClockState:
        f = self.locked or LEVELS[-1]
        return ClockState(f, self.locked or LEVELS[0], f, levels_mhz=LEVELS)

    def lock(self, freq_mhz: float, nearest: bool = False) -> ClockState:
        self.locked = freq_mhz
        return self.state()

    def reset(self) -> None:
        self.locked = None


class BareReader(PowerReader):
    """Only rails and read(): no update interval, no sample label, no counter, nothing to close."""

    rails = total_rails = ("GPU",)

    def __init__(self, clock):
        self.clock = clock

    def read(self) -> PowerSample:
        return PowerSample(self.clock(), {"GPU": 5000.0})


class BareExecutor(Executor):
    def run(self, spec, backend, sampler):
        return {"time_s": 1.0, "energy_j": 5.0}


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def fixed(freq_mhz: float) -> RunSpec:
    return RunSpec(run_id="r1", workload_id="w", policy="fixed", freq_mhz=freq_mhz, rep=0, steps=1,
                   warmup_steps=0)


# -- a backend lacking every optional capability ----------------------------------------------
def test_a_bare_backend_takes_the_null_implementations(tmp_path):
    clock = Clock()
    backend = Backend("bare", clocks=BareClocks(), power=BareReader(clock), clock=clock)
    assert repair_clocks(backend) is None  # recover(): nothing kept, nothing restored
    assert check_baseline(backend) is None  # preflight(): nothing to check
    assert set_policy(backend, fixed(200.0)) is None  # no lock check to record
    assert backend.clocks.state().locked
    sampler = PowerSampler(backend.power, clock=clock, threaded=False).start()
    assert sampler.period_s == 0.01  # no update interval: the 10 ms default
    sampler.begin_window("w")
    clock.t = 2.0
    m = sampler.end_window("w")
    # 5 W held for 2 s, integrated from the two edge samples; labelled as sampled (no counter)
    assert m.energy_j == pytest.approx(10.0) and m.energy_source == "sampled"
    backend.close()  # resets the clocks; closing a reader with nothing open is a no-op
    assert backend.clocks.locked is None


def test_an_executor_declares_the_hardware_defaults():
    ex = BareExecutor()
    assert ex.threaded_sampler is True
    assert describe_executor(ex) == {"class": "test_capabilities:BareExecutor"}
    assert SimExecutor.threaded_sampler is False  # the twin drives its sampler on virtual time


def test_an_executor_class_that_moved_still_loads_and_a_non_executor_is_refused():
    assert isinstance(load_executor("dvfslab.sim.executor:SimExecutor"), SimExecutor)
    assert isinstance(load_executor("dvfslab.sweep.twin:SimExecutor"), SimExecutor)
    with pytest.raises(DvfsError, match=r"^executor 'dvfslab.hw.base:ClockState' is not a subclass of "
                                        r"dvfslab.sweep.executors.Executor$"):
        load_executor("dvfslab.hw.base:ClockState")


# -- the lock check ---------------------------------------------------------------------------
def test_lock_status_is_one_rule():
    """Within the tolerance verified; above the request not-locked; below capped, or unverified
    when the device says it is idle; nothing measured unverified."""
    assert [lock_status(612.0, m, 5.0) for m in (615.0, 700.0, 400.0, None)] == [
        "verified", "not-locked", "capped", "unverified"]
    assert lock_status(612.0, 400.0, 5.0, idle=True) == "unverified"
    with pytest.raises(ValueError):
        LockCheck(612.0, 612.0, "idle", "no such status")


def test_lock_check_present_on_jetson_and_nvml_absent_on_the_twin(orin_jp6, tmp_path, monkeypatch):
    jetson = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "s")
    assert set_policy(jetson, fixed(612.0)) == {"requested_mhz": 612.0, "measured_mhz": 612.0,
                                                "verified": True, "why": "BPMP counter reads 612 MHz"}
    jetson.close()
    mod = fake_pynvml.make_module([FakeGpu(util_pct=100)])
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    nvml = get_backend("nvml")
    level = nvml.clocks.levels_mhz()[-1]
    record = set_policy(nvml, fixed(level))
    assert (record["requested_mhz"], record["measured_mhz"], record["verified"]) == (level, level, True)
    assert nvml.clocks.last_lock_check.source == "graphics clock"
    nvml.close()
    twin = get_backend("sim")
    assert set_policy(twin, fixed(612.0)) is None and twin.clocks.last_lock_check is None


# -- preflight and recover (Jetson), null on the twin -----------------------------------------
def test_preflight_checks_the_jetson_baseline_and_nothing_on_the_twin(orin_jp6, tmp_path):
    clocks = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "s").clocks
    assert clocks.preflight() == "ok: MAXN, default governor"
    orin_jp6.run_jetson_clocks()
    with pytest.raises(DvfsError, match="jetson_clocks applied"):
        clocks.preflight()
    assert get_backend("sim").clocks.preflight() is None


def _pinned_by(board, tmp_path, pid: int):
    """The board locked at 612 MHz by a process ``pid`` that kept its state file."""
    first = open_backend(io=board.io(), state_dir=tmp_path / "s").clocks
    first.lock(612)
    first.state_file.save(replace(first.state_file.load(), pid=pid))
    first._originals = None  # that process is gone: nothing here restores on its behalf


def test_recover_restores_what_a_dead_process_left_and_refuses_a_live_owner(orin_jp6, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _pinned_by(orin_jp6, tmp_path, dead.pid)
    assert orin_jp6.state()["min_freq_hz"] == orin_jp6.state()["max_freq_hz"] == 612_000_000
    clocks = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "s").clocks
    restored = clocks.recover()
    assert restored.startswith("SavedClocks(") and f"pid={dead.pid}" in restored
    assert (orin_jp6.state()["min_freq_hz"], orin_jp6.state()["max_freq_hz"]) == (306_000_000, 1_300_500_000)
    assert clocks.recover() is None  # nothing pending any more


def test_recover_never_takes_clocks_a_live_process_holds(orin_jp6, tmp_path):
    import os

    _pinned_by(orin_jp6, tmp_path, os.getppid())  # the process that started pytest: alive
    clocks = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "s").clocks
    with pytest.raises(DvfsError, match=f"pid {os.getppid()}"):
        clocks.recover()
    assert orin_jp6.state()["max_freq_hz"] == 612_000_000  # left as the owner has it
    assert get_backend("sim").clocks.recover() is None


# -- the power reader's optional members -----------------------------------------------------
def test_energy_counter_present_on_volta_and_newer_absent_before_and_on_jetson(orin_jp6, tmp_path, monkeypatch):
    clock = Clock()
    clock.t = 10.0
    mod = fake_pynvml.make_module([FakeGpu(), FakeGpu(name="Tesla P100", arch=fake_pynvml.NVML_DEVICE_ARCH_PASCAL)],
                                  clock=clock)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    volta_plus, pascal = NvmlPowerReader(0, clock=clock), NvmlPowerReader(1, clock=clock)
    assert isinstance(volta_plus.counter(), CounterReading) and volta_plus.counter().t_s == 10.0
    assert pascal.counter() is None
    jetson = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "s").power
    assert jetson.counter() is None and jetson.power_source is None


def test_support_note_and_close(any_board, tmp_path):
    power = open_backend(io=any_board.io(), state_dir=tmp_path / "s").power
    assert (power.support_note is None) == (any_board.profile.family == "AGX Orin")
    first = power.read()
    power.close()  # the kept file descriptors go; a later read opens them again
    assert power.read().power_mw == first.power_mw
    assert get_backend("sim").power.support_note is None


def test_virtual_clock_only_on_an_io_that_carries_one(orin_jp6):
    assert SysfsIO(orin_jp6.root).virtual_clock is None and orin_jp6.io().virtual_clock is None
    blocking = install_blocking_ina(orin_jp6)
    t0 = blocking.virtual_clock()
    blocking.virtual_clock.advance(0.5)
    assert blocking.virtual_clock() == t0 + 0.5
