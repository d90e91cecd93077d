"""The twin's findings as bands: ``dvfslab simulate --ensemble N [--quick] --out DIR``. Simulated.

Each member is one parameter set of the simulated AGX Orin drawn by
:func:`dvfslab.sim.calibration.sample_member` — every assumed parameter uniformly from its stated
range, the fitted parameters from the fit given those assumptions (the rail readings and the real
fit curves' normalised shapes, :mod:`dvfslab.sim.shapes`) plus a draw from the fit's covariance
(``max(1, χ²/dof)·(JᵀJ)⁻¹``: never shrunk) — and weighted by its likelihood given those readings
(:func:`member_weights`: importance weights). The plan's grid is simulated on each member whose
weight is not negligible (:data:`MIN_WEIGHT_SHARE`; :func:`dvfslab.sweep.simulate.simulate_dataset`).
From each member's dataset: the oracle's mean saving vs MAXN on the evaluation workloads (all,
≤ 70M and > 70M parameters), the paper's tree's (``mlg-paper``), FFG − oracle, the learned
tree's (MLG) − FFG, and the share of all workloads whose energy-optimal level is each level
(:func:`member_metrics`); from the member itself, its figures on the real job curves
(:func:`job_figures`). ``DIR/ensemble.json`` holds weighted p5 / p50 / p95 of each (and the
unweighted ones), the weights and their effective number, the same figures for the central
(checked-in) parameters on the same grid, the paper's, and every member's draws.

The learned tree is chosen as notebook 03 does (decision trees by leave-one-workload-out
accuracy) in one place, :func:`learned_tree`, so that it can follow the selection code when it
moves. Members are seeded (``SeedSequence([seed, member])``): the same seed gives the same file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from dvfslab.core import reference as R
from dvfslab.core.levels import format_mhz
from dvfslab.data.contract import Dataset
from dvfslab.evaluation.findings import twin_findings
from dvfslab.sim.calibration import ASSUMED_RANGES, sample_member
from dvfslab.sim.profiles import get_profile
from dvfslab.sim.shapes import effective_members, likelihood_weights, weighted_percentiles
from dvfslab.sweep.simulate import SimulationPlan, simulate_dataset

PERCENTILES = (5, 50, 95)
#: the paper's figures (measured on an AGX Orin 64GB) the bands are read against
PAPER = R.as_dict()
SCALARS = ("oracle_saving_pct", "oracle_saving_le70m_pct", "oracle_saving_gt70m_pct", "mlg_paper_saving_pct",
           "mlg_paper_saving_le70m_pct", "mlg_paper_saving_gt70m_pct", "ffg_minus_oracle_pts", "mlg_minus_ffg_pts")


def learned_tree(sweep, features, train_ids, seed: int = 0) -> dict:
    """The learned tree's (MLG) registry parameters as notebook 03 picks them: the decision tree of
    the small grid with the best leave-one-workload-out accuracy, on the usable features."""
    from dvfslab.analysis import features as FT
    from dvfslab.evaluation import selection as S

    train = features[features["workload_id"].isin(train_ids)].reset_index(drop=True)
    used, _dropped = FT.usable_features(train)
    trees = {k: m for k, m in S.candidate_models(quick=True, seed=seed).items() if S.family(k) == "tree"}
    cv = S.summarize_cv(S.fold_metrics(S.cross_validate(trees, train, sweep, used, schemes=["loocv"])), trees)
    best = S.select_best(cv, family_name="tree", metric="accuracy", scheme="loocv")
    return {"estimator": trees[best], "features": list(used)}


def mlg_minus_ffg_pts(ds: Dataset, seed: int = 0) -> float:
    """Mean saving of the learned tree minus FFG's on the evaluation workloads (replayed)."""
    from dvfslab.analysis import aggregate as F
    from dvfslab.analysis import features as FT
    from dvfslab.evaluation import replay as E
    from dvfslab.evaluation.recipe import evaluate_dataset

    sweep = F.sweep_from_dataset(ds)
    table = FT.feature_table(sweep)
    train_split, eval_split = FT.pick_splits(table)
    train_ids = list(table.loc[table["split"] == train_split, "workload_id"])
    # the evaluation recipe, FFG and the learned tree on the evaluation split (no CV: the band
    # is of the replayed difference)
    ev = evaluate_dataset(sweep, table, train_ids, sweep.workload_ids(eval_split), names=["ffg", "mlg"],
                          candidates=[], params={"mlg": learned_tree(sweep, table, train_ids, seed)}, seed=seed,
                          cv=False, train_split=train_split, eval_split=eval_split)
    return float(E.difference_pts(ev.overall, "mlg", "ffg"))


