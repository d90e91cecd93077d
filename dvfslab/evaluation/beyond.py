"""What notebook 05 adds to the evaluation recipe, and its words: :func:`evaluate_beyond`.

Notebook 05 runs the recipe (:func:`dvfslab.evaluation.recipe_text.from_pipeline`, with the
probing governors' settings of :func:`governor_params` and leave-one-workload-out beside the
grouped CV) and then, on the same fitted governors and the same evaluation workloads:

1. **the CV table**: every governor under every scheme (``loocv`` and the grouped one);
2. **a slowdown limit**: every governor picks the least-energy level whose slowdown it predicts
   to stay within ``max_slowdown_pct`` (the level-only governors with the curve model's time,
   fitted with ``curve_alpha``; where the curve model cannot learn, no limit, and why);
   :func:`dvfslab.evaluation.limits.constraint_report` says how often it held and what it cost;
3. **the probing governors' split**: the regret of the level they lock vs the probing they paid
   for (:func:`dvfslab.evaluation.probing.probing_breakdown`), and where ``search`` stopped at a
   local minimum of a measured curve that is not unimodal;
4. **summary.json's** ``beyond`` section, and under ``governors`` the headline figures of any
   governor notebook 04 did not replay.

No prose here says "nan": a figure that is missing says what is missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dvfslab.evaluation import govcv as C
from dvfslab.evaluation import limits as L
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.probing import probing_breakdown
from dvfslab.evaluation.recipe import DatasetEvaluation
from dvfslab.governors import registry as G
from dvfslab.governors.objective import Objective

#: the probing governors' split, per policy (section 6 of notebook 05)
SPLIT_COLUMNS = ["profiling_steps", "probe_units", "probe_share_pct", "choice_regret_pct", "probing_cost_pct",
                 "job_probing_cost_pct", "job_regret_pct"]
#: the online governor's target (issue 11): at most 1.5 % from the oracle with at most 30 probing steps
ONLINE_TARGET_REGRET_PCT, ONLINE_TARGET_STEPS = 1.5, 30


def governor_params(curve_alpha: float = 1.0, online_levels: int = 5, online_coarse_steps: int = 2,
                    online_fine_levels: int = 3, online_fine_steps: int = 5, online_warmup_steps: int = 1,
                    zeus_units: float = 1.0, search_max_probes: int = 0) -> dict[str, dict[str, Any]]:
    """Notebook 05's parameters as registry parameters (``search_max_probes`` 0: no cap)."""
    return {"curve": {"alpha": curve_alpha},
            "online": {"n_levels": online_levels, "coarse_steps": online_coarse_steps,
                       "fine_levels": online_fine_levels, "fine_steps": online_fine_steps,
                       "warmup_steps": online_warmup_steps},
            "zeus-sim": {"units": zeus_units}, "search": {"max_probes": search_max_probes or None}}


@dataclass
class BeyondEvaluation:
    """What :func:`evaluate_beyond` found (module doc)."""

    ev: DatasetEvaluation
    max_slowdown_pct: float
    curve_alpha: float
    cv: pd.DataFrame  # the recipe's CV rows of the replayed governors, every scheme
    cv_summary: pd.DataFrame  # E.summarize(cv, by=["scheme"])
    profiling_steps: int  # the online governor's probing steps per run (0: no online governor)
    time_note: str  # "" when the curve model predicts the level-only governors' time; else why not
    per_limited: pd.DataFrame  # the evaluation split under the slowdown limit, per workload
    limit_report: pd.DataFrame  # limits.constraint_report
    probing: pd.DataFrame  # the probing governors' split per workload (with ``policy``)
    split: pd.DataFrame  # its means per probing governor
    not_unimodal: int  # workloads where search stopped at a local minimum of a curve that is not unimodal
    n_search: int  # workloads search decided

    @property
    def limit(self) -> bool:
        """Whether the slowdown limit could be replayed (the curve model learned)."""
        return not self.time_note


