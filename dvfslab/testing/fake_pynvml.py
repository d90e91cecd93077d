"""A fake ``pynvml`` (nvidia-ml-py) module for tests without an NVIDIA driver.

``make_module([FakeGpu(...)])`` returns a module object to put in ``sys.modules["pynvml"]``.
It implements the calls dvfslab uses with the real library's names, units and error codes:
supported memory/graphics clocks (MHz, descending like NVML), locked clocks (root needed
unless ``can_lock``), power usage (mW), a total-energy counter (mJ) that integrates the
power over the time source, clock info and utilization. Errors are ``NVMLError`` instances
with ``.value`` set to the real ``NVML_ERROR_*`` codes (NOT_SUPPORTED for everything on a
Tegra GPU, NO_PERMISSION for clock locks without root, UNINITIALIZED before ``nvmlInit``).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_MEM = 2
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
_MESSAGES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
             9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 15: "GPU is lost", 999: "Unknown Error"}


class NVMLError(Exception):
    """Like ``pynvml.NVMLError``: ``.value`` is the NVML error code."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeGpu:
    """One fake device. Graphics clocks are per memory clock, in MHz."""

    name: str = "NVIDIA A100-SXM4-40GB"
    memory_clocks_mhz: tuple[int, ...] = (1215,)
    graphics_clocks_mhz: tuple[int, ...] = tuple(range(1410, 195, -15))
    power_mw: float = 60000.0
    util_pct: int = 0
    tegra: bool = False  # every query NOT_SUPPORTED, as NVML answers on Jetson boards
    supports_energy: bool = True  # Volta and newer
    can_lock: bool = True  # False: NO_PERMISSION like a non-root user
    locked_mhz: tuple[int, int] | None = None
    energy_mj: float = 0.0
    _t_last: float | None = field(default=None, repr=False)


class _Handle:
    def __init__(self, gpu: FakeGpu):
        self.gpu = gpu


class _FakeNvml:
    """The library's state (init count, devices, time source); its methods are the NVML calls."""

    API = ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
           "nvmlDeviceGetSupportedMemoryClocks", "nvmlDeviceGetSupportedGraphicsClocks",
           "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks", "nvmlDeviceGetClockInfo",
           "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates",
           "set_power")

    def __init__(self, gpus: list[FakeGpu], init_error: int | None, clock: Callable[[], float]):
        self.gpus, self.init_error, self.clock, self.init_count = gpus, init_error, clock, 0

    # -- helpers ---------------------------------------------------------------------------
    def _need_init(self) -> None:
        if not self.init_count:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: _Handle, *, tegra_ok: bool = False) -> FakeGpu:
        self._need_init()
        if handle.gpu.tegra and not tegra_ok:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return handle.gpu

    def _accumulate(self, g: FakeGpu) -> None:
        now = self.clock()
        if g._t_last is not None:
            g.energy_mj += g.power_mw * (now - g._t_last)  # mW x s = mJ
        g._t_last = now

    def _lockable(self, handle: _Handle) -> FakeGpu:
        g = self._gpu(handle)
        if not g.can_lock:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        return g

    # -- library ---------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.init_count += 1
        for g in self.gpus:
            self._accumulate(g)

    def nvmlShutdown(self) -> None:
        self._need_init()
        self.init_count -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._need_init()
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(self.gpus[index])

    def nvmlDeviceGetName(self, handle) -> str:
        return self._gpu(handle, tegra_ok=True).name

    # -- clocks ----------------------------------------------------------------------------
    def nvmlDeviceGetSupportedMemoryClocks(self, handle) -> list[int]:
        return list(self._gpu(handle).memory_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle, memoryClockMHz) -> list[int]:
        g = self._gpu(handle)
        if memoryClockMHz not in g.memory_clocks_mhz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return sorted(g.graphics_clocks_mhz, reverse=True)

    def nvmlDeviceSetGpuLockedClocks(self, handle, minGpuClockMHz, maxGpuClockMHz) -> None:
        g = self._lockable(handle)
        if minGpuClockMHz > maxGpuClockMHz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g.locked_mhz = (int(minGpuClockMHz), int(maxGpuClockMHz))

    def nvmlDeviceResetGpuLockedClocks(self, handle) -> None:
        self._lockable(handle).locked_mhz = None

    def nvmlDeviceGetClockInfo(self, handle, type) -> int:
        g = self._gpu(handle)
        if type == NVML_CLOCK_MEM:
            return max(g.memory_clocks_mhz)
        levels = sorted(g.graphics_clocks_mhz)
        if g.locked_mhz is None:
            return levels[-1] if g.util_pct > 0 else levels[0]
        lo, hi = g.locked_mhz
        inside = [f for f in levels if lo <= f <= hi]
        return max(inside) if inside else levels[0]

    # -- power -----------------------------------------------------------------------------
    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        g = self._gpu(handle)
        self._accumulate(g)
        return int(round(g.power_mw))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle) -> int:
        g = self._gpu(handle)
        if not g.supports_energy:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        self._accumulate(g)
        return int(g.energy_mj)

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=self._gpu(handle).util_pct, memory=0)

    def set_power(self, index: int, power_mw: float) -> None:
        """Change a GPU's power draw; energy up to now is accumulated at the old power."""
        self._accumulate(self.gpus[index])
        self.gpus[index].power_mw = float(power_mw)


def make_module(gpus: list[FakeGpu] | None = None, *, init_error: int | None = None,
                clock: Callable[[], float] = time.monotonic) -> types.ModuleType:
    """A module object standing in for ``pynvml`` with ``gpus`` attached (default: one A100).

    Besides the NVML calls it offers ``fake_gpus`` (the :class:`FakeGpu` list, to inspect) and
    ``set_power(index, power_mw)``.
    """
    lib = _FakeNvml(list(gpus) if gpus is not None else [FakeGpu()], init_error, clock)
    mod = types.ModuleType("pynvml")
    mod.__doc__ = "fake pynvml from dvfslab.testing.fake_pynvml"
    for k, v in globals().items():
        if k.startswith("NVML_"):
            setattr(mod, k, v)
    mod.NVMLError = NVMLError
    mod.fake_gpus = lib.gpus
    for name in _FakeNvml.API:
        setattr(mod, name, getattr(lib, name))
    return mod
