"""The twin against the real study's whole fine-tuning jobs (docs/calibration.md, section 3.5). Simulated.

:func:`predict_job` gives the twin's whole-job energy (``VDD_GPU_SOC + VDD_CPU_CV``) of a
:class:`~dvfslab.sim.readings.JobCurve` at each GPU level the study locked and under MAXN with the
emulated ``nvhost_podgov`` (:mod:`dvfslab.sim.podgov`; the EMC follows the GPU clock as in every
twin run): the job's mean step (:func:`dvfslab.sim.spec.catalog_spec`, the workload at the study's
batch size, maximum length and precision) times its steps. :func:`run_sigma` is the run-to-run
scatter of a fit curve estimated from the data itself; :func:`job_validation` computes the held-out
curves' rows against the tolerances declared in ``data/job_validation_tolerances.json`` (committed
before this module, which computes the errors: ``tests/test_twin_jobs.py`` checks the order).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from dvfslab.sim.profiles import AGX_ORIN_64GB, DATA_DIR, BoardProfile
from dvfslab.sim.readings import STUDY_LEVELS_MHZ, JobCurve, job_curves

TOLERANCES_V1 = DATA_DIR / "job_validation_tolerances.json"  # issue 31 (twin v5)
TOLERANCES = DATA_DIR / "job_validation_tolerances_v6.json"  # issue 38: the MAXN rule on real MAXN runs only
SCATTER_DEGREE = 3  # the smooth curve a run-to-run scatter is measured against (see run_sigma)


def predict_job(profile: BoardProfile, curve: JobCurve) -> dict:
    """``{"levels": {MHz: J}, "maxn_j": J, "maxn_share": {MHz: share}, "maxn_run_j": J | None}`` of the twin
    for ``curve``'s job: ``maxn_j`` under MAXN with the emulated podgov, ``maxn_run_j`` the study's "MAXN"
    run as it was run (:attr:`~dvfslab.sim.readings.JobCurve.maxn_run`: MAXN, a confined level, or None
    when unknown)."""
    from dvfslab.sim.spec import catalog_spec, evaluate

    spec = catalog_spec(curve.workload_id, profile, batch_size=curve.batch_size, seq_len=curve.max_seq_len,
                        precision=curve.precision)
    result = evaluate(spec, "MAXN", profile)
    by_f = {r["gpu_freq_mhz"]: r["energy_per_step_j"] for r in result["levels"]}
    gov = result["default_governor"]
    maxn_j = curve.steps * gov["energy_per_step_j"]
    run = curve.maxn_run
    as_run = maxn_j if run == "maxn" else (None if run is None else curve.steps * by_f[float(run)])
    return {"levels": {f: curve.steps * by_f[f] for f in curve.energy_j}, "maxn_j": maxn_j,
            "maxn_share": gov["level_share"], "maxn_run_j": as_run}


def run_sigma(curves: list[JobCurve] | None = None, degree: int = SCATTER_DEGREE) -> float:
    """Relative run-to-run scatter of one whole-job reading, from the data's own scatter.

    One run per level: the scatter is the residual of ``log E`` about a smooth curve through each
    fit curve (a polynomial of ``degree`` in the clock), pooled over the curves with its degrees
    of freedom: ``sqrt(Σ RSS / Σ (n − degree − 1))``. The curvature a cubic misses counts as
    scatter, so this is an upper estimate.
    """
    curves = job_curves("fit") if curves is None else curves
    rss, dof = 0.0, 0
    for c in curves:
        f = np.array(list(c.energy_j), dtype=float) / 1000.0
        y = np.log(np.array(list(c.energy_j.values()), dtype=float))
        r = y - np.polyval(np.polyfit(f, y, degree), f)
        rss, dof = rss + float(r @ r), dof + len(f) - degree - 1
    return math.sqrt(rss / dof)


def reading_sigma(curve: JobCurve, energy_j: float, sigma_run: float | None = None) -> float:
    """Relative σ of one reading: the run-to-run scatter and the reading's own resolution, in quadrature."""
    s = run_sigma() if sigma_run is None else sigma_run
    return math.sqrt(s**2 + (curve.reading_j / energy_j) ** 2)


