"""``dvfslab govern``: run any governor of the registry around a command.

    dvfslab govern --policy NAME|recommended [--model FILE|RUN/] [--max-slowdown PCT] [--eta ETA]
                   [--progress hf|lightning|steps | --progress-regex REGEX | --progress-file PATH |
                    --progress-url URL --progress-metric NAME [--progress-units-metric NAME]]
                   [--job-units N] [--log FILE.jsonl] [workload features]
                   [--backend auto|jetson|nvml|sim] [--emc MHZ|max] [--cpu MHZ|max] [--dry-run] -- CMD ARGS...
    dvfslab govern --policy NAME --backend replay:DATASET --workload W [--replay-units N] [--noise CV] [--seed S]
    dvfslab govern --replay FILE.jsonl

A governor that decides before the run (``maxn``, ``fixed``/``ffg``, ``mlg``, ``mlg-paper``,
``curve``) decides from the features given on the command line (or a Hugging Face
``config.json``); without a progress source the command then runs under
:func:`dvfslab.cli.hardware.run_command` as before. A measuring governor (``online``, ``profiled``,
``search``, ``zeus-sim`` and any later one) needs a progress source: the command's output,
a file or a Prometheus counter (:mod:`dvfslab.job.progress`); it probes the running command
through :class:`dvfslab.job.live.LiveProbe` (its own ``decide``, the replay's code path) and
holds its level. Any governor with a progress source is measured window by window and logged
(``--log``; :mod:`dvfslab.job.log`, the whole job's saving and slowdown). This module only parses
the arguments: the run is :class:`dvfslab.job.runner.GovernedRun` on a
:class:`dvfslab.job.board.JobBoard` (``--backend replay:DATASET``: the replay board of
:mod:`dvfslab.job.replay`, which makes the progress itself). The clocks are restored on exit,
failure, SIGINT and SIGTERM (exit 128 + signal); after SIGKILL the next run (or ``dvfslab clocks
--restore``) repairs them from the state file.
"""

from __future__ import annotations

import argparse
import sys

from dvfslab.cli import common, hardware
from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import BackendUnavailableError, format_mhz

RECOMMENDED = "recommended"


def policy_help() -> tuple[str, str]:
    """``(metavar, help)`` of ``--policy``, from the registry: every governor with its one-line
    summary, and ``recommended``."""
    from dvfslab.governors.registry import registry

    names = list(registry())
    lines = [f"{n}: {cls.summary}" + (" (measures the job: needs a progress source)" if cls.probing else "")
             for n, cls in registry().items()]
    lines.append(f"{RECOMMENDED}: the governor RUN/summary.json recommends (with --model RUN/)")
    return "{" + ",".join([*names, RECOMMENDED]) + "}", "the governor — " + "; ".join(lines).replace("%", "%%")


