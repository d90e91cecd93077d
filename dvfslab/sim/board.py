"""The simulated Jetson (digital twin): virtual time, GPU clock, rails and temperature.

:class:`SimBoard` steps a board profile (:mod:`dvfslab.sim.model`) through training and idle
stretches on a :class:`~dvfslab.sim.clock.VirtualClock`, with a
:class:`~dvfslab.sim.thermal.ThermalModel` for its temperature and, when no level is locked,
the emulated ``nvhost_podgov`` (:class:`~dvfslab.sim.podgov.PodGovernor`) choosing the clock
every 50 ms. The backend protocols on top of it are in :mod:`dvfslab.sim.backend`
(``open_backend``). :meth:`SimBoard.train` advances virtual time step by step and, when asked,
calls ``on_tick(t_s)`` at every multiple of ``tick_s`` so that a sampler reads the rails exactly
as it would on hardware::

    backend = open_backend(seed=1)
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False)
    backend.clocks.lock(612)
    result = backend.board.train(SimWorkload.from_catalog("bert-base", "sst2"), 200,
                                 on_tick=lambda t: sampler.sample_once(), tick_s=0.01)

``on_ticks`` is the bulk form (one call per ``train``/``idle`` with every tick's board state,
a :class:`TickStates`; :meth:`~dvfslab.sim.backend.SimPowerReader.read_ticks` turns them into
readings and :meth:`~dvfslab.measure.sampler.PowerSampler.extend` stores them): the same samples
without a Python call per tick, which is what lets whole characterization grids run in seconds.
Every number the twin produces is simulated, not measured.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import FrequencyCappedError, check_level
from dvfslab.sim.clock import VirtualClock, next_multiple, tick_times
from dvfslab.sim.model import (
    PROFILES,
    BoardProfile,
    SimWorkload,
    StepTable,
    clock_inputs,
    get_profile,
    idle_power_w,
    rail_watts,
    step_table,
)
from dvfslab.sim.phases import phase_table
from dvfslab.sim.podgov import PodGovernor
from dvfslab.sim.thermal import ThermalModel

__all__ = ["PROFILES", "PodGovernor", "SimBoard", "SimWorkload", "TickStates", "TrainResult",
           "stable_seed", "tick_times"]


def stable_seed(*parts: object) -> list[int]:
    """Entropy for ``np.random.SeedSequence`` from ints and strings, stable across processes."""
    return [p if isinstance(p, int) else zlib.crc32(str(p).encode()) for p in parts]


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
    phase: np.ndarray | None = None  # per row: "train", or a window phase ("evaluation", "checkpoint")

    @property
    def steps(self) -> int:
        """Training steps (the rows after them are the window's non-training phases)."""
        if self.phase is None:
            return int(self.step_time_s.size)
        return int((self.phase == "train").sum())

    def phase_time_s(self) -> dict[str, float]:
        """Seconds per phase of the run (``train`` and each window phase)."""
        phase = self.phase if self.phase is not None else np.full(self.step_time_s.size, "train", dtype=object)
        return {str(p): float(self.step_time_s[phase == p].sum()) for p in dict.fromkeys(phase.tolist())}

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
    progress (W) of the GPU side (``soc_w`` its SoC share) and the CPU, the DRAM share, the GPU busy
    fraction and clock. :func:`~dvfslab.sim.model.rail_watts` maps them onto the record's rails.
    """

    t_s: np.ndarray
    gpu_w: np.ndarray
    cpu_w: np.ndarray
    dram_w: np.ndarray
    util: np.ndarray
    freq_mhz: np.ndarray
    soc_w: np.ndarray | None = None  # None: no SoC share (all of gpu_w is the GPU's)

    def rails(self, profile: BoardProfile) -> dict:
        """Every rail's watts at each tick (the module record's rails, a shared one once)."""
        soc = np.zeros_like(self.gpu_w) if self.soc_w is None else self.soc_w
        return rail_watts(profile, self.gpu_w, self.cpu_w, self.dram_w, soc)


OnTick = Callable[[float], None]
OnTicks = Callable[[TickStates], None]


class SimBoard:
    """The simulated board: virtual time, GPU clock (locked or governed), rails and temperature."""

    def __init__(self, profile: BoardProfile | str = "agx-orin-64gb", seed: int = 0, *,
                 power_mode: int | str = 0, t0_s: float = 0.0):
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.seed = int(seed)
        self.mode = self.profile.power_mode(power_mode)
        self.governor = PodGovernor(self.profile.levels_mhz, self.profile.gpu_cap_mhz(self.mode))
        self.clock = VirtualClock(float(t0_s))
        self.thermal = ThermalModel.from_profile(self.profile)
        self._next_poll = next_multiple(self.clock.t_s, self.governor.poll_s)
        self._locked: float | None = None
        self._freq = self.governor.fmin
        self._runs = 0
        # the other clocks of a joint setting (issue #32): None = the EMC follows the GPU clock and the
        # CPU runs at the mode's top clock; set them with set_other_clocks
        self.emc_mhz: float | None = None
        self.cpu_mhz: float | None = None
        self.sensor_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, "sensor")))
        self._set_idle_state()

    # -- clock and state ---------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The board's whole changing state, as plain JSON values (floats round-trip exactly):
        virtual time, temperature, clock and governor, the power state, the sensor noise stream.
        :meth:`restore` on a fresh board of the same profile and seed continues from it exactly
        as this board would (a resumed sweep, :meth:`dvfslab.sweep.twin.SimExecutor.resume_state`)."""
        return {"t_s": self.clock.t_s, "temp_c": self.thermal.temp_c, "next_poll_s": self._next_poll,
                "locked_mhz": self._locked, "freq_mhz": self._freq, "runs": self._runs, "state": list(self._state),
                "governor": {k: float(getattr(self.governor, k)) for k in self.governor.STATE},
                "sensor_rng": self.sensor_rng.bit_generator.state}

    def restore(self, snap: Mapping) -> None:
        """Put back a :meth:`snapshot` (of a board with this profile and seed)."""
        self.clock.t_s = float(snap["t_s"])
        self.thermal.temp_c = float(snap["temp_c"])
        self._next_poll = float(snap["next_poll_s"])
        self._locked = None if snap["locked_mhz"] is None else float(snap["locked_mhz"])
        self._freq = float(snap["freq_mhz"])
        self._runs = int(snap["runs"])
        state = [float(x) for x in snap["state"]]
        self._state = tuple(state + state[:1] if len(state) == 4 else state)  # before #38: idle, all of it SoC
        for k in self.governor.STATE:
            setattr(self.governor, k, float(snap["governor"][k]))
        self.sensor_rng.bit_generator.state = dict(snap["sensor_rng"])

    def now(self) -> float:
        """Virtual time in seconds (the backend's ``clock``)."""
        return self.clock.t_s

    @property
    def freq_mhz(self) -> float:
        return self._freq

    @property
    def locked_mhz(self) -> float | None:
        return self._locked

    def lock(self, freq_mhz: float) -> float:
        """Pin the GPU to a level (MHz); :class:`FrequencyCappedError` above the mode's cap."""
        level = check_level(freq_mhz, self.profile.levels_mhz)
        cap = self.profile.gpu_cap_mhz(self.mode)
        if level > cap + 0.5:
            raise FrequencyCappedError(
                f"{level:g} MHz is above the {cap:g} MHz cap of power mode "
                f"{self.mode.id} ({self.mode.name}) of the simulated {self.profile.name}; "
                "open the backend with power_mode=0 (MAXN) to reach it")
        self._locked = self._freq = level
        self._set_idle_state()
        return level

    def unlock(self) -> None:
        """Hand the clock back to the governor (MAXN behaviour)."""
        self._locked = None

    def set_other_clocks(self, emc_mhz: float | None = None, cpu_mhz: float | None = None) -> None:
        """Pin the memory clock and the CPU clusters' clock for the next training calls (None:
        the EMC follows the GPU clock, the CPU runs at the mode's top clock); refused above the
        mode's caps (:func:`~dvfslab.sim.model.clock_inputs`)."""
        clock_inputs(self.profile, self.mode, emc_mhz, cpu_mhz)
        self.emc_mhz = None if emc_mhz is None else float(emc_mhz)
        self.cpu_mhz = None if cpu_mhz is None else float(cpu_mhz)

    def _set_idle_state(self) -> None:
        gpu_w, cpu_w = idle_power_w(self.profile, self._freq, mode=self.mode)
        self._state = (gpu_w, cpu_w, 0.0, 0.0, gpu_w)  # gpu W, cpu W, dram W, util, soc W (a gated GPU: all SoC)

    def power_w(self) -> dict[str, float]:
        """Rail powers (W) right now: the mean power of the step in progress (or idle), on every rail
        of the module record (a shared rail reads each of its loads once)."""
        gpu_w, cpu_w, dram_w, _, soc_w = self._state
        return {r: float(w) for r, w in rail_watts(self.profile, gpu_w, cpu_w, dram_w, soc_w).items()}

    def gpu_util(self) -> float:
        return self._state[3]

    def temperature_c(self) -> float:
        return self.thermal.temp_c

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
        clock, heat = self.clock, self.thermal.heat
        start, end, power_w = clock.t_s, clock.t_s + float(duration_s), self._state[0] + self._state[1]
        if on_tick is not None:
            tick = next_multiple(clock.t_s, tick_s)
            while tick <= end:
                heat(tick - clock.t_s, power_w)  # the board cools between ticks too
                clock.advance_to(tick)
                on_tick(tick)
                tick += tick_s
        heat(end - clock.t_s, power_w)
        clock.advance_to(end)
        self._next_poll = next_multiple(end, self.governor.poll_s)
        if on_ticks is not None:  # at the end, as in train
            t = tick_times(start, end, tick_s)
            gpu_w, cpu_w, dram_w, util, soc_w = (np.full(t.shape, v) for v in self._state)
            on_ticks(TickStates(t, gpu_w, cpu_w, dram_w, util, np.full(t.shape, self._freq), soc_w))

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
        t0 = self.clock.t_s
        if self._locked is not None and on_tick is None:
            step_t, busy, e_gpu, e_cpu, freq = self._train_fixed(table)
            if on_ticks is not None:
                segments = _fixed_segments(table, t0 + np.cumsum(step_t), self._locked)
        else:
            cuts: list | None = [] if on_ticks is not None else None
            step_t, busy, e_gpu, e_cpu, freq = self._train_events(table, on_tick, tick_s, cuts)
            if on_ticks is not None:
                segments = _event_segments(table, cuts)
        if on_ticks is not None:
            on_ticks(_states_at_ticks(segments, tick_times(t0, self.clock.t_s, tick_s)))
        self._set_idle_state()
        peak = float(((e_gpu + e_cpu) / step_t).max())
        return TrainResult(wl.workload_id, run_key, t0, self.clock.t_s, step_t, e_gpu, e_cpu, busy, freq, peak,
                           table.phase)

    def _table(self, wl: SimWorkload, n_steps: int, run_key: str) -> StepTable:
        data_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, wl.workload_id, "data")))
        run_rng = np.random.default_rng(np.random.SeedSequence(stable_seed(self.seed, wl.workload_id, run_key)))
        p = self.profile
        seq = wl.padded_lengths(data_rng, n_steps)
        cpu_run, gpu_run, power_run = np.exp(run_rng.normal(0.0, [p.sigma_run_cpu, p.sigma_run_gpu, p.sigma_run_power]))
        cpu_scale = cpu_run * np.exp(run_rng.normal(0.0, p.sigma_step_cpu, size=n_steps))
        freqs = [self._locked] if self._locked is not None else self.governor.levels
        clocks = {"emc_mhz": self.emc_mhz, "cpu_mhz": self.cpu_mhz}
        table = step_table(p, wl, seq, freqs, mode=self.mode, cpu_scale=cpu_scale, gpu_scale=gpu_run,
                           power_scale=power_run, **clocks)
        extra = phase_table(p, wl, n_steps, data_rng, freqs, mode=self.mode, cpu_scale=cpu_run, gpu_scale=gpu_run,
                            power_scale=power_run, **clocks)
        return table if extra is None else table.concat(extra)

    def _train_fixed(self, table: StepTable):
        """A locked run without per-tick calls: closed form per step, no event loop."""
        time_s = table.time_s[:, 0]
        e_gpu, e_cpu = table.gpu_w[:, 0] * time_s, table.cpu_w[:, 0] * time_s
        for dt, p in zip(time_s, table.total_w[:, 0], strict=True):
            self.thermal.heat(dt, p)
        self.clock.advance_by(float(time_s.sum()))
        return time_s, table.util[:, 0] * time_s, e_gpu, e_cpu, np.full(time_s.shape, self._locked)

    def _train_events(self, table: StepTable, on_tick: OnTick | None, tick_s: float, segments: list | None = None):
        """Step-by-step event loop: step ends, governor polls and sampler ticks, in time order.

        ``segments`` (a list) receives ``(t_end, step, column)`` for every stretch of constant power.
        """
        gov, governed, heat = self.governor, self._locked is None, self.thermal.heat
        cols = {f: j for j, f in enumerate(table.freq_mhz.tolist())}
        T, U = table.time_s.tolist(), table.util.tolist()
        PG, PC, PD, PS = table.gpu_w.tolist(), table.cpu_w.tolist(), table.dram_w.tolist(), table.soc_w.tolist()
        n = len(T)
        busy, e_gpu, e_cpu, fsum, step_t = (np.zeros(n) for _ in range(5))
        inf = math.inf
        t = self.clock.t_s
        next_tick = next_multiple(t, tick_s) if on_tick is not None else inf
        if self._next_poll <= t:  # polls stopped while the clock was locked: back on the grid
            self._next_poll = next_multiple(t, gov.poll_s)
        win = [self._next_poll - gov.poll_s, 0.0]  # the governor's window: start, busy seconds
        for i in range(n):
            col, step_start, seg_start, work = cols[self._freq], t, t, 1.0
            while True:
                Ti, Ui = T[i][col], U[i][col]
                t_end = seg_start + work * Ti
                t_poll = self._next_poll if governed else inf
                # a tick within TIE_S of a change sees the state after it (as _states_at_ticks)
                if t_end <= t_poll and t_end <= next_tick + TIE_S:
                    t_stop = t_end
                elif next_tick < t_poll - TIE_S:
                    self.clock.advance_to(next_tick)
                    self._state = (PG[i][col], PC[i][col], PD[i][col], Ui, PS[i][col])
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
                heat(dt, PG[i][col] + PC[i][col])
                win[1] += Ui * (t_stop - max(seg_start, win[0]))
                if t_stop == t_end:
                    t = t_end
                    break
                work -= dt / Ti
                seg_start = t_poll
                self._poll(t_poll, win, Ui, seg_start + work * Ti)
                col = cols[self._freq]
            step_t[i] = t - step_start
        self.clock.advance_to(t)
        return step_t, busy, e_gpu, e_cpu, fsum / step_t

    def _poll(self, t_poll: float, win: list, util: float, t_step_end: float) -> None:
        """One governor poll at ``t_poll`` during a step that would end at ``t_step_end`` at
        this clock: decide the level, skip (in closed form) the polls that cannot change it,
        and open the next window (``win``, updated in place)."""
        gov = self.governor
        load = win[1] / (t_poll - win[0])
        new_f = gov.decide(load, self._freq)
        k = 0
        if new_f == self._freq == gov.cap and load > gov.load_max and util > gov.load_max:
            k = max(0, math.ceil((t_step_end - t_poll) / gov.poll_s) - 1)
            gov.skip_busy(k, util, self._freq)
        win[0], win[1] = t_poll + k * gov.poll_s, 0.0
        self._next_poll = t_poll + (k + 1) * gov.poll_s
        self._freq = new_f


