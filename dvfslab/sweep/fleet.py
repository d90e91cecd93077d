"""Fleet sweeps: one characterization sweep sharded over many boards on Dask distributed.

The client (this module) holds the sweep directory, exactly as a local sweep does
(:class:`~dvfslab.sweep.store.SweepStore`: ``plan.json``, the run journal, one ``runs/<run_id>.json``
per finished run, the consolidated dataset). Each run of the plan still to do becomes one Dask task
(:func:`~dvfslab.sweep.fleet_worker.run_on_board`) that needs ``board=1`` and the plan's board
kind, so it executes on one free board of that kind, through that worker's own backend; the
client commits each record as its task finishes. Hence:

* a worker that dies mid-run loses only its in-flight run, which the scheduler gives to
  another worker (Dask's own retry of tasks whose worker died); a run is committed once, by
  run id, so nothing is recorded twice;
* a stopped client loses nothing committed: ``--resume`` submits the runs still missing;
* a worker whose board is of another kind advertises another kind resource and never gets
  a run of this plan: it is listed as refused in ``meta.json``. One sweep per board kind
  (each with its own ``--out``) shares a heterogeneous fleet.

See docs/fleet.md for the set-up on real boards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pandas as pd
from distributed import Client, LocalCluster, as_completed
from tqdm.auto import tqdm

from dvfslab.core.errors import SweepError
from dvfslab.core.files import utc_now
from dvfslab.core.levels import check_level
from dvfslab.data.contract import Dataset, load_dataset
from dvfslab.data.workloads import workload_table
from dvfslab.sweep.executors import Executor
from dvfslab.sweep.fleet_worker import (
    BOARD_RESOURCE,
    BoardConfig,
    BoardPlugin,
    board_digest,
    describe_board,
    fleet_kinds,
    kind_resource,
    run_on_board,
)
from dvfslab.sweep.plan import SweepPlan
from dvfslab.sweep.runner import FOREIGN_LEVEL_HINT, LOCK_NAME, notify_run
from dvfslab.sweep.safety import SweepLock, signals_as_interrupt
from dvfslab.sweep.session import Cooldown
from dvfslab.sweep.store import SweepStore, build_meta, read_json

__all__ = ["BoardConfig", "fleet_boards", "open_cluster", "plan_kind", "run_fleet_sweep"]


@contextlib.contextmanager
def open_cluster(cluster: str) -> Iterator[Client]:
    """A client for ``tcp://HOST:PORT`` (a running scheduler) or ``local:N`` (a new
    ``LocalCluster`` of N one-thread worker processes, each holding ``board=1``)."""
    if cluster.startswith("local:"):
        n = cluster.partition(":")[2]
        if not n.isdigit() or int(n) < 1:
            raise SweepError(f"--cluster {cluster!r}: expected local:N with N >= 1 boards")
        with LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True,
                          resources={BOARD_RESOURCE: 1}, dashboard_address=":0",
                          host="127.0.0.1") as lc, Client(lc) as client:
            yield client
        return
    if "://" not in cluster:
        raise SweepError(f"--cluster {cluster!r}: expected tcp://HOST:PORT (a dask scheduler) or local:N")
    with Client(cluster) as client:
        yield client


def fleet_boards(client: Client, config: BoardConfig) -> tuple[str, dict[str, dict]]:
    """Register the board plugin (every worker opens its board) and describe every worker's board.

    Returns the plugin name and ``{worker address: description}`` (see
    :func:`~dvfslab.sweep.fleet_worker.describe_board`).
    """
    plugin = BoardPlugin(config)
    if any(d != plugin.digest for d in client.run(board_digest, plugin.name).values()) or not client.ncores():
        client.register_plugin(plugin)  # replaces another configuration's board plugin
    return plugin.name, client.run(describe_board, plugin.name)


def plan_kind(infos: Mapping[str, dict], wanted: str | None = None) -> str:
    """The board kind a plan runs on: ``wanted``, else the fleet's only kind (else an error)."""
    kinds = fleet_kinds(infos)
    listing = "; ".join(f"{k} ({len(w)} board{'s' * (len(w) > 1)}: {', '.join(w)})" for k, w in kinds.items())
    if wanted is not None:
        if wanted not in kinds:
            raise SweepError(f"no worker of the fleet has a board of kind {wanted}; the fleet holds: "
                             f"{listing or 'no usable board'}")
        return wanted
    if len(kinds) == 1:
        return next(iter(kinds))
    if not kinds:
        errors = "; ".join(f"{i['worker']}: {i['error']}" for i in infos.values()) or "no worker connected"
        raise SweepError(f"no worker of the fleet has a usable board ({errors})")
    raise SweepError(f"the fleet holds several board kinds: {listing}; run one sweep per kind "
                     "(--board-kind KIND, each with its own --out)")


