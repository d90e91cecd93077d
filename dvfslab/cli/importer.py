"""``dvfslab import zeus-nsdi SRC_DIR --gpu GPU --out DIR`` and ``dvfslab import loudva SRC --board
BOARD --out DIR``: other people's measurements as a dataset."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

FORCE_HELP = ("replace an earlier output of the same import in --out (never another dataset, a sweep or a folder "
              "written otherwise: those are always refused). The new dataset is written beside it and swapped in "
              "when complete")


def register(sub) -> None:
    p = sub.add_parser("import", help="convert published measurements into a dataset directory",
                       description="Convert measurements published by others into a dataset of the dvfslab "
                                   "contract, ready for `dvfslab validate` and `dvfslab pipeline --data`.")
    kinds = p.add_subparsers(dest="source_kind", metavar="SOURCE", required=True)
    z = kinds.add_parser("zeus-nsdi", help="Zeus NSDI'23 power traces (energy vs GPU power limit)",
                         description="One dataset per GPU from summary_power_<gpu>.csv of the Zeus NSDI'23 "
                                     "artifact (Apache-2.0): one fixed-policy run per (network, dataset, optimizer, "
                                     "batch size, power limit); energy per epoch = time_per_epoch x average_power; "
                                     "knob power_limit_w; baseline the highest limit.")
    z.add_argument("src", metavar="SRC_DIR",
                   help="folder holding summary_power_<gpu>.csv (or its trace/ subfolder, or a Zeus checkout)")
    z.add_argument("--gpu", required=True, choices=["v100", "a40", "p100", "rtx6000"], help="which GPU's trace")
    z.add_argument("--out", metavar="DIR", required=True, help="dataset directory to write (a new one: see --force)")
    z.add_argument("--force", action="store_true", help=FORCE_HELP)
    z.add_argument("--eval-every", type=int, default=2, metavar="N",
                   help="every N-th batch size of a (network, dataset, optimizer) goes to the evaluation split "
                        "(default 2; 0: all characterization)")
    z.add_argument("--keep-incomplete", action="store_true",
                   help="keep configurations not measured at every power limit (left out by default: they "
                        "would confine the fixed-level governor to the limits they have)")
    z.set_defaults(func=run_zeus)
    lv = kinds.add_parser("loudva", help="LoudVA: Inception inference on three real Jetsons vs GPU clock",
                          description="One dataset per board from the LoudVA measurements (MIT): Inception v3 "
                                      "served by Triton, one fixed-clock run per (GPU clock, request concurrency); "
                                      "energy per inference = mean module power / throughput; knob gpu_freq_mhz; "
                                      "a workload is a concurrency (docs/method.md).")
    lv.add_argument("src", metavar="SRC",
                    help="a LoudVA checkout, its measurements/archive/Representative folder, or data/external/loudva")
    lv.add_argument("--board", required=True, choices=["agx-xavier", "xavier-nx", "nano"], help="which board")
    lv.add_argument("--out", metavar="DIR", required=True, help="dataset directory to write (a new one: see --force)")
    lv.add_argument("--force", action="store_true", help=FORCE_HELP)
    lv.add_argument("--job-inferences", type=float, default=108_000, metavar="N",
                    help="the whole job, in inferences (workloads.csv job_steps; default 108000: one hour of "
                         "30 frame/s video)")
    lv.add_argument("--eval-every", type=int, default=2, metavar="N",
                    help="every N-th concurrency goes to the evaluation split (default 2; 0: all characterization)")
    lv.add_argument("--keep-incomplete", action="store_true",
                    help="keep concurrencies not measured at every clock (left out by default)")
    lv.set_defaults(func=run_loudva)


def run_zeus(args) -> int:
    from dvfslab.core.files import new_folder
    from dvfslab.data.zeus import import_zeus

    # imported into a temporary sibling of --out, renamed into place when complete
    with new_folder(args.out, "dvfslab import zeus-nsdi", force=args.force, reads={"SRC": args.src}) as tmp:
        ds = import_zeus(args.src, args.gpu, tmp, eval_every=args.eval_every, keep_incomplete=args.keep_incomplete)
    ds = replace(ds, path=Path(args.out))
    print(f"{ds.summary_line()}; knob {ds.knob.name}, levels {', '.join(ds.knob.format(v) for v in ds.levels)} "
          f"-> {ds.path}")
    if ds.meta["incomplete_left_out"]:
        print(f"left out (not measured at every limit): {', '.join(ds.meta['incomplete_left_out'])}")
    return 0


def run_loudva(args) -> int:
    from dvfslab.core.files import new_folder
    from dvfslab.data.loudva import import_loudva

    with new_folder(args.out, "dvfslab import loudva", force=args.force, reads={"SRC": args.src}) as tmp:
        ds = import_loudva(args.src, args.board, tmp, eval_every=args.eval_every,
                           keep_incomplete=args.keep_incomplete, job_inferences=args.job_inferences)
    ds = replace(ds, path=Path(args.out))
    print(f"{ds.summary_line()}; {len(ds.levels)} GPU clocks {ds.levels[0]:g}-{ds.levels[-1]:g} MHz, "
          f"baseline {ds.baseline} -> {ds.path}")
    if ds.meta["incomplete_left_out"]:
        print(f"left out (not measured at every clock): {', '.join(ds.meta['incomplete_left_out'])}")
    return 0
