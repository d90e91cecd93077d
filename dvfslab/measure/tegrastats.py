"""Read a ``tegrastats`` log as a power trace that replays like a saved sampler trace.

``tegrastats`` (every Jetson release) prints one line per interval (``--interval`` ms,
1000 by default). Each rail appears as ``NAME <now>mW/<avg>mW`` (JetPack 5/6) or
``NAME <now>/<avg>`` (JetPack 4, mW implied): the first number is the reading at that line,
the second a running average since tegrastats started; the trace keeps the first. JetPack 5
and later begin each line with ``MM-DD-YYYY HH:MM:SS`` (local time, 1 s resolution). The GPU
appears as ``GR3D_FREQ <load>%`` with ``@<MHz>`` or ``@[<MHz>,<MHz>]`` (one per GPC; the
highest is kept, and 0 MHz, a rail-gated GPU, is left unknown). Rails named ``NC`` (not
connected) are skipped.

Times: ``interval_s`` given, the ``k``-th non-blank line is at ``k * interval_s`` (a skipped
line still took its interval); otherwise the line timestamps are used, and a log whose
timestamps repeat (an interval under 1 s) or that has none (JetPack 4) is refused with the fix
(pass the interval), naming the line. A bad line (cut short, a rail missing, a broken
timestamp) is skipped with a warning that names its line number, or refuses the log with
``strict=True``. :func:`import_tegrastats` writes
the trace with :func:`~dvfslab.measure.trace.write_trace`, so :func:`load_samples` and
:class:`ReplayPowerReader` read it back and energy windows integrate it like any trace.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.hw.jetson.board import board_family
from dvfslab.measure.trace import SampleFileError, rail_column, write_trace

_STAMP = re.compile(r"^\s*(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s")
_RAIL = re.compile(r"(?<![\w@/])([A-Za-z][A-Za-z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?![\w/])")
_GR3D = re.compile(r"\bGR3D_FREQ (\d+)%(?:@\[?([\d,]+)\]?)?")
_NOT_RAILS = frozenset({"RAM", "SWAP", "IRAM", "NC"})
STAMP_FORMAT = "%m-%d-%Y %H:%M:%S"
_EPOCH = datetime(1970, 1, 1)
MAX_NAMED = 5  # bad lines named in the warning
MAX_LISTED = 100  # bad lines listed in the sidecar (all are counted)


@dataclass(frozen=True)
class TegrastatsLine:
    """One parsed line: its timestamp text (or None), rails in mW, GPU load % and clock MHz."""

    stamp: str | None
    rails_mw: dict[str, float] = field(default_factory=dict)
    gpu_util_pct: float | None = None
    gpu_freq_mhz: float | None = None


def parse_line(line: str) -> TegrastatsLine | None:
    """Parse one tegrastats line; ``None`` when it carries no rail (a blank or foreign line)."""
    rails = {name: float(now) for name, now, _avg in _RAIL.findall(line) if name.upper() not in _NOT_RAILS}
    if not rails:
        return None
    m = _STAMP.match(line)
    util = freq = None
    g = _GR3D.search(line)
    if g:
        util = float(g.group(1))
        clocks = [float(f) for f in (g.group(2) or "").split(",") if f]
        freq = max(clocks) if clocks and max(clocks) > 0 else None
    return TegrastatsLine(m.group(1) if m else None, rails, util, freq)


class TegrastatsWarning(UserWarning):
    """Bad lines of a tegrastats log were skipped (each named by its line number)."""


@dataclass
class _Log:
    """The lines of a log that make the trace, and the ones skipped (line number, why)."""

    source: str
    kept: list[tuple[int, TegrastatsLine]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def skip(self, number: int, why: str) -> None:
        self.skipped.append((number, why))

    def report(self, strict: bool) -> None:
        """Refuse the log at its first bad line (``strict``), else warn naming the bad lines."""
        if not self.skipped:
            return
        self.skipped.sort()
        if strict:
            n, why = self.skipped[0]
            raise SampleFileError(f"{self.source}: line {n}: {why}; repair or delete that line, "
                                  "or import without --strict to skip bad lines with a warning")
        shown = "; ".join(f"line {n}: {why}" for n, why in self.skipped[:MAX_NAMED])
        more = f"; and {len(self.skipped) - MAX_NAMED} more" if len(self.skipped) > MAX_NAMED else ""
        warnings.warn(f"{self.source}: skipped {len(self.skipped)} bad line(s): {shown}{more} "
                      "(strict=True / --strict refuses the log instead)", TegrastatsWarning, stacklevel=3)


def _lines(log: str | os.PathLike | Iterable[str], source: str) -> list[str]:
    if not isinstance(log, (str, os.PathLike)):
        return list(log)
    try:
        return Path(log).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        raise SampleFileError(f"{source}: no such file; give the path of a tegrastats log "
                              "(tegrastats --logfile FILE)") from None
    except OSError as err:
        raise SampleFileError(f"{source}: cannot read the log: {err.strerror or err}") from None


def _rail_set(parsed: Sequence[tuple[int, TegrastatsLine]]) -> list[str]:
    """The log's rails: the set most lines carry (a cut-short first line does not decide it),
    in the order of the first line that carries it."""
    counts = Counter(frozenset(p.rails_mw) for _, p in parsed)
    common = counts.most_common(1)[0][0]
    return next(list(p.rails_mw) for _, p in parsed if frozenset(p.rails_mw) == common)


def _stamp_s(text: str) -> float | None:
    """Seconds of a line's (local, naive) timestamp; ``None`` when it is not a date."""
    try:
        return (datetime.strptime(text, STAMP_FORMAT) - _EPOCH).total_seconds()
    except ValueError:
        return None


