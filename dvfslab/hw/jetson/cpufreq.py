"""The CPU clusters of a Jetson, pinned through cpufreq, one policy per cluster.

Linux's cpufreq core (``Documentation/admin-guide/pm/cpufreq.rst``, ``drivers/cpufreq/cpufreq.c``
and ``freq_table.c`` of the 5.10 / 5.15 kernels L4T runs) keeps one policy per group of CPUs
sharing a clock, ``/sys/devices/system/cpu/cpufreq/policy<N>``: ``related_cpus`` (online and
offline), ``affected_cpus`` (online), ``scaling_available_frequencies`` (kHz),
``scaling_min_freq`` / ``scaling_max_freq`` (writes are frequency-QoS *requests*; the files show
the effective limits: clamped to ``cpuinfo_min_freq`` .. ``cpuinfo_max_freq``, the minimum
lowered to the maximum when they cross, and the maximum raised to the next table frequency when
no frequency lies between them), ``scaling_governor``, ``scaling_cur_freq`` (the frequency last
set) and ``cpuinfo_cur_freq`` (read from the hardware; root only). A policy whose CPUs are all
offline stays in sysfs but is *inactive*: every read and write of its attributes fails with
EBUSY. nvpmodel sets a power mode's CPU limits through the same ``scaling_max_freq`` /
``scaling_min_freq`` files and takes cores offline through ``cpu<N>/online``, so, as for the
GPU, the kernel keeps no memory of the mode's cap: dvfslab checks it before writing.

:class:`CpuClusters` pins every active policy at one level (min = max, the governor left as it
is, as jetson_clocks does) and reads it back; pinning with the GPU's saved state is
:class:`dvfslab.hw.jetson.clocks.JetsonClocks`'s job. Sources: docs/hardware.md, "Other clocks".
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import check_level, format_mhz
from dvfslab.hw.base import FrequencyCappedError, LockCheck, lock_status
from dvfslab.hw.jetson.bpmp import ABS_TOLERANCE_MHZ, REL_TOLERANCE
from dvfslab.hw.jetson.nvpmodel import MAXN_FIX, PowerMode
from dvfslab.hw.jetson.sysfs import SysfsIO, permission_error, plan_range_writes, write_checked

CPU_DIR = "sys/devices/system/cpu"
CPUFREQ_DIR = f"{CPU_DIR}/cpufreq"
SOURCE = "cpuinfo_cur_freq"
ROOT_FIX = "run as root (`sudo`), or pass --cpu none to leave the CPU clusters to their governor"


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0-3 8"`` / ``"0-3,8"`` / ``"0 1 2"`` -> the CPU numbers (empty text: none)."""
    out: list[int] = []
    for part in text.replace(",", " ").split():
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class CpufreqPolicy:
    """One cpufreq policy: ``rel`` its directory under the root, ``related`` its CPUs, ``active``
    False when all of them are offline (then its attributes answer EBUSY)."""

    name: str
    rel: str
    related: tuple[int, ...]
    online: tuple[int, ...]

    @property
    def active(self) -> bool:
        return bool(self.online)

    def attr(self, name: str) -> str:
        return f"{self.rel}/{name}"

    def describe(self) -> str:
        cpus = f"cpu{self.related[0]}-{self.related[-1]}" if self.related else "no cpus"
        return f"{self.name} ({cpus})"


def online_cpus(io: SysfsIO) -> tuple[int, ...]:
    """The online CPUs (``cpu/online``; else each ``cpu<N>/online``, a CPU without the file being online)."""
    if io.exists(f"{CPU_DIR}/online"):
        try:
            return parse_cpu_list(io.read_text(f"{CPU_DIR}/online"))
        except (OSError, ValueError):
            pass
    out = []
    for d in io.glob(f"{CPU_DIR}/cpu[0-9]*"):
        num = int(d.name[3:])
        try:
            up = io.read_int(d / "online") if (d / "online").exists() else 1
        except (OSError, ValueError, IndexError):
            up = 1
        out.append(num) if up else None
    return tuple(sorted(out))


def find_policies(io: SysfsIO) -> list[CpufreqPolicy]:
    """Every cpufreq policy under the root, by first CPU, with the CPUs now online."""
    online = set(online_cpus(io))
    out = []
    for d in io.glob(f"{CPUFREQ_DIR}/policy[0-9]*"):
        rel = str(d.relative_to(io.root))
        try:
            related = parse_cpu_list(io.read_text(f"{rel}/related_cpus"))
        except OSError:
            related = (int(d.name[6:]),)
        out.append(CpufreqPolicy(d.name, rel, related, tuple(c for c in related if c in online)))
    return sorted(out, key=lambda p: p.related[:1] or (int(p.name[6:]),))


