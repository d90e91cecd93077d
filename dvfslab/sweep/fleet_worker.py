"""The worker side of a fleet sweep: one board per Dask worker, one run per task.

A :class:`BoardPlugin` (a ``distributed.WorkerPlugin`` the client registers) opens the
worker's own board when the worker starts or joins: it takes the per-board lock, repairs
clocks a killed worker left pinned (the backend's state file, as a local sweep does) and
advertises the board's kind as a Dask resource (``dvfslab-kind-<kind id>=1``) next to the
``board=1`` the worker was started with. A run is a task (:func:`run_on_board`) that needs
both resources, so it only ever lands on a free board of the plan's kind, and two runs never
share a GPU. The board's session (cool-down, idle power) starts with its first run.

A board that cannot be opened does not stop the worker: it advertises no kind, so it gets
no run, and :func:`describe_board` reports why (the client lists it as refused).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distributed import WorkerPlugin, get_worker

from dvfslab.core.errors import SweepError
from dvfslab.core.files import jsonable
from dvfslab.sweep.board import board_identity, board_kind, kind_description, kind_id
from dvfslab.sweep.executors import Executor, describe_executor
from dvfslab.sweep.plan import RunSpec
from dvfslab.sweep.runner import execute_run
from dvfslab.sweep.safety import SweepLock, board_lock_path
from dvfslab.sweep.session import Cooldown, repair_clocks, reset_clocks, start_session

KIND_RESOURCE_PREFIX = "dvfslab-kind-"
BOARD_RESOURCE = "board"
PLUGIN_NAME = "dvfslab-board"


class BoardKindError(SweepError):
    """A run was sent to a worker whose board is not of the plan's kind."""


def kind_resource(kind: str) -> str:
    """The Dask resource a worker advertises for its board kind."""
    return KIND_RESOURCE_PREFIX + kind


@dataclass
class BoardConfig:
    """How every worker opens its board and runs: sent (pickled) to each worker.

    ``options``: keyword arguments of :func:`dvfslab.hw.get_backend` (``sysfs_root``, ``seed`` ...);
    ``worker_options``: per worker name, options that override them (e.g. another profile of the
    twin). ``distinct_sim_boards``: on the twin, worker ``i`` (its Dask name, or a stable hash of
    it) gets noise seed ``seed + i``, so N simulated boards are N distinct boards.
    """

    backend: str
    executor: Executor
    options: dict = field(default_factory=dict)
    cooldown: Cooldown = field(default_factory=Cooldown)
    worker_options: dict = field(default_factory=dict)
    distinct_sim_boards: bool = True

    def options_for(self, worker_name: Any) -> dict:
        opts = {**self.options, **self.worker_options.get(str(worker_name), {})}
        if self.backend == "sim" and self.distinct_sim_boards and "seed" not in self.worker_options.get(
                str(worker_name), {}):
            opts["seed"] = int(opts.get("seed", 0)) + worker_index(worker_name)
        return opts

    def digest(self) -> str:
        """Tells configurations apart: registering the one a worker already has changes nothing."""
        desc = {"backend": self.backend, "options": self.options, "worker_options": self.worker_options,
                "cooldown": vars(self.cooldown), "executor": describe_executor(self.executor),
                "distinct": self.distinct_sim_boards}
        return hashlib.sha1(json.dumps(jsonable(desc), sort_keys=True).encode()).hexdigest()[:12]


def worker_index(name: Any) -> int:
    """A worker's number: its Dask name when that is an integer (LocalCluster), else a stable hash."""
    text = str(name)
    return int(text) if text.isdigit() else zlib.crc32(text.encode()) % 100_000


