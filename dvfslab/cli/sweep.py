"""``dvfslab sweep``: a resumable, crash-safe characterization sweep (see docs/sweep.md)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from dvfslab.core.errors import DvfsError


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a characterization sweep (workloads x GPU levels x repetitions + MAXN)",
        description="Run every workload at every GPU level (plus MAXN baseline runs), several "
                    "times, into a dataset directory. Each finished run is committed atomically; "
                    "--resume continues after a crash without losing or repeating a run.")
    p.add_argument("--backend", choices=("jetson", "nvml", "sim"), required=True,
                   help="jetson (sysfs), nvml (discrete GPU) or sim (the simulated board, --board)")
    p.add_argument("--board", metavar="BOARD",
                   help="--backend sim: the simulated module (agx-orin-64gb, the default; orin-nx-16gb, orin-nx-8gb, "
                        "orin-nano-8gb, agx-xavier: uncalibrated)")
    p.add_argument("--out", required=True, metavar="DIR", help="sweep / dataset directory")
    p.add_argument("--workloads", nargs="+", metavar="ID",
                   help="catalog ids like bert-base/sst2 (comma or space separated), or all, "
                        "characterization, evaluation; optional with --resume")
    p.add_argument("--freqs", nargs="+", metavar="MHZ",
                   help="GPU levels in MHz, or 'all' (default: every level of the board)")
    # plan options default to None: with --resume, one given explicitly is checked against the stored plan
    p.add_argument("--reps", type=int, help="repetitions of every (workload, level) (default 1)")
    p.add_argument("--no-maxn", action="store_true", help="leave out the MAXN baseline runs")
    p.add_argument("--order", choices=("sequential", "shuffled", "interleaved"),
                   help="run order (default interleaved: a Williams design per repetition)")
    p.add_argument("--seed", type=int, help="seed of the shuffled order and of the simulated board's noise "
                                            "(default 0; with --resume, the sweep's own)")
    p.add_argument("--emc", metavar="MHZ|max|none",
                   help="the memory clock (EMC) during the fixed runs: a rate in MHz, 'max' (the power mode's "
                        "highest, the default) or 'none' (left to the board); MAXN runs always leave it alone. "
                        "Jetson only: skipped on other backends unless a rate is given")
    p.add_argument("--cpu", metavar="MHZ|max|none",
                   help="the CPU clusters' clock during the fixed runs, as --emc (default max)")
    j = p.add_argument_group("joint sweeps: several clocks set per run (docs/sweep.md, 'Joint sweeps')")
    j.add_argument("--knob", action="append", metavar="CLOCK=MHZ,...",
                   help="a clock's table: gpu=306,714,1300.5, emc=2133,3199 or cpu=1113.6,2201.6 (repeat for each; "
                        "'all' for the board's levels up to the power mode's cap: the GPU's, the EMC's, the "
                        "cpufreq table); the sweep runs their product (or --design). The GPU's is "
                        "required; a knob clock is set per run, so it takes no --emc/--cpu")
    j.add_argument("--design", choices=("full", "random", "lhs"),
                   help="which settings of the product: full (default), random or lhs (a Latin hypercube over the "
                        "tables' indices), the last two with --settings N, seeded by --seed")
    j.add_argument("--settings", type=int, metavar="N", help="how many settings --design random/lhs runs")
    p.add_argument("--steps", type=int, help="measured training steps per run (default 100)")
    p.add_argument("--warmup-steps", type=int, help="unmeasured steps before each window (default 10)")
    p.add_argument("--step-rows", type=int, default=50, metavar="N",
                   help="keep time and energy of the first N measured steps of repetition 0 of every "
                        "(workload, level) in steps.csv, for the online governor (default 50; 0: none)")
    p.add_argument("--resume", action="store_true", help="continue the sweep in --out (its plan.json)")
    p.add_argument("--no-retry-failed", action="store_true",
                   help="with --resume, keep failed runs as they are instead of running them again")
    p.add_argument("--sysfs-root", default="/", metavar="DIR", help="root of the Jetson sysfs tree (default /)")
    p.add_argument("--power-mode-ok", action="store_true",
                   help="--backend jetson: sweep in the current nvpmodel mode even if it is not MAXN")
    f = p.add_argument_group("fleet sweeps on Dask distributed (see docs/fleet.md; needs the 'fleet' extra)")
    f.add_argument("--cluster", metavar="ADDRESS",
                   help="tcp://HOST:8786: run on the workers of that dask scheduler, one board each; "
                        "local:N: start N local workers, each with its own simulated board (--backend sim)")
    f.add_argument("--board-kind", metavar="KIND",
                   help="the fleet's board kind to run on, when it holds several (one sweep per kind)")
    g = p.add_argument_group("cool-down between runs (board seconds; virtual on the twin)")
    g.add_argument("--cooldown-temp-c", type=float, default=50.0,
                   help="wait until the GPU is below this temperature (default 50 C)")
    g.add_argument("--cooldown-power-tol", type=float, default=0.15,
                   help="without a GPU temperature: wait until power is within this fraction of idle (default 0.15)")
    g.add_argument("--cooldown-timeout-s", type=float, default=300.0, help="longest cool-down (default 300 s)")
    g.add_argument("--cooldown-poll-s", type=float, default=5.0, help="check interval (default 5 s)")
    g.add_argument("--cooldown-min-s", type=float, default=0.0, help="shortest cool-down (default 0 s)")
    g.add_argument("--idle-s", type=float, default=10.0, help="idle-power measurement at the start (default 10 s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    # For tests and experiments only: another executor, e.g. dvfslab.testing.executors:SleepExecutor
    p.add_argument("--executor", default=None, help=argparse.SUPPRESS)
    p.add_argument("--executor-opt", action="append", default=[], metavar="KEY=VALUE", help=argparse.SUPPRESS)
    p.set_defaults(func=run, sweep_parser=p)


#: the plan's settings and their defaults (``plan.json`` keeps them; a resume does not change them)
PLAN_DEFAULTS = {"reps": 1, "order": "interleaved", "seed": 0, "steps": 100, "warmup_steps": 10}
#: options of a session that are not in the plan: a resume command repeats them
SESSION_OPTIONS = ("board", "sysfs_root", "power_mode_ok", "cluster", "board_kind", "step_rows", "no_retry_failed",
                   "cooldown_temp_c", "cooldown_power_tol", "cooldown_timeout_s", "cooldown_poll_s",
                   "cooldown_min_s", "idle_s", "no_progress", "executor", "executor_opt")


def _split(values: list[str] | None) -> list[str]:
    return [v for item in values or [] for v in item.split(",") if v.strip()]


def parse_freqs(values: list[str] | None, levels_mhz: list[float]) -> list[float]:
    """``--freqs``: numbers (each must be a board level) or ``all``."""
    from dvfslab.core.levels import UnsupportedFrequencyError, check_level

    tokens = _split(values)
    if not tokens or tokens == ["all"]:
        return list(levels_mhz)
    try:
        return [check_level(float(t), levels_mhz) for t in tokens]
    except UnsupportedFrequencyError as err:  # the hint of this command (it has no --nearest)
        raise UnsupportedFrequencyError(err.freq_mhz, err.levels_mhz,
                                        "Pick --freqs from these, or 'all'.") from None
    except ValueError as err:
        raise DvfsError(f"--freqs: {err}; give MHz values such as 612 1300.5, or 'all'") from None


def parse_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs; values parsed as JSON when they are JSON (numbers, true, null)."""
    opts = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise DvfsError(f"--executor-opt {pair!r}: expected KEY=VALUE")
        try:
            opts[key] = json.loads(value)
        except json.JSONDecodeError:
            opts[key] = value
    return opts


