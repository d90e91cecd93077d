"""``dvfslab doctor``'s checks on a discrete / datacenter GPU through NVML.

The GPU and its driver, where window energy comes from (:func:`~dvfslab.hw.nvml.nvml_power_source`:
the energy counter, the instant field, or the labelled 1 s average), why the clocks are where they
are now (thermal or power slowdown), and whether a lock to the lowest and the highest graphics clock
verifies (:class:`~dvfslab.hw.nvml.NvmlClocks` reads the clock back; reset afterwards, always).
The sampler line is the caller's, as on the Jetson (:func:`dvfslab.hw.doctor.check_sampler`).
"""

from __future__ import annotations

from collections.abc import Callable

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import format_mhz
from dvfslab.hw.base import ClockPermissionError
from dvfslab.hw.doctor import Check
from dvfslab.hw.nvml import (
    TEGRA_HINT,
    NvmlClocks,
    NvmlPowerReader,
    _Nvml,
    clock_event_reasons,
    is_tegra,
    nvml_power_source,
)

#: clocks-event reasons that mean the GPU is held below its clocks now (not idle, not a setting)
SLOWDOWN_WORDS = ("power cap", "thermal", "power brake", "slowdown")
ENERGY_TEXT = {"energy-counter": "the driver's energy counter (mJ; Volta and newer)",
               "instant": "instant power samples",
               "average-1s": "nvmlDeviceGetPowerUsage, a trailing 1 s average (labelled in the data)"}


def check_gpu(s: _Nvml) -> Check:
    if is_tegra(s.name):
        return Check("gpu", "fail", f"NVML GPU {s.index}: {s.name} (a Jetson)", TEGRA_HINT)
    return Check("gpu", "ok", f"NVML GPU {s.index}: {s.name}")


def check_energy_source(s: _Nvml) -> Check:
    source = nvml_power_source(s.handle, s.nvml, s.name)
    detail = f"window energy from {ENERGY_TEXT.get(source, source)}"
    if source == "average-1s":
        return Check("power source", "warn", detail + ": windows shorter than a few seconds are smeared",
                     "update the NVIDIA driver (the instant power field) or measure long windows")
    return Check("power source", "ok", detail)


def check_slowdown(s: _Nvml) -> Check:
    """Thermal / power slowdown reported by the clocks-event reasons now."""
    reasons = clock_event_reasons(s.nvml, s.handle)
    if reasons is None:
        return Check("thermal", "warn", "NVML gives no clocks-event reasons here",
                     "check `nvidia-smi -q -d PERFORMANCE,TEMPERATURE` by hand")
    slow = [r for r in reasons if any(w in r for w in SLOWDOWN_WORDS)]
    if slow:
        return Check("thermal", "warn", f"the GPU is held back now: {', '.join(slow)}",
                     "let the GPU cool, check its power limit (`nvidia-smi -q -d POWER`), then rerun")
    return Check("thermal", "ok", "no thermal or power slowdown reported ("
                 + (", ".join(reasons) or "no clocks-event reason") + ")")


def check_lock(clocks: NvmlClocks) -> Check:
    """Lock the lowest and the highest graphics clock, read each back, reset (always)."""
    levels = clocks.levels_mhz()
    targets, checks = (levels[0], levels[-1]), []
    try:
        for f in targets:
            clocks.lock(f)
            checks.append(clocks.last_lock_check)
    except ClockPermissionError as err:
        return Check("lock", "fail", str(err), "run the doctor and the sweep as root (sudo)")
    except DvfsError as err:
        return Check("lock", "fail", f"lock to {format_mhz(f)} MHz failed: {err}",
                     "leave levels the GPU does not reach out of the sweep (--freqs), or raise its power limit")
    finally:
        clocks.reset()
    asked = " and ".join(format_mhz(f) for f in targets)
    if all(c.verified for c in checks):
        got = " and ".join(format_mhz(c.measured_mhz) for c in checks)
        return Check("lock", "ok", f"{asked} MHz locked, graphics clock read {got} MHz; clocks reset")
    idle = next(c for c in checks if not c.verified)
    return Check("lock", "warn", f"{asked} MHz locked but {idle.why}; clocks reset",
                 "run the doctor while the GPU has work, or trust the lock once a run starts")


def nvml_checks(s: _Nvml, clock: Callable[[], float] | None = None) -> tuple[list[Check], NvmlPowerReader | None]:
    """The NVML lines before the sampler and the lock, and the power reader (``None``: none)."""
    checks = [check_gpu(s)]
    if checks[0].status == "fail":
        return checks, None
    reader = None
    try:
        reader = NvmlPowerReader(session=s, **({"clock": clock} if clock else {}))
        checks.append(check_energy_source(s))
    except DvfsError as err:
        checks.append(Check("power source", "fail", str(err), "a sweep needs the GPU's power; see `dvfslab devices`"))
    return checks + [check_slowdown(s)], reader


def check_other_clocks() -> Check:
    """EMC and CPU pinning is the Jetson backend's: on NVML a sweep leaves the memory clock to
    the driver and the host CPU to its governor (``--emc`` / ``--cpu`` with a rate are refused)."""
    return Check("other clocks", "ok", "memory clock and CPU left as they are: pinning them is Jetson-only "
                 "(--emc / --cpu max are skipped here; NVML's nvmlDeviceSetMemoryLockedClocks is not used)")


def nvml_lock_check(s: _Nvml) -> Check:
    """The lock line (run last: it changes the clocks for a moment)."""
    if is_tegra(s.name):
        return Check("lock", "fail", f"no clock control through NVML on {s.name}", TEGRA_HINT)
    try:
        clocks = NvmlClocks(session=s)
    except DvfsError as err:
        return Check("lock", "fail", f"no clock control: {err}", "locked clocks need a Volta or newer GPU")
    return check_lock(clocks)


def open_session(index: int = 0) -> _Nvml:
    """An initialized NVML session on GPU ``index`` (BackendUnavailableError when there is none)."""
    return _Nvml(index)


__all__ = ["check_energy_source", "check_gpu", "check_lock", "check_other_clocks", "check_slowdown", "nvml_checks",
           "nvml_lock_check",
           "open_session"]
