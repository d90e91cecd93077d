"""Backend protocols shared by the Jetson, NVML and simulated boards.

Two small protocols rather than one wide class:

* :class:`ClockControl` lists the GPU levels, reads the clock state, locks one level and
  resets to what the board had before.
* :class:`PowerReader` names its rails and reads all of them at once, in mW, with a
  monotonic timestamp.

Every frequency crossing these interfaces is in MHz and every power in mW; Hz and kHz are
converted once, at the sysfs/NVML boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# re-exported: the errors and level rules every backend uses live in dvfslab.core
from dvfslab.core.errors import DvfsError  # noqa: F401
from dvfslab.core.levels import UnsupportedFrequencyError, check_level, format_mhz, snap_mhz  # noqa: F401

# --------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------



class BackendUnavailableError(DvfsError):
    """The requested backend does not exist on this machine (no Jetson sysfs, no NVML, ...)."""


class ClockPermissionError(DvfsError, PermissionError):
    """Writing the clock controls needs privileges this process does not have."""



class FrequencyCappedError(DvfsError):
    """The board did not reach the requested level (power-mode cap or thermal throttling)."""


class PowerReadError(DvfsError):
    """A power sensor could not be read."""


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------




@dataclass(frozen=True)
class ClockState:
    """What the GPU clock controls say right now (all MHz)."""

    cur_freq_mhz: float
    min_freq_mhz: float
    max_freq_mhz: float
    governor: str | None = None
    levels_mhz: tuple[float, ...] = ()

    @property
    def locked(self) -> bool:
        return self.min_freq_mhz == self.max_freq_mhz


#: what a lock check found: the clock at the level; not measurable (or, on NVML, below the level
#: only because the GPU is idle); held below it (a power / thermal clamp); above it (no lock)
LOCK_STATUSES = ("verified", "unverified", "capped", "not-locked")


def lock_status(requested_mhz: float, measured_mhz: float | None, tolerance_mhz: float, *,
                idle: bool = False) -> str:
    """The :data:`LOCK_STATUSES` entry for a clock measured after a lock (the one rule for every
    backend): within ``tolerance_mhz`` verified, above the request not-locked, below it capped
    (unverified when ``idle``: the lock holds once work arrives); unmeasured is unverified."""
    if measured_mhz is None:
        return "unverified"
    if abs(measured_mhz - requested_mhz) <= tolerance_mhz:
        return "verified"
    if measured_mhz > requested_mhz:
        return "not-locked"
    return "unverified" if idle else "capped"


@dataclass(frozen=True)
class LockCheck:
    """What the GPU clock measured after a lock, the same on every backend that can measure it.

    ``measured_mhz`` comes from ``source`` (Jetson: the BPMP counter; NVML: the graphics clock
    read back); ``None``: not measurable here. ``status`` is one of :data:`LOCK_STATUSES`;
    ``why`` says it in words; ``reasons`` are the device's own reasons for the clock, when it
    gives them (NVML's clocks-event reasons). A sweep records requested, measured, verified and
    why of every fixed run.
    """

    requested_mhz: float
    measured_mhz: float | None
    status: str
    why: str
    source: str = ""
    reasons: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.status not in LOCK_STATUSES:
            raise ValueError(f"LockCheck status must be one of {LOCK_STATUSES}, got {self.status!r}")

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    @property
    def failed(self) -> bool:
        """The clock is not at the level (held below it, or above it): the lock must be undone."""
        return self.status in ("capped", "not-locked")

    def record(self) -> dict:
        """What a sweep keeps in a fixed run's record (``extras["lock_check"]``)."""
        return {"requested_mhz": self.requested_mhz, "measured_mhz": self.measured_mhz,
                "verified": self.verified, "why": self.why}


@dataclass(frozen=True)
class PowerSample:
    """One reading of every rail of a :class:`PowerReader`.

    ``t_s`` comes from the reader's clock (``time.monotonic`` on hardware, the virtual clock
    on the simulated board); ``power_mw`` maps rail name to power in mW.
    """

    t_s: float
    power_mw: Mapping[str, float]
    gpu_util_pct: float | None = None
    gpu_freq_mhz: float | None = None

    def total_mw(self, rails: Sequence[str]) -> float:
        return float(sum(self.power_mw[r] for r in rails))


# --------------------------------------------------------------------------------------------
# Protocols
# --------------------------------------------------------------------------------------------


@runtime_checkable
class ClockControl(Protocol):
    """GPU clock control of one device."""

    def levels_mhz(self) -> list[float]:
        """The GPU frequency levels the board offers, ascending, in MHz."""
        ...

    def state(self) -> ClockState:
        """Current clock state."""
        ...

    def lock(self, freq_mhz: float) -> ClockState:
        """Pin the GPU to one level; return the state read back after the write.

        Raises :class:`UnsupportedFrequencyError` for a value that is not a level,
        :class:`ClockPermissionError` when not permitted and :class:`FrequencyCappedError`
        when the board does not reach the level.
        """
        ...

    def reset(self) -> None:
        """Give the clocks back: restore what the board had before the first lock."""
        ...


@runtime_checkable
class PowerReader(Protocol):
    """Power rails of one device.

    ``rails`` are all rails read; ``total_rails`` the subset whose sum is the paper's
    "CPU + GPU" power (``VDD_CPU_CV`` + ``VDD_GPU_SOC`` on AGX Orin). ``update_interval_s``
    is the sensor's own refresh period when known, else ``None``.
    """

    rails: tuple[str, ...]
    total_rails: tuple[str, ...]
    update_interval_s: float | None

    def read(self) -> PowerSample:
        ...


@runtime_checkable
class Telemetry(Protocol):
    """Optional load and temperature readings."""

    def gpu_load_pct(self) -> float | None:
        ...

    def temperatures_c(self) -> dict[str, float]:
        ...


def split_rails(rails: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The GPU-side and the CPU-side rails among ``rails`` (the one rule for the energy split).

    A rail whose name says GPU and not CPU is GPU-side (``VDD_GPU_SOC`` on AGX Orin), and the
    other way round (``VDD_CPU_CV``). A rail naming both (Orin NX ``VDD_CPU_GPU_CV``) is in
    neither, which leaves the split empty rather than wrong.
    """
    gpu = tuple(r for r in rails if "GPU" in r.upper() and "CPU" not in r.upper())
    cpu = tuple(r for r in rails if "CPU" in r.upper() and "GPU" not in r.upper())
    return gpu, cpu


def rail_energy_split_j(energy_by_rail_j: Mapping[str, float], rails: Sequence[str]
                        ) -> tuple[float | None, float | None]:
    """(GPU, CPU) energy in J summed over :func:`split_rails` of ``rails`` (None for an empty side)."""
    return tuple(float(sum(energy_by_rail_j[r] for r in side)) if side else None  # type: ignore[return-value]
                 for side in split_rails(rails))


@dataclass
class Backend:
    """What one device offers, bundled: any part may be ``None`` when unavailable.

    ``clock`` is the time source samples and windows must use: ``time.monotonic`` on real
    hardware, the virtual clock of the simulated board. ``simulated``: every reading is a model's,
    not a measurement (data recorded from it is labelled simulated); ``virtual_time``: ``clock``
    is not wall time (nothing may ``time.sleep`` to let board time pass).
    """

    name: str
    clocks: ClockControl | None = None
    power: PowerReader | None = None
    telemetry: Telemetry | None = None
    clock: Callable[[], float] = time.monotonic
    description: dict = field(default_factory=dict)
    simulated: bool = False
    virtual_time: bool = False

    def close(self) -> None:
        """Restore the clocks if this backend changed them."""
        if self.clocks is not None:
            self.clocks.reset()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


