"""Discrete / datacenter NVIDIA GPUs through NVML (nvidia-ml-py), imported lazily.

* :class:`NvmlClocks`: supported graphics clocks, lock (``nvmlDeviceSetGpuLockedClocks``,
  needs root) **verified** by reading the graphics clock back (:func:`verify_locked_clock`),
  and reset.
* :class:`NvmlPowerReader`: board power in mW (rail ``"GPU"``) from the instant power field
  where the driver has it, and the energy counter in mJ for window energy
  (:meth:`NvmlPowerReader.counter`, read by the sampler at every window's edges).
  ``nvmlDeviceGetPowerUsage`` is a trailing 1 s average on Ampere
  (except GA100) and newer, so it is used only where nothing better exists, and labelled.

NVML errors are translated in one place, :func:`nvml_error`. Only on a Jetson (Tegra) GPU does
a "Not Supported" answer say to use the Jetson backend. The rules and their sources are in
docs/hardware.md ("NVML").
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import time
from collections.abc import Callable

from dvfslab.core import boards
from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import (
    Backend,
    BackendUnavailableError,
    ClockControl,
    ClockPermissionError,
    ClockState,
    CounterReading,
    FrequencyCappedError,
    LockCheck,
    PowerReader,
    PowerReadError,
    PowerSample,
    check_level,
    lock_status,
)
from dvfslab.hw.nvml_power import energy_source, sample_source

__all__ = ["NvmlClocks", "NvmlPowerReader", "nvml_error", "nvml_power_source", "verify_locked_clock",
           "open_backend"]

log = logging.getLogger(__name__)

TEGRA_HINT = ("NVML does not offer power and clock control on Jetson (Tegra) boards; "
              "use --backend jetson there")
#: clocks-event reason bits (nvmlClocksEventReason*) -> words; GPU idle first
EVENT_REASONS = ((0x1, "GPU idle"), (0x2, "applications clocks setting"), (0x4, "software power cap"),
                 (0x8, "hardware slowdown"), (0x10, "sync boost"), (0x20, "software thermal slowdown"),
                 (0x40, "hardware thermal slowdown"), (0x80, "hardware power brake"),
                 (0x100, "display clock setting"))


def import_pynvml():
    """The ``pynvml`` module, or :class:`BackendUnavailableError` with the install command."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as err:
        raise BackendUnavailableError(
            "nvidia-ml-py is not installed (pip install 'dvfslab[nvml]')") from err


def is_tegra(name: str | None) -> bool:
    """Whether NVML's device name is a Jetson's integrated GPU (``Orin (nvgpu)``, ``...Thor``):
    a word of :func:`dvfslab.core.boards.tegra_words` in it."""
    low = (name or "").lower()
    return any(w in low for w in boards.tegra_words())


def _not_supported_hint(what: str, device_name: str | None) -> str:
    if is_tegra(device_name):
        return TEGRA_HINT
    if re.search(r"\block", what):  # "lock ..." / "reset locked ...", not "clock info"
        return ("locked graphics clocks need a Volta or newer GPU and a driver that allows them "
                "(check `nvidia-smi --lock-gpu-clocks`)")
    if "energy" in what:
        return ("the energy counter needs a Volta or newer GPU; window energy then comes from "
                "the power samples")
    return "this GPU or driver does not offer it (see `nvidia-smi -q -d POWER,CLOCK`)"


def nvml_error(nvml, err: Exception, what: str, default=DvfsError, *,
               device_name: str | None = None) -> DvfsError:
    """Map an ``NVMLError`` to the dvfslab hierarchy (the one place that does it)."""
    code = getattr(err, "value", None)
    gpu = f" on {device_name}" if device_name else ""
    if code == nvml.NVML_ERROR_NO_PERMISSION:
        return ClockPermissionError(
            f"NVML {what}: insufficient permissions; run as root (sudo) — locking GPU clocks "
            "needs it (same as `sudo nvidia-smi --lock-gpu-clocks`)")
    if code == nvml.NVML_ERROR_NOT_SUPPORTED:
        return default(f"NVML {what}: not supported{gpu}. {_not_supported_hint(what, device_name)}")
    if code in (nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED,
                nvml.NVML_ERROR_UNINITIALIZED):
        return BackendUnavailableError(f"NVML {what}: {err} (is the NVIDIA driver installed and loaded?)")
    return default(f"NVML {what}: {err} (NVML error {code})")


