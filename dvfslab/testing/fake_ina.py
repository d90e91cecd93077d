"""A fake INA3221 whose reads block like the real driver's, on a virtual clock.

The L4T / mainline ``ina3221`` hwmon driver converts every enabled channel's bus and shunt
voltage in turn (``conversion_s`` each, about 1.1 ms on L4T), so one cycle of a 3-channel chip
lasts ``3 x 2 x conversion_s``. Before returning any ``in<c>_input`` or ``curr<c>_input`` it
polls the chip's conversion-ready flag, which a cycle's end sets and the poll's own register
read clears: a read finds the flag set (and returns at once) only if a cycle ended since the
previous read of that chip cleared it; otherwise the poll sleeps one cycle and looks again. So
consecutive reads of one chip are a cycle apart and a 4-rail AGX Orin sample (8 files, two
chips) costs about 6 cycles, ~40 ms.

:class:`BlockingInaIO` is a :class:`~dvfslab.testing.fake_sysfs.FakeKernelIO` (devfreq rules
kept) whose ``read_text`` applies that rule to the INA3221 value files, moving its
:class:`VirtualClock` ``clock`` forward instead of sleeping, and counting every file read
(``reads``). Inject it like the fake kernel: ``io = BlockingInaIO(board.root)``, then
``JetsonPowerReader(io=io, clock=io.clock)``; :func:`install` also writes the
``update_interval`` (ms) the real driver reports for this conversion time. Another reader of
the same chip (tegrastats, jtop.service) is not modelled: on a board it takes flags this
reader waits for, which lengthens reads further and can make them time out.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from pathlib import Path

from dvfslab.testing.fake_sysfs import FakeBoard, FakeKernelIO

#: L4T's conversion time per measurement (bus or shunt voltage), s
CONVERSION_S = 0.0011
#: one register read over I2C at 400 kHz, s (order of magnitude; not measured on a board)
I2C_READ_S = 0.0002
_VALUE_FILE = re.compile(r"(in|curr)[1-3]_input")


class VirtualClock:
    """A clock that moves only when told to (``clock.t_s += dt`` or :meth:`advance`)."""

    def __init__(self, t_s: float = 0.0):
        self.t_s = float(t_s)

    def __call__(self) -> float:
        return self.t_s

    def advance(self, dt_s: float) -> None:
        self.t_s += dt_s


class BlockingInaIO(FakeKernelIO):
    """Fake kernel I/O whose INA3221 value reads wait for a fresh conversion (see module doc)."""

    def __init__(self, root, clock: VirtualClock | None = None, *, conversion_s: float = CONVERSION_S,
                 i2c_read_s: float = I2C_READ_S):
        super().__init__(root)
        self.clock = clock if clock is not None else VirtualClock()
        self.conversion_s, self.i2c_read_s = conversion_s, i2c_read_s
        self.reads: Counter[Path] = Counter()  # real path -> reads
        self._cleared_at: dict[Path, float] = {}  # chip dir -> when its ready flag was cleared

    @property
    def virtual_clock(self) -> VirtualClock:
        """The clock the blocking reads move (what the doctor samples on)."""
        return self.clock

    def cycle_s(self, hwmon: Path) -> float:
        """One conversion cycle of the chip at ``hwmon``: enabled channels x 2 x conversion."""
        n = 0
        for c in (1, 2, 3):
            enable = hwmon / f"in{c}_enable"
            if (hwmon / f"in{c}_input").exists() and not (enable.exists() and enable.read_text().strip() == "0"):
                n += 1
        return max(n, 1) * 2 * self.conversion_s

    def _wait_for_conversion(self, hwmon: Path) -> None:
        cycle = self.cycle_s(hwmon)
        now = self.clock.t_s
        last_end = math.floor(now / cycle + 1e-9) * cycle  # cycles end at k * cycle
        cleared = self._cleared_at.get(hwmon, -math.inf)
        ready = last_end > cleared
        self.clock.t_s = now + (0.0 if ready else cycle) + self.i2c_read_s
        self._cleared_at[hwmon] = self.clock.t_s

    def read_text(self, rel) -> str:
        path = self.path(rel)
        self.reads[Path(os.path.realpath(path))] += 1
        if _VALUE_FILE.fullmatch(path.name) and "/ina3221/" in str(path):
            self._wait_for_conversion(path.parent)
        return super().read_text(path)

    def read_int(self, rel) -> int:
        return int(self.read_text(rel).split()[0])

    def n_reads(self, path: str | os.PathLike) -> int:
        """How often ``path`` (absolute, or relative to the root; links resolved) was read."""
        return self.reads[Path(os.path.realpath(self.path(path)))]


def install(board: FakeBoard, *, conversion_s: float = CONVERSION_S,
            clock: VirtualClock | None = None) -> BlockingInaIO:
    """Write each INA3221's ``update_interval`` as the driver reports it for ``conversion_s``
    (the cycle in ms, rounded) and return a :class:`BlockingInaIO` for the board."""
    io = BlockingInaIO(board.root, clock, conversion_s=conversion_s)
    for hwmon in io.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"):
        (hwmon / "update_interval").write_text(f"{round(io.cycle_s(hwmon) * 1000)}\n")
    return io
