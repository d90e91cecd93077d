"""A :class:`~dvfslab.evaluation.recipe.DatasetEvaluation` in words and tables: what notebook 04
shows and what summary.json records of it (the notebook only calls these and shows them).

:func:`from_pipeline` is the recipe as notebook 04 runs it, on the files of a pipeline run (the
splits notebook 02 chose, the tree notebook 03 selected and saved). No prose here says "nan": a
figure that is missing says what is missing and why.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dvfslab.analysis import aggregate as F
from dvfslab.analysis.aggregate import Sweep
from dvfslab.core import reference as R
from dvfslab.evaluation import replay as E
from dvfslab.evaluation import selection as S
from dvfslab.evaluation.govcv import with_family
from dvfslab.evaluation.recipe import DatasetEvaluation, evaluate_dataset
from dvfslab.governors import registry as G
from dvfslab.governors.files import load_governor

SIMULATED_NOTE = " *(Simulated data.)*"
PAPER_TREE = "the paper's published tree"


def from_pipeline(sweep: Sweep, table: pd.DataFrame, summary: Mapping[str, Any], out_dir: str | os.PathLike, *,
                  names: Sequence[str] = (), candidates: Sequence[str] = (), objective: str | None = None,
                  probe_noise: float | None = None, seed: int = 0, quick: bool = False,
                  paper_util_split: str = "long-seq", params: Mapping[str, Mapping[str, Any]] | None = None,
                  schemes: Sequence[str] = ()) -> DatasetEvaluation:
    """:func:`~dvfslab.evaluation.recipe.evaluate_dataset` on a pipeline run: notebook 02's splits
    (``summary['features']``), notebook 03's tree (its hyper-parameters refitted in every CV fold,
    its saved file ``models/mlg.json`` replayed), the paper's tree with ``paper_util_split``;
    ``names`` / ``candidates`` empty: the registry's; ``params``: further governor parameters
    (registry name -> parameters, e.g. notebook 05's :func:`dvfslab.evaluation.beyond.governor_params`);
    ``schemes``: further CV schemes replayed before the grouped one (notebook 05: ``loocv``)."""
    feats, ms = summary["features"], summary["model_selection"]
    train, test = feats["train_split"], feats["eval_split"]
    names = G.check_names(list(names) or G.names())
    params = {**{k: dict(v) for k, v in (params or {}).items()}, "mlg-paper": {"util_split": paper_util_split},
              "mlg": {"estimator": S.candidate_models(quick, seed)[ms["best_model"]], "features": ms["features_used"]}}
    fitted = {"mlg": load_governor(Path(out_dir) / "models" / "mlg.json", policy="mlg")} if "mlg" in names else {}
    return evaluate_dataset(sweep, table, list(table.loc[table["split"] == train, "workload_id"]),
                            sweep.workload_ids(test), names=names, candidates=list(candidates) or None,
                            params=params, objective=objective, probe_noise=probe_noise, seed=seed, fitted=fitted,
                            train_split=train, eval_split=test, schemes=schemes,
                            in_sample=bool(feats.get("in_sample", train == test)))


def setup_lines(ev: DatasetEvaluation) -> list[str]:
    """What is left out and why, the splits, the whole jobs known and the probe model."""
    p = ev.probe
    lines = [f"{name} is left out: {why}" for name, why in {**ev.left_out, **ev.not_candidates}.items()]
    n_train = len(ev.data.train_ids)
    lines.append(f"train on {ev.train_split} ({n_train} workloads), evaluate on {ev.eval_split} ({len(ev.eval_ids)} "
                 f"workloads){' — IN-SAMPLE: the same workloads' if ev.in_sample else ''}; baseline: "
                 f"{ev.sweep.baseline_kind}")
    lines.append(f"whole job known (job_steps) for {len(ev.with_job)} of {len(ev.eval_ids)} evaluation workloads; "
                 f"without it the job is the measured run itself. Probes: {p['window_source']}; noise "
                 f"{100 * p['sigma']:.1f} % over {p['sigma_ref_units']:.3g} {p['unit']} "
                 f"({p['sigma_source'] if ev.probe_noise is None else 'PROBE_NOISE'})")
    return lines


def in_sample_markdown(ev: DatasetEvaluation) -> str:
    """The IN-SAMPLE banner ("" when the evaluation workloads are not the training ones)."""
    if not ev.in_sample:
        return ""
    return (f"> **IN-SAMPLE.** The training and the evaluation workloads are the same (`{ev.train_split}`): a replay "
            "on them grades the learned governors on the answers they learned from. "
            + (f"The headline figures (section 7 and summary.json) come from the {ev.words} cross-validation of "
               f"section 6 instead ({ev.n_folds} folds), where every workload is judged by governors that never "
               "saw it." if ev.n_folds else
               "No cross-validation is possible here (fewer than two groups of training workloads): the "
               "figures below are in-sample, an upper bound on what the learned governors would do."))


def governor_notes(ev: DatasetEvaluation) -> list[str]:
    """FFG's level, the paper's tree as replayed, the learned governors that fell back to FFG."""
    govs, knob = ev.governors, ev.sweep.knob
    lines = []
    if "ffg" in govs:
        lines.append(f"FFG level: {ev.sweep.format_level(govs['ffg'].level_)} (least mean energy / baseline over the training "
                     "workloads)")
    if "mlg-paper" in govs:
        lines += ["mlg-paper, as replayed here:", govs["mlg-paper"].describe(knob.unit)]
    lines += [f"{name} {note}" for name, note in ev.fallbacks.items()]
    return lines


def governor_table(ev: DatasetEvaluation) -> pd.DataFrame:
    """Each replayed governor's one-line summary (the registry's)."""
    return pd.DataFrame({"summary": {name: G.governor_class(name).summary for name in ev.names}})


def per_workload(ev: DatasetEvaluation, value: str) -> pd.DataFrame:
    """``value`` (``level``, ``saving_pct`` ...) per evaluation workload (rows) and policy (columns)."""
    return ev.per.pivot(index="workload_id", columns="policy", values=value)[ev.rows]


def savings_long(ev: DatasetEvaluation) -> pd.DataFrame:
    """Saving and slowdown per evaluation workload, long form with each policy's family (the
    figure ``savings_slowdown.png``: a colour per family)."""
    return with_family(F.long_form(ev.per, ["saving_pct", "slowdown_pct"], ["policy", "workload_id", "size_group"]))


def by_size_points(ev: DatasetEvaluation) -> pd.DataFrame:
    """The by-size summary with each policy's family (the figure ``saving_vs_slowdown.png``)."""
    return with_family(ev.by_size)


