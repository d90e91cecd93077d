"""The online governor on twin sweeps it was not designed on: gap to the oracle, split in two.

The online governor's design (docs/governors.md) was checked on a twin sweep generated with
seed 1, not on the bundled data (seed 0). This script regenerates such held-out sweeps
(``dvfslab simulate --seed N``, SIMULATED data) and prints, per seed, over the ``evaluation``
workloads and over all workloads: the mean gap to the oracle (% of baseline energy, probing
included), its split into the locked level's own regret and the probing cost, the worst
workload, and the profiling steps. Profiler settings can be varied from the command line to
compare designs on data other than the bundled one.

    .venv/bin/python benchmarks/online_design.py [--seeds 1 2 3] [--coarse-steps 2] [--fine-steps 5] ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dvfslab import analysis as F
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.probing import probing_breakdown
from dvfslab.governors.online import OnlineGovernor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--n-levels", type=int, default=5)
    ap.add_argument("--coarse-steps", type=int, default=2)
    ap.add_argument("--fine-levels", type=int, default=3)
    ap.add_argument("--fine-steps", type=int, default=5)
    ap.add_argument("--warmup-steps", type=int, default=1)
    args = ap.parse_args()
    options = {"n_levels": args.n_levels, "coarse_steps": args.coarse_steps, "fine_levels": args.fine_levels,
               "fine_steps": args.fine_steps, "warmup_steps": args.warmup_steps}
    print(f"online governor {options} on SIMULATED twin sweeps (dvfslab simulate --seed N)")
    print(f"{'seed':>4} {'split':>10} {'n':>3} {'gap %':>6} {'choice %':>8} {'probing %':>9} {'worst %':>7} {'steps':>5} {'s':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            data = Path(tmp) / f"seed{seed}"
            subprocess.run([sys.executable, "-m", "dvfslab", "simulate", "--out", str(data), "--seed", str(seed),
                            "--no-progress"], check=True, stdout=subprocess.DEVNULL)
            t0 = time.perf_counter()
            sweep = F.sweep_from_dataset(load_dataset(data))
            table = F.feature_table(sweep)
            gov = OnlineGovernor(**options).fit(F.TrainingData(sweep, table, []))
            per = E.replay({"online": gov}, sweep, table)
            secs = time.perf_counter() - t0
            for split in ("evaluation", None):
                rows = per if split is None else per[per["split"] == split]
                b = probing_breakdown(rows, sweep)
                print(f"{seed:>4} {split or 'all':>10} {len(b):>3} {b['regret_pct'].mean():6.2f} "
                      f"{b['choice_regret_pct'].mean():8.2f} {b['probing_cost_pct'].mean():9.2f} "
                      f"{b['regret_pct'].max():7.2f} {int(b['profiling_steps'].iloc[0]):>5} {secs:5.1f}")


if __name__ == "__main__":
    main()
