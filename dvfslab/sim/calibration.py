"""Calibration as code: the fit readings -> the twin's fitted parameters, with provenance.

:func:`fit` is a weighted least-squares fit (``scipy.optimize.least_squares``): each reading of
a fit line (:mod:`dvfslab.sim.readings`) contributes the residual ``(twin − reading) / σ``, with
``σ`` the reading's stated uncertainty, over the parameters in :data:`FIT_BOX` (the
:data:`~dvfslab.sim.profiles.ORIN_FITTED` ones); every other parameter is an anchor or a
stated assumption of the profile. :func:`calibration_document` is the checked-in file
``dvfslab/sim/data/agx_orin_64gb_calibration.json``: the parameters and, for every fit reading,
its line's SHA-256, the reading, its σ, the twin's value and the residual. ``dvfslab calibrate``
writes it, ``dvfslab calibrate --check`` recomputes it and fails when it differs.

:data:`ASSUMED_RANGES` gives every parameter the readings do not pin a plausible range with its
reason; :func:`sample_member` draws a parameter set consistent with those ranges and with the
readings (the rails and the real job curves' normalised shapes, :mod:`dvfslab.sim.shapes`, fitted
given the drawn assumptions, plus a draw from the fit's covariance scaled by
:func:`covariance_scale`, ``max(1, χ²/dof)``: never shrunk) — one member of ``dvfslab simulate
--ensemble``, which weights it by its χ². :func:`leave_one_out` refits without each fit line in turn.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.sim.profiles import AGX_ORIN_64GB, ORIN_CALIBRATION, BoardProfile, with_params
from dvfslab.sim.readings import Line, lines, predict_line

#: the fit's search box: parameter -> (start, lower bound, upper bound, unit of the optimizer's variable)
FIT_BOX: dict[str, tuple[float, float, float, float]] = {
    "soc_idle_w": (2.4, 0.5, 6.0, 1.0),
    "cpu_idle_w": (0.4, 0.05, 3.0, 1.0),
    "VIN_SYS_5V0": (4.0, 1.0, 10.0, 1.0),
    "VDDQ_VDD2_1V8AO": (0.3, 0.05, 2.0, 1.0),
    "cpu_cluster_w": (0.2, 0.0, 2.0, 1.0),
    "cpu_core_w_at_max": (1.5, 0.1, 5.0, 1.0),
    "cpu_power_exp": (2.0, 1.0, 4.0, 1.0),
    "gpu_clock_w_at_fmax": (0.7, 0.0, 5.0, 1.0),
    "gpu_dyn_w_at_fmax": (35.0, 5.0, 80.0, 1.0),
    "v_slope_per_mhz": (3.8, 0.1, 10.0, 1e-4),
}

#: parameters no reading pins: (low, high, reason); the profile's value is the central one
ASSUMED_RANGES: dict[str, tuple[float, float, str]] = {
    "v_min": (0.55, 0.75, "no public V–f table of the Orin GPU exists; 8 nm GPU rails bottom out at roughly "
              "0.55–0.75 V"),
    "gpu_leak_w_at_vmax": (0.6, 1.8, "the clocked-idle reading (4.94 W) leaves ≈2.5 W above the SoC floor for the "
                           "EMC step, leakage and the clock tree together; no reading separates them"),
    "emc_w_per_ghz": (0.28, 1.12, "the EMC step is not separated from the GPU's clocked-idle power by any reading "
                      "(×0.5–×2 of 0.56 W/GHz)"),
    "activity_matmul": (0.6, 1.0, "switching activity of training GEMMs relative to a GPU stress test (1.0); no rail "
                        "reading of an AGX Orin during training was found"),
    "activity_memory": (0.3, 0.6, "element-wise kernels: memory-bound, fewer toggling ALUs than a GEMM; not measured"),
    "activity_kernel_overhead": (0.15, 0.45, "short kernels (launch tails): not measured"),
    "cpu_busy_cores_training": (1.0, 2.5, "the Python main thread plus helper threads during training; no CPU-rail "
                                "reading during training was found"),
    "cpu_clusters_training": (1.0, 2.0, "clusters kept at their top clock while training: one (the main thread) to two"),
    "cpu_op_us": (21.6, 64.8, "the measured per-operator cost ×1 to ×3 (the A78AE-to-this-machine single-thread "
                  "ratio, section 2)"),
    "cpu_step_serial_ms": (12.5, 50.0, "serial Python per step, ×0.5–×2 of the assumed 25 ms"),
    "gemm_half_dim": (64.0, 256.0, "matmul size efficiency, ×0.5–×2: no AGX Orin GEMM-vs-size curve was found"),
    "gemm_half_rows": (64.0, 256.0, "as gemm_half_dim"),
    "bw_sat_mhz": (408.0, 816.0, "GPU clock above which DRAM bandwidth saturates: ±2 levels of 612 MHz"),
    "kernel_min_us_at_fmax": (2.0, 8.0, "shortest kernel at f_max, ×0.5–×2"),
    "overlap_p": (2.0, 8.0, "how sharply CPU dispatch and GPU work overlap near the cross-over"),
    "soc_pj_per_byte": (8.0, 32.0, "DRAM traffic energy on VDD_GPU_SOC, ×0.5–×2 (LPDDR5 ≈ 4–6 pJ/bit in all)"),
    "dram_pj_per_byte": (8.0, 32.0, "DRAM traffic energy on VDDQ, ×0.5–×2"),
    "storage_write_mb_s": (100.0, 400.0, "checkpoint write speed of the developer kit's eMMC 5.1, not measured"),
    "emc_bw_exp": (0.8, 1.0, "effective DRAM bandwidth ∝ (f_emc/3199 MHz)^x: the LPDDR5 peak is ∝ the clock (x = 1, "
                   "the central value); fixed-latency overheads cost fewer cycles at a lower clock, so the achieved "
                   "share can rise as the clock falls (x < 1); no AGX Orin STREAM-vs-EMC-clock curve was found"),
    "dram_w_per_ghz": (0.0, 0.14, "VDDQ_VDD2_1V8AO watts per GHz of EMC clock above 2133 MHz: from none (the central "
                       "value, the twin before issue #32) to all of the rail's idle 0.301 W ∝ the clock "
                       "(0.301 / 2.133 GHz); no reading of the rail at another EMC clock was found"),
}

CALIBRATION_FORMAT = "dvfslab-calibration"
SIGNIFICANT = 6  # digits kept in the file (the fit is deterministic; this absorbs floating-point noise)


@dataclass
class Fit:
    """The fitted parameters, the profile they give, and each fit reading's residual."""

    params: dict[str, float]
    profile: BoardProfile
    rows: list[dict]
    rank: int
    unpinned: list[str]
    jacobian: np.ndarray | None = None  # d(σ-weighted residual)/d(parameter), parameters in their own units
    n_scales: int = 0  # the job curves' free scales (one per shape curve): degrees of freedom they use


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}")


