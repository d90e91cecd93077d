"""Governors under leave-one-network-out CV on any contract dataset: do they beat one fixed level?

For each ``DATASET_DIR`` (a dataset in the contract: the bundled twin, a real sweep, a
``dvfslab import zeus-nsdi`` conversion whose knob is a power limit) this prints, over the
chosen workloads with every network (= model) held out in turn (leave-one-model-out):

* ``oracle``, ``ffg``, ``mlg``, ``curve``, ``profiled`` — each refitted without the held-out
  network (the tree with fixed hyper-parameters, ``--tree``; the profiled governor's probe is
  charged), replayed on it;
* ``recommended`` — the rule of :mod:`dvfslab.evaluation.recommend` applied *inside* each fold
  (an inner leave-one-model-out CV on the other networks chooses FFG or a learned governor),
  then replayed on the held-out network: the rule judged as it would be used;

and for each: the mean saving vs the baseline, the mean regret vs the oracle (both in % of the
baseline energy) and the share of the FFG-to-oracle gap it closes, ``(regret_ffg - regret) /
regret_ffg`` (negative: worse than FFG). Then the recommendation's table on all networks: each
candidate's per-fold difference to FFG and its noise (one standard error).

The tree sees the feature columns notebook 02 offers (``--features``; constant or empty ones
dropped); the curve model its own fixed set (``CURVE_FEATURES``: no batch size). The profiled
governor needs the first steps of each workload at the default level: ``steps.csv`` or a
``steps`` count in runs.csv. A dataset with neither (the Zeus traces: one figure per epoch)
gets a ``profiled`` row of NaN and the reason, not a made-up probe. The knob's name and unit
come from the dataset's meta.json (``knob``, default ``gpu_freq_mhz``) and only label the output.

    PYTHONPATH=. .venv/bin/python benchmarks/real_governors.py DATASET_DIR... [--split characterization]
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
from dvfslab.evaluation.govcv import cv_replay
from dvfslab.evaluation.recommend import nested_recommended, recommend, versus_fallback
from dvfslab.governors import registry as G

LEARNED = ("mlg", "curve", "profiled")
ORDER = ("oracle", "ffg", *LEARNED, "recommended")


def gap_closed_pct(regret_pct: pd.Series, ffg_regret_pct: float) -> pd.Series:
    """Share of the FFG-to-oracle gap closed, %: ``100 (r_ffg - r) / r_ffg`` (NaN when FFG has no gap)."""
    if not ffg_regret_pct > 0:
        return regret_pct * float("nan")
    return 100.0 * (ffg_regret_pct - regret_pct) / ffg_regret_pct


def evaluate(data_dir: Path, split: str | None, tree: str,
             candidates: tuple[str, ...] = (*FEATURES, *EXTRA_FEATURES)) -> tuple[pd.DataFrame, dict]:
    """The table of one dataset and what to say about it."""
    ds = load_dataset(data_dir)
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    ids = sweep.workload_ids(split)
    rows = table[table["workload_id"].isin(ids)]
    cols, _ = F.usable_features(rows, candidates)
    data = F.TrainingData(sweep, table, ids)
    mlg = {"estimator": S.candidate_models(False, 0)[tree], "features": cols}
    protos, left_out = G.usable(G.make_all(["oracle", "ffg", *LEARNED], {"mlg": mlg}), data)
    cands = [n for n in protos if n in LEARNED]
    cv = cv_replay(protos, data, schemes=["lomo"])
    nested = nested_recommended(protos, data, cands)
    out = E.summarize(pd.concat([cv, nested], ignore_index=True)).set_index("policy")
    out["gap_closed_pct"] = gap_closed_pct(out["mean_regret_pct"], float(out.loc["ffg", "mean_regret_pct"]))
    out = out.reindex([n for n in ORDER if n in out.index or n == "profiled"])
    rec = recommend(cv, cands)
    info = {"knob": sweep.knob, "source": ds.source, "n_workloads": len(ids), "n_networks": int(rows["model"].nunique()),
            "features": cols, "full_data_recommendation": rec,
            "not_replayed": {name: f"{why}; not replayed" for name, why in left_out.items()},
            "recommended_vs_ffg": versus_fallback(cv, nested),
            "chosen_per_fold": nested.groupby("held_out")["chosen"].first().value_counts().to_dict()}
    return out, info


def report(data: Path, out: pd.DataFrame, info: dict) -> str:
    """The printed block of one dataset."""
    label = " (SIMULATED)" if info["source"] == "simulated" else ""
    knob = info["knob"]
    cols = ["n_workloads", "n_failed", "mean_saving_pct", "mean_regret_pct", "gap_closed_pct", "profiling_steps"]
    rec = info["full_data_recommendation"]
    lines = [f"\n== {data}{label}: {info['n_workloads']} workloads, {info['n_networks']} networks, knob {knob.name} "
             f"({knob.unit}), leave-one-network-out; tree features {', '.join(info['features'])}",
             out[cols].round(3).to_string()]
    lines += [f"{name}: {why}" for name, why in info["not_replayed"].items()]
    vs = info["recommended_vs_ffg"]
    lines += [f"recommended per fold: {info['chosen_per_fold']}; minus FFG {vs['diff_pts']:+.3f} ± {vs['noise_pts']:.3f} "
              f"points per fold ({'never below FFG' if vs['diff_pts'] <= vs['noise_pts'] + 1e-9 else 'BELOW FFG'} by the noise rule)",
              "on all networks (difference to FFG per fold, points; noise = one standard error):",
              rec.table.round(3).to_string(index=False), f"-> {rec.policy}: {rec.reason}"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="+", type=Path, metavar="DATASET_DIR")
    ap.add_argument("--split", default=None, help="only the workloads of this split (default: all)")
    ap.add_argument("--tree", default="tree(depth=3,leaf=2,gini)", help="the mlg tree's hyper-parameters")
    ap.add_argument("--features", nargs="+", default=[*FEATURES, *EXTRA_FEATURES],
                    help="columns offered to the tree (default: notebook 02's candidates)")
    args = ap.parse_args()
    for data in args.datasets:
        t0 = time.perf_counter()
        out, info = evaluate(data, args.split, args.tree, tuple(args.features))
        print(report(data, out, info))
        print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