WORKLOAD_GROUPS = ("all", "characterization", "evaluation")


def resolve_workloads(tokens: Sequence[str]) -> list[str]:
    """Expand ``all`` / ``characterization`` / ``evaluation`` and check ids against the catalog.

    A catalog id is ``model/task`` (``bert-base/sst2``). An id whose model part is itself a
    path (``EleutherAI/pythia-70m/sst2``, ``./my-model/rte``) is passed through for the
    fine-tuning harness; anything else unknown to the catalog is an error naming the fix.
    """
    from dvfslab.data import catalog

    out: list[str] = []
    for tok in tokens:
        if tok in WORKLOAD_GROUPS:
            out += _catalog_group(tok)
            continue
        model, sep, task = tok.rpartition("/")
        if not sep or not model or not task:
            raise DvfsError(f"workload {tok!r} is not an id like 'bert-base/sst2' nor one of "
                            f"{', '.join(WORKLOAD_GROUPS)}")
        if "/" in model or os.path.isdir(model):
            out.append(tok)
            continue
        try:
            out.append(catalog.workload_id(model, task))
        except catalog.UnknownWorkloadError as err:
            raise DvfsError(f"--workloads {tok}: {err}") from None
    return list(dict.fromkeys(out))


def _catalog_group(group: str) -> list[str]:
    """Catalog ids of a group: the paper's models on its characterization / evaluation tasks."""
    from dvfslab.data import catalog

    def ids(tasks: Sequence[str]) -> list[str]:
        return [catalog.workload_id(m, t) for m in catalog.PAPER_MODELS for t in tasks]

    groups = {"characterization": ids(catalog.CHARACTERIZATION_TASKS), "evaluation": ids(catalog.EVALUATION_TASKS)}
    groups["all"] = groups["characterization"] + groups["evaluation"]
    return groups[group]