def register(sub) -> None:
    metavar, policy_text = policy_help()
    p = sub.add_parser("govern", help="run a command under any governor: it decides (or probes) the GPU level, restores",
                       description="Run a command under a governor of the registry: a static one decides the GPU "
                                   "level from the workload's features; a measuring one probes levels on the running "
                                   "command, reading its progress from what it prints, a file or a Prometheus "
                                   "counter, then holds the best. The clocks are restored on exit, failure and "
                                   "signals.")
    p.add_argument("--policy", metavar=metavar, help=policy_text)
    p.add_argument("--model", metavar="FILE|RUN/", help="a saved governor (models/mlg.json, curve.json, ffg.json, "
                                                        "profiled.json) or a `dvfslab pipeline` output folder: its "
                                                        "models/ (and summary.json for --policy recommended)")
    p.add_argument("--map-levels", choices=("nearest",), metavar="{nearest}",
                   help="run a model learned on another level table of the same knob, its levels mapped to this "
                        "board's nearest (default: such a model is refused, naming both boards)")
    p.add_argument("--max-slowdown", type=float, metavar="PCT",
                   help="least energy among the levels at most PCT %% slower than the baseline")
    p.add_argument("--eta", type=float, metavar="ETA",
                   help="Zeus's cost (eta x energy + (1 - eta) x max power x time) instead of least energy; "
                        "needs the objective's Zeus-cost selector")
    p.add_argument("--time-model", metavar="FILE",
                   help="curve model predicting the slowdown, for --max-slowdown with mlg, mlg-paper or ffg")
    g = p.add_argument_group("progress of the command (one source; needed by a measuring governor)")
    g.add_argument("--progress", choices=("hf", "lightning", "steps"),
                   help="read what the framework prints: hf = the Trainer's tqdm bar N/M (else its {'loss': ..., "
                        "'epoch': E} lines), lightning = 'Epoch K: ... N/M', steps = 'step N'")
    g.add_argument("--progress-regex", metavar="REGEX",
                   help="a regular expression on each output line: its first group is the units done so far; "
                        "without a group each matching line is one unit")
    g.add_argument("--progress-file", metavar="PATH",
                   help="a file holding a counter, or one line appended per unit")
    g.add_argument("--progress-url", metavar="URL", help="a Prometheus /metrics page (a server's request counter)")
    g.add_argument("--progress-metric", metavar="NAME",
                   help="the counter on --progress-url (e.g. nv_inference_count for Triton), summed over its labels")
    g.add_argument("--poll-s", type=float, default=0.2, metavar="S",
                   help="how often --progress-file / --progress-url are read (default 0.2)")
    g.add_argument("--stall-s", type=float, metavar="S",
                   help="a gap with no progress longer than S s is not a measurement (default: 10 x the time of a "
                        "unit measured at the start)")
    g.add_argument("--progress-units-metric", metavar="NAME",
                   help="a gauge on --progress-url holding the job's length (its units in all)")
    g.add_argument("--job-units", type=float, metavar="N",
                   help="the job's length in its units (optimizer steps ...), for the governor's planning "
                        "(default: what the progress source states — the hf bar's N/M, 'step k/N', a regex's group "
                        "'total', --progress-units-metric — else the governor's own assumption, said in one line)")
    g.add_argument("--baseline-windows", type=int, default=3, metavar="N",
                   help="windows at the default clock before the governor starts, the saving's reference (default 3)")
    g.add_argument("--log", metavar="FILE.jsonl", help="one JSON line per window and a summary line at the end")
    g.add_argument("--replay", metavar="FILE.jsonl", help="print the summary of a log again and exit")
    f = p.add_argument_group("workload features (flags override --hf-config)")
    f.add_argument("--hf-config", metavar="PATH", help="Hugging Face config.json (or its folder): layers, hidden "
                                                       "size, decoder/encoder, estimated parameters")
    f.add_argument("--layers", type=float, dest="n_layers", metavar="N", help="transformer layers")
    f.add_argument("--hidden-size", type=float, dest="hidden_size", metavar="N", help="hidden size")
    f.add_argument("--avg-seq-len", type=float, dest="avg_seq_len", metavar="TOKENS",
                   help="average tokenized sequence length of the training data")
    f.add_argument("--gpu-util", type=float, dest="gpu_util_pct", metavar="PCT",
                   help="GPU utilization of the job at the default clocks, %% (e.g. from jtop)")
    f.add_argument("--model-type", choices=GOVERN_MODEL_TYPES,
                   help="encoder-only or decoder-only transformer, or a cnn / rnn / other job (the transformer "
                        "features do not apply to those: they stay missing, never invented)")
    f.add_argument("--params-m", type=float, dest="params_m", metavar="M", help="parameters, millions")
    p.add_argument("--backend", type=_backend_name, default="auto", metavar="{auto,jetson,nvml,sim,replay:DATASET}",
                   help="clock control and power: the Jetson's sysfs (auto), NVML (a desktop or datacenter GPU), "
                        "the simulated board (nothing real changes; every figure simulated), or replay:DATASET — one "
                        "workload (--workload) of a dataset folder served on a virtual clock, which makes the job's "
                        "progress itself (no command needed)")
    r = p.add_argument_group("the replay board (--backend replay:DATASET)")
    r.add_argument("--workload", metavar="ID", help="the dataset's workload to replay")
    r.add_argument("--replay-units", type=float, default=1000.0, metavar="N",
                   help="units the replayed job runs (default 1000); its progress states them, as a bar's N/M "
                        "would (--job-units tells the governor another length)")
    r.add_argument("--noise", type=float, metavar="CV",
                   help="reading noise of one sensor sample, a fraction (default: the sensor's stated prior, "
                        "0.02 for a Jetson's INA3221, 0.05 for NVML; docs/governors.md)")
    r.add_argument("--sensor-interval", type=float, metavar="S",
                   help="the sensor's sampling interval (default: the dataset's meta.json sensor_interval_s, else 1 s)")
    r.add_argument("--seed", type=int, default=0, help="the reading noise's seed (default 0)")
    p.add_argument("--board", metavar="BOARD",
                   help="--backend sim: the simulated module (agx-orin-64gb, the default; orin-nx-16gb, orin-nx-8gb, "
                        "orin-nano-8gb, agx-xavier: uncalibrated)")
    p.add_argument("--knob", choices=("clock", "power-limit"), default="clock",
                   help="what a level is: the GPU clock (MHz, default) or, with --backend nvml, the GPU's power "
                        "limit (W, from its maximum down to its minimum in 25 W steps)")
    p.add_argument("--dry-run", action="store_true", help="print the decision (or that it is made while the job runs) "
                                                          "and exit")
    hardware.pin_arguments(p)
    common.board_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run)


