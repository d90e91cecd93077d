"""What a governed job's windows say about themselves: the reading noise, and whether a window's
time per unit is possible at all.

**Noise** (:func:`window_noise`): the coefficient of variation of the energy per unit over
repeated windows at one level (the default-clock windows before the governor starts; repeated
probes and held windows later), pooled over levels, stated at the mean units a window read —
what a :class:`~dvfslab.governors.probemodel.ProbeModel` carries as ``sigma_ref`` over
``ref_units`` (``sigma ∝ 1/sqrt(units read)``).

**Possible windows** (:func:`time_bounds`): a job's time per unit follows ``t(f) = a + b / f``
with ``a, b >= 0`` (docs/method.md), so against a reference time ``t_ref`` measured at clock
``f_ref`` a window at ``f`` lies in ``[t_ref min(1, f_ref/f), t_ref max(1, f_ref/f)]``; widened by
``Z_IMPOSSIBLE`` times the reference's spread (at least :data:`CV_FLOOR`). A window outside
(or of 0 s) measured something else — units queued while the clock switched, a pause — and is
re-read (:class:`~dvfslab.job.live.LiveProbe`). Board side: no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: how many reference spreads a window may lie outside the time model before it is impossible
Z_IMPOSSIBLE = 4.0
#: the least spread assumed of the reference time per unit (a fraction): one window's time per
#: unit is never called impossible for lying within 4 x 5 % = 20 % of the time model
CV_FLOOR = 0.05
#: times a window found impossible is re-read before it is kept (and the log says so)
MAX_REREADS = 3


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def cv(xs: Sequence[float]) -> float | None:
    """Sample coefficient of variation (``sd / mean``, ``n - 1``); None under two values."""
    if len(xs) < 2:
        return None
    m = _mean(xs)
    if m <= 0:
        return None
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) / m


def window_noise(windows: Iterable[Mapping[str, Any]]) -> tuple[float | None, float | None, int]:
    """``(cv, ref_units, n_windows)`` of the energy per unit over repeated measured windows, pooled
    over levels (each level's squared deviations from its own mean, ``n - k`` degrees of
    freedom, divided by the pooled mean); ``ref_units``: the mean units they read. ``(None, None,
    n)`` when no level has two windows."""
    by_level: dict[Any, list[tuple[float, float]]] = {}
    for w in windows:
        e, u = w.get("energy_per_unit_j"), w.get("read_units")
        if w.get("measurement") and e is not None and u:
            by_level.setdefault(w.get("level"), []).append((float(e), float(u)))
    groups = [g for g in by_level.values() if len(g) >= 2]
    if not groups:
        return None, None, sum(len(g) for g in by_level.values())
    ss = dof = 0.0
    rel = []
    for g in groups:
        m = _mean([e for e, _ in g])
        ss += sum(((e - m) / m) ** 2 for e, _ in g)
        dof += len(g) - 1
        rel.extend(u for _, u in g)
    return math.sqrt(ss / dof), _mean(rel), sum(len(g) for g in groups)


def time_bounds(t_ref_s: float, spread: float | None, level: float | None, ref_level: float | None
                ) -> tuple[float, float]:
    """``(lo, hi)`` time per unit a window at ``level`` can read, against ``t_ref_s`` measured at
    ``ref_level`` (module doc); a level or reference of None (the default clock, its frequency
    unknown) is taken as the same clock."""
    z = Z_IMPOSSIBLE * max(spread or 0.0, CV_FLOOR)
    ratio = 1.0 if level is None or ref_level is None or level <= 0 else float(ref_level) / float(level)
    return t_ref_s * min(1.0, ratio) * max(0.0, 1.0 - z), t_ref_s * max(1.0, ratio) * (1.0 + z)
