"""The GPU clock the board really runs, from the BPMP's clock counter (debugfs, root only).

devfreq's ``cur_freq`` is the rate the driver asked the clock framework for, not a
measurement: a limit below devfreq (the BPMP's own thermal or power clamps) can hold the GPU
lower while ``cur_freq`` still shows the request. The BPMP firmware measures each clock with a
counter and exposes it in debugfs; tegrastats and jetson-stats read the GPU's from
``nafll_gpc0/pto_counter`` (Hz). debugfs needs root; without it a lock is *unverified*, and
:func:`verify_lock` says so instead of guessing.
"""

from __future__ import annotations

from dvfslab.core.boards import GPC_PTO_COUNTER
from dvfslab.hw.base import LockCheck, lock_status
from dvfslab.hw.jetson.sysfs import SysfsIO

#: a measured clock within this fraction (or 5 MHz) of the request counts as reached
REL_TOLERANCE = 0.02
ABS_TOLERANCE_MHZ = 5.0
SOURCE = "BPMP counter"


def read_gpc_clock_mhz(io: SysfsIO, rel: str = GPC_PTO_COUNTER) -> float | None:
    """The measured GPU (GPC) clock in MHz, or ``None`` when the counter cannot be read."""
    try:
        hz = io.read_int(rel)
    except (OSError, ValueError, IndexError):
        return None
    return hz / 1e6 if hz > 0 else None


def verify_lock(io: SysfsIO, requested_mhz: float, rel: str = GPC_PTO_COUNTER) -> LockCheck:
    """Compare the requested level with the BPMP counter at ``rel`` (the board family's,
    :func:`dvfslab.core.boards.bpmp_counter`); unverified when it is unreadable."""
    measured = read_gpc_clock_mhz(io, rel)
    status = lock_status(requested_mhz, measured, max(ABS_TOLERANCE_MHZ, REL_TOLERANCE * requested_mhz))
    if measured is None:
        why = (f"unverified: {io.path(rel)} is not readable (needs root and debugfs); "
               "cur_freq only shows the requested rate")
    elif status == "verified":
        why = f"BPMP counter reads {measured:g} MHz"
    else:
        why = (f"BPMP counter reads {measured:g} MHz at {io.path(rel)} although {requested_mhz:g} MHz "
               "was requested (a clock limit below devfreq: thermal or power clamp)")
    return LockCheck(requested_mhz, measured, status, why, source=SOURCE)


__all__ = ["read_gpc_clock_mhz", "verify_lock"]