#: the dataset contract's model types (dvfslab.data.contract.MODEL_TYPES; named here so that
#: `dvfslab govern` starts without pandas; tests/test_govern_wiring.py checks they agree)
GOVERN_MODEL_TYPES = ("encoder", "decoder", "cnn", "rnn", "other")


def _backend_name(text: str) -> str:
    if text in ("auto", "jetson", "nvml", "sim") or (text.startswith("replay:") and len(text) > len("replay:")):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: one of auto, jetson, nvml, sim, replay:DATASET (a dataset folder)")


def workload_features(args) -> dict:
    """Features from --hf-config, overridden by the explicit flags."""
    from dvfslab.governors.io import features_from_hf_config

    feats: dict = features_from_hf_config(args.hf_config) if args.hf_config else {}
    for key in ("n_layers", "hidden_size", "avg_seq_len", "gpu_util_pct", "params_m"):
        if getattr(args, key) is not None:
            feats[key] = getattr(args, key)
    if args.model_type in ("encoder", "decoder"):
        feats["is_decoder"] = 1.0 if args.model_type == "decoder" else 0.0
    if args.model_type is not None:
        feats["model_type"] = args.model_type
    feats.setdefault("workload_id", "command-line workload")
    return feats


def sim_options(args) -> dict:
    """``--board`` as the sim backend's option (refused with another backend)."""
    if getattr(args, "board", None) is None:
        return {}
    if args.backend != "sim":
        raise DvfsError(f"--board {args.board} chooses a simulated module: add --backend sim")
    return {"board": args.board}


def _clock_control(args):
    sim = sim_options(args)
    if args.backend == "sim":
        from dvfslab.hw import get_backend

        print("dvfslab govern: --backend sim: the level is locked on the SIMULATED board; this machine's GPU is "
              "not touched", file=sys.stderr)
        return get_backend("sim", **sim).clocks
    try:
        return common.open_clocks(args)
    except BackendUnavailableError as err:
        hint = " (or --backend sim to try it on the simulated board)" if args.backend == "auto" else ""
        raise DvfsError(f"no Jetson GPU clock control under {args.sysfs_root}: {err}{hint}") from None