class _Nvml:
    """An initialized NVML session bound to one device index."""

    def __init__(self, index: int = 0, nvml=None):
        self.nvml = nvml or import_pynvml()
        self.index = index
        self.name: str | None = None
        with self.call("nvmlInit", BackendUnavailableError):
            self.nvml.nvmlInit()
        with self.call("device count", BackendUnavailableError):
            count = self.nvml.nvmlDeviceGetCount()
        if not 0 <= index < count:
            raise BackendUnavailableError(f"NVML sees {count} GPU(s); there is no GPU index {index}")
        with self.call(f"handle of GPU {index}", BackendUnavailableError):
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            self.name = self.nvml.nvmlDeviceGetName(self.handle)

    @contextlib.contextmanager
    def call(self, what: str, default=DvfsError):
        try:
            yield
        except self.nvml.NVMLError as err:
            raise nvml_error(self.nvml, err, what, default, device_name=self.name) from err


# --------------------------------------------------------------------------------------------
# Locked clocks and their verification
# --------------------------------------------------------------------------------------------


def lock_message(requested_mhz: float, measured_mhz: float, status: str,
                 reasons: tuple[str, ...] | None) -> str:
    """The words of an NVML lock check: the clock read back, the reasons, and the fix."""
    why = ", ".join(reasons) if reasons else "no reason reported"
    head = f"graphics clock {measured_mhz:g} MHz after locking {requested_mhz:g} MHz"
    if status == "verified":
        return f"{head}: verified"
    if status == "unverified":
        return f"{head} ({why}): unverified until the GPU has work"
    if status == "capped":
        return (f"{head} ({why}): the GPU does not reach the level; lower the level, raise the "
                "power limit (`nvidia-smi -pl`) or cool the GPU")
    return (f"{head}: the lock did not take (another tool or a driver policy holds the clocks? "
            "`nvidia-smi -q -d CLOCK`)")


def clock_event_reasons(nvml, handle) -> tuple[str, ...] | None:
    """Why the clocks are where they are (words), or ``None`` when NVML cannot say."""
    for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, fn):
            try:
                bits = int(getattr(nvml, fn)(handle))
            except nvml.NVMLError:
                return None
            return tuple(word for bit, word in EVENT_REASONS if bits & bit)
    return None


def _tolerance_mhz(target_mhz: float, levels_mhz: list[float]) -> float:
    """Half the gap to the nearest other level (a clock read back rounds to the table)."""
    gaps = [abs(f - target_mhz) for f in levels_mhz if f != target_mhz]
    return min(gaps) / 2 if gaps else 0.5


def verify_locked_clock(handle, target_mhz: float, levels_mhz: list[float], nvml=None, *,
                        reads: int = 3, pause_s: float = 0.05,
                        sleep: Callable[[float], None] = time.sleep) -> LockCheck:
    """Read the graphics clock back after ``nvmlDeviceSetGpuLockedClocks`` (up to ``reads``
    times, ``sleep(pause_s)`` between) and say whether it reached ``target_mhz``: verified at
    the level; below it with only the GPU-idle reason unverified (the lock holds once work
    arrives); below it for a power / thermal reason or none known capped; above it not-locked."""
    nvml = nvml or import_pynvml()
    check = None
    for i in range(max(1, reads)):
        if i:
            sleep(pause_s)
        actual = float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_GRAPHICS))
        reasons = clock_event_reasons(nvml, handle)
        status = lock_status(target_mhz, actual, _tolerance_mhz(target_mhz, levels_mhz),
                             idle=reasons == ("GPU idle",))
        check = LockCheck(target_mhz, actual, status, lock_message(target_mhz, actual, status, reasons),
                          source="graphics clock", reasons=reasons)
        if check.verified:
            break
    return check


