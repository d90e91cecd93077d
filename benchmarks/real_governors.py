"""Governors over whole jobs, probing charged, under grouped CV on any contract dataset: do they beat
one fixed level?

For each ``DATASET_DIR`` (a dataset in the contract: the bundled twin, a ``dvfslab import
zeus-nsdi`` conversion whose knob is a power limit, a ``dvfslab import loudva`` one whose
workloads are one network at many request concurrencies) this prints, over its workloads whose
whole job is known (workloads.csv ``job_steps``; ``--all-workloads``: the others too, their job
being the measured run), every group of workloads held out in turn — leave-one-network-out
(``lomo``), or on a one-network dataset five contiguous blocks of batch size / concurrency
(``lobo``, :func:`dvfslab.evaluation.govcv.grouping`):

* ``oracle``, ``ffg``, ``mlg``, ``curve`` — the learned ones refitted without the held-out group
  (the tree with fixed hyper-parameters, ``--tree``), replayed on it;
* ``zeus-sim`` (Zeus's trace simulator: the first unit split over every level), ``online`` (26
  probing steps, U-curve fit) and ``search`` (from FFG's level, walk downhill, O(log n) probes) —
  they measure the held-out job itself; their probes are charged;
* ``recommended`` — the rule of :mod:`dvfslab.evaluation.recommend` applied *inside* each fold
  (an inner grouped CV on the other groups chooses FFG or one of the others), then replayed on
  the held-out group: the rule judged as it would be used;

and for each, over the whole job: the mean saving vs the baseline and the mean regret vs the
oracle (% of the baseline's job energy), the share of the FFG-to-oracle gap it closes,
``(regret_ffg - regret) / regret_ffg`` (negative: worse than FFG), the share of the job spent
probing (units) and the probes used (levels measured, and their units). Noise: a probe reads the
dataset's per-unit rep means multiplied by log-normal noise of the dataset's own rep-to-rep CV
(:func:`dvfslab.analysis.steps.rep_cv`, ``benchmarks/noise.py``; the twin: 1.2 %; a dataset
measured once per cell: 0), then, as a sensitivity, of 2 % and 5 % (``--noise``), seed fixed.

    PYTHONPATH=. .venv/bin/python benchmarks/real_governors.py DATASET_DIR... [--noise 0.02 0.05]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from dvfslab import analysis as F
from dvfslab.analysis.features import EXTRA_FEATURES, FEATURES
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation import replay as E
from dvfslab.evaluation import selection as S
from dvfslab.evaluation.govcv import SCHEME_WORDS, cv_replay, grouping
from dvfslab.evaluation.recommend import nested_recommended, recommend, versus_fallback
from dvfslab.governors import registry as G

LEARNED = ("mlg", "curve")
PROBING = ("zeus-sim", "online", "search")
CANDIDATES = (*LEARNED, *PROBING)
ORDER = ("oracle", "ffg", *CANDIDATES, "recommended")
COLUMNS = ["n_workloads", "n_failed", "job_saving_pct", "job_regret_pct", "gap_closed_pct", "probe_share_pct",
           "profiling_steps", "probe_units"]


def gap_closed_pct(regret_pct: pd.Series, ffg_regret_pct: float) -> pd.Series:
    """Share of the FFG-to-oracle gap closed, %: ``100 (r_ffg - r) / r_ffg`` (NaN when FFG has no gap)."""
    if not ffg_regret_pct > 0:
        return regret_pct * float("nan")
    return 100.0 * (ffg_regret_pct - regret_pct) / ffg_regret_pct


def evaluate(data_dir: Path, split: str | None, tree: str, candidates: tuple[str, ...] = (*FEATURES, *EXTRA_FEATURES),
             noise: float | None = None, seed: int = 0, all_workloads: bool = False) -> tuple[pd.DataFrame, dict]:
    """The table of one dataset and what to say about it; ``noise`` None: the dataset's own figure."""
    ds = load_dataset(data_dir)
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    data = F.TrainingData(sweep, table, sweep.workload_ids(split))
    source = data.steps()
    known = [w for w in data.train_ids if source.job_known(w)]
    ids = data.train_ids if all_workloads else known
    own = source.rep_noise()
    data = F.TrainingData(sweep, table, ids).with_probe_noise(own if noise is None else noise, seed)
    rows = table[table["workload_id"].isin(ids)]
    cols, _ = F.usable_features(rows, candidates)
    mlg = {"estimator": S.candidate_models(False, 0)[tree], "features": cols}
    protos, left_out = G.usable(G.make_all(["oracle", "ffg", *CANDIDATES], {"mlg": mlg}), data)
    cands = [n for n in protos if n in CANDIDATES]
    scheme = grouping(rows)
    cv = cv_replay(protos, data, schemes=[scheme])
    nested = nested_recommended(protos, data, cands, scheme=scheme)
    out = E.summarize(pd.concat([cv, nested], ignore_index=True)).set_index("policy")
    out["gap_closed_pct"] = gap_closed_pct(out["job_regret_pct"], float(out.loc["ffg", "job_regret_pct"]))
    out = out.reindex([n for n in ORDER if n in out.index])
    rec = recommend(cv, cands, scheme=scheme)
    search = cv[cv["policy"] == "search"]
    info = {"knob": sweep.knob, "source": ds.source, "n_workloads": len(ids), "n_groups": int(cv["held_out"].nunique()),
            "scheme": scheme, "left_without_job": len(data.sweep.workload_ids(split)) - len(known),
            "all_workloads": all_workloads, "features": cols, "full_data_recommendation": rec, "noise": data.steps().noise,
            "own_noise": own, "n_levels": len(sweep.level_table),
            "not_replayed": {name: f"{why}; not replayed" for name, why in left_out.items()},
            "recommended_vs_ffg": versus_fallback(cv, nested, scheme=scheme),
            "chosen_per_fold": nested.groupby("held_out")["chosen"].first().value_counts().to_dict(),
            "search_not_unimodal": int(search["note"].str.contains("not unimodal").sum()), "n_search": len(search)}
    return out, info


