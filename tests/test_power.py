"""PowerSampler: virtual-time and threaded sampling, windows, lost reads, idle, CUDA sync."""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
import types

import numpy as np
import pytest

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import PowerReader, PowerReadError, PowerSample
from dvfslab.measure.loop import stop_event_wait, tick_loop
from dvfslab.measure.sampler import (
    DEFAULT_PERIOD_S,
    PowerSampler,
    SamplerError,
    WindowError,
    default_period_s,
)

GPU, CPU, SYS = "VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"


class VirtualClock:
    """A clock that only moves when told to."""

    def __init__(self, t_s: float = 0.0):
        self.t_s = t_s

    def __call__(self) -> float:
        return self.t_s


class FakeReader(PowerReader):
    """An AGX Orin-shaped PowerReader: rails as functions of time (W), optional failures."""

    rails = (GPU, CPU, SYS)
    total_rails = (GPU, CPU)

    def __init__(self, clock, gpu_w=lambda t: 10.0, cpu_w=lambda t: 2.0, *, fail=lambda n: False,
                 update_interval_s=None, noise_seed=None, util=None):
        self.clock, self.gpu_w, self.cpu_w, self.fail = clock, gpu_w, cpu_w, fail
        self.update_interval_s = update_interval_s
        self.rng = None if noise_seed is None else np.random.default_rng(noise_seed)
        self.util = util
        self.n_reads = 0
        self.lock = threading.Lock()

    def read(self) -> PowerSample:
        with self.lock:
            self.n_reads += 1
            n = self.n_reads
        t = self.clock()
        if self.fail(n):
            raise PowerReadError(f"INA3221 read {n} failed (EIO)")
        noise = 0.0 if self.rng is None else float(self.rng.normal(0, 50))
        power = {GPU: 1000 * self.gpu_w(t) + noise, CPU: 1000 * self.cpu_w(t), SYS: 5000.0}
        util = None if self.util is None else self.util(t)
        return PowerSample(t_s=t, power_mw=power, gpu_util_pct=util, gpu_freq_mhz=612.0 if util else None)


def drive(sampler: PowerSampler, clock: VirtualClock, until_s: float, events: dict | None = None) -> None:
    """The simulated board's loop: tick virtual time on the sampler's period grid up to
    ``until_s`` and call ``sample_once`` at each tick; ``events`` ``{t_s: fn}`` run at their
    exact (between-tick) times."""
    period = sampler.period_s
    events = dict(events or {})
    k = math.floor(clock.t_s / period + 1e-9) + 1
    while (tick := round(k * period, 12)) <= until_s + 1e-12:
        for t_ev in sorted(t for t in events if t <= tick):
            clock.t_s = max(clock.t_s, t_ev)
            events.pop(t_ev)()
        clock.t_s = tick
        sampler.sample_once()
        k += 1
    for t_ev in sorted(t for t in events if t <= until_s):
        clock.t_s = t_ev
        events.pop(t_ev)()
    clock.t_s = max(clock.t_s, until_s)


def virtual_run(clock=None, **reader_kw) -> tuple[PowerSampler, VirtualClock]:
    clock = clock or VirtualClock()
    sampler = PowerSampler(FakeReader(clock, **reader_kw), clock=clock, threaded=False)
    sampler.start()
    return sampler, clock


def test_default_period_is_half_the_update_interval():
    """Rule (issue 15, item 4): sample at half the sensor's update period (zeus's choice),
    floored at 1 ms; 10 ms when the sensor says nothing; an explicit period wins."""
    clock = VirtualClock()
    assert default_period_s(FakeReader(clock)) == DEFAULT_PERIOD_S == 0.010
    assert PowerSampler(FakeReader(clock, update_interval_s=0.007), threaded=False).period_s == 0.0035
    assert PowerSampler(FakeReader(clock, update_interval_s=0.14), threaded=False).period_s == 0.07
    assert PowerSampler(FakeReader(clock, update_interval_s=1e-5), threaded=False).period_s == 0.001
    assert PowerSampler(FakeReader(clock, update_interval_s=0.004), period_s=0.05).period_s == 0.05
    with pytest.raises(SamplerError, match="period_s must be > 0"):
        PowerSampler(FakeReader(clock), period_s=0)


class SlowReader(FakeReader):
    """Each read takes ``cost_s`` of virtual time (a blocking sensor)."""

    def __init__(self, clock, cost_s):
        super().__init__(clock)
        self.cost_s = cost_s

    def read(self) -> PowerSample:
        self.clock.t_s += self.cost_s
        return super().read()


