"""Jetson power rails (INA3221), GPU load and thermal zones, all under a ``sysfs_root``.

Rails: the mainline ``ina3221`` hwmon driver (JetPack 5 and 6) gives per channel ``c`` a
label ``in<c>_label``, the bus voltage ``in<c>_input`` (mV) and the current
``curr<c>_input`` (mA), so power mW = mV x mA / 1000; ``in7`` (sum of shunt voltages) and
unlabeled or ``NC`` channels are skipped. JetPack 4 used the ``ina3221x`` iio driver with
``rail_name_<c>`` and ``in_power<c>_input`` (mW), channels from 0. Channels whose
``in<c>_enable`` reads 0 are skipped too.

:class:`JetsonPowerReader` resolves every file once and keeps it open, reading with
``pread`` at offset 0 (sysfs regenerates the value on every read from offset 0), so one
``read()`` costs a few system calls per rail: fit for a 100 Hz-1 kHz sampler thread.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dvfslab.hw.base import PowerReadError, PowerSample
from dvfslab.hw.jetson.sysfs import SysfsIO, default_io

HWMON_GLOB = "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"
IIO_GLOB = "sys/bus/i2c/drivers/ina3221x/*/iio:device*"
#: (board family, rails whose sum is the paper's "CPU + GPU" power), first match wins
TOTAL_RAIL_MAP: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AGX Orin", ("VDD_CPU_CV", "VDD_GPU_SOC")),
    ("Orin NX / Orin Nano", ("VDD_CPU_GPU_CV", "VDD_SOC")),
    ("AGX Xavier / Xavier NX", ("CPU", "GPU")),
    ("TX2", ("VDD_SYS_CPU", "VDD_SYS_GPU")),
    ("Nano", ("POM_5V_CPU", "POM_5V_GPU")),
)
GPU_LOAD_PATHS = (
    "sys/devices/gpu.0/load",  # JetPack 4/5
    "sys/devices/platform/bus@0/17000000.gpu/load",  # JetPack 6
    "sys/devices/platform/gpu.0/load",
)
#: readings at or below this are "sensor off" markers (Orin CV zones read -256 C)
THERMAL_OFF_C = -200.0


@dataclass(frozen=True)
class RailChannel:
    """One rail: either (``volt_path``, ``curr_path``) in mV/mA or ``power_path`` in mW."""

    name: str
    volt_path: Path | None = None
    curr_path: Path | None = None
    power_path: Path | None = None


def _hwmon_channels(io: SysfsIO, hwmon: Path) -> list[RailChannel]:
    out = []
    for label in sorted(hwmon.glob("in*_label")):
        m = re.fullmatch(r"in(\d+)_label", label.name)
        if not m or m.group(1) == "7":
            continue
        c = m.group(1)
        name = io.read_text(label)
        volt, curr = hwmon / f"in{c}_input", hwmon / f"curr{c}_input"
        if not name or name.upper().startswith("NC") or not (volt.exists() and curr.exists()):
            continue
        enable = hwmon / f"in{c}_enable"  # mainline driver: reads fail with ENODATA when disabled
        if enable.exists() and io.read_text(enable) == "0":
            continue
        out.append(RailChannel(name, volt_path=volt, curr_path=curr))
    return out


def _iio_channels(io: SysfsIO, dev: Path) -> list[RailChannel]:
    out = []
    for label in sorted(dev.glob("rail_name_*")):
        c = label.name.rsplit("_", 1)[-1]
        name, power = io.read_text(label), dev / f"in_power{c}_input"
        if name and not name.upper().startswith("NC") and power.exists():
            out.append(RailChannel(name, power_path=power))
    return out


def discover_rails(io: SysfsIO) -> tuple[list[RailChannel], float | None]:
    """All INA3221 rails under the root and the sensor refresh period in s (or ``None``)."""
    channels: list[RailChannel] = []
    intervals_ms = []
    for hwmon in io.glob(HWMON_GLOB):
        channels += _hwmon_channels(io, hwmon)
        if (hwmon / "update_interval").exists():
            intervals_ms.append(io.read_int(hwmon / "update_interval"))
    for dev in io.glob(IIO_GLOB):
        channels += _iio_channels(io, dev)
    interval_s = max(intervals_ms) / 1000.0 if intervals_ms else None
    return channels, interval_s


def total_rails_for(rails) -> tuple[str, tuple[str, ...]]:
    """(board family, rails summed as "CPU + GPU"); all rails when the board is unknown."""
    present = set(rails)
    for family, total in TOTAL_RAIL_MAP:
        if set(total) <= present:
            return family, total
    return "unknown board (sum of all rails)", tuple(rails)


class _FdCache:
    """Keep sysfs files open; read each with ``pread(fd, n, 0)`` (thread-safe, no seek)."""

    def __init__(self):
        self._fds: dict[Path, int] = {}
        self._lock = threading.Lock()

    def read_int(self, path: Path) -> int:
        fd = self._fds.get(path)
        if fd is None:
            with self._lock:
                fd = self._fds.get(path)
                if fd is None:
                    fd = self._fds[path] = os.open(path, os.O_RDONLY)
        return int(os.pread(fd, 64, 0).split()[0])

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()


def find_gpu_load_path(io: SysfsIO, devfreq_rel: str | None = None) -> Path | None:
    """The GPU load file (per-mille): the devfreq node's device, then the known paths."""
    cands = ([f"{devfreq_rel}/device/load"] if devfreq_rel else []) + list(GPU_LOAD_PATHS)
    for rel in cands:
        if io.exists(rel):
            return io.path(rel)
    return None


