"""Hardware commands: ``dvfslab devices``, ``dvfslab clocks``, ``dvfslab run``.

* ``devices [--sysfs-root DIR [--sysfs-io MODULE:CLASS]]``: what this machine offers (board, JetPack, power mode
  and its GPU limits, GPU levels, the effective range and what limits it, rail-gating, whether the
  board is at its MAXN baseline, whether the clocks are writable, rails, load, temperatures, NVML, jtop).
* ``clocks [--list | --set MHZ [--nearest] [--emc MHZ|max] [--cpu MHZ|max] | --restore] [--sysfs-root DIR]``:
  ``--set`` pins the GPU (and with ``--emc`` / ``--cpu`` the memory clock and the CPU clusters)
  and leaves them pinned (originals kept in the state file); ``--restore`` puts the originals
  back (also after a run killed by SIGKILL).
* ``run --freq MHZ [--nearest] [--emc MHZ|max] [--cpu MHZ|max] [--sysfs-root DIR] -- CMD ARGS...``:
  lock, run the command, return its exit code, restore; on SIGINT/SIGTERM forward the signal to
  the command, restore, and exit with 128 + signal number.

``--sysfs-io MODULE:CLASS`` (default ``$DVFSLAB_SYSFS_IO``) injects another sysfs I/O class
for a test tree (the fake kernel); it is refused with the real root ``/``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys

from dvfslab.cli.common import (
    Forwarder,
    Signalled,
    board_options,
    exit_code,
    open_clocks,
    state_line,
    sysfs_io,
)
from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import ClockControl, format_mhz


def register(sub) -> None:
    p = sub.add_parser("devices", help="show clock control, power rails, permissions, board, power mode")
    board_options(p)
    p.set_defaults(func=run_devices)

    p = sub.add_parser("clocks", help="list, set or restore the Jetson GPU clock")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--list", action="store_true", help="levels and current state (default)")
    g.add_argument("--set", type=float, metavar="MHZ", help="pin the GPU at this level (stays pinned)")
    g.add_argument("--restore", action="store_true", help="restore the clocks saved before the first change")
    p.add_argument("--nearest", action="store_true", help="with --set: snap to the nearest level")
    pin_arguments(p, "with --set: ")
    board_options(p)
    p.set_defaults(func=run_clocks)

    p = sub.add_parser("run", help="run a command with the GPU pinned, then restore the clocks")
    p.add_argument("--freq", type=float, required=True, metavar="MHZ", help="GPU level to lock")
    p.add_argument("--nearest", action="store_true", help="snap --freq to the nearest level")
    pin_arguments(p)
    board_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run_command)


def pin_arguments(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--emc`` / ``--cpu`` (MHz or ``max``; absent: the clock is left to the board)."""
    p.add_argument("--emc", metavar="MHZ|max", default=None,
                   help=f"{prefix}also pin the memory clock (EMC) at this rate, or at the power mode's highest "
                        "('max'); Jetson only, needs root (debugfs). Default: left to the board")
    p.add_argument("--cpu", metavar="MHZ|max", default=None,
                   help=f"{prefix}also pin every online CPU cluster at this level, or 'max'. Default: left to "
                        "their governor")


def pin_others(clocks: ClockControl, settings: dict) -> list[str]:
    """Pin the other clocks named in ``settings`` (``{"emc": "max" | MHz | "none", ...}``, in the
    order of :data:`~dvfslab.hw.base.OTHER_CLOCKS`) on ``clocks``; one line per clock for the user.
    ``dvfslab govern`` can call it after its GPU lock. A clock the backend does not offer, or
    cannot pin here, is a :class:`DvfsError` naming the fix; nothing is left pinned then."""
    from dvfslab.hw.base import OTHER_CLOCKS, PIN_NONE, parse_pin, resolve_pin

    lines = []
    offered = clocks.other_clocks()
    for name in OTHER_CLOCKS:
        setting = parse_pin(settings.get(name), f"--{name}")
        if setting is None or setting == PIN_NONE:
            continue
        clock = offered.get(name)
        if clock is None:
            raise DvfsError(f"--{name}: this backend cannot pin the {name} clock (pinning the EMC and the CPU "
                            "clusters is Jetson-only)")
        why_not = clock.support()
        if why_not is not None:
            raise DvfsError(f"--{name}: cannot pin the {clock.label}: {why_not}")
        check = clock.pin(resolve_pin(clock, setting))
        how = (f"read back {format_mhz(check.measured_mhz)} MHz ({check.source})" if check.verified
               else check.why)
        lines.append(f"{clock.label} pinned at {format_mhz(check.requested_mhz)} MHz; {how}")
    return lines