def report(data: Path, out: pd.DataFrame, info: dict) -> str:
    """The printed block of one dataset."""
    label = " (SIMULATED)" if info["source"] == "simulated" else ""
    knob = info["knob"]
    rec = info["full_data_recommendation"]
    jobs = ("all workloads (a workload without job_steps: the job is its run)" if info["all_workloads"] else
            f"workloads with job_steps ({info['left_without_job']} without left out)")
    lines = [f"\n== {data}{label}: {info['n_workloads']} {jobs}; {info['n_levels']} levels of {knob.name} "
             f"({knob.unit}); {SCHEME_WORDS[info['scheme']]}, {info['n_groups']} folds; probe noise "
             f"{100 * info['noise']:.1f} % (the dataset's own rep CV: {100 * info['own_noise']:.1f} %); tree features "
             f"{', '.join(info['features'])}",
             out[COLUMNS].round(3).to_string()]
    lines += [f"{name}: {why}" for name, why in info["not_replayed"].items()]
    vs = info["recommended_vs_ffg"]
    lines += [f"search stopped at a local minimum of a measured curve that is not unimodal on {info['search_not_unimodal']}"
              f" of {info['n_search']} workloads",
              f"recommended per fold: {info['chosen_per_fold']}; minus FFG {vs['diff_pts']:+.3f} ± {vs['noise_pts']:.3f} "
              f"points per fold ({'never below FFG' if vs['diff_pts'] <= vs['noise_pts'] + 1e-9 else 'BELOW FFG'} by the noise rule)",
              "on all groups (difference to FFG per fold, whole-job regret points; noise = one standard error):",
              rec.table.round(3).to_string(index=False), f"-> {rec.policy}: {rec.reason}"]
    return "\n".join(lines)


def sensitivity(rows: dict[float, pd.DataFrame]) -> str:
    """Whole-job regret and gap closed of the probing governors and the recommendation per noise level."""
    keep = [n for n in ("ffg", *PROBING, "recommended") if n in next(iter(rows.values())).index]
    frame = pd.concat({f"{100 * k:.0f} %": v.loc[keep, ["job_regret_pct", "gap_closed_pct"]] for k, v in rows.items()},
                      axis=1)
    return "probe noise sensitivity (whole-job regret %, gap closed %):\n" + frame.round(3).to_string()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="+", type=Path, metavar="DATASET_DIR")
    ap.add_argument("--split", default=None, help="only the workloads of this split (default: all)")
    ap.add_argument("--tree", default="tree(depth=3,leaf=2,gini)", help="the mlg tree's hyper-parameters")
    ap.add_argument("--features", nargs="+", default=[*FEATURES, *EXTRA_FEATURES],
                    help="columns offered to the tree (default: notebook 02's candidates)")
    ap.add_argument("--noise", nargs="*", type=float, default=[0.02, 0.05],
                    help="probe noise CVs of the sensitivity runs (fractions; default 0.02 0.05)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the probe noise")
    ap.add_argument("--all-workloads", action="store_true", help="also the workloads without job_steps")
    args = ap.parse_args()
    for data in args.datasets:
        t0 = time.perf_counter()
        out, info = evaluate(data, args.split, args.tree, tuple(args.features), None, args.seed, args.all_workloads)
        print(report(data, out, info))
        runs = {info["noise"]: out}
        for cv in args.noise:
            runs[cv] = evaluate(data, args.split, args.tree, tuple(args.features), cv, args.seed, args.all_workloads)[0]
        print(sensitivity(runs))
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