def _rows_of(fit_lines: Iterable[Line]) -> list[tuple[Line, str]]:
    return [(ln, rail) for ln in fit_lines for rail in ln.used_rails()]


#: parameters the whole-job readings (readings.JOB_CURVES, role fit) are fitted for, with their search box
JOB_FIT_BOX: dict[str, tuple[float, float, float, float]] = {
    "activity_matmul": (0.85, 0.2, 1.0, 1.0),
    "cpu_step_serial_ms": (25.0, 1.0, 400.0, 1.0),
    "cpu_op_us": (43.2, 5.0, 400.0, 1.0),
    "gemm_half_dim": (1.28, 0.16, 10.24, 100.0),
}


def _job_rows(curves) -> list[tuple]:
    # the study's "MAXN" run where its clock is known (the twin predicts it as it was run: MAXN or a confined level)
    return [(c, f) for c in curves for f in [*c.energy_j, *(["maxn"] if c.maxn_run is not None else [])]]


def fit(template: BoardProfile = AGX_ORIN_64GB, fit_lines: Iterable[Line] | None = None,
        measured: Mapping[tuple[str, str], float] | None = None, *, jobs: Iterable | None = None,
        job_params: Iterable[str] | None = None, shapes: Iterable | None = None) -> Fit:
    """Weighted least squares of the :data:`FIT_BOX` parameters on the fit readings.

    ``template`` supplies every other parameter (the assumptions); ``measured`` replaces some
    readings' values (``(line key, rail) -> W``; the ensemble's perturbed readings). Each
    residual is divided by the reading's σ (its stated relative uncertainty times the reading as
    published), so a reading counts in proportion to how well it is known. ``shapes``: job curves
    read as normalised shapes (:mod:`dvfslab.sim.shapes`; the ensemble's members are fitted to the
    fit curves' shapes too, see :func:`sample_member`); ``jobs``: curves read as absolute energies,
    with the step parameters of :data:`JOB_FIT_BOX` fitted too (``benchmarks/twin_jobs.py``).
    """
    from scipy.optimize import least_squares

    from dvfslab.sim.jobs import predict_job, reading_sigma, run_sigma
    from dvfslab.sim.shapes import shape_residuals

    rows = _rows_of(lines("fit") if fit_lines is None else fit_lines)
    if not rows:
        raise DvfsError("calibrate: no fit readings")
    jrows = _job_rows(list(jobs or ()))
    job_box = {n: JOB_FIT_BOX[n] for n in (JOB_FIT_BOX if job_params is None else job_params)}
    box = {**FIT_BOX, **(job_box if jrows else {})}
    names = list(box)
    unit = np.array([box[n][3] for n in names])
    lo = np.array([box[n][1] for n in names])
    hi = np.array([box[n][2] for n in names])
    # the rails' parameters start at their box's start, the jobs' at the template's value
    x0 = np.clip([FIT_BOX[n][0] if n in FIT_BOX else getattr(template, n) / box[n][3] for n in names], lo, hi)
    meas = np.array([(measured or {}).get((ln.key, r), ln.rails[r]) for ln, r in rows]
                    + [(measured or {}).get((c.key, f), c.maxn_j if f == "maxn" else c.energy_j[f]) for c, f in jrows])
    sigma_w = np.array([ln.sigma(r) * ln.rails[r] for ln, r in rows]
                       + [reading_sigma(c, e) * e for (c, f) in jrows
                          for e in [c.maxn_j if f == "maxn" else c.energy_j[f]]])

    shape_curves = list(shapes or ())
    s_run = run_sigma() if shape_curves else 0.0

    def profile_of(x: np.ndarray) -> BoardProfile:
        return with_params(template, dict(zip(names, x * unit, strict=True)))

    def residuals(x: np.ndarray) -> np.ndarray:
        p = profile_of(x)
        cache: dict[str, dict[str, float]] = {}
        twin = [cache.setdefault(ln.key, predict_line(p, ln))[r] for ln, r in rows]
        jc: dict[str, dict] = {}
        for c, f in jrows:
            pj = jc.setdefault(c.key, predict_job(p, c))
            twin.append(pj["maxn_run_j"] if f == "maxn" else pj["levels"][f])
        shape = [r["residual_sigma"] for r in shape_residuals(p, shape_curves, s_run)] if shape_curves else []
        return np.concatenate([(np.array(twin) - meas) / sigma_w, shape])

    res = least_squares(residuals, x0, bounds=(lo, hi), method="trf", x_scale=1.0, xtol=1e-12, ftol=1e-12,
                        gtol=1e-12, max_nfev=2000)
    # parameters with weight in the null space of the (unit-scaled) Jacobian are not pinned
    _, sv, vt = np.linalg.svd(res.jac, full_matrices=True)
    tol = 1e-8 * max(1.0, float(sv.max()))
    rank = int((sv > tol).sum())
    null = vt[rank:]
    unpinned = [n for n, w in zip(names, np.abs(null).max(axis=0) if len(null) else np.zeros(len(names)),
                                  strict=True) if w > 1e-3]
    params = {n: float(v) for n, v in zip(names, res.x * unit, strict=True)}
    profile = profile_of(res.x)
    out_rows = []
    n = len(rows)
    for (ln, rail), m, s, r in zip(rows, meas[:n], sigma_w[:n], res.fun[:n], strict=True):
        out_rows.append({"line": ln.key, "rail": rail, "measured_w": float(m), "sigma_w": float(s),
                         "twin_w": float(predict_line(profile, ln)[rail]), "residual_sigma": float(r)})
    nj = len(rows) + len(jrows)
    for (c, f), m, s, r in zip(jrows, meas[len(rows):], sigma_w[len(rows):], res.fun[len(rows):nj], strict=True):
        out_rows.append({"line": c.key, "rail": "maxn" if f == "maxn" else f"{f:g} MHz", "measured_j": float(m),
                         "sigma_j": float(s), "residual_sigma": float(r)})
    shape_rows = shape_residuals(profile, shape_curves, s_run) if shape_curves else []
    out_rows += [{"line": r["curve"], "rail": f"shape {r['point']}", **r} for r in shape_rows]
    # a curve's free scale costs one degree of freedom, as a fitted parameter does
    return Fit(params, profile, out_rows, rank, unpinned, res.jac / unit[None, :], n_scales=len(shape_curves))


