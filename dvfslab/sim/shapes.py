"""The real study's job curves as normalised shapes: readings of how energy moves with the GPU level.

A whole-job energy of the study (:data:`dvfslab.sim.readings.JOB_CURVES`) hinges on the job's batch,
precision and length, some of them assumed, and on the twin's absolute step time and power, which
no reading calibrates; the *shape* of the curve — how the energy moves from level to level — does
not. So a curve enters the fit (:func:`dvfslab.sim.calibration.fit`) and the ensemble's weights
(:mod:`dvfslab.pipeline.ensemble`) up to one free scale: with ``r_i = ln(twin_i / real_i)`` for the
curve's points and ``σ_i`` their relative uncertainty (:func:`dvfslab.sim.jobs.reading_sigma`: the
run-to-run scatter and the reading's resolution), the scale that fits best is the weighted mean
``m = Σ r_i/σ_i² / Σ 1/σ_i²`` and each point's residual is ``(r_i − m) / σ_i``; a curve of ``n``
points has ``n − 1`` degrees of freedom. The points are the levels the study locked and its "MAXN"
run where its clock is known (:attr:`~dvfslab.sim.readings.JobCurve.maxn_run`: a run confined at a
level is one more reading of that level; a real MAXN run is the twin's emulated podgov; a run of
unknown clock is no reading).

:func:`likelihood_weights` turns each ensemble member's χ² into its weight, and
:func:`weighted_percentiles` reads the bands off the weighted members (docs/calibration.md, 4.1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from dvfslab.sim.profiles import BoardProfile
from dvfslab.sim.readings import JobCurve, job_curves


def shape_points(curve: JobCurve) -> list[tuple[float | str, float]]:
    """``(level MHz or "maxn", energy J)`` of every point of ``curve`` that reads a known clock."""
    pts: list[tuple[float | str, float]] = [(f, e) for f, e in curve.energy_j.items()]
    if curve.maxn_run is not None:
        pts.append(("maxn" if curve.ran_maxn else float(curve.maxn_run), curve.maxn_j))
    return pts


def shape_residuals(profile: BoardProfile, curves: Iterable[JobCurve] | None = None,
                    sigma_run: float | None = None) -> list[dict]:
    """One row per point of each curve: the log ratio twin ÷ real, its σ and its residual (σ units)
    after the curve's best free scale. ``curves`` defaults to the fit curves."""
    from dvfslab.sim.jobs import predict_job, reading_sigma, run_sigma

    s_run = run_sigma() if sigma_run is None else sigma_run
    rows = []
    for c in job_curves("fit") if curves is None else curves:
        pj = predict_job(profile, c)
        pts = shape_points(c)
        twin = [pj["maxn_j"] if f == "maxn" else pj["levels"][f] for f, _e in pts]
        r = np.log(np.array(twin) / np.array([e for _f, e in pts]))
        sig = np.array([reading_sigma(c, e, s_run) for _f, e in pts])
        w = 1.0 / sig**2
        m = float((w * r).sum() / w.sum())
        for (f, e), ri, si, ti in zip(pts, r, sig, twin, strict=True):
            rows.append({"curve": c.key, "point": f if f == "maxn" else f"{f:g} MHz", "measured_j": e,
                         "twin_j": float(ti), "log_ratio": float(ri), "scale": math.exp(m), "sigma_rel": float(si),
                         "residual_sigma": float((ri - m) / si)})
    return rows


def shape_chi2(profile: BoardProfile, curves: Sequence[JobCurve] | None = None,
               sigma_run: float | None = None) -> tuple[float, int]:
    """χ² of the curves' shapes on ``profile`` and its degrees of freedom (points less one per curve)."""
    curves = job_curves("fit") if curves is None else list(curves)
    rows = shape_residuals(profile, curves, sigma_run)
    return float(sum(r["residual_sigma"] ** 2 for r in rows)), len(rows) - len(curves)


def likelihood_weights(chi2: Sequence[float], scale: float = 1.0,
                       log_proposal: Sequence[float] | None = None) -> np.ndarray:
    """Normalised weights ``w_i ∝ exp(−χ²_i / (2·scale)) / q_i`` of members with Gaussian residuals.

    ``scale`` multiplies every σ² alike (the fit's ``max(1, χ²/dof)``: never below 1);
    ``log_proposal``: ``ln q_i``, the density the member was drawn from relative to the prior
    (importance sampling; None: drawn from the prior). The largest log weight is subtracted
    first, which changes no ratio but keeps the exponentials finite.
    """
    c = np.asarray(chi2, dtype=float)
    if scale < 1.0:
        raise ValueError(f"likelihood_weights: scale {scale} < 1 would shrink the stated uncertainties")
    logw = -c / (2.0 * scale) - (0.0 if log_proposal is None else np.asarray(log_proposal, dtype=float))
    w = np.exp(logw - logw.max())
    return w / w.sum()


def effective_members(weights: Sequence[float]) -> float:
    """Kish's effective sample size of normalised weights, ``(Σw)² / Σw²``: how many equally weighted
    members the weighted ensemble is worth."""
    w = np.asarray(weights, dtype=float)
    return float(w.sum() ** 2 / (w**2).sum())


def weighted_percentiles(values: Sequence[float], weights: Sequence[float] | None,
                         q: Sequence[float]) -> list[float]:
    """Percentiles ``q`` (0–100) of ``values`` with ``weights`` (None: equal), numpy's
    ``inverted_cdf``: the smallest value whose cumulative weight reaches ``q`` % of the total."""
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    return [float(x) for x in np.percentile(v, list(q), weights=w, method="inverted_cdf")]
