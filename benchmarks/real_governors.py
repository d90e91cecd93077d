"""Governors under leave-one-network-out CV on any contract dataset: do they beat one fixed level?

For each ``DATASET_DIR`` (a dataset in the contract: the bundled twin, a real sweep, a
``dvfslab import zeus-nsdi`` conversion whose knob is a power limit) this prints, over the
chosen workloads with every network (= model) held out in turn (leave-one-model-out):

* ``oracle``, ``ffg``, ``mlg``, ``curve``, ``profiled`` — each refitted without the held-out
  network (the tree with fixed hyper-parameters, ``--tree``; the profiled governor's probe is
  charged), replayed on it;
* ``recommended`` — the rule of :mod:`dvfslab.analysis.recommend` applied *inside* each fold
  (an inner leave-one-model-out CV on the other networks chooses FFG or a learned governor),
  then replayed on the held-out network: the rule judged as it would be used;

and for each: the mean saving vs the baseline, the mean regret vs the oracle (both in % of the
baseline energy) and the share of the FFG-to-oracle gap it closes, ``(regret_ffg - regret) /
regret_ffg`` (negative: worse than FFG). The knob's name and unit come from the dataset's
meta.json (``knob``, default ``gpu_freq_mhz``) and only label the output.

    PYTHONPATH=. .venv/bin/python benchmarks/real_governors.py DATASET_DIR... [--split characterization]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from dvfslab import analysis as F
from dvfslab.analysis import replay as E
from dvfslab.analysis import selection as S
from dvfslab.analysis.govcv import cv_replay, with_probe_source
from dvfslab.analysis.recommend import nested_recommended, recommend
from dvfslab.data.contract import load_dataset

LEARNED = ("mlg", "curve", "profiled")
ORDER = ("oracle", "ffg", *LEARNED, "recommended")


def evaluate(data_dir: Path, split: str | None, tree: str) -> tuple[pd.DataFrame, dict]:
    """The table of one dataset and what to say about it."""
    ds = load_dataset(data_dir)
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    ids = sweep.workload_ids(split)
    rows = table[table["workload_id"].isin(ids)]
    cols, _ = F.usable_features(rows)
    tree_model = S.candidate_models(False, 0)[tree]
    options = with_probe_source(sweep, ["profiled"], {})
    names = ["oracle", "ffg", *[n for n in LEARNED if n != "profiled" or options["probe_source"].covers(ids)]]
    cands = [n for n in names if n in LEARNED]
    cv = cv_replay(sweep, table, names, ids, tree_model=tree_model, feature_cols=cols, schemes=["lomo"], options=options)
    nested = nested_recommended(sweep, table, ids, cands, tree_model=tree_model, feature_cols=cols, options=options)
    per = pd.concat([cv, nested], ignore_index=True)
    out = E.summarize(per).set_index("policy")
    gap = out.loc["ffg", "mean_regret_pct"]
    out["gap_closed_pct"] = 100.0 * (gap - out["mean_regret_pct"]) / gap if gap > 0 else float("nan")
    out = out.reindex([n for n in ORDER if n in out.index])
    info = {"knob": ds.meta.get("knob", "gpu_freq_mhz"), "source": ds.source, "n_workloads": len(ids),
            "n_networks": int(rows["model"].nunique()), "features": cols,
            "full_data_recommendation": recommend(cv, cands),
            "chosen_per_fold": nested.groupby("held_out")["chosen"].first().value_counts().to_dict()}
    return out, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="+", type=Path, metavar="DATASET_DIR")
    ap.add_argument("--split", default=None, help="only the workloads of this split (default: all)")
    ap.add_argument("--tree", default="tree(depth=3,leaf=2,gini)", help="the mlg tree's hyper-parameters")
    args = ap.parse_args()
    for data in args.datasets:
        t0 = time.perf_counter()
        out, info = evaluate(data, args.split, args.tree)
        label = " (SIMULATED)" if info["source"] == "simulated" else ""
        print(f"\n== {data}{label}: {info['n_workloads']} workloads, {info['n_networks']} networks, knob "
              f"{info['knob']}, leave-one-network-out; features {', '.join(info['features'])}")
        cols = ["n_workloads", "n_failed", "mean_saving_pct", "mean_regret_pct", "gap_closed_pct", "profiling_steps"]
        print(out[cols].round(3).to_string())
        rec = info["full_data_recommendation"]
        print(f"recommended per fold: {info['chosen_per_fold']}; on all networks: {rec.policy} — {rec.reason}")
        print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
