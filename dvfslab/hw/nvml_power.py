"""Which NVML power reading to trust, and the energy of a window from the energy counter.

NVML offers three readings of a GPU's power, and they are not the same thing:

* ``nvmlDeviceGetTotalEnergyConsumption``: mJ since the driver loaded (Volta and newer). The
  energy of a window is the difference of two readings: the best source when it exists.
* the field ``NVML_FI_DEV_POWER_INSTANT`` (``nvmlDeviceGetFieldValues``): the power now, mW.
* ``nvmlDeviceGetPowerUsage``: the power now on GA100 and older, but on Ampere (except GA100)
  and newer the mean over the last second — integrating those samples smears each change over a
  second, so it is the fallback, and labelled ``"average-1s"``.

Every function takes the ``pynvml`` module (or the fake) and a device handle; nothing here
imports pynvml. Sources and window edges: docs/hardware.md ("NVML").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dvfslab.hw.base import PowerReadError

#: data-centre GA100 boards (A100, A30, A800): Ampere, but power usage is instantaneous
GA100_NAME = re.compile(r"\bA(100|30|800)\b")
AMPERE = 7  # NVML_DEVICE_ARCH_AMPERE, when the module lacks the constant
VOLTA = 5


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


@dataclass(frozen=True)
class CounterReading:
    """One read of the energy counter: ``t_s`` on the backend's clock, ``energy_mj`` as read."""

    t_s: float
    energy_mj: float


def counter_energy_j(start: CounterReading, end: CounterReading) -> float:
    """Energy in J between two counter readings (a window's edges)."""
    if end.t_s < start.t_s:
        raise PowerReadError(f"energy counter read at t={end.t_s:.6f} s before the window began "
                             f"(t={start.t_s:.6f} s); read the end after the start")
    delta_mj = end.energy_mj - start.energy_mj
    if delta_mj < 0:
        raise PowerReadError(
            f"the NVML energy counter went back from {start.energy_mj:.0f} to {end.energy_mj:.0f} mJ "
            "(driver reloaded or GPU reset during the window?); measure the window again")
    return delta_mj / 1000.0


@dataclass(frozen=True)
class WindowEnergy:
    """A window's energy and where it came from (``"energy-counter"``, ``"instant"``,
    ``"average-1s"``)."""

    energy_j: float
    source: str


def window_energy(reader, start: CounterReading | None = None, end: CounterReading | None = None,
                  sampled_energy_j: float | None = None) -> WindowEnergy:
    """The energy of a window on an NVML GPU, from the best source ``reader`` has.

    With the energy counter (``reader.energy_source == "energy-counter"``) it is the counter
    delta between ``start`` and ``end`` (``reader.counter()`` at the window's edges). Otherwise
    it is ``sampled_energy_j`` (the sampler's integral of ``reader``'s samples), labelled with
    what those samples are, so a 1 s-average result is never mistaken for a measured one.
    """
    if reader.energy_source == "energy-counter" and start is not None and end is not None:
        return WindowEnergy(counter_energy_j(start, end), "energy-counter")
    if sampled_energy_j is None:
        raise PowerReadError(
            f"no energy for the window: the {reader.energy_source!r} source needs "
            + ("the counter readings at both edges (reader.counter())"
               if reader.energy_source == "energy-counter" else "the sampled energy (sampled_energy_j)"))
    return WindowEnergy(float(sampled_energy_j), reader.power_source)
