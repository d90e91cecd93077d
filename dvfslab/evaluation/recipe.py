"""The evaluation recipe of a dataset, in one function: :func:`evaluate_dataset`.

What notebook 04 shows, the benchmarks print (``benchmarks/real_governors.py``,
``benchmarks/joint_voi.py``) and the twin's ensemble reads (:mod:`dvfslab.pipeline.ensemble`)
all come from here:

1. **the data**: the training workloads with the physical probe model (each level's window, the
   dataset's noise or a fixed ``probe_noise``, seeded; :func:`dvfslab.evaluation.probes.physical_data`);
2. **the objective**: every governor optimises the run's (``parse_objective``; a slowdown limit
   gives the level-only governors the curve model's time predictions);
3. **the governors**: the registry's ``names`` that can be evaluated on the data (``left_out``
   says why the others cannot: a knob they do not decide, steps the dataset lacks), the
   ``candidates`` of the recommendation among them, each fitted on the training workloads
   (``fitted``: governors the caller already has, e.g. notebook 03's saved tree);
4. **the replay** of the evaluation workloads (``eval_ids``; per run and over the whole job; a
   governor that measures the job through the live runner on the replay board,
   :mod:`dvfslab.evaluation.governed`, stated in ``probe["measuring_governors"]``);
5. **the CV scheme**: leave-one-model-out, or leave-one-block-out on a dataset of one model
   (:func:`dvfslab.evaluation.govcv.grouping`), every governor and candidate on the same folds
   (``schemes``: further schemes replayed before it, e.g. ``loocv`` for notebook 05's table;
   the recommendation and the headline read the grouped one only),
   and **the recommendation** (:func:`dvfslab.evaluation.recommend.recommend`); ``nested``: the
   rule itself judged by a nested CV;
6. **the headline**: the evaluation split's figures, or — in-sample (the evaluation workloads
   are the training ones) — the grouped CV's, where no governor has seen the workload it is
   judged on;
7. **the governors that fail badly**: whose saving is negative beyond its interval, each with
   why (:mod:`dvfslab.evaluation.failures`).

The result is a :class:`DatasetEvaluation`; :mod:`dvfslab.evaluation.recipe_text` words it
(notebook 04's prose, the summary.json sections).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.analysis.training import TrainingData
from dvfslab.evaluation import govcv as C
from dvfslab.evaluation import probes as PR
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.failures import failing_governors
from dvfslab.evaluation.recommend import Recommendation, nested_recommended, recommend
from dvfslab.governors import registry as G
from dvfslab.governors.base import Governor
from dvfslab.governors.objective import Selector, parse_objective, with_objective

FALLBACK = "ffg"
#: summary.json's word on how a governor that measures the job is replayed (dvfslab.evaluation.governed)
GOVERNED_WORDS = ("through the live runner on the replay board (dvfslab.evaluation.governed): the code `dvfslab "
                  "govern --backend replay:DATASET --workload W` runs, trained, told the job's length, the dataset's "
                  "sigma as one sensor sample's noise at the sensor's interval (never 0); the whole job is the "
                  "board's account of every unit")


@dataclass
class DatasetEvaluation:
    """What :func:`evaluate_dataset` found (module doc). Frames are empty when not computed
    (no ``eval_ids``: no replay of the evaluation split; ``cv=False``: no CV, no recommendation)."""

    sweep: Sweep
    data: TrainingData  # the training workloads, physical probes
    objective: Selector
    params: dict[str, dict[str, Any]]  # registry name -> parameters, the objective included
    names: list[str]  # the governors replayed (registry names), in order
    rows: list[str]  # their rows in the tables (maxn named from the dataset)
    candidates: list[str]  # the recommendation's candidates (besides FFG)
    left_out: dict[str, str]  # governor -> why it cannot be evaluated here
    not_candidates: dict[str, str]  # candidate -> why it cannot be one here
    scheme: str  # the grouped CV: lomo or lobo
    schemes: list[str]  # every CV scheme replayed, the grouped one last
    n_folds: int
    eval_ids: list[str]
    with_job: list[str]  # evaluation workloads whose whole job is known (job_steps)
    probe: dict[str, Any]  # the probe model, as summary.json states it
    in_sample: bool
    probe_noise: float | None = None  # the fixed reading noise asked for (None: the probe model's own)
    train_split: str | None = None
    eval_split: str | None = None
    governors: dict[str, Governor] = field(default_factory=dict)  # fitted on the training workloads
    fallbacks: dict[str, str] = field(default_factory=dict)  # learned governor -> why it fell back to FFG
    per: pd.DataFrame = field(default_factory=pd.DataFrame)  # the evaluation split, per workload
    overall: pd.DataFrame = field(default_factory=pd.DataFrame)  # E.summarize(per)
    by_size: pd.DataFrame = field(default_factory=pd.DataFrame)  # E.summarize(per, by=["size_group"])
    cv: pd.DataFrame = field(default_factory=pd.DataFrame)  # govcv.cv_replay rows
    nested: pd.DataFrame = field(default_factory=pd.DataFrame)  # recommend.nested_recommended rows
    recommended: Recommendation | None = None
    headline_cv: bool = False
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)  # the headline figures, per policy
    failing: dict[str, str] = field(default_factory=dict)  # governor -> what failed and why

    @property
    def words(self) -> str:
        """The grouped CV in words (``leave-one-model-out`` ...)."""
        return C.SCHEME_WORDS[self.scheme]

    @property
    def headline_label(self) -> str:
        """Where the headline figures come from."""
        if self.headline_cv:
            return f"{self.words} CV"
        return "in-sample (no CV: fewer than two groups)" if self.in_sample else "evaluation split"

    @property
    def headline_rows(self) -> pd.DataFrame:
        """The per-workload rows behind the headline figures."""
        if not self.headline_cv:
            return self.per
        return self.cv[(self.cv["scheme"] == self.scheme) & self.cv["policy"].isin(self.rows)]

    @property
    def n_headline_workloads(self) -> int:
        rows = self.headline_rows
        return int(rows["workload_id"].nunique()) if len(rows) else 0


def evaluate_dataset(sweep: Sweep, table: pd.DataFrame, train_ids: Sequence[str], eval_ids: Sequence[str] | None = None,
                     *, names: Sequence[str] | None = None, candidates: Sequence[str] | None = None,
                     params: Mapping[str, Mapping[str, Any]] | None = None, objective: Selector | str | None = None,
                     probe_noise: float | None = None, seed: int = 0, idealise: bool = False,
                     noise_scale: float = 1.0, fitted: Mapping[str, Governor] | None = None, cv: bool = True, nested: bool = False,
                     schemes: Sequence[str] = (),
                     train_split: str | None = None, eval_split: str | None = None,
                     in_sample: bool | None = None) -> DatasetEvaluation:
    """The evaluation recipe on one dataset (module doc).

    ``table``: the feature table; ``train_ids``: the workloads the governors learn from (and the
    CV's); ``eval_ids``: the workloads replayed (None: none); ``names``: the governors (default:
    every registered one); ``candidates``: those that may replace FFG (default: the registry's
    recommendable ones); ``params``: registry name -> parameters (the objective is added);
    ``probe_noise``: a fixed reading noise CV for every probe (None: the probe model's own);
    ``idealise``: instant, exact probes (a comparison, never a result); ``noise_scale``: the
    probe model's own noise scaled (a sensitivity run); ``fitted``: governors
    already fitted, used in place of fitting them; ``cv``: run the grouped CV and the
    recommendation; ``nested``: also the nested CV of the rule; ``schemes``: further CV schemes
    (``loocv``, ``lomo``, ``lobo``) replayed before the grouped one, the same governors on each
    (notebook 05's table; nothing else reads them); ``in_sample`` default: the
    evaluation workloads are the training ones.
    """
    data = TrainingData(sweep, table, list(train_ids))
    data = PR.physical_data(data.with_probe_noise(probe_noise, seed), idealise, noise_scale)
    obj = parse_objective(objective)
    if obj.max_slowdown_pct is not None and obj.time_model is None:  # level-only governors predict their time
        obj = obj.with_time_model(G.make("curve").fit(data).model)
    params = with_objective(params, G.names(), obj)
    names = G.check_names(list(names) if names is not None else G.names())
    cand_names = G.check_names(list(candidates) if candidates is not None else G.recommendable_names())
    protos, left_out = G.usable(G.make_all(names, params), data)
    cand_protos, not_candidates = G.usable(G.make_all(dict.fromkeys([FALLBACK, *cand_names]), params), data)
    cands = [n for n in cand_names if n in cand_protos and n != FALLBACK]
    rows = data.rows().reset_index(drop=True)
    scheme = C.grouping(rows)
    all_schemes = [*dict.fromkeys(s for s in schemes if s != scheme), scheme]
    unknown = [s for s in all_schemes if s not in C.SCHEME_WORDS]
    if unknown:
        raise ValueError(f"unknown CV scheme {unknown[0]!r}: one of {', '.join(C.SCHEME_WORDS)}")
    eval_ids = list(eval_ids) if eval_ids is not None else []
    steps = data.steps()
    ev = DatasetEvaluation(
        sweep=sweep, data=data, objective=obj, params=params, names=list(protos), rows=E.row_names(protos, sweep),
        candidates=cands, left_out=left_out, not_candidates=not_candidates, scheme=scheme, schemes=all_schemes,
        n_folds=len(list(C.cv_folds(rows, [scheme]))), eval_ids=eval_ids,
        with_job=[w for w in eval_ids if steps.job_known(w)], probe=PR.describe(steps),
        in_sample=bool(eval_ids) and set(eval_ids) == set(train_ids) if in_sample is None else bool(in_sample),
        probe_noise=probe_noise, train_split=train_split, eval_split=eval_split)
    if not ev.probe.get("idealised"):  # how the measuring governors are replayed (summary.json evaluation.probe)
        ev.probe["measuring_governors"] = GOVERNED_WORDS
    if eval_ids:
        fitted = dict(fitted or {})
        built = G.build([n for n in ev.names if n not in fitted], data, params)
        # a governor the caller fitted optimises the run's objective too
        ev.governors = {n: fitted[n].with_params(objective=obj) if n in fitted else built[n] for n in ev.names}
        ev.fallbacks = {n: g.fallback_note() for n, g in ev.governors.items() if g.fallback_note()}
        ev.per = E.replay(ev.governors, sweep, table, eval_ids, steps)
        ev.overall = E.summarize(ev.per)
        ev.by_size = E.summarize(ev.per, by=["size_group"])
    if cv:
        ev.cv = C.cv_replay({**protos, **{n: cand_protos[n] for n in [FALLBACK, *cands] if n in cand_protos}}, data,
                            schemes=all_schemes)
        ev.recommended = recommend(ev.cv, cands, scheme=scheme)
        if nested:
            ev.nested = nested_recommended({**protos, **cand_protos}, data, cands, scheme=scheme)
    ev.headline_cv = ev.in_sample and bool(len(ev.cv)) and bool((ev.cv["scheme"] == scheme).any())
    ev.headline = E.summarize(ev.headline_rows) if ev.headline_cv else ev.overall
    if len(ev.headline_rows):
        ev.failing = failing_governors(ev.headline_rows, ev.governors, data, steps)
    return ev


__all__ = ["DatasetEvaluation", "evaluate_dataset"]