#: ticks and state changes closer than this are simultaneous (the two sampling paths agree on ties
#: that floating-point sums of different periods, e.g. 25 ms polls and 50 ms ticks, put a few ulps apart)
TIE_S = 1e-9


def _fixed_segments(table: StepTable, ends: np.ndarray, freq_mhz: float) -> tuple:
    """The stretches of constant power of a locked run: one per step."""
    return (ends, table.gpu_w[:, 0], table.cpu_w[:, 0], table.dram_w[:, 0], table.util[:, 0],
            np.full(ends.shape, freq_mhz), table.soc_w[:, 0])


def _event_segments(table: StepTable, cuts: list) -> tuple:
    """The stretches of constant power recorded by the event loop as ``(t_end, step, column)``."""
    ends, rows, cols = (np.array(c) for c in zip(*cuts, strict=True))
    rows, cols = rows.astype(int), cols.astype(int)
    return (ends, table.gpu_w[rows, cols], table.cpu_w[rows, cols], table.dram_w[rows, cols],
            table.util[rows, cols], table.freq_mhz[cols], table.soc_w[rows, cols])


def _states_at_ticks(segments: tuple, t: np.ndarray) -> TickStates:
    """The state of the stretch in progress at each tick time ``t``."""
    i = np.minimum(np.searchsorted(segments[0], np.asarray(t) + TIE_S, side="right"), len(segments[0]) - 1)
    return TickStates(t, *(np.asarray(col, dtype=float)[i] for col in segments[1:]))


def _check_ticks(on_tick: OnTick | None, on_ticks: OnTicks | None, tick_s: float) -> None:
    if on_tick is not None and on_ticks is not None:
        raise DvfsError("pass on_tick (one call per tick) or on_ticks (one call with every tick), not both")
    if not tick_s > 0:
        raise DvfsError(f"tick_s must be > 0 s, got {tick_s!r}")
