"""Governors over whole jobs, probing charged, under grouped CV on any contract dataset, probes
physical: do they beat one fixed level, and by more than the noise?

For each ``DATASET_DIR`` (a dataset in the contract: the bundled twin ``data/replay``, a ``dvfslab
import zeus-nsdi`` conversion whose knob is a power limit, a ``dvfslab import loudva`` one whose
workloads are one network at many request concurrencies) this replays, over its workloads whose
whole job is known (workloads.csv ``job_steps``; ``--all-workloads``: the others too, their job
being the measured run), every group of workloads held out in turn — leave-one-network-out
(``lomo``), or on a one-network dataset five contiguous blocks of batch size / concurrency
(``lobo``, :func:`dvfslab.evaluation.govcv.grouping`):

* ``ffg`` and the learned ``mlg`` / ``curve`` (refitted without the held-out group; candidates of
  the recommendation, not printed);
* the probing governors the registry holds among ``zeus`` (Zeus's live profiler), ``zeus-sim``
  (the trace simulator's rule, when ``zeus`` is not there), ``online`` (when ``voi`` is not
  there), ``search``, ``voi`` — they measure the held-out job itself; their probes are charged;
* ``recommended`` — the rule of :mod:`dvfslab.evaluation.recommend` applied *inside* each fold,
  then replayed on the held-out group;

the measuring governors **run through the live runner** on the replay board
(:mod:`dvfslab.evaluation.governed`: what ``dvfslab govern --backend replay:DATASET --workload W``
runs — default-clock windows, the settle, windows of at least 5 sensor samples, the decision, the
hold), trained on the fold's training groups, told the job's length, the dataset's σ
(:mod:`dvfslab.evaluation.probes`) as one sensor sample's noise at the sensor's interval (NVML
100 ms on the Zeus GPUs, tegrastats 500 ms on LoudVA; never 0; seed fixed); a Zeus epoch is
served as its iterations. The other governors plan with the training groups' median job. Per governor, over the whole job: the mean regret vs the oracle (% of
the baseline's job energy) with its 90 % bootstrap interval over the held-out groups; the share
of the FFG-to-oracle gap closed, ``100 (r_ffg - r) / r_ffg``, on all workloads and on those
where FFG's regret is above its noise floor (:func:`dvfslab.evaluation.replay.intervals`); the
share of the job spent probing; the probes used; the goal's figures (:func:`goal_figures`: the
share of the oracle's whole-job saving against the baseline, and the regret minus ``zeus``'s, each
with its interval); and, for comparison only, the gap closed with
*idealised* probes (instant, exact — never a result). ``--noise CV...`` adds runs with one fixed
reading noise for every probe (a sensitivity); ``--noise-scale K...`` scales the dataset's own.

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
from dvfslab.evaluation.govcv import SCHEME_WORDS
from dvfslab.evaluation.recipe import evaluate_dataset
from dvfslab.evaluation.recommend import versus_fallback
from dvfslab.governors import registry as G
from dvfslab.governors.objective import LEAST_ENERGY

LEARNED = ("mlg", "curve")


def probing_names() -> tuple[str, ...]:
    """The probing governors reported: ``zeus`` (else ``zeus-sim``), ``online`` (when there is no
    ``voi``), ``search``, ``voi`` — those the registry holds."""
    have = set(G.registry())
    names = ["zeus" if "zeus" in have else "zeus-sim", "search", "voi" if "voi" in have else "online"]
    return tuple(n for n in names if n in have)


def evaluate(data_dir: Path, split: str | None, tree: str, candidates: tuple[str, ...] = (*FEATURES, *EXTRA_FEATURES),
             noise: float | None = None, seed: int = 0, all_workloads: bool = False,
             idealise: bool = False, noise_scale: float = 1.0) -> tuple[pd.DataFrame, dict]:
    """The table of one dataset and what to say about it; ``noise`` None: the physical model's own
    noise (``noise_scale`` times it); ``idealise``: instant, exact probes (comparison only)."""
    ds = load_dataset(data_dir)
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    source = F.TrainingData(sweep, table, sweep.workload_ids(split)).steps()
    known = [w for w in sweep.workload_ids(split) if source.job_known(w)]
    ids = sweep.workload_ids(split) if all_workloads else known
    rows = table[table["workload_id"].isin(ids)]
    cols, _ = F.usable_features(rows, candidates)
    mlg = {"estimator": S.candidate_models(False, 0)[tree], "features": cols}
    probing = probing_names()
    cands_all = (*LEARNED, *probing)
    # the evaluation recipe (dvfslab.evaluation.recipe): every governor optimises the least
    # energy (the paper's objective), so their regrets compare — zeus too, whose own default is
    # Zeus's cost with eta = 0.5; the grouped CV, the recommendation and its nested CV
    ev = evaluate_dataset(sweep, table, ids, names=["oracle", "ffg", *cands_all], candidates=cands_all,
                          params={"mlg": mlg}, objective=LEAST_ENERGY, probe_noise=noise, seed=seed,
                          idealise=idealise, noise_scale=noise_scale, nested=True)
    cv, nested, scheme = ev.cv, ev.nested, ev.scheme
    both = pd.concat([cv, nested], ignore_index=True)
    out = E.summarize(both).set_index("policy")
    order = ["oracle", "ffg", *[n for n in probing if n in out.index], "recommended"]
    out = out.reindex([n for n in order if n in out.index])
    versus = "zeus" if "zeus" in probing else probing[0]
    out = out.join(goal_figures(both, list(out.index), versus))
    rec = ev.recommended
    search = cv[cv["policy"] == "search"]
    ffg = cv[cv["policy"] == "ffg"]
    info = {"knob": sweep.knob, "source": ds.source, "n_workloads": len(ids), "n_groups": int(cv["held_out"].nunique()),
            "scheme": scheme, "left_without_job": len(sweep.workload_ids(split)) - len(known),
            "all_workloads": all_workloads, "features": cols, "full_data_recommendation": rec,
            "probe": ev.probe, "n_levels": len(sweep.level_table),
            "not_replayed": {name: f"{why}; not replayed" for name, why in ev.left_out.items()},
            "recommended_vs_ffg": versus_fallback(cv, nested, scheme=scheme),
            "chosen_per_fold": nested.groupby("held_out")["chosen"].first().value_counts().to_dict(),
            "search_not_unimodal": int(search["note"].str.contains("not unimodal").sum()), "n_search": len(search),
            "ffg_below_floor": int((ffg["job_regret_pct"] < ffg["noise_floor_pct"]).sum()), "n_ffg": len(ffg),
            "plan_job_units": float(cv["plan_job_units"].median())}
    return out, info


def goal_figures(cv: pd.DataFrame, names: list[str], versus: str = "zeus", seed: int = 0) -> pd.DataFrame:
    """Per governor, over the CV's held-out workloads: ``oracle_share_pct`` — its whole-job saving
    against the baseline as a share of the oracle's, ``100 sum(s_p) / sum(s_oracle)`` over the same
    workloads — and ``minus_<versus>_pts`` — its mean whole-job regret minus ``versus``'s (points;
    negative: ahead) — each with its 90 % bootstrap interval over the held-out groups
    (:func:`dvfslab.evaluation.replay.mean_interval`'s resampling)."""
    import numpy as np

    key = ["held_out", "workload_id"]
    table = cv.pivot_table(index=key, columns="policy", values=["job_saving_pct", "job_regret_pct"], aggfunc="first")
    out = {}
    for name in names:
        rec: dict = {}
        if ("job_saving_pct", name) in table and ("job_saving_pct", "oracle") in table:
            both = table[[("job_saving_pct", name), ("job_saving_pct", "oracle")]].dropna()
            g = both.groupby(level="held_out")
            a, o = g.sum().iloc[:, 0].to_numpy(float), g.sum().iloc[:, 1].to_numpy(float)

            def stat(idx, axis=-1, a=a, o=o):
                return 100.0 * a[idx].sum(axis=axis) / o[idx].sum(axis=axis)

            ci, point = E._interval(a, np.ones(len(a)), stat, seed)
            rec["oracle_share_pct"], rec["oracle_share_pct_ci"] = point, ci
        if ("job_regret_pct", name) in table and ("job_regret_pct", versus) in table and name != versus:
            d = (table[("job_regret_pct", name)] - table[("job_regret_pct", versus)]).dropna()
            point, ci = E.mean_interval(d.reset_index(drop=True), pd.Series(d.index.get_level_values("held_out")),
                                        seed)
            rec[f"minus_{versus}_pts"], rec[f"minus_{versus}_pts_ci"] = point, ci
        out[name] = rec
    return pd.DataFrame.from_dict(out, orient="index")


def _ci(x: object) -> str:
    return "n/a" if not isinstance(x, list) else f"[{x[0]:.2f}, {x[1]:.2f}]"


def report(data: Path, out: pd.DataFrame, info: dict, ideal: pd.DataFrame | None = None) -> str:
    """The printed block of one dataset."""
    label = " (SIMULATED)" if info["source"] == "simulated" else ""
    knob, probe = info["knob"], info["probe"]
    rec = info["full_data_recommendation"]
    jobs = ("all workloads (a workload without job_steps: the job is its run)" if info["all_workloads"] else
            f"workloads with job_steps ({info['left_without_job']} without left out)")
    lines = [f"\n== {data}{label}: {info['n_workloads']} {jobs}; {info['n_levels']} levels of {knob.name} "
             f"({knob.unit}); {SCHEME_WORDS[info['scheme']]}, {info['n_groups']} folds; tree features "
             f"{', '.join(info['features'])}",
             f"probe model: window {probe['default_window']:.4g} {probe['unit']} at the default level (median; "
             f"{probe['window_range'][0]:.3g}-{probe['window_range'][1]:.3g} over levels and workloads), read "
             f"{100 * probe['read_fraction']:.0f} % of it; {probe['window_source']}",
             f"  noise: sigma {100 * probe['sigma']:.2f} % over {probe['sigma_ref_units']:.4g} {probe['unit']} (median), "
             f"1/sqrt(units read); {probe['sigma_source']}",
             f"governors plan with the training groups' median job ({info['plan_job_units']:.4g} {probe['unit']}, "
             f"median over folds); FFG's regret is below its noise floor on {info['ffg_below_floor']} of "
             f"{info['n_ffg']} workloads"]
    table = pd.DataFrame({
        "job_regret_pct": out["job_regret_pct"].round(3),
        "regret_ci90": out["job_regret_pct_ci"].map(_ci),
        "gap_closed_pct": out["gap_closed_pct"].round(1),
        "gap_ci90": out["gap_closed_pct_ci"].map(_ci),
        "gap_above_floor_pct": out["gap_closed_above_floor_pct"].round(1),
        "probe_share_pct": out["probe_share_pct"].round(3),
        "probes": out["profiling_steps"].round(2),
        "probe_units": out["probe_units"].round(4),
        "oracle_share_pct": out["oracle_share_pct"].round(2),
        "share_ci90": out["oracle_share_pct_ci"].map(_ci)})
    for col in [c for c in out.columns if c.startswith("minus_") and not c.endswith("_ci")]:
        table[col] = out[col].round(3)
        table[f"{col}_ci90"] = out[f"{col}_ci"].map(_ci)
    if ideal is not None:
        table["IDEALISED_gap_pct"] = ideal["gap_closed_pct"].reindex(out.index).round(1)
    lines.append(table.to_string())
    lines += [f"{name}: {why}" for name, why in info["not_replayed"].items()]
    vs = info["recommended_vs_ffg"]
    lines += [f"search stopped at a local minimum of a measured curve that is not unimodal on {info['search_not_unimodal']}"
              f" of {info['n_search']} workloads",
              f"recommended per fold: {info['chosen_per_fold']}; minus FFG {vs['diff_pts']:+.3f} ± {vs['noise_pts']:.3f} "
              f"points per fold ({'never below FFG' if vs['diff_pts'] <= vs['noise_pts'] + 1e-9 else 'BELOW FFG'} by the noise rule)",
              "on all groups (difference to FFG per fold, whole-job regret points; noise = one standard error):",
              rec.table.round(3).to_string(index=False), f"-> {rec.policy}: {rec.reason}"]
    return "\n".join(lines)


def markdown(data: Path, out: pd.DataFrame, info: dict, ideal: pd.DataFrame | None) -> list[str]:
    """The dataset's rows of the docs' Markdown table (``--markdown``)."""
    label = f"{data}{' (SIMULATED)' if info['source'] == 'simulated' else ''}"
    head = (f"{label} ({info['n_workloads']} jobs, {info['n_levels']} levels, {info['scheme'].upper()} "
            f"{info['n_groups']} folds, σ {100 * info['probe']['sigma']:.1f} %, FFG below the floor on "
            f"{info['ffg_below_floor']})")
    rows = []
    for i, (name, r) in enumerate(out.iterrows()):
        chosen = f" {info['chosen_per_fold']}" if name == "recommended" else ""
        idl = "" if ideal is None or name not in ideal.index else f"{ideal.loc[name, 'gap_closed_pct']:.1f}"
        vs = [c for c in r.index if c.startswith("minus_") and not c.endswith("_ci")]
        versus = f"{r[vs[0]]:+.2f} {_ci(r[vs[0] + '_ci'])}" if vs and pd.notna(r[vs[0]]) else "—"
        rows.append(f"| {head if i == 0 else ''} | `{name}`{chosen} | {r['job_regret_pct']:.2f} {_ci(r['job_regret_pct_ci'])} "
                    f"| {r['gap_closed_pct']:.1f} {_ci(r['gap_closed_pct_ci']).replace('.00', '')} "
                    f"| {r['gap_closed_above_floor_pct']:.1f} {_ci(r['gap_closed_above_floor_pct_ci'])} "
                    f"| {r['oracle_share_pct']:.2f} {_ci(r['oracle_share_pct_ci'])} | {versus} "
                    f"| {r['probe_share_pct']:.2f} | {r['profiling_steps']:.2f} | {r['probe_units']:.3g} | {idl} |")
    return rows


def sensitivity(rows: dict[float, pd.DataFrame]) -> str:
    """Whole-job regret and gap closed of every reported governor per fixed reading noise."""
    frame = pd.concat({f"{100 * k:.0f} %": v[["job_regret_pct", "gap_closed_pct"]] for k, v in rows.items()}, axis=1)
    return ("fixed reading noise for every probe, physical windows (whole-job regret %, gap closed %):\n"
            + frame.round(3).to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="+", type=Path, metavar="DATASET_DIR")
    ap.add_argument("--split", default=None, help="only the workloads of this split (default: all)")
    ap.add_argument("--tree", default="tree(depth=3,leaf=2,gini)", help="the mlg tree's hyper-parameters")
    ap.add_argument("--features", nargs="+", default=[*FEATURES, *EXTRA_FEATURES],
                    help="columns offered to the tree (default: notebook 02's candidates)")
    ap.add_argument("--noise", nargs="*", type=float, default=[],
                    help="fixed reading noise CVs of sensitivity runs (fractions, e.g. 0.02 0.05; default none)")
    ap.add_argument("--noise-scale", nargs="*", type=float, default=[],
                    help="sensitivity runs with the dataset's own reading noise (its estimate, or the sensor prior) "
                         "scaled by each factor (e.g. 0.5 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the probe noise")
    ap.add_argument("--all-workloads", action="store_true", help="also the workloads without job_steps")
    ap.add_argument("--no-idealised", action="store_true", help="skip the idealised comparison column")
    ap.add_argument("--markdown", action="store_true", help="also print the docs' Markdown table at the end")
    args = ap.parse_args()
    table = []
    for data in args.datasets:
        t0 = time.perf_counter()
        run = {"split": args.split, "tree": args.tree, "candidates": tuple(args.features), "seed": args.seed,
               "all_workloads": args.all_workloads}
        out, info = evaluate(data, noise=None, **run)
        ideal = None if args.no_idealised else evaluate(data, noise=None, idealise=True, **run)[0]
        print(report(data, out, info, ideal))
        table += markdown(data, out, info, ideal)
        if args.noise:
            runs = {cv: evaluate(data, noise=cv, **run)[0] for cv in args.noise}
            print(sensitivity(runs))
        if args.noise_scale:
            runs = {k: evaluate(data, noise=None, noise_scale=k, **run)[0] for k in args.noise_scale}
            frame = pd.concat({f"x{k:g}": v[["job_regret_pct", "gap_closed_pct"]] for k, v in runs.items()}, axis=1)
            print("the dataset's own reading noise scaled (whole-job regret %, gap closed %):\n"
                  + frame.round(3).to_string())
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    if args.markdown:
        print("\n| dataset | governor | job regret % [90 % CI] | gap closed % [90 % CI] | gap closed above the floor % "
              "[90 % CI] | share of the oracle's saving % [90 % CI] | regret minus zeus's, points [90 % CI] "
              "| probe share % | probes | probe units | idealised gap closed % (comparison only) |")
        print("|---|---|---|---|---|---|---|---:|---:|---:|---:|")
        print("\n".join(table))


if __name__ == "__main__":
    main()
