"""Cost of committing one sweep run, and the paper grid as a sweep (issue 25, item 6).

Per commit, with 100 and with 3,000 runs already done (``--done``), in one process:

* **rewrite** (dvfslab before issue 25): the run's ``runs/<run_id>.json`` written atomically,
  then ``workloads.csv``, ``runs.csv`` and ``meta.json`` rewritten from every record, after
  every run (what ``run_sweep`` did with its default ``consolidate_s=0``);
* **journal** (now): one line appended to ``runs.journal`` and fsynced
  (:meth:`dvfslab.sweep.store.SweepStore.commit`).

Both start from a compacted sweep directory of N runs (one each; their commits alternate, so
the machine's load weighs on both alike); the records are copies of one
real run record of the simulated board (the twin), re-labelled for each run of a paper-sized
plan. Printed: the median ms per commit over ``--commits`` commits and the ratios.

``--grid`` also times the full paper grid (81 workloads x 12 conditions x 3 reps = 2,916 runs,
200 steps; simulated) as ``dvfslab sweep --backend sim`` and through ``dvfslab simulate``
(both run :func:`dvfslab.sweep.runner.run_sweep` on the twin; simulate also compacts every 5 s).

    .venv/bin/python benchmarks/commit.py [--done 100 3000] [--commits 50] [--grid]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dvfslab.cli import main as cli_main
from dvfslab.cli.sweep import resolve_workloads
from dvfslab.core.files import atomic_write_json
from dvfslab.data.contract import WORKLOAD_COLUMNS, atomic_write_csv
from dvfslab.data.workloads import merge_workloads, workload_table
from dvfslab.hw import get_backend
from dvfslab.sweep.plan import MAXN, make_plan
from dvfslab.sweep.runner import execute_run
from dvfslab.sweep.session import Cooldown
from dvfslab.sweep.simulate import simulate_dataset, simulation_plan
from dvfslab.sweep.store import ROW_COLUMNS, SweepStore, sweep_meta
from dvfslab.sweep.twin import SimExecutor

COOL = Cooldown(max_temp_c=None, idle_power_tol=1.0, timeout_s=0.0, idle_measure_s=0.0)


def records_for(plan, template: dict) -> list[dict]:
    """One record per run of ``plan``: ``template`` re-labelled with the run's identity."""
    out = []
    for spec in plan.runs:
        row = dict(template["row"], run_id=spec.run_id, workload_id=spec.workload_id, policy=spec.policy,
                   gpu_freq_mhz=spec.freq_mhz, rep=spec.rep)
        out.append({"row": row, "extras": template["extras"]})
    return out


def rewrite_commit(store: SweepStore, plan, meta: dict, table, rec: dict) -> None:
    """A commit as dvfslab did it before the journal: the run's file, then the whole dataset."""
    atomic_write_json(store.runs_dir / f"{rec['row']['run_id']}.json", rec)
    store.records[rec["row"]["run_id"]] = rec
    runs = store.runs_frame(plan)
    meta["baseline"] = MAXN if (runs["policy"] == MAXN).any() else "fmax"
    atomic_write_csv(store.root / "workloads.csv", merge_workloads(table, store.records), WORKLOAD_COLUMNS)
    atomic_write_csv(store.root / "runs.csv", runs, ROW_COLUMNS)
    atomic_write_json(store.root / "meta.json", meta)


def compacted_store(root: Path, plan, records: list[dict], done: int):
    """A sweep directory holding ``done`` compacted runs; returns the store, its meta and table."""
    backend = get_backend("sim", seed=0)
    store = SweepStore(root)
    store.open(plan, resume=False)
    meta = sweep_meta(backend, SimExecutor(), plan, COOL, None, {"started_at": "2026-01-01T00:00:00Z"})
    table = workload_table(plan.workloads)
    store.write_dataset(plan, meta, table)
    for rec in records[:done]:
        store.commit(rec["row"], rec["extras"])
    store.write_dataset(plan, meta, table)  # compacted: `done` runs in runs/ and runs.csv
    return store, meta, table


def time_commits(root: Path, plan, records: list[dict], done: int, n: int) -> dict[str, list[float]]:
    """ms per commit of runs ``done .. done + n``, each mode into its own directory holding
    ``done`` runs; the two modes alternate commit by commit, so load on the machine hits both."""
    stores = {mode: compacted_store(root / mode, plan, records, done) for mode in ("rewrite", "journal")}
    times: dict[str, list[float]] = {mode: [] for mode in stores}
    for rec in records[done:done + n]:
        for mode, (store, meta, table) in stores.items():
            t0 = time.perf_counter()
            if mode == "rewrite":
                rewrite_commit(store, plan, meta, table, rec)
            else:
                store.commit(rec["row"], rec["extras"], meta)
            times[mode].append(1e3 * (time.perf_counter() - t0))
    stores["journal"][0].journal.close()
    return times


def commits(done_counts: list[int], n: int) -> None:
    plan = make_plan(resolve_workloads(["all"]), get_backend("sim").clocks.levels_mhz(), reps=4, steps=200)
    need = max(done_counts) + n
    if len(plan) < need:
        raise SystemExit(f"the plan has {len(plan)} runs, fewer than {need}")
    backend = get_backend("sim", seed=0)
    row, extras = execute_run(plan.runs[0], backend, SimExecutor(), COOL, None)
    records = records_for(plan, {"row": row, "extras": extras})
    print(f"commit of one run (median of {n}; record of a real twin run, {len(str(extras))} chars of extras)")
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for done in done_counts:
            for mode, t in time_commits(Path(tmp) / str(done), plan, records, done, n).items():
                medians[mode, done] = statistics.median(t)
                print(f"  {done:>5} runs done, {mode:<8} {medians[mode, done]:8.2f} ms  "
                      f"(min {min(t):.2f}, max {max(t):.2f})", flush=True)
    for done in done_counts:
        print(f"  {done:>5} runs done: rewrite / journal = {medians['rewrite', done] / medians['journal', done]:.0f}x")
    lo, hi = min(done_counts), max(done_counts)
    for mode in ("rewrite", "journal"):
        print(f"  {mode}: {hi} runs done / {lo} runs done = {medians[mode, hi] / medians[mode, lo]:.2f}x")


def grid() -> None:
    """The full paper grid as `dvfslab sweep --backend sim` and as `dvfslab simulate` (simulated)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rc = cli_main(["sweep", "--backend", "sim", "--workloads", "all", "--reps", "3", "--steps", "200",
                       "--out", str(Path(tmp) / "sweep"), "--no-progress"])
        sweep_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ds = simulate_dataset(Path(tmp) / "simulate", simulation_plan(), progress=False)
        simulate_s = time.perf_counter() - t0
    print(f"paper grid, simulated: dvfslab sweep --backend sim --workloads all --reps 3 --steps 200 "
          f"(exit {rc}) {sweep_s:.1f} s; dvfslab simulate ({len(ds.runs)} runs) {simulate_s:.1f} s; "
          f"sweep / simulate = {sweep_s / simulate_s:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--done", type=int, nargs="+", default=[100, 3000], help="runs already done (default 100 3000)")
    ap.add_argument("--commits", type=int, default=50, help="commits timed at each point (default 50)")
    ap.add_argument("--grid", action="store_true", help="also time the 2,916-run paper grid (a few minutes)")
    args = ap.parse_args()
    commits(sorted(args.done), args.commits)
    if args.grid:
        grid()


if __name__ == "__main__":
    main()
