"""``dvfslab simulate``: a dataset from the digital twin, one workload in any power mode, or bands.

* ``--out DIR [--seed N] [--board B] [--quick]``: a (simulated) dataset;
* ``--explain model/task``: where a step's energy goes, level by level;
* ``--workload SPEC.json|model/task --power-mode MODE [--json] [--joint]`` (or ``--print-spec``): one workload
  in one nvpmodel mode, every allowed level and the default governor; for a catalog workload
  ``--batch-size N --seq-len N --precision fp32|fp16|bf16`` override the catalog's; ``--joint``
  (or ``--emc-levels`` / ``--cpu-levels``) adds the GPU × EMC × CPU grid;
* ``--ensemble N [--quick] --out DIR``: the findings as p5/p50/p95 bands over N parameter sets
  consistent with the readings (``DIR/ensemble.json``).
"""

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
    p.add_argument("--workload", metavar="SPEC", default=None,
                   help="one workload instead of a grid: a JSON spec file (name, flops_per_step, dram_bytes_per_step, "
                        "cpu_ops_per_step, params_m, batch_size) or a catalog workload model/task; prints time, CPU / "
                        "GPU / board power and energy of one step at every GPU level the power mode allows and for its "
                        "default governor")
    p.add_argument("--power-mode", default="MAXN", metavar="MODE",
                   help="with --workload: an nvpmodel mode of the board by name or id (AGX Orin: MAXN/0, 15W/1, "
                        "30W/2, 50W/3; default MAXN)")
    p.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="with --workload model/task: the batch size (default: the catalog's, 32)")
    p.add_argument("--seq-len", type=int, default=None, metavar="N",
                   help="with --workload model/task: the maximum (truncation) length in tokens; batches are padded "
                        "to their longest example up to it (default: the catalog's, 128)")
    p.add_argument("--precision", default=None, choices=("fp32", "fp16", "bf16"),
                   help="with --workload model/task: the GEMMs' precision (fp16/bf16: mixed precision on the tensor "
                        "cores, docs/calibration.md; default fp32)")
    p.add_argument("--json", action="store_true", help="with --workload: print JSON instead of a table")
    p.add_argument("--joint", action="store_true",
                   help="with --workload: also the grid over the GPU, EMC and CPU clocks (the board's EMC levels and "
                        "the nvpmodel modes' CPU clocks under the mode's caps) and its lowest-energy settings")
    p.add_argument("--emc-levels", default=None, metavar="LIST",
                   help="with --workload: the EMC clocks (MHz, comma-separated) of the joint grid (implies --joint)")
    p.add_argument("--cpu-levels", default=None, metavar="LIST",
                   help="with --workload: the CPU clocks (MHz, comma-separated) of the joint grid (implies --joint)")
    p.add_argument("--print-spec", action="store_true",
                   help="with --workload model/task: print that catalog workload's spec as JSON (to edit) and exit")
    p.add_argument("--ensemble", type=int, default=None, metavar="N",
                   help="run the grid on N parameter sets drawn consistent with the readings and the stated ranges "
                        "(docs/calibration.md) and write DIR/ensemble.json with p5/p50/p95 of the findings "
                        "(needs --out; use --quick for the small grid)")
    p.add_argument("--window-phases", default=None, metavar="LIST",
                   help="non-training phases inside each run's measured window: comma-separated from "
                        "'evaluation,checkpoint' (the default), or 'none'")
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0, the bundled data's seed)")
    p.add_argument("--board", default="agx-orin-64gb", choices=sorted(PROFILES),
                   help="the simulated module (default agx-orin-64gb, calibrated; orin-nx-16gb, orin-nx-8gb, orin-nano-8gb: "
                        "the AGX Orin's physics scaled to their records, uncalibrated; agx-xavier: an uncalibrated "
                        "14-level profile)")
    p.add_argument("--quick", action="store_true",
                   help="a small grid (4 models x 4 tasks, 2 reps, 40 steps) for tests and demos")
    p.add_argument("--models", default=None, metavar="LIST",
                   help="'paper' (default: the paper's 9 models), 'all' (the whole catalog) or comma-separated names")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 200; 40 with --quick)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per level (default 3; 2 with --quick)")
    p.add_argument("--work", default=None, metavar="DIR",
                   help="keep the sweep directory (plan.json, runs/<run_id>.json with the twin's exact values) "
                        "in DIR; running again with the same DIR resumes it (default: a temporary directory)")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier output of dvfslab simulate in --out (never another dataset, a sweep or a "
                        "folder written otherwise: those are always refused). The new folder is written beside it "
                        "and swapped in when complete")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from dvfslab.core.errors import DvfsError
    from dvfslab.sweep.simulate import simulate_dataset, simulation_plan

    phases = None
    if args.window_phases is not None:
        phases = () if args.window_phases in ("", "none") else tuple(args.window_phases.split(","))
    if args.explain:
        from dvfslab.sim.explain import explain_text
        from dvfslab.sim.phases import DEFAULT_WINDOW_PHASES

        print(explain_text(args.explain, board=args.board, seed=args.seed,
                           window_phases=DEFAULT_WINDOW_PHASES if phases is None else phases))
        return 0
    if args.workload:
        return _workload(args)
    if args.print_spec or args.json or args.joint or args.emc_levels or args.cpu_levels:
        raise DvfsError("simulate: --print-spec, --json, --joint, --emc-levels and --cpu-levels go with "
                        "--workload SPEC.json|model/task")
    if not args.out:
        raise DvfsError("simulate: --out DIR is required (or --explain WORKLOAD, or --workload SPEC)")
    plan = simulation_plan(board=args.board, seed=args.seed, quick=args.quick, models=args.models,
                     steps=args.steps, reps=args.reps, window_phases=phases)
    if args.ensemble is not None:
        import time

        from dvfslab.pipeline.ensemble import run_ensemble

        t0 = time.perf_counter()
        doc = run_ensemble(args.ensemble, plan, args.out, progress=not args.no_progress, force=args.force)
        print(f"wrote {args.out}/ensemble.json: {doc['n_members']} parameter sets on the "
              f"{'quick' if plan.quick else 'chosen'} grid ({len(plan.workloads())} workloads; SIMULATED) "
              f"in {time.perf_counter() - t0:.0f} s")
        return 0
    ds = simulate_dataset(args.out, plan, progress=not args.no_progress, work_dir=args.work, force=args.force)
    print(f"wrote {args.out}: {len(ds.workloads)} workloads, {len(ds.runs)} runs, "
          f"{0 if ds.steps is None else len(ds.steps)} step rows "
          f"(SIMULATED on {ds.meta['device']['board']}, seed {args.seed})")
    return 0


