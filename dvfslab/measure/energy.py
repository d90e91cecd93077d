"""Pure energy integration over timestamped power samples (no threads, no I/O).

Energy is the trapezoid integral of the sampled power: the signal is taken to be the
straight line between consecutive samples. A window cut at arbitrary times ``[t0_s, t1_s]``
gets its edge values by linear interpolation between the samples on either side of the cut
(never by dropping the partial intervals), so energy is additive over adjacent windows and
exact for piecewise-linear power sampled at its breakpoints. Outside the sampled span the
nearest sample is held (a window that starts before the first sample assumes the first
reading held there).

:func:`measure_window` turns the stored sample arrays of a :class:`~dvfslab.measure.sampler.PowerSampler`
into a :class:`Measurement`; it is what ``end_window`` calls, and tests call it directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import CounterReading, PowerReadError

MW_PER_W = 1000.0


class EnergyInputError(DvfsError, ValueError):
    """Arrays handed to an integration function are inconsistent (shape, order, NaN, window)."""


# --------------------------------------------------------------------------------------------
# Integration
# --------------------------------------------------------------------------------------------


def _check(t_s: ArrayLike, values: ArrayLike, what: str = "power") -> tuple[np.ndarray, np.ndarray]:
    """Validate one time series: 1-D, same length, finite, timestamps non-decreasing."""
    t = np.asarray(t_s, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.ndim != 1 or y.shape != t.shape:
        raise EnergyInputError(
            f"t_s has shape {t.shape} but {what} has shape {y.shape}; pass one {what} value per "
            "timestamp (1-D arrays of equal length)"
        )
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        raise EnergyInputError(f"t_s or {what} contains NaN/inf; drop lost samples before integrating")
    steps = np.diff(t)
    if np.any(steps < 0):
        i = int(np.argmax(steps < 0)) + 1
        raise EnergyInputError(
            f"timestamps decrease at index {i} (t_s {t[i - 1]!r} then {t[i]!r}); sort samples by time"
        )
    return t, y


def integrate_energy(t_s: ArrayLike, power_w: ArrayLike) -> float:
    """Trapezoid integral of ``power_w`` over ``t_s``: energy in J (W·s).

    Fewer than two samples span no time and give 0.0.
    """
    t, p = _check(t_s, power_w)
    if t.size < 2:
        return 0.0
    return float(0.5 * np.sum((p[1:] + p[:-1]) * np.diff(t)))


def clip_window(
    t_s: ArrayLike, values: ArrayLike, t0_s: float, t1_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """The samples strictly inside ``(t0_s, t1_s)`` plus interpolated values at both edges.

    Edge values interpolate linearly between the neighbouring samples; before the first or
    after the last sample the nearest sample is held.
    """
    t, y = _check(t_s, values)
    if not (math.isfinite(t0_s) and math.isfinite(t1_s)) or t1_s < t0_s:
        raise EnergyInputError(f"window [{t0_s!r}, {t1_s!r}] s is not an interval; need t0_s <= t1_s")
    if t.size == 0:
        raise EnergyInputError(
            f"no samples to integrate over the window [{t0_s!r}, {t1_s!r}] s; "
            "was the sampler started and did its reader return anything?"
        )
    inside = (t > t0_s) & (t < t1_s)
    edges = np.interp([t0_s, t1_s], t, y)
    tt = np.concatenate(([t0_s], t[inside], [t1_s]))
    yy = np.concatenate((edges[:1], y[inside], edges[1:]))
    return tt, yy


def integrate_window(t_s: ArrayLike, power_w: ArrayLike, t0_s: float, t1_s: float) -> float:
    """Energy in J over ``[t0_s, t1_s]`` with interpolated edge samples (see :func:`clip_window`)."""
    return integrate_energy(*clip_window(t_s, power_w, t0_s, t1_s))


def integrate_intervals(t_s: ArrayLike, power_w: ArrayLike, edges_s: ArrayLike) -> np.ndarray:
    """Energy in J over each ``[edges_s[i], edges_s[i + 1]]``, all in one pass.

    Each value is what :func:`integrate_window` gives for that interval (the trapezoid rule
    with interpolated edges is the exact integral of the samples' linear interpolation;
    before the first or after the last sample the nearest sample is held): for many
    consecutive windows, such as the optimizer steps of a run.
    """
    t, p = _check(t_s, power_w)
    e = np.asarray(edges_s, dtype=float)
    if t.size == 0:
        raise EnergyInputError("no samples to integrate over the intervals; was the sampler started?")
    if e.ndim != 1 or not np.all(np.isfinite(e)) or np.any(np.diff(e) < 0):
        raise EnergyInputError("edges_s must be a 1-D, finite, non-decreasing array of times")
    cum = np.concatenate(([0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(t))))
    j = np.clip(np.searchsorted(t, e, side="right") - 1, 0, t.size - 1)
    at_edges = cum[j] + (e - t[j]) * 0.5 * (p[j] + np.interp(e, t, p))  # integral from t[0]
    return np.diff(at_edges)


def _span(t: np.ndarray, t0_s: float | None, t1_s: float | None) -> tuple[float, float]:
    """Default window = the sampled span."""
    if t.size == 0 and (t0_s is None or t1_s is None):
        raise EnergyInputError("no samples and no window given; nothing to integrate")
    lo = float(t[0]) if t0_s is None else float(t0_s)
    hi = float(t[-1]) if t1_s is None else float(t1_s)
    return lo, hi


def integrate_rails(
    t_s: ArrayLike,
    rails_mw: Mapping[str, ArrayLike],
    t0_s: float | None = None,
    t1_s: float | None = None,
) -> dict[str, float]:
    """Energy in J of each rail; samples in mW; window defaults to the sampled span."""
    t = np.asarray(t_s, dtype=float)
    lo, hi = _span(t, t0_s, t1_s)
    return {
        rail: integrate_window(t, np.asarray(mw, dtype=float) / MW_PER_W, lo, hi)
        for rail, mw in rails_mw.items()
    }


# --------------------------------------------------------------------------------------------
# Windows -> Measurement
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleArrays:
    """Stored samples as arrays: ``t_s`` ascending, rails in mW, NaN where a field is absent."""

    t_s: np.ndarray
    rails_mw: dict[str, np.ndarray]
    gpu_util_pct: np.ndarray | None = None
    gpu_freq_mhz: np.ndarray | None = None
    lost_t_s: np.ndarray = field(default_factory=lambda: np.empty(0))

    def total_mw(self, total_rails: Sequence[str]) -> np.ndarray:
        """Sum of ``total_rails`` per sample, mW."""
        out = np.zeros_like(self.t_s, dtype=float)
        for rail in total_rails:
            out = out + self.rails_mw[rail]
        return out


@dataclass(frozen=True)
class Measurement:
    """What one named window measured. Energies in J, power in W, times in s.

    ``energy_j`` is CPU + GPU (the reader's ``total_rails``); ``avg_power_w`` is
    ``energy_j / time_s`` (a time average, not a mean of samples); ``rate_hz`` is the achieved
    sampling rate inside the window; ``n_lost`` counts reads that failed inside the window.
    ``idle_power_w``/``energy_above_idle_j`` are set when the sampler knows its idle power;
    ``gpu_util_pct``/``gpu_freq_mhz`` are time-weighted means when the samples carry them.
    ``energy_source``: ``"sampled"`` (the trapezoid of the rail samples, the default), the
    reader's ``power_source`` when it names what its samples are (NVML: ``"instant"`` or
    ``"average-1s"``), or ``"energy-counter"`` when the energy is the difference of the
    reader's energy counter at the window's edges (NVML, Volta and newer).
    """

    name: str
    t0_s: float
    t1_s: float
    time_s: float
    energy_j: float
    energy_by_rail_j: dict[str, float]
    avg_power_w: float
    peak_power_w: float
    n_samples: int
    rate_hz: float
    n_lost: int = 0
    idle_power_w: float | None = None
    energy_above_idle_j: float | None = None
    gpu_util_pct: float | None = None
    gpu_freq_mhz: float | None = None
    energy_source: str = "sampled"

    def to_dict(self) -> dict:
        """Plain dict (``energy_by_rail_j`` stays a nested dict)."""
        return asdict(self)


def _time_mean(t: np.ndarray, y: np.ndarray | None, t0_s: float, t1_s: float) -> float | None:
    """Time-weighted mean of ``y`` over the window, using only samples where ``y`` is known."""
    if y is None:
        return None
    ok = np.isfinite(y)
    if not ok.any():
        return None
    tt, yy = t[ok], y[ok]
    if t1_s <= t0_s:
        return float(np.interp(t0_s, tt, yy))
    return integrate_window(tt, yy, t0_s, t1_s) / (t1_s - t0_s)


def measure_window(
    samples: SampleArrays,
    t0_s: float,
    t1_s: float,
    total_rails: Sequence[str],
    *,
    name: str = "",
    idle_power_w: float | None = None,
) -> Measurement:
    """Summarize the samples over ``[t0_s, t1_s]`` (pure; edges interpolated).

    With no sample at all, energies and powers are NaN and ``n_samples`` is 0.
    """
    t = samples.t_s
    time_s = float(t1_s - t0_s)
    n_lost = int(np.count_nonzero((samples.lost_t_s >= t0_s) & (samples.lost_t_s <= t1_s)))
    inside = (t >= t0_s) & (t <= t1_s)
    n_samples = int(np.count_nonzero(inside))
    t_in = t[inside]
    span_s = float(t_in[-1] - t_in[0]) if n_samples >= 2 else 0.0
    rate_hz = (n_samples - 1) / span_s if span_s > 0 else math.nan
    if t.size == 0:
        by_rail = {r: math.nan for r in samples.rails_mw}
        energy_j = peak_w = math.nan
    else:
        by_rail = integrate_rails(t, samples.rails_mw, t0_s, t1_s)
        energy_j = float(sum(by_rail[r] for r in total_rails))
        _, total_edge_mw = clip_window(t, samples.total_mw(total_rails), t0_s, t1_s)
        peak_w = float(np.max(total_edge_mw)) / MW_PER_W
    avg_w = energy_j / time_s if time_s > 0 else (peak_w if t.size else math.nan)
    above = None if idle_power_w is None else energy_j - idle_power_w * time_s
    return Measurement(
        name=name, t0_s=float(t0_s), t1_s=float(t1_s), time_s=time_s, energy_j=energy_j,
        energy_by_rail_j=by_rail, avg_power_w=avg_w, peak_power_w=peak_w, n_samples=n_samples,
        rate_hz=rate_hz, n_lost=n_lost, idle_power_w=idle_power_w, energy_above_idle_j=above,
        gpu_util_pct=_time_mean(t, samples.gpu_util_pct, t0_s, t1_s),
        gpu_freq_mhz=_time_mean(t, samples.gpu_freq_mhz, t0_s, t1_s),
    )


def counter_energy_j(start: CounterReading, end: CounterReading) -> float:
    """Energy in J between two readings of a device's energy counter (a window's edges).

    A counter that went back (driver reloaded, GPU reset inside the window) is an error, never a
    negative energy; so is an end read before the start.
    """
    if end.t_s < start.t_s:
        raise PowerReadError(f"energy counter read at t={end.t_s:.6f} s before the window began "
                             f"(t={start.t_s:.6f} s); read the end after the start")
    delta_mj = end.energy_mj - start.energy_mj
    if delta_mj < 0:
        raise PowerReadError(
            f"the energy counter went back from {start.energy_mj:.0f} to {end.energy_mj:.0f} mJ "
            "(driver reloaded or GPU reset during the window?); measure the window again")
    return delta_mj / 1000.0


def with_counter_energy(m: Measurement, energy_j: float) -> Measurement:
    """``m`` with its energy taken from an energy counter read at the window's edges.

    The counter measures what the rail samples only approximate, so it replaces ``energy_j``;
    power and energy above idle follow from it, and the per-rail energies are scaled by the same
    factor (NVML has one rail, so its rail energy is the counter's). Time, samples, utilization
    and clock stay as sampled.
    """
    scale = energy_j / m.energy_j if m.energy_j > 0 else None
    by_rail = {r: e * scale for r, e in m.energy_by_rail_j.items()} if scale is not None else dict(m.energy_by_rail_j)
    if scale is None and len(by_rail) == 1:
        by_rail = {next(iter(by_rail)): energy_j}
    above = None if m.idle_power_w is None else energy_j - m.idle_power_w * m.time_s
    return replace(m, energy_j=energy_j, energy_by_rail_j=by_rail,
                   avg_power_w=energy_j / m.time_s if m.time_s > 0 else math.nan,
                   energy_above_idle_j=above, energy_source="energy-counter")

