"""``dvfslab simulate --out DIR [--seed N] [--board B] [--quick]``: a dataset from the digital twin."""

from __future__ import annotations


def register(sub) -> None:
    from dvfslab.sim.model import PROFILES

    p = sub.add_parser(
        "simulate",
        help="generate a (simulated, not measured) dataset with the digital twin of the board",
        description="Run the paper's grid (models x GLUE tasks x GPU levels x repetitions, plus MAXN runs) "
                    "as a sweep on the simulated board (the same sweep code as on a Jetson, power read by "
                    "the same sampler on the twin's virtual clock) and write a dataset directory. The data "
                    "is SIMULATED and says so in meta.json. Same seed, same bytes.")
    p.add_argument("--out", metavar="DIR", help="dataset directory to write (required unless --explain)")
    p.add_argument("--explain", metavar="WORKLOAD", default=None,
                   help="print the energy decomposition of one step of WORKLOAD (model/task, e.g. bert-base/rte) "
                        "at a few levels (GPU dynamic, GPU leakage, CPU, SoC/memory, board) and exit")
    p.add_argument("--window-phases", default=None, metavar="LIST",
                   help="non-training phases inside each run's measured window: comma-separated from "
                        "'evaluation,checkpoint' (the default), or 'none'")
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0, the bundled data's seed)")
    p.add_argument("--board", default="agx-orin-64gb", choices=sorted(PROFILES),
                   help="simulated board profile (default agx-orin-64gb; agx-xavier is an uncalibrated 14-level profile)")
    p.add_argument("--quick", action="store_true",
                   help="a small grid (4 models x 4 tasks, 2 reps, 40 steps) for tests and demos")
    p.add_argument("--models", default=None, metavar="LIST",
                   help="'paper' (default: the paper's 9 models), 'all' (the whole catalog) or comma-separated names")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 200; 40 with --quick)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per level (default 3; 2 with --quick)")
    p.add_argument("--work", default=None, metavar="DIR",
                   help="keep the sweep directory (plan.json, runs/<run_id>.json with the twin's exact values) "
                        "in DIR; running again with the same DIR resumes it (default: a temporary directory)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from dvfslab.hw.base import DvfsError
    from dvfslab.sweep.simulate import make_plan, simulate_dataset

    phases = None
    if args.window_phases is not None:
        phases = () if args.window_phases in ("", "none") else tuple(args.window_phases.split(","))
    if args.explain:
        from dvfslab.sim.explain import explain_text
        from dvfslab.sim.phases import DEFAULT_WINDOW_PHASES

        print(explain_text(args.explain, board=args.board, seed=args.seed,
                           window_phases=DEFAULT_WINDOW_PHASES if phases is None else phases))
        return 0
    if not args.out:
        raise DvfsError("simulate: --out DIR is required (or --explain WORKLOAD)")
    plan = make_plan(board=args.board, seed=args.seed, quick=args.quick, models=args.models,
                     steps=args.steps, reps=args.reps, window_phases=phases)
    ds = simulate_dataset(args.out, plan, progress=not args.no_progress, work_dir=args.work)
    print(f"wrote {args.out}: {len(ds.workloads)} workloads, {len(ds.runs)} runs, "
          f"{0 if ds.steps is None else len(ds.steps)} step rows "
          f"(SIMULATED on {ds.meta['device']['board']}, seed {args.seed})")
    return 0
