"""GPU frequency levels: the one rule that maps a requested frequency to a board level.

Every part of dvfslab that turns a frequency into a level (governors, the fine-tuning
callback, the online profiler, slowdown limits, replay evaluation, the sweep) calls
:func:`snap_mhz`, so a decision is run and evaluated at the same level.

Tie rule: a request exactly half-way between two levels goes to the *higher* level. This is
the rule of the Linux devfreq core, which serves a target frequency with the lowest OPP at or
above it (``devfreq_recommended_opp`` -> ``dev_pm_opp_find_freq_ceil``), and it never makes
a run slower than what was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from dvfslab.core.errors import DvfsError

#: two frequencies closer than this (MHz) are the same level (1300.5 vs 1300 in old tables)
SAME_LEVEL_MHZ = 0.5


class UnsupportedFrequencyError(DvfsError, ValueError):
    """The requested frequency is not one of the board's levels."""

    def __init__(self, freq_mhz: float, levels_mhz: Sequence[float], hint: str = "", what: str = "a GPU level"):
        self.freq_mhz = float(freq_mhz)
        self.levels_mhz = tuple(float(f) for f in levels_mhz)
        levels = ", ".join(format_mhz(f) for f in self.levels_mhz)
        msg = f"{format_mhz(freq_mhz)} MHz is not {what} of this board; levels (MHz): {levels}"
        super().__init__(msg + (f". {hint}" if hint else ""))


def format_mhz(freq_mhz: float) -> str:
    """``612.0 -> '612'``, ``1300.5 -> '1300.5'``."""
    f = float(freq_mhz)
    return str(int(f)) if f.is_integer() else f"{f:g}"


def snap_mhz(freq_mhz: float, levels_mhz: Sequence[float]) -> float:
    """The level nearest to ``freq_mhz``; a tie goes to the higher level (see module doc)."""
    if not levels_mhz:
        raise UnsupportedFrequencyError(freq_mhz, levels_mhz, "the board reports no levels")
    f = float(freq_mhz)
    # the key orders by distance, then prefers the higher level on equal distance
    return float(min(levels_mhz, key=lambda level: (abs(float(level) - f), -float(level))))


def check_level(freq_mhz: float, levels_mhz: Sequence[float], *, nearest: bool = False,
                hint: str = "Pick one of these (or use --nearest).", what: str = "a GPU level") -> float:
    """Return the level for a request: exact match (within 0.5 MHz), or snapped if ``nearest``;
    ``what`` and ``hint`` word the error for another clock (``"an EMC rate"``)."""
    for f in levels_mhz:
        if abs(float(f) - float(freq_mhz)) < SAME_LEVEL_MHZ:
            return float(f)
    if nearest:
        return snap_mhz(freq_mhz, levels_mhz)
    raise UnsupportedFrequencyError(freq_mhz, levels_mhz, hint, what)
