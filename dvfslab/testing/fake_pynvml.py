"""A fake ``pynvml`` (nvidia-ml-py) module for tests without an NVIDIA driver.

``make_module([FakeGpu(...)], clock=...)`` returns a module object to put in
``sys.modules["pynvml"]``. It implements the calls dvfslab uses with the real library's names,
units and error codes, and the behaviours the NVML API reference documents:

* ``nvmlDeviceGetPowerUsage`` (mW) is the power averaged over the trailing second on Ampere
  (except GA100: A100 / A30 / A800) and newer, and the instantaneous power on GA100 and older
  (``FakeGpu.usage_average_s`` overrides the rule);
* ``nvmlDeviceGetFieldValues`` answers ``NVML_FI_DEV_POWER_INSTANT`` / ``..._AVERAGE`` (mW,
  ``value.uiVal``) with a per-field ``nvmlReturn``: NOT_SUPPORTED for an unknown field, a scope
  other than the GPU, or when ``supports_instant_field`` is False (drivers before the field);
* ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the fake "driver" loaded) integrates the
  power over the injected clock, refreshed every ``energy_update_s`` when that is set; Volta
  and newer only (NOT_SUPPORTED before, as for locked clocks);
* locked clocks may not be reached: ``clock_cap_mhz`` (a power or thermal cap) holds the
  graphics clock below the lock and sets ``cap_reason`` in the clocks-event reasons;
  ``idle_drops_clock`` makes an idle GPU (``util_pct == 0``) report the lowest level with the
  GPU-idle reason, as consumer boards do;
* a power limit (``nvmlDeviceSetPowerManagementLimit``, mW, within the constraints, root only)
  caps the power drawn: the GPU draws ``min(demand, limit)``;
* NOT_SUPPORTED for every query on a Tegra GPU (``tegra=True``), NO_PERMISSION for clock locks
  without root (``can_lock=False``), UNINITIALIZED before ``nvmlInit``.

Time comes only from ``clock`` (pass a virtual one in tests). The power is piecewise constant:
``set_power(index, mw)`` changes it at ``clock()``.
"""

from __future__ import annotations

import re
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

NVML_SUCCESS = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_DEVICE_ARCH_PASCAL = 4
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_TURING = 6
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_ADA = 8
NVML_DEVICE_ARCH_HOPPER = 9
NVML_DEVICE_ARCH_BLACKWELL = 10
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_POWER_SCOPE_GPU = 0
NVML_POWER_SCOPE_MODULE = 1
NVML_VALUE_TYPE_UNSIGNED_INT = 1
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
_MESSAGES = {1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
             9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 15: "GPU is lost", 999: "Unknown Error"}
GA100_NAME = re.compile(r"\bA(100|30|800)\b")


