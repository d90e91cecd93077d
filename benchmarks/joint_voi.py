"""How many probes `voi` needs over a joint GPU x EMC setting, on a joint sweep of the twin. SIMULATED.

Runs (or reads) a joint sweep of the simulated AGX Orin — `dvfslab sweep --backend sim --knob
gpu=<11 levels> --knob emc=<the board's 4 levels>` over the paper's nine models on three tasks
(27 workloads, 44 settings, one repetition; the EMC pin reaches the twin's physics,
`open_backend(..., physical_pins=True)`) — then replays, every network held out in turn
(leave-one-model-out), the joint oracle, FFG over settings, and `voi` over the 44-setting grid
with the physical probe model (the twin's 0.05 s sampler: 5 samples + 0.2 s settle per setting,
log-normal reading noise of the dataset's σ), least energy. Printed: the joint oracle's saving
beyond the best GPU-only level (EMC at its top, 3199 MHz: a sweep's pinned default), median per
size group; per governor the whole-job regret against the joint oracle with its 90 % interval,
the probes used (median and max) and the share of workloads `voi` ends within 1 % of the joint
oracle (regret <= 1 % of the baseline's job energy).

    PYTHONPATH=. .venv/bin/python benchmarks/joint_voi.py [--out /tmp/joint_twin] [--seed 0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from dvfslab import analysis as F
from dvfslab.analysis.aggregate import joint_vs_gpu_only
from dvfslab.data.catalog import PAPER_MODELS
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.recipe import evaluate_dataset
from dvfslab.governors.objective import LEAST_ENERGY

GPU = "306,408,510,612,714,816,918,1020,1122,1224,1300.5"
EMC = "204,665.6,2133,3199"
TASKS = ("sst2", "qnli", "mrpc")


def sweep(out: Path, seed: int) -> None:
    workloads = ",".join(f"{m}/{t}" for m in PAPER_MODELS for t in TASKS)
    cmd = [sys.executable, "-m", "dvfslab", "sweep", "--backend", "sim", "--knob", f"gpu={GPU}", "--knob",
           f"emc={EMC}", "--workloads", workloads, "--reps", "1", "--seed", str(seed), "--out", str(out),
           "--no-progress"]
    subprocess.run(cmd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/joint_twin"), help="the joint sweep (made when absent)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if not (args.out / "runs.csv").exists():
        sweep(args.out, args.seed)
    ds = load_dataset(args.out)
    sweep_ = F.sweep_from_dataset(ds)
    extra = joint_vs_gpu_only(sweep_)
    if "params_m" not in extra:
        extra = extra.merge(sweep_.workloads[["workload_id", "params_m"]], on="workload_id")
    extra["group"] = (extra["params_m"] > 70).map({True: "> 70M", False: "<= 70M"})
    print(f"{args.out}: {len(sweep_.workload_ids())} workloads, {len(sweep_.settings)} settings of "
          f"{', '.join(sweep_.joint_knobs)} (SIMULATED)")
    print("joint oracle's saving beyond the best GPU-only level (EMC at its top), % of the baseline, median by group:")
    print(extra.groupby("group")["extra_saving_pct"].describe()[["count", "50%", "min", "max"]].round(2).to_string())
    table = F.feature_table(sweep_)
    names = ["oracle", "ffg", "voi"]
    # the evaluation recipe: physical probes, least energy, leave-one-model-out (nine networks)
    ev = evaluate_dataset(sweep_, table, sweep_.workload_ids(), names=names, candidates=["voi"], objective=LEAST_ENERGY)
    per = ev.cv
    summary = E.summarize(per).set_index("policy")
    for name in names:
        rows = per[per["policy"] == name]
        lo, hi = summary.loc[name, "job_regret_pct_ci"]
        ci = f"[{lo:.2f}, {hi:.2f}]"
        within = (rows["job_regret_pct"] <= 1.0).mean() * 100
        print(f"{name:>7}: whole-job regret {summary.loc[name, 'job_regret_pct']:.2f} % {ci}; probes median "
              f"{rows['profiling_steps'].median():.0f}, max {rows['profiling_steps'].max():.0f}; probe share "
              f"{summary.loc[name, 'probe_share_pct']:.2f} %; within 1 % of the joint oracle on {within:.0f} % of "
              f"{len(rows)} workloads")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