class JetsonPowerReader:
    """:class:`~dvfslab.hw.base.PowerReader` over the INA3221 rails.

    ``read()`` also fills ``gpu_util_pct`` and ``gpu_freq_mhz`` when the GPU load and the
    devfreq ``cur_freq`` files are known (pass ``devfreq_rel``; :func:`open_backend` does).
    ``clock`` stamps the samples (``time.monotonic``, the backend's clock).
    """

    def __init__(self, sysfs_root="/", *, io: SysfsIO | None = None, devfreq_rel: str | None = None,
                 channels: list[RailChannel] | None = None, clock: Callable[[], float] = time.monotonic):
        self.io = io if io is not None else default_io(sysfs_root)
        found, self.update_interval_s = discover_rails(self.io)
        self._channels = tuple(channels if channels is not None else found)
        if not self._channels:
            raise PowerReadError(
                f"no INA3221 rails under {self.io.path(HWMON_GLOB)} or {self.io.path(IIO_GLOB)}; "
                "is the ina3221 driver loaded? Use --backend none to measure time only"
            )
        self.rails = tuple(ch.name for ch in self._channels)
        self.board_family, self.total_rails = total_rails_for(self.rails)
        self._load_path = find_gpu_load_path(self.io, devfreq_rel)
        self._freq_path = self.io.path(f"{devfreq_rel}/cur_freq") if devfreq_rel else None
        self._fds = _FdCache()
        self.clock = clock

    def _rail_mw(self, ch: RailChannel) -> float:
        if ch.power_path is not None:
            return float(self._fds.read_int(ch.power_path))
        return self._fds.read_int(ch.volt_path) * self._fds.read_int(ch.curr_path) / 1000.0

    def read(self) -> PowerSample:
        """All rails in mW, stamped with ``clock()`` taken before the first rail is read."""
        t_s = self.clock()
        power: dict[str, float] = {}
        for ch in self._channels:
            try:
                power[ch.name] = self._rail_mw(ch)
            except (OSError, ValueError, IndexError) as err:
                raise PowerReadError(f"cannot read rail {ch.name} ({ch.volt_path or ch.power_path}): {err}") from err
        util = freq = None
        try:
            if self._load_path is not None:
                util = self._fds.read_int(self._load_path) / 10.0
            if self._freq_path is not None:
                freq = self._fds.read_int(self._freq_path) / 1e6
        except (OSError, ValueError, IndexError):
            pass
        return PowerSample(t_s=t_s, power_mw=power, gpu_util_pct=util, gpu_freq_mhz=freq)

    def close(self) -> None:
        """Close the kept file descriptors (``read()`` reopens them when called again)."""
        self._fds.close()

    def __enter__(self) -> JetsonPowerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JetsonTelemetry:
    """:class:`~dvfslab.hw.base.Telemetry`: GPU load (JetPack 4-6) and thermal zones."""

    def __init__(self, sysfs_root="/", *, io: SysfsIO | None = None, devfreq_rel: str | None = None):
        self.io = io if io is not None else default_io(sysfs_root)
        self.load_path = find_gpu_load_path(self.io, devfreq_rel)

    def gpu_load_pct(self) -> float | None:
        """GPU load in percent (the sysfs value is per-mille), or ``None`` when unknown."""
        if self.load_path is None:
            return None
        try:
            return self.io.read_int(self.load_path) / 10.0
        except (OSError, ValueError, IndexError):
            return None

    def temperatures_c(self) -> dict[str, float]:
        """Temperature per thermal zone ``type`` in deg C; zones that are off are left out."""
        temps: dict[str, float] = {}
        for zone in self.io.glob("sys/class/thermal/thermal_zone*"):
            try:
                kind = self.io.read_text(zone / "type")
                temp_c = self.io.read_int(zone / "temp") / 1000.0
            except (OSError, ValueError, IndexError):  # EAGAIN on powered-off CV zones
                continue
            if temp_c > THERMAL_OFF_C:
                temps[kind] = temp_c
        return temps
