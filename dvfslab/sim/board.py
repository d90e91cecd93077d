"""The simulated Jetson (digital twin): a backend like the others, on a virtual clock.

``open_backend(board="agx-orin-64gb", seed=0)`` returns a :class:`SimBackend` whose ``clocks``,
``power`` and ``telemetry`` implement the protocols of :mod:`dvfslab.hw.base` and whose
``clock`` is the board's virtual time. Work is run with :meth:`SimBoard.train`, which advances
virtual time step by step and, when asked, calls ``on_tick(t_s)`` at every multiple of
``tick_s`` so that a sampler reads the rails exactly as it would on hardware::

    backend = open_backend(seed=1)
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False)
    backend.clocks.lock(612)
    result = backend.board.train(SimWorkload.from_catalog("bert-base", "sst2"), 200,
                                 on_tick=lambda t: sampler.sample_once(), tick_s=0.01)

``on_ticks`` is the bulk form (one call per ``train``/``idle`` with every tick's board state,
a :class:`TickStates`; :meth:`SimPowerReader.read_ticks` turns them into readings and
:meth:`~dvfslab.measure.sampler.PowerSampler.extend` stores them): the same samples without a Python call
per tick, which is what lets whole characterization grids run in seconds.

With no lock the board is in MAXN (mode 0) and a load-driven governor modelled on
``nvhost_podgov`` picks the clock every 50 ms. Physics: :mod:`dvfslab.sim.model`.
Every number the twin produces is simulated, not measured.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from dvfslab.hw.base import (
    Backend,
    ClockState,
    DvfsError,
    FrequencyCappedError,
    PowerSample,
    check_level,
)
from dvfslab.sim.model import (
    PROFILES,
    BoardProfile,
    SimWorkload,
    StepTable,
    get_profile,
    idle_power_w,
    step_table,
)

__all__ = ["PROFILES", "PodGovernor", "SimBackend", "SimBoard", "SimClocks", "SimPowerReader",
           "SimTelemetry", "SimWorkload", "TickStates", "TrainResult", "open_backend", "stable_seed"]


def stable_seed(*parts: object) -> list[int]:
    """Entropy for ``np.random.SeedSequence`` from ints and strings, stable across processes."""
    return [p if isinstance(p, int) else zlib.crc32(str(p).encode()) for p in parts]


class PodGovernor:
    """A load-driven GPU clock governor following the published ``nvhost_podgov`` algorithm.

    Every ``poll_s`` it reads the busy fraction of the last window, keeps exponential averages
    of idle time and of its requests (``smooth``), and asks for ``f + bias·f·(load − target) /
    target`` (at most ``f_max/3`` up), or for a full ``f_max/3`` boost when the window was busier
    than ``load_max``; the request is damped (``damp``/10 of it, the rest from the average),
    clamped and rounded up to a level. Defaults are the driver's: target 70 %, max 90 %, bias
    80 %, smooth 10, damp 7, 50 ms block window.
    """

    def __init__(self, levels_mhz, cap_mhz: float, *, load_target: float = 0.70, load_max: float = 0.90,
                 bias: float = 0.80, smooth: int = 10, damp: int = 7, poll_s: float = 0.05):
        self.levels = [float(f) for f in levels_mhz if f <= cap_mhz + 0.5]
        self.fmin, self.cap = self.levels[0], self.levels[-1]
        self.load_target, self.load_max, self.bias = load_target, load_max, bias
        self.smooth, self.damp, self.poll_s = smooth, damp, poll_s
        self.reset_idle()

    def reset_idle(self) -> None:
        """State of a governor that has watched an idle GPU for a while."""
        self.idle_avg, self.freq_avg = 1.0, self.fmin

    def _round_up(self, freq_mhz: float) -> float:
        return next((f for f in self.levels if f >= freq_mhz - 1e-9), self.cap)

    def decide(self, load: float, freq_mhz: float) -> float:
        """One poll: the level to run at after a window with busy fraction ``load``."""
        r = self.smooth / (self.smooth + 1.0)
        self.idle_avg = r * self.idle_avg + (1.0 - load) / (self.smooth + 1.0)
        max_boost = self.cap / 3.0
        damp = self.damp
        if load > self.load_max:
            boost, damp = max_boost, 10
        else:
            avg_load = 1.0 - self.idle_avg
            boost = min(max_boost, self.bias * freq_mhz * (avg_load - self.load_target) / self.load_target)
        res = freq_mhz + boost
        self.freq_avg = r * self.freq_avg + res / (self.smooth + 1.0)
        out = (damp * res + (10 - damp) * self.freq_avg) / 10.0
        return self._round_up(min(max(out, self.fmin), self.cap))

    def skip_busy(self, n_polls: int, load: float, freq_mhz: float) -> None:
        """Advance ``n_polls`` polls of a window busier than ``load_max`` in closed form.

        In that branch the request is ``f + f_cap/3`` undamped, so at the cap the level does
        not change; only the two averages move (geometrically) towards their inputs.
        """
        rn = (self.smooth / (self.smooth + 1.0)) ** n_polls
        idle, res = 1.0 - load, freq_mhz + self.cap / 3.0
        self.idle_avg = idle + (self.idle_avg - idle) * rn
        self.freq_avg = res + (self.freq_avg - res) * rn


@dataclass
class TrainResult:
    """Per-step outcome of :meth:`SimBoard.train` (simulated)."""

    workload_id: str
    run_key: str
    t_start_s: float
    t_end_s: float
    step_time_s: np.ndarray
    step_energy_gpu_j: np.ndarray
    step_energy_cpu_j: np.ndarray
    step_busy_s: np.ndarray
    step_freq_mhz: np.ndarray  # time-weighted mean clock of each step
    peak_power_w: float  # highest step-mean CPU+GPU power

    @property
    def steps(self) -> int:
        return int(self.step_time_s.size)

    @property
    def step_energy_j(self) -> np.ndarray:
        return self.step_energy_gpu_j + self.step_energy_cpu_j

    @property
    def time_s(self) -> float:
        return float(self.step_time_s.sum())

    @property
    def energy_gpu_j(self) -> float:
        return float(self.step_energy_gpu_j.sum())

    @property
    def energy_cpu_j(self) -> float:
        return float(self.step_energy_cpu_j.sum())

    @property
    def energy_j(self) -> float:
        return self.energy_gpu_j + self.energy_cpu_j

    @property
    def avg_power_w(self) -> float:
        return self.energy_j / self.time_s

    @property
    def gpu_util_pct(self) -> float:
        return 100.0 * float(self.step_busy_s.sum()) / self.time_s

    @property
    def mean_gpu_freq_mhz(self) -> float:
        return float((self.step_freq_mhz * self.step_time_s).sum()) / self.time_s


@dataclass
class TickStates:
    """The board's state at each sampler tick of a stretch of virtual time (simulated).

    ``t_s`` are the tick times; the other arrays hold, per tick, the mean power of the step in
    progress (W) on the GPU and CPU rails and the DRAM share, the GPU busy fraction and clock.
    """

    t_s: np.ndarray
    gpu_w: np.ndarray
    cpu_w: np.ndarray
    dram_w: np.ndarray
    util: np.ndarray
    freq_mhz: np.ndarray


OnTick = Callable[[float], None]
OnTicks = Callable[[TickStates], None]


def tick_times(t_from_s: float, t_to_s: float, tick_s: float) -> np.ndarray:
    """The multiples of ``tick_s`` in ``(t_from_s, t_to_s]``."""
    k = np.arange(math.floor(t_from_s / tick_s) + 1, math.floor(t_to_s / tick_s) + 2, dtype=float) * tick_s
    return k[(k > t_from_s) & (k <= t_to_s)]


class SimBoard:
    """The simulated board: virtual time, GPU clock (locked or governed), rails and temperature."""

    def __init__(self, profile: BoardProfile | str = "agx-orin-64gb", seed: int = 0, *,
                 power_mode: int | str = 0, t0_s: float = 0.0):
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.seed = int(seed)
        self.mode = self.profile.power_mode(power_mode)
        self.governor = PodGovernor(self.profile.levels_mhz, self.mode.gpu_max_mhz)
        self._t = float(t0_s)
        self._next_poll = (math.floor(self._t / self.governor.poll_s) + 1) * self.governor.poll_s
        self._locked: float | None = None
        self._freq = self.governor.fmin
        self._runs = 0
        self._sensor_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, "sensor")))
        self._temp_c = self.profile.ambient_c
        self._set_idle_state()

    # -- clock and state ---------------------------------------------------------------------
    def now(self) -> float:
        """Virtual time in seconds (the backend's ``clock``)."""
        return self._t

    @property
    def freq_mhz(self) -> float:
        return self._freq

    @property
    def locked_mhz(self) -> float | None:
        return self._locked

    def lock(self, freq_mhz: float) -> float:
        """Pin the GPU to a level (MHz); :class:`FrequencyCappedError` above the mode's cap."""
        level = check_level(freq_mhz, self.profile.levels_mhz)
        if level > self.mode.gpu_max_mhz + 0.5:
            raise FrequencyCappedError(
                f"{level:g} MHz is above the {self.mode.gpu_max_mhz:g} MHz cap of power mode "
                f"{self.mode.mode_id} ({self.mode.name}) of the simulated {self.profile.name}; "
                "open the backend with power_mode=0 (MAXN) to reach it")
        self._locked = self._freq = level
        self._set_idle_state()
        return level

    def unlock(self) -> None:
        """Hand the clock back to the governor (MAXN behaviour)."""
        self._locked = None

    def _set_idle_state(self) -> None:
        gpu_w, cpu_w = idle_power_w(self.profile, self._freq, mode=self.mode)
        self._state = (gpu_w, cpu_w, 0.0, 0.0)  # gpu W, cpu W, dram W, util

    def power_w(self) -> dict[str, float]:
        """Rail powers (W) right now: the mean power of the step in progress (or idle)."""
        gpu_w, cpu_w, dram_w, _ = self._state
        out = {self.profile.gpu_rail: gpu_w, self.profile.cpu_rail: cpu_w, **self.profile.other_rails_w}
        if self.profile.dram_rail is not None:
            out[self.profile.dram_rail] += dram_w
        return out

    def gpu_util(self) -> float:
        return self._state[3]

    def temperature_c(self) -> float:
        return self._temp_c

    def _heat(self, dt_s: float, power_w: float) -> None:
        target = self.profile.ambient_c + self.profile.thermal_r_c_per_w * power_w
        self._temp_c = target + (self._temp_c - target) * math.exp(-dt_s / self.profile.thermal_tau_s)

    # -- idle ----------------------------------------------------------------------------------
    def idle(self, duration_s: float, *, on_tick: OnTick | None = None, tick_s: float = 0.01,
             on_ticks: OnTicks | None = None) -> None:
        """Let virtual time pass with the GPU idle (a governed clock drops to its lowest level).

        ``on_tick(t_s)`` is called at each multiple of ``tick_s``; ``on_ticks`` once, at the end,
        with all of them (:class:`TickStates`). The temperature is the same either way.
        """
        _check_ticks(on_tick, on_ticks, tick_s)
        if self._locked is None:
            self._freq = self.governor.fmin
            self.governor.reset_idle()
        self._set_idle_state()
        start, end, power_w = self._t, self._t + float(duration_s), self._state[0] + self._state[1]
        if on_tick is not None:
            tick = (math.floor(self._t / tick_s) + 1) * tick_s
            while tick <= end:
                self._heat(tick - self._t, power_w)  # the board cools between ticks too
                self._t = tick
                on_tick(tick)
                tick += tick_s
        self._heat(end - self._t, power_w)
        self._t = end
        poll = self.governor.poll_s
        self._next_poll = (math.floor(end / poll) + 1) * poll
        if on_ticks is not None:  # at the end, as in train
            t = tick_times(start, end, tick_s)
            on_ticks(TickStates(t, *(np.full(t.shape, v) for v in (*self._state, self._freq))))

    # -- training --------------------------------------------------------------------------------
    def train(self, workload: SimWorkload | Mapping, n_steps: int, *, on_tick: OnTick | None = None,
              tick_s: float = 0.01, run_key: str | None = None, on_ticks: OnTicks | None = None) -> TrainResult:
        """Run ``n_steps`` training steps of ``workload`` from now on; return per-step results.

        The batches (padded lengths) depend only on the board seed and the workload, as with a
        seeded data loader; run-to-run noise depends on the seed, the workload and ``run_key``
        (default: a counter). ``on_tick(t_s)`` is called at each multiple of ``tick_s``;
        ``on_ticks`` once, at the end, with the state at all of them (:class:`TickStates`).
        """
        if int(n_steps) < 1:
            raise DvfsError(f"SimBoard.train needs n_steps >= 1, got {n_steps}")
        _check_ticks(on_tick, on_ticks, tick_s)
        wl = workload if isinstance(workload, SimWorkload) else SimWorkload.from_row(workload)
        run_key = run_key if run_key is not None else f"run{self._runs}"
        self._runs += 1
        table = self._table(wl, int(n_steps), run_key)
        t0 = self._t
        segments: list | None = [] if on_ticks is not None else None
        if self._locked is not None and on_tick is None:
            step_t, busy, e_gpu, e_cpu, freq = self._train_fixed(table)
            if on_ticks is not None:
                ends = t0 + np.cumsum(step_t)
                segments = (ends, table.gpu_w[:, 0], table.cpu_w[:, 0], table.dram_w[:, 0], table.util[:, 0],
                            np.full(ends.shape, self._locked))
        else:
            step_t, busy, e_gpu, e_cpu, freq = self._train_events(table, on_tick, tick_s, segments)
            if on_ticks is not None:
                ends, rows, cols = (np.array(c) for c in zip(*segments, strict=True))
                rows, cols = rows.astype(int), cols.astype(int)
                segments = (ends, table.gpu_w[rows, cols], table.cpu_w[rows, cols], table.dram_w[rows, cols],
                            table.util[rows, cols], table.freq_mhz[cols])
        if on_ticks is not None:
            t = tick_times(t0, self._t, tick_s)
            i = np.minimum(np.searchsorted(segments[0], t, side="right"), len(segments[0]) - 1)
            on_ticks(TickStates(t, *(np.asarray(col, dtype=float)[i] for col in segments[1:])))
        self._set_idle_state()
        peak = float(((e_gpu + e_cpu) / step_t).max())
        return TrainResult(wl.workload_id, run_key, t0, self._t, step_t, e_gpu, e_cpu, busy, freq, peak)

    def _table(self, wl: SimWorkload, n_steps: int, run_key: str) -> StepTable:
        data_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, wl.workload_id, "data")))
        run_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, wl.workload_id, run_key)))
        p = self.profile
        seq = wl.padded_lengths(data_rng, n_steps)
        cpu_run, gpu_run, power_run = np.exp(run_rng.normal(0.0, [p.sigma_run_cpu, p.sigma_run_gpu, p.sigma_run_power]))
        cpu_scale = cpu_run * np.exp(run_rng.normal(0.0, p.sigma_step_cpu, size=n_steps))
        freqs = [self._locked] if self._locked is not None else self.governor.levels
        return step_table(p, wl, seq, freqs, mode=self.mode, cpu_scale=cpu_scale, gpu_scale=gpu_run,
                          power_scale=power_run)

    def _train_fixed(self, table: StepTable):
        time_s = table.time_s[:, 0]
        e_gpu, e_cpu = table.gpu_w[:, 0] * time_s, table.cpu_w[:, 0] * time_s
        for dt, p in zip(time_s, table.total_w[:, 0], strict=True):
            self._heat(dt, p)
        self._t += float(time_s.sum())
        return time_s, table.util[:, 0] * time_s, e_gpu, e_cpu, np.full(time_s.shape, self._locked)

    def _train_events(self, table: StepTable, on_tick: OnTick | None, tick_s: float, segments: list | None = None):
        """Step-by-step event loop: step ends, governor polls and sampler ticks, in time order.

        ``segments`` (a list) receives ``(t_end, step, column)`` for every stretch of constant power.
        """
        gov, governed = self.governor, self._locked is None
        cols = {f: j for j, f in enumerate(table.freq_mhz.tolist())}
        T, U = table.time_s.tolist(), table.util.tolist()
        PG, PC, PD = table.gpu_w.tolist(), table.cpu_w.tolist(), table.dram_w.tolist()
        n = len(T)
        busy, e_gpu, e_cpu, fsum, step_t = (np.zeros(n) for _ in range(5))
        inf = math.inf
        t = self._t
        next_tick = (math.floor(t / tick_s) + 1) * tick_s if on_tick is not None else inf
        if self._next_poll <= t:  # polls stopped while the clock was locked: back on the grid
            self._next_poll = (math.floor(t / gov.poll_s) + 1) * gov.poll_s
        win_start, win_busy = self._next_poll - gov.poll_s, 0.0
        for i in range(n):
            col, step_start, seg_start, work = cols[self._freq], t, t, 1.0
            while True:
                Ti, Ui = T[i][col], U[i][col]
                t_end = seg_start + work * Ti
                t_poll = self._next_poll if governed else inf
                if t_end <= t_poll and t_end <= next_tick:
                    t_stop = t_end
                elif next_tick < t_poll:
                    self._t, self._state = next_tick, (PG[i][col], PC[i][col], PD[i][col], Ui)
                    on_tick(next_tick)
                    next_tick += tick_s
                    continue
                else:
                    t_stop = t_poll
                dt = t_stop - seg_start
                if segments is not None:
                    segments.append((t_stop, i, col))
                e_gpu[i] += PG[i][col] * dt
                e_cpu[i] += PC[i][col] * dt
                busy[i] += Ui * dt
                fsum[i] += self._freq * dt
                self._heat(dt, PG[i][col] + PC[i][col])
                win_busy += Ui * (t_stop - max(seg_start, win_start))
                if t_stop == t_end:
                    t = t_end
                    break
                work -= dt / Ti
                seg_start = t_poll
                load = win_busy / (t_poll - win_start)
                new_f = gov.decide(load, self._freq)
                k = 0
                if new_f == self._freq == gov.cap and load > gov.load_max and Ui > gov.load_max:
                    k = max(0, math.ceil((seg_start + work * Ti - t_poll) / gov.poll_s) - 1)
                    gov.skip_busy(k, Ui, self._freq)
                win_start, win_busy = t_poll + k * gov.poll_s, 0.0
                self._next_poll = t_poll + (k + 1) * gov.poll_s
                if new_f != self._freq:
                    self._freq, col = new_f, cols[new_f]
            step_t[i] = t - step_start
        self._t = t
        return step_t, busy, e_gpu, e_cpu, fsum / step_t