def member_metrics(ds: Dataset, seed: int = 0) -> dict:
    """The figures of one dataset (see the module doc); savings in %, differences in points."""
    f = twin_findings(ds)
    sv = f["saving_pct"]
    n = f["n_workloads"]
    return {
        "oracle_saving_pct": sv["oracle"]["all"]["mean"],
        "oracle_saving_le70m_pct": sv["oracle"]["le70m"]["mean"],
        "oracle_saving_gt70m_pct": sv["oracle"]["gt70m"]["mean"],
        "mlg_paper_saving_pct": sv["paper_tree"]["all"]["mean"],
        "mlg_paper_saving_le70m_pct": sv["paper_tree"]["le70m"]["mean"],
        "mlg_paper_saving_gt70m_pct": sv["paper_tree"]["gt70m"]["mean"],
        "ffg_minus_oracle_pts": sv["ffg"]["all"]["mean"] - sv["oracle"]["all"]["mean"],
        "mlg_minus_ffg_pts": mlg_minus_ffg_pts(ds, seed),
        "ffg_mhz": f["ffg_mhz"],
        "optimum_share_pct": {k: 100.0 * v / n for k, v in f["optimal_level_counts"].items()},
    }


def _bands(members: list[dict], levels: list[str], weights: np.ndarray | None = None) -> dict:
    def pct(values: list[float]) -> dict:
        p5, p50, p95 = weighted_percentiles(values, weights, PERCENTILES)
        return {"p5": p5, "p50": p50, "p95": p95}

    out = {k: pct([m[k] for m in members]) for k in SCALARS}
    out["optimum_share_pct"] = {lv: pct([m["optimum_share_pct"].get(lv, 0.0) for m in members]) for lv in levels}
    return out


def job_figures(profile) -> dict:
    """Per real job curve (fit and held out): the twin's shape RMS against it, optimum levels and their
    distance, MAXN ÷ optimum (runs that ran MAXN) and the oracle's saving vs MAXN of twin and real (%)."""
    from dvfslab.sim.jobs import job_table

    out = {}
    for r in job_table(profile):
        twin_min = min(r["twin_j"].values())
        real = None if r["maxn_run"] != "maxn" else 100.0 * (1.0 - min(r["real_j"].values()) / r["real_maxn_j"])
        out[r["curve"]] = {"role": r["role"], "shape_rms_pct": r["shape_rms_pct"], "optimum_steps": r["optimum_steps"],
                           "twin_optimum_mhz": r["twin_optimum_mhz"], "real_optimum_mhz": r["real_optimum_mhz"],
                           "maxn_over_optimum_pct": r["maxn_over_optimum_pct"],
                           "twin_saving_pct": 100.0 * (1.0 - twin_min / r["twin_maxn_j"]), "real_saving_pct": real}
    return out


def _job_bands(members: list[dict], weights: np.ndarray) -> dict:
    out = {}
    for key in members[0]["jobs"]:
        row = {}
        for fig in ("shape_rms_pct", "twin_saving_pct", "optimum_steps", "maxn_over_optimum_pct"):
            vals = [m["jobs"][key][fig] for m in members]
            if vals[0] is not None:
                p5, p50, p95 = weighted_percentiles(vals, weights, PERCENTILES)
                row[fig] = {"p5": p5, "p50": p50, "p95": p95}
        real = members[0]["jobs"][key]["real_saving_pct"]
        row["real_saving_pct"] = real
        row["covered"] = None if real is None else row["twin_saving_pct"]["p5"] <= real <= row["twin_saving_pct"]["p95"]
        row["role"] = members[0]["jobs"][key]["role"]
        out[key] = row
    return out