def _progress_source(args):
    """``(feed, line parser or None, poller or None)`` for the one source given (None: none given)."""
    from dvfslab.job.progress import (
        FileProgress,
        LineProgress,
        Poller,
        ProgressFeed,
        PrometheusProgress,
    )

    given = [o for o, v in (("--progress", args.progress), ("--progress-regex", args.progress_regex),
                            ("--progress-file", args.progress_file), ("--progress-url", args.progress_url)) if v]
    if len(given) > 1:
        raise DvfsError(f"one progress source per run: got {' and '.join(given)}")
    if (args.progress_metric or args.progress_units_metric) and not args.progress_url:
        raise DvfsError("--progress-metric and --progress-units-metric go with --progress-url URL")
    if not given:
        return None
    feed = ProgressFeed()
    if args.progress or args.progress_regex:
        return feed, LineProgress(feed, regex=args.progress_regex, preset=args.progress), None
    if args.progress_file:
        return feed, None, Poller(feed, FileProgress(args.progress_file).read, args.poll_s, "file")
    source = PrometheusProgress(args.progress_url, args.progress_metric, units_metric=args.progress_units_metric)
    feed.unit = "request"
    return feed, None, Poller(feed, source.read, args.poll_s, "url", length=source.length)


def _say(text: str) -> None:
    print(f"dvfslab govern: {text}", file=sys.stderr, flush=True)


def run(args) -> int:
    if args.replay:
        from dvfslab.job.log import format_summary, read_summary

        print(format_summary(read_summary(args.replay)))
        return 0
    if not args.policy:
        raise DvfsError("--policy NAME is needed (or --replay FILE.jsonl); see dvfslab govern --help")
    from dvfslab.governors.registry import governor_class

    source = _progress_source(args)
    replay = args.backend.startswith("replay:")
    as_before = (not replay and source is None and args.knob == "clock" and args.policy != RECOMMENDED
                 and not governor_class(args.policy).probing and args.eta is None and not args.model)
    if as_before:
        return _run_static(args)
    feats = workload_features(args)
    governed = replay or source is not None
    # the board (or, without a progress source, its clocks) first: a learned governor is checked
    # against its level table; a dry run on a machine without one says so and checks nothing
    board = clocks = None
    try:
        if governed:
            board = _board(args, feats, _say)
        else:
            clocks = _clock_control(args)
    except DvfsError as err:
        if not args.dry_run:
            raise
        _say(f"no board to check the model's level table against ({err})")
    try:
        return _govern_on(args, source, feats, governed, board, clocks)
    finally:
        if board is not None:  # the runner closes it too; a refusal or a dry run must not leave its sampler running
            board.close()


def _govern_on(args, source, feats: dict, governed: bool, board, clocks) -> int:
    """The governor for the board (checked against it), then the dry run, the static run or the
    governed run."""
    from dvfslab.job.policy import feature_needs, job_governor

    levels = board.levels if board is not None else clocks.levels_mhz() if clocks is not None else None
    name = board.name if board is not None else _clocks_name(args)
    gov = job_governor(args.policy, args.model, max_slowdown_pct=args.max_slowdown, eta=args.eta,
                       time_model=args.time_model, knob="power_limit_w" if args.knob == "power-limit" else None,
                       levels=levels, board_name=name, map_levels=args.map_levels)
    if getattr(gov, "knob_", None) == "setting":  # a joint model: GPU x EMC x CPU settings, checked on this board
        board, levels = _joint(args, gov, board, clocks)
    if not governed and gov.probing and not args.dry_run:
        raise DvfsError(f"--policy {gov.name} measures the job while it runs: give it a progress source "
                        "(--progress hf|lightning|steps, --progress-regex REGEX, --progress-file PATH or "
                        "--progress-url URL --progress-metric NAME)")
    need = feature_needs(gov, feats)  # refused before a word is said: one line
    if need is not None and not args.dry_run and (need.missing or not governed or board.gpu_load is None):
        raise DvfsError(str(need) + ("" if need.missing else
                                     f"; {board.name} reports no GPU load: pass --gpu-util PCT" if governed else
                                     _NOTHING_MEASURED))
    _say(f"the governor: {gov.source_}")
    if args.dry_run:
        return _dry_run(gov, feats, levels)
    if not governed:
        return _run_static(args, gov, clocks, levels if getattr(gov, "knob_", None) == "setting" else None)
    if need is not None:
        _say(str(need))
    return _run_governed(args, gov, source, board, feats)


