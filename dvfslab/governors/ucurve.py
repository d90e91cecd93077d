"""The online governor's fit: a U-curve of energy per step from a few probed steps (numpy); or,
on a knob that is not a clock, the measured means of the probed levels.

Energy per step is power x time. Time per step follows the classic DVFS model
``T(l) = a + b / l`` (a part that does not scale with the level, and one that does), fitted with
``a, b >= 0`` in log space (a long batch multiplies its step's time: the noise is multiplicative
and heavy-tailed); power varies much less from step to step than time, so ``P(l)`` is a
quadratic least-squares fit of the probed levels' mean power. ``E(l) = P(l) T(l)`` is evaluated
on the table's levels within the probed range. Imported by the online session when it fits,
so loading a governor imports no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dvfslab.governors.base import ProbeStep
from dvfslab.governors.errors import GovernorError


def fit_u_curve(steps: Sequence[ProbeStep], level_table: Sequence[float]) -> dict[str, np.ndarray]:
    """Predicted per-step ``energy_j``, ``time_s``, ``power_w`` on the table's levels within the
    probed range (``level``), plus ``energy_rel`` / ``time_rel`` relative to the highest probed level.

    ``steps``: the probing steps (warm-up excluded).
    """
    arr = np.asarray([(s.level, s.energy_j, s.time_s, s.units) for s in steps], dtype=float)
    f, e, t = arr[:, 0], arr[:, 1], arr[:, 2] / arr[:, 3]  # time per unit: a probe may run several units
    probed = np.unique(f)
    if probed.size < 3:
        raise GovernorError(f"online: needs steps at 3 levels or more to fit a U-curve, got {probed.tolist()}")
    a, b = _fit_time(f, t)
    p_lvl = np.array([e[f == x].sum() / (t * arr[:, 3])[f == x].sum() for x in probed])
    deg = min(2, probed.size - 1)
    p_coef = np.polyfit(probed, p_lvl, deg)
    grid = np.array([x for x in sorted(level_table) if probed.min() - 1e-6 <= x <= probed.max() + 1e-6])
    time = a + b / grid
    power = np.polyval(p_coef, grid)
    energy = power * time
    top = a + b / probed.max(), float(np.polyval(p_coef, probed.max())) * (a + b / probed.max())
    return {"level": grid, "time_s": time, "power_w": power, "energy_j": energy,
            "energy_rel": energy / top[1], "time_rel": time / top[0]}


def _fit_time(f: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """``t = a + b / f`` with ``a, b >= 0``, fitted in log space (multiplicative noise).

    A batch's length scales its whole step, so step-to-step noise multiplies the time; least
    squares on ``ln t`` weighs a long batch by how many times longer it is, not by how many
    seconds. Parameterized as ``t = c (phi + (1 - phi) f_max / f)`` with ``phi`` in [0, 1] (the
    share of the time at ``f_max`` that does not scale with the level): for each ``phi`` on a
    fine grid ``ln c`` is the mean residual; the ``phi`` with the least squared error wins.
    """
    fmax = float(f.max())
    phi = np.linspace(0.0, 1.0, 401)[:, None]
    shape = np.log(phi + (1.0 - phi) * fmax / f[None, :])
    log_c = (np.log(t)[None, :] - shape).mean(axis=1, keepdims=True)
    sse = ((np.log(t)[None, :] - shape - log_c) ** 2).sum(axis=1)
    k = int(np.argmin(sse))
    c = float(np.exp(log_c[k, 0]))
    return c * float(phi[k, 0]), c * (1.0 - float(phi[k, 0])) * fmax


def measured_curve(steps: Sequence[ProbeStep], level_table: Sequence[float]) -> dict[str, np.ndarray]:
    """The probed levels' measured energy and time per unit (sums over their steps / their
    units), in the shape of :func:`fit_u_curve`'s answer: for a knob whose time is not
    ``a + b / l`` (a power limit caps power; it does not set a frequency), nothing is fitted."""
    arr = np.asarray([(s.level, s.energy_j, s.time_s, s.units) for s in steps], dtype=float)
    f, e, t, u = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    grid = np.unique(f)
    energy = np.array([e[f == x].sum() / u[f == x].sum() for x in grid])
    time = np.array([t[f == x].sum() / u[f == x].sum() for x in grid])
    return {"level": grid, "time_s": time, "power_w": energy / time, "energy_j": energy,
            "energy_rel": energy / energy[-1], "time_rel": time / time[-1]}