#: a drawn member whose weight is below this share of the largest weight is not simulated (its grid
#: could move no percentile by more than this share); the weight so left out is recorded
MIN_WEIGHT_SHARE = 1e-3


def member_weights(chi2: list[float], dof: list[int], log_proposal: list[float] | None = None,
                   scale_from: tuple[list[float], list[int]] | None = None) -> tuple[np.ndarray, float]:
    """Each member's weight, its likelihood given the readings (rails and job shapes) at its fit over
    the density it was drawn from: ``w_i ∝ exp(−χ²_i / 2s) / q_i``, with ``s = max(1, min χ²/dof)``
    over the members (or over ``scale_from``'s, all the fits of the run): the σ widened, alike for
    all members, until the best description of the readings has χ²/dof = 1; never shrunk."""
    from dvfslab.sim.calibration import covariance_scale

    c_all, d_all = scale_from or (chi2, dof)
    best = int(np.argmin(np.asarray(c_all) / np.asarray(d_all)))
    scale = covariance_scale(c_all[best], d_all[best])
    return likelihood_weights(chi2, scale, log_proposal), scale


#: the second stage's proposal: the pilot's weighted covariance (in units of each assumed range) times
#: INFLATE, plus FLOOR² on the diagonal, so that it is wider than what the pilot saw of the posterior
INFLATE, FLOOR = 2.0, 0.25


def _unit(params: dict) -> np.ndarray:
    return np.array([(params[k] - lo) / (hi - lo) for k, (lo, hi, _why) in ASSUMED_RANGES.items()])


