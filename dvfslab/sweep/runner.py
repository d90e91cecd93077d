"""Characterization sweeps that survive days of running: the loop over a plan's runs.

A sweep runs every (workload, policy, level, repetition) of a :class:`~dvfslab.sweep.plan.SweepPlan`
on one backend through a pluggable executor (:mod:`dvfslab.sweep.executors`), and keeps the
board in a comparable state between runs (:mod:`dvfslab.sweep.session`: cool-down, clocks).
The same code plans, orders, resumes, records (:mod:`dvfslab.sweep.store`) and restores the
clocks for the real fine-tuning harness and for the simulated board. The layout of a sweep
directory is described in :mod:`dvfslab.sweep.store`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from dvfslab.core.errors import SweepError
from dvfslab.core.files import jsonable, utc_now
from dvfslab.core.levels import check_level
from dvfslab.data.contract import Dataset, load_dataset
from dvfslab.data.workloads import workload_table
from dvfslab.hw.base import Backend
from dvfslab.measure.sampler import sampler_lease
from dvfslab.sweep.board import board_identity
from dvfslab.sweep.executors import MEASURE_COLUMNS, Executor
from dvfslab.sweep.plan import FIXED, RunSpec, SweepPlan
from dvfslab.sweep.safety import SweepLock, board_lock_path, signals_as_interrupt
from dvfslab.sweep.session import (
    Cooldown,
    check_pins,
    clock_columns,
    cool_down,
    make_sampler,
    pin_clocks,
    read_clocks,
    reset_clocks,
    set_policy,
    start_session,
)
from dvfslab.sweep.store import SweepStore, run_timestamp, sweep_meta

__all__ = ["LOCK_NAME", "execute_run", "notify_run", "run_sweep"]

log = logging.getLogger(__name__)

LOCK_NAME = ".sweep.lock"


def run_sweep(plan: SweepPlan | None, backend: Backend, executor: Executor, out_dir: str | Path, *,
              resume: bool = False, retry_failed: bool = True, cooldown: Cooldown | None = None,
              workloads: pd.DataFrame | None = None, progress: bool = True,
              lock_dir: str | Path | None = None, on_run: Callable[[dict], object] | None = None,
              consolidate_s: float | None = None) -> Dataset:
    """Run (or resume) a sweep into ``out_dir`` and return the validated dataset.

    ``plan`` may be None with ``resume=True`` (the stored ``plan.json`` is used). Failed runs
    are recorded with ``status=failed`` and retried on resume unless ``retry_failed=False``.
    The clocks are reset after every run and in every exit path (exception, SIGINT, SIGTERM);
    after a SIGKILL the backend's own state file repairs them on the next start.

    ``on_run(record)`` is called after each run of this session is committed, with its record
    (``{"row": runs.csv row, "extras": ...}``, as in ``runs/<run_id>.json``), failed runs
    included: for live plots and progress displays. An exception it raises is logged and the
    sweep goes on (the run is already on disk). A run is committed to the journal
    (``runs.journal``, O(1) per run, see :mod:`dvfslab.sweep.store`), which is compacted into
    ``runs/`` and ``runs.csv`` when the session ends and when a sweep resumes; ``consolidate_s``
    also compacts it during the session, after a run once this many wall seconds have passed
    since the last compaction, and after the last run (None: never; 0: after every run, which
    costs O(runs done) each time).
    """
    cooldown = cooldown or Cooldown()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    board = board_lock_path(backend, lock_dir)
    with SweepLock(out / LOCK_NAME), (SweepLock(board, "board") if board else contextlib.nullcontext()):
        store = SweepStore(out)
        plan = store.open(plan, resume=resume)
        _check_levels(plan, backend)
        pins = check_pins(backend, [(n, v) for n, v in plan.pins if n not in dict(plan.knob_tables)])
        table = workloads if workloads is not None else workload_table(plan.workloads)
        todo = store.todo(plan, retry_failed=retry_failed)
        session = {"started_at": utc_now(), "pid": os.getpid(), "host": socket.gethostname(),
                   "runs_done_before": len(plan) - len(todo), "retry_failed": retry_failed,
                   "pins_mhz": pins}
        meta = sweep_meta(backend, executor, plan, cooldown, store.stored_meta(), session)
        store.write_dataset(plan, meta, table)
        with signals_as_interrupt():
            try:
                idle_power_w = start_session(backend, executor, cooldown, session)
                store.write_dataset(plan, meta, table)
                _run_all(todo, plan, store, meta, table, backend, executor, cooldown, idle_power_w, progress,
                         on_run, consolidate_s)
            finally:
                reset_clocks(backend)
                session["ended_at"] = utc_now()
                store.write_dataset(plan, meta, table, steps=True)
    return load_dataset(out)


def _run_all(todo: list[RunSpec], plan: SweepPlan, store: SweepStore, meta: dict, table: pd.DataFrame,
             backend: Backend, executor: Executor, cooldown: Cooldown, idle_power_w: float | None,
             progress: bool, on_run: Callable[[dict], object] | None = None,
             consolidate_s: float | None = None) -> None:
    """Run, commit and report each run. A terminal gets a tqdm bar (runs done / total, current
    workload and level, ETA from this session's mean run time); a log file gets one line a run."""
    tty = progress and sys.stderr.isatty()
    n_failed, t0 = 0, time.monotonic()
    last_write = t0
    with tqdm(total=len(plan), initial=len(plan) - len(todo), unit="run", desc="sweep", smoothing=0,
              disable=not tty, dynamic_ncols=True) as bar:
        position = {r.run_id: k for k, r in enumerate(plan.runs)}
        ran: set[str] = set()
        for i, spec in enumerate(todo, start=1):
            bar.set_postfix_str(f"{spec.workload_id} @ {spec.level_label} rep {spec.rep}"
                                + (f", {n_failed} failed" if n_failed else ""), refresh=True)
            _resume_board(spec, plan, position, ran, store, backend, executor)
            row, extras = execute_run(spec, backend, executor, cooldown, idle_power_w)
            ran.add(spec.run_id)
            if hasattr(executor, "resume_state"):
                extras = {**extras, RESUME_STATE: jsonable(executor.resume_state(backend))}
            n_failed += row["status"] == "failed"
            store.commit(row, extras, meta)
            if consolidate_s is not None and (time.monotonic() - last_write >= consolidate_s or i == len(todo)):
                store.write_dataset(plan, meta, table)
                last_write = time.monotonic()
            bar.update()
            if on_run is not None:
                notify_run(on_run, store.records[spec.run_id])
            if progress and not tty:
                per_run_s = (time.monotonic() - t0) / i
                print(f"sweep [{len(plan) - len(todo) + i}/{len(plan)}] {spec.run_id}: {row['status']}; "
                      f"ETA {_hms(per_run_s * (len(todo) - i))}", file=sys.stderr, flush=True)


#: the record's extras key holding the executor's state after the run (see :func:`_resume_board`)
RESUME_STATE = "resume_state"


def _resume_board(spec: RunSpec, plan: SweepPlan, position: Mapping[str, int], ran: set[str], store: SweepStore,
                  backend: Backend, executor: Executor) -> None:
    """Before a run whose predecessor in plan order was done in an earlier session: give an
    executor that keeps its board's state (``resume_state`` / ``resume_from``, the twin) the
    state that run left, so the run starts as it would have in a sweep never interrupted."""
    k = position[spec.run_id]
    if k == 0 or not hasattr(executor, "resume_from"):
        return
    prev = plan.runs[k - 1].run_id
    rec = store.records.get(prev)
    if prev in ran or rec is None or RESUME_STATE not in rec.get("extras", {}):
        return
    executor.resume_from(backend, rec["extras"][RESUME_STATE])


def notify_run(on_run: Callable[[dict], object], record: dict) -> None:
    try:
        on_run(record)
    except Exception:  # a display must never stop days of measurement
        log.warning("on_run hook failed for run %s; the sweep goes on", record["row"]["run_id"], exc_info=True)


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def execute_run(spec: RunSpec, backend: Backend, executor: Executor, cooldown: Cooldown,
                idle_power_w: float | None, board: Mapping | None = None) -> tuple[dict, dict]:
    """Cool down, set the policy, run the executor; a failure becomes a ``status=failed`` row.

    ``board``: the board's identity (:func:`~dvfslab.sweep.board.board_identity`, computed when
    None); its ``board_id`` goes to the row, the whole identity to ``extras["board"]``.
    """
    board = dict(board) if board is not None else board_identity(backend)
    row = {"run_id": spec.run_id, "workload_id": spec.workload_id, "policy": spec.policy,
           "gpu_freq_mhz": spec.freq_mhz, "rep": spec.rep, "steps": spec.steps,
           "status": "ok", "started_at": None, "error": None, "board_id": board["board_id"]}
    extras: dict = {"board": board}
    try:
        sampler = make_sampler(backend, executor)
        with sampler_lease(sampler):
            reset_clocks(backend)
            extras["cooldown"] = cool_down(backend, executor, sampler, cooldown, idle_power_w)
            lock_check = set_policy(backend, spec)
            if lock_check is not None:
                extras["lock_check"] = lock_check
            pins = pin_clocks(backend, spec)
            if pins:
                extras["pins"] = pins
            clocks_at_start = read_clocks(backend)
            row.update(clock_columns(clocks_at_start))  # every other clock as read back, pinned or not
            row["started_at"] = run_timestamp(backend)
            result = dict(executor.run(spec, backend, sampler))
            if clocks_at_start:
                extras["clocks"] = {"start_mhz": clocks_at_start, "end_mhz": end_clocks(backend, spec)}
        missing = [c for c in ("time_s", "energy_j")[: 1 + (backend.power is not None)]
                   if jsonable(result.get(c)) is None]
        if missing:
            raise SweepError(f"executor {type(executor).__name__} returned no {', '.join(missing)}")
    except Exception as err:  # recorded, and the sweep goes on
        row.update(status="failed", error=f"{type(err).__name__}: {err}".replace("\n", " ")[:500])
        extras["traceback"] = traceback.format_exc()
        return row, jsonable(extras)
    finally:
        reset_clocks(backend)
    row.update({k: result[k] for k in MEASURE_COLUMNS if k in result})
    extras.update({k: v for k, v in result.items() if k not in MEASURE_COLUMNS})
    return jsonable(row), jsonable(extras)


def end_clocks(backend: Backend, spec: RunSpec) -> dict | None:
    """The other clocks read again when the executor returns, or None when that reading would
    not be the run's: a fixed run whose GPU is no longer locked was given back by its executor
    (the fine-tuning harness resets every clock when training ends, after its windows closed)."""
    if spec.policy == FIXED and backend.clocks is not None and not backend.clocks.state().locked:
        return None
    return read_clocks(backend)


#: the hint of a plan level the board lacks (a sweep resumed on another board: ``sweep`` has no
#: ``--nearest``, and snapping would mix levels in one dataset)
FOREIGN_LEVEL_HINT = ("The sweep's plan holds this level and this board has not: resume the sweep on the board "
                      "(kind, power mode) that started it, or start a new sweep in another --out.")


def _check_levels(plan: SweepPlan, backend: Backend) -> None:
    if backend.clocks is None:
        return
    levels = backend.clocks.levels_mhz()
    for f in plan.levels_mhz:
        check_level(f, levels, hint=FOREIGN_LEVEL_HINT)
    _check_knobs(plan, backend)


def _check_knobs(plan: SweepPlan, backend: Backend) -> None:
    """A joint plan's other clocks: every value a level the clock can be pinned at
    (:func:`check_pins`: its table, the power mode's cap) and the clock read back, since a joint
    dataset places each run by the clocks it read (docs/dataset.md)."""
    others = [(n, t) for n, t in plan.knob_tables if n != "gpu"]
    if not others:
        return
    offered = backend.clocks.other_clocks()
    for name, table in others:
        clock = offered.get(name)
        if clock is None:
            raise SweepError(f"--knob {name}: backend {backend.name!r} cannot set the {name} clock; a joint sweep over "
                             "it needs a Jetson (or a twin that models it)")
        check_pins(backend, [(name, v) for v in table])
        if clock.read_mhz() is None:
            raise SweepError(f"--knob {name}: the {clock.label} cannot be read back here, and a joint dataset records "
                             f"each run's {name} clock as read back; sweep it on a board that reads it")
