"""The twin against the real study's whole fine-tuning jobs (esainulab/slmdvfs; docs/calibration.md, 3.5).

Prints, for the checked-in (rail-fitted) twin and for the fit that adds the two fit curves
(``dvfslab.sim.calibration.fit(jobs=...)``, step parameters of ``JOB_FIT_BOX``):

* the run-to-run scatter of one whole-job reading estimated from the fit curves themselves;
* per curve (fit and held-out): normalised-shape RMS, the optimum level of each and their
  distance in steps, MAXN-default ÷ optimum of each (the twin's MAXN is its emulated
  ``nvhost_podgov`` and the level shares it visits), absolute twin ÷ real at the real optimum;
* χ², degrees of freedom, rank and the parameters pinned before / after;
* how strongly the whole-job readings constrain each assumed parameter: the norm of their
  σ-weighted residuals' derivative times the parameter's stated range (above ≈ 2: a reading
  tells the range's ends apart).

Everything is SIMULATED except the readings.

    .venv/bin/python benchmarks/twin_jobs.py
"""

from __future__ import annotations

import numpy as np

from dvfslab.sim.calibration import ASSUMED_RANGES, birge_ratio, covariance_scale, fit, fit_chi2
from dvfslab.sim.jobs import job_table, level_rows, predict_job, reading_sigma, run_sigma
from dvfslab.sim.profiles import AGX_ORIN_64GB, with_params
from dvfslab.sim.readings import job_curves


def show(title: str, profile) -> None:
    print(f"\n== {title} (SIMULATED twin vs real readings)")
    for r in job_table(profile):
        share = ", ".join(f"{k} MHz {100 * v:.0f} %" for k, v in r["twin_maxn_share"].items())
        opt = r["real_optimum_mhz"]
        if r["maxn_over_optimum_pct"] is None:
            run = r["maxn_run"]
            maxn = "'MAXN' run: " + ("unknown clock" if run is None else f"confined at {run:g} MHz")
        else:
            maxn = (f"MAXN/opt real {r['real_maxn_over_optimum']:.3f} twin {r['twin_maxn_over_optimum']:.3f} "
                    f"({r['maxn_over_optimum_pct']:+.1f} %)")
        print(f"{r['curve']:24s} {r['role']:10s} shape RMS {r['shape_rms_pct']:5.1f} %  optimum real {opt:g} "
              f"twin {r['twin_optimum_mhz']:g} ({r['optimum_steps']} steps)  {maxn}  twin/real at {opt:g}: "
              f"{r['twin_j'][opt] / r['real_j'][opt]:.2f}  [podgov: {share}]")
    rows = level_rows(profile)
    print(f"held-out level rows within 2σ·√2 ({rows[0]['tolerance_pct']:.1f} %): "
          f"{sum(r['within'] for r in rows)} of {len(rows)}")


def _range_sensitivity(profile, resid) -> dict[str, float]:
    """Per assumed parameter: the norm of d(residuals)/d(parameter) times its range (a forward
    difference of 1e-3 of the range)."""
    base = resid(profile)
    out = {}
    for name, (lo, hi, _why) in ASSUMED_RANGES.items():
        h = 1e-3 * (hi - lo)
        d = (resid(with_params(profile, {name: getattr(profile, name) + h})) - base) / h
        out[name] = float(np.linalg.norm(d) * (hi - lo))
    return out


def job_sensitivity(profile) -> dict[str, float]:
    curves = job_curves("fit")

    def resid(p) -> np.ndarray:
        out = []
        for c in curves:
            pj = predict_job(p, c)
            for f, e in c.energy_j.items():
                out.append((pj["levels"][f] - e) / (reading_sigma(c, e) * e))
            if pj["maxn_run_j"] is not None:  # the study's "MAXN" run as it was run (a confined level, MAXN)
                out.append((pj["maxn_run_j"] - c.maxn_j) / (reading_sigma(c, c.maxn_j) * c.maxn_j))
        return np.array(out)

    return _range_sensitivity(profile, resid)


def shape_sensitivity(profile) -> dict[str, float]:
    """As :func:`job_sensitivity`, on the curves' normalised-shape residuals (dvfslab.sim.shapes)."""
    from dvfslab.sim.shapes import shape_residuals

    s_run = run_sigma()

    def resid(p) -> np.ndarray:
        return np.array([r["residual_sigma"] for r in shape_residuals(p, sigma_run=s_run)])

    return _range_sensitivity(profile, resid)


def main() -> None:
    print(f"run-to-run scatter of one whole-job reading (pooled cubic residual of the fit curves): "
          f"{100 * run_sigma():.2f} %")
    before = fit()
    print(f"rails only (checked in): {len(before.rows)} readings, {len(before.params)} parameters, rank {before.rank}, "
          f"chi2/dof {birge_ratio(before):.3f}")
    show("checked-in twin", AGX_ORIN_64GB)
    after = fit(jobs=job_curves("fit"))
    chi2, dof = fit_chi2(after)
    print(f"\nrails + fit curves: {len(after.rows)} readings, {len(after.params)} parameters, rank {after.rank} "
          f"(not pinned: {after.unpinned or 'none'}), chi2 {chi2:.1f} on {dof} dof")
    print("  new fitted: " + ", ".join(f"{k} {after.params[k]:.4g}" for k in after.params if k not in before.params))
    print("  worst job residuals (σ): " + ", ".join(
        f"{r['line']} {r['rail']} {r['residual_sigma']:+.1f}"
        for r in sorted(after.rows, key=lambda r: -abs(r["residual_sigma"]))[:5]))
    show("twin fitted with the fit curves", after.profile)
    joint = fit(shapes=job_curves("fit"))
    chi2, dof = fit_chi2(joint)
    print(f"\nrails + the fit curves' normalised shapes (the ensemble members' fit, central assumptions): chi2 "
          f"{chi2:.1f} on {dof} dof (scale max(1, chi2/dof) = {covariance_scale(chi2, dof):.2f})")
    print("  fitted (rails only -> with shapes): " + ", ".join(
        f"{k} {before.params[k]:.4g} -> {joint.params[k]:.4g}" for k in before.params))
    print("  worst residuals (σ): " + ", ".join(
        f"{r['line']} {r['rail']} {r['residual_sigma']:+.1f}"
        for r in sorted(joint.rows, key=lambda r: -abs(r["residual_sigma"]))[:6]))
    show("twin fitted with the rails and the fit curves' shapes", joint.profile)
    print("\nhow strongly the fit curves constrain each assumed parameter (|d residual/dp| x range, σ units):")
    for k, v in sorted(job_sensitivity(AGX_ORIN_64GB).items(), key=lambda kv: -kv[1]):
        print(f"  {k:26s} {v:8.1f}")

    print("\n... on the normalised shapes (what the members' fit and weights see; below ≈ 2: the readings leave it free):")
    for k, v in sorted(shape_sensitivity(AGX_ORIN_64GB).items(), key=lambda kv: -kv[1]):
        print(f"  {k:26s} {v:8.1f}")

if __name__ == "__main__":
    main()
