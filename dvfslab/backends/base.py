"""Backend protocols shared by the Jetson, NVML and simulated boards.

Two small protocols rather than one wide class (see docs/STYLE.md):

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

# --------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------


class DvfsError(Exception):
    """Base class of every error dvfslab raises on purpose.

    The CLI prints ``str(err)`` on one line and exits 2, without a traceback, so messages
    must name the file, path or value at fault and the fix.
    """


class BackendUnavailableError(DvfsError):
    """The requested backend does not exist on this machine (no Jetson sysfs, no NVML, ...)."""


class ClockPermissionError(DvfsError, PermissionError):
    """Writing the clock controls needs privileges this process does not have."""


class UnsupportedFrequencyError(DvfsError, ValueError):
    """The requested frequency is not one of the board's levels."""

    def __init__(self, freq_mhz: float, levels_mhz: Sequence[float], hint: str = ""):
        self.freq_mhz = float(freq_mhz)
        self.levels_mhz = tuple(float(f) for f in levels_mhz)
        levels = ", ".join(format_mhz(f) for f in self.levels_mhz)
        msg = f"{format_mhz(freq_mhz)} MHz is not a GPU level of this board; levels (MHz): {levels}"
        super().__init__(msg + (f". {hint}" if hint else ""))


class FrequencyCappedError(DvfsError):
    """The board did not reach the requested level (power-mode cap or thermal throttling)."""


class PowerReadError(DvfsError):
    """A power sensor could not be read."""


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def format_mhz(freq_mhz: float) -> str:
    """``612.0 -> '612'``, ``1300.5 -> '1300.5'``."""
    f = float(freq_mhz)
    return str(int(f)) if f.is_integer() else f"{f:g}"


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


@dataclass
class Backend:
    """What one device offers, bundled: any part may be ``None`` when unavailable.

    ``clock`` is the time source samples and windows must use: ``time.monotonic`` on real
    hardware, the virtual clock of the simulated board.
    """

    name: str
    clocks: ClockControl | None = None
    power: PowerReader | None = None
    telemetry: Telemetry | None = None
    clock: Callable[[], float] = time.monotonic
    description: dict = field(default_factory=dict)

    def close(self) -> None:
        """Restore the clocks if this backend changed them."""
        if self.clocks is not None:
            self.clocks.reset()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def nearest_level(freq_mhz: float, levels_mhz: Sequence[float]) -> float:
    """The level closest to ``freq_mhz`` (ties go to the lower level)."""
    if not levels_mhz:
        raise UnsupportedFrequencyError(freq_mhz, levels_mhz, "the board reports no levels")
    return min(sorted(levels_mhz), key=lambda f: abs(f - float(freq_mhz)))


def check_level(freq_mhz: float, levels_mhz: Sequence[float], *, nearest: bool = False) -> float:
    """Return the level for a request: exact match (within 0.5 MHz), or snapped if ``nearest``."""
    for f in levels_mhz:
        if abs(f - float(freq_mhz)) < 0.5:
            return float(f)
    if nearest:
        return nearest_level(freq_mhz, levels_mhz)
    raise UnsupportedFrequencyError(freq_mhz, levels_mhz, "Pick one of these (or use --nearest).")