def _mhz_list(text: str | None, flag: str) -> list[float] | None:
    """``"2133,3199"`` -> ``[2133.0, 3199.0]`` (None stays None); one line naming ``flag`` otherwise."""
    from dvfslab.core.errors import DvfsError

    if text is None:
        return None
    try:
        out = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        out = []
    if not out:
        raise DvfsError(f"simulate: {flag} takes clocks in MHz separated by commas (e.g. {flag} 2133,3199), "
                        f"got {text!r}")
    return out


def _workload(args) -> int:
    import json
    import os

    from dvfslab.sim.model import get_profile
    from dvfslab.sim.spec import catalog_spec, evaluate, evaluation_text, load_spec

    profile = get_profile(args.board)
    from dvfslab.core.errors import DvfsError

    is_file = args.workload.endswith(".json") or os.path.exists(args.workload)
    shape = {"batch_size": args.batch_size, "seq_len": args.seq_len, "precision": args.precision}
    if is_file and any(v is not None for v in shape.values()):
        raise DvfsError("simulate: --batch-size, --seq-len and --precision go with a catalog workload model/task; "
                        "a spec file carries its own (edit its fields)")
    spec = load_spec(args.workload) if is_file else catalog_spec(
        args.workload, profile, seed=args.seed, batch_size=args.batch_size, seq_len=args.seq_len,
        precision=args.precision or "fp32")
    if args.print_spec:
        from dataclasses import asdict

        print(json.dumps(asdict(spec), indent=1))
        return 0
    result = evaluate(spec, args.power_mode, profile, joint=args.joint,
                      emc_levels=_mhz_list(args.emc_levels, "--emc-levels"),
                      cpu_levels=_mhz_list(args.cpu_levels, "--cpu-levels"))
    print(json.dumps(result, indent=1) if args.json else evaluation_text(result))
    return 0
