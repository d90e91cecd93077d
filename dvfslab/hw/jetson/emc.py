"""The memory clock (EMC) of a Jetson, pinned through the BPMP's debugfs clock.

The BPMP firmware owns the EMC; Linux mirrors the firmware's own debugfs tree under
``/sys/kernel/debug/bpmp/debug`` and forwards every read and write of it to the firmware
(``drivers/firmware/tegra/bpmp-debugfs.c`` of the L4T 5.10 kernel), so the files are root's
(debugfs, mode 0600 at most) and what a write does is the firmware's rule. jetson_clocks pins the
EMC by writing ``1`` to ``clk/emc/mrq_rate_locked`` and then a rate to ``clk/emc/rate``; its
``--store`` / ``--restore`` keep only ``mrq_rate_locked``, so writing back ``0`` hands the rate
to the BPMP's own DVFS again. jetson-stats reads ``rate``, ``min_rate``, ``max_rate`` (Hz) and
``mrq_rate_locked`` and caps the maximum by nvpmodel's ``/sys/kernel/nvpmodel_emc_cap/emc_iso_cap``
when it is set (> 0), as jetson_clocks does. Sources and what is unverified: docs/hardware.md,
"Other clocks: EMC and CPU".

:class:`EmcClock` is the clock itself (read, write, verify, what to save and restore); pinning
it with the GPU's saved state is :class:`dvfslab.hw.jetson.clocks.JetsonClocks`'s job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dvfslab.core import boards
from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import check_level, format_mhz
from dvfslab.hw.base import FrequencyCappedError, LockCheck, lock_status
from dvfslab.hw.jetson.bpmp import ABS_TOLERANCE_MHZ, REL_TOLERANCE
from dvfslab.hw.jetson.nvpmodel import MAXN_FIX, PowerMode
from dvfslab.hw.jetson.sysfs import SysfsIO, permission_error, write_checked

ROOT_FIX = ("run as root (`sudo`) with debugfs mounted at /sys/kernel/debug (`sudo mount -t debugfs none "
            "/sys/kernel/debug`), or pass --emc none to leave the memory clock to the board")
SOURCE = "BPMP rate"


def can_read(io: SysfsIO, rel: str) -> bool:
    """Whether ``rel`` exists and can be read: a non-root ``stat`` under /sys/kernel/debug
    raises PermissionError rather than answering False, which counts as no."""
    try:
        return io.exists(rel) and os.access(io.path(rel), os.R_OK)
    except OSError:
        return False


def read_hz(io: SysfsIO, rel: str) -> int | None:
    """An integer attribute, or None when it cannot be read."""
    try:
        return io.read_int(rel)
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class EmcState:
    """What the EMC's debugfs files say now (Hz; ``locked`` 1 = held by debugfs)."""

    rate_hz: int | None
    locked: int | None
    min_rate_hz: int | None
    max_rate_hz: int | None
    iso_cap_hz: int | None  # nvpmodel's cap (None: no file, or 0 = no cap)