def _check_ticks(on_tick: OnTick | None, on_ticks: OnTicks | None, tick_s: float) -> None:
    if on_tick is not None and on_ticks is not None:
        raise DvfsError("pass on_tick (one call per tick) or on_ticks (one call with every tick), not both")
    if not tick_s > 0:
        raise DvfsError(f"tick_s must be > 0 s, got {tick_s!r}")


# --------------------------------------------------------------------------------------------
# Protocol implementations
# --------------------------------------------------------------------------------------------


class SimClocks:
    """:class:`~dvfslab.hw.base.ClockControl` of a :class:`SimBoard`."""

    def __init__(self, board: SimBoard):
        self.board = board

    def levels_mhz(self) -> list[float]:
        return list(self.board.profile.levels_mhz)

    def state(self) -> ClockState:
        b = self.board
        lo = b.locked_mhz if b.locked_mhz is not None else b.governor.fmin
        hi = b.locked_mhz if b.locked_mhz is not None else b.governor.cap
        return ClockState(b.freq_mhz, lo, hi, "nvhost_podgov", tuple(self.levels_mhz()))

    def lock(self, freq_mhz: float) -> ClockState:
        self.board.lock(freq_mhz)
        return self.state()

    def reset(self) -> None:
        self.board.unlock()


class SimPowerReader:
    """:class:`~dvfslab.hw.base.PowerReader` of a :class:`SimBoard` (INA3221-like rails).

    Readings carry seeded sensor noise and are rounded to whole mW, like the hwmon files.
    """

    update_interval_s: float | None = None

    def __init__(self, board: SimBoard):
        self.board = board
        self.rails = board.profile.rails
        self.total_rails = board.profile.total_rails

    def read_ticks(self, ticks: TickStates) -> dict:
        """Readings at every tick of ``ticks`` at once, with the same noise model and rounding
        as :meth:`read`: keyword arguments for :meth:`~dvfslab.measure.sampler.PowerSampler.extend`."""
        b, n = self.board, ticks.t_s.size
        p = b.profile
        watts = {r: np.full(n, w) for r, w in p.other_rails_w.items()}
        watts[p.gpu_rail], watts[p.cpu_rail] = ticks.gpu_w, ticks.cpu_w
        if p.dram_rail is not None:
            watts[p.dram_rail] = watts[p.dram_rail] + ticks.dram_w
        noise = b._sensor_rng.normal(0.0, p.sensor_sigma, size=(n, len(self.rails)))
        rails_mw = {r: np.round(watts[r] * 1000.0 * (1.0 + noise[:, j])) for j, r in enumerate(self.rails)}
        return {"t_s": ticks.t_s, "rails_mw": rails_mw, "gpu_util_pct": 100.0 * ticks.util,
                "gpu_freq_mhz": ticks.freq_mhz}

    def read(self) -> PowerSample:
        b = self.board
        sigma = b.profile.sensor_sigma
        noise = b._sensor_rng.normal(0.0, sigma, size=len(self.rails))
        watts = b.power_w()
        power_mw = {r: float(round(watts[r] * 1000.0 * (1.0 + e))) for r, e in zip(self.rails, noise, strict=True)}
        return PowerSample(b.now(), power_mw, gpu_util_pct=100.0 * b.gpu_util(), gpu_freq_mhz=b.freq_mhz)


