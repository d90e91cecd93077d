"""Wall time of sweeps on the simulated board (digital twin), and how close the sampler gets.

Times, each ``--reps`` times (median and range printed):

* ``dvfslab simulate`` on the full paper grid (81 workloads × 12 conditions × 3 reps, 200 steps)
  and with ``--quick``; both go through :func:`dvfslab.sweep.runner.run_sweep` with the twin's executor;
* ``dvfslab sweep --backend sim --workloads characterization --steps 100`` (27 × 12 runs);
* one characterization sweep with one Python sampler call per tick (``on_tick``) instead of the
  bulk ``on_ticks`` path, to show what bulk sampling saves (``--per-tick``; slow).

Also printed: for the characterization sweep, the sampler's energy per run relative to the
twin's exact integral (mean and largest deviation). Every number is from the simulated board.

    .venv/bin/python benchmarks/twin_sweep.py [--reps 3] [--per-tick]
    .venv/bin/python benchmarks/twin_sweep.py --sensitivity   # docs/calibration.md, section 4

``--sensitivity`` regenerates the paper grid (100 steps, 1 repetition) with one assumption of
the calibrated profile changed at a time and prints the oracle's savings, the optimal levels and
the paper's tree − FFG (evaluation split), all simulated.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.cli.sweep import resolve_workloads
from dvfslab.hw import get_backend
from dvfslab.sweep.plan import make_plan
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.simulate import simulate_dataset, simulation_plan
from dvfslab.sweep.twin import SimExecutor


class PerTickSimExecutor(SimExecutor):
    """The twin's executor with one ``sampler.sample_once()`` per tick (the pre-bulk way)."""

    @staticmethod
    def _ticks(sampler):
        return None if sampler is None else _PerTick(sampler)


class _PerTick:
    """Stands in for ``on_ticks`` but samples tick by tick (on_tick) in train/idle."""

    def __init__(self, sampler):
        self.sampler = sampler


def _board_call(method):
    def call(self, *args, on_ticks=None, **kwargs):
        if isinstance(on_ticks, _PerTick):
            sampler = on_ticks.sampler
            return method(self, *args, on_tick=lambda _t: sampler.sample_once(), **kwargs)
        return method(self, *args, on_ticks=on_ticks, **kwargs)
    return call


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def report(name: str, seconds: list[float]) -> None:
    print(f"{name:<44} median {statistics.median(seconds):6.2f} s  (min {min(seconds):.2f}, "
          f"max {max(seconds):.2f}, n={len(seconds)})")


