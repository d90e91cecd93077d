"""The Jetson power monitors themselves: how fast they convert, who else reads them.

* INA3221 (JetPack 4-6). The hwmon driver programs a bus-voltage and a shunt-voltage conversion
  per enabled channel (about 1.1 ms each on L4T), so one full cycle of a 3-channel chip takes
  ``3 x 2 x 1.1 ms = 6.6 ms``; it reports that cycle as ``update_interval`` (ms). Each
  ``in*_input`` / ``curr*_input`` read first waits for the conversion-ready flag, so a read
  blocks for up to one cycle and a 4-rail sample (8 files) can take tens of ms.
  :func:`sensor_update_period_s` gives the cycle (read, or estimated from the channel count).
* INA238 (Jetson Thor, JetPack 7 / L4T R38-R39): one channel per chip under the ``ina238``
  hwmon driver (``in1_input`` mV, ``curr1_input`` mA, ``power1_input`` uW). Unverified on a
  board: :func:`ina238_channels` follows the mainline hwmon ABI.
* Other readers: ``tegrastats`` and the ``jtop.service`` daemon poll the same chips; two
  readers share the conversion cycle and can make reads time out. :func:`other_sensor_readers`
  lists them from ``/proc`` (under the sysfs root, so tests use a fake tree).

Which family a board is, and which of its rails make "CPU + GPU", is :mod:`.board`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dvfslab.hw.jetson.sysfs import SysfsIO

#: L4T's INA3221 conversion time per measurement (bus or shunt), s (unverified per release)
INA3221_CONVERSION_S = 0.0011
INA238_GLOB = "sys/bus/i2c/drivers/ina238/*/hwmon/hwmon*"
HWMON_GLOB = "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"
#: process names (``/proc/<pid>/comm``) and command-line words of other sensor readers
READER_COMMS = ("tegrastats",)
READER_CMDLINE = ("jtop.service", "jtop/service", "jtop --force", "jtop.core")


def _enabled_channels(io: SysfsIO, hwmon: Path) -> int:
    """Channels 1-3 the chip converts (labelled or not), unless ``in<c>_enable`` reads 0."""
    n = 0
    for c in (1, 2, 3):
        enable = hwmon / f"in{c}_enable"
        if (hwmon / f"in{c}_input").exists() and not (enable.exists() and io.read_text(enable) == "0"):
            n += 1
    return n or 3


def sensor_update_period_s(io: SysfsIO) -> float | None:
    """The slowest INA3221's conversion cycle in s: its ``update_interval`` (ms) when the driver
    exposes it, else ``channels x 2 x`` :data:`INA3221_CONVERSION_S` (estimated); ``None``
    without an ``ina3221`` hwmon chip (JetPack 4 iio, Thor)."""
    periods = []
    for hwmon in io.glob(HWMON_GLOB):
        if (hwmon / "update_interval").exists():
            periods.append(io.read_int(hwmon / "update_interval") / 1000.0)
        else:
            periods.append(_enabled_channels(io, hwmon) * 2 * INA3221_CONVERSION_S)
    return max(periods) if periods else None


def other_sensor_readers(io: SysfsIO) -> list[str]:
    """Other processes that read the power monitors (``tegrastats``, ``jtop.service``), as
    ``"name (pid N)"``, from ``<root>/proc``; a ``run/jtop.sock`` socket counts as jtop."""
    found = []
    for comm in io.glob("proc/[0-9]*/comm"):
        pid = comm.parent.name
        try:
            name = io.read_text(comm)
            cmdline = (comm.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue  # the process ended while we looked
        if name in READER_COMMS:
            found.append(f"{name} (pid {pid})")
        elif any(w in cmdline for w in READER_CMDLINE):
            found.append(f"jtop.service (pid {pid})")
    if not any(f.startswith("jtop") for f in found) and io.exists("run/jtop.sock"):
        found.append("jtop.service (socket /run/jtop.sock)")
    return found


@dataclass(frozen=True)
class Ina238Channel:
    """One INA238 rail (Thor): its name and files (``power_path`` in uW when present)."""

    name: str
    volt_path: Path
    curr_path: Path
    power_path: Path | None


def ina238_channels(io: SysfsIO) -> list[Ina238Channel]:
    """INA238 rails: name from ``in1_label``, the hwmon ``label`` or the device-tree ``label``,
    else ``ina238-<bus>-<addr>`` (unverified on a Thor: the mainline ABI)."""
    out = []
    for hwmon in io.glob(INA238_GLOB):
        volt, curr, power = hwmon / "in1_input", hwmon / "curr1_input", hwmon / "power1_input"
        if not (volt.exists() and curr.exists()):
            continue
        name = None
        for cand in (hwmon / "in1_label", hwmon / "label", hwmon.parent.parent / "of_node" / "label"):
            if cand.exists():
                name = io.read_text(cand)
                break
        name = name or "ina238-" + hwmon.parent.parent.name
        if re.match(r"(?i)^nc\b", name):
            continue
        out.append(Ina238Channel(name, volt, curr, power if power.exists() else None))
    return out
