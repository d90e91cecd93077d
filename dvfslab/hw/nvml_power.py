"""Which NVML power reading to trust: the energy counter, the instant field, or the 1 s average.

NVML offers three readings of a GPU's power, and they are not the same thing:

* ``nvmlDeviceGetTotalEnergyConsumption``: mJ since the driver loaded (Volta and newer). The
  energy of a window is the difference of two readings: the best source when it exists.
* the field ``NVML_FI_DEV_POWER_INSTANT`` (``nvmlDeviceGetFieldValues``): the power now, mW.
* ``nvmlDeviceGetPowerUsage``: the power now on GA100 and older, but on Ampere (except GA100)
  and newer the mean over the last second — integrating those samples smears each change over a
  second, so it is the fallback, and labelled ``"average-1s"``.

Every function takes the ``pynvml`` module (or the fake) and a device handle; nothing here
imports pynvml. A window's energy from two counter readings is
:func:`dvfslab.measure.energy.counter_energy_j` (the sampler reads the counter at its edges).
Sources and window edges: docs/hardware.md ("NVML").
"""

from __future__ import annotations

import re

#: data-centre GA100 boards (A100, A30, A800): Ampere, but power usage is instantaneous
GA100_NAME = re.compile(r"\bA(100|30|800)\b")
AMPERE = 7  # NVML_DEVICE_ARCH_AMPERE, when the module lacks the constant


def instant_field(nvml, handle) -> int | None:
    """``NVML_FI_DEV_POWER_INSTANT`` when this GPU and driver answer it, else ``None``."""
    fid = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
    if fid is None or not hasattr(nvml, "nvmlDeviceGetFieldValues"):
        return None
    try:
        fv = nvml.nvmlDeviceGetFieldValues(handle, [fid])[0]
    except nvml.NVMLError:
        return None
    return fid if fv.nvmlReturn == 0 else None


def usage_is_average(nvml, handle, name: str | None) -> bool:
    """Whether ``nvmlDeviceGetPowerUsage`` is a 1 s average here: Ampere except GA100, and
    newer. An architecture NVML cannot name counts as averaged (the cautious label)."""
    try:
        arch = int(nvml.nvmlDeviceGetArchitecture(handle))
    except (nvml.NVMLError, AttributeError):
        return True
    if arch < getattr(nvml, "NVML_DEVICE_ARCH_AMPERE", AMPERE):
        return False
    return not (name and GA100_NAME.search(name))


def has_energy_counter(nvml, handle) -> bool:
    """Whether ``nvmlDeviceGetTotalEnergyConsumption`` answers (Volta and newer)."""
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nvml.NVMLError:
        return False
    return True


def sample_source(nvml, handle, name: str | None) -> tuple[str, int | None]:
    """(what a power sample is, the instant field id to read or ``None`` for power usage)."""
    fid = instant_field(nvml, handle)
    if fid is not None:
        return "instant", fid
    return ("average-1s" if usage_is_average(nvml, handle, name) else "instant"), None


def energy_source(nvml, handle, name: str | None) -> str:
    """``"energy-counter"``, else what the samples are (``"instant"`` / ``"average-1s"``)."""
    if has_energy_counter(nvml, handle):
        return "energy-counter"
    return sample_source(nvml, handle, name)[0]
