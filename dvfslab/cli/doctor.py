"""``dvfslab doctor``: is this machine ready for a days-long sweep? One line per check.

    dvfslab doctor [--backend {auto,jetson,nvml}] [--json] [--sample-s S] [--no-lock]
                   [--power-mode-ok] [--index N] [--sysfs-root DIR [--sysfs-io MODULE:CLASS]]
    dvfslab doctor --dataset DIR [--json]

Each line is ``ok``, ``warn`` or ``fail`` with what was found and, when not ok, the fix; the exit
code is 1 when any line fails, else 0 (2 for an error such as a refused ``--sysfs-io``). The
checks are :mod:`dvfslab.hw.doctor` (Jetson) and :mod:`dvfslab.hw.doctor_nvml` (NVML); this
module adds the short power sample (``--sample-s`` seconds with the sampler's default period, on
the board's clock, or on the virtual clock of an injected sysfs I/O class that carries one, as
the blocking fake INA3221 does) and runs the lock test last: the lowest and the highest allowed
level, restored afterwards through the clocks' own reset, also on SIGINT / SIGTERM, then the
other clocks (the memory clock and the CPU clusters: can they be pinned, does a pin hold).
``--dataset DIR`` checks a past dataset instead: valid, and whether its other clocks wandered.
Without a board, ``python -m dvfslab.testing.rehearse`` runs these checks on the fake AGX Orin
tree in a temporary folder (said in ``--help``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dvfslab.cli import common
from dvfslab.hw.base import BackendUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.hw.jetson.sysfs import SysfsIO

DEFAULT_SAMPLE_S = 2.0


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check the board (or dGPU) before a long sweep: ok / warn / fail and the fix",
                       epilog="Rehearse without a board: `python -m dvfslab.testing.rehearse` builds the fake AGX Orin "
                              "tree in a temporary folder and runs these checks on it (the lock test included, on "
                              "the fake kernel's rules), so a laptop shows what the board will be asked; nothing "
                              "real is touched.")
    p.add_argument("--backend", choices=("auto", "jetson", "nvml"), default="auto",
                   help="the Jetson's sysfs, NVML, or the first found (default)")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--sample-s", type=float, default=DEFAULT_SAMPLE_S, metavar="S",
                   help=f"seconds of power sampling for the achieved rate (default {DEFAULT_SAMPLE_S:g})")
    p.add_argument("--no-lock", action="store_true", help="skip the lock test (the clocks are not touched)")
    p.add_argument("--power-mode-ok", action="store_true",
                   help="a power mode other than MAXN is a warning, not a failure (as sweep --power-mode-ok)")
    p.add_argument("--index", type=int, default=0, metavar="N", help="NVML GPU index (default 0)")
    p.add_argument("--dataset", metavar="DIR",
                   help="check a past dataset (or sweep directory) instead of the board: does it validate, and did "
                        "the memory clock or the CPU clusters wander across (or during) its runs")
    common.board_options(p)
    p.set_defaults(func=run)


class TimeSource:
    """The clock a sample runs on and how it waits: real time, or a virtual clock (``advance``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 advance: Callable[[float], None] | None = None):
        self.clock, self.advance = clock, advance

    @classmethod
    def for_io(cls, io: SysfsIO) -> TimeSource:
        """The injected sysfs I/O's own virtual clock when it carries one
        (:attr:`~dvfslab.hw.jetson.sysfs.SysfsIO.virtual_clock`), else real time."""
        clock = io.virtual_clock
        return cls() if clock is None else cls(clock, clock.advance)

    def wait_until(self, end_s: float) -> Callable[[float], bool]:
        def wait(delay_s: float) -> bool:
            if self.advance is not None:
                self.advance(delay_s)
            elif delay_s > 0:
                time.sleep(delay_s)
            return self.clock() >= end_s
        return wait


def sample_stats(reader, t: TimeSource, seconds: float) -> dict:
    """``PowerSampler.stats()`` after ``seconds`` of sampling at the default period."""
    from dvfslab.measure.loop import tick_loop
    from dvfslab.measure.sampler import PowerSampler

    sampler = PowerSampler(reader, clock=t.clock, threaded=False).start()
    tick_loop(sampler.period_s, t.clock, sampler.sample_once, t.wait_until(t.clock() + seconds))
    sampler.stop()
    return sampler.stats()


def _sampler_line(reader, t: TimeSource, seconds: float):
    from dvfslab.hw.doctor import check_sampler

    try:
        return check_sampler(sample_stats(reader, t, seconds), seconds)
    finally:
        reader.close()


def jetson_report(args, t: TimeSource | None = None, io=None) -> list:
    """The Jetson lines; ``io`` replaces the sysfs I/O of ``--sysfs-root`` / ``--sysfs-io``."""
    from dvfslab.hw.doctor import check_lock, check_other_clocks, jetson_checks
    from dvfslab.hw.jetson.clocks import JetsonClocks

    io = io if io is not None else common.sysfs_io(args)
    t = t or TimeSource.for_io(io)
    clocks = JetsonClocks(io=io, state_dir=args.state_dir, handle_signals=True)
    with clocks:  # restores on exit and on SIGINT / SIGTERM
        checks, reader = jetson_checks(io, clocks, t.clock, power_mode_ok=args.power_mode_ok)
        if reader is not None:
            checks.append(_sampler_line(reader, t, args.sample_s))
        if not args.no_lock:
            checks.append(check_lock(clocks))
        checks += check_other_clocks(clocks, try_pin=not args.no_lock)
    return checks