def calibration_document(result: Fit | None = None) -> dict:
    """The calibration file's content (deterministic: no time stamp, numbers rounded)."""
    result = result or fit()
    if result.rank < len(FIT_BOX):
        raise DvfsError(f"calibrate: the fit readings do not pin every fitted parameter (rank {result.rank} of "
                        f"{len(FIT_BOX)}; not pinned: {', '.join(result.unpinned) or 'a combination'})")
    fitted = {n: _round(v) for n, v in result.params.items()}
    by_key = {(r["line"], r["rail"]): r for r in result.rows}
    readings = []
    for ln in lines("fit"):
        for rail, watts in ln.rails.items():
            row = by_key.get((ln.key, rail))
            entry = {"line": ln.key, "source": ln.source, "line_sha256": ln.sha256, "module": ln.module, "rail": rail,
                     "measured_w": watts, "sigma_rel": _round(ln.sigma(rail))}
            if row is None:
                entry["unused"] = ln.unused[rail]
            else:
                entry.update(twin_w=_round(row["twin_w"]), residual_sigma=_round(row["residual_sigma"]))
            readings.append(entry)
    chi2 = sum(r["residual_sigma"] ** 2 for r in result.rows)
    return {
        "format": CALIBRATION_FORMAT, "version": 1, "board": AGX_ORIN_64GB.name,
        "generated_by": "dvfslab calibrate (dvfslab.sim.calibration.fit)",
        "method": "weighted least squares (scipy.optimize.least_squares, trf, bounded); residual = "
                  "(twin - reading) / (sigma_rel x reading); readings: dvfslab.sim.readings (role fit)",
        "parameters": fitted,
        "assumptions": {n: getattr(AGX_ORIN_64GB, n) for n in ASSUMED_RANGES},
        "fit": {"n_readings": len(result.rows), "n_parameters": len(FIT_BOX),
                "chi2": _round(chi2), "dof": len(result.rows) - len(FIT_BOX)},
        "readings": readings,
    }