_NOTHING_MEASURED = ("; without a progress source nothing is measured: pass --gpu-util PCT, or a progress source "
                     "(--progress ...) to measure it in the calibration windows")


def _clocks_name(args) -> str:
    return "the SIMULATED board" if args.backend == "sim" else "nvml" if args.backend == "nvml" else "jetson"


def _dry_run(gov, feats: dict, levels) -> int:
    """What the governor would do, without touching the board: a governor that decides from the
    features prints its level (``default``: the board's own governor) on stdout, the why on
    stderr; a probing one says it picks the level while the job runs."""
    from dvfslab.job.policy import feature_needs

    if gov.probing:
        _say(f"{gov.name} probes the job and picks the level while the job runs (it needs a progress source): no "
             "level before the job")
        return 0
    need = feature_needs(gov, feats)
    if need is not None:
        if need.missing:
            raise DvfsError(str(need))
        _say(f"{need}: the level is decided after the calibration windows, while the job runs")
        return 0
    level, why = _decide(gov, feats, levels)
    _say(why)
    print("default" if level is None else _words(gov, level))
    return 0


def _joint(args, gov, board, clocks):
    """A joint model (:mod:`dvfslab.job.joint`): its settings checked on this board before the job
    starts; ``(board with the settings as levels, the setting indices)``."""
    from dvfslab.job.joint import SHORT, check_joint, joint_board, joint_settings

    knobs, settings = joint_settings(gov)
    for name in ("emc", "cpu"):
        if name in {SHORT[k] for k in knobs} and getattr(args, name, None) not in (None, "none"):
            raise DvfsError(f"--{name}: the joint model sets the {name} clock itself (each of its settings); drop --{name}")
    if board is not None:
        board = joint_board(board, gov)
    elif clocks is not None:
        check_joint(clocks, knobs, settings, _clocks_name(args))
    return board, [float(i) for i in range(len(settings))]


def _words(gov, level) -> str:
    """A level as printed: MHz (W), or a joint model's setting in words."""
    if getattr(gov, "knob_", None) != "setting":
        return format_mhz(level)
    from dvfslab.data.knobs import format_setting
    from dvfslab.job.joint import joint_settings

    knobs, settings = joint_settings(gov)
    return f"setting {int(level)}: {format_setting(knobs, settings[int(level)])}"


def _decide(gov, feats: dict, levels):
    """``decide`` (the level snapped to ``levels``), the why naming a joint setting's clocks."""
    from dvfslab.governors.io import decide

    level, why = decide(gov, feats, levels)
    if level is not None and getattr(gov, "knob_", None) == "setting":
        why = f"{gov.name}: {_words(gov, level)}"
    return level, why


def _run_static(args, gov=None, clocks=None, levels=None) -> int:
    """A governor that decides before the run, no progress source: lock, run, restore (as before)."""
    from dvfslab.governors.io import load_policy
    from dvfslab.job.policy import feature_needs

    if gov is None:
        gov = load_policy(args.policy, args.model, max_slowdown_pct=args.max_slowdown, time_model=args.time_model)
    feats = workload_features(args)
    need = feature_needs(gov, feats)
    if need is not None:
        raise DvfsError(str(need) + ("" if need.missing else _NOTHING_MEASURED))
    level, why = _decide(gov, feats, levels if levels is not None else clocks.levels_mhz() if clocks is not None
                         else None)
    print(f"dvfslab govern: {why}", file=sys.stderr, flush=True)
    if args.dry_run:
        print("default" if level is None else _words(gov, level))
        return 0
    clocks = clocks if clocks is not None else _clock_control(args)
    args.freq, args.nearest = level, True  # a governor's level may come from another board's table
    if level is not None and getattr(gov, "knob_", None) == "setting":  # the setting's clocks, pinned as --emc/--cpu
        from dvfslab.job.joint import setting_pins

        pins = setting_pins(gov, level)
        args.freq = pins.get("gpu")
        args.emc, args.cpu = pins.get("emc", args.emc), pins.get("cpu", args.cpu)
    return hardware.run_command(args, clocks, prog="dvfslab govern")


