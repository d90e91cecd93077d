"""Jetson GPU clock control through devfreq (``min_freq`` / ``max_freq``), done safely.

* :func:`find_gpu_devfreq` discovers the GPU node under ``sys/class/devfreq`` (JetPack 4–6).
* :func:`plan_lock_writes` is the pure write-ordering rule (never ``min > max`` in between:
  kernels before 5.10 reject it; 5.10 / 5.15 take both files as PM-QoS requests and clamp the
  effective range on read, so the order only matters there for what is seen in between).
* :class:`JetsonClocks` locks a level (refusing one above the power mode's GPU cap), holds the
  GPU rail on, reads the lock back (``cur_freq`` is the requested rate; the BPMP counter, when
  readable, is the measured one), and restores the originals on exit, on exceptions and on
  SIGINT/SIGTERM, with a state file written before the first write.
* :meth:`JetsonClocks.other_clocks` pins the memory clock (:mod:`.emc`) and the CPU clusters
  (:mod:`.cpufreq`) the same way: refused above the mode's caps before any write, read back and
  verified, their originals added to the same state file before their first write and restored
  with the GPU's by :meth:`JetsonClocks.reset` (also after a SIGKILL, by the next start).

sysfs speaks Hz; everything public here speaks MHz (``levels_mhz``, ``freq_mhz``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from dvfslab.core import boards
from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import (
    BackendUnavailableError,
    ClockControl,
    ClockState,
    FrequencyCappedError,
    LockCheck,
    PinnedClock,
    check_level,
    format_mhz,
)
from dvfslab.hw.jetson.baseline import (
    BaselineCheck,
    EffectiveRange,
    baseline_check,
    effective_range,
)
from dvfslab.hw.jetson.board import board_model
from dvfslab.hw.jetson.bpmp import verify_lock
from dvfslab.hw.jetson.cpufreq import CpuClusters
from dvfslab.hw.jetson.emc import EmcClock
from dvfslab.hw.jetson.nvpmodel import MAXN_FIX, PowerMode, read_power_mode
from dvfslab.hw.jetson.railgate import find_railgate_control, railgate_state
from dvfslab.hw.jetson.safety import SavedClocks, SignalGuard, StateFile, check_owner, make_saved
from dvfslab.hw.jetson.sysfs import (
    SysfsIO,
    default_io,
    permission_error,
    plan_range_writes,
    write_checked,
)

DEVFREQ_CLASS = "sys/class/devfreq"


@dataclass(frozen=True)
class DevfreqNode:
    """One devfreq device: ``rel`` is its path under the root (through ``sys/class/devfreq``)."""

    rel: str
    name: str
    gpu: str

    def attr(self, name: str) -> str:
        return f"{self.rel}/{name}"


def _gpu_name(io: SysfsIO, node: Path) -> str | None:
    """The GPU kind of a devfreq node (``ga10b``, ``gpu`` ...) or ``None`` if not a GPU: its
    ``of_node`` or node name against the families' GPU names (:mod:`dvfslab.core.boards`),
    else a family's node-name prefix (AGX Thor's ``gpu-gpc``, unverified)."""
    candidates = [node.name.rsplit(".", 1)[-1]]
    of_node = node / "device" / "of_node" / "name"
    if of_node.exists():
        candidates.insert(0, io.read_text(of_node))
    names = boards.gpu_devfreq_names()
    for cand in candidates:
        if cand in names:
            return cand
    return next((gpu for prefix, gpu in boards.gpu_node_prefixes() if node.name.startswith(prefix)), None)


def find_gpu_devfreq(io: SysfsIO) -> DevfreqNode:
    """Scan ``sys/class/devfreq/*`` under the root for the GPU; raise if there is none."""
    nodes = io.glob(f"{DEVFREQ_CLASS}/*")
    for node in nodes:
        gpu = _gpu_name(io, node)
        if gpu and (node / "available_frequencies").exists():
            return DevfreqNode(rel=str(node.relative_to(io.root)), name=node.name, gpu=gpu)
    seen = ", ".join(n.name for n in nodes) or "nothing"
    raise BackendUnavailableError(
        f"no Jetson GPU devfreq node under {io.path(DEVFREQ_CLASS)} (found: {seen}; expected a "
        f"name ending in one of {', '.join(boards.gpu_devfreq_names())}). Not a Jetson, or a wrong "
        "--sysfs-root"
    )


def plan_lock_writes(cur_min_hz: int, cur_max_hz: int, target_hz: int) -> list[tuple[str, int]]:
    """Writes that pin min = max = ``target_hz``: raising, max first; lowering, min first."""
    return plan_range_writes(cur_min_hz, cur_max_hz, target_hz, target_hz)


class JetsonClocks(ClockControl):
    """:class:`~dvfslab.hw.base.ClockControl` over the GPU devfreq node.

    Use as a context manager to get the originals back whatever happens::

        with JetsonClocks("/") as clocks:
            clocks.lock(612)
            ...

    ``lock`` refuses a level above the power mode's GPU cap (the kernel would not), saves the
    originals to the state file before its first write (or adopts the originals a killed run
    left there), holds the GPU rail on, and checks the clock reached with the BPMP counter when
    it is readable (:attr:`last_lock_check`); ``reset`` restores everything and removes the file.
    ``power_mode_ok`` relaxes the MAXN requirement of :meth:`baseline_check` (:meth:`preflight`
    before a sweep); :meth:`recover` restores what a killed process left pinned.
    """

    def __init__(self, sysfs_root="/", *, io: SysfsIO | None = None, node: DevfreqNode | None = None,
                 state_dir=None, settle_s: float = 0.2, handle_signals: bool = True,
                 power_mode_ok: bool = False):
        self.io = io if io is not None else default_io(sysfs_root)
        self.node = node or find_gpu_devfreq(self.io)
        self.state_file = StateFile(self.io.root, self.node.rel, state_dir)
        self.settle_s = float(settle_s)
        self.handle_signals = handle_signals
        self.power_mode_ok = power_mode_ok
        self.last_lock_check: LockCheck | None = None
        #: the BPMP counter of this board family's GPU clock (root-relative)
        self.counter_rel = boards.bpmp_counter(board_model(self.io))
        self._levels_hz = self._read_levels_hz()
        self._originals: SavedClocks | None = None
        self._lock_mode: tuple[PowerMode | None] | None = None  # the mode read by the first lock
        self._guard: SignalGuard | None = None
        #: the other clocks (EMC, CPU clusters), whatever this board lets dvfslab do with them
        self._impls = {"emc": EmcClock(self.io, boards.emc_levels_mhz(board_model(self.io))),
                       "cpu": CpuClusters(self.io)}
        #: what each other clock read back when it was last pinned (cleared by reset)
        self.other_checks: dict[str, LockCheck] = {}

    # -- reading ---------------------------------------------------------------------------
    def _read_levels_hz(self) -> list[int]:
        text = self.io.read_text(self.node.attr("available_frequencies"))
        levels = sorted({int(v) for v in text.split()})
        if not levels:
            raise BackendUnavailableError(f"{self.io.path(self.node.attr('available_frequencies'))} is empty")
        return levels

    def _read_governor(self) -> str | None:
        path = self.node.attr("governor")
        return self.io.read_text(path) if self.io.exists(path) else None

    def levels_mhz(self) -> list[float]:
        """The board's GPU levels, ascending, in MHz."""
        return [hz / 1e6 for hz in self._levels_hz]

    def state(self) -> ClockState:
        """Current cur/min/max (MHz), governor and levels. ``cur_freq`` is the *requested* rate."""
        return ClockState(
            cur_freq_mhz=self.io.read_int(self.node.attr("cur_freq")) / 1e6,
            min_freq_mhz=self.io.read_int(self.node.attr("min_freq")) / 1e6,
            max_freq_mhz=self.io.read_int(self.node.attr("max_freq")) / 1e6,
            governor=self._read_governor(),
            levels_mhz=tuple(self.levels_mhz()),
        )

    def writable(self) -> bool:
        """Whether this process may write ``min_freq`` and ``max_freq``."""
        return all(self.io.writable(self.node.attr(f)) for f in ("min_freq", "max_freq"))

    def power_mode(self) -> PowerMode | None:
        """The nvpmodel mode and its GPU limits (``None`` without nvpmodel)."""
        return read_power_mode(self.io)

    def effective_range(self, mode: PowerMode | None = None) -> EffectiveRange:
        return effective_range(self.io, self.node.rel, self.levels_mhz(), mode or self.power_mode())

    def baseline_check(self, power_mode_ok: bool | None = None) -> BaselineCheck:
        """MAXN, min < max and a load-following governor: what a MAXN baseline run needs."""
        ok = self.power_mode_ok if power_mode_ok is None else power_mode_ok
        return baseline_check(self.io, self.node.rel, self.levels_mhz(), self.power_mode(),
                              self._read_governor(), power_mode_ok=ok)

    def preflight(self) -> str | None:
        """:meth:`baseline_check`, raising :class:`DvfsError` with every problem and its fix."""
        mode = self.baseline_check().require().power_mode
        if mode is not None and mode.is_maxn:
            return "ok: MAXN, default governor"
        return f"power mode {mode.describe() if mode else 'unknown'} accepted (--power-mode-ok)"

    def railgate_state(self) -> str | None:
        return railgate_state(self.io, self.node.rel)

    def verify_lock(self, freq_mhz: float) -> LockCheck:
        """The BPMP counter against ``freq_mhz`` (unverified when it is not readable)."""
        return verify_lock(self.io, freq_mhz, self.counter_rel)

    # -- changing --------------------------------------------------------------------------
    def _require_writable(self) -> None:
        for name in ("min_freq", "max_freq"):
            if not self.io.writable(self.node.attr(name)):
                raise permission_error(self.io.path(self.node.attr(name)), self.node.name)

    def _write(self, name: str, value) -> None:
        write_checked(self.io, self.node.attr(name), value, self.node.name)

    def _take_originals(self, mode: PowerMode | None) -> SavedClocks:
        """Adopt a stale state file (board left pinned) or save the current settings.

        The maximum saved is the power mode's own request (its cap, or the table's top in a
        mode without one) when the mode is known: ``max_freq`` read under a thermal cap would
        otherwise be restored as a permanent cap.
        """
        saved = self.state_file.load()
        if saved is not None:
            check_owner(saved, self.state_file.path)
        else:
            max_hz = self.io.read_int(self.node.attr("max_freq"))
            if mode is not None and mode.limits_known:
                cap = self._levels_hz[-1] if mode.gpu_max_mhz is None else round(mode.gpu_max_mhz * 1e6)
                max_hz = min(cap, self._levels_hz[-1])
            saved = make_saved(str(self.io.root), self.node.rel, self._read_governor(),
                               self.io.read_int(self.node.attr("min_freq")), max_hz,
                               railgate_state(self.io, self.node.rel))
        self.state_file.save(make_saved(saved.sysfs_root, saved.node, saved.governor,
                                        saved.min_freq_hz, saved.max_freq_hz, saved.railgate_control,
                                        saved.others))
        return saved

    def _check_mode_cap(self, target_hz: int, mode: PowerMode | None) -> None:
        """Refuse a level above the mode's GPU cap before any write (the kernel would take it)."""
        if mode is None or mode.gpu_max_mhz is None or target_hz <= mode.gpu_max_mhz * 1e6 + 0.5:
            return
        cap = mode.gpu_max_mhz
        err = FrequencyCappedError(
            f"{format_mhz(target_hz / 1e6)} MHz is above the GPU cap of power mode {mode.describe()}: "
            f"{format_mhz(cap)} MHz ({mode.cap_text()}; from {mode.source}). The kernel would accept "
            f"the write but the mode's TPC power-gating stays on; {MAXN_FIX} or pick a level <= "
            f"{format_mhz(cap)} MHz. Nothing was changed"
        )
        err.requested_mhz, err.cap_mhz, err.power_mode = target_hz / 1e6, cap, mode
        raise err

    def lock(self, freq_mhz: float, nearest: bool = False) -> ClockState:
        """Pin the GPU at one level (``nearest`` snaps a non-level); return the state read back.

        A level above the power mode's GPU cap is refused before anything is written. When the
        effective max stays lower (thermal cap), ``cur_freq`` does not follow, or the BPMP counter
        shows another clock, the originals are restored and :class:`FrequencyCappedError` says why.
        """
        levels_mhz = self.levels_mhz()
        target_hz = self._levels_hz[levels_mhz.index(check_level(freq_mhz, levels_mhz, nearest=nearest))]
        self._require_writable()
        mode = self._session_mode()
        self._check_mode_cap(target_hz, mode)
        if self._originals is None:
            self._originals = self._take_originals(mode)
        try:
            self._hold_rail()
            cur_min = self.io.read_int(self.node.attr("min_freq"))
            cur_max = self.io.read_int(self.node.attr("max_freq"))
            for name, value in plan_lock_writes(cur_min, cur_max, target_hz):
                self._write(name, value)
                if name == "max_freq":
                    self._check_max(target_hz, mode)
            st = self._settle(target_hz, mode)
            self.last_lock_check = check = self.verify_lock(target_hz / 1e6)
            if check.failed:
                raise self._capped_error(target_hz, round(check.measured_mhz * 1e6), "pto_counter",
                                         mode, check.why)
            return st
        except BaseException:
            self.reset()
            raise

    def _session_mode(self) -> PowerMode | None:
        """The power mode, read with nvpmodel once per locked session."""
        if self._originals is None or self._lock_mode is None:
            self._lock_mode = (self.power_mode(),)
        return self._lock_mode[0]

    # -- the other clocks --------------------------------------------------------------------
    def other_clocks(self) -> Mapping[str, PinnedClock]:
        """The EMC and the CPU clusters as :class:`~dvfslab.hw.base.PinnedClock` s (each says
        with ``support()`` whether this board and user can pin it)."""
        return {name: JetsonPinnedClock(self, name) for name in self._impls}

    def pin_other(self, name: str, freq_mhz: float) -> LockCheck:
        """Pin the other clock ``name`` (``"emc"``, ``"cpu"``) at a level: checked against its
        levels and the power mode's caps before any write, its originals added to the state file,
        written, read back; a level not held restores every clock and raises
        :class:`FrequencyCappedError`."""
        impl = self._impls[name]
        target = impl.check_level(freq_mhz)
        impl.require_writable()
        mode = self._session_mode()
        impl.check_caps(target, mode)
        if self._originals is None:
            self._originals = self._take_originals(mode)
        if name not in (self._originals.others or {}):
            snap = impl.snapshot(mode) if name == "cpu" else impl.snapshot()
            self._originals = replace(self._originals, others={**(self._originals.others or {}), name: snap})
            self.state_file.save(make_saved(*(getattr(self._originals, k) for k in (
                "sysfs_root", "node", "governor", "min_freq_hz", "max_freq_hz", "railgate_control", "others"))))
        try:
            impl.write_pin(target)
            check = impl.verify(target)
            if check.failed:
                raise FrequencyCappedError(f"{impl.label} did not hold {format_mhz(check.requested_mhz)} MHz: "
                                           f"{check.why}; every clock restored")
            self.other_checks[name] = check
            return check
        except BaseException:
            self.reset()
            raise

    def _release_others(self, others: dict) -> None:
        """Restore the other clocks a state file saved (each tried; the first error raised after)."""
        errors = []
        for name, snap in others.items():
            impl = self._impls.get(name)
            if impl is None:
                continue
            try:
                impl.restore(snap)
            except (OSError, DvfsError) as err:
                errors.append(f"{impl.label}: {err}")
        if errors:
            raise DvfsError("restoring " + "; ".join(errors))

    def _hold_rail(self) -> None:
        """Keep the GPU rail powered while locked (as nvpmodel / jetson_clocks do)."""
        rel = find_railgate_control(self.io, self.node.rel)
        if rel is not None and self.io.read_text(rel) != "on":
            write_checked(self.io, rel, "on", self.node.name)

    def _check_max(self, target_hz: int, mode: PowerMode | None) -> None:
        got = self.io.read_int(self.node.attr("max_freq"))
        if got < target_hz:
            raise self._capped_error(target_hz, got, "max_freq", mode)

    def _settle(self, target_hz: int, mode: PowerMode | None) -> ClockState:
        """Read back until cur_freq reaches the target or ``settle_s`` passes."""
        deadline = time.monotonic() + self.settle_s
        while True:
            st = self.state()
            if abs(st.cur_freq_mhz * 1e6 - target_hz) < 0.5e6 and st.locked:
                return st
            if time.monotonic() >= deadline:
                raise self._capped_error(target_hz, round(st.cur_freq_mhz * 1e6), "cur_freq", mode)
            time.sleep(0.01)

    def _capped_error(self, target_hz: int, got_hz: int, attr: str, mode: PowerMode | None,
                      why: str | None = None) -> FrequencyCappedError:
        mode_txt = (f"power mode {mode.describe()} (from nvpmodel -q)" if mode else
                    f"power mode unknown (no nvpmodel under {self.io.root}); effective cap "
                    f"{format_mhz(got_hz / 1e6)} MHz")
        why = why or ("the effective max stays lower than the request: a thermal / cooling-device "
                      "cap or another max_freq request, not the power mode" if attr == "max_freq"
                      else "thermal throttling or another limit")
        where = self.io.path(self.counter_rel if attr == "pto_counter" else self.node.attr(attr))
        err = FrequencyCappedError(
            f"GPU did not reach {format_mhz(target_hz / 1e6)} MHz: {attr} reads back "
            f"{format_mhz(got_hz / 1e6)} MHz at {where} ({why}); {mode_txt}. Pick a level <= {format_mhz(got_hz / 1e6)} MHz or let the board "
            "cool down; clocks restored"
        )
        err.requested_mhz, err.cap_mhz, err.power_mode = target_hz / 1e6, got_hz / 1e6, mode
        return err

    def _apply(self, saved: SavedClocks) -> None:
        """Write the saved governor/min/max back, in a safe order."""
        cur_min = self.io.read_int(self.node.attr("min_freq"))
        cur_max = self.io.read_int(self.node.attr("max_freq"))
        new_min, new_max = sorted((saved.min_freq_hz, saved.max_freq_hz))
        for name, value in plan_range_writes(cur_min, cur_max, new_min, new_max):
            self._write(name, value)
        if saved.governor and self._read_governor() not in (None, saved.governor):
            self._write("governor", saved.governor)
        rel = find_railgate_control(self.io, self.node.rel)
        if saved.railgate_control and rel is not None and self.io.read_text(rel) != saved.railgate_control:
            write_checked(self.io, rel, saved.railgate_control, self.node.name)
        if saved.others:
            self._release_others(saved.others)

    def reset(self) -> None:
        """Restore the originals this object saved or adopted, the other clocks' included
        (no-op when it locked nothing)."""
        saved, self._originals, self._lock_mode = self._originals, None, None
        self.other_checks = {}
        if saved is not None:
            self._apply(saved)
            self.state_file.remove()

    def restore_saved(self) -> SavedClocks | None:
        """Restore from the state file (after a crash); return what was restored, or ``None``."""
        saved = self._originals or self.state_file.load()
        if saved is None:
            return None
        self._require_writable()
        self._originals = saved
        self.reset()
        return saved

    def recover(self) -> str | None:
        """Restore from the state file a killed process left (never while its owner still runs:
        :class:`DvfsError`); return what was restored (``repr`` of the saved clocks), or None."""
        held = self.state_file.load()
        if held is not None:
            check_owner(held, self.state_file.path)
        saved = self.restore_saved()
        return None if saved is None else repr(saved)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> JetsonClocks:
        if self.handle_signals:
            self._guard = SignalGuard(self.reset)
            self._guard.install()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.reset()
        finally:
            if self._guard is not None:
                self._guard.uninstall()
                self._guard = None

    def __repr__(self) -> str:
        return f"JetsonClocks({str(self.io.root)!r}, node={self.node.name!r})"


class JetsonPinnedClock(PinnedClock):
    """One of :class:`JetsonClocks`' other clocks as a :class:`~dvfslab.hw.base.PinnedClock`:
    reads go to the clock, pins through :meth:`JetsonClocks.pin_other` (one state file)."""

    def __init__(self, clocks: JetsonClocks, name: str):
        self.clocks, self.name = clocks, name
        self.impl = clocks._impls[name]
        self.label = self.impl.label

    def support(self) -> str | None:
        return self.impl.support()

    def levels_mhz(self) -> list[float]:
        return self.impl.levels_mhz()

    def max_allowed_mhz(self) -> float:
        return self.impl.max_allowed_mhz(self.clocks.power_mode())

    def read_mhz(self) -> float | None:
        return self.impl.read_mhz()

    def pin(self, freq_mhz: float) -> LockCheck:
        return self.clocks.pin_other(self.name, freq_mhz)


__all__ = [
    "DevfreqNode",
    "JetsonClocks",
    "JetsonPinnedClock",
    "find_gpu_devfreq",
    "plan_lock_writes",
    "plan_range_writes",
]
