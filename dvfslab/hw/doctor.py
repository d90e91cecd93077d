"""``dvfslab doctor``'s checks: is this board (or dGPU) ready for a days-long sweep?

Each check is a small function returning a :class:`Check` (name, status ``ok`` / ``warn`` /
``fail``, what was found, and the fix). :func:`jetson_checks` runs the Jetson ones in order
(board, power mode, governor, jetson_clocks, rail-gating, permissions, sensors, other readers,
thermal headroom) and :func:`check_lock` locks the lowest and the highest allowed level, checks
each with the BPMP counter and always restores the clocks through the clocks' own ``reset``;
:func:`check_other_clocks` says whether the memory clock and the CPU clusters can be pinned and
pins each at the power mode's highest level, read back, then restored.
The sampler check evaluates the stats of a short sample taken by the caller
(:func:`check_sampler`; the sampling itself is ``measure``'s, one room to the right). The NVML
checks are in :mod:`dvfslab.hw.doctor_nvml`. The rules and their sources: docs/hardware.md.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import format_mhz
from dvfslab.hw.base import PowerReadError
from dvfslab.hw.jetson.baseline import FIXED_GOVERNORS, RESTORE_FIX
from dvfslab.hw.jetson.board import board_model, jetpack_release, support_note
from dvfslab.hw.jetson.clocks import JetsonClocks
from dvfslab.hw.jetson.ina import other_sensor_readers
from dvfslab.hw.jetson.nvpmodel import MAXN_FIX
from dvfslab.hw.jetson.power import JetsonPowerReader
from dvfslab.hw.jetson.railgate import find_railgate_control
from dvfslab.hw.jetson.sysfs import SysfsIO, udev_rule_example

STATUSES = ("ok", "warn", "fail")
#: below this achieved rate (Hz) a sample spans more than 0.1 s: short windows get coarse
MIN_SAMPLER_HZ = 10.0
#: an achieved rate below this share of the requested one: the reads cannot keep up with the
#: period asked (more samples missed than taken), so windows are sampled coarser than planned
MIN_ACHIEVED_SHARE = 0.5
#: a zone closer than this (deg C) to its lowest trip point leaves no room for a long run
MIN_HEADROOM_C = 10.0
STOP_READERS_FIX = "stop them for the sweep: `sudo systemctl stop jtop.service`, end tegrastats"
ROOT_FIX = ("run the doctor and the sweep as root (`sudo`) so the BPMP counter in debugfs can "
            "be read; without it locks are unverified")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


# -- the board's setup -------------------------------------------------------------------------
def check_board(io: SysfsIO, reader: JetsonPowerReader | None) -> Check:
    """Model, L4T / JetPack release, board family; warn when dvfslab is untested there."""
    model, release = board_model(io) or "unknown model", jetpack_release(io) or "unknown release"
    family = reader.board_family if reader is not None else None
    detail = f"{model}, {release}" + (f" ({family})" if family else "")
    note = support_note(family, release) if family else None
    if note:
        return Check("board", "warn", f"{detail}; {note}",
                     "check which rails make CPU+GPU with `dvfslab devices`; report results upstream")
    return _ok("board", detail)


def check_power_mode(clocks: JetsonClocks, power_mode_ok: bool = False) -> Check:
    mode = clocks.power_mode()
    if mode is None:
        return Check("power mode", "warn", f"unknown: no nvpmodel under {clocks.io.root}",
                     "install nvpmodel (L4T) or confirm MAXN by hand; sweeps then need --power-mode-ok")
    detail = f"{mode.describe()}, {mode.cap_text()}"
    if mode.is_maxn:
        return _ok("power mode", detail)
    status = "warn" if power_mode_ok else "fail"
    return Check("power mode", status, f"{detail}: not MAXN (a sweep refuses it)",
                 f"{MAXN_FIX}, or pass --power-mode-ok to sweep in this mode")


def check_governor(clocks: JetsonClocks) -> Check:
    gov = clocks.state().governor
    if gov is None:
        return Check("governor", "warn", f"no governor file at {clocks.io.path(clocks.node.rel)}",
                     "the MAXN baseline needs the board's default governor (nvhost_podgov)")
    if gov in FIXED_GOVERNORS:
        return Check("governor", "fail", f"{gov!r} holds one rate: the MAXN runs would not follow the load",
                     RESTORE_FIX)
    return _ok("governor", f"{gov} (follows the load)")


def check_jetson_clocks(clocks: JetsonClocks) -> Check:
    """min = max (``jetson_clocks`` applied, or a lock left behind) fails the MAXN baseline."""
    rng = clocks.effective_range()
    span = f"min {format_mhz(rng.min_freq_mhz)} MHz, max {format_mhz(rng.max_freq_mhz)} MHz"
    saved = clocks.state_file.load()
    if saved is not None:
        return Check("jetson_clocks", "fail", f"{span}; a dvfslab lock was left behind "
                     f"(state file {clocks.state_file.path})", "run `dvfslab clocks --restore`")
    if rng.fixed:
        return Check("jetson_clocks", "fail", f"{span}: min = max (jetson_clocks applied?)", RESTORE_FIX)
    return _ok("jetson_clocks", f"not applied ({span})")


def check_railgate(clocks: JetsonClocks) -> Check:
    state = clocks.railgate_state()
    rel = find_railgate_control(clocks.io, clocks.node.rel)
    if state is None:
        return Check("rail-gating", "warn", "no GPU power/control file found: rail-gating unknown",
                     "check /sys/devices/platform/gpu.0/power/control on the board")
    if state == "auto":
        return _ok("rail-gating", "allowed (power/control = auto)")
    return Check("rail-gating", "warn", f"held off (power/control = {state} at {clocks.io.path(rel)}): "
                 "the idle GPU stays powered, so idle and MAXN-baseline power read high",
                 f"`echo auto | sudo tee {clocks.io.path(rel)}` (or `sudo jetson_clocks --restore`)")


def railgate_rule(device_name: str) -> str:
    """A udev rule granting group ``dvfslab`` write access to the GPU's ``power/control``."""
    return (f'SUBSYSTEM=="platform", KERNEL=="{device_name}", ACTION=="add", '
            'RUN+="/bin/chgrp dvfslab /sys%p/power/control", RUN+="/bin/chmod g+w /sys%p/power/control"')