def nvml_report(args, t: TimeSource | None = None, io=None) -> list:
    from dvfslab.hw.doctor_nvml import (
        check_other_clocks,
        nvml_checks,
        nvml_lock_check,
        open_session,
    )

    t = t or TimeSource()
    s = open_session(args.index)
    checks, reader = nvml_checks(s, t.clock)
    if reader is not None:
        checks.append(_sampler_line(reader, t, args.sample_s))
    if not args.no_lock and checks[0].status != "fail":
        checks.append(nvml_lock_check(s))
    if checks[0].status != "fail":
        checks.append(check_other_clocks())
    return checks


def dataset_report(path) -> list:
    """The lines of ``--dataset DIR``: the contract, then per other clock whether it wandered:
    across the fixed runs (runs.csv, :func:`dvfslab.data.contract.clock_warnings`) and, in a sweep
    directory, between the start and the end of a run (``runs/<run_id>.json`` extras.clocks)."""
    import json
    from pathlib import Path

    from dvfslab.data.contract import (
        CLOCK_COLUMNS,
        DatasetError,
        clock_warnings,
        dataset_pins,
        load_dataset,
    )
    from dvfslab.hw.doctor import Check

    try:
        ds = load_dataset(path)
    except DatasetError as err:
        return [Check("dataset", "fail", str(err), "fix the file named, or regenerate the dataset")]
    checks = [Check("dataset", "ok", f"{path}: {ds.summary_line()}")]
    warnings = clock_warnings(ds)
    drifted: dict[str, list[str]] = {}
    for rec_path in sorted(Path(path, "runs").glob("*.json")):
        try:
            rec = json.loads(rec_path.read_text())
        except (OSError, ValueError):
            continue
        clocks = (rec.get("extras") or {}).get("clocks") or {}
        start, end = clocks.get("start_mhz") or {}, clocks.get("end_mhz") or {}  # end None: not the run's
        for name in CLOCK_COLUMNS:
            a, b = start.get(name), end.get(name)
            if a is not None and b is not None and abs(a - b) >= 0.5 and rec["row"].get("policy") == "fixed":
                drifted.setdefault(name, []).append(f"{rec_path.stem} ({a:g} -> {b:g} MHz)")
    pins = dataset_pins(ds.meta)
    for name, col in CLOCK_COLUMNS.items():
        title = f"{name} (dataset)"
        mine = [w for w in warnings if col in w]
        if name in drifted:
            runs = drifted[name]
            mine.append(f"{len(runs)} fixed runs ended at another {name} clock than they started: "
                        + ", ".join(runs[:3]) + (" ..." if len(runs) > 3 else ""))
        if col not in ds.runs.columns and ds.simulated:  # the twin's clocks are its model's: nothing to read back
            checks.append(Check(title, "ok", f"runs.csv has no {col}: a simulated dataset, whose {name} clock is "
                                "the twin's model, not a reading (a joint sweep of the twin records it)"))
        elif col not in ds.runs.columns:
            checks.append(Check(title, "ok" if pins.get(name) in (None, "none") else "warn",
                                f"runs.csv has no {col}: the {name} clock was not recorded"
                                + ("" if pins.get(name) in (None, "none") else f" although the plan pins it ({name}="
                                   f"{pins[name]}): a backend that cannot read it"),
                                f"record it: sweep on a Jetson as root (the {name} clock is read back every run)"))
        elif mine:
            checks.append(Check(title, "warn", "; ".join(mine),
                                f"sweep again with --{name} max (the default) as root; check `dvfslab doctor` first"))
        else:
            checks.append(Check(title, "ok", f"{col} held one level over the fixed runs"
                                + (f" (pinned: {name}={pins[name]})" if pins.get(name) not in (None, "none") else "")))
    return checks


def collect(args, t: TimeSource | None = None, io=None) -> tuple[str, list]:
    """(the backend checked, its checks); a backend that is not there is one failing line.
    ``t`` and ``io`` are injected by tests (a virtual clock; a fake sysfs I/O object)."""
    from dvfslab.hw.doctor import Check

    order = ("jetson", "nvml") if args.backend == "auto" else (args.backend,)
    reasons = []
    for name in order:
        if name == "nvml" and args.sysfs_root != "/":
            reasons.append("nvml: not probed (--sysfs-root points at another tree)")
            continue
        try:
            return name, (jetson_report if name == "jetson" else nvml_report)(args, t, io)
        except BackendUnavailableError as err:
            reasons.append(f"{name}: {err}")
    fix = ("use a Jetson (--backend jetson) or a machine with an NVIDIA driver (--backend nvml); without a board, "
           "rehearse these checks on a fake AGX Orin: python -m dvfslab.testing.rehearse")
    return args.backend, [Check("backend", "fail", "no GPU backend found: " + "; ".join(reasons), fix)]


def format_report(backend: str, checks: list) -> str:
    lines = [f"dvfslab doctor: {backend}"]
    for c in checks:
        lines.append(f"{c.status:<5} {c.name}: {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"      fix: {c.fix}")
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
    lines.append(f"summary: {counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    return "\n".join(lines)


def run(args, t: TimeSource | None = None, io=None) -> int:
    if getattr(args, "dataset", None):
        backend, checks = f"dataset {args.dataset}", dataset_report(args.dataset)
    else:
        backend, checks = collect(args, t, io)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
        print(json.dumps({"backend": backend, "ok": not failed, "summary": counts,
                          "checks": [c.as_dict() for c in checks]}, indent=2))
    else:
        print(format_report(backend, checks))
    sys.stdout.flush()
    return 1 if failed else 0
