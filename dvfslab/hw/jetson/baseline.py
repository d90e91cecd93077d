"""The board's state before a sweep: the effective devfreq range and the MAXN baseline check.

On L4T kernels 5.10 / 5.15 the devfreq ``min_freq`` / ``max_freq`` files take PM-QoS
*requests* and show the *effective* range: the requests, the frequency table and any
cooling-device cap combined, the minimum clamped to the maximum. A lower effective maximum
than the power mode allows is therefore a thermal / cooling cap (or another max request, such
as a lock), never the power mode itself: :func:`effective_range` says which.

The paper's baseline ("MAXN") is the board's default governor choosing clocks in mode MAXN.
``sudo jetson_clocks`` silently replaces that with a fixed f_max (``min_freq = max_freq``,
rail-gating off), and a mode below MAXN caps the GPU and power-gates TPCs:
:func:`baseline_check` finds each of these and names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import format_mhz
from dvfslab.hw.jetson.nvpmodel import MAXN_FIX, PowerMode
from dvfslab.hw.jetson.sysfs import SysfsIO

#: devfreq governors that hold one rate instead of following the load
FIXED_GOVERNORS = ("userspace", "performance", "powersave")
RESTORE_FIX = "run `sudo jetson_clocks --restore` (or reboot) to give the GPU back to its governor"


@dataclass(frozen=True)
class EffectiveRange:
    """What the kernel lets the GPU use now (MHz), and what lowers the maximum, if anything."""

    min_freq_mhz: float
    max_freq_mhz: float
    table_max_mhz: float
    mode_cap_mhz: float | None
    limited_by: str | None  # why the max is below the table's top, in words (None: it is not)
    cause: str | None = None  # "power_mode", "thermal_or_request" or None

    @property
    def fixed(self) -> bool:
        return self.min_freq_mhz == self.max_freq_mhz


def effective_range(io: SysfsIO, devfreq_rel: str, levels_mhz: list[float],
                    mode: PowerMode | None) -> EffectiveRange:
    """Read the effective min/max and explain a maximum below the table's top."""
    lo = io.read_int(f"{devfreq_rel}/min_freq") / 1e6
    hi = io.read_int(f"{devfreq_rel}/max_freq") / 1e6
    top = levels_mhz[-1]
    known = mode is not None and mode.limits_known
    cap = mode.gpu_max_mhz if known else None
    allowed = min(top, cap) if cap is not None else top
    why = cause = None
    if cap is not None and hi == allowed and cap < top:
        why, cause = f"power mode {mode.describe()} (GPU cap {format_mhz(cap)} MHz)", "power_mode"
    elif hi < allowed:
        source = f"the mode {mode.describe()}" if known else "the frequency table"
        why = (f"a thermal / cooling-device cap or another max_freq request (a lock): max_freq "
               f"{format_mhz(hi)} MHz is below the {format_mhz(allowed)} MHz {source} allows")
        cause = "thermal_or_request"
    return EffectiveRange(lo, hi, top, cap, why, cause)


@dataclass(frozen=True)
class BaselineCheck:
    """The MAXN-baseline conditions; ``problems`` empty means fine."""

    power_mode: PowerMode | None
    governor: str | None
    range: EffectiveRange
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def require(self, what: str = "a --backend jetson sweep") -> BaselineCheck:
        """Raise one :class:`DvfsError` naming every problem and its fix; else return self."""
        if self.problems:
            raise DvfsError(f"refusing to start {what}: " + "; ".join(self.problems))
        return self


def baseline_check(io: SysfsIO, devfreq_rel: str, levels_mhz: list[float], mode: PowerMode | None,
                   governor: str | None, *, power_mode_ok: bool = False) -> BaselineCheck:
    """MAXN (unless ``power_mode_ok``), ``min_freq < max_freq`` and a load-following governor."""
    rng = effective_range(io, devfreq_rel, levels_mhz, mode)
    problems = []
    if not power_mode_ok:
        if mode is None:
            problems.append(f"the power mode is unknown (no nvpmodel under {io.root}), so MAXN "
                            "cannot be confirmed; pass --power-mode-ok to sweep anyway")
        elif not mode.is_maxn:
            problems.append(f"power mode is {mode.describe()} ({mode.cap_text()}), not MAXN: "
                            f"{MAXN_FIX}, or pass --power-mode-ok to sweep in this mode")
    if rng.fixed:
        problems.append(f"min_freq = max_freq = {format_mhz(rng.max_freq_mhz)} MHz at "
                        f"{io.path(devfreq_rel)} (jetson_clocks applied, or a lock left behind): "
                        f"the MAXN runs would be fixed at one clock; {RESTORE_FIX}")
    if governor in FIXED_GOVERNORS:
        problems.append(f"the devfreq governor is {governor!r}, which holds one rate: the MAXN "
                        f"runs need the board's default governor (nvhost_podgov); {RESTORE_FIX}")
    return BaselineCheck(mode, governor, rng, tuple(problems))


__all__ = ["BaselineCheck", "EffectiveRange", "FIXED_GOVERNORS", "baseline_check", "effective_range"]
