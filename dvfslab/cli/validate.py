"""``dvfslab validate DIR``: check a dataset directory against the contract."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a dataset directory (exit 0 valid, 2 invalid)")
    p.add_argument("path", metavar="DIR", help="dataset directory (meta.json, workloads.csv, runs.csv)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Exit 0 for a valid dataset (its warnings printed to stderr: other clocks that wandered),
    2 for an invalid one."""
    import sys

    from dvfslab.data.contract import clock_warnings, load_dataset

    ds = load_dataset(args.path)
    print(ds.summary_line())
    for line in clock_warnings(ds):
        print(f"warning: {line}", file=sys.stderr)
    return 0