def make_executor(args):
    from dvfslab.sweep import executors

    if args.executor:
        return executors.load_executor(args.executor, parse_options(args.executor_opt))
    if args.step_rows < 0:
        raise DvfsError(f"--step-rows must be >= 0, got {args.step_rows}")
    if args.backend == "sim":
        from dvfslab.sweep.twin import SimExecutor

        return SimExecutor(step_rows=args.step_rows)
    return executors.FinetuneExecutor(step_rows=args.step_rows)


def backend_options(args) -> dict:
    """The backend's options; the twin's seed is ``--seed``, else on resume the sweep's own."""
    stored = _stored_plan(args)
    seed = args.seed if args.seed is not None else (stored.seed if stored is not None else PLAN_DEFAULTS["seed"])
    board = getattr(args, "board", None)
    if board is None and args.backend == "sim" and args.resume:
        from dvfslab.sweep.store import stored_sim_board

        board = stored_sim_board(args.out)
    if board is not None and args.backend != "sim":
        raise DvfsError(f"--board {board} chooses a simulated module: use it with --backend sim (a real board "
                        "is the one the sweep runs on)")
    sim = {"seed": seed, "physical_pins": _joint(args)}  # a joint sweep's pins reach the twin's physics (#32)
    if board is not None:
        from dvfslab.sim.profiles import get_profile

        sim["board"] = get_profile(board).name
    return {"jetson": {"sysfs_root": args.sysfs_root, "power_mode_ok": args.power_mode_ok},
            "sim": sim}.get(args.backend, {})


def _joint(args) -> bool:
    """Whether ``--knob`` sets a clock other than the GPU's (a joint sweep)."""
    return any(not str(k).startswith("gpu=") for k in (getattr(args, "knob", None) or []))


def _plan_option(args, key: str):
    value = getattr(args, key)
    return PLAN_DEFAULTS[key] if value is None else value


def pin_options(args) -> dict:
    """``--emc`` / ``--cpu`` as given (only those given: a plan fills in its defaults)."""
    from dvfslab.hw.base import parse_pin

    return {name: parse_pin(getattr(args, name, None), f"--{name}") for name in ("emc", "cpu")
            if getattr(args, name, None) is not None}


def knob_options(args, levels_mhz: list[float], other_levels: dict[str, list[float]] | None = None) -> dict:
    """``--knob gpu=... --knob emc=...``, ``--design``, ``--settings``: a joint plan's arguments
    (empty without ``--knob``). The GPU's values are checked against the board's levels here,
    the other clocks' when the sweep starts (they need the backend's pinned clocks). ``emc=all`` /
    ``cpu=all`` take the clock's levels from ``other_levels`` (:func:`other_clock_levels`: the
    board's EMC table, its cpufreq table, up to the power mode's cap)."""
    if not getattr(args, "knob", None):
        if getattr(args, "design", None) or getattr(args, "settings", None) is not None:
            raise DvfsError("--design and --settings choose among a joint sweep's settings: give the clocks' tables "
                            "with --knob gpu=... --knob emc=...")
        return {}
    if args.freqs:
        raise DvfsError("--freqs and --knob gpu=... both give the GPU levels: with --knob, drop --freqs")
    tables: dict[str, list[float]] = {}
    for item in args.knob:
        name, sep, values = item.partition("=")
        if not sep or not values.strip():
            raise DvfsError(f"--knob {item}: expected CLOCK=MHZ,... such as gpu=306,714,1300.5")
        if name in tables:
            raise DvfsError(f"--knob {name} is given twice; give each clock's table once")
        if name == "gpu":
            from dvfslab.core.levels import UnsupportedFrequencyError

            try:
                tables[name] = parse_freqs([values], levels_mhz)
            except UnsupportedFrequencyError as err:
                raise UnsupportedFrequencyError(err.freq_mhz, err.levels_mhz,
                                                "Pick --knob gpu=... from these, or gpu=all.") from None
            continue
        if values.strip() == "all":
            if not (other_levels or {}).get(name):
                raise DvfsError(f"--knob {name}=all: this backend offers no {name} clock table to take the levels "
                                f"from; list them (`dvfslab clocks` shows the board's), e.g. {name}=2133,3199")
            tables[name] = list(other_levels[name])
            continue
        try:
            tables[name] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise DvfsError(f"--knob {item}: give MHz values separated by commas") from None
    return {"knob_tables": tables, "design": args.design or "full", "n_settings": args.settings}