def udev_fix(clocks: JetsonClocks, railgate: bool = False) -> str:
    """The udev rule(s) (and the commands that apply them) granting group ``dvfslab`` the clock
    files, and with ``railgate`` the GPU's ``power/control`` (held on during a lock)."""
    rules = udev_rule_example(clocks.node.name)
    trigger = "sudo udevadm trigger --subsystem-match=devfreq --action=add"
    if railgate:
        device = os.path.basename(os.path.realpath(clocks.io.path(f"{clocks.node.rel}/device")))
        rules += f" and {railgate_rule(device)}"
        trigger += f" && sudo udevadm trigger --subsystem-match=platform --sysname-match={device} --action=add"
    return (f"run as root, or add to /etc/udev/rules.d/99-dvfslab.rules: {rules} then `sudo groupadd -f "
            f"dvfslab && sudo usermod -aG dvfslab $USER && {trigger}` and log in again "
            "(docs/hardware.md, \"Permissions\")")


def check_permissions(clocks: JetsonClocks) -> Check:
    files = [clocks.node.attr(f) for f in ("min_freq", "max_freq")]
    rail = find_railgate_control(clocks.io, clocks.node.rel)
    files += [rail] if rail else []
    denied = [str(clocks.io.path(f)) for f in files if not clocks.io.writable(f)]
    if denied:
        rail_denied = rail is not None and str(clocks.io.path(rail)) in denied
        return Check("permissions", "fail", "not writable by this user: " + ", ".join(denied),
                     udev_fix(clocks, railgate=rail_denied))
    return _ok("permissions", "min_freq, max_freq" + (", power/control" if rail else "") + " writable")


# -- sensors -------------------------------------------------------------------------------
def open_reader(io: SysfsIO, clocks: JetsonClocks, clock) -> tuple[JetsonPowerReader | None, Check]:
    """The power reader (or ``None``) and the sensors line."""
    try:
        reader = JetsonPowerReader(io=io, devfreq_rel=clocks.node.rel, clock=clock)
    except PowerReadError as err:
        return None, Check("sensors", "fail", str(err), "load the ina3221 driver (L4T) or use --backend nvml")
    period = reader.update_interval_s
    interval = f"update interval {period * 1000:g} ms" if period else "update interval unknown"
    return reader, _ok("sensors", f"{len(reader.rails)} rails ({', '.join(reader.rails)}); CPU+GPU = "
                       f"{' + '.join(reader.total_rails)}; {interval}")


def check_other_readers(io: SysfsIO) -> Check:
    found = other_sensor_readers(io)
    if found:
        return Check("other readers", "warn", f"{', '.join(found)} also read the power monitors: "
                     "INA3221 reads then wait longer and may time out", STOP_READERS_FIX)
    return _ok("other readers", "none (no tegrastats, no jtop.service)")


