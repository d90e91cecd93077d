"""Between runs: the clocks, the cool-down and the idle power of a sweep session.

Before each run the sweep gives the clocks back, waits until the board is cool (or idle), then
sets the run's policy (a locked level, or the board's own governor for MAXN). A session starts
by repairing clocks a killed sweep left pinned and by measuring the idle CPU+GPU power once
(:meth:`dvfslab.measure.sampler.PowerSampler.measure_idle`), which the power criterion of the
cool-down compares against. Board time passes the executor's way (:func:`wait`): a real sleep
on hardware, the virtual clock on the twin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import OTHER_CLOCKS, PIN_NONE, Backend, resolve_pin
from dvfslab.measure.sampler import sampler_lease
from dvfslab.sweep.executors import Executor
from dvfslab.sweep.plan import FIXED, MAXN, RunSpec

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.measure.sampler import PowerSampler


@dataclass(frozen=True)
class Cooldown:
    """Settings of the pause before each run, in board seconds (virtual on the twin).

    The pause ends when the GPU temperature is under ``max_temp_c``; on a board without a
    readable GPU temperature (or with ``max_temp_c=None``), when the CPU+GPU power over one
    ``poll_s`` window is within ``idle_power_tol`` (relative) of the idle power measured at
    the start of the session. ``timeout_s`` bounds the pause; the run then goes ahead and its
    record says ``timed_out``. ``idle_measure_s`` is the length of that idle measurement.
    """

    max_temp_c: float | None = 50.0
    idle_power_tol: float = 0.15
    timeout_s: float = 300.0
    poll_s: float = 5.0
    min_s: float = 0.0
    idle_measure_s: float = 10.0


# --------------------------------------------------------------------------------------------
# Board time and sampling
# --------------------------------------------------------------------------------------------


def wait(executor: Executor, backend: Backend, sampler: PowerSampler | None, seconds: float) -> None:
    """Let board time pass the executor's way (:meth:`Executor.wait`: a real sleep by default)."""
    executor.wait(backend, sampler, seconds)


def make_sampler(backend: Backend, executor: Executor) -> PowerSampler | None:
    """A fresh sampler on the backend's reader and clock (None without a power reader)."""
    if backend.power is None:
        return None
    from dvfslab.measure.sampler import PowerSampler

    return PowerSampler(backend.power, clock=backend.clock, threaded=executor.threaded_sampler)


# --------------------------------------------------------------------------------------------
# Cool-down and idle power
# --------------------------------------------------------------------------------------------


def gpu_temperature_c(backend: Backend) -> float | None:
    """The GPU temperature (``gpu-thermal`` zone, else the first zone named like ``gpu``)."""
    if backend.telemetry is None:
        return None
    try:
        temps = backend.telemetry.temperatures_c()
    except (DvfsError, OSError):
        return None
    for key in ("gpu-thermal", *sorted(k for k in temps if "gpu" in k.lower())):
        value = temps.get(key)
        if value is not None and math.isfinite(value):
            return float(value)
    return None


def _window_power_w(executor: Executor, backend: Backend, sampler: PowerSampler, seconds: float,
                    name: str) -> float:
    sampler.begin_window(name)
    try:
        wait(executor, backend, sampler, seconds)
    finally:
        m = sampler.end_window(name)
    return m.avg_power_w


def cool_down(backend: Backend, executor: Executor, sampler: PowerSampler | None,
              settings: Cooldown, idle_power_w: float | None) -> dict:
    """Wait until the board is cool (or idle); return what was waited and observed."""
    t0 = backend.clock()
    wait(executor, backend, sampler, settings.min_s)
    power_w = temp_c = None
    while True:
        temp_c = gpu_temperature_c(backend) if settings.max_temp_c is not None else None
        by_power = temp_c is None and sampler is not None and idle_power_w is not None
        if by_power:
            power_w = _window_power_w(executor, backend, sampler, settings.poll_s, "__cooldown__")
        if temp_c is not None:
            cool = temp_c < settings.max_temp_c
        elif by_power:
            cool = power_w <= idle_power_w * (1.0 + settings.idle_power_tol)
        else:
            cool = True  # nothing to watch: only min_s applies
        waited_s = backend.clock() - t0
        if cool or waited_s >= settings.timeout_s - 1e-6:
            return {"waited_s": waited_s, "gpu_temp_c": temp_c, "power_w": power_w,
                    "criterion": "temperature" if temp_c is not None else ("power" if by_power else "none"),
                    "timed_out": not cool}
        if not by_power:
            wait(executor, backend, sampler, min(settings.poll_s, settings.timeout_s - waited_s))


