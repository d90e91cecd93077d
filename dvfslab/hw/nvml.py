"""Discrete / datacenter NVIDIA GPUs through NVML (nvidia-ml-py), imported lazily.

* :class:`NvmlClocks`: supported graphics clocks, lock (``nvmlDeviceSetGpuLockedClocks``,
  needs root) and reset.
* :class:`NvmlPowerReader`: board power in mW (rail ``"GPU"``) and the energy counter in mJ.

NVML errors are translated in one place, :func:`nvml_error`. On Jetson (Tegra) boards NVML
answers "Not Supported" to power and clock queries: the message says to use the Jetson
backend instead.
"""

from __future__ import annotations

import contextlib
import importlib
import time

from dvfslab.hw.base import (
    Backend,
    BackendUnavailableError,
    ClockPermissionError,
    ClockState,
    DvfsError,
    PowerReadError,
    PowerSample,
    check_level,
)

TEGRA_HINT = ("NVML reports 'Not Supported' for power and clocks on Jetson (Tegra) boards; "
              "use --backend jetson there")


def import_pynvml():
    """The ``pynvml`` module, or :class:`BackendUnavailableError` with the install command."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as err:
        raise BackendUnavailableError(
            "nvidia-ml-py is not installed (pip install 'dvfslab[nvml]')") from err


def nvml_error(nvml, err: Exception, what: str, default=DvfsError) -> DvfsError:
    """Map an ``NVMLError`` to the dvfslab hierarchy (the one place that does it)."""
    code = getattr(err, "value", None)
    if code == nvml.NVML_ERROR_NO_PERMISSION:
        return ClockPermissionError(
            f"NVML {what}: insufficient permissions; run as root (sudo) — locking GPU clocks "
            "needs it (same as `sudo nvidia-smi --lock-gpu-clocks`)")
    if code == nvml.NVML_ERROR_NOT_SUPPORTED:
        return default(f"NVML {what}: not supported on this GPU. {TEGRA_HINT}")
    if code in (nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED,
                nvml.NVML_ERROR_UNINITIALIZED):
        return BackendUnavailableError(f"NVML {what}: {err} (is the NVIDIA driver installed and loaded?)")
    return default(f"NVML {what}: {err} (NVML error {code})")


class _Nvml:
    """An initialized NVML session bound to one device index."""

    def __init__(self, index: int = 0, nvml=None):
        self.nvml = nvml or import_pynvml()
        self.index = index
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
            raise nvml_error(self.nvml, err, what, default) from err


class NvmlClocks:
    """:class:`~dvfslab.hw.base.ClockControl` through NVML locked clocks (MHz)."""

    def __init__(self, index: int = 0, *, session: _Nvml | None = None):
        self.s = session or _Nvml(index)
        self._locked_mhz: float | None = None
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
        level = check_level(freq_mhz, self._levels, nearest=nearest)
        with self.s.call(f"lock graphics clock at {level:g} MHz"):
            self.s.nvml.nvmlDeviceSetGpuLockedClocks(self.s.handle, int(level), int(level))
        self._locked_mhz = level
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


class NvmlPowerReader:
    """:class:`~dvfslab.hw.base.PowerReader`: one rail ``"GPU"`` (board power, mW)."""

    rails = ("GPU",)
    total_rails = ("GPU",)
    update_interval_s = None

    def __init__(self, index: int = 0, *, session: _Nvml | None = None):
        self.s = session or _Nvml(index)
        self.read()  # fail now, not in the sampler thread

    def read(self) -> PowerSample:
        t_s = time.monotonic()
        nv = self.s.nvml
        with self.s.call("power usage", PowerReadError):
            power_mw = float(nv.nvmlDeviceGetPowerUsage(self.s.handle))
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


def open_backend(index: int = 0, **kw) -> Backend:
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
        power = NvmlPowerReader(session=s)
        description.update(rails=list(power.rails), total_rails=list(power.total_rails))
    except DvfsError as err:
        description["power_error"] = str(err)
    if clocks is None and power is None:
        raise BackendUnavailableError(f"NVML found {s.name} but it offers neither clock control nor power. {TEGRA_HINT}")
    return Backend(name="nvml", clocks=clocks, power=power, clock=time.monotonic, description=description,
                   simulated=False, virtual_time=False)