class BoardPlugin(WorkerPlugin):
    """Opens, holds and finally releases the worker's board (see the module docstring).

    One per worker (:data:`PLUGIN_NAME`): registering another configuration replaces it (the
    old board is closed once its run in flight, if any, has finished).
    """

    name = PLUGIN_NAME

    def __init__(self, config: BoardConfig):
        self.config = config
        self.digest = config.digest()

    async def setup(self, worker) -> None:
        self.backend = self.error = None
        self.kind_id: str | None = None
        self.session: dict | None = None
        self.idle_power_w: float | None = None
        self.run_lock = threading.Lock()
        self.closing = False
        self._stack = contextlib.ExitStack()
        try:
            self._open(worker.name)
        except Exception as err:  # the worker stays up, with no board kind: it gets no run
            self._stack.close()
            self.backend, self.error = None, f"{type(err).__name__}: {err}"
        kinds = {r: 0 for r in worker.state.total_resources if r.startswith(KIND_RESOURCE_PREFIX)}
        if self.kind_id:
            kinds[kind_resource(self.kind_id)] = 1
        await worker.set_resources(**kinds)

    def _open(self, worker_name: Any) -> None:
        from dvfslab.hw import get_backend

        self.backend = get_backend(self.config.backend, **self.config.options_for(worker_name))
        self._stack.callback(self.backend.close)
        lock = board_lock_path(self.backend)
        if lock is not None:
            self._stack.enter_context(SweepLock(lock, "board"))
        self.clock_repair = repair_clocks(self.backend)  # clocks a killed worker left pinned
        self._stack.callback(reset_clocks, self.backend)
        self.identity, self.kind = board_identity(self.backend), board_kind(self.backend)
        self.kind_id = kind_id(self.kind)

    async def teardown(self, worker) -> None:
        if self.kind_id and worker.status.name not in ("closing", "closed"):
            with contextlib.suppress(Exception):
                await worker.set_resources(**{kind_resource(self.kind_id): 0})
        self.closing = True
        if self.run_lock.acquire(blocking=False):  # else the run in flight closes it when done
            try:
                self._stack.close()
            finally:
                self.run_lock.release()

    def ensure_session(self) -> float | None:
        """The board's first run starts its session: initial cool-down and idle power."""
        if self.session is None:
            session: dict = {"started_at_board_s": self.backend.clock()}
            self.idle_power_w = start_session(self.backend, self.config.executor, self.config.cooldown, session)
            session["clock_repair_at_worker_start"] = self.clock_repair
            self.session = jsonable(session)
        return self.idle_power_w


def _board(plugin_name: str, worker=None) -> BoardPlugin:
    worker = worker or get_worker()
    plugin = worker.plugins.get(plugin_name)
    if plugin is None:
        raise SweepError(f"worker {worker.name} has no dvfslab board ({plugin_name}); "
                         "the fleet sweep registers it: run the client again")
    return plugin


def board_digest(plugin_name: str, dask_worker=None) -> str | None:
    """The configuration digest of the worker's board plugin (None: none registered)."""
    plugin = (dask_worker or get_worker()).plugins.get(plugin_name)
    return plugin.digest if isinstance(plugin, BoardPlugin) else None


def describe_board(plugin_name: str, dask_worker=None) -> dict:
    """The worker's board as the client sees it (run on every worker with ``client.run``,
    which passes the worker as ``dask_worker``)."""
    worker = dask_worker or get_worker()
    b = _board(plugin_name, worker)
    base = {"worker": str(worker.name), "address": worker.address,
            "resources": dict(worker.state.total_resources)}
    if b.backend is None:
        return {**base, "error": b.error}
    backend = b.backend
    return {**base, "error": None, "identity": b.identity, "kind": b.kind, "kind_id": b.kind_id,
            "device": kind_description(backend.description), "backend": backend.name,
            "simulated": bool(backend.simulated), "energy_measured": backend.power is not None,
            "reads_back": reads_back(backend)}


def reads_back(backend) -> dict[str, bool]:
    """Per other clock the backend offers (``emc``, ``cpu``): whether it reads back, which a joint
    sweep over that clock needs (docs/sweep.md, "Joint sweeps")."""
    offered = backend.clocks.other_clocks() if backend.clocks is not None else {}
    return {name: clock.read_mhz() is not None for name, clock in offered.items()}


def run_on_board(spec: RunSpec, kind: str, plugin_name: str) -> dict:
    """One run on this worker's board: its record plus the board's session and timings.

    Refuses (:class:`BoardKindError`) a run meant for another board kind.
    """
    b = _board(plugin_name)
    if b.backend is None or b.kind_id != kind:
        mine = b.kind_id if b.backend is not None else f"none ({b.error})"
        raise BoardKindError(f"worker {get_worker().name}: run {spec.run_id} is planned for boards of kind "
                             f"{kind} but this board is of kind {mine}; start this worker's own sweep "
                             "(one sweep per board kind, see docs/fleet.md)")
    with b.run_lock:  # belt and braces: the board=1 resource already serialises runs
        try:
            idle_power_w = b.ensure_session()
            t0, w0 = b.backend.clock(), time.perf_counter()
            row, extras = execute_run(spec, b.backend, b.config.executor, b.config.cooldown, idle_power_w,
                                      board=b.identity)
            extras["board_clock_s"] = [t0, b.backend.clock()]
            extras["task_wall_s"] = time.perf_counter() - w0
        finally:
            if b.closing:  # replaced while this run was in flight
                b._stack.close()
    return {"row": row, "extras": jsonable(extras), "board_session": b.session}


def fleet_kinds(infos: Mapping[str, dict]) -> dict[str, list[str]]:
    """kind id -> worker names (workers with no board left out)."""
    kinds: dict[str, list[str]] = {}
    for info in infos.values():
        if info.get("kind_id"):
            kinds.setdefault(info["kind_id"], []).append(info["worker"])
    return kinds