def _board(args, feats: dict, say):
    """The :class:`~dvfslab.job.board.JobBoard` of ``--backend``."""
    from dvfslab.job import board as B

    sim_options(args)  # --board with another backend: refused in one line
    if args.backend.startswith("replay:"):
        return _replay_board(args, say)
    if args.backend == "sim":
        say("--backend sim: each unit the command reports is one step of the SIMULATED board at the locked level; "
            "this machine's GPU is not touched and every figure is simulated")
        return B.sim_board(feats, **sim_options(args))
    if args.knob == "power-limit" and args.backend != "nvml":
        raise DvfsError("--knob power-limit sets a discrete GPU's power limit through NVML: add --backend nvml")
    if args.backend == "nvml":
        return B.nvml_board(args.knob, args.state_dir, say=say)
    return B.jetson_board(common.sysfs_io(args), args.state_dir, root=args.sysfs_root, auto=args.backend == "auto")


def _replay_board(args, say):
    from dvfslab.job.replay import (
        DEFAULT_INTERVAL_S,
        SENSOR_NOISE_PRIOR,
        ReplayBoard,
        cell_from_dataset,
    )

    path = args.backend.split(":", 1)[1]
    if not args.workload:
        raise DvfsError(f"--backend {args.backend} replays one workload of the dataset: add --workload ID")
    cell = cell_from_dataset(path, args.workload)
    where = cell.meta.get("sweep") if isinstance(cell.meta.get("sweep"), dict) else {}
    interval = args.sensor_interval or cell.meta.get("sensor_interval_s") or where.get("sensor_interval_s") \
        or DEFAULT_INTERVAL_S
    sensor = "nvml" if "nvml" in str(cell.meta.get("device", "")).lower() or cell.meta.get("power_limit_table_w") \
        else "ina3221"
    sigma = args.noise if args.noise is not None else SENSOR_NOISE_PRIOR[sensor]
    units = args.replay_units
    say(f"--backend {args.backend}: {args.workload} replayed on a virtual clock ({'SIMULATED' if cell.simulated else 'measured'} "
        f"figures), {units:g} {cell.unit}s, sensor {interval:g} s a sample, reading noise {100 * sigma:.3g} % a sample "
        + ("(given)" if args.noise is not None else f"(the {sensor} prior, an assumption)"))
    return ReplayBoard(cell, units, sigma_sample=sigma, interval_s=float(interval), seed=args.seed).job_board()


def _run_governed(args, gov, source, board, feats) -> int:
    from dvfslab.job.log import format_summary
    from dvfslab.job.runner import GovernedRun

    replay = args.backend.startswith("replay:")
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    if not cmd and not replay:
        raise DvfsError("no command given; usage: dvfslab govern ... -- CMD ARGS...")
    feed, parser, poller = source if source is not None else (None, None, None)
    say = _say
    # the replay board's progress states its length (as a bar's N/M would); --job-units overrides it
    job_units = args.job_units if args.job_units or not replay else board.feed.board.job_units
    run = GovernedRun(gov, board, workload=feats, feed=None if replay else feed, log=args.log,
                      job_units=job_units, baseline_windows=args.baseline_windows, stall_s=args.stall_s, say=say)
    try:
        if replay:
            if cmd:
                say(f"the replay board makes the job's progress itself: {' '.join(cmd)} is not run")
            try:
                run.run()
                rc = 0
            finally:
                run.finish(None)
        else:
            clocks = board.extra.get("clocks")

            def before() -> None:
                others = hardware.pin_others(clocks, {"emc": args.emc, "cpu": args.cpu}) if clocks is not None else []
                say(f"{gov.name} on {board.name}; " + "".join(f"{line}; " for line in others)
                    + f"running: {' '.join(cmd)}")

            rc = run.run_command(cmd, parser, poller, before=before)
    finally:
        if run.result is not None:
            print(format_summary(run.result), file=sys.stderr, flush=True)
            if board.restored is not None:
                say(board.restored())
    return rc