def write_calibration(path: str | os.PathLike = ORIN_CALIBRATION, doc: dict | None = None) -> dict:
    doc = doc or calibration_document()
    Path(path).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return doc


#: ``calibrate --check`` tolerance on a reading's ``twin_w`` and ``residual_sigma``, in units of that
#: reading's σ: a change the fit could notice is orders above it, floating-point noise far below
CHECK_TOL_SIGMA = 1e-4
#: ... and on a fitted parameter or χ², relative: twice the rounding to :data:`SIGNIFICANT` digits
CHECK_TOL_REL = 1e-5


def _half_unit(x: float) -> float:
    """Half a unit of the last significant digit kept in the file (the rounding of ``x``)."""
    x = abs(float(x))
    return 0.0 if x == 0.0 else 0.5 * 10.0 ** (np.floor(np.log10(x)) - (SIGNIFICANT - 1))


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _reading_diffs(have: list, want: list) -> list[str]:
    if not isinstance(have, list) or len(have) != len(want):
        n = len(have) if isinstance(have, list) else "no"
        return [f"readings: the file has {n} readings, the fit {len(want)}"]
    diffs = []
    for h, w in zip(have, want, strict=True):
        name = f"reading {w['line']} {w['rail']}"
        if not isinstance(h, dict) or (h.get("line"), h.get("rail")) != (w["line"], w["rail"]):
            got = f"{h.get('line')} {h.get('rail')}" if isinstance(h, dict) else "not a reading"
            diffs.append(f"{name}: the file has {got} in its place")
            continue
        sigma_w = w["sigma_rel"] * w["measured_w"]
        for field in sorted(set(h) | set(w)):
            hv, wv = h.get(field), w.get(field)
            if field in ("twin_w", "residual_sigma") and _num(hv) is not None and _num(wv) is not None:
                unit = sigma_w if field == "twin_w" else 1.0  # residual_sigma is already in σ
                tol = CHECK_TOL_SIGMA * unit + _half_unit(hv) + _half_unit(wv)
                if abs(hv - wv) > tol:
                    diffs.append(f"{name}: {field} file {hv:g} vs fit {wv:g} (differs by "
                                 f"{abs(hv - wv) / unit:.3g} σ; tolerance {CHECK_TOL_SIGMA:g} σ)")
            elif hv != wv:
                diffs.append(f"{name}: {field} file {hv!s} vs fit {wv!s}")
    return diffs