def measure_idle_power_w(backend: Backend, executor: Executor, sampler: PowerSampler | None,
                         seconds: float) -> float | None:
    """Mean CPU+GPU power (W) of the idle board over ``seconds`` (None without a reader).

    The sampler's own :meth:`~dvfslab.measure.sampler.PowerSampler.measure_idle`, waiting the
    executor's way. The sampler's ``idle_power_w`` is put back afterwards: sweep rows report
    total energy, never energy above idle.
    """
    if sampler is None or seconds <= 0:
        return None
    before = sampler.idle_power_w, sampler.idle_measurement
    try:
        return sampler.measure_idle(seconds, sleep=lambda s: wait(executor, backend, sampler, s))
    finally:
        sampler.idle_power_w, sampler.idle_measurement = before


def start_session(backend: Backend, executor: Executor, cooldown: Cooldown, session: dict) -> float | None:
    """Repair/reset the clocks, check the baseline, cool down (temperature only), measure idle power."""
    session["clock_repair"] = repair_clocks(backend)
    baseline = check_baseline(backend)
    if baseline is not None:
        session["baseline_check"] = baseline
    sampler = make_sampler(backend, executor)
    with sampler_lease(sampler):
        session["initial_cooldown"] = cool_down(backend, executor, sampler, cooldown, None)
        idle_power_w = measure_idle_power_w(backend, executor, sampler, cooldown.idle_measure_s)
    session["idle_power_w"] = idle_power_w
    return idle_power_w


# --------------------------------------------------------------------------------------------
# Clocks
# --------------------------------------------------------------------------------------------


def set_policy(backend: Backend, spec: RunSpec) -> dict | None:
    """Lock the level of a fixed run, or give the board its default governor for a MAXN run.

    Returns what the clocks measured after the lock, when they can say (Jetson: the BPMP clock
    counter; NVML: the graphics clock read back): ``requested_mhz``, ``measured_mhz`` (None when
    not measurable), ``verified``, ``why``. The sweep keeps it in the run's record, because
    ``cur_freq`` only reports the rate that was asked for.
    """
    if backend.clocks is None:
        if spec.policy == FIXED:
            raise DvfsError(f"backend {backend.name!r} has no clock control; it cannot run {spec.level_label}")
        return None
    if spec.policy == MAXN:
        backend.clocks.reset()
        return None
    backend.clocks.lock(spec.freq_mhz)
    check = backend.clocks.last_lock_check
    return None if check is None else check.record()


def pin_clocks(backend: Backend, spec: RunSpec) -> dict:
    """Pin the run's other clocks (``spec.pins``: the memory clock, the CPU clusters) after its
    GPU lock; return, per clock, the setting, the level asked and what was read back.

    A clock the backend does not offer (NVML: none) is skipped when the setting is ``max`` (the
    default) and recorded as such; a number for it is an error. A clock the backend offers but
    cannot pin here (Jetson without root / debugfs) is an error naming the fix, so a sweep never
    silently measures with a clock it was asked to pin left to the board.
    """
    if not spec.pins or backend.clocks is None:
        return {}
    offered = backend.clocks.other_clocks()
    out = {}
    for name, setting in spec.pins:
        if setting == PIN_NONE:
            continue
        clock = offered.get(name)
        if clock is None:
            if setting != "max":
                raise DvfsError(f"backend {backend.name!r} cannot pin the {name} clock (pinning the EMC and the "
                                f"CPU clusters is Jetson-only); drop --{name} {setting} or pass --{name} none")
            out[name] = {"setting": setting, "pinned": False, "why": f"backend {backend.name!r} has no {name} clock"}
            continue
        why_not = clock.support()
        if why_not is not None:
            raise DvfsError(f"cannot pin the {clock.label} for run {spec.run_id}: {why_not}")
        check = clock.pin(resolve_pin(clock, setting))
        out[name] = {"setting": setting, "pinned": True, **check.record()}
    return out