def test_stats_report_achieved_rate_and_read_cost():
    """A read costing 25 ms caps a 100 Hz request at 1 / 30 ms (deadlines missed are skipped:
    one read every 3 periods of 10 ms), and stats() says so."""
    clock = VirtualClock()
    sampler = PowerSampler(SlowReader(clock, 0.025), period_s=0.010, clock=clock, threaded=False)
    sampler.start()

    def wait(delay_s):
        clock.t_s += delay_s
        return clock.t_s >= 3.0

    tick_loop(sampler.period_s, clock, sampler.sample_once, wait)
    st = sampler.stats()
    assert st["requested_hz"] == pytest.approx(100.0)
    assert st["achieved_hz"] == pytest.approx(1 / 0.030, rel=1e-6)
    assert st["read_cost_mean_s"] == pytest.approx(0.025) and st["read_cost_max_s"] == pytest.approx(0.025)


def test_total_rails_must_be_read_rails():
    reader = FakeReader(VirtualClock())
    reader.total_rails = ("VDD_IN",)
    with pytest.raises(SamplerError, match="VDD_IN"):
        PowerSampler(reader, threaded=False)


def test_sine_through_the_virtual_time_sampler_at_default_rate():
    sampler, clock = virtual_run(gpu_w=lambda t: 10 + 5 * math.sin(2 * math.pi * 0.7 * t))
    f = 2 * math.pi * 0.7
    drive(sampler, clock, 10.0, events={0.0137: lambda: sampler.begin_window("run"),
                                        9.9871: lambda: sampler.end_window("run")})
    (m,) = sampler.measurements
    a, b = 0.0137, 9.9871
    exact_gpu = 10 * (b - a) + 5 / f * (math.cos(f * a) - math.cos(f * b))
    assert m.energy_by_rail_j[GPU] == pytest.approx(exact_gpu, rel=0.005)
    assert m.energy_j == pytest.approx(exact_gpu + 2.0 * (b - a), rel=0.005)
    assert m.energy_by_rail_j[SYS] == pytest.approx(5.0 * (b - a))
    assert m.rate_hz == pytest.approx(100.0, rel=0.01)
    assert m.n_lost == 0 and m.idle_power_w is None and m.energy_above_idle_j is None


def test_nested_and_overlapping_windows():
    sampler, clock = virtual_run(gpu_w=lambda t: 5 + 2 * t, cpu_w=lambda t: 1.0)
    events = {
        1.0: lambda: sampler.begin_window("outer"),
        2.005: lambda: sampler.begin_window("inner"),
        3.0: lambda: sampler.begin_window("overlap"),
        5.0: lambda: results.__setitem__("inner", sampler.end_window("inner")),
        7.5: lambda: results.__setitem__("outer", sampler.end_window("outer")),
        8.0: lambda: results.__setitem__("overlap", sampler.end_window("overlap")),
    }
    results = {}
    drive(sampler, clock, 9.0, events=events)

    def exact(a, b):
        return 5 * (b - a) + (b**2 - a**2) + 1.0 * (b - a)

    for name, (a, b) in {"outer": (1.0, 7.5), "inner": (2.005, 5.0), "overlap": (3.0, 8.0)}.items():
        m = results[name]
        assert (m.t0_s, m.t1_s) == (a, b)
        assert m.energy_j == pytest.approx(exact(a, b), rel=1e-9)
    assert [m.name for m in sampler.measurements] == ["inner", "outer", "overlap"]


def test_reader_raising_mid_run_is_counted_and_the_window_still_closes(caplog):
    failing = set(range(300, 340))
    sampler, clock = virtual_run(fail=lambda n: n in failing)
    with caplog.at_level(logging.WARNING, logger="dvfslab.measure.sampler"):
        drive(sampler, clock, 1.0, events={0.5: lambda: sampler.begin_window("w")})
        drive(sampler, clock, 6.0)
        m = sampler.end_window("w")
    assert m.n_lost == len(failing) and sampler.n_lost == len(failing)
    assert isinstance(sampler.last_error, PowerReadError)
    assert m.energy_j == pytest.approx(12.0 * 5.5, rel=1e-9)  # constant power bridges the gap
    # 500 ticks + 1 edge read before t=6 s, then the closing edge read: 602 reads, 40 lost;
    # 49 ticks (0.01 … 0.49 s) precede the window
    assert sampler.reader.n_reads == 602 and m.n_samples == 602 - 40 - 49
    assert "power read failed" in caplog.text and "EIO" in caplog.text
    assert len(caplog.records) <= 4  # logging is rate-limited, not one line per lost read


def test_malformed_and_backwards_samples_are_lost_not_stored():
    clock = VirtualClock(5.0)
    sampler, _ = virtual_run(clock)
    reader = sampler.reader
    assert sampler.sample_once() is not None
    clock.t_s = 4.0
    assert sampler.sample_once() is None  # time ran backwards
    reader.read = lambda: PowerSample(t_s=6.0, power_mw={GPU: 1.0})  # rails missing
    assert sampler.sample_once() is None
    assert (sampler.n_samples, sampler.n_lost) == (1, 2)