def other_clock_levels(backend) -> dict[str, list[float]]:
    """The levels of each other clock ``backend`` pins (``emc``, ``cpu``), up to the power mode's
    cap (what ``--knob emc=all`` / ``cpu=all`` sweep); a clock without a table is left out."""
    offered = backend.clocks.other_clocks() if backend.clocks is not None else {}
    out = {}
    for name, clock in offered.items():
        if clock.support() is not None:
            continue
        top = clock.max_allowed_mhz()
        levels = [float(f) for f in clock.levels_mhz() if f <= top + 0.5]
        if levels:
            out[name] = levels
    return out


def make_plan_from(args, levels_mhz: list[float], board_kind: str | None = None,
                   other_levels: dict[str, list[float]] | None = None):
    """The plan of ``--workloads ...`` (None with only ``--resume``: the stored plan is run)."""
    from dvfslab.sweep.plan import make_plan

    if args.workloads:
        return make_plan(resolve_workloads(_split(args.workloads)), parse_freqs(args.freqs, levels_mhz),
                         maxn=not args.no_maxn, board_kind=board_kind, pins=pin_options(args),
                         **knob_options(args, levels_mhz, other_levels),
                         **{k: _plan_option(args, k) for k in PLAN_DEFAULTS})
    if not args.resume:
        raise DvfsError("--workloads is required to start a sweep (e.g. --workloads bert-base/sst2 "
                        "or all); to continue one, pass --resume")
    _refuse_plan_changes(args, levels_mhz)
    return None


def _refuse_plan_changes(args, levels_mhz: list[float]) -> None:
    """``--resume`` without ``--workloads``: the options given, parsed, for the library's check
    (:func:`dvfslab.sweep.store.refuse_plan_changes`)."""
    from dvfslab.sweep.store import refuse_plan_changes, stored_plan

    stored = stored_plan(args.out) if args.freqs else None
    levels = parse_freqs(args.freqs, levels_mhz or list(stored.levels_mhz)) if stored is not None else None
    joint = bool(getattr(args, "knob", None) or getattr(args, "design", None)
                 or getattr(args, "settings", None) is not None)
    refuse_plan_changes(args.out, {k: getattr(args, k) for k in PLAN_DEFAULTS}, levels_mhz=levels,
                        pins=pin_options(args), joint=joint, no_maxn=args.no_maxn)


def resume_command(args) -> str:
    """The command that continues this sweep: backend, out, --resume and the session options
    given (the plan's are stored in plan.json)."""
    parser = args.sweep_parser
    words = ["dvfslab", "sweep", "--backend", args.backend, "--out", str(args.out), "--resume"]
    for dest in SESSION_OPTIONS:
        value = getattr(args, dest)
        if value == parser.get_default(dest):
            continue
        flag = "--" + dest.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag)
        else:
            for item in value if isinstance(value, list) else [value]:
                words += [flag, str(item)]
    return shlex.join(words)


def make_cooldown(args):
    from dvfslab.sweep.session import Cooldown

    return Cooldown(max_temp_c=args.cooldown_temp_c if args.cooldown_temp_c > 0 else None,
                    idle_power_tol=args.cooldown_power_tol, timeout_s=args.cooldown_timeout_s,
                    poll_s=args.cooldown_poll_s, min_s=args.cooldown_min_s, idle_measure_s=args.idle_s)