def evaluate_beyond(ev: DatasetEvaluation, max_slowdown_pct: float, curve_alpha: float = 1.0) -> BeyondEvaluation:
    """Notebook 05's sections on a recipe run with the evaluation workloads replayed (module doc)."""
    sweep, data, per = ev.sweep, ev.data, ev.per
    cv_rows = ev.cv[ev.cv["policy"].isin(ev.rows)] if len(ev.cv) else ev.cv
    cv_summary = E.summarize(cv_rows, by=["scheme"]) if len(cv_rows) else pd.DataFrame(columns=["policy", "scheme"])
    online = ev.governors.get("online")
    steps = online.start({}, sweep.level_table).profiling_steps if online is not None else 0
    time_gov = G.make("curve", alpha=curve_alpha).fit(data)  # the time prediction of the level-only governors
    time_note = time_gov.fallback_note()
    if not time_note:
        limited = L.constrain(ev.governors, Objective(max_slowdown_pct, time_model=time_gov.model))
        per_limited = E.replay(limited, sweep, data.features, ev.eval_ids, data.steps())
        report = L.constraint_report(per_limited, per, sweep, max_slowdown_pct)
    else:
        per_limited, report = per.iloc[:0], pd.DataFrame(columns=["policy", "held_pct"])
    probing_names = [n for n, g in ev.governors.items() if g.probing]
    probing = (pd.concat([probing_breakdown(per, sweep, n).assign(policy=n) for n in probing_names], ignore_index=True)
               if probing_names else pd.DataFrame(columns=["policy", *SPLIT_COLUMNS]))
    split = (probing.groupby("policy", sort=False)[SPLIT_COLUMNS].mean() if len(probing)
             else pd.DataFrame(columns=SPLIT_COLUMNS))
    search = per.loc[per["policy"] == "search", "note"]
    return BeyondEvaluation(ev=ev, max_slowdown_pct=float(max_slowdown_pct), curve_alpha=float(curve_alpha),
                            cv=cv_rows, cv_summary=cv_summary, profiling_steps=int(steps), time_note=time_note,
                            per_limited=per_limited, limit_report=report, probing=probing, split=split,
                            not_unimodal=int(search.str.contains("not unimodal").sum()), n_search=int(len(search)))


# --------------------------------------------------------------------------------------------
# Tables and figures' data
# --------------------------------------------------------------------------------------------


def cv_table(b: BeyondEvaluation) -> pd.DataFrame | str:
    """Whole-job regret, regret and saving per policy (rows) and scheme (columns); a sentence when
    no fold could be held out."""
    if not len(b.cv_summary):
        return "no CV fold: fewer than two training workloads"
    return b.cv_summary.pivot(index="policy", columns="scheme",
                              values=["job_regret_pct", "mean_regret_pct", "mean_saving_pct"])


def cv_figure_rows(b: BeyondEvaluation) -> pd.DataFrame:
    """The CV summary without the baseline (its regret would dwarf the rest): ``governor_cv.png``."""
    return b.cv_summary[b.cv_summary["policy"] != b.ev.sweep.baseline_name]


def limit_table(b: BeyondEvaluation) -> pd.DataFrame | str:
    """Section 4's table, or why there is no slowdown limit here."""
    return b.limit_report if b.limit else f"no slowdown limit here: the curve model {b.time_note}"


def pareto_points(b: BeyondEvaluation) -> pd.DataFrame:
    """Mean energy and time relative to the baseline, per policy, without and with the limit
    (``pareto_energy_time.png``; :func:`dvfslab.evaluation.govcv.pareto_points`)."""
    both = pd.concat([b.ev.overall.assign(limit="none")]
                     + ([E.summarize(b.per_limited).assign(limit=f"<= {b.max_slowdown_pct:g} %")] if b.limit else []),
                     ignore_index=True)
    return C.pareto_points(both, keep=["limit"])


def per_workload_table(b: BeyondEvaluation) -> pd.DataFrame:
    """Every evaluation workload's replay, then the same under the limit (column ``limit``: the
    limit in %; empty for the unconstrained rows): ``tables/beyond_per_workload.csv``."""
    return pd.concat([b.ev.per, b.per_limited.assign(limit=b.max_slowdown_pct)])


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------


def in_sample_markdown(b: BeyondEvaluation) -> str:
    """The IN-SAMPLE banner of notebook 05 ("" when the evaluation workloads are not the training ones)."""
    ev = b.ev
    if not ev.in_sample:
        return ""
    return (f"> **IN-SAMPLE.** The training and the evaluation workloads are the same (`{ev.train_split}`): section 2 "
            "grades the learned governors on the answers they learned from; "
            + ("section 3's cross-validation is the honest comparison." if len(b.cv_summary) else
               "no cross-validation is possible (fewer than two training workloads): read its figures as an "
               "upper bound."))


def governor_notes(b: BeyondEvaluation) -> list[str]:
    """The learned governors that fell back to FFG, and the online governor's probing steps."""
    lines = [f"{name} {note}" for name, note in b.ev.fallbacks.items()]
    lines.append(f"online governor: {b.profiling_steps} profiling steps per run" if "online" in b.ev.governors
                 else "no online governor")
    return lines


def search_line(b: BeyondEvaluation) -> str:
    """Where search stopped at a local minimum of a measured curve that is not unimodal."""
    if not b.n_search:
        return "search is not replayed here"
    return (f"search stopped at a local minimum of a measured curve that is not unimodal on {b.not_unimodal} of "
            f"{b.n_search} workloads")


def _regret(row: pd.DataFrame, name: str, words: str) -> str:
    """``"<words> 1.23 %"`` (mean regret per run), or that ``name`` has no figure here."""
    value = row["mean_regret_pct"].get(name) if "mean_regret_pct" in row else None
    if value is not None and math.isfinite(value):
        return f"{words} {value:.2f} %"
    return f"{words}: no figure (`{name}` is not replayed here, or it decided no workload)"