class NvmlClocks(ClockControl):
    """:class:`~dvfslab.hw.base.ClockControl` through NVML locked clocks (MHz), verified."""

    def __init__(self, index: int = 0, *, session: _Nvml | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.s = session or _Nvml(index)
        self.sleep = sleep
        self._locked_mhz: float | None = None
        self.last_lock_check: LockCheck | None = None
        with self.s.call("supported clocks", BackendUnavailableError):
            mem = max(self.s.nvml.nvmlDeviceGetSupportedMemoryClocks(self.s.handle))
            clocks = self.s.nvml.nvmlDeviceGetSupportedGraphicsClocks(self.s.handle, mem)
        self._levels = sorted(float(f) for f in clocks)

    def levels_mhz(self) -> list[float]:
        return list(self._levels)

    def state(self) -> ClockState:
        with self.s.call("clock info"):
            cur = float(self.s.nvml.nvmlDeviceGetClockInfo(self.s.handle, self.s.nvml.NVML_CLOCK_GRAPHICS))
        lo, hi = ((self._locked_mhz, self._locked_mhz) if self._locked_mhz is not None
                  else (self._levels[0], self._levels[-1]))
        gov = "locked" if self._locked_mhz is not None else "default"
        return ClockState(cur, lo, hi, gov, tuple(self._levels))

    def lock(self, freq_mhz: float, nearest: bool = False) -> ClockState:
        """Lock one level and read the clock back. A GPU held below the level (power or
        thermal cap) or above it gets its clocks reset and :class:`FrequencyCappedError`; an
        idle GPU below the level keeps the lock, logged as unverified (``last_lock_check``)."""
        level = check_level(freq_mhz, self._levels, nearest=nearest)
        with self.s.call(f"lock graphics clock at {level:g} MHz"):
            self.s.nvml.nvmlDeviceSetGpuLockedClocks(self.s.handle, int(level), int(level))
        self._locked_mhz = level
        try:
            with self.s.call("clock info after the lock"):
                check = verify_locked_clock(self.s.handle, level, self._levels, self.s.nvml, sleep=self.sleep)
        except BaseException:
            self.reset()
            raise
        self.last_lock_check = check
        if check.failed:
            self.reset()
            raise FrequencyCappedError(f"NVML {self.s.name}: {check.why}; the clocks were reset")
        if not check.verified:
            log.warning("NVML %s: %s", self.s.name, check.why)
        return self.state()

    def reset(self) -> None:
        """Reset the locked clocks if this object locked them."""
        if self._locked_mhz is None:
            return
        with self.s.call("reset locked clocks"):
            self.s.nvml.nvmlDeviceResetGpuLockedClocks(self.s.handle)
        self._locked_mhz = None

    def __enter__(self) -> NvmlClocks:
        return self

    def __exit__(self, *exc) -> None:
        self.reset()


# --------------------------------------------------------------------------------------------
# Power
# --------------------------------------------------------------------------------------------


def nvml_power_source(handle, nvml=None, name: str | None = None) -> str:
    """Where a window's energy comes from on this GPU: ``"energy-counter"`` (Volta and newer),
    else ``"instant"`` (the instant field, or ``nvmlDeviceGetPowerUsage`` on GA100 and older),
    else ``"average-1s"`` (the trailing 1 s average: a labelled fallback)."""
    nvml = nvml or import_pynvml()
    if name is None:
        try:
            name = nvml.nvmlDeviceGetName(handle)
        except nvml.NVMLError:
            name = None
    return energy_source(nvml, handle, name)


class NvmlPowerReader(PowerReader):
    """:class:`~dvfslab.hw.base.PowerReader`: one rail ``"GPU"`` (board power, mW).

    ``power_source`` says what each sample is (``"instant"`` or ``"average-1s"``);
    ``energy_source`` where a window's energy comes from: ``"energy-counter"`` when
    :meth:`counter` answers (Volta and newer), else what the samples are. ``clock`` stamps
    samples and counter readings (the backend's clock).
    """

    rails = ("GPU",)
    total_rails = ("GPU",)
    update_interval_s = None

    def __init__(self, index: int = 0, *, session: _Nvml | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.s = session or _Nvml(index)
        self.clock = clock
        nv = self.s.nvml
        self.power_source, self._instant_field = sample_source(nv, self.s.handle, self.s.name)
        self.energy_source = energy_source(nv, self.s.handle, self.s.name)
        #: a sample is the mean over this many seconds before its timestamp (None: instant)
        self.averaging_s = 1.0 if self.power_source == "average-1s" else None
        self.read()  # fail now, not in the sampler thread

    def _power_mw(self) -> float:
        nv = self.s.nvml
        if self._instant_field is not None:
            fv = nv.nvmlDeviceGetFieldValues(self.s.handle, [self._instant_field])[0]
            if fv.nvmlReturn == 0:
                return float(fv.value.uiVal)
            raise nv.NVMLError(fv.nvmlReturn)
        return float(nv.nvmlDeviceGetPowerUsage(self.s.handle))

    def read(self) -> PowerSample:
        t_s = self.clock()
        nv = self.s.nvml
        with self.s.call(f"power ({self.power_source})", PowerReadError):
            power_mw = self._power_mw()
        try:
            util = float(nv.nvmlDeviceGetUtilizationRates(self.s.handle).gpu)
            freq = float(nv.nvmlDeviceGetClockInfo(self.s.handle, nv.NVML_CLOCK_GRAPHICS))
        except nv.NVMLError:
            util = freq = None
        return PowerSample(t_s=t_s, power_mw={"GPU": power_mw}, gpu_util_pct=util, gpu_freq_mhz=freq)

    def energy_mj(self) -> float:
        """The driver's total-energy counter in mJ (Volta and newer)."""
        with self.s.call("total energy consumption", PowerReadError):
            return float(self.s.nvml.nvmlDeviceGetTotalEnergyConsumption(self.s.handle))

    def counter(self) -> CounterReading | None:
        """The energy counter stamped at the middle of its read (a window edge); None on a GPU
        without one (before Volta)."""
        if self.energy_source != "energy-counter":
            return None
        t0 = self.clock()
        mj = self.energy_mj()
        return CounterReading(t_s=(t0 + self.clock()) / 2, energy_mj=mj)


def open_backend(index: int = 0, clock: Callable[[], float] = time.monotonic, **kw) -> Backend:
    """Open GPU ``index`` through NVML; other keyword arguments are ignored.

    Raises :class:`BackendUnavailableError` when NVML is missing or offers neither clock
    control nor power (the Jetson case).
    """
    s = _Nvml(index)
    description = {"gpu": s.name, "index": index, "simulated": False}
    clocks = power = None
    try:
        clocks = NvmlClocks(session=s)
        description["levels_mhz"] = clocks.levels_mhz()
    except DvfsError as err:
        description["clocks_error"] = str(err)
    try:
        power = NvmlPowerReader(session=s, clock=clock)
        description.update(rails=list(power.rails), total_rails=list(power.total_rails),
                           power_source=power.power_source, energy_source=power.energy_source)
    except DvfsError as err:
        description["power_error"] = str(err)
    if clocks is None and power is None:
        hint = TEGRA_HINT if is_tegra(s.name) else "; ".join(
            description[k] for k in ("clocks_error", "power_error"))
        raise BackendUnavailableError(f"NVML found {s.name} but it offers neither clock control nor power. {hint}")
    return Backend(name="nvml", clocks=clocks, power=power, clock=clock, description=description,
                   simulated=False, virtual_time=False)
