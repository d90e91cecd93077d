"""Read a ``tegrastats`` log as a power trace that replays like a saved sampler trace.

``tegrastats`` (every Jetson release) prints one line per interval (``--interval`` ms,
1000 by default). Each rail appears as ``NAME <now>mW/<avg>mW`` (JetPack 5/6) or
``NAME <now>/<avg>`` (JetPack 4, mW implied): the first number is the reading at that line,
the second a running average since tegrastats started; the trace keeps the first. JetPack 5
and later begin each line with ``MM-DD-YYYY HH:MM:SS`` (local time, 1 s resolution). The GPU
appears as ``GR3D_FREQ <load>%`` with ``@<MHz>`` or ``@[<MHz>,<MHz>]`` (one per GPC; the
highest is kept, and 0 MHz, a rail-gated GPU, is left unknown). Rails named ``NC`` (not
connected) are skipped.

Times: ``interval_s`` given, sample ``i`` is at ``i * interval_s``; otherwise the line
timestamps are used, and a log whose timestamps repeat (an interval under 1 s) or that has
none (JetPack 4) is refused with the fix (pass the interval). :func:`import_tegrastats` writes
the trace with :func:`~dvfslab.measure.trace.write_trace`, so :func:`load_samples` and
:class:`ReplayPowerReader` read it back and energy windows integrate it like any trace.
"""

from __future__ import annotations

import math
import os
import re
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


def _times_s(lines: Sequence[TegrastatsLine], interval_s: float | None, source: str) -> np.ndarray:
    """Sample times from the interval, else from the timestamps (refused when ambiguous)."""
    if interval_s is not None:
        if not interval_s > 0:
            raise SampleFileError(f"{source}: interval must be > 0 s, got {interval_s!r}")
        return np.arange(len(lines), dtype=float) * interval_s
    if any(ln.stamp is None for ln in lines):
        raise SampleFileError(f"{source}: lines have no timestamps (JetPack 4 tegrastats); pass the "
                              "interval tegrastats ran with (--interval-ms, default 1000)")
    stamps = [datetime.strptime(ln.stamp, STAMP_FORMAT) for ln in lines]
    t = np.array([(s - stamps[0]).total_seconds() for s in stamps])
    steps = np.diff(t)
    if np.any(steps <= 0):
        i = int(np.argmax(steps <= 0)) + 1
        raise SampleFileError(f"{source}: timestamps repeat or go back at line {i + 1} ({lines[i].stamp}); "
                              "tegrastats stamps whole seconds, so with --interval under 1000 ms pass "
                              "that interval (--interval-ms)")
    return t


def read_tegrastats(log: str | os.PathLike | Iterable[str], *, interval_s: float | None = None,
                    total_rails: Sequence[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """Parse a tegrastats log (a path or lines) into a trace frame and its sidecar dict.

    The frame has ``t_s`` (from 0), ``<rail>_mw``, ``total_mw`` and, when the log has them,
    ``gpu_util_pct`` / ``gpu_freq_mhz``. Lines missing a rail the first line had are skipped
    and counted (``n_skipped``); a log with no rail line at all is refused.
    """
    source = str(log) if isinstance(log, (str, os.PathLike)) else "<lines>"
    raw = Path(log).read_text(errors="replace").splitlines() if isinstance(log, (str, os.PathLike)) else list(log)
    parsed = [p for p in (parse_line(ln) for ln in raw) if p is not None]
    if not parsed:
        raise SampleFileError(f"{source}: no tegrastats line with power rails (NAME <mW>/<mW>) found; "
                              "is this a tegrastats log (tegrastats --logfile FILE)?")
    rails = list(parsed[0].rails_mw)
    kept = [p for p in parsed if set(rails) <= set(p.rails_mw)]
    family, default_total = board_family(rails)
    total = tuple(total_rails or default_total)
    missing = [r for r in total if r not in rails]
    if missing:
        raise SampleFileError(f"{source}: total rails {missing} are not in the log's rails {rails}")
    t = _times_s(kept, interval_s, source)
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
            "n_samples": len(kept), "n_skipped": len(parsed) - len(kept),
            "first_stamp": kept[0].stamp, "last_stamp": kept[-1].stamp,
            "note": "rails are tegrastats' instantaneous readings; timestamps are local time"}
    return frame, meta


def import_tegrastats(log: str | os.PathLike, out: str | os.PathLike, *, interval_s: float | None = None,
                      total_rails: Sequence[str] | None = None) -> tuple[Path, pd.DataFrame, dict]:
    """Write the trace of ``log`` to ``out`` (``.csv`` or ``.parquet``) and its sidecar."""
    frame, meta = read_tegrastats(log, interval_s=interval_s, total_rails=total_rails)
    return write_trace(out, frame, meta), frame, meta
