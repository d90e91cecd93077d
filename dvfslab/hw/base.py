"""Backend protocols shared by the Jetson, NVML and simulated boards.

Small protocols rather than one wide class:

* :class:`ClockControl` lists the GPU levels, reads the clock state, locks one level and
  resets to what the board had before; it declares what a backend may lack (the check of a
  lock, the pre-sweep baseline check, recovery after a crash) with null implementations.
* :class:`PowerReader` names its rails and reads all of them at once, in mW, with a
  monotonic timestamp; it declares the optional energy counter, sample label and close.
* :class:`Telemetry`: GPU load and temperatures.

Implementations subclass the protocols, so a capability a backend lacks is its null
implementation, never a missing attribute: callers do not probe backends.

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


@dataclass(frozen=True)
class CounterReading:
    """One read of a device's energy counter: ``t_s`` on the backend's clock, ``energy_mj`` as read."""

    t_s: float
    energy_mj: float


@runtime_checkable
class ClockControl(Protocol):
    """GPU clock control of one device.

    Every implementation subclasses this protocol, which declares what a backend may lack with
    a null implementation: ``last_lock_check`` stays ``None`` on a backend that cannot measure
    the clock after a lock, :meth:`preflight` checks nothing and :meth:`recover` restores
    nothing on one that keeps no state. Callers use them without asking what the backend is.
    """

    #: what the clock measured after the last lock (None: no lock yet, or not measurable here)
    last_lock_check: LockCheck | None = None

    def levels_mhz(self) -> list[float]:
        """The GPU frequency levels the board offers, ascending, in MHz."""
        ...

    def state(self) -> ClockState:
        """Current clock state."""
        ...

    def lock(self, freq_mhz: float, nearest: bool = False) -> ClockState:
        """Pin the GPU to one level (``nearest``: snap a non-level); return the state read back.

        Raises :class:`UnsupportedFrequencyError` for a value that is not a level,
        :class:`ClockPermissionError` when not permitted and :class:`FrequencyCappedError`
        when the board does not reach the level.
        """
        ...

    def reset(self) -> None:
        """Give the clocks back: restore what the board had before the first lock."""
        ...

    def preflight(self) -> str | None:
        """Check the board is at the baseline a sweep's MAXN runs need (Jetson: MAXN, min < max,
        a load-following governor); raise :class:`DvfsError` naming every problem and its fix.
        Returns one line for the sweep's record, or None when this backend has nothing to check."""
        return None

    def recover(self) -> str | None:
        """Restore clocks a killed process left pinned (Jetson: the state file), refusing clocks
        a live process holds. Returns what was restored, in words, or None when nothing was
        pending or this backend keeps no such state."""
        return None

    def other_clocks(self) -> Mapping[str, PinnedClock]:
        """The clocks besides the GPU's that this backend can pin, by name (:data:`OTHER_CLOCKS`:
        ``"emc"`` the memory clock, ``"cpu"`` the CPU clusters). Empty on a backend that pins
        none (NVML). Each is released with the GPU by :meth:`reset`."""
        return {}


#: the clocks besides the GPU's a sweep may pin, in the order they are pinned (runs.csv
#: ``<name>_freq_mhz``)
OTHER_CLOCKS = ("emc", "cpu")
#: what a pin setting may say besides a number (MHz): the power mode's highest level, or
#: leave the clock to the board's own governor
PIN_MAX, PIN_NONE = "max", "none"


@runtime_checkable
class PinnedClock(Protocol):
    """One clock besides the GPU's that a backend can pin at a level and read back (Jetson: the
    EMC through the BPMP's debugfs, the CPU clusters through cpufreq).

    ``support()`` says why it cannot be pinned here (None: it can); :meth:`pin` refuses a level
    above the power mode's cap before anything is written, pins, reads back and verifies (the
    one :func:`lock_status` rule), restores and raises :class:`FrequencyCappedError` when the
    clock does not hold the level. The owning :class:`ClockControl` releases it with the GPU
    (``reset``), through the same saved state.
    """

    name: str
    label: str

    def support(self) -> str | None:
        """None when this clock can be pinned here, else why not (and the fix), in words."""
        return None

    def levels_mhz(self) -> list[float]:
        """The levels this clock offers, ascending (MHz)."""
        ...

    def max_allowed_mhz(self) -> float:
        """The highest level the current power mode allows (what ``max`` pins)."""
        ...

    def read_mhz(self) -> float | None:
        """The clock now, read back from the device (None: not readable here)."""
        ...

    def pin(self, freq_mhz: float) -> LockCheck:
        """Pin the clock at one of its levels; return what was read back."""
        ...


def resolve_pin(clock: PinnedClock, setting: float | str) -> float:
    """The level a pin setting asks for: ``"max"`` -> :meth:`PinnedClock.max_allowed_mhz`,
    a number -> itself (checked by :meth:`PinnedClock.pin`)."""
    if setting == PIN_MAX:
        return clock.max_allowed_mhz()
    return float(setting)


def parse_pin(text: str | float | None, option: str) -> float | str | None:
    """A ``--emc`` / ``--cpu`` value: ``max``, ``none`` or MHz (None stays None: not given)."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    word = str(text).strip().lower()
    if word in (PIN_MAX, PIN_NONE):
        return word
    try:
        value = float(word)
    except ValueError:
        raise DvfsError(f"{option} {text!r}: give MHz (e.g. 2133), 'max' (the power mode's highest level) "
                        "or 'none' (leave the clock to the board)") from None
    if not value > 0:
        raise DvfsError(f"{option} {text!r}: a clock must be positive MHz")
    return value


@runtime_checkable
class PowerReader(Protocol):
    """Power rails of one device.

    ``rails`` are all rails read; ``total_rails`` the subset whose sum is the paper's
    "CPU + GPU" power (``VDD_CPU_CV`` + ``VDD_GPU_SOC`` on AGX Orin). Every implementation
    subclasses this protocol, which declares what a reader may lack with a null default:
    ``update_interval_s`` (the sensor's own refresh period; None: unknown), ``power_source``
    (what each sample is, ``"instant"`` or ``"average-1s"`` on NVML; None: the rails as read),
    ``support_note`` (one line when the board's sensor layout is untested), :meth:`counter`
    (None: no energy counter, a window's energy is the integral of the samples) and
    :meth:`close` (nothing to release).
    """

    rails: tuple[str, ...]
    total_rails: tuple[str, ...]
    update_interval_s: float | None = None
    power_source: str | None = None
    support_note: str | None = None

    def read(self) -> PowerSample:
        ...

    def counter(self) -> CounterReading | None:
        """The device's energy counter read now, stamped on the backend's clock (a window's
        edge); None when the device has none."""
        return None

    def close(self) -> None:
        """Release what the reader holds open (files, a connection); reading again reopens."""
        return None


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
        """Restore the clocks if this backend changed them; close the power reader."""
        try:
            if self.clocks is not None:
                self.clocks.reset()
        finally:
            if self.power is not None:
                self.power.close()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


