"""``dvfslab govern``: let a governor choose the GPU level, lock it, run a command, restore.

    dvfslab govern --policy {ffg,mlg-paper,mlg,curve} [--model FILE] [--max-slowdown PCT]
                   [--time-model FILE] [--layers N --hidden-size N --avg-seq-len TOKENS
                   --gpu-util PCT --model-type encoder|decoder --params-m M | --hf-config PATH]
                   [--backend auto|jetson|sim] [--dry-run] -- CMD ARGS...

The level is decided before the command starts (from the features given on the command line
or read from a Hugging Face ``config.json``; flags override the config), then the command runs
under :func:`dvfslab.cli.hardware.run_command` — the same lock / forward signals / restore
machinery as ``dvfslab run``: exit code of the command, clocks restored on success, failure,
SIGINT and SIGTERM (exit 128 + signal). The ``--policy`` choices are the registry's governors
that declare they can be used from a command line (:mod:`dvfslab.governors.registry`); the others
(``online``, ``profiled``: they need per-step energies from inside the training loop) are
refused with their declared reason (docs/governors.md).
"""

from __future__ import annotations

import argparse
import sys

from dvfslab.cli import hardware
from dvfslab.hw.base import BackendUnavailableError, DvfsError, format_mhz


def policy_help() -> tuple[str, str]:
    """``(metavar, help)`` of ``--policy``, from the registry: the usable governors with their
    one-line summaries, then the refused ones and why."""
    from dvfslab.governors.registry import command_line_names, registry

    usable = command_line_names()
    lines = [f"{n}: {registry()[n].summary}" for n in usable]
    refused = [n for n in registry() if n not in usable]
    lines.append(f"refused here: {', '.join(refused)} (each says why)")
    return "{" + ",".join(usable) + "}", "the governor — " + "; ".join(lines).replace("%", "%%")


def register(sub) -> None:
    metavar, policy_text = policy_help()
    p = sub.add_parser("govern", help="a governor picks the GPU level; lock it, run a command, restore",
                       description="Decide the GPU level with a governor from the workload's features, lock it, "
                                   "run the command, and restore the clocks (also on failure and signals).")
    p.add_argument("--policy", required=True, metavar=metavar, help=policy_text)
    p.add_argument("--model", metavar="FILE", help="saved governor: models/mlg.json, curve.json or ffg.json from "
                                                   "`dvfslab pipeline` (not needed for mlg-paper)")
    p.add_argument("--max-slowdown", type=float, metavar="PCT",
                   help="least energy among the levels predicted to be at most PCT %% slower than the baseline")
    p.add_argument("--time-model", metavar="FILE",
                   help="curve model predicting the slowdown, for --max-slowdown with mlg, mlg-paper or ffg")
    f = p.add_argument_group("workload features (flags override --hf-config)")
    f.add_argument("--hf-config", metavar="PATH", help="Hugging Face config.json (or its folder): layers, hidden "
                                                       "size, decoder/encoder, estimated parameters")
    f.add_argument("--layers", type=float, dest="n_layers", metavar="N", help="transformer layers")
    f.add_argument("--hidden-size", type=float, dest="hidden_size", metavar="N", help="hidden size")
    f.add_argument("--avg-seq-len", type=float, dest="avg_seq_len", metavar="TOKENS",
                   help="average tokenized sequence length of the training data")
    f.add_argument("--gpu-util", type=float, dest="gpu_util_pct", metavar="PCT",
                   help="GPU utilization of the job at the default clocks, %% (e.g. from jtop)")
    f.add_argument("--model-type", choices=("encoder", "decoder"), help="encoder-only or decoder-only")
    f.add_argument("--params-m", type=float, dest="params_m", metavar="M", help="parameters, millions")
    p.add_argument("--backend", choices=("auto", "jetson", "sim"), default="auto",
                   help="clock control: the Jetson's sysfs (auto) or the simulated board (nothing real changes)")
    p.add_argument("--dry-run", action="store_true", help="print the decision and exit")
    hardware._common(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run)


def workload_features(args) -> dict:
    """Features from --hf-config, overridden by the explicit flags."""
    from dvfslab.governors.io import features_from_hf_config

    feats: dict = features_from_hf_config(args.hf_config) if args.hf_config else {}
    for key in ("n_layers", "hidden_size", "avg_seq_len", "gpu_util_pct", "params_m"):
        if getattr(args, key) is not None:
            feats[key] = getattr(args, key)
    if args.model_type is not None:
        feats["is_decoder"] = 1.0 if args.model_type == "decoder" else 0.0
    feats.setdefault("workload_id", "command-line workload")
    return feats


def _clock_control(args):
    if args.backend == "sim":
        from dvfslab.hw import get_backend

        print("dvfslab govern: --backend sim: the level is locked on the SIMULATED board; this machine's GPU is "
              "not touched", file=sys.stderr)
        return get_backend("sim").clocks
    try:
        return hardware._clocks(args)
    except BackendUnavailableError as err:
        hint = " (or --backend sim to try it on the simulated board)" if args.backend == "auto" else ""
        raise DvfsError(f"no Jetson GPU clock control under {args.sysfs_root}: {err}{hint}") from None


def run(args) -> int:
    from dvfslab.governors.io import decide, load_policy

    gov = load_policy(args.policy, args.model, max_slowdown_pct=args.max_slowdown, time_model=args.time_model)
    level, why = decide(gov, workload_features(args))
    print(f"dvfslab govern: {why}", file=sys.stderr, flush=True)
    if args.dry_run:
        print("default" if level is None else format_mhz(level))
        return 0
    clocks = _clock_control(args)
    args.freq, args.nearest = level, True  # a governor's level may come from another board's table
    return hardware.run_command(args, clocks, prog="dvfslab govern")
