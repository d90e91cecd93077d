"""The twin's findings as bands: ``dvfslab simulate --ensemble N [--quick] --out DIR``. Simulated.

Each member is one parameter set of the simulated AGX Orin drawn by
:func:`dvfslab.sim.calibration.sample_profile` — every assumed parameter uniformly from its stated
range, the fitted parameters from the fit given those assumptions plus a draw from the fit's
covariance (``(χ²/dof)·(JᵀJ)⁻¹``: the readings' own scatter) — on which the plan's grid is simulated
(:func:`dvfslab.sweep.simulate.simulate_dataset`). From each member's dataset: the oracle's mean
saving vs MAXN on the evaluation workloads (all, ≤ 70M and > 70M parameters), the paper's tree's
(``mlg-paper``), FFG − oracle, the learned tree's (MLG) − FFG, and the share of all workloads
whose energy-optimal level is each level (:func:`member_metrics`). ``DIR/ensemble.json`` holds
p5 / p50 / p95 of each over the members, the same figures for the central (checked-in)
parameters on the same grid, the paper's, and every member's draws.

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
from dvfslab.sim.calibration import ASSUMED_RANGES, sample_profile
from dvfslab.sim.profiles import get_profile
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


def _bands(members: list[dict], levels: list[str]) -> dict:
    def pct(values: list[float]) -> dict:
        p5, p50, p95 = np.percentile(np.asarray(values, dtype=float), PERCENTILES)
        return {"p5": float(p5), "p50": float(p50), "p95": float(p95)}

    out = {k: pct([m[k] for m in members]) for k in SCALARS}
    out["optimum_share_pct"] = {lv: pct([m["optimum_share_pct"].get(lv, 0.0) for m in members]) for lv in levels}
    return out


def run_ensemble(n: int, plan: SimulationPlan, out_dir: str | os.PathLike, *, progress: bool = True,
                 force: bool = False) -> dict:
    """Simulate ``plan``'s grid on the central parameters and on ``n`` drawn sets; write ``ensemble.json``.

    ``out_dir`` holding anything is refused (before simulating) unless ``force``; the folder is
    written beside it and renamed into place when complete (:func:`dvfslab.core.files.new_folder`).
    """
    from dvfslab.core.errors import DvfsError
    from dvfslab.core.files import new_folder, refuse_occupied

    if n < 2:
        raise DvfsError(f"simulate --ensemble: need at least 2 parameter sets for a band, got {n}")
    if not get_profile(plan.board).calibrated:
        raise DvfsError(f"simulate --ensemble: board {plan.board} is not calibrated; bands need agx-orin-64gb")
    refuse_occupied(out_dir, "dvfslab simulate --ensemble", force=force)
    levels = [format_mhz(f) for f in get_profile(plan.board).levels_mhz]
    members = []
    with tempfile.TemporaryDirectory(prefix="dvfslab-ensemble-") as tmp:
        central = member_metrics(simulate_dataset(Path(tmp) / "central", plan, progress=False), plan.seed)
        for i in tqdm(range(n), desc="ensemble members", unit="set", disable=not progress):
            rng = np.random.default_rng(np.random.SeedSequence([plan.seed, i]))
            profile, drawn = sample_profile(rng)
            ds = simulate_dataset(Path(tmp) / f"m{i:03d}", plan, progress=False, profile=profile)
            members.append({"member": i, "params": drawn, "metrics": member_metrics(ds, plan.seed)})
    doc = {
        "source": "simulated",
        "note": "SIMULATED, NOT A MEASUREMENT: the digital twin's findings over parameter sets consistent with the "
                "readings (within their stated uncertainty) and the stated ranges (docs/calibration.md)",
        "n_members": n, "seed": plan.seed, "percentiles": list(PERCENTILES),
        "grid": {"quick": plan.quick, "models": list(plan.models),
                 "characterization_tasks": list(plan.characterization_tasks),
                 "evaluation_tasks": list(plan.evaluation_tasks), "reps": plan.reps, "steps": plan.steps,
                 "n_workloads": len(plan.workloads())},
        "ranges": {k: {"low": lo, "high": hi, "why": why} for k, (lo, hi, why) in ASSUMED_RANGES.items()},
        "bands": _bands([m["metrics"] for m in members], levels),
        "central": central,
        "paper": PAPER,
        "members": members,
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