# -- devices --------------------------------------------------------------------------------
def _jetson_lines(args, io) -> list[str]:
    from dvfslab.hw.jetson.backend import open_backend

    be = open_backend(io=io, state_dir=args.state_dir)
    d, clocks = be.description, be.clocks
    lines = [f"jetson: {d['board'] or 'unknown board'}, {d['jetpack'] or 'unknown release'}, "
             f"power mode {d['power_mode'] or 'unknown (nvpmodel not found)'}",
             f"  GPU devfreq: {d['devfreq']} ({d['gpu']})",
             "  levels (MHz): " + " ".join(format_mhz(f) for f in d["levels_mhz"]),
             "  clocks now: " + state_line(clocks.state())] + _rule_lines(clocks) + _other_lines(clocks)
    if d["clock_writable"]:
        lines.append("  clock control: writable")
    else:
        lines.append("  clock control: NOT writable by this user (run as root, or add the udev rule "
                     "in docs/hardware.md)")
    saved = clocks.state_file.load()
    if saved is not None:
        lines.append(f"  state file: {clocks.state_file.path}: originals {saved.describe()}; "
                     "`dvfslab clocks --restore` puts them back")
    lines.append("  power rails: " + _rails_text(be.power, d))
    if be.power is not None and be.power.support_note:  # an untested board says so
        lines.append(f"  {be.power.support_note}")
    load = be.telemetry.gpu_load_pct()
    lines.append(f"  GPU load: {'unknown' if load is None else f'{load:g} %'}")
    temps = be.telemetry.temperatures_c()
    lines.append("  temperatures: " + (", ".join(f"{k} {v:.1f} C" for k, v in temps.items()) or "none"))
    return lines


def _rule_lines(clocks) -> list[str]:
    """Power mode limits, effective range, rail-gating and the MAXN-baseline check."""
    mode = clocks.power_mode()
    rng = clocks.effective_range(mode)
    base = clocks.baseline_check()
    rail = clocks.railgate_state()
    return [f"  power mode limits: {mode.cap_text() if mode else 'unknown (nvpmodel not found)'}",
            f"  effective range: {format_mhz(rng.min_freq_mhz)}-{format_mhz(rng.max_freq_mhz)} MHz"
            + (f" (limited by {rng.limited_by})" if rng.limited_by else ""),
            f"  rail-gating (power/control): {rail or 'unknown (no power/control file)'}",
            "  MAXN baseline: " + ("ok" if base.ok else "NOT ready: " + "; ".join(base.problems))]


def _lock_check_line(clocks: ClockControl) -> str:
    check = clocks.last_lock_check
    if check is None:
        return ""
    return (f"; measured {format_mhz(check.measured_mhz)} MHz ({check.source})" if check.verified
            else f"; lock {check.why}")


def _rails_text(power, description: dict) -> str:
    """One line: every rail in mW, which make CPU+GPU, the sensor interval (or why none)."""
    if power is None:
        return f"none ({description.get('power_error')})"
    try:
        sample = power.read()
    except DvfsError as err:
        return f"unreadable ({err})"
    finally:
        power.close()
    rails = ", ".join(f"{k} {v:.0f} mW" for k, v in sample.power_mw.items())
    interval = f"{power.update_interval_s * 1000:g} ms" if power.update_interval_s else "unknown"
    return (f"{rails}; CPU+GPU = {' + '.join(power.total_rails)} ({power.board_family}); "
            f"sensor update interval {interval}")


def _nvml_line(args) -> tuple[str, bool]:
    """(the nvml line, whether NVML offers clock control or power)."""
    if args.sysfs_root != "/":
        return "nvml: not probed (--sysfs-root points at another tree)", False
    from dvfslab.hw.nvml import open_backend

    try:
        be = open_backend()
    except DvfsError as err:
        return f"nvml: not available ({err})", False
    return (f"nvml: {be.description['gpu']}: clock control {'yes' if be.clocks else 'no'}, "
            f"power {'yes' if be.power else 'no'}"), True


def _jtop_line(args) -> str:
    if importlib.util.find_spec("jtop") is None:
        return "jtop: jetson-stats not installed"
    sock = os.path.join(args.sysfs_root, "run/jtop.sock")
    state = "running" if os.path.exists(sock) else f"not running (no {sock}; sudo systemctl start jtop.service)"
    return f"jtop: installed, service {state}"


def run_devices(args) -> int:
    """Print what is available; exit 0 when a GPU backend was found, else 1."""
    found = False
    io = sysfs_io(args)  # a refused --sysfs-io is an error, not "jetson: not available"
    try:
        lines = _jetson_lines(args, io)
        found = True
    except DvfsError as err:
        lines = [f"jetson: not available ({err})"]
    nvml, nvml_ok = _nvml_line(args)
    found = found or nvml_ok
    print("\n".join(lines + [nvml, _jtop_line(args)]))
    return 0 if found else 1