def curve_figures(real: dict[float, float], real_maxn: float | None, twin: dict[float, float],
                  twin_maxn: float | None) -> dict:
    """The goal figures of one curve: normalised-shape RMS (%), optimum levels and their distance in
    steps of the 11-level table, MAXN ÷ optimum of each and the relative error of the twin's (%)
    (None where ``real_maxn`` is None: a run that did not run MAXN has no MAXN ratio)."""
    levels = list(real)
    r = np.array([real[f] for f in levels]) / min(real.values())
    t = np.array([twin[f] for f in levels]) / min(twin[f] for f in levels)
    opt_r, opt_t = min(levels, key=real.get), min(levels, key=twin.get)
    if real_maxn is None or twin_maxn is None:
        ratio_r = ratio_t = None
    else:
        ratio_r, ratio_t = real_maxn / min(real.values()), twin_maxn / min(twin[f] for f in levels)
    return {"shape_rms_pct": 100.0 * float(np.sqrt(np.mean((t / r - 1.0) ** 2))),
            "shape_ratio": {f"{f:g}": float(t[i] / r[i]) for i, f in enumerate(levels)},
            "real_optimum_mhz": opt_r, "twin_optimum_mhz": opt_t,
            "optimum_steps": abs(STUDY_LEVELS_MHZ.index(opt_t) - STUDY_LEVELS_MHZ.index(opt_r)),
            "real_maxn_over_optimum": ratio_r, "twin_maxn_over_optimum": ratio_t,
            "maxn_over_optimum_pct": None if ratio_r is None else 100.0 * (ratio_t / ratio_r - 1.0)}


def tolerances(path: Path = TOLERANCES) -> dict:
    return json.loads(path.read_text())["rules"]


def job_table(profile: BoardProfile = AGX_ORIN_64GB, role: str | None = None) -> list[dict]:
    """Per curve: the reading, the twin and the goal figures (fit curves too: their residuals)."""
    rules = tolerances()
    out = []
    for c in job_curves(role):
        twin = predict_job(profile, c)
        maxn = c.maxn_j if c.ran_maxn else None
        fig = curve_figures(dict(c.energy_j), maxn, twin["levels"], twin["maxn_j"])
        m = fig["maxn_over_optimum_pct"]
        fig["within"] = {"shape_rms_pct": fig["shape_rms_pct"] <= rules["shape_rms_pct"]["max"],
                         "optimum_steps": fig["optimum_steps"] <= rules["optimum_steps"]["max"],
                         "maxn_over_optimum_pct": None if m is None else abs(m) <= rules["maxn_over_optimum_pct"]["max"]}
        out.append({"curve": c.key, "role": c.role, "real_j": dict(c.energy_j), "real_maxn_j": c.maxn_j,
                    "maxn_run": c.maxn_run, "twin_j": twin["levels"], "twin_maxn_j": twin["maxn_j"],
                    "twin_maxn_run_j": twin["maxn_run_j"], "twin_maxn_share": twin["maxn_share"], **fig})
    return out


def level_rows(profile: BoardProfile = AGX_ORIN_64GB) -> list[dict]:
    """Each held-out level's normalised energy (E/min E) against the real one, tolerance 2σ (declared)."""
    k = tolerances()["level_rows_sigmas"]["max"]
    s = run_sigma()
    rows = []
    for row in job_table(profile, "validation"):
        for f, ratio in row["shape_ratio"].items():
            err = ratio - 1.0
            rows.append({"curve": row["curve"], "level_mhz": float(f), "error_pct": 100.0 * err,
                         "tolerance_pct": 100.0 * k * s * math.sqrt(2.0), "within": abs(err) <= k * s * math.sqrt(2.0)})
    return rows