def run_fleet_sweep(plan: SweepPlan | None, client: Client, out_dir: str | Path, *, backend: str = "sim",
                    backend_options: Mapping | None = None, executor: Executor | None = None,
                    cooldown: Cooldown | None = None, resume: bool = False, retry_failed: bool = True,
                    workloads: pd.DataFrame | None = None, progress: bool = True,
                    on_run: Callable[[dict], object] | None = None,
                    worker_options: Mapping[str, Mapping] | None = None,
                    consolidate_s: float | None = None) -> Dataset:
    """Run (or resume) ``plan`` on the fleet behind ``client`` into ``out_dir``; return the dataset.

    As :func:`~dvfslab.sweep.runner.run_sweep` (same plan, records, resume), with the runs
    executed by Dask workers, one board each, opened with ``get_backend(backend,
    **backend_options)`` on the worker (``worker_options``: per worker name overrides).
    ``executor`` defaults to the twin's for ``sim``, else the fine-tuning harness. The plan runs on
    boards of ``plan.board_kind`` (default: the fleet's only kind).
    """
    config = BoardConfig(backend, executor or _default_executor(backend), dict(backend_options or {}),
                         cooldown or Cooldown(), {str(k): dict(v) for k, v in (worker_options or {}).items()})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with SweepLock(out / LOCK_NAME):
        plugin_name, infos = fleet_boards(client, config)
        store = SweepStore(out)
        plan = store.open(_with_kind(plan, out, infos), resume=resume)
        kind = plan.board_kind or plan_kind(infos)  # None: a local sweep continued on a fleet
        boards, refused = _split_fleet(infos, kind, plan)
        table = workloads if workloads is not None else workload_table(plan.workloads)
        todo = store.todo(plan, retry_failed=retry_failed)
        session = {"started_at": utc_now(), "host": socket.gethostname(), "runs_done_before": len(plan) - len(todo),
                   "retry_failed": retry_failed,
                   "fleet": {"scheduler": client.scheduler.address, "kind": kind,
                             "workers": {i["worker"]: i["identity"]["board_id"] for i in boards.values()},
                             "refused": refused, "boards": {}, "lost": {}}}
        meta = _fleet_meta(boards, backend, config, plan, store.stored_meta(), session)
        store.write_dataset(plan, meta, table)
        if progress:
            print(f"fleet: {len(boards)} board(s) of kind {kind}, {len(refused)} refused; Dask dashboard: "
                  f"{client.dashboard_link}", file=sys.stderr, flush=True)
        with signals_as_interrupt():
            try:
                _run_all(client, todo, plan, kind, plugin_name, store, meta, table, session["fleet"],
                         progress, on_run, consolidate_s)
            finally:
                session["ended_at"] = utc_now()
                store.write_dataset(plan, meta, table, steps=True)
    return load_dataset(out)


def _split_fleet(infos: Mapping[str, dict], kind: str, plan: SweepPlan) -> tuple[dict, dict]:
    """The workers whose board is of ``kind`` (address -> description) and the refused ones
    (worker name -> why); checks the plan's levels against the kind's table."""
    boards = {a: i for a, i in infos.items() if i.get("kind_id") == kind}
    refused = {i["worker"]: i["error"] or f"board kind {i['kind_id']}, not {kind}"
               for a, i in infos.items() if a not in boards}
    if not boards:
        raise SweepError(f"no worker of the fleet has a board of the plan's kind {kind} "
                         f"(refused: {refused or 'no worker connected'}); start workers on such boards")
    levels = next(iter(boards.values()))["kind"]["levels_mhz"]
    for f in plan.levels_mhz:
        check_level(f, levels, hint=FOREIGN_LEVEL_HINT)
    for name, _ in plan.knob_tables:  # a joint plan: every board must read back each knob clock
        blind = sorted(i["worker"] for i in boards.values() if name != "gpu" and not i.get("reads_back", {}).get(name))
        if blind:
            raise SweepError(f"--knob {name}: the boards of workers {', '.join(map(str, blind))} cannot read the {name} "
                             "clock back, and a joint dataset records each run's clocks as read back; sweep it on "
                             "boards that read it")
    return boards, refused