def proposal(pilot: list[dict], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (assumed parameters in units of their ranges) of the second stage's draws."""
    x = np.array([_unit(m["params"]) for m in pilot])
    mu = weights @ x
    d = x - mu
    cov = INFLATE * (weights[:, None] * d).T @ d + FLOOR**2 * np.eye(len(mu))
    return mu, cov


def draw_proposed(rng: np.random.Generator, mu: np.ndarray, cov: np.ndarray, n: int) -> tuple[list[dict], float]:
    """``n`` assumed-parameter sets from the normal proposal truncated to the ranges (a draw outside is
    redrawn), and the share of draws that fell inside (the truncated density is the normal's ÷ it)."""
    names = list(ASSUMED_RANGES)
    lo = np.array([ASSUMED_RANGES[k][0] for k in names])
    hi = np.array([ASSUMED_RANGES[k][1] for k in names])
    out: list[dict] = []
    tries = 0
    for tries in range(1, 1000 * n + 100_001):  # noqa: B007 (the count is the acceptance's denominator)
        x = rng.multivariate_normal(mu, cov)
        if np.all((x >= 0.0) & (x <= 1.0)):
            out.append({k: float(v) for k, v in zip(names, lo + x * (hi - lo), strict=True)})
            if len(out) == n:
                break
    if len(out) < n:
        from dvfslab.core.errors import DvfsError

        raise DvfsError(f"simulate --ensemble: the proposal fell inside the assumed ranges {len(out)} times in "
                        f"{1000 * n + 100_000} draws; rerun with more members (--ensemble N)")
    return out, len(out) / tries


def log_mixture_density(params: dict, mu: np.ndarray, cov: np.ndarray, inside: float) -> float:
    """``ln q`` of a draw under the two stages together (relative to the uniform prior, density 1 on the
    ranges in their units): half the draws from the prior, half from the normal truncated to the ranges
    (``inside``: its share inside) — every draw, pilot or second stage, is weighted by ``L / q``
    (the balance heuristic of multiple importance sampling: no weight above 2 L)."""
    from scipy.stats import multivariate_normal

    normal = float(multivariate_normal.logpdf(_unit(params), mu, cov)) - np.log(inside)
    return float(np.logaddexp(np.log(0.5), np.log(0.5) + normal))


def run_ensemble(n: int, plan: SimulationPlan, out_dir: str | os.PathLike, *, progress: bool = True,
                 force: bool = False) -> dict:
    """Simulate ``plan``'s grid on the central parameters and on ``n`` weighted sets; write ``ensemble.json``.

    Two stages of importance sampling (docs/calibration.md, 4.1). The pilot: half the ``n`` sets,
    drawn by :func:`dvfslab.sim.calibration.sample_member` (assumed parameters uniform on their
    ranges, the fitted ones fitted to the rails and the fit curves' shapes given them). The second
    stage: the other half, their assumed parameters drawn from a normal :func:`proposal` around
    the pilot's likelihood-weighted draws. Every set is weighted by its likelihood over the two
    stages' mixed density (:func:`log_mixture_density`, :func:`member_weights`); the grid is
    simulated on each set whose weight is not negligible and the bands are
    weighted percentiles. ``out_dir`` holding anything is refused (before simulating) unless
    ``force``; the folder is written beside it and renamed into place when complete
    (:func:`dvfslab.core.files.new_folder`).
    """
    from dvfslab.core.errors import DvfsError
    from dvfslab.core.files import new_folder, refuse_occupied

    if n < 2:
        raise DvfsError(f"simulate --ensemble: need at least 2 parameter sets for a band, got {n}")
    if not get_profile(plan.board).calibrated:
        raise DvfsError(f"simulate --ensemble: board {plan.board} is not calibrated; bands need agx-orin-64gb")
    refuse_occupied(out_dir, "dvfslab simulate --ensemble", force=force)
    levels = [format_mhz(f) for f in get_profile(plan.board).levels_mhz]
    n_pilot = (n + 1) // 2  # the pilot: half the draws (rounded up); the second stage: the rest
    pilot = []
    for i in tqdm(range(n_pilot), desc="ensemble pilot draws", unit="set", disable=not progress):
        m = sample_member(np.random.default_rng(np.random.SeedSequence([plan.seed, i])))
        pilot.append({"member": i, **m})
    w_pilot, _ = member_weights([m["chi2"] for m in pilot], [m["dof"] for m in pilot])
    mu, cov = proposal(pilot, w_pilot)
    proposed, inside = draw_proposed(np.random.default_rng(np.random.SeedSequence([plan.seed, n, 2])), mu, cov,
                                     n - n_pilot)
    drawn = list(pilot)
    for j, assumed in enumerate(tqdm(proposed, desc="ensemble draws", unit="set", disable=not progress)):
        m = sample_member(np.random.default_rng(np.random.SeedSequence([plan.seed, n_pilot + j])), assumed=assumed)
        drawn.append({"member": n_pilot + j, **m})
    for m in drawn:
        m["log_q"] = log_mixture_density(m["params"], mu, cov, inside)
    weights_all, scale = member_weights([m["chi2"] for m in drawn], [m["dof"] for m in drawn],
                                        [m["log_q"] for m in drawn])
    keep = [i for i, w in enumerate(weights_all) if w >= MIN_WEIGHT_SHARE * weights_all.max()]
    left_out = float(sum(w for i, w in enumerate(weights_all) if i not in keep))
    for i in keep:
        drawn[i]["jobs"] = job_figures(drawn[i]["profile"])
    members = []
    with tempfile.TemporaryDirectory(prefix="dvfslab-ensemble-") as tmp:
        central = member_metrics(simulate_dataset(Path(tmp) / "central", plan, progress=False), plan.seed)
        for i in tqdm(keep, desc="ensemble members", unit="set", disable=not progress):
            ds = simulate_dataset(Path(tmp) / f"m{i:03d}", plan, progress=False, profile=drawn[i]["profile"])
            members.append({**{k: v for k, v in drawn[i].items() if k != "profile"}, "weight": float(weights_all[i]),
                            "metrics": member_metrics(ds, plan.seed)})
    w = np.array([m["weight"] for m in members])
    w = w / w.sum()
    doc = {
        "source": "simulated",
        "note": "SIMULATED, NOT A MEASUREMENT: the digital twin's findings over parameter sets consistent with the "
                "readings and the stated ranges, each weighted by its likelihood given the readings "
                "(docs/calibration.md, section 4.1)",
        "n_members": n, "seed": plan.seed, "percentiles": list(PERCENTILES),
        "weighting": {"method": "two-stage importance sampling: n pilot draws from the uniform prior, n draws from a "
                                "normal around the pilot's weighted draws (truncated to the ranges); every draw weighted "
                                "by w ∝ exp(-chi2 / 2s) / q, chi2 of its fit (rail readings and the fit curves' "
                                "normalised shapes) given its assumed parameters, q = (prior + truncated normal) / 2; "
                                "s = max(1, min chi2/dof); weighted percentiles (inverted CDF)",
                      "proposal_inside_share": inside,
                      "scale": scale, "effective_members": effective_members(weights_all),
                      "pilot_effective_members": effective_members(w_pilot),
                      "proposal": {"inflate": INFLATE, "floor": FLOOR,
                                   "mean": dict(zip(ASSUMED_RANGES, mu.tolist(), strict=True)),
                                   "sd": dict(zip(ASSUMED_RANGES, np.sqrt(np.diag(cov)).tolist(), strict=True))},
                      "pilot": [{"member": m["member"], "chi2": m["chi2"], "dof": m["dof"], "weight": float(w),
                                 "params": m["params"]} for m, w in zip(pilot, w_pilot, strict=True)],
                      "simulated": len(keep), "weight_left_out": left_out, "min_weight_share": MIN_WEIGHT_SHARE},
        "grid": {"quick": plan.quick, "models": list(plan.models),
                 "characterization_tasks": list(plan.characterization_tasks),
                 "evaluation_tasks": list(plan.evaluation_tasks), "reps": plan.reps, "steps": plan.steps,
                 "n_workloads": len(plan.workloads())},
        "ranges": {k: {"low": lo, "high": hi, "why": why} for k, (lo, hi, why) in ASSUMED_RANGES.items()},
        "bands": _bands([m["metrics"] for m in members], levels, w),
        "unweighted_bands": _bands([m["metrics"] for m in members], levels),
        "jobs": _job_bands(members, w),
        "param_bands": {k: dict(zip(("p5", "p50", "p95"), weighted_percentiles([m["params"][k] for m in members], w,
                                                                               PERCENTILES), strict=True))
                        for k in members[0]["params"]},
        "central": central,
        "central_jobs": job_figures(get_profile(plan.board)),
        "paper": PAPER,
        "members": members,
        "draws_not_simulated": [{k: v for k, v in drawn[i].items() if k != "profile"} | {"weight": float(weights_all[i])}
                                for i in range(len(drawn)) if i not in keep],
    }
    with new_folder(out_dir, "dvfslab simulate --ensemble", force=force) as tmp:
        (tmp / "ensemble.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return doc


LABELS = {
    "oracle_saving_pct": ("oracle mean saving vs MAXN (evaluation)", "–", " %"),
    "oracle_saving_le70m_pct": ("oracle mean saving, models ≤ 70M", "MLG: vary, can lose", " %"),
    "oracle_saving_gt70m_pct": ("oracle mean saving, models > 70M", f"MLG: {R.gt70m_text()} %", " %"),
    "mlg_paper_saving_pct": ("the paper's tree (mlg-paper) mean saving", f"MLG: {R.MLG_MEAN_SAVING_PCT:.2f} %", " %"),
    "mlg_paper_saving_le70m_pct": ("the paper's tree, models ≤ 70M", "–", " %"),
    "mlg_paper_saving_gt70m_pct": ("the paper's tree, models > 70M", f"MLG: {R.gt70m_text()} %", " %"),
    "ffg_minus_oracle_pts": ("FFG − oracle", "–", " points"),
    "mlg_minus_ffg_pts": ("learned tree (MLG) − FFG", f"{R.MLG_MINUS_FFG_PTS:+g} points", " points"),
}


def ensemble_markdown(doc: dict) -> str:
    """The bands next to the central figure (same grid) and the paper's, as a markdown table."""
    out = ["| Figure | Paper (measured) | Twin, central parameters (**simulated**) | Twin band p5 – p95 (p50) |",
           "|---|---|---|---|"]
    for key, (label, paper, unit) in LABELS.items():
        b, c = doc["bands"][key], doc["central"][key]
        out.append(f"| {label} | {paper} | {c:+.2f}{unit} | {b['p5']:+.2f} – {b['p95']:+.2f} ({b['p50']:+.2f}){unit} |"
                   if unit == " points" else
                   f"| {label} | {paper} | {c:.1f}{unit} | {b['p5']:.1f} – {b['p95']:.1f} ({b['p50']:.1f}){unit} |")
    shares = doc["bands"]["optimum_share_pct"]
    for lv, b in shares.items():
        if b["p95"] > 0 or doc["central"]["optimum_share_pct"].get(lv, 0) > 0:
            c = doc["central"]["optimum_share_pct"].get(lv, 0.0)
            paper = f"{'in' if R.in_optimal_range(float(lv)) else 'outside'} {R.optimal_range_text()}"
            out.append(f"| workloads whose optimum is {lv} MHz | {paper} | {c:.0f} % | "
                       f"{b['p5']:.0f} – {b['p95']:.0f} ({b['p50']:.0f}) % |")
    return "\n".join(out)


def jobs_markdown(doc: dict) -> str:
    """The real job curves against the weighted members: the twin's figures (p5 – p95, p50) and the real ones."""
    out = ["| Curve | Role | Shape RMS | Optimum steps from the real | MAXN ÷ optimum error | Oracle saving vs MAXN, "
           "twin band | Real | Inside |", "|---|---|---|---|---|---|---|---|"]

    def band(b: dict | None, fmt: str) -> str:
        return "–" if b is None else f"{b['p5']:{fmt}} – {b['p95']:{fmt}} ({b['p50']:{fmt}})"

    for key, j in doc["jobs"].items():
        real = "–" if j["real_saving_pct"] is None else f"{j['real_saving_pct']:.1f} %"
        inside = "–" if j["covered"] is None else ("yes" if j["covered"] else "**no**")
        out.append(f"| {key} | {j['role']} | {band(j['shape_rms_pct'], '.1f')} % | {band(j['optimum_steps'], '.0f')} | "
                   f"{band(j.get('maxn_over_optimum_pct'), '+.1f')}{' %' if j.get('maxn_over_optimum_pct') else ''} | "
                   f"{band(j['twin_saving_pct'], '.1f')} % | {real} | {inside} |")
    return "\n".join(out)


def freedom_markdown(doc: dict) -> str:
    """Each assumed parameter: its stated range, the weighted members' p5 – p95, and the share of the range
    that spans (near 90 %: the readings leave it free; a uniform prior's p5 – p95 spans 90 %)."""
    out = ["| Assumed parameter | Range | Weighted p5 – p95 (p50) | Share of the range |", "|---|---|---|---|"]
    for k, r in doc["ranges"].items():
        b = doc["param_bands"][k]
        share = (b["p95"] - b["p5"]) / (r["high"] - r["low"])
        out.append(f"| `{k}` | {r['low']:g}–{r['high']:g} | {b['p5']:.4g} – {b['p95']:.4g} ({b['p50']:.4g}) | "
                   f"{100 * share:.0f} % |")
    return "\n".join(out)
