"""``dvfslab sensors``: the power monitors.

* ``sensors import-tegrastats LOG --out FILE [--interval-ms N] [--total-rails A,B] [--strict]``:
  turn a tegrastats log into a power trace (``FILE`` + ``FILE.meta.json``) that
  ``dvfslab.measure.ReplayPowerReader`` / ``load_samples`` read like a saved sampler trace;
  prints the rails, the span, the achieved sample period and the CPU+GPU energy over the span.
  Bad lines are skipped with a warning naming each (up to 5) and counted; ``--strict`` refuses
  the log at the first one instead.
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("sensors", help="power monitors: import a tegrastats log as a power trace")
    inner = p.add_subparsers(dest="sensors_command", metavar="SUBCOMMAND")
    q = inner.add_parser("import-tegrastats", help="a tegrastats log -> a replayable power trace")
    q.add_argument("log", metavar="LOG", help="tegrastats output (tegrastats --logfile LOG)")
    q.add_argument("--out", required=True, metavar="FILE", help="trace to write (.csv or .parquet)")
    q.add_argument("--interval-ms", type=float, default=None, metavar="N",
                   help="the --interval tegrastats ran with; needed when lines carry no timestamp "
                        "(JetPack 4) or when it was under 1000 ms")
    q.add_argument("--total-rails", default=None, metavar="A,B",
                   help="rails that make CPU+GPU (default: by the rail names, as dvfslab devices)")
    q.add_argument("--strict", action="store_true",
                   help="refuse the log at its first bad line (default: skip bad lines with a warning "
                        "naming them)")
    q.set_defaults(func=run_import)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(parser) -> int:
    parser.print_help()
    return 2


def run_import(args) -> int:
    from dvfslab.measure.energy import integrate_energy
    from dvfslab.measure.tegrastats import import_tegrastats

    total = [r.strip() for r in args.total_rails.split(",")] if args.total_rails else None
    interval = args.interval_ms / 1000.0 if args.interval_ms is not None else None
    path, frame, meta = import_tegrastats(args.log, args.out, interval_s=interval, total_rails=total,
                                          strict=args.strict)  # a bad line: one warning line (dvfslab.cli)
    t = frame["t_s"].to_numpy()
    energy_j = integrate_energy(t, frame["total_mw"].to_numpy() / 1000.0)
    print(f"{path}: {meta['n_samples']} samples over {t[-1] - t[0]:g} s "
          f"(period {meta['update_interval_s']:g} s), {meta['n_skipped']} lines skipped")
    print(f"rails: {', '.join(meta['rails'])}; CPU+GPU = {' + '.join(meta['total_rails'])} "
          f"({meta['rail_family']}); energy over the span {energy_j:.3f} J")
    return 0
