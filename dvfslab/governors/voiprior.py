"""``voi``'s prior (:mod:`dvfslab.governors.voi`): the untrained U-shaped family, the
interpolation of a curve onto a table, and the training curves' misfit that sets ``shape_sigma``
(:func:`loo_misfit`, :func:`posterior_misfit`). numpy is imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: the U-family's grid (untrained prior): share of time that does not scale with the level,
#: static share of power, exponent of the dynamic power in the level
U_TIME_FIXED = (0.0, 0.2, 0.4, 0.6, 0.8)
U_STATIC = (0.1, 0.3, 0.5, 0.7)
U_EXPONENT = (1.0, 2.0, 3.0)
#: 3-point Gauss-Hermite quadrature of a standard normal: nodes and weights
GH_NODES = (-math.sqrt(3.0), 0.0, math.sqrt(3.0))
GH_WEIGHTS = (1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0)
#: a numerical floor on a reading's log-variance (noise-free data and identical curves)
VAR_FLOOR = 1e-12

Curve = dict[str, list[float]]  # {"level", "energy_rel", "time_rel"}


def u_family(levels: Sequence[float]) -> list[Curve]:
    """The untrained prior's curves on ``levels`` (module doc), normalised to 1 at the highest."""
    top = max(float(f) for f in levels)
    out = []
    for a in U_TIME_FIXED:
        for s in U_STATIC:
            for g in U_EXPONENT:
                xs = [float(f) / top for f in levels]
                t = [a + (1 - a) / x for x in xs]
                out.append({"level": [float(f) for f in levels], "time_rel": t,
                            "energy_rel": [(s + (1 - s) * x ** g) * ti for x, ti in zip(xs, t, strict=True)]})
    return out


def _interp(x: Sequence[float], xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    """``ys`` (positive) at ``x``: linear in the log between the levels, the ends held."""
    import numpy as np

    order = np.argsort(np.asarray(xs, float))
    return list(np.exp(np.interp(np.asarray(x, float), np.asarray(xs, float)[order],
                                 np.log(np.asarray(ys, float))[order])))


def loo_misfit(curves: Sequence[Curve], groups: Sequence[Any] | None = None) -> float:
    """The median over ``curves`` of the RMS log-residual of the best-fitting other curve after a
    fitted scale (module doc: ``shape_sigma``'s default); with ``groups`` (one per curve: its
    model), the best-fitting curve of *another group*. 0 for fewer than two curves."""
    import numpy as np

    if len(curves) < 2:
        return 0.0
    best = []
    for i, u in enumerate(curves):
        lu = np.log(np.asarray(u["energy_rel"], float))
        fits = []
        for j, v in enumerate(curves):
            if j != i and (groups is None or groups[j] != groups[i]):
                d = lu - np.log(np.asarray(_interp(u["level"], v["level"], v["energy_rel"])))
                fits.append(float(np.sqrt(np.mean((d - d.mean()) ** 2))))
        if fits:
            best.append(min(fits))
    return float(np.median(best)) if best else 0.0


def posterior_misfit(curves: Sequence[Curve], groups: Sequence[Any] | None = None, rounds: int = 10) -> float:
    """The misfit a job meets once every level is read: for each curve, the RMS log-residual
    (after a fitted scale) of the posterior mean of the *other* curves (of other groups, with
    ``groups``), each weighted by its likelihood with that misfit as the per-level log-sd; the
    median over the curves, iterated to its fixed point from :func:`loo_misfit` (``rounds`` at most).
    The best single curve's misfit (:func:`loo_misfit`) is the smallest of many and under-states it."""
    import numpy as np

    sigma = loo_misfit(curves, groups)
    if sigma <= 0:
        return sigma
    logs = [np.log(np.asarray(c["energy_rel"], float)) for c in curves]
    pairs = []  # per curve: the other curves on its levels
    for i, u in enumerate(curves):
        others = [np.log(np.asarray(_interp(u["level"], v["level"], v["energy_rel"])))
                  for j, v in enumerate(curves) if j != i and (groups is None or groups[j] != groups[i])]
        pairs.append(np.array(others) if others else None)
    for _ in range(int(rounds)):
        rms = []
        for lu, lv in zip(logs, pairs, strict=True):
            if lv is None:
                continue
            d = lu[None, :] - lv
            k = d.mean(axis=1, keepdims=True)
            ss = ((d - k) ** 2).sum(axis=1)
            w = np.exp(-(ss - ss.min()) / (2 * sigma * sigma))
            w /= w.sum()
            mean = np.log((w[:, None] * np.exp(lv + k)).sum(axis=0))
            r = lu - mean
            rms.append(float(np.sqrt(np.mean((r - r.mean()) ** 2))))
        new = float(np.median(rms)) if rms else sigma
        if abs(new - sigma) <= 1e-4 * sigma:
            return new
        sigma = new
    return sigma