def meaning_markdown(b: BeyondEvaluation, simulated: bool) -> str:
    """What notebook 05's numbers mean, in prose."""
    ev = b.ev
    row = ev.overall.set_index("policy")
    where = (f"**IN-SAMPLE** ({'section 3 is the honest comparison' if len(b.cv_summary) else 'no CV: an upper bound'}): "
             if ev.in_sample else "")
    text = (f"**What the numbers mean.** {where}On the {ev.per['workload_id'].nunique()} `{ev.eval_split}` workloads "
            f"{_regret(row, 'curve', 'the curve governor lands')} of the baseline energy from the oracle, "
            f"{_regret(row, 'mlg', 'the learned tree')}, {_regret(row, 'ffg', 'one fixed level')}. ")
    gap = row["mean_regret_pct"].get("online") if "online" in row.index else None
    if gap is not None and math.isfinite(gap):
        met = gap <= ONLINE_TARGET_REGRET_PCT and b.profiling_steps <= ONLINE_TARGET_STEPS
        text += (f"The online governor, which knows nothing in advance and pays for {b.profiling_steps} probing steps, "
                 f"lands {gap:.2f} % from the oracle per run (the issue's target: at most {ONLINE_TARGET_REGRET_PCT:g} % "
                 f"with at most {ONLINE_TARGET_STEPS} steps; {'met' if met else 'not met'} here). ")
    job = row["job_regret_pct"] if "job_regret_pct" in row else pd.Series(dtype=float)
    regrets = [f"{job[k]:.2f} % for `{k}`" for k in ["ffg", *G.recommendable_names()]
               if k in job and math.isfinite(job[k])]
    text += ("Over the whole job the regret is " + ", ".join(regrets) if regrets else
             "No governor has a whole-job regret here")
    if {"search", "zeus-sim"} <= set(row.index):
        text += (f"; the search measures {row['profiling_steps']['search']:.1f} levels on average, Zeus's profiler "
                 f"{row['profiling_steps']['zeus-sim']:.1f}. ")
    else:
        text += ". "
    if b.limit and len(b.limit_report):
        held = b.limit_report["held_pct"]
        text += (f"With a {b.max_slowdown_pct:g} % slowdown limit the measured slowdown held on {held.min():.0f}–"
                 f"{held.max():.0f} % of the workloads, depending on the governor (table in section 4).")
    elif not b.limit:
        text += f"No slowdown limit was replayed: the curve model {b.time_note}."
    return text + (" *(Simulated data.)*" if simulated else "")


# --------------------------------------------------------------------------------------------
# summary.json
# --------------------------------------------------------------------------------------------


def summary_sections(b: BeyondEvaluation, before: Mapping[str, Any]) -> dict[str, Any]:
    """The ``governors`` section (the headline figures; notebook 04's, in ``before``, kept where it
    has them) and the ``beyond`` section of summary.json. ``before``: summary.json as read before
    this notebook writes (notebook 03's tree under ``model_selection``)."""
    ev = b.ev
    on_split = E.summary_dict(ev.overall).get("online", {})
    online = b.split.loc["online"] if "online" in b.split.index else None
    cv = {scheme: E.summary_dict(b.cv_summary[b.cv_summary["scheme"] == scheme])
          for scheme in b.cv_summary["scheme"].unique()}
    return {"governors": {**E.summary_dict(ev.headline), **dict(before.get("governors") or {})}, "beyond": {
        "eval_split": ev.eval_split, "in_sample": ev.in_sample, "headline": ev.headline_label,
        "n_workloads": int(ev.per["workload_id"].nunique()), "cv": cv,
        "max_slowdown_pct": b.max_slowdown_pct, "limit": b.limit_report.set_index("policy").to_dict("index"),
        "online": {"profiling_steps": b.profiling_steps, "gap_to_oracle_pct": on_split.get("mean_regret_pct"),
                   "choice_regret_pct": float(online["choice_regret_pct"]) if online is not None else None,
                   "probing_cost_pct": float(online["probing_cost_pct"]) if online is not None else None},
        "probing": b.split.to_dict("index"), "search_not_unimodal": b.not_unimodal, "probe_noise_cv": ev.probe_noise,
        "fallbacks": ev.fallbacks, "curve_alpha": b.curve_alpha,
        "tree_model": (before.get("model_selection") or {}).get("best_model")}}


def governors_shown(b: BeyondEvaluation, summary: Mapping[str, Any]) -> dict[str, Any]:
    """summary.json's ``governors`` of this notebook's rows, in their order."""
    gov = summary.get("governors") or {}
    return {k: gov[k] for k in b.ev.rows if k in gov}


__all__ = ["BeyondEvaluation", "SPLIT_COLUMNS", "cv_figure_rows", "cv_table", "evaluate_beyond", "governor_params",
           "governors_shown", "in_sample_markdown", "limit_table", "meaning_markdown", "pareto_points",
           "per_workload_table", "search_line", "summary_sections"]