JOB_COLUMNS = ["job_saving_pct", "job_slowdown_pct", "job_regret_pct", "probe_share_pct", "profiling_steps", "probe_units"]


def job_table(ev: DatasetEvaluation) -> pd.DataFrame:
    """The whole-job figures per policy (section 4)."""
    return ev.overall.set_index("policy")[JOB_COLUMNS]


def notes_table(ev: DatasetEvaluation) -> pd.DataFrame | str:
    """What the governors report besides their level (a string when nothing)."""
    notes = ev.per.loc[ev.per["note"] != "", ["policy", "workload_id", "level", "note"]]
    if ev.sweep.joint_knobs and len(notes):  # a joint level is a setting's index: name its clocks
        notes = notes.assign(level=notes["level"].map(ev.sweep.format_level))
    return notes if len(notes) else "no governor reports anything besides its level"


def failing_markdown(ev: DatasetEvaluation) -> str:
    """The governors that fail badly, one bullet each with why ("" when none does)."""
    if not ev.failing:
        return ""
    return ("**Governors that fail on this dataset** (their saving is negative beyond its 90 % interval, "
            f"{ev.headline_label}):\n\n" + "\n".join(f"- `{name}`: {line.split(': ', 1)[1]}"
                                                     for name, line in ev.failing.items()))


def recommendation_markdown(ev: DatasetEvaluation, simulated: bool) -> str:
    """Section 6's conclusion: the recommended governor, its CV regret next to FFG's, why."""
    rec = ev.recommended
    why_not = [f"`{name}` was not a candidate: {why}" for name, why in ev.not_candidates.items()]
    why_not += [f"`{name}` {note}" for name, note in ev.fallbacks.items()]
    regrets = (f" — {ev.words} whole-job regret {rec.cv_regret_pct:.2f} % of the baseline energy (FFG: "
               f"{rec.ffg_cv_regret_pct:.2f} %)" if rec.cv_regret_pct is not None else "")
    return (f"**Recommended: `{rec.policy}`**{regrets}. Why: {rec.reason}." + "".join(f" Note: {w}." for w in why_not)
            + (SIMULATED_NOTE if simulated else ""))