def _close_rel(hv, wv) -> bool:
    if _num(hv) is None or _num(wv) is None:
        return hv == wv
    return abs(hv - wv) <= CHECK_TOL_REL * max(abs(hv), abs(wv)) + _half_unit(hv) + _half_unit(wv)


def check_calibration(path: str | os.PathLike = ORIN_CALIBRATION) -> list[str]:
    """What differs between the checked-in file and the fit's output now (empty: nothing).

    Numbers are compared with a stated tolerance (docs/calibration.md, section 2.1): a reading's
    ``twin_w`` and ``residual_sigma`` within :data:`CHECK_TOL_SIGMA` of that reading's σ, a
    fitted parameter and χ² within :data:`CHECK_TOL_REL` relative, each plus the rounding of the
    two values to :data:`SIGNIFICANT` digits; everything else (readings, σ, hashes, sources,
    assumptions) exactly. Each difference names the reading (line and rail) or parameter and field.
    """
    try:
        have = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        return [f"unreadable ({err})"]
    if not isinstance(have, dict):
        return ["not a calibration file (its JSON is not an object)"]
    want = calibration_document()
    diffs = []
    params = have.get("parameters") if isinstance(have.get("parameters"), dict) else {}
    for k, v in want["parameters"].items():
        if not _close_rel(params.get(k), v):
            diffs.append(f"parameter {k}: file {params.get(k)} vs fit {v} (tolerance {CHECK_TOL_REL:g} relative)")
    diffs += [f"parameter {k}: in the file, not fitted" for k in params if k not in want["parameters"]]
    diffs += _reading_diffs(have.get("readings"), want["readings"])
    fit_have = have.get("fit") if isinstance(have.get("fit"), dict) else {}
    for k, v in want["fit"].items():
        if not _close_rel(fit_have.get(k), v):
            diffs.append(f"fit {k}: file {fit_have.get(k)} vs fit {v}")
    diffs += [f"{k}: differs" for k in want if k not in ("parameters", "readings", "fit") and have.get(k) != want[k]]
    return diffs


def leave_one_out(template: BoardProfile = AGX_ORIN_64GB) -> list[dict]:
    """For each fit line: refit without it and predict its rails (``twin_w`` None when a parameter
    is no longer pinned without it; ``unpinned`` names it)."""
    out = []
    for ln in lines("fit"):
        rest = [other for other in lines("fit") if other.key != ln.key]
        res = fit(template, rest)
        pinned = res.rank == len(FIT_BOX)
        pred = predict_line(res.profile, ln) if pinned else {}
        for rail in ln.used_rails():
            twin = pred.get(rail)
            out.append({"line": ln.key, "rail": rail, "measured_w": ln.rails[rail], "twin_w": twin,
                        "error_pct": None if twin is None else 100.0 * (twin / ln.rails[rail] - 1.0),
                        "unpinned": [] if pinned else res.unpinned})
    return out


def fit_chi2(result: Fit) -> tuple[float, int]:
    """χ² of a fit and its degrees of freedom (readings less parameters less the curves' free scales)."""
    chi2 = sum(r["residual_sigma"] ** 2 for r in result.rows)
    return float(chi2), len(result.rows) - len(result.params) - result.n_scales


def birge_ratio(result: Fit) -> float:
    """χ²/dof of a fit: how much larger (> 1) or smaller (< 1) the readings' scatter about the fit is
    than their stated uncertainties say."""
    chi2, dof = fit_chi2(result)
    return chi2 / dof if dof > 0 else float("nan")


def covariance_scale(chi2: float, dof: int) -> float:
    """The factor the fit's covariance is scaled by: ``max(1, χ²/dof)``. A χ²/dof above 1 says the
    readings scatter more than their σ state, so the σ are widened alike; below 1 it says the σ are
    allowances, not scatter, and they are kept as stated (never shrunk)."""
    if dof <= 0:
        raise DvfsError(f"covariance_scale: no degrees of freedom ({dof}) to measure the scatter by")
    return max(1.0, chi2 / dof)


def fit_covariance(result: Fit) -> np.ndarray:
    """Covariance of the fitted parameters (their own units, :data:`FIT_BOX` order):
    ``max(1, χ²/dof)·(JᵀJ)⁻¹`` with ``J`` the Jacobian of the σ-weighted residuals at the optimum
    (:func:`covariance_scale`; docs/calibration.md, section 2.1)."""
    jac = result.jacobian
    return covariance_scale(*fit_chi2(result)) * np.linalg.pinv(jac.T @ jac)


