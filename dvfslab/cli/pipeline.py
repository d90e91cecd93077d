"""``dvfslab pipeline``: run notebooks 01–05 on a dataset with papermill."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("pipeline", help="run the notebook series (characterization -> governors) on a dataset",
                       description="Execute notebooks 01-05 with papermill on a dataset directory and write the "
                                   "executed notebooks, their HTML, figures/*.png, tables/*.csv, models/*.json "
                                   "and summary.json. Progress: one bar per notebook on a terminal, one line "
                                   "per notebook otherwise (standard error).")
    p.add_argument("--data", metavar="DIR", default=None,
                   help="dataset directory (default: the bundled data/replay)")
    p.add_argument("--out", metavar="DIR", default=None, help="output folder (default: runs/<timestamp>/)")
    p.add_argument("--quick", action="store_true", help="smaller model-selection grid (CI, a first look)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the learned models (default 0)")
    p.add_argument("--eta", type=float, default=None, metavar="ETA",
                   help="the run's objective is Zeus's cost ETA x energy + (1 - ETA) x MAXPOWER x time (0 <= ETA <= 1; "
                        "1: least energy, 0: least time); default: least energy, as the paper. Every governor, zeus "
                        "included, optimises the run's objective")
    p.add_argument("--max-slowdown", type=float, default=None, metavar="PCT",
                   help="add a slowdown limit to the run's objective: at most PCT %% slower than the baseline")
    p.add_argument("--no-html", dest="html", action="store_false", help="skip the HTML rendering")
    p.add_argument("--force", action="store_true",
                   help="replace what --out holds; without it an --out holding anything is refused (the new "
                        "output is written beside it and swapped in when the run is complete)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dvfslab.governors.objective import objective_from
    from dvfslab.governors.registry import names
    from dvfslab.pipeline.runner import output_line, run_pipeline
    from dvfslab.pipeline.summary import governor_lines, read_summary

    objective = objective_from(args.eta, args.max_slowdown)
    out = run_pipeline(args.data, args.out, quick=args.quick, seed=args.seed, html=args.html, objective=objective,
                       force=args.force, rerun=_rerun(args))
    summary = read_summary(out)
    for line in governor_lines(summary, names()):  # registry order
        print(line)
    print(output_line(out, summary.get("source") == "simulated", args.html))
    return 0


def _rerun(args) -> str:
    """The command that runs this pipeline again (``--force``: the output folder may exist by then)."""
    import shlex

    words = ["dvfslab", "pipeline"]
    if args.data:
        words += ["--data", str(args.data)]
    if args.out:
        words += ["--out", str(args.out)]
    words += ["--quick"] * args.quick + (["--seed", str(args.seed)] if args.seed else []) + ["--no-html"] * (not args.html)
    return shlex.join(words + ["--force"] * args.force)