def _fleet_meta(boards: Mapping[str, dict], backend: str, config: BoardConfig, plan: SweepPlan,
                stored: dict | None, session: dict) -> dict:
    """``meta.json`` of a fleet sweep: the kind as ``device``, every board under ``boards``."""
    first = next(iter(boards.values()))
    return build_meta(first["device"], first["kind"]["levels_mhz"], backend,
                      simulated=all(i["simulated"] for i in boards.values()),
                      energy_measured=all(i["energy_measured"] for i in boards.values()),
                      executor=config.executor, plan=plan, cooldown=config.cooldown, stored=stored,
                      session=session, boards=[i["identity"] for i in boards.values()])


def _default_executor(backend: str) -> Executor:
    if backend == "sim":
        from dvfslab.sweep.twin import SimExecutor

        return SimExecutor()
    from dvfslab.sweep.executors import FinetuneExecutor

    return FinetuneExecutor()


def _with_kind(plan: SweepPlan | None, out: Path, infos: Mapping[str, dict]) -> SweepPlan | None:
    """The plan with its board kind: its own, the stored plan's (resume; none for a local sweep
    continued on a fleet), else the fleet's only one."""
    if plan is None or plan.board_kind is not None:
        return plan
    stored = out / "plan.json"
    if stored.exists():
        return dataclasses.replace(plan, board_kind=read_json(stored).get("board_kind"))
    return dataclasses.replace(plan, board_kind=plan_kind(infos))


def _run_all(client: Client, todo: list, plan: SweepPlan, kind: str, plugin_name: str, store: SweepStore, meta: dict,
             table: pd.DataFrame, fleet: dict, progress: bool, on_run: Callable[[dict], object] | None,
             consolidate_s: float | None) -> None:
    """Submit one task per run, commit each record as it comes back, show fleet progress."""
    token = uuid.uuid4().hex[:8]
    resources = {BOARD_RESOURCE: 1, kind_resource(kind): 1}
    futures = {client.submit(run_on_board, spec, kind, plugin_name, key=f"dvfslab-run-{spec.run_id}-{token}",
                             resources=resources, priority=len(todo) - i, pure=False): spec
               for i, spec in enumerate(todo)}
    tty = progress and sys.stderr.isatty()
    per_board: Counter = Counter()
    t0 = last_write = time.monotonic()
    try:
        with tqdm(total=len(plan), initial=len(plan) - len(todo), unit="run", desc="fleet", smoothing=0,
                  disable=not tty, dynamic_ncols=True) as bar:
            for i, fut in enumerate(as_completed(futures), start=1):
                spec = futures[fut]
                try:
                    result = fut.result()
                except Exception as err:  # its worker died too often, or it was refused: not recorded
                    fleet["lost"][spec.run_id] = f"{type(err).__name__}: {err}"[:300]
                    continue
                board_id = result["row"]["board_id"]
                fleet["boards"].setdefault(board_id, result["board_session"])
                store.commit(result["row"], result["extras"], meta)
                per_board[board_id] += 1
                if consolidate_s is not None and (time.monotonic() - last_write >= consolidate_s or i == len(todo)):
                    store.write_dataset(plan, meta, table)
                    last_write = time.monotonic()
                bar.set_postfix_str(", ".join(f"{b}: {n}" for b, n in sorted(per_board.items())), refresh=False)
                bar.update()
                if on_run is not None:
                    notify_run(on_run, store.records[spec.run_id])
                if progress and not tty:
                    eta_s = (time.monotonic() - t0) / i * (len(todo) - i)
                    print(f"fleet [{len(plan) - len(todo) + i}/{len(plan)}] {spec.run_id} on {board_id}: "
                          f"{result['row']['status']}; ETA {eta_s:.0f} s", file=sys.stderr, flush=True)
    finally:
        client.cancel([f for f in futures if not f.done()])
        fleet["runs_by_board"] = dict(per_board)