def sample_member(rng: np.random.Generator, template: BoardProfile = AGX_ORIN_64GB,
                  shapes: Iterable | None = None, assumed: Mapping[str, float] | None = None) -> dict:
    """One member of the ensemble: a parameter set drawn consistent with the readings and the ranges.

    Every assumed parameter is drawn uniformly from its range (or given: ``assumed``, a draw of the
    ensemble's second stage); the fitted parameters are the fit
    given those assumptions — of the rail readings and the job curves' shapes (``shapes``: default
    the fit curves, :mod:`dvfslab.sim.shapes`) — plus a draw from the fit's covariance
    (:func:`fit_covariance`, scaled by ``max(1, χ²/dof)``), kept inside the fit's box. Returns
    ``{"profile", "params"`` (assumed and fitted, drawn), ``"chi2", "dof"`` (of the fit given the
    assumptions: the member's weight, docs/calibration.md 4.1)``}``.
    """
    from dvfslab.sim.readings import job_curves

    if assumed is None:
        assumed = {n: float(rng.uniform(lo, hi)) for n, (lo, hi, _why) in ASSUMED_RANGES.items()}
    base = with_params(template, assumed)
    res = fit(base, shapes=job_curves("fit") if shapes is None else shapes)
    names = list(res.params)
    mean = np.array([res.params[n] for n in names])
    draw = rng.multivariate_normal(mean, fit_covariance(res), method="eigh")
    lo = np.array([FIT_BOX[n][1] * FIT_BOX[n][3] for n in names])
    hi = np.array([FIT_BOX[n][2] * FIT_BOX[n][3] for n in names])
    fitted = dict(zip(names, np.clip(draw, lo, hi).tolist(), strict=True))
    chi2, dof = fit_chi2(res)
    return {"profile": with_params(base, fitted), "params": {**assumed, **fitted}, "chi2": chi2, "dof": dof}


def sample_profile(rng: np.random.Generator, template: BoardProfile = AGX_ORIN_64GB) -> tuple[BoardProfile, dict]:
    """:func:`sample_member`'s profile and drawn values (assumed and fitted)."""
    m = sample_member(rng, template)
    return m["profile"], m["params"]


#: which fit lines pin each fitted parameter (for the parameter table of docs/calibration.md)
PINNED_BY = {
    "soc_idle_w": "idle-64gb-jp5, idle-64gb-go (GPU rail, GPU rail-gated)",
    "cpu_idle_w": "idle-64gb-jp5, idle-64gb-go (CPU rail, cores at 729 MHz)",
    "VIN_SYS_5V0": "idle-64gb-jp5, idle-64gb-go",
    "VDDQ_VDD2_1V8AO": "idle-64gb-jp5, idle-64gb-go",
    "cpu_cluster_w": "clocks-max-64gb (CPU rail: 12 idle cores at 2201 MHz)",
    "cpu_core_w_at_max": "forum-maxn, forum-50w, forum-30w (CPU stress of every online core)",
    "cpu_power_exp": "forum-maxn, forum-50w, forum-30w (the modes' CPU caps 2201.6, 1497.6, 1728 MHz)",
    "gpu_clock_w_at_fmax": "clocks-max-64gb (GPU rail: GPU clocked at 1300.5 MHz, idle)",
    "gpu_dyn_w_at_fmax": "forum-maxn, forum-50w, forum-30w (GPU stress)",
    "v_slope_per_mhz": "forum-maxn, forum-50w, forum-30w (GPU stress at 1300.5, 816, 612 MHz)",
}


def parameters_markdown(path: str | os.PathLike = ORIN_CALIBRATION) -> str:
    """The fitted parameters of the checked-in file, with the lines that pin them."""
    doc = json.loads(Path(path).read_text())
    lines_out = ["| Fitted parameter | Value | Pinned by (fit lines) |", "|---|---|---|"]
    lines_out += [f"| `{k}` | {v:g} | {PINNED_BY[k]} |" for k, v in doc["parameters"].items()]
    return "\n".join(lines_out)


def ranges_markdown() -> str:
    """Every assumed parameter: central value, plausible range, reason."""
    out = ["| Assumed parameter | Central | Range (ensemble: uniform) | Why this range |", "|---|---|---|---|"]
    out += [f"| `{k}` | {getattr(AGX_ORIN_64GB, k):g} | {lo:g}–{hi:g} | {why} |"
            for k, (lo, hi, why) in ASSUMED_RANGES.items()]
    return "\n".join(out)
