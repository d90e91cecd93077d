"""The twin against the real readings that set none of its parameters (docs/calibration.md, section 3).

:func:`validation_table` predicts every rail of every ``validation`` line of
:mod:`dvfslab.sim.readings` and compares it with the reading; the tolerance of a row is twice the
reading's stated uncertainty (declared before the errors were computed). :func:`allowed_outside`
is the pass rule: the most rows a twin that is right would leave outside their tolerance with
probability at least 1 %. :func:`loo_markdown` reports the leave-one-reading-out errors of the fit
(:func:`dvfslab.sim.calibration.leave_one_out`).
"""

from __future__ import annotations

from dvfslab.sim.calibration import leave_one_out
from dvfslab.sim.profiles import AGX_ORIN_64GB, BoardProfile
from dvfslab.sim.readings import lines, predict_line

TOLERANCE_SIGMAS = 2.0  # a row's tolerance, in units of its reading's stated σ
COVERAGE = 0.95  # the chance a right twin lands a row inside 2σ
FALSE_ALARM = 0.01  # the pass rule's chance of failing a right twin


def validation_table(profile: BoardProfile = AGX_ORIN_64GB) -> list[dict]:
    """One row per rail of every validation line: reading, twin, relative error, tolerance."""
    rows = []
    for ln in lines("validation"):
        twin = predict_line(profile, ln)
        for rail, measured in ln.rails.items():
            err = twin[rail] / measured - 1.0
            tol = TOLERANCE_SIGMAS * ln.sigma(rail)
            rows.append({"line": ln.key, "rail": rail, "state": ln.note or ln.state.stress or "", "module": ln.module,
                         "uncertainty": ", ".join(ln.components), "measured_w": measured, "twin_w": twin[rail],
                         "error_pct": 100.0 * err, "tolerance_pct": 100.0 * tol, "within": abs(err) <= tol})
    return rows


def allowed_outside(n_rows: int) -> int:
    """The smallest k with P(Binomial(n, 1 − COVERAGE) > k) < FALSE_ALARM (docs/calibration.md, 3.0)."""
    from scipy.stats import binom

    return next(k for k in range(n_rows + 1) if binom.sf(k, n_rows, 1.0 - COVERAGE) < FALSE_ALARM)


def validation_markdown(profile: BoardProfile = AGX_ORIN_64GB) -> str:
    """The validation table of docs/calibration.md, with the pass rule's verdict."""
    rows = validation_table(profile)
    out = ["| Line | Rail | State | Uncertainty | Measured (W) | Twin (W) | Error | Tolerance (2σ) | Inside |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['line']} | {r['rail']} | {r['state']} | {r['uncertainty']} | {r['measured_w']:.3f} | "
                   f"{r['twin_w']:.3f} | {r['error_pct']:+.1f} % | ±{r['tolerance_pct']:.0f} % | "
                   f"{'yes' if r['within'] else '**no**'} |")
    outside = sum(not r["within"] for r in rows)
    k = allowed_outside(len(rows))
    out.append("")
    out.append(f"{outside} of {len(rows)} rows outside their tolerance; the pass rule allows {k} "
               f"({'pass' if outside <= k else 'FAIL'}).")
    return "\n".join(out)


def loo_markdown(profile: BoardProfile = AGX_ORIN_64GB) -> str:
    """Leave-one-reading-out: each fit line predicted by the fit without it."""
    out = ["| Fit line left out | Rail | Measured (W) | Predicted without it (W) | Error |", "|---|---|---|---|---|"]
    for r in leave_one_out(profile):
        if r["twin_w"] is None:
            out.append(f"| {r['line']} | {r['rail']} | {r['measured_w']:.3f} | – | not pinned without it: "
                       f"{', '.join(r['unpinned'])} |")
        else:
            out.append(f"| {r['line']} | {r['rail']} | {r['measured_w']:.3f} | {r['twin_w']:.3f} | "
                       f"{r['error_pct']:+.1f} % |")
    return "\n".join(out)