def check_sampler(stats: dict, seconds: float) -> Check:
    """The achieved rate and read cost of a short sample (``PowerSampler.stats()``)."""
    n, hz = stats["n_samples"], stats["achieved_hz"]
    if n < 2 or math.isnan(hz):
        return Check("sampler", "fail", f"{n} samples in {seconds:g} s ({stats['n_lost']} reads failed)",
                     "check the sensors line; `dvfslab devices` shows the rails")
    detail = (f"achieved {hz:.0f} Hz of {stats['requested_hz']:.0f} Hz requested over {seconds:g} s; "
              f"one sample's reads take {stats['read_cost_mean_s'] * 1e3:.0f} ms "
              f"(max {stats['read_cost_max_s'] * 1e3:.0f} ms)")
    if stats["n_lost"]:
        return Check("sampler", "warn", f"{detail}; {stats['n_lost']} reads failed", STOP_READERS_FIX)
    if hz < MIN_SAMPLER_HZ:
        return Check("sampler", "warn", f"{detail}: below {MIN_SAMPLER_HZ:g} Hz, windows shorter than a "
                     "few seconds get coarse", "measure whole epochs or runs; " + STOP_READERS_FIX)
    if hz < MIN_ACHIEVED_SHARE * stats["requested_hz"]:
        return Check("sampler", "warn", f"{detail}: under {MIN_ACHIEVED_SHARE:.0%} of the rate requested, the reads "
                     "cannot keep up (windows are sampled coarser than planned)",
                     STOP_READERS_FIX + "; or ask for the rate the reads allow (--sample-period-ms on finetune)")
    return _ok("sampler", detail)


# -- thermal -------------------------------------------------------------------------------
def _trip_points_c(io: SysfsIO, zone) -> list[tuple[str, float]]:
    """(type, deg C) of a zone's trip points, fans (``active``) left out."""
    out = []
    for temp in io.glob(f"{zone.relative_to(io.root)}/trip_point_*_temp"):
        kind_path = temp.with_name(temp.name.replace("_temp", "_type"))
        try:
            kind = io.read_text(kind_path) if kind_path.exists() else "trip"
            if kind != "active":
                out.append((kind, io.read_int(temp) / 1000.0))
        except (OSError, ValueError, IndexError):
            continue
    return out


def check_thermal(clocks: JetsonClocks) -> Check:
    """The zone closest to a trip point, and a cooling-device cap on the GPU's max now."""
    rng = clocks.effective_range()
    if rng.cause == "thermal_or_request" and not rng.fixed:
        return Check("thermal", "warn", f"GPU max is {format_mhz(rng.max_freq_mhz)} MHz now: {rng.limited_by}",
                     "let the board cool (check the fan), then run the doctor again")
    closest = None
    for zone in clocks.io.glob("sys/class/thermal/thermal_zone*"):
        try:
            kind, temp_c = clocks.io.read_text(zone / "type"), clocks.io.read_int(zone / "temp") / 1000.0
        except (OSError, ValueError, IndexError):
            continue
        for trip_kind, trip_c in _trip_points_c(clocks.io, zone):
            if temp_c > -200 and (closest is None or trip_c - temp_c < closest[0]):
                closest = (trip_c - temp_c, kind, temp_c, trip_kind, trip_c)
    if closest is None:
        return _ok("thermal", "no cooling cap on the GPU; no trip points exposed (headroom unknown)")
    headroom, kind, temp_c, trip_kind, trip_c = closest
    detail = (f"{kind} {temp_c:.1f} C, {headroom:.1f} C below its {trip_kind} trip ({trip_c:g} C); "
              "no cooling cap on the GPU")
    if headroom < MIN_HEADROOM_C:
        return Check("thermal", "warn", detail.replace("; no", ": little headroom; no"),
                     "let the board cool and check the fan before a long sweep")
    return _ok("thermal", detail)


# -- the lock ------------------------------------------------------------------------------
def lock_targets_mhz(clocks: JetsonClocks) -> tuple[float, float]:
    """The lowest level and the highest the power mode allows."""
    levels, mode = clocks.levels_mhz(), clocks.power_mode()
    cap = mode.gpu_max_mhz if mode is not None else None
    allowed = [f for f in levels if cap is None or f <= cap + 1e-6] or levels[:1]
    return levels[0], allowed[-1]


