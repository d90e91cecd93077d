"""The surrogate's arithmetic of ``bo`` (:mod:`dvfslab.governors.jointbo`): the squared-exponential
kernel over log clocks, the scaling of the clocks, the normal CDF, the fit of the kernel's shape
to the training curves' residuals, and BLAS held to one thread for small matrices.

numpy (and scipy's ``ndtr``) are imported inside the functions: the board side stays light.
"""

from __future__ import annotations

import math

#: the fit's grid: the length scale as a share of each clock's log range, and the smooth share
LENGTHS = (0.125, 0.25, 0.5, 1.0, 2.0)
RHOS = (0.5, 0.8, 0.95)
#: the most settings the fit's likelihood is evaluated on (a fixed sample beyond it)
FIT_POINTS = 300
#: a numerical floor on a variance
VAR_FLOOR = 1e-12


def one_thread():
    """A context in which BLAS runs one thread (threadpoolctl, when installed): the matrices here are
    small, and on a busy 2-core machine BLAS threads fighting for its cores made a 300 x 300
    Cholesky 10 to 80 times slower (3.7 ms on one thread, 37 ms by default, 290 ms under load)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a board without scikit-learn's dependency: as it is
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def phi(x):
    """The standard normal's CDF (numpy arrays)."""
    import numpy as np
    from scipy.special import ndtr

    return ndtr(np.asarray(x, float))


def se_kernel(za, zb):
    """``exp(-½ |za - zb|^2)`` between the rows of ``za`` (n, k) and ``zb`` (m, k): (n, m)."""
    import numpy as np

    d2 = (za * za).sum(1)[:, None] + (zb * zb).sum(1)[None, :] - 2.0 * za @ zb.T
    return np.exp(-0.5 * np.maximum(d2, 0.0))


def scaled(points, clocks, length: float):
    """``points``' log clocks over ``length`` × each clock's log range in ``clocks`` (a clock with one
    value: range 1)."""
    import numpy as np

    logs = np.log(np.asarray(clocks, float))
    span = logs.max(axis=0) - logs.min(axis=0)
    span = np.where(span > 0, span, 1.0)
    return np.log(np.asarray(points, float)) / (length * span)


def fit_shape(clocks, resid, sigma2: float, cell: float = 0.0, length: float | None = None,
          rho: float | None = None) -> tuple[float, float]:
    """``length`` and ``rho``: given, or the grid's most likely for the residual curves ``resid``
    (curves x settings, NaN where not run) under ``sigma2 (rho K + (1 - rho) I) + cell I``
    (:mod:`dvfslab.governors.jointbo`'s *Fit*); :data:`FIT_POINTS` settings at most."""
    import numpy as np

    lengths = (float(length),) if length is not None else LENGTHS
    rhos = (float(rho),) if rho is not None else RHOS
    if len(lengths) == len(rhos) == 1:
        return lengths[0], rhos[0]
    pick = np.arange(clocks.shape[0])
    if pick.size > FIT_POINTS:
        pick = np.sort(np.random.default_rng(0).choice(pick, FIT_POINTS, replace=False))
    best, arg = -math.inf, (lengths[0], rhos[0])
    for length in lengths:
        z = scaled(clocks[pick], clocks, length)
        smooth = se_kernel(z, z)
        for rho in rhos:
            cov = sigma2 * (rho * smooth + (1 - rho) * np.eye(pick.size)) + (cell + 1e-9) * np.eye(pick.size)
            rows = resid[:, pick]
            full = ~np.isnan(rows).any(axis=1)
            ll = 0.0
            if full.any():  # the curves that ran every picked setting: one factorisation for all
                chol = np.linalg.cholesky(cov)
                a = np.linalg.solve(chol, rows[full].T)
                ll += -0.5 * float((a * a).sum()) - int(full.sum()) * float(np.log(np.diag(chol)).sum())
            for r in rows[~full]:
                ok = ~np.isnan(r)
                chol = np.linalg.cholesky(cov[np.ix_(ok, ok)])
                a = np.linalg.solve(chol, r[ok])
                ll += -0.5 * float(a @ a) - float(np.log(np.diag(chol)).sum())
            if ll > best:
                best, arg = ll, (length, rho)
    return arg
