"""GPU rail-gating: ``gpu.0/power/control`` (runtime PM), held ``on`` while the GPU is locked.

With ``auto`` the driver may power the GPU rail down when idle; nvpmodel and jetson_clocks
write ``on`` around their GPU limit writes (the nvpmodel dump names
``GPU_POWER_CONTROL_ENABLE ... on`` / ``..._DISABLE ... auto``), and dvfslab does the same
for the length of a lock, saving and restoring the value it found.
"""

from __future__ import annotations

from dvfslab.hw.jetson.sysfs import SysfsIO

#: where the GPU's runtime-PM control lives, after ``<devfreq node>/device/power/control``
RAILGATE_PATHS = ("sys/devices/gpu.0/power/control", "sys/devices/platform/gpu.0/power/control")


def find_railgate_control(io: SysfsIO, devfreq_rel: str) -> str | None:
    """The root-relative ``power/control`` file of the GPU, or ``None`` when there is none."""
    for rel in (f"{devfreq_rel}/device/power/control", *RAILGATE_PATHS):
        if io.exists(rel):
            return rel
    return None


def railgate_state(io: SysfsIO, devfreq_rel: str) -> str | None:
    """``"auto"`` (rail-gating allowed), ``"on"`` (held powered) or ``None`` (no such file)."""
    rel = find_railgate_control(io, devfreq_rel)
    if rel is None:
        return None
    try:
        return io.read_text(rel) or None
    except OSError:
        return None


__all__ = ["RAILGATE_PATHS", "find_railgate_control", "railgate_state"]