class NVMLError(Exception):
    """Like ``pynvml.NVMLError``: ``.value`` is the NVML error code."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


@dataclass
class FakeGpu:
    """One fake device. Graphics clocks are per memory clock, in MHz; power in mW."""

    name: str = "NVIDIA A100-SXM4-40GB"
    arch: int = NVML_DEVICE_ARCH_AMPERE
    memory_clocks_mhz: tuple[int, ...] = (1215,)
    graphics_clocks_mhz: tuple[int, ...] = tuple(range(1410, 195, -15))
    power_mw: float = 60000.0
    util_pct: int = 0
    tegra: bool = False  # every query NOT_SUPPORTED, as NVML answers on Jetson boards
    supports_energy: bool | None = None  # None: Volta and newer
    supports_instant_field: bool = True
    usage_average_s: float | None = -1.0  # -1: the documented rule (1 s on Ampere non-GA100+)
    energy_update_s: float | None = None  # None: the counter follows the power exactly
    can_lock: bool = True  # False: NO_PERMISSION like a non-root user
    locked_mhz: tuple[int, int] | None = None
    clock_cap_mhz: int | None = None  # power / thermal cap the lock cannot beat
    cap_reason: int = nvmlClocksEventReasonSwPowerCap
    idle_drops_clock: bool = False
    #: power limit (mW): the constraints, the default, and the one set (None: the default); the
    #: GPU draws min(demand, limit) — the demand is what ``set_power`` / ``power_mw`` ask for
    limit_constraints_mw: tuple[int, int] = (100000, 400000)
    default_limit_mw: int = 400000
    limit_mw: int | None = None
    _power: list[tuple[float, float]] = field(default_factory=list, repr=False)  # (t_s, mW) steps

    def __post_init__(self) -> None:
        if self.supports_energy is None:
            self.supports_energy = self.arch >= NVML_DEVICE_ARCH_VOLTA
        if self.usage_average_s == -1.0:
            newer = self.arch >= NVML_DEVICE_ARCH_AMPERE and not GA100_NAME.search(self.name)
            self.usage_average_s = 1.0 if newer else None

    # -- the power signal (piecewise constant) -----------------------------------------------
    def power_at(self, t_s: float) -> float:
        mw = self._power[0][1]
        for t, p in self._power:
            if t > t_s:
                break
            mw = p
        return mw

    def energy_between_mj(self, a_s: float, b_s: float) -> float:
        """Integral of the power over ``[a_s, b_s]`` (mW x s = mJ); before the first step the
        first power is held."""
        steps = self._power
        total = 0.0
        for i, (t, p) in enumerate(steps):
            lo = a_s if i == 0 else max(a_s, t)
            hi = b_s if i + 1 == len(steps) else min(b_s, steps[i + 1][0])
            if hi > lo:
                total += p * (hi - lo)
        return total


class _Handle:
    def __init__(self, gpu: FakeGpu):
        self.gpu = gpu


def _field(field_id: int, scope: int, ret: int, value_mw: int, t_s: float) -> types.SimpleNamespace:
    value = types.SimpleNamespace(uiVal=value_mw, ulVal=value_mw, ullVal=value_mw, siVal=value_mw,
                                  sllVal=value_mw, dVal=float(value_mw))
    return types.SimpleNamespace(fieldId=field_id, scopeId=scope, timestamp=int(t_s * 1e6), latencyUsec=0,
                                 valueType=NVML_VALUE_TYPE_UNSIGNED_INT, nvmlReturn=ret, value=value)


class _FakeNvml:
    """The library's state (init count, devices, time source); its methods are the NVML calls."""

    API = ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
           "nvmlDeviceGetArchitecture", "nvmlDeviceGetSupportedMemoryClocks",
           "nvmlDeviceGetSupportedGraphicsClocks", "nvmlDeviceSetGpuLockedClocks",
           "nvmlDeviceResetGpuLockedClocks", "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons",
           "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetFieldValues",
           "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates", "set_power",
           "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetPowerManagementDefaultLimit",
           "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceSetPowerManagementLimit")

    def __init__(self, gpus: list[FakeGpu], init_error: int | None, clock: Callable[[], float]):
        self.gpus, self.init_error, self.clock, self.init_count = gpus, init_error, clock, 0
        self.t_load_s = clock()  # the "driver load": the energy counter starts here
        for g in gpus:
            g._power = [(self.t_load_s, float(g.power_mw))]

    # -- helpers ---------------------------------------------------------------------------
    def _need_init(self) -> None:
        if not self.init_count:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: _Handle, *, tegra_ok: bool = False) -> FakeGpu:
        self._need_init()
        if handle.gpu.tegra and not tegra_ok:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return handle.gpu

    def _lockable(self, handle: _Handle) -> FakeGpu:
        g = self._gpu(handle)
        if g.arch < NVML_DEVICE_ARCH_VOLTA:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not g.can_lock:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        return g

    @staticmethod
    def _wanted_mhz(g: FakeGpu, levels: list[int]) -> int:
        if g.locked_mhz is None:
            return levels[-1] if g.util_pct > 0 else levels[0]
        lo, hi = g.locked_mhz
        inside = [f for f in levels if lo <= f <= hi]
        return max(inside) if inside else levels[0]

    def _graphics_mhz(self, g: FakeGpu) -> tuple[int, int]:
        """(graphics clock MHz, clocks-event reasons bitmask)."""
        levels = sorted(g.graphics_clocks_mhz)
        if g.util_pct == 0 and (g.locked_mhz is None or g.idle_drops_clock):
            return levels[0], nvmlClocksEventReasonGpuIdle
        want = self._wanted_mhz(g, levels)
        if g.clock_cap_mhz is not None and want > g.clock_cap_mhz:
            below = [f for f in levels if f <= g.clock_cap_mhz]
            return (max(below) if below else levels[0]), g.cap_reason
        return want, 0

    # -- library ---------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.init_count += 1

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

    def nvmlDeviceGetArchitecture(self, handle) -> int:
        return self._gpu(handle, tegra_ok=True).arch

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
        return self._graphics_mhz(g)[0]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle) -> int:
        return self._graphics_mhz(self._gpu(handle))[1]

    nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons

    # -- power -----------------------------------------------------------------------------
    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        g, now = self._gpu(handle), self.clock()
        if g.usage_average_s:
            return int(round(g.energy_between_mj(now - g.usage_average_s, now) / g.usage_average_s))
        return int(round(g.power_at(now)))

    def nvmlDeviceGetFieldValues(self, handle, fieldIds) -> list[types.SimpleNamespace]:
        g, now = self._gpu(handle), self.clock()
        out = []
        for fid in fieldIds:
            fid, scope = fid if isinstance(fid, tuple) else (fid, NVML_POWER_SCOPE_GPU)
            ok = g.supports_instant_field and scope == NVML_POWER_SCOPE_GPU
            if ok and fid == NVML_FI_DEV_POWER_INSTANT:
                out.append(_field(fid, scope, NVML_SUCCESS, int(round(g.power_at(now))), now))
            elif ok and fid == NVML_FI_DEV_POWER_AVERAGE:
                avg = g.energy_between_mj(now - 1.0, now)
                out.append(_field(fid, scope, NVML_SUCCESS, int(round(avg)), now))
            else:
                out.append(_field(fid, scope, NVML_ERROR_NOT_SUPPORTED, 0, now))
        return out

    def nvmlDeviceGetTotalEnergyConsumption(self, handle) -> int:
        g = self._gpu(handle)
        if not g.supports_energy:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        now = self.clock()
        if g.energy_update_s:  # the counter holds its last refresh
            now = self.t_load_s + (now - self.t_load_s) // g.energy_update_s * g.energy_update_s
        return int(g.energy_between_mj(self.t_load_s, now))

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=self._gpu(handle).util_pct, memory=0)

    def set_power(self, index: int, power_mw: float) -> None:
        """Change a GPU's power demand from ``clock()`` on (it draws at most its power limit)."""
        g = self.gpus[index]
        g.power_mw = float(power_mw)
        g._power.append((self.clock(), min(float(power_mw), float(g.limit_mw or g.default_limit_mw))))

    # -- power limit (NVML API reference: nvmlDeviceSetPowerManagementLimit, Kepler and newer,
    #    root; INVALID_ARGUMENT outside nvmlDeviceGetPowerManagementLimitConstraints) ---------
    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle) -> tuple[int, int]:
        return tuple(self._gpu(handle).limit_constraints_mw)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle) -> int:
        return int(self._gpu(handle).default_limit_mw)

    def nvmlDeviceGetPowerManagementLimit(self, handle) -> int:
        g = self._gpu(handle)
        return int(g.limit_mw if g.limit_mw is not None else g.default_limit_mw)

    def nvmlDeviceSetPowerManagementLimit(self, handle, limit) -> None:
        g = self._gpu(handle)
        if not g.can_lock:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        lo, hi = g.limit_constraints_mw
        if not lo <= int(limit) <= hi:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g.limit_mw = int(limit)
        g._power.append((self.clock(), min(float(g.power_mw), float(limit))))


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
        if k.startswith(("NVML_", "nvmlClocksEventReason")):
            setattr(mod, k, v)
    mod.NVMLError = NVMLError
    mod.fake_gpus = lib.gpus
    for name in _FakeNvml.API:
        setattr(mod, name, getattr(lib, name))
    return mod