class SimTelemetry:
    """:class:`~dvfslab.hw.base.Telemetry` of a :class:`SimBoard`."""

    def __init__(self, board: SimBoard):
        self.board = board

    def gpu_load_pct(self) -> float | None:
        return round(100.0 * self.board.gpu_util(), 1)

    def temperatures_c(self) -> dict[str, float]:
        t, amb = self.board.temperature_c(), self.board.profile.ambient_c
        return {"gpu-thermal": round(t, 2), "cpu-thermal": round(amb + 0.8 * (t - amb), 2),
                "tj-thermal": round(t + 1.0, 2)}


@dataclass
class SimBackend(Backend):
    """A :class:`Backend` that also exposes the :class:`SimBoard` it drives."""

    board: SimBoard | None = None


def open_backend(board: str = "agx-orin-64gb", seed: int = 0, *, power_mode: int | str = 0,
                 **_ignored) -> SimBackend:
    """Open the simulated board ``board`` (see :data:`PROFILES`) with noise seed ``seed``.

    Keyword arguments meant for hardware backends (``sysfs_root`` …) are ignored.
    """
    b = SimBoard(board, seed, power_mode=power_mode)
    p = b.profile
    description = {
        "board": p.display_name, "profile": p.name, "gpu": p.gpu, "simulated": True, "seed": b.seed,
        "calibrated": p.calibrated, "power_mode": f"{b.mode.mode_id} ({b.mode.name})",
        "governor": "nvhost_podgov (emulated)", "levels_mhz": list(p.levels_mhz), "rails": list(p.rails),
        "total_rails": list(p.total_rails),
        "note": "digital twin: every reading is simulated, not measured (see docs/calibration.md)",
    }
    return SimBackend(name="sim", clocks=SimClocks(b), power=SimPowerReader(b), telemetry=SimTelemetry(b),
                      clock=b.now, description=description, board=b, simulated=True, virtual_time=True)