def _times_s(log: _Log, numbers: dict[int, int], interval_s: float | None) -> np.ndarray:
    """Sample times: line ``k`` (counting every non-blank line, bad ones too, as one interval)
    at ``k * interval_s``; else from the timestamps, refused when ambiguous."""
    if interval_s is not None:
        if not interval_s > 0:
            raise SampleFileError(f"{log.source}: interval must be > 0 s, got {interval_s!r}")
        return np.array([numbers[n] * interval_s for n, _ in log.kept], dtype=float)
    if all(p.stamp is None for _, p in log.kept):
        raise SampleFileError(f"{log.source}: lines have no timestamps (JetPack 4 tegrastats); pass the "
                              "interval tegrastats ran with (--interval-ms, default 1000)")
    stamped: list[tuple[int, TegrastatsLine]] = []
    t: list[float] = []
    for n, p in log.kept:
        s = None if p.stamp is None else _stamp_s(p.stamp)
        if s is None:
            log.skip(n, "no timestamp" if p.stamp is None else f"not a date: {p.stamp!r}")
            continue
        if t and s <= t[-1]:
            raise SampleFileError(f"{log.source}: timestamps repeat or go back at line {n} ({p.stamp}); "
                                  "tegrastats stamps whole seconds, so with --interval under 1000 ms "
                                  "pass that interval (--interval-ms)")
        stamped.append((n, p))
        t.append(s)
    log.kept = stamped
    return np.array(t) - t[0] if t else np.array([])


def read_tegrastats(log: str | os.PathLike | Iterable[str], *, interval_s: float | None = None,
                    total_rails: Sequence[str] | None = None,
                    strict: bool = False) -> tuple[pd.DataFrame, dict]:
    """Parse a tegrastats log (a path or lines) into a trace frame and its sidecar dict.

    The frame has ``t_s`` (from 0), ``<rail>_mw``, ``total_mw`` and, when the log has them,
    ``gpu_util_pct`` / ``gpu_freq_mhz``. A bad line (no power rail, a rail of the log missing,
    no or a broken timestamp among stamped lines: a log cut short or corrupted) is skipped with
    one :class:`TegrastatsWarning` naming its line number, and counted (``n_skipped``, the first
    ones in ``skipped``); with ``strict=True`` the first bad line refuses the log. Blank lines
    are ignored. A log with no rail line at all is refused.
    """
    source = str(log) if isinstance(log, (str, os.PathLike)) else "<lines>"
    state = _Log(source)
    numbers: dict[int, int] = {}  # line number -> its place among the non-blank lines
    parsed: list[tuple[int, TegrastatsLine]] = []
    for number, text in enumerate(_lines(log, source), start=1):
        if not text.strip():
            continue
        numbers[number] = len(numbers)
        p = parse_line(text)
        (parsed.append((number, p)) if p is not None else
         state.skip(number, "no power rail (NAME <mW>/<mW>): cut short or not a tegrastats line"))
    if not parsed:
        raise SampleFileError(f"{source}: no tegrastats line with power rails (NAME <mW>/<mW>) found; "
                              "is this a tegrastats log (tegrastats --logfile FILE)?")
    rails = _rail_set(parsed)
    for number, p in parsed:
        lacking = [r for r in rails if r not in p.rails_mw]
        if lacking:
            state.skip(number, f"rail {', '.join(lacking)} missing")
        else:
            state.kept.append((number, p))
    family, default_total = board_family(rails)
    total = tuple(total_rails or default_total)
    missing = [r for r in total if r not in rails]
    if missing:
        raise SampleFileError(f"{source}: total rails {missing} are not in the log's rails {rails}")
    t = _times_s(state, numbers, interval_s)
    kept = [p for _, p in state.kept]
    if not kept and not strict:
        raise SampleFileError(f"{source}: no usable tegrastats line (line {state.skipped[0][0]}: "
                              f"{state.skipped[0][1]})")
    state.report(strict)
    frame = pd.DataFrame({"t_s": t})
    for r in rails:
        frame[rail_column(r)] = [p.rails_mw[r] for p in kept]
    frame["total_mw"] = frame[[rail_column(r) for r in total]].sum(axis=1)
    if any(p.gpu_util_pct is not None for p in kept):
        frame["gpu_util_pct"] = [math.nan if p.gpu_util_pct is None else p.gpu_util_pct for p in kept]
        frame["gpu_freq_mhz"] = [math.nan if p.gpu_freq_mhz is None else p.gpu_freq_mhz for p in kept]
    frame.attrs.update(rails=rails, total_rails=list(total))
    period = interval_s if interval_s is not None else (float(np.median(np.diff(t))) if t.size > 1 else None)
    meta = {"source": "tegrastats", "simulated": False, "log": source, "rails": rails,
            "total_rails": list(total), "rail_family": family,
            "columns": {r: rail_column(r) for r in rails}, "update_interval_s": period,
            "n_samples": len(kept), "n_skipped": len(state.skipped),
            "skipped": [{"line": n, "why": why} for n, why in state.skipped[:MAX_LISTED]],
            "first_stamp": kept[0].stamp if kept else None, "last_stamp": kept[-1].stamp if kept else None,
            "note": "rails are tegrastats' instantaneous readings; timestamps are local time"}
    return frame, meta


def import_tegrastats(log: str | os.PathLike, out: str | os.PathLike, *, interval_s: float | None = None,
                      total_rails: Sequence[str] | None = None,
                      strict: bool = False) -> tuple[Path, pd.DataFrame, dict]:
    """Write the trace of ``log`` to ``out`` (``.csv`` or ``.parquet``) and its sidecar."""
    frame, meta = read_tegrastats(log, interval_s=interval_s, total_rails=total_rails, strict=strict)
    return write_trace(out, frame, meta), frame, meta
