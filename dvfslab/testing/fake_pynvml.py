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


def make_module(gpus: list[FakeGpu] | None = None, *, init_error: int | None = None,
                clock: Callable[[], float] = time.monotonic) -> types.ModuleType:
    """A module object standing in for ``pynvml`` with ``gpus`` attached (default: one A100)."""
    gpus = list(gpus) if gpus is not None else [FakeGpu()]
    mod = types.ModuleType("pynvml")
    mod.__doc__ = "fake pynvml from dvfslab.testing.fake_pynvml"
    state = {"init": 0}
    for k, v in globals().items():
        if k.startswith("NVML_"):
            setattr(mod, k, v)
    mod.NVMLError = NVMLError
    mod.fake_gpus = gpus

    def need_init():
        if not state["init"]:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def gpu_of(handle, *, tegra_ok=False) -> FakeGpu:
        need_init()
        if handle.gpu.tegra and not tegra_ok:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return handle.gpu

    def accumulate(g: FakeGpu) -> None:
        now = clock()
        if g._t_last is not None:
            g.energy_mj += g.power_mw * (now - g._t_last)  # mW x s = mJ
        g._t_last = now

    def nvmlInit():
        if init_error is not None:
            raise NVMLError(init_error)
        state["init"] += 1
        for g in gpus:
            accumulate(g)

    def nvmlShutdown():
        need_init()
        state["init"] -= 1

    def nvmlDeviceGetCount():
        need_init()
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(index):
        need_init()
        if not 0 <= index < len(gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(gpus[index])

    def nvmlDeviceGetName(handle):
        return gpu_of(handle, tegra_ok=True).name

    def nvmlDeviceGetSupportedMemoryClocks(handle):
        return list(gpu_of(handle).memory_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(handle, memoryClockMHz):
        g = gpu_of(handle)
        if memoryClockMHz not in g.memory_clocks_mhz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return sorted(g.graphics_clocks_mhz, reverse=True)

    def nvmlDeviceSetGpuLockedClocks(handle, minGpuClockMHz, maxGpuClockMHz):
        g = gpu_of(handle)
        if not g.can_lock:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        if minGpuClockMHz > maxGpuClockMHz:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g.locked_mhz = (int(minGpuClockMHz), int(maxGpuClockMHz))

    def nvmlDeviceResetGpuLockedClocks(handle):
        g = gpu_of(handle)
        if not g.can_lock:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        g.locked_mhz = None

    def nvmlDeviceGetClockInfo(handle, type):
        g = gpu_of(handle)
        if type == NVML_CLOCK_MEM:
            return max(g.memory_clocks_mhz)
        levels = sorted(g.graphics_clocks_mhz)
        if g.locked_mhz is None:
            return levels[-1] if g.util_pct > 0 else levels[0]
        lo, hi = g.locked_mhz
        inside = [f for f in levels if lo <= f <= hi]
        return max(inside) if inside else levels[0]

    def nvmlDeviceGetPowerUsage(handle):
        g = gpu_of(handle)
        accumulate(g)
        return int(round(g.power_mw))

    def nvmlDeviceGetTotalEnergyConsumption(handle):
        g = gpu_of(handle)
        if not g.supports_energy:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        accumulate(g)
        return int(g.energy_mj)

    def nvmlDeviceGetUtilizationRates(handle):
        return types.SimpleNamespace(gpu=gpu_of(handle).util_pct, memory=0)

    def set_power(index: int, power_mw: float) -> None:
        """Change a GPU's power draw; energy up to now is accumulated at the old power."""
        accumulate(gpus[index])
        gpus[index].power_mw = float(power_mw)

    for fn in (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetName,
               nvmlDeviceGetSupportedMemoryClocks, nvmlDeviceGetSupportedGraphicsClocks,
               nvmlDeviceSetGpuLockedClocks, nvmlDeviceResetGpuLockedClocks, nvmlDeviceGetClockInfo,
               nvmlDeviceGetPowerUsage, nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetUtilizationRates,
               set_power):
        setattr(mod, fn.__name__, fn)
    return mod