class CpuClusters:
    """The cpufreq policies under one sysfs root (``io``)."""

    name = "cpu"
    label = "CPU clusters (cpufreq)"

    def __init__(self, io: SysfsIO):
        self.io = io

    # -- reading -----------------------------------------------------------------------------
    def policies(self) -> list[CpufreqPolicy]:
        return find_policies(self.io)

    def active(self) -> list[CpufreqPolicy]:
        return [p for p in self.policies() if p.active]

    def support(self) -> str | None:
        """None when the CPU clusters can be pinned here, else why not and the fix."""
        active = self.active()
        if not active:
            return f"no active cpufreq policy under {self.io.path(CPUFREQ_DIR)}: CPU frequency scaling is not there"
        denied = [str(self.io.path(p.attr(f))) for p in active for f in ("scaling_min_freq", "scaling_max_freq")
                  if not self.io.writable(p.attr(f))]
        if denied:
            return f"not writable by this user: {', '.join(denied)}; {ROOT_FIX}"
        return None

    def _table_khz(self, p: CpufreqPolicy) -> list[int]:
        return sorted({int(v) for v in self.io.read_text(p.attr("scaling_available_frequencies")).split()})

    def levels_khz(self) -> list[int]:
        """The frequencies every active policy offers (kHz, ascending)."""
        tables = [set(self._table_khz(p)) for p in self.active()]
        return sorted(set.intersection(*tables)) if tables else []

    def levels_mhz(self) -> list[float]:
        return [f / 1000.0 for f in self.levels_khz()]

    def read_policy_mhz(self, p: CpufreqPolicy) -> float | None:
        try:
            return self.io.read_int(p.attr("scaling_cur_freq")) / 1000.0
        except (OSError, ValueError, IndexError):
            return None

    def read_mhz(self) -> float | None:
        """``scaling_cur_freq`` of the first active policy (the cluster of the lowest online CPU)."""
        active = self.active()
        return self.read_policy_mhz(active[0]) if active else None

    def readings_mhz(self) -> dict[str, float | None]:
        """``scaling_cur_freq`` of every active policy, by name (for a run's record)."""
        return {p.name: self.read_policy_mhz(p) for p in self.active()}

    def cap_mhz(self, mode: PowerMode | None) -> float | None:
        return None if mode is None else mode.cpu_max_mhz

    def max_allowed_mhz(self, mode: PowerMode | None) -> float:
        """The highest level at or below the power mode's CPU cap (what ``--cpu max`` pins)."""
        levels = self.levels_mhz()
        if not levels:
            raise DvfsError(self.support() or "no CPU levels")
        cap = self.cap_mhz(mode)
        allowed = [f for f in levels if cap is None or f <= cap + 1e-6]
        return (allowed or levels[:1])[-1]

    # -- checking ----------------------------------------------------------------------------
    def check_level(self, freq_mhz: float) -> int:
        """The level in kHz (:class:`UnsupportedFrequencyError` listing the levels otherwise)."""
        levels = self.levels_khz()
        if not levels:
            raise DvfsError(self.support() or "no CPU levels")
        mhz = [f / 1000.0 for f in levels]
        return levels[mhz.index(check_level(freq_mhz, mhz, what="a CPU level",
                                            hint="Pick --cpu from these, or 'max'. Nothing was changed"))]

    def check_caps(self, target_khz: int, mode: PowerMode | None) -> None:
        """Refuse more cores online than the mode allows, or a level above its CPU cap, before any write."""
        if mode is None:
            return
        online = online_cpus(self.io)
        if mode.cpu_online is not None and len(online) > mode.cpu_online:
            raise FrequencyCappedError(
                f"{len(online)} CPU cores are online but power mode {mode.describe()} allows {mode.cpu_online} "
                f"(CPU_ONLINE in {mode.source}): the board is not in the mode nvpmodel set; re-apply it with "
                f"`sudo nvpmodel -m {mode.id}` or {MAXN_FIX}. Nothing was changed")
        cap = self.cap_mhz(mode)
        if cap is not None and target_khz > cap * 1000 + 0.5:
            err = FrequencyCappedError(
                f"CPU {format_mhz(target_khz / 1000)} MHz is above the CPU cap of power mode {mode.describe()}: "
                f"{format_mhz(cap)} MHz (CPU MAX_FREQ in {mode.source}); {MAXN_FIX} or pick --cpu "
                f"{format_mhz(self.max_allowed_mhz(mode))} (or 'max'). Nothing was changed")
            err.requested_mhz, err.cap_mhz, err.power_mode = target_khz / 1000, cap, mode
            raise err

    def require_writable(self) -> None:
        active = self.active()
        if not active:
            raise DvfsError(f"cannot pin the CPU clusters: {self.support()}")
        for p in active:
            for name in ("scaling_min_freq", "scaling_max_freq"):
                if not self.io.writable(p.attr(name)):
                    raise permission_error(self.io.path(p.attr(name)), p.name)

    # -- writing -----------------------------------------------------------------------------
    def snapshot(self, mode: PowerMode | None) -> dict:
        """What to restore, per active policy: governor, min and max (kHz). The maximum saved is
        the mode's CPU cap (or ``cpuinfo_max_freq`` in a mode without one) when the mode is known:
        a maximum read under a thermal cap would otherwise be restored as a permanent cap."""
        out = {}
        for p in self.active():
            max_khz = self.io.read_int(p.attr("scaling_max_freq"))
            if mode is not None and mode.limits_known:
                top = self.io.read_int(p.attr("cpuinfo_max_freq"))
                max_khz = top if mode.cpu_max_mhz is None else min(top, round(mode.cpu_max_mhz * 1000))
            out[p.name] = {"governor": self.io.read_text(p.attr("scaling_governor")),
                           "min_khz": self.io.read_int(p.attr("scaling_min_freq")), "max_khz": max_khz}
        return {"policies": out}

    def _write_range(self, p: CpufreqPolicy, new_min: int, new_max: int) -> None:

        cur_min = self.io.read_int(p.attr("scaling_min_freq"))
        cur_max = self.io.read_int(p.attr("scaling_max_freq"))
        for name, value in plan_range_writes(cur_min, cur_max, new_min, new_max):
            write_checked(self.io, p.attr(f"scaling_{name}"), value, p.name)

    def write_pin(self, target_khz: int) -> None:
        """min = max = the level on every active policy (raising, max first; lowering, min first)."""
        for p in self.active():
            self._write_range(p, target_khz, target_khz)

    def restore(self, saved: dict) -> list[str]:
        """Put back what :meth:`snapshot` saved; a policy whose CPUs went offline meanwhile is
        skipped (the kernel answers EBUSY) and named in the list returned."""
        skipped = []
        by_name = {p.name: p for p in self.policies()}
        for name, snap in (saved.get("policies") or {}).items():
            p = by_name.get(name)
            if p is None or not p.active:
                skipped.append(name)
                continue
            try:
                lo, hi = sorted((int(snap["min_khz"]), int(snap["max_khz"])))
                self._write_range(p, lo, hi)
                gov = snap.get("governor")
                if gov and self.io.read_text(p.attr("scaling_governor")) != gov:
                    write_checked(self.io, p.attr("scaling_governor"), gov, p.name)
            except OSError as err:
                if err.errno != errno.EBUSY:
                    raise
                skipped.append(name)
        return skipped

    def verify(self, target_khz: int) -> LockCheck:
        """Every active policy's effective limits and ``scaling_cur_freq`` at the level, and the
        hardware's ``cpuinfo_cur_freq`` within 2 % (or 5 MHz); one reading below the level counts
        as unverified, not capped (an idle core's counters need not show its clock:
        *unverified* on a board), one above or limits that moved fail."""
        requested = target_khz / 1000.0
        tol = max(ABS_TOLERANCE_MHZ, REL_TOLERANCE * requested)
        worst: LockCheck | None = None
        order = {"verified": 0, "unverified": 1, "capped": 2, "not-locked": 3}
        for p in self.active():
            lo, hi = (self.io.read_int(p.attr(f)) for f in ("scaling_min_freq", "scaling_max_freq"))
            cur = self.io.read_int(p.attr("scaling_cur_freq"))
            if not lo == hi == target_khz:
                check = LockCheck(requested, hi / 1000.0, "capped" if hi < target_khz else "not-locked",
                                  f"{p.describe()} limits read {format_mhz(lo / 1000)}-{format_mhz(hi / 1000)} MHz "
                                  f"after pinning {format_mhz(requested)} MHz (a thermal / cooling cap or "
                                  "another request)", source="scaling_max_freq")
            elif cur != target_khz:
                check = LockCheck(requested, cur / 1000.0, lock_status(requested, cur / 1000.0, 0.0),
                                  f"{p.describe()} scaling_cur_freq reads {format_mhz(cur / 1000)} MHz",
                                  source="scaling_cur_freq")
            else:
                try:
                    hw = self.io.read_int(p.attr("cpuinfo_cur_freq")) / 1000.0
                except (OSError, ValueError, IndexError):
                    hw = None
                status = lock_status(requested, hw, tol, idle=True)
                why = (f"unverified: {self.io.path(p.attr('cpuinfo_cur_freq'))} is not readable (root only); "
                       "scaling_cur_freq only shows the frequency set" if hw is None else
                       f"cpuinfo_cur_freq reads {hw:g} MHz" + ("" if status == "verified" else
                                                                " (below the pin: an idle core's counters)"))
                check = LockCheck(requested, hw, status, f"{p.describe()}: {why}", source=SOURCE)
            if worst is None or order[check.status] > order[worst.status]:
                worst = check
        if worst is None:
            return LockCheck(requested, None, "unverified", "no active cpufreq policy", source=SOURCE)
        n = len(self.active())
        others = [p.name for p in self.policies() if not p.active]
        tail = f"; {', '.join(others)} offline (not pinned)" if others else ""
        if worst.verified:
            return LockCheck(requested, worst.measured_mhz, "verified",
                             f"{n} active {'policy' if n == 1 else 'policies'} at {format_mhz(requested)} MHz, "
                             f"cpuinfo_cur_freq confirms{tail}", source=SOURCE)
        return LockCheck(worst.requested_mhz, worst.measured_mhz, worst.status, worst.why + tail, source=worst.source)


__all__ = ["CPUFREQ_DIR", "CPU_DIR", "CpuClusters", "CpufreqPolicy", "find_policies", "online_cpus", "parse_cpu_list"]