# -- clocks ---------------------------------------------------------------------------------
def run_clocks(args) -> int:
    clocks = open_clocks(args)
    if args.set is None and (args.emc is not None or args.cpu is not None):
        raise DvfsError("--emc / --cpu go with --set GPU_MHZ (e.g. `dvfslab clocks --set 612 --emc max`)")
    if args.set is not None:
        st = clocks.lock(args.set, nearest=args.nearest)
        hz = round(st.cur_freq_mhz * 1e6)
        try:
            others = pin_others(clocks, {"emc": args.emc, "cpu": args.cpu})
        except BaseException:
            clocks.reset()  # all or nothing: a refused --emc / --cpu leaves no GPU lock behind
            raise
        print(f"GPU locked at {format_mhz(st.cur_freq_mhz)} MHz (min_freq = max_freq = {hz})"
              f"{_lock_check_line(clocks)}; originals saved in {clocks.state_file.path}; undo with "
              "`dvfslab clocks --restore`")
        for line in others:
            print(line)
        return 0
    if args.restore:
        saved = clocks.restore_saved()
        if saved is None:
            print(f"nothing to restore (no state file {clocks.state_file.path}); clocks now: "
                  + state_line(clocks.state()))
            return 0
        if saved.pid != os.getpid() and _alive(saved.pid):
            print(f"warning: pid {saved.pid}, which changed the clocks, is still running", file=sys.stderr)
        more = f", and the {' and '.join(sorted(saved.others))} clocks" if saved.others else ""
        print(f"restored governor {saved.governor}, min_freq {saved.min_freq_hz}, max_freq "
              f"{saved.max_freq_hz}{more}; clocks now: " + state_line(clocks.state()))
        return 0
    st = clocks.state()
    print("levels (MHz): " + " ".join(format_mhz(f) for f in st.levels_mhz))
    print("now: " + state_line(st))
    mode = clocks.power_mode()
    print(f"power mode: {mode.describe() if mode else 'unknown (nvpmodel not found)'}")
    print("\n".join(line.strip() for line in _rule_lines(clocks) + _other_lines(clocks)))
    return 0


def _other_lines(clocks) -> list[str]:
    """One line per other clock: now, its levels and the mode's highest, or why it cannot be pinned."""
    lines = []
    for clock in clocks.other_clocks().values():
        now = clock.read_mhz()
        now_txt = "unreadable" if now is None else f"{format_mhz(now)} MHz"
        why_not = clock.support()
        if why_not is not None:
            lines.append(f"  {clock.label}: {now_txt}; cannot be pinned here: {why_not}")
            continue
        levels = " ".join(format_mhz(f) for f in clock.levels_mhz())
        lines.append(f"  {clock.label}: {now_txt}; levels (MHz): {levels}; the power mode allows up to "
                     f"{format_mhz(clock.max_allowed_mhz())} MHz")
    return lines


def _alive(pid: int) -> bool:
    from dvfslab.core.files import pid_alive

    return pid_alive(pid)


# -- run ------------------------------------------------------------------------------------
def run_command(args, clocks=None, prog: str = "dvfslab run") -> int:
    """Lock ``args.freq`` (``None``: leave the clock alone), run ``args.cmd``, restore.

    ``clocks``: any :class:`~dvfslab.hw.base.ClockControl` (default: the Jetson clocks under
    ``args.sysfs_root``); ``dvfslab govern`` reuses this.
    """
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    if not cmd:
        raise DvfsError(f"no command given; usage: {prog} ... -- CMD ARGS...")
    clocks = open_clocks(args) if clocks is None else clocks
    fwd = Forwarder()
    fwd.install()
    locked = False
    try:
        if args.freq is None:
            what = "GPU clock left to the board's default governor"
        else:
            st = clocks.lock(args.freq, nearest=args.nearest)
            what = f"GPU locked at {format_mhz(st.cur_freq_mhz)} MHz{_lock_check_line(clocks)}"
        others = pin_others(clocks, {"emc": getattr(args, "emc", None), "cpu": getattr(args, "cpu", None)})
        what += "".join(f"; {line}" for line in others)
        locked = True
        print(f"{prog}: {what}; running: {' '.join(cmd)}", file=sys.stderr, flush=True)
        try:
            fwd.child = subprocess.Popen(cmd)
        except OSError as err:
            raise DvfsError(f"cannot start {cmd[0]!r}: {err.strerror or err}") from err
        return exit_code(fwd.child.wait())
    except Signalled as sig:
        if not fwd.forwarded:
            fwd.forward(sig.signum)
        clocks.reset()  # restore first, then wait for the command to finish
        if fwd.child is not None:
            fwd.child.wait()
        print(f"{prog}: {signal.Signals(sig.signum).name} forwarded to the command", file=sys.stderr)
        return 128 + sig.signum
    finally:
        clocks.reset()
        fwd.uninstall()
        if locked:
            print(f"{prog}: clocks restored: {state_line(clocks.state())}", file=sys.stderr)