def check_lock(clocks: JetsonClocks) -> Check:
    """Lock the lowest and the highest allowed level, check each, and restore (always)."""
    rail = find_railgate_control(clocks.io, clocks.node.rel)
    rail_denied = rail is not None and not clocks.io.writable(rail)
    if not clocks.writable() or rail_denied:
        return Check("lock", "warn", "not tried: the clock files are not writable (see permissions)",
                     udev_fix(clocks, railgate=rail_denied))
    if clocks.state_file.load() is not None:
        return Check("lock", "warn", f"not tried: a dvfslab state file is pending ({clocks.state_file.path})",
                     "run `dvfslab clocks --restore` first, then the doctor again")
    targets, checks = lock_targets_mhz(clocks), []
    try:
        for f in targets:
            clocks.lock(f)
            checks.append(clocks.last_lock_check)
    except DvfsError as err:
        return Check("lock", "fail", f"lock to {format_mhz(f)} MHz failed: {err}",
                     "a sweep would fail there too: let the board cool, or leave levels above the "
                     "reached clock out of the sweep (--freqs)")
    finally:
        clocks.reset()
    st = clocks.state()
    restored = f"clocks restored (min {format_mhz(st.min_freq_mhz)}, max {format_mhz(st.max_freq_mhz)} MHz)"
    asked = " and ".join(format_mhz(f) for f in targets)
    if all(c is not None and c.verified for c in checks):
        got = " and ".join(format_mhz(c.measured_mhz) for c in checks)
        return _ok("lock", f"{asked} MHz locked, BPMP counter read {got} MHz; {restored}")
    why = next((c.why for c in checks if c is not None and not c.verified), "no lock check")
    return Check("lock", "warn", f"{asked} MHz locked (cur_freq followed) but {why}; {restored}", ROOT_FIX)


# -- the other clocks ----------------------------------------------------------------------
PIN_CHECK_NAMES = {"emc": "emc pin", "cpu": "cpu pin"}


def check_other_clocks(clocks: JetsonClocks, *, try_pin: bool = True) -> list[Check]:
    """One line per other clock (EMC, CPU clusters): whether a sweep can pin it here, and with
    ``try_pin`` whether a pin at the power mode's highest level holds when read back (restored
    through the clocks' own reset, always)."""
    out = []
    for name, clock in clocks.other_clocks().items():
        title = PIN_CHECK_NAMES.get(name, f"{name} pin")
        why_not = clock.support()
        now = clock.read_mhz()
        now_txt = "unreadable" if now is None else f"now {format_mhz(now)} MHz"
        if why_not is not None:
            out.append(Check(title, "warn", f"{clock.label} cannot be pinned here ({now_txt}): {why_not}",
                             f"a sweep pins it by default: run it as root, or pass --{name} none (the clock then "
                             "wanders; `dvfslab doctor --dataset DIR` shows by how much)"))
            continue
        top = clock.max_allowed_mhz()
        detail = f"{clock.label} can be pinned ({now_txt}; the power mode allows up to {format_mhz(top)} MHz)"
        if not try_pin or clocks.state_file.load() is not None:
            out.append(_ok(title, detail + ("" if not try_pin else "; pin not tried: a state file is pending")))
            continue
        try:
            check = clock.pin(top)
        except DvfsError as err:
            out.append(Check(title, "fail", f"{clock.label}: pin at {format_mhz(top)} MHz failed: {err}",
                             f"a sweep would fail there too: pass --{name} with a lower level, or --{name} none"))
            continue
        finally:
            clocks.reset()
        restored = clock.read_mhz()
        back = "" if restored is None else f"; restored, now {format_mhz(restored)} MHz"
        if check.verified:
            out.append(_ok(title, f"{clock.label} pinned at {format_mhz(top)} MHz, read back "
                                  f"{format_mhz(check.measured_mhz)} MHz ({check.source}){back}"))
        else:
            out.append(Check(title, "warn", f"{clock.label} pinned at {format_mhz(top)} MHz but {check.why}{back}",
                             ROOT_FIX))
    return out


def jetson_checks(io: SysfsIO, clocks: JetsonClocks, clock, *, power_mode_ok: bool = False
                  ) -> tuple[list[Check], JetsonPowerReader | None]:
    """Every Jetson check but the sampler and the lock (which change or take time), in order."""
    reader, sensors = open_reader(io, clocks, clock)
    return [check_board(io, reader), check_power_mode(clocks, power_mode_ok), check_governor(clocks),
            check_jetson_clocks(clocks), check_railgate(clocks), check_permissions(clocks), sensors,
            check_other_readers(io), check_thermal(clocks)], reader


__all__ = ["Check", "MIN_HEADROOM_C", "MIN_SAMPLER_HZ", "STATUSES", "check_board", "check_governor",
           "check_jetson_clocks", "check_lock", "check_other_clocks", "check_other_readers", "check_permissions",
           "check_power_mode", "check_railgate", "check_sampler", "check_thermal", "jetson_checks",
           "lock_targets_mhz", "open_reader", "railgate_rule", "udev_fix"]
