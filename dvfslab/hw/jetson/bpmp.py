"""The GPU clock the board really runs, from the BPMP's clock counter (debugfs, root only).

devfreq's ``cur_freq`` is the rate the driver asked the clock framework for, not a
measurement: a limit below devfreq (the BPMP's own thermal or power clamps) can hold the GPU
lower while ``cur_freq`` still shows the request. The BPMP firmware measures each clock with a
counter and exposes it in debugfs; tegrastats and jetson-stats read the GPU's from
``nafll_gpc0/pto_counter`` (Hz). debugfs needs root; without it a lock is *unverified*, and
:func:`verify_lock` says so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvfslab.hw.jetson.sysfs import SysfsIO

#: the GPC clock's counter (AGX Orin / Orin NX / Nano; JetPack 5 and 6)
PTO_COUNTER = "sys/kernel/debug/bpmp/debug/clk/nafll_gpc0/pto_counter"
#: a measured clock within this fraction (or 5 MHz) of the request counts as reached
REL_TOLERANCE = 0.02
ABS_TOLERANCE_MHZ = 5.0


@dataclass(frozen=True)
class LockCheck:
    """Whether a lock is confirmed by the measured clock. ``measured_mhz=None``: not measurable."""

    requested_mhz: float
    measured_mhz: float | None
    verified: bool
    why: str


def read_gpc_clock_mhz(io: SysfsIO, rel: str = PTO_COUNTER) -> float | None:
    """The measured GPU (GPC) clock in MHz, or ``None`` when the counter cannot be read."""
    try:
        hz = io.read_int(rel)
    except (OSError, ValueError, IndexError):
        return None
    return hz / 1e6 if hz > 0 else None


def verify_lock(io: SysfsIO, requested_mhz: float, rel: str = PTO_COUNTER) -> LockCheck:
    """Compare the requested level with the BPMP counter; unverified when it is unreadable."""
    measured = read_gpc_clock_mhz(io, rel)
    if measured is None:
        return LockCheck(requested_mhz, None, False,
                         f"unverified: {io.path(rel)} is not readable (needs root and debugfs); "
                         "cur_freq only shows the requested rate")
    tol = max(ABS_TOLERANCE_MHZ, REL_TOLERANCE * requested_mhz)
    if abs(measured - requested_mhz) <= tol:
        return LockCheck(requested_mhz, measured, True, f"BPMP counter reads {measured:g} MHz")
    return LockCheck(requested_mhz, measured, False,
                     f"BPMP counter reads {measured:g} MHz at {io.path(rel)} although "
                     f"{requested_mhz:g} MHz was requested (a clock limit below devfreq: "
                     "thermal or power clamp)")


__all__ = ["PTO_COUNTER", "LockCheck", "read_gpc_clock_mhz", "verify_lock"]