def test_window_errors_are_clear():
    sampler = PowerSampler(FakeReader(VirtualClock()), threaded=False)
    with pytest.raises(SamplerError, match="not running"):
        sampler.begin_window("a")
    sampler.start()
    with pytest.raises(SamplerError, match="already running"):
        sampler.start()
    with pytest.raises(WindowError, match="'x'.*never begun"):
        sampler.end_window("x")
    sampler.begin_window("a")
    with pytest.raises(WindowError, match="'a' is already open"):
        sampler.begin_window("a")
    sampler.end_window("a")
    with pytest.raises(WindowError, match="'a'.*already ended"):
        sampler.end_window("a")
    assert issubclass(WindowError, DvfsError)
    sampler.begin_window("a")  # a name can be reused once closed
    assert sampler.end_window("a").name == "a"


def test_window_context_manager_closes_on_error():
    sampler, clock = virtual_run()
    with pytest.raises(RuntimeError), sampler.window("epoch-1") as w:
        drive(sampler, clock, 2.0)
        raise RuntimeError("training crashed")
    assert w.measurement is not None and w.measurement.time_s == pytest.approx(2.0)
    assert w.measurement.energy_j == pytest.approx(24.0)


def test_idle_baseline_in_virtual_time():
    sampler, clock = virtual_run(gpu_w=lambda t: 3.0 if t < 2.0 else 13.0)
    with pytest.raises(SamplerError, match="sleep="):
        sampler.measure_idle(1.0)
    idle_w = sampler.measure_idle(1.0, sleep=lambda s: drive(sampler, clock, clock.t_s + s))
    assert idle_w == pytest.approx(5.0)
    assert sampler.idle_measurement.time_s == pytest.approx(1.0)
    assert sampler.measurements == []  # the idle window is not a user window
    drive(sampler, clock, 2.0)
    with sampler.window("train") as w:
        drive(sampler, clock, 5.0)
    assert w.measurement.idle_power_w == pytest.approx(5.0)
    assert w.measurement.energy_above_idle_j == pytest.approx(15.0 * 3 - 5.0 * 3)


def test_gpu_util_and_freq_means_when_samples_carry_them():
    sampler, clock = virtual_run(util=lambda t: 30.0 if t < 1.0 else 90.0)
    with sampler.window("w") as w:
        drive(sampler, clock, 2.0)
    assert w.measurement.gpu_util_pct == pytest.approx(60.0, abs=0.5)
    assert w.measurement.gpu_freq_mhz == pytest.approx(612.0)
    frame = sampler.samples()
    assert {"gpu_util_pct", "gpu_freq_mhz"} <= set(frame.columns)


def test_samples_frame_is_tidy():
    sampler, clock = virtual_run(gpu_w=lambda t: 10 + t)
    drive(sampler, clock, 0.05)
    frame = sampler.samples()
    assert list(frame.columns) == ["t_s", f"{GPU}_mw", f"{CPU}_mw", f"{SYS}_mw", "total_mw"]
    assert frame["t_s"].tolist() == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.05])
    assert frame["total_mw"].tolist() == pytest.approx((frame[f"{GPU}_mw"] + frame[f"{CPU}_mw"]).tolist())
    assert frame.attrs == {"rails": [GPU, CPU, SYS], "total_rails": [GPU, CPU]}


def scenario(seed: int):
    """Same virtual-time run twice must give identical samples and measurements."""
    sampler, clock = virtual_run(gpu_w=lambda t: 8 + 4 * math.sin(t), noise_seed=seed,
                                 fail=lambda n: n % 97 == 0)
    results = {}
    events = {0.333: lambda: sampler.begin_window("a"),
              2.718: lambda: results.__setitem__("a", sampler.end_window("a"))}
    drive(sampler, clock, 3.0, events=events)
    return sampler.samples(), results["a"]


def test_virtual_time_is_deterministic():
    (f1, m1), (f2, m2) = scenario(3), scenario(3)
    assert f1.equals(f2)
    assert m1 == m2 and m1.n_lost == 2
    assert scenario(4)[1] != m1  # the noise does matter: the equality above is not vacuous


def install_fake_torch(monkeypatch, available: bool) -> list:
    calls = []
    cuda = types.SimpleNamespace(is_available=lambda: available, synchronize=lambda: calls.append(1))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return calls