def check_pins(backend: Backend, pins) -> dict:
    """Before a sweep starts: can the backend pin what the plan asks for? Returns, per clock,
    the level ``max`` resolves to (or why it is skipped); raises :class:`DvfsError` naming the
    fix for a clock that was asked for and cannot be pinned (then no run would be measured as
    planned)."""
    offered = backend.clocks.other_clocks() if backend.clocks is not None else {}
    out = {}
    for name, setting in pins:
        if setting == PIN_NONE:
            out[name] = "left to the board (none)"
            continue
        clock = offered.get(name)
        if clock is None:
            if setting != "max":
                raise DvfsError(f"backend {backend.name!r} cannot pin the {name} clock (pinning the EMC and the "
                                f"CPU clusters is Jetson-only); pass --{name} none")
            out[name] = f"not pinned: backend {backend.name!r} has no {name} clock"
            continue
        why_not = clock.support()
        if why_not is not None:
            raise DvfsError(f"the sweep pins the {clock.label} ({name}={setting}) but {why_not}")
        level, top = resolve_pin(clock, setting), clock.max_allowed_mhz()
        levels = clock.levels_mhz()
        if levels and not any(abs(level - f) < 0.5 for f in levels):
            raise DvfsError(f"--{name} {level:g} MHz is not a level of the {clock.label}; levels (MHz): "
                            + ", ".join(f"{f:g}" for f in levels))
        if level > top + 0.5:
            raise DvfsError(f"--{name} {level:g} MHz is above {top:g} MHz, the highest level of the {clock.label} "
                            "the power mode allows (`dvfslab clocks` shows its caps); pick a lower level or 'max'")
        out[name] = level
    return out


def read_clocks(backend: Backend) -> dict[str, float | None]:
    """Every other clock the backend offers, read back now (MHz; None: not readable here)."""
    if backend.clocks is None:
        return {}
    offered = backend.clocks.other_clocks()
    return {name: offered[name].read_mhz() for name in OTHER_CLOCKS if name in offered}


def clock_columns(readings: dict[str, float | None]) -> dict[str, float]:
    """runs.csv's ``<clock>_freq_mhz`` columns of the readings that have a value."""
    return {f"{name}_freq_mhz": float(v) for name, v in readings.items() if v is not None}


def check_baseline(backend: Backend) -> str | None:
    """Refuse to start when the board's baseline is not its default governor in MAXN.

    The clocks' :meth:`~dvfslab.hw.base.ClockControl.preflight` (Jetson: MAXN, min < max, a
    load-following governor; nothing on a backend without such a baseline), run after the
    repair, so a lock a killed sweep left behind is not mistaken for jetson_clocks; raises
    :class:`DvfsError` naming each problem and its fix.
    """
    return None if backend.clocks is None else backend.clocks.preflight()


def reset_clocks(backend: Backend) -> None:
    """Give the clocks back (no-op without clock control)."""
    if backend.clocks is not None:
        backend.clocks.reset()


def repair_clocks(backend: Backend) -> dict | None:
    """Restore clocks a killed process left pinned, then reset.

    The clocks' :meth:`~dvfslab.hw.base.ClockControl.recover` (Jetson: the state file, never
    clocks another live process holds) gives the originals back here, so that a resumed
    sweep's idle measurement and MAXN runs see the board's own governor.
    """
    saved = backend.clocks.recover() if backend.clocks is not None else None
    reset_clocks(backend)
    return None if saved is None else {"restored_from_state_file": saved}