class EmcClock:
    """The EMC's BPMP debugfs clock under one sysfs root (``io``)."""

    name = "emc"
    label = "EMC (memory clock)"

    def __init__(self, io: SysfsIO, family_levels_mhz: tuple[float, ...] = ()):
        self.io = io
        self.dir = boards.EMC_CLK_DIR
        self.family_levels_mhz = tuple(family_levels_mhz)

    def attr(self, name: str) -> str:
        return f"{self.dir}/{name}"

    # -- reading -----------------------------------------------------------------------------
    def support(self) -> str | None:
        """None when the EMC can be pinned here, else why not and the fix."""
        if not can_read(self.io, self.attr("rate")):
            return (f"{self.io.path(self.attr('rate'))} is not readable (the BPMP's debugfs needs root and a "
                    f"mounted debugfs): {ROOT_FIX}")
        denied = [str(self.io.path(self.attr(f))) for f in ("mrq_rate_locked", "rate") if not self.io.writable(self.attr(f))]
        if denied:
            return f"not writable by this user: {', '.join(denied)}; {ROOT_FIX}"
        if not self.levels_hz():
            return (f"the EMC rates are unknown: no {self.io.path(boards.EMC_POSSIBLE_RATES)} and no table for "
                    "this board family; pass --emc none")
        return None

    def state(self) -> EmcState:
        cap = read_hz(self.io, boards.EMC_ISO_CAP)
        return EmcState(read_hz(self.io, self.attr("rate")), read_hz(self.io, self.attr("mrq_rate_locked")),
                        read_hz(self.io, self.attr("min_rate")), read_hz(self.io, self.attr("max_rate")),
                        cap if cap else None)

    def levels_hz(self) -> list[int]:
        """The EMC rates: the BPMP's ``emc/possible_rates`` (kHz) when readable, else the board
        family's table; only those within ``min_rate`` .. ``max_rate`` when both are readable."""
        levels: list[int] = []
        if can_read(self.io, boards.EMC_POSSIBLE_RATES):
            try:
                levels = sorted({int(v) * 1000 for v in self.io.read_text(boards.EMC_POSSIBLE_RATES).split()})
            except (OSError, ValueError):
                levels = []
        if not levels:
            levels = sorted({round(f * 1e6) for f in self.family_levels_mhz})
        st = self.state()
        if st.min_rate_hz and st.max_rate_hz:
            levels = [f for f in levels if st.min_rate_hz <= f <= st.max_rate_hz] or levels
        return levels

    def levels_mhz(self) -> list[float]:
        return [f / 1e6 for f in self.levels_hz()]

    def read_mhz(self) -> float | None:
        hz = read_hz(self.io, self.attr("rate"))
        return hz / 1e6 if hz else None

    def cap_mhz(self, mode: PowerMode | None) -> tuple[float | None, str]:
        """The lowest EMC cap in force (MHz, None: none) and where it comes from, in words."""
        caps = []
        if mode is not None and mode.emc_max_mhz is not None:
            caps.append((mode.emc_max_mhz, f"EMC MAX_FREQ of power mode {mode.describe()} (from {mode.source})"))
        iso = self.state().iso_cap_hz
        if iso:
            caps.append((iso / 1e6, f"{self.io.path(boards.EMC_ISO_CAP)} = {iso}"))
        if not caps:
            return None, ""
        cap = min(c for c, _ in caps)
        return cap, "; ".join(w for c, w in caps if c == cap)

    def max_allowed_mhz(self, mode: PowerMode | None) -> float:
        """The highest EMC level at or below every cap (what ``--emc max`` pins)."""
        levels = self.levels_mhz()
        if not levels:
            raise DvfsError(self.support() or "no EMC levels")
        cap, _ = self.cap_mhz(mode)
        allowed = [f for f in levels if cap is None or f <= cap + 1e-6]
        return (allowed or levels[:1])[-1]

    # -- checking ----------------------------------------------------------------------------
    def check_level(self, freq_mhz: float) -> int:
        """The level in Hz (:class:`UnsupportedFrequencyError` naming the rates for another value:
        what the firmware does with an unsupported rate is not documented, so none is written)."""
        levels = self.levels_hz()
        if not levels:
            raise DvfsError(self.support() or "no EMC levels")
        mhz = [f / 1e6 for f in levels]
        return levels[mhz.index(check_level(freq_mhz, mhz, what="an EMC rate",
                                       hint="Pick --emc from these, or 'max'. Nothing was changed"))]

    def check_caps(self, target_hz: int, mode: PowerMode | None) -> None:
        """Refuse a rate above the power mode's EMC cap (or nvpmodel's ISO cap) before any write."""
        cap, where = self.cap_mhz(mode)
        if cap is None or target_hz <= cap * 1e6 + 0.5:
            return
        allowed = self.max_allowed_mhz(mode)
        err = FrequencyCappedError(
            f"EMC {format_mhz(target_hz / 1e6)} MHz is above the EMC cap of {format_mhz(cap)} MHz ({where}); "
            f"{MAXN_FIX} or pick --emc {format_mhz(allowed)} (or 'max'). Nothing was changed")
        err.requested_mhz, err.cap_mhz, err.power_mode = target_hz / 1e6, cap, mode
        raise err

    def require_writable(self) -> None:
        if not can_read(self.io, self.attr("rate")):
            raise DvfsError(f"cannot pin the EMC: {self.support()}")
        for name in ("mrq_rate_locked", "rate"):
            if not self.io.writable(self.attr(name)):
                raise permission_error(self.io.path(self.attr(name)), "emc")

    # -- writing -----------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """What to restore: the lock flag and the rate (the rate only matters when it was locked)."""
        st = self.state()
        return {"mrq_rate_locked": int(st.locked or 0), "rate_hz": st.rate_hz}

    def write_pin(self, target_hz: int) -> None:
        """Lock the rate under debugfs, then set it (jetson_clocks' order)."""
        write_checked(self.io, self.attr("mrq_rate_locked"), 1, "emc")
        write_checked(self.io, self.attr("rate"), int(target_hz), "emc")

    def restore(self, saved: dict) -> None:
        """Put back what :meth:`snapshot` saved: a rate that was locked is set again while still
        locked; an unlocked EMC is handed back to the BPMP's DVFS (``mrq_rate_locked`` 0)."""
        if int(saved.get("mrq_rate_locked") or 0) and saved.get("rate_hz"):
            write_checked(self.io, self.attr("mrq_rate_locked"), 1, "emc")
            write_checked(self.io, self.attr("rate"), int(saved["rate_hz"]), "emc")
        else:
            write_checked(self.io, self.attr("mrq_rate_locked"), 0, "emc")

    def verify(self, target_hz: int) -> LockCheck:
        """The BPMP's ``rate`` read back against the request (the one :func:`lock_status` rule)."""
        requested = target_hz / 1e6
        st = self.state()
        measured = st.rate_hz / 1e6 if st.rate_hz else None
        status = lock_status(requested, measured, max(ABS_TOLERANCE_MHZ, REL_TOLERANCE * requested))
        if measured is not None and st.locked != 1:
            status = "not-locked"
        where = self.io.path(self.attr("rate"))
        if measured is None:
            why = f"unverified: {where} is not readable"
        elif status == "verified":
            why = f"EMC rate reads {measured:g} MHz (locked)"
        elif st.locked != 1:
            why = f"mrq_rate_locked reads {st.locked} after writing 1: the BPMP did not take the lock"
        else:
            why = (f"EMC rate reads {measured:g} MHz at {where} although {requested:g} MHz was requested "
                   "(the BPMP rounded or capped it)")
        return LockCheck(requested, measured, status, why, source=SOURCE)


__all__ = ["EmcClock", "EmcState", "can_read", "read_hz"]
