"""Fleet sweeps: makespan in board time for 1, 2, 4 simulated boards, and the scheduler's cost.

One plan (``--workloads`` catalog workloads × every level of the simulated AGX Orin + MAXN,
``--steps`` measured steps, default cool-down) runs as a fleet sweep on a ``LocalCluster`` of
N one-thread worker processes, each with its own simulated board (seed 0, 1, ...). Printed per N:

* makespan: the latest end of a run on any board, in virtual board seconds (every board's
  clock starts at 0 with its session: initial cool-down and idle measurement), and its ratio
  to the single board's;
* runs per board, cool-down waited per run (virtual s) and whether every board ran its share
  in plan order (the order design holds per board: each board sees a subsequence of the plan);
* wall seconds of the whole sweep, and the scheduler overhead per run: the wall time the boards
  spent outside a run, N × sweep wall − Σ in-task wall, divided by the number of runs (dispatch,
  transfer, the client's commit; cluster start-up not included).

Every number is from the simulated board (virtual time), not a measurement.

    .venv/bin/python benchmarks/fleet.py [--workloads 4] [--steps 50] [--boards 1 2 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster

from dvfslab.cli.sweep import resolve_workloads
from dvfslab.hw import get_backend
from dvfslab.sweep.fleet import run_fleet_sweep
from dvfslab.sweep.plan import make_plan
from dvfslab.sweep.twin import SimExecutor


def fleet_run(plan, n_boards: int, out: Path) -> dict:
    with LocalCluster(n_workers=n_boards, threads_per_worker=1, processes=True, resources={"board": 1},
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        ds = run_fleet_sweep(plan, client, out, executor=SimExecutor(), progress=False)
        wall_s = time.perf_counter() - t0
    records = {p.stem: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}
    order = {r.run_id: i for i, r in enumerate(plan.runs)}
    ends, in_order, runs = {}, 0, {}
    for board in sorted(ds.runs["board_id"].unique()):
        mine = sorted((rec["extras"]["board_clock_s"][0], order[rid]) for rid, rec in records.items()
                      if rec["row"]["board_id"] == board)
        runs[board] = len(mine)
        in_order += [i for _, i in mine] == sorted(i for _, i in mine)
        ends[board] = max(rec["extras"]["board_clock_s"][1] for rec in records.values()
                          if rec["row"]["board_id"] == board)
    task_wall_s = sum(rec["extras"]["task_wall_s"] for rec in records.values())
    waited = [rec["extras"]["cooldown"]["waited_s"] for rec in records.values()]
    return {"boards": n_boards, "runs": len(ds.runs), "makespan_s": max(ends.values()), "runs_per_board": runs,
            "boards_in_plan_order": in_order, "cooldown_mean_s": sum(waited) / len(waited),
            "wall_s": wall_s, "overhead_per_run_s": (n_boards * wall_s - task_wall_s) / len(ds.runs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=4, help="first N characterization workloads (default 4)")
    ap.add_argument("--steps", type=int, default=50, help="measured steps per run (default 50)")
    ap.add_argument("--boards", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args(argv)
    workloads = resolve_workloads(["characterization"])[: args.workloads]
    levels = get_backend("sim").clocks.levels_mhz()
    plan = make_plan(workloads, levels, steps=args.steps, warmup_steps=5)
    print(f"plan: {len(workloads)} workloads x {len(levels)} levels + MAXN = {len(plan)} runs, "
          f"{args.steps} steps each (simulated AGX Orin, virtual time)")
    print(f"{'boards':>6} {'makespan (board s)':>19} {'ratio':>6} {'runs/board':>14} {'in order':>8} "
          f"{'cool-down/run':>13} {'wall s':>7} {'overhead/run (wall s)':>22}")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.boards:
            r = fleet_run(plan, n, Path(tmp) / f"n{n}")
            base = base or r["makespan_s"]
            share = "/".join(str(v) for v in r["runs_per_board"].values())
            print(f"{n:>6} {r['makespan_s']:>19.0f} {r['makespan_s'] / base:>6.3f} {share:>14} "
                  f"{r['boards_in_plan_order']:>5}/{n:<2} {r['cooldown_mean_s']:>12.1f}s {r['wall_s']:>7.2f} "
                  f"{r['overhead_per_run_s']:>22.4f}")


if __name__ == "__main__":
    main()