def run(args) -> int:
    from dvfslab.core.files import refuse_overlap

    refuse_overlap(args.out, read_paths(args), "dvfslab sweep")
    try:
        ds = run_fleet(args) if args.cluster else run_local(args)
    except KeyboardInterrupt:
        if not (Path(args.out) / "plan.json").exists():
            raise  # interrupted before the sweep started: nothing to resume
        print(f"dvfslab sweep: interrupted; the runs finished so far are saved in {args.out}; "
              f"continue with: {resume_command(args)}", file=sys.stderr)
        return 130
    n_failed = int((ds.runs["status"] == "failed").sum())
    boards = ds.runs["board_id"].nunique() if "board_id" in ds.runs.columns else 1
    print(f"{args.out}: {len(ds.runs)} runs ({n_failed} failed), {len(ds.workloads)} workloads, "
          f"{ds.source} data" + (f", {boards} boards" if args.cluster else ""))
    missing = _planned(args.out) - len(ds.runs) if args.cluster else 0
    if missing:
        print(f"{missing} planned runs have no record (their workers died repeatedly, see meta.json "
              "sweep.sessions[-1].fleet.lost); continue with --resume", file=sys.stderr)
    return 1 if n_failed or missing else 0


def read_paths(args) -> dict:
    """What the sweep reads besides --out: a fake board's sysfs tree, local model folders of
    ``--workloads`` (``./my-model/rte``)."""
    paths = {"--sysfs-root": args.sysfs_root if os.path.realpath(args.sysfs_root) != "/" else None}
    for tok in _split(args.workloads):
        model = tok.rpartition("/")[0]
        if model and os.path.exists(model):
            paths[f"--workloads {tok}"] = model
    return paths


def _planned(out: str) -> int:
    from dvfslab.sweep.store import stored_plan

    plan = stored_plan(out)
    return len(plan.runs) if plan is not None else 0


def run_fleet(args):
    """``--cluster``: the same plan on a Dask fleet (:func:`dvfslab.sweep.fleet.run_fleet_sweep`)."""
    try:
        from dvfslab.sweep import fleet
        from dvfslab.sweep.fleet_worker import BoardConfig
    except ImportError as err:
        if "distributed" not in str(err) and "dask" not in str(err):
            raise
        raise DvfsError(f"--cluster needs Dask distributed ({err}); pip install 'dvfslab[fleet]'") from None
    if args.cluster.startswith("local:") and args.backend != "sim":
        raise DvfsError(f"--cluster {args.cluster} starts simulated boards on this machine: use --backend sim, "
                        "or start one `dask worker` per real board and pass --cluster tcp://HOST:8786")
    executor, options, cooldown = make_executor(args), backend_options(args), make_cooldown(args)
    with fleet.open_cluster(args.cluster) as client:
        _, infos = fleet.fleet_boards(client, BoardConfig(args.backend, executor, options, cooldown))
        plan = None
        if args.workloads:
            stored = _stored_plan(args)
            kind = fleet.plan_kind(infos, args.board_kind or (stored.board_kind if stored is not None else None))
            levels = next((i["kind"]["levels_mhz"] for i in infos.values() if i.get("kind_id") == kind), [])
            plan = make_plan_from(args, levels, kind if stored is None else stored.board_kind)
        else:
            make_plan_from(args, [])  # the error naming --workloads / --resume, or a changed plan option
        return fleet.run_fleet_sweep(plan, client, args.out, backend=args.backend, backend_options=options,
                                     executor=executor, cooldown=cooldown, resume=args.resume,
                                     retry_failed=not args.no_retry_failed, progress=not args.no_progress)


def _stored_plan(args):
    """The plan of the sweep ``--resume`` continues (:func:`dvfslab.sweep.store.stored_plan`), else None."""
    from dvfslab.sweep.store import stored_plan

    return stored_plan(args.out) if args.resume else None



def run_local(args):
    from dvfslab.hw import get_backend
    from dvfslab.sweep.runner import run_sweep

    executor = make_executor(args)
    backend = get_backend(args.backend, **backend_options(args))
    try:
        # None with only --resume (the stored plan); the error naming --workloads / --resume, or a
        # changed plan option
        plan = make_plan_from(args, backend.clocks.levels_mhz() if backend.clocks is not None else [],
                              other_levels=other_clock_levels(backend))
        return run_sweep(plan, backend, executor, args.out, resume=args.resume,
                         retry_failed=not args.no_retry_failed, cooldown=make_cooldown(args),
                         progress=not args.no_progress)
    finally:
        backend.close()