def characterization(out: Path, executor) -> None:
    backend = get_backend("sim", seed=0)
    plan = make_plan(resolve_workloads(["characterization"]), backend.clocks.levels_mhz(), reps=1, steps=100,
                     warmup_steps=10)
    run_sweep(plan, backend, executor, out, progress=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--per-tick", action="store_true", help="also time one sampler call per tick (slow)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        full, quick, char = [], [], []
        for i in range(args.reps):
            full.append(timed(lambda i=i: simulate_dataset(root / f"full{i}", simulation_plan(), progress=False)))
            quick.append(timed(lambda i=i: simulate_dataset(root / f"quick{i}", simulation_plan(quick=True),
                                                            progress=False)))
            char.append(timed(lambda i=i: characterization(root / f"char{i}", SimExecutor())))
        report("dvfslab simulate, full grid (2916 runs)", full)
        report("dvfslab simulate --quick (384 runs)", quick)
        report("sim sweep, characterization (324 runs)", char)
        recs = [json.loads(p.read_text()) for p in (root / "char0" / "runs").glob("*.json")]
        rel = np.array([r["row"]["energy_j"] / r["extras"]["twin"]["energy_j"] - 1 for r in recs])
        print(f"sampler vs twin energy, characterization: mean {100 * rel.mean():+.3f} %, "
              f"max |dev| {100 * np.abs(rel).max():.2f} % over {rel.size} runs (simulated)")
        if args.per_tick:
            from dvfslab.sim.board import SimBoard

            train, idle = SimBoard.train, SimBoard.idle
            SimBoard.train, SimBoard.idle = _board_call(train), _board_call(idle)
            try:
                slow = timed(lambda: characterization(root / "char-per-tick", PerTickSimExecutor()))
            finally:
                SimBoard.train, SimBoard.idle = train, idle
            report("  same, one sampler call per tick", [slow])
            a = pd.read_csv(root / "char0" / "runs.csv").set_index("run_id")
            b = pd.read_csv(root / "char-per-tick" / "runs.csv").set_index("run_id").loc[a.index]
            dev = (b["energy_j"] / a["energy_j"] - 1).abs().max()
            print(f"  energy per run vs the bulk path: max |dev| {100 * dev:.2g} % (tick times rounded "
                  f"differently; time_s identical: {bool((a['time_s'] == b['time_s']).all())})")


# -- sensitivity of the findings to the assumptions (docs/calibration.md, section 4) ----------

def _cases() -> dict:
    """One stated assumption of the calibrated profile changed at a time (docs/calibration.md, section 4)."""
    from dvfslab.sim.profiles import AGX_ORIN_64GB as p

    return {
        "as calibrated": {},
        "V–f slope −25 %": {"v_slope_per_mhz": 0.75 * p.v_slope_per_mhz},
        "V–f slope +25 %": {"v_slope_per_mhz": 1.25 * p.v_slope_per_mhz},
        "V_min 0.60 → 0.70 V": {"v_min": 0.70},
        "CPU op cost ×0.5 (A78AE ratio 1.0)": {"cpu_op_us": 0.5 * p.cpu_op_us},
        "CPU op cost ×1.5 (A78AE ratio 3.0)": {"cpu_op_us": 1.5 * p.cpu_op_us},
        "matmul activity 0.85 → 0.60": {"activity_matmul": 0.60},
        "busy CPU cores while training 1.3 → 2.5": {"cpu_busy_cores_training": 2.5},
        "EMC step 0.60 → 1.2 W": {"emc_w_per_ghz": 2 * p.emc_w_per_ghz},
    }


def sensitivity(steps: int = 100, reps: int = 1, window_phases=None) -> list[dict]:
    """Findings of the full paper grid (``steps`` steps, ``reps`` repetitions) with one profile
    parameter changed at a time; ``window_phases=()`` is the row without phases."""
    from dvfslab.evaluation.findings import twin_findings
    from dvfslab.sim.profiles import AGX_ORIN_64GB, with_params
    from dvfslab.sweep.simulate import simulate_dataset, simulation_plan

    cases = _cases()
    cases["no phases in the window"] = "no-phases"
    rows = []
    for name, change in cases.items():
        phases = () if change == "no-phases" else window_phases
        profile = with_params(AGX_ORIN_64GB, {} if change == "no-phases" else change)
        with tempfile.TemporaryDirectory() as tmp:
            plan = simulation_plan(steps=steps, reps=reps, window_phases=phases)
            f = twin_findings(simulate_dataset(tmp, plan, progress=False, profile=profile))
        sv = f["saving_pct"]["oracle"]
        rows.append({"change": name, "mean": sv["all"]["mean"], "min": sv["all"]["min"],
                     "gt70m": sv["gt70m"]["mean"], "le70m": sv["le70m"]["mean"],
                     "levels": f["optimal_level_counts"], "maxn_util": f["maxn_util_pct"],
                     "tree_minus_ffg": f["saving_pct"]["paper_tree"]["all"]["mean"]
                     - f["saving_pct"]["ffg"]["all"]["mean"]})
        r = rows[-1]
        print(f"| {name} | {r['mean']:.1f} % | {r['min']:.1f} % | {r['gt70m']:.1f} % | {r['le70m']:.1f} % | "
              f"{', '.join(f'{k}: {v}' for k, v in r['levels'].items())} | {r['maxn_util'][0]:.0f} % | "
              f"{r['tree_minus_ffg']:+.1f} |", flush=True)
    return rows


if __name__ == "__main__":
    import sys

    if "--sensitivity" in sys.argv:
        print("| Change | mean | min | > 70M | ≤ 70M | optimal levels | lowest MAXN util | tree − FFG |")
        print("|---|---|---|---|---|---|---|---|")
        sensitivity()
    else:
        main()
