"""Jetson power rails (INA3221, Thor's INA238), GPU load and thermal zones, under a ``sysfs_root``.

Rails: the mainline ``ina3221`` hwmon driver (JetPack 5 and 6) gives per channel ``c`` a
label ``in<c>_label``, the bus voltage ``in<c>_input`` (mV) and the current
``curr<c>_input`` (mA), so power mW = mV x mA / 1000; ``in7`` (sum of shunt voltages) and
unlabeled or ``NC`` channels are skipped. JetPack 4 used the ``ina3221x`` iio driver with
``rail_name_<c>`` and ``in_power<c>_input`` (mW), channels from 0. Channels whose
``in<c>_enable`` reads 0 are skipped too. Thor (JetPack 7) has INA238 chips, one rail each
(:func:`dvfslab.hw.jetson.ina.ina238_channels`; ``power1_input`` in uW).

INA3221 reads block until the chip finishes a conversion cycle (see :mod:`.ina`), so
:meth:`JetsonPowerReader.read` stamps a sample at the midpoint of its reads and records what
the reads cost (``last_read_cost_s``). Reading the GPU ``load`` makes nvgpu wake the GPU to
refresh it, so the load is polled at most once per ``load_period_s`` (1 s) and held between.
:class:`JetsonPowerReader` resolves every file once and keeps it open, reading with ``pread``
at offset 0 (sysfs regenerates the value on every read from offset 0); an injected I/O class
that overrides ``read_text`` (a fake kernel that models the chip) is read through instead.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dvfslab.core import boards
from dvfslab.hw.base import PowerReader, PowerReadError, PowerSample, Telemetry
from dvfslab.hw.jetson.board import board_family, board_model, support_note
from dvfslab.hw.jetson.ina import (
    HWMON_GLOB,
    INA238_GLOB,
    ina238_channels,
    other_sensor_readers,
    sensor_update_period_s,
)
from dvfslab.hw.jetson.sysfs import SysfsIO, default_io

log = logging.getLogger(__name__)

IIO_GLOB = "sys/bus/i2c/drivers/ina3221x/*/iio:device*"
#: nvgpu refreshes the load (waking the GPU) on every read of ``load``: poll it this seldom
LOAD_PERIOD_S = 1.0
#: readings at or below this are "sensor off" markers (Orin CV zones read -256 C)
THERMAL_OFF_C = -200.0


@dataclass(frozen=True)
class RailChannel:
    """One rail: either (``volt_path``, ``curr_path``) in mV/mA or ``power_path`` (in mW times
    ``power_to_mw``: 1 for the iio ``in_power`` files, 0.001 for INA238 ``power1_input`` uW)."""

    name: str
    volt_path: Path | None = None
    curr_path: Path | None = None
    power_path: Path | None = None
    power_to_mw: float = 1.0


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
    """All INA3221 / INA238 rails under the root and the INA3221 conversion cycle in s (read
    from ``update_interval`` or estimated, :func:`~dvfslab.hw.jetson.ina.sensor_update_period_s`)."""
    channels: list[RailChannel] = []
    for hwmon in io.glob(HWMON_GLOB):
        channels += _hwmon_channels(io, hwmon)
    for dev in io.glob(IIO_GLOB):
        channels += _iio_channels(io, dev)
    for ch in ina238_channels(io):
        channels.append(RailChannel(ch.name, volt_path=ch.volt_path, curr_path=ch.curr_path,
                                    power_path=ch.power_path, power_to_mw=0.001))
    return channels, sensor_update_period_s(io)


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


def _int_reader(io: SysfsIO) -> tuple[Callable[[Path], int], Callable[[], None]]:
    """(read_int, close): kept file descriptors for the plain I/O; the I/O's own ``read_int``
    when the injected class changes how files are read (a fake chip that blocks)."""
    if type(io).read_text is SysfsIO.read_text and type(io).read_int is SysfsIO.read_int:
        fds = _FdCache()
        return fds.read_int, fds.close
    return io.read_int, lambda: None


def find_gpu_load_path(io: SysfsIO, devfreq_rel: str | None = None) -> Path | None:
    """The GPU load file (per-mille): the devfreq node's device, then the families' known paths
    (:func:`dvfslab.core.boards.gpu_load_paths`)."""
    cands = ([f"{devfreq_rel}/device/load"] if devfreq_rel else []) + list(boards.gpu_load_paths())
    for rel in cands:
        if io.exists(rel):
            return io.path(rel)
    return None


class JetsonPowerReader(PowerReader):
    """:class:`~dvfslab.hw.base.PowerReader` over the INA3221 (or INA238) rails.

    ``read()`` also fills ``gpu_util_pct`` (polled at most every ``load_period_s``, held
    between) and ``gpu_freq_mhz`` when the GPU load and the devfreq ``cur_freq`` files are
    known (pass ``devfreq_rel``; :func:`open_backend` does). ``clock`` stamps the samples
    (``time.monotonic``, the backend's clock). ``other_readers`` lists processes that read the
    same chips (a warning is logged when there are any); ``support_note`` says when the board
    is untested.
    """

    def __init__(self, sysfs_root="/", *, io: SysfsIO | None = None, devfreq_rel: str | None = None,
                 channels: list[RailChannel] | None = None, clock: Callable[[], float] = time.monotonic,
                 load_period_s: float = LOAD_PERIOD_S):
        self.io = io if io is not None else default_io(sysfs_root)
        found, self.update_interval_s = discover_rails(self.io)
        self._channels = tuple(channels if channels is not None else found)
        if not self._channels:
            raise PowerReadError(
                f"no INA3221 rails under {self.io.path(HWMON_GLOB)} or {self.io.path(IIO_GLOB)} "
                f"(nor INA238 under {self.io.path(INA238_GLOB)}); is the ina3221 driver loaded? "
                "Use --backend none to measure time only"
            )
        self.rails = tuple(ch.name for ch in self._channels)
        self.model = board_model(self.io)
        self.board_family, self.total_rails = board_family(self.rails, self.model)
        self.support_note = support_note(self.board_family)
        self._load_path = find_gpu_load_path(self.io, devfreq_rel)
        self._freq_path = self.io.path(f"{devfreq_rel}/cur_freq") if devfreq_rel else None
        self._read_int, self._close = _int_reader(self.io)
        self.clock = clock
        self.load_period_s = float(load_period_s)
        self._load_t_s: float | None = None
        self._load_pct: float | None = None
        self.last_read_cost_s: float | None = None
        self.other_readers = other_sensor_readers(self.io)
        if self.other_readers:
            log.warning("other processes read the power monitors too (%s): INA3221 reads wait for "
                        "a fresh conversion and may time out; stop them for a sweep "
                        "(sudo systemctl stop jtop.service; kill tegrastats)", ", ".join(self.other_readers))

    def _rail_mw(self, ch: RailChannel) -> float:
        if ch.power_path is not None:
            return self._read_int(ch.power_path) * ch.power_to_mw
        return self._read_int(ch.volt_path) * self._read_int(ch.curr_path) / 1000.0

    def _rails_mw(self) -> dict[str, float]:
        power: dict[str, float] = {}
        for ch in self._channels:
            try:
                power[ch.name] = self._rail_mw(ch)
            except (OSError, ValueError, IndexError) as err:
                raise PowerReadError(f"cannot read rail {ch.name} ({ch.volt_path or ch.power_path}): {err}") from err
        return power

    def _load(self, now_s: float) -> float | None:
        """The GPU load, read only when ``load_period_s`` has passed since the last read."""
        if self._load_path is None:
            return None
        if self._load_t_s is None or now_s - self._load_t_s >= self.load_period_s:
            self._load_t_s = now_s
            try:
                self._load_pct = self._read_int(self._load_path) / 10.0
            except (OSError, ValueError, IndexError):
                self._load_pct = None
        return self._load_pct

    def read(self) -> PowerSample:
        """All rails in mW, stamped at the midpoint of the rail reads (they block on a board)."""
        t0 = self.clock()
        power = self._rails_mw()
        t1 = self.clock()
        self.last_read_cost_s = t1 - t0
        freq = None
        try:
            if self._freq_path is not None:
                freq = self._read_int(self._freq_path) / 1e6
        except (OSError, ValueError, IndexError):
            pass
        return PowerSample(t_s=0.5 * (t0 + t1), power_mw=power, gpu_util_pct=self._load(t1),
                           gpu_freq_mhz=freq)

    def close(self) -> None:
        """Close the kept file descriptors (``read()`` reopens them when called again)."""
        self._close()

    def __enter__(self) -> JetsonPowerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JetsonTelemetry(Telemetry):
    """:class:`~dvfslab.hw.base.Telemetry`: GPU load (JetPack 4-6) and thermal zones.

    Each read of the load file wakes the GPU: with ``load_period_s`` (e.g. :data:`LOAD_PERIOD_S`)
    it is read at most that often (by ``clock``) and calls in between return the last value.
    The default 0 reads on every call; callers poll at their own period (the harness at
    ``poll_period_s``, the live panel at its refresh), which should be >= 1 s on a board.
    """

    def __init__(self, sysfs_root="/", *, io: SysfsIO | None = None, devfreq_rel: str | None = None,
                 clock: Callable[[], float] = time.monotonic, load_period_s: float = 0.0):
        self.io = io if io is not None else default_io(sysfs_root)
        self.load_path = find_gpu_load_path(self.io, devfreq_rel)
        self.clock, self.load_period_s = clock, float(load_period_s)
        self._load_t_s: float | None = None
        self._load_pct: float | None = None

    def gpu_load_pct(self) -> float | None:
        """GPU load in percent (the sysfs value is per-mille), or ``None`` when unknown."""
        if self.load_path is None:
            return None
        now = self.clock()
        if self._load_t_s is not None and now - self._load_t_s < self.load_period_s:
            return self._load_pct
        self._load_t_s = now
        try:
            self._load_pct = self.io.read_int(self.load_path) / 10.0
        except (OSError, ValueError, IndexError):
            self._load_pct = None
        return self._load_pct

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
