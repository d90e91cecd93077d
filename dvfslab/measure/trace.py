"""Saved power traces: write and read sample files, and replay them as a ``PowerReader``.

A trace is ``samples/<name>.csv`` (or ``.parquet`` when pyarrow is installed) with columns
``t_s``, one ``<rail>_mw`` per rail, ``total_mw`` and optionally ``gpu_util_pct`` /
``gpu_freq_mhz``, plus a sidecar ``samples/<name>.meta.json`` holding ``rails``,
``total_rails``, the sensor's ``update_interval_s``, the sampler's settings, lost-read
counts and the windows measured. :class:`ReplayPowerReader` serves a trace back on the
current clock, so the sampler and everything above it run unchanged on recorded data.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    jsonable,
    utc_now,
)
from dvfslab.hw.base import PowerReader, PowerReadError, PowerSample
from dvfslab.measure.energy import SampleArrays

log = logging.getLogger(__name__)

TRACE_FORMAT = "dvfslab.measure.sampler-samples"
TRACE_VERSION = 1
MAX_LOST_SAVED = 1000  # lost-read times kept in a sidecar (the count is always complete)


class SampleFileError(DvfsError):
    """A sample trace cannot be written, read back or replayed as asked."""


def rail_column(rail: str) -> str:
    """Column name of a rail in sample frames and files: ``VDD_GPU_SOC -> VDD_GPU_SOC_mw``."""
    return f"{rail}_mw"


def sidecar_path(path: str | os.PathLike) -> Path:
    """``samples/run-1.csv -> samples/run-1.meta.json`` (the trace's metadata)."""
    return Path(path).with_suffix(".meta.json")


def samples_frame(arrays: SampleArrays, total_rails: Sequence[str]) -> pd.DataFrame:
    """Tidy frame of stored samples: ``t_s``, ``<rail>_mw`` per rail, ``total_mw`` (sum of
    ``total_rails``), and ``gpu_util_pct`` / ``gpu_freq_mhz`` when the samples carry them.
    ``frame.attrs`` holds ``rails`` and ``total_rails``."""
    frame = pd.DataFrame({"t_s": arrays.t_s})
    for rail, mw in arrays.rails_mw.items():
        frame[rail_column(rail)] = mw
    frame["total_mw"] = arrays.total_mw(total_rails)
    if arrays.gpu_util_pct is not None:
        frame["gpu_util_pct"] = arrays.gpu_util_pct
    if arrays.gpu_freq_mhz is not None:
        frame["gpu_freq_mhz"] = arrays.gpu_freq_mhz
    frame.attrs.update(rails=list(arrays.rails_mw), total_rails=list(total_rails))
    return frame


def write_trace(path: str | os.PathLike, frame: pd.DataFrame, sidecar: dict) -> Path:
    """Write the samples file then its sidecar, each atomically; return the samples path."""
    path = Path(path)
    _write_frame(path, frame)
    meta = {"format": TRACE_FORMAT, "version": TRACE_VERSION, **sidecar}
    atomic_write_json(sidecar_path(path), jsonable(meta))
    return path


class SavedSampler(Protocol):
    """What saving reads from a :class:`~dvfslab.measure.sampler.PowerSampler`."""

    reader: Any
    rails: tuple[str, ...]
    total_rails: tuple[str, ...]
    period_s: float
    threaded: bool
    idle_power_w: float | None
    measurements: list

    @property
    def n_samples(self) -> int: ...
    def lost_t_s(self) -> list[float]: ...
    def samples(self) -> pd.DataFrame: ...


def sampler_sidecar(sampler: SavedSampler, meta: Mapping | None = None) -> dict:
    """What a sidecar records about ``sampler``: rails, settings, lost reads, idle, windows."""
    lost = sampler.lost_t_s()
    return {
        "rails": list(sampler.rails), "total_rails": list(sampler.total_rails),
        "columns": {r: rail_column(r) for r in sampler.rails},
        "update_interval_s": sampler.reader.update_interval_s,
        "period_s": sampler.period_s, "threaded": sampler.threaded,
        "reader": type(sampler.reader).__name__, "n_samples": sampler.n_samples,
        "n_lost": len(lost), "lost_t_s": lost[:MAX_LOST_SAVED],
        "idle_power_w": sampler.idle_power_w,
        "windows": [m.to_dict() for m in sampler.measurements],
        "saved_at": utc_now(),
        "meta": dict(meta or {}),
    }


def save_sampler(sampler: SavedSampler, path: str | os.PathLike, meta: Mapping | None = None) -> Path:
    """Write ``sampler``'s samples and its sidecar (see :func:`write_trace`)."""
    return write_trace(path, sampler.samples(), sampler_sidecar(sampler, meta))


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _write_frame(path: Path, frame: pd.DataFrame) -> None:
    suffix = path.suffix.lower()
    if suffix == ".csv":  # default float repr round-trips exactly (monotonic times need it)
        atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n"))
    elif suffix == ".parquet":
        if not _has_pyarrow():
            raise SampleFileError(f"{path}: writing parquet needs pyarrow; pip install pyarrow "
                                  "or save with a .csv suffix")
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        atomic_write_bytes(path, buf.getvalue())
    else:
        raise SampleFileError(f"{path}: unknown sample file suffix {path.suffix!r}; use .csv or .parquet")


def _read_frame(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise SampleFileError(f"{path}: no such sample file; save one with PowerSampler.save(path)")
    if path.suffix.lower() == ".parquet":
        if not _has_pyarrow():
            raise SampleFileError(f"{path}: reading parquet needs pyarrow; pip install pyarrow")
        return pd.read_parquet(path)
    return pd.read_csv(path)


def _rails_from_columns(frame: pd.DataFrame) -> list[str]:
    """Rails named by the ``<rail>_mw`` columns (``total_mw`` excluded)."""
    return [c[:-3] for c in frame.columns if c.endswith("_mw") and c != "total_mw"]


def load_samples(path: str | os.PathLike) -> tuple[pd.DataFrame, dict]:
    """Read a saved trace and its sidecar; returns ``(frame, meta)``.

    ``frame.attrs`` gets ``rails`` and ``total_rails``. Without a sidecar the rails are the
    ``*_mw`` columns and every rail counts towards the total (a warning is logged).
    """
    path = Path(path)
    frame = _read_frame(path)
    side = sidecar_path(path)
    try:
        meta = json.loads(side.read_text()) if side.exists() else {}
    except (OSError, ValueError) as err:
        raise SampleFileError(f"{side}: unreadable sidecar ({err}); fix or delete it") from err
    if "t_s" not in frame.columns:
        raise SampleFileError(f"{path}: column 't_s' is missing; a sample file needs t_s and <rail>_mw columns")
    rails = meta.get("rails") or _rails_from_columns(frame)
    if not meta:
        log.warning("%s: no sidecar %s; taking every rail %s as part of the total", path, side.name, rails)
    missing = [rail_column(r) for r in rails if rail_column(r) not in frame.columns]
    if missing or not rails:
        raise SampleFileError(f"{path}: rail columns {missing or '(none)'} are missing; expected one "
                              f"<rail>_mw column per rail listed in {side.name}")
    frame.attrs.update(rails=list(rails), total_rails=list(meta.get("total_rails") or rails))
    return frame, meta


class ReplayPowerReader(PowerReader):
    """A :class:`PowerReader` that serves a recorded trace on the current clock.

    The first ``read()`` (or ``start_s``) anchors the clock to the trace's first sample;
    afterwards ``read()`` returns the trace at ``clock() - anchor`` after its start, linearly
    interpolated (``mode="linear"``) or the latest recorded sample (``mode="hold"``). GPU
    frequency is always held (it is a level). Past the end of the trace ``read()`` raises
    :class:`PowerReadError` (counted as lost by the sampler) unless ``loop=True``.
    """

    def __init__(self, trace: pd.DataFrame | str | os.PathLike,
                 clock: Callable[[], float] = time.monotonic, *, mode: str = "linear",
                 loop: bool = False, start_s: float | None = None,
                 total_rails: tuple[str, ...] | None = None):
        if mode not in ("linear", "hold"):
            raise SampleFileError(f"replay mode must be 'linear' or 'hold', got {mode!r}")
        if isinstance(trace, pd.DataFrame):
            frame, meta, self.source = trace, {}, "<DataFrame>"
            rails = frame.attrs.get("rails") or _rails_from_columns(frame)
        else:
            frame, meta = load_samples(trace)
            self.source = str(trace)
            rails = frame.attrs["rails"]
        self.rails = tuple(rails)
        self.total_rails = tuple(total_rails or frame.attrs.get("total_rails") or rails)
        missing = [rail_column(r) for r in self.rails if rail_column(r) not in frame.columns]
        if missing or not self.rails or "t_s" not in frame.columns:
            raise SampleFileError(f"{self.source}: a trace needs a t_s column and <rail>_mw columns; "
                                  f"missing {missing or ['t_s'] if self.rails else '(no rail columns)'}")
        self._t = frame["t_s"].to_numpy(dtype=float)
        if self._t.size == 0 or np.any(np.diff(self._t) < 0):
            raise SampleFileError(f"{self.source}: trace is empty or its t_s is not sorted")
        self._cols = {r: frame[rail_column(r)].to_numpy(dtype=float) for r in self.rails}
        self._util = frame["gpu_util_pct"].to_numpy(dtype=float) if "gpu_util_pct" in frame else None
        self._freq = frame["gpu_freq_mhz"].to_numpy(dtype=float) if "gpu_freq_mhz" in frame else None
        interval = meta.get("update_interval_s")
        self.update_interval_s = float(interval) if interval else (
            float(np.median(np.diff(self._t))) if self._t.size > 1 else None)
        self.clock, self.mode, self.loop = clock, mode, loop
        self._anchor = start_s

    @property
    def duration_s(self) -> float:
        return float(self._t[-1] - self._t[0])

    def rewind(self, start_s: float | None = None) -> None:
        """Replay from the beginning again, anchored at ``start_s`` (or at the next read)."""
        self._anchor = start_s

    def _value(self, y: np.ndarray | None, t: float, hold: bool) -> float | None:
        if y is None:
            return None
        if hold:
            v = y[max(int(np.searchsorted(self._t, t, side="right")) - 1, 0)]
        else:
            v = np.interp(t, self._t, y)
        return None if math.isnan(v) else float(v)

    def read(self) -> PowerSample:
        now = self.clock()
        if self._anchor is None:
            self._anchor = now
        rel = now - self._anchor
        if rel > self.duration_s:
            if not (self.loop and self.duration_s > 0):
                raise PowerReadError(f"replay trace {self.source} ended ({self.duration_s:.3f} s long, "
                                     f"asked for {rel:.3f} s); pass loop=True to wrap around")
            rel = math.fmod(rel, self.duration_s)
        t = float(self._t[0]) + rel
        hold = self.mode == "hold"
        power = {r: self._value(y, t, hold) for r, y in self._cols.items()}
        gaps = [r for r, v in power.items() if v is None]
        if gaps:
            raise PowerReadError(f"replay trace {self.source} has no value for rails {gaps} "
                                 f"at t={t:.6f} s")
        return PowerSample(t_s=now, power_mw=power, gpu_util_pct=self._value(self._util, t, hold),
                           gpu_freq_mhz=self._value(self._freq, t, True))