def summary_sections(ev: DatasetEvaluation) -> dict[str, Any]:
    """The ``governors``, ``evaluation`` and ``recommended`` sections of summary.json."""
    govs = ev.governors
    return {"governors": E.summary_dict(ev.headline),
            "evaluation": {"train_split": ev.train_split, "eval_split": ev.eval_split, "in_sample": ev.in_sample,
                           "headline": ev.headline_label, "n_workloads": ev.n_headline_workloads,
                           "n_with_job_steps": len(ev.with_job),
                           "probe_noise_cv": ev.probe_noise, "probe": ev.probe,
                           "ffg_level": govs["ffg"].level_ if "ffg" in govs else None,
                           "mlg_minus_ffg_pts": E.difference_pts(ev.headline, "mlg", "ffg"),
                           "fallbacks": ev.fallbacks,
                           "paper_util_split": (ev.params.get("mlg-paper") or {}).get("util_split"),
                           "failing": ev.failing},
            "recommended": ev.recommended.as_dict() if ev.recommended else None}


def paper_table(ev: DatasetEvaluation, summary: Mapping[str, Any], simulated: bool) -> pd.DataFrame:
    """The paper's figures next to this run's (section 7); on a dataset whose knob is not the GPU
    clock, the rows in MHz and the paper's tree are left out (no counterpart)."""
    versus = E.paper_comparison(summary, None if ev.headline_cv else ev.by_size)
    if ev.sweep.knob.name != "gpu_freq_mhz":
        versus = versus[~versus["figure"].str.contains("MHz|mlg-paper")].reset_index(drop=True)
    return versus.rename(columns={"dvfslab": "dvfslab (simulated)"}) if simulated else versus


def _saving(ev: DatasetEvaluation, summary: Mapping[str, Any], name: str, words: str) -> str:
    """``"<words> saves 12.34 %"`` or what is missing instead of the figure."""
    g = (summary.get("governors") or {}).get(name) or {}
    value = g.get("mean_saving_pct")
    if value is not None and math.isfinite(value):
        return f"{words} saves {value:.2f} %"
    why = ev.left_out.get(name) or ev.not_candidates.get(name)
    if not why and name not in ev.names:
        why = "it is not among the governors replayed"
    if not why:
        rows = ev.headline_rows
        errors = rows.loc[(rows["policy"] == name) & (rows["error"].fillna("") != ""), "error"] if len(rows) else []
        why = (f"it decided none of the workloads; the first says: {errors.iloc[0]}" if len(errors) else
               "it decided none of the workloads")
    return f"{words} has no figure here ({why})"


def meaning_markdown(ev: DatasetEvaluation, summary: Mapping[str, Any], simulated: bool) -> str:
    """What the headline numbers mean, in prose: the learned tree, the oracle, FFG, the paper's
    tree (on a clock dataset), the whole-job regrets, the recommendation and the failing governors."""
    where = (f"**IN-SAMPLE** — the evaluation workloads are the training ones, so these figures come from the "
             f"{ev.headline_label}: " if ev.headline_cv else
             "**IN-SAMPLE** (no CV was possible: read these figures as an upper bound) — " if ev.in_sample else "")
    gov = summary.get("governors") or {}
    regrets = [f"{gov[k]['job_regret_pct']:.2f} % for `{k}`" for k in ["ffg", *ev.candidates]
               if (gov.get(k) or {}).get("job_regret_pct") is not None]
    clock = ev.sweep.knob.name == "gpu_freq_mhz"
    text = (f"**What the numbers mean.** {where}On the {ev.n_headline_workloads} workloads ({ev.headline_label}) "
            f"{_saving(ev, summary, 'mlg', 'the learned tree')} of the baseline energy on average (paper: "
            f"{R.MLG_MEAN_SAVING_PCT:.2f} %); {_saving(ev, summary, 'oracle', 'the oracle, the bound of any choice of level,')}"
            f"; {_saving(ev, summary, 'ffg', 'the fixed level')}"
            + (f"; {_saving(ev, summary, 'mlg-paper', PAPER_TREE)}" if clock else "")
            + ". Over the whole job, probing charged, the regret against the oracle is "
            + (", ".join(regrets) if regrets else "not known (no governor has a whole-job figure)")
            + (f"; the recommendation ({ev.words}): `{ev.recommended.policy}`" if ev.recommended else "")
            + ". Read each saving with its slowdown (tables above): energy saved at a low level is paid for in "
            "training time.")
    if ev.failing:
        text += (" **" + ", ".join(f"`{n}`" for n in ev.failing) + (" fails" if len(ev.failing) == 1 else " fail")
                 + " on this dataset** (a negative saving beyond its interval; the causes are listed above).")
    return text + (SIMULATED_NOTE if simulated else "")


__all__ = ["JOB_COLUMNS", "by_size_points", "failing_markdown", "from_pipeline", "governor_notes", "governor_table",
           "in_sample_markdown", "job_table", "meaning_markdown", "notes_table", "paper_table", "per_workload",
           "recommendation_markdown", "savings_long", "setup_lines", "summary_sections"]