def test_sync_cuda_synchronizes_at_each_window_edge(monkeypatch):
    calls = install_fake_torch(monkeypatch, available=True)
    clock = VirtualClock()
    sampler = PowerSampler(FakeReader(clock), clock=clock, threaded=False, sync_cuda=True).start()
    sampler.begin_window("a")
    assert len(calls) == 1
    sampler.end_window("a")
    assert len(calls) == 2
    plain = PowerSampler(FakeReader(clock), clock=clock, threaded=False).start()
    plain.begin_window("b")
    plain.end_window("b")
    assert len(calls) == 2  # sync_cuda=False never synchronizes


@pytest.mark.parametrize("torch_module", ["no-cuda", "missing"])
def test_sync_cuda_without_cuda_is_a_no_op(monkeypatch, torch_module):
    if torch_module == "missing":
        monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    else:
        install_fake_torch(monkeypatch, available=False)
    clock = VirtualClock()
    sampler = PowerSampler(FakeReader(clock), clock=clock, threaded=False, sync_cuda=True).start()
    with sampler.window("a") as w:
        clock.t_s = 1.0
    assert w.measurement.energy_j == pytest.approx(12.0)


def test_tick_loop_keeps_absolute_deadlines_and_skips_missed_ones():
    """Period 10 ms on a virtual clock; the 3rd read takes 25 ms. By hand: reads at 0, 10, 20 ms;
    the 3rd ends at 45 ms, past the 30 and 40 ms deadlines, so the next is 50 ms (wait 5 ms);
    then 60 … 90 ms; the wait that reaches 100 ms says stop: 8 ticks."""
    clock, times, waits = VirtualClock(), [], []

    def sample():
        times.append(clock.t_s)
        if len(times) == 3:
            clock.t_s += 0.025

    def wait(delay_s):
        waits.append(delay_s)
        clock.t_s += delay_s
        return clock.t_s >= 0.1 - 1e-9

    assert tick_loop(0.01, clock, sample, wait) == 8
    assert times == pytest.approx([0.0, 0.01, 0.02, 0.05, 0.06, 0.07, 0.08, 0.09])
    assert waits == pytest.approx([0.01, 0.01, 0.005] + [0.01] * 5)


def test_threaded_sampler_runs_its_thread_in_virtual_time():
    """The real sampler thread, its waits advancing a virtual clock: 5 ms period up to 1 s is
    200 reads (t = 0 … 0.995 s); every 10th read fails, so 20 lost and 180 stored, the last
    stored at 0.990 s (read 200, at 0.995 s, is lost)."""
    clock, done = VirtualClock(), threading.Event()

    def tick_wait(delay_s):
        clock.t_s += delay_s
        if clock.t_s >= 1.0 - 1e-9:
            done.set()
            return True
        return False

    reader = FakeReader(clock, fail=lambda n: n % 10 == 0)
    sampler = PowerSampler(reader, period_s=0.005, clock=clock, tick_wait=tick_wait,
                           edge_samples=False).start()
    thread = sampler._thread
    assert thread is not None  # it may already have run to t = 1 s: virtual time does not wait
    assert done.wait(timeout=60), "the sampler thread never reached t = 1 s of virtual time"
    sampler.stop()
    assert not thread.is_alive() and not sampler.running
    assert reader.n_reads == 200 and (sampler.n_samples, sampler.n_lost) == (180, 20)
    t = sampler.samples()["t_s"].to_numpy()
    assert t[0] == 0.0 and t[-1] == pytest.approx(0.990) and np.all(np.diff(t) > 0)
    # 12 W (10 GPU + 2 CPU) from the first to the last sample: 12 W * 0.99 s
    assert sampler.measure(0.0, 0.990).energy_j == pytest.approx(11.88)
    assert sampler.stats()["n_samples"] == 180 and sampler.stats()["thread_wall_s"] > 0


def test_real_time_wait_returns_at_once_when_stop_is_set():
    stop = threading.Event()
    wait = stop_event_wait(stop)
    assert wait(0.0) is False
    stop.set()
    assert wait(3600.0) is True  # a long wait is the stop event's: stop() interrupts it


def test_threaded_sampler_in_real_time_starts_and_stops():
    with PowerSampler(FakeReader(time.monotonic), period_s=0.005) as sampler:
        thread = sampler._thread
        assert thread is not None and thread.is_alive() and sampler.running
    assert not thread.is_alive() and not sampler.running and sampler._thread is None


def test_single_rail_reader():
    """Orin NX-style boards may total one rail; the row builder must handle a single rail."""
    clock = VirtualClock()
    reader = FakeReader(clock)
    reader.rails = reader.total_rails = (GPU,)
    sampler = PowerSampler(reader, clock=clock, threaded=False).start()
    with sampler.window("w") as w:
        drive(sampler, clock, 1.0)
    assert w.measurement.energy_by_rail_j == pytest.approx({GPU: 10.0})
    assert list(sampler.samples().columns) == ["t_s", f"{GPU}_mw", "total_mw"]
