"""Characterization sweeps that survive days of running.

A sweep runs every (workload, policy, level, repetition) of a :class:`SweepPlan` on one
backend through a pluggable executor (:mod:`dvfslab.sweep.executors`), and keeps the board in a
comparable state between runs (cool-down, warm-up). The same code plans, orders, resumes,
records and restores the clocks for the real fine-tuning harness and for the simulated board.

Layout of a sweep directory (a dataset directory plus bookkeeping)::

    plan.json          the ordered plan; ``--resume`` re-runs exactly this plan
    runs/<run_id>.json one file per finished run (ok or failed), written atomically
    runs.csv           consolidated from runs/, rewritten atomically after every run
    steps.csv          per-step time and energy of the runs whose executor kept them (``step_rows``),
                       written when a session ends
    meta.json          board description, levels, sweep settings, sessions
    workloads.csv      the workloads of the plan
    .sweep.lock        pid of the sweep holding this directory

A run killed half-way (SIGKILL, power loss) leaves no file under ``runs/`` and is simply
run again on ``--resume``; the dataset never holds a run twice.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import random
import re
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from dvfslab.core.files import jsonable, utc_now
from dvfslab.data.contract import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    WORKLOAD_COLUMNS,
    Dataset,
    DatasetError,
    atomic_write_csv,
    atomic_write_json,
    load_dataset,
)
from dvfslab.hw.base import Backend, DvfsError, check_level, format_mhz
from dvfslab.sweep.executors import (
    FIXED,
    MAXN,
    Cooldown,
    Executor,
    cool_down,
    describe_executor,
    make_sampler,
    measure_idle_power_w,
    repair_clocks,
    reset_clocks,
    sampler_running,
    set_policy,
)
from dvfslab.sweep.safety import SweepLock, board_lock_path, signals_as_interrupt

log = logging.getLogger(__name__)

ORDERS = ("sequential", "shuffled", "interleaved")
PLAN_VERSION = 1
ROW_COLUMNS = list(RUN_COLUMNS) + ["error"]
#: what an executor may fill in; identity and status columns belong to the sweep
MEASURE_COLUMNS = ("time_s", "energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w",
                   "peak_power_w", "gpu_util_pct", "mean_gpu_freq_mhz", "steps", "eval_metric")


class SweepError(DvfsError):
    """A sweep cannot start or continue (bad plan, foreign directory, mismatching resume)."""


# --------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a workload under one policy (a fixed level or MAXN), one repetition."""

    run_id: str
    workload_id: str
    policy: str
    freq_mhz: float | None
    rep: int
    steps: int
    warmup_steps: int

    @property
    def level_label(self) -> str:
        """``'612 MHz'`` or ``'MAXN'`` (for progress bars and logs)."""
        return "MAXN" if self.policy == MAXN else f"{format_mhz(self.freq_mhz)} MHz"


def run_id_for(workload_id: str, policy: str, freq_mhz: float | None, rep: int) -> str:
    """Deterministic, file-name-safe run id: ``bert-base--sst2__f612__r0``, ``..__maxn__r1``."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", workload_id.replace("/", "--"))
    cond = MAXN if policy == MAXN else f"f{format_mhz(freq_mhz)}"
    return f"{slug}__{cond}__r{int(rep)}"


def williams_rows(n: int) -> list[list[int]]:
    """Rows of a Williams Latin square on ``n`` conditions (``2n`` rows when ``n`` is odd).

    Over a full cycle of rows every condition takes every position equally often and follows
    every other condition equally often (first-order carry-over balance).
    """
    if n <= 0:
        return []
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(c + r) % n for c in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def order_cells(workloads: Sequence[str], conditions: Sequence[float | None], reps: int,
                order: str, seed: int) -> list[tuple[str, float | None, int]]:
    """Order the (workload, condition, rep) cells; a condition is a level in MHz or ``None`` (MAXN).

    * ``sequential``: workload by workload, levels ascending then MAXN, repetitions back to back.
    * ``shuffled``: a seeded random permutation of the sequential order.
    * ``interleaved``: repetitions outermost; inside each (rep, workload) block the conditions
      follow successive rows of a Williams Latin square, so slow drift (room temperature, board
      ageing) spreads evenly over the levels and so does the thermal carry-over of the run before.
    """
    if order not in ORDERS:
        raise SweepError(f"unknown order {order!r}; choose one of: {', '.join(ORDERS)}")
    if order == "interleaved":
        rows = williams_rows(len(conditions))
        cells = []
        for rep in range(reps):
            for w_idx, wid in enumerate(workloads):
                row = rows[(rep * len(workloads) + w_idx) % len(rows)]
                cells += [(wid, conditions[c], rep) for c in row]
        return cells
    cells = [(w, c, r) for w in workloads for c in conditions for r in range(reps)]
    if order == "shuffled":
        random.Random(seed).shuffle(cells)
    return cells


@dataclass(frozen=True)
class SweepPlan:
    """Workloads × levels × repetitions (+ MAXN baseline runs), in execution order."""

    workloads: tuple[str, ...]
    levels_mhz: tuple[float, ...]
    reps: int = 1
    maxn: bool = True
    order: str = "interleaved"
    seed: int = 0
    steps: int = 100
    warmup_steps: int = 10
    runs: tuple[RunSpec, ...] = field(default=(), compare=False)

    def __len__(self) -> int:
        return len(self.runs)

    def settings(self) -> dict:
        """The plan without its run list (what ``plan.json`` and ``meta.json`` record)."""
        d = asdict(self)
        d.pop("runs")
        d["workloads"], d["levels_mhz"] = list(self.workloads), list(self.levels_mhz)
        return d

    def to_json(self) -> dict:
        return {"plan_version": PLAN_VERSION, **self.settings(), "run_ids": [r.run_id for r in self.runs]}

    @classmethod
    def from_json(cls, obj: Mapping, path: str | Path = "plan.json") -> SweepPlan:
        """Rebuild a plan from ``plan.json`` and check that it reproduces the stored run order."""
        if obj.get("plan_version") != PLAN_VERSION:
            raise SweepError(f"{path}: unknown plan_version {obj.get('plan_version')!r} (this dvfslab writes {PLAN_VERSION})")
        keys = ("reps", "maxn", "order", "seed", "steps", "warmup_steps")
        plan = make_plan(obj["workloads"], obj["levels_mhz"], **{k: obj[k] for k in keys})
        if [r.run_id for r in plan.runs] != list(obj.get("run_ids", [])):
            raise SweepError(f"{path}: stored run order differs from the one this dvfslab plans; "
                             "finish the sweep with the dvfslab version that started it, or start a new --out")
        return plan


def make_plan(workloads: Sequence[str], levels_mhz: Sequence[float], *, reps: int = 1,
              maxn: bool = True, order: str = "interleaved", seed: int = 0, steps: int = 100,
              warmup_steps: int = 10) -> SweepPlan:
    """Plan a sweep; run ids depend only on (workload, policy, level, rep), so resume is exact."""
    workloads = tuple(dict.fromkeys(str(w) for w in workloads))
    levels = tuple(sorted(dict.fromkeys(float(f) for f in levels_mhz)))
    if not workloads:
        raise SweepError("the plan has no workloads; pass --workloads")
    if not levels and not maxn:
        raise SweepError("the plan has no levels and no MAXN runs; pass --freqs or keep MAXN")
    if reps < 1 or steps < 1 or warmup_steps < 0:
        raise SweepError(f"need reps >= 1, steps >= 1, warmup_steps >= 0 (got {reps}, {steps}, {warmup_steps})")
    conditions: list[float | None] = list(levels) + ([None] if maxn else [])
    runs = []
    for wid, freq, rep in order_cells(workloads, conditions, reps, order, seed):
        policy = MAXN if freq is None else FIXED
        runs.append(RunSpec(run_id_for(wid, policy, freq, rep), wid, policy, freq, rep, steps, warmup_steps))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SweepError(f"two workloads map to the same run id {dup!r}; rename one of them")
    return SweepPlan(workloads, levels, reps, maxn, order, seed, steps, warmup_steps, tuple(runs))


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


VIRTUAL_EPOCH = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)  # as dvfslab simulate


def run_timestamp(backend: Backend) -> str:
    """``started_at``: wall-clock UTC on hardware; on the simulated board its virtual time
    counted from a fixed epoch (as ``dvfslab simulate`` does), so simulated sweeps are
    reproducible."""
    if backend.virtual_time:
        return (VIRTUAL_EPOCH + _dt.timedelta(seconds=round(backend.clock()))).strftime("%Y-%m-%dT%H:%M:%SZ")
    return utc_now()


class SweepStore:
    """The sweep directory: plan, per-run files and the consolidated dataset."""

    def __init__(self, out_dir: str | Path):
        self.root = Path(out_dir)
        self.runs_dir = self.root / "runs"
        self.records: dict[str, dict] = {}

    def open(self, plan: SweepPlan | None, *, resume: bool) -> SweepPlan:
        """Write or check ``plan.json`` and load finished runs; return the plan to execute."""
        plan_path = self.root / "plan.json"
        if plan_path.exists():
            if not resume:
                raise SweepError(f"{self.root} already holds a sweep (plan.json); pass --resume to continue it "
                                 "or choose a new --out")
            stored = SweepPlan.from_json(_read_json(plan_path), plan_path)
            if plan is not None and plan.to_json() != stored.to_json():
                raise SweepError(f"{plan_path}: the requested plan differs from the stored one "
                                 f"({_plan_diff(plan, stored)}); resume with the same arguments, "
                                 "or with only --out and --resume")
            plan = stored
        elif plan is None:
            raise SweepError(f"{plan_path} is missing: nothing to resume; give --workloads to start a sweep")
        elif any(self.root.glob("*.csv")) or (self.root / "meta.json").exists():
            raise SweepError(f"{self.root} holds a dataset that is not a sweep; choose an empty --out")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(plan_path, plan.to_json())
        self.runs_dir.mkdir(exist_ok=True)
        for tmp in [*self.root.glob(".*.tmp"), *self.runs_dir.glob(".*.tmp")]:
            tmp.unlink(missing_ok=True)  # left by an atomic write a crash interrupted
        wanted = {r.run_id for r in plan.runs}
        for path in sorted(self.runs_dir.glob("*.json")):
            rec = _read_json(path)
            if rec.get("row", {}).get("run_id") in wanted:
                self.records[rec["row"]["run_id"]] = rec
        return plan

    def todo(self, plan: SweepPlan, *, retry_failed: bool = True) -> list[RunSpec]:
        """Runs still to do, in plan order: those with no record (and failed ones if ``retry_failed``)."""
        def done(spec: RunSpec) -> bool:
            rec = self.records.get(spec.run_id)
            return rec is not None and (rec["row"]["status"] == "ok" or not retry_failed)
        return [r for r in plan.runs if not done(r)]

    def commit(self, row: Mapping, extras: Mapping) -> None:
        """Write one finished run atomically (``runs/<run_id>.json``)."""
        rec = {"row": dict(row), "extras": dict(extras)}
        atomic_write_json(self.runs_dir / f"{row['run_id']}.json", rec)
        self.records[row["run_id"]] = rec

    def runs_frame(self, plan: SweepPlan) -> pd.DataFrame:
        rows = [self.records[r.run_id]["row"] for r in plan.runs if r.run_id in self.records]
        return pd.DataFrame(rows, columns=ROW_COLUMNS)

    def steps_frame(self, plan: SweepPlan) -> pd.DataFrame:
        """``steps.csv`` rows from the records' ``extras["step_rows"]`` (ok runs that kept them)."""
        rows = []
        for spec in plan.runs:
            rec = self.records.get(spec.run_id)
            if rec and rec["row"]["status"] == "ok":
                rows += step_rows_of(rec, spec.run_id)
        return pd.DataFrame(rows, columns=list(STEP_COLUMNS))

    def write_dataset(self, plan: SweepPlan, meta: dict, workloads: pd.DataFrame, *, steps: bool = False) -> None:
        """Rewrite ``workloads.csv``, ``runs.csv``, with ``steps`` also ``steps.csv`` (when runs
        kept per-step rows), and then ``meta.json`` (each atomically) so the directory always
        validates. ``steps.csv`` grows with every run, so the sweep writes it only when a session
        ends (finished, failed or interrupted); after a SIGKILL it lags until ``--resume``."""
        runs = self.runs_frame(plan)
        meta["baseline"] = MAXN if (runs["policy"] == MAXN).any() else "fmax"
        atomic_write_csv(self.root / "workloads.csv", merge_workloads(workloads, self.records), WORKLOAD_COLUMNS)
        atomic_write_csv(self.root / "runs.csv", runs, ROW_COLUMNS)
        step_rows = self.steps_frame(plan) if steps else ()
        if len(step_rows):  # after runs.csv: runs are only ever added, so the old steps.csv stays valid meanwhile
            atomic_write_csv(self.root / "steps.csv", step_rows, STEP_COLUMNS)
        atomic_write_json(self.root / "meta.json", meta)


def step_rows_of(record: Mapping, run_id: str) -> list[dict]:
    """``steps.csv`` rows of one run record (its ``extras["step_rows"]``; none if it kept none)."""
    per_step = record["extras"].get("step_rows") or {"time_s": [], "energy_j": []}
    return [{"run_id": run_id, "step": i, "time_s": t, "energy_j": e}
            for i, (t, e) in enumerate(zip(per_step["time_s"], per_step["energy_j"], strict=True))]


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DatasetError(path, f"unreadable JSON: {err}", fix="delete the file to redo that run") from None
    if not isinstance(obj, dict):
        raise DatasetError(path, "must hold a JSON object")
    return obj


def _plan_diff(a: SweepPlan, b: SweepPlan) -> str:
    sa, sb = a.settings(), b.settings()
    diffs = [f"{k}: {sa[k]!r} vs stored {sb[k]!r}" for k in sa if sa[k] != sb[k]]
    return "; ".join(diffs) or "run order"


# --------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------

LOCK_NAME = ".sweep.lock"


def run_sweep(plan: SweepPlan | None, backend: Backend, executor: Executor, out_dir: str | Path, *,
              resume: bool = False, retry_failed: bool = True, cooldown: Cooldown | None = None,
              workloads: pd.DataFrame | None = None, progress: bool = True,
              lock_dir: str | Path | None = None, on_run: Callable[[dict], object] | None = None,
              consolidate_s: float = 0.0) -> Dataset:
    """Run (or resume) a sweep into ``out_dir`` and return the validated dataset.

    ``plan`` may be None with ``resume=True`` (the stored ``plan.json`` is used). Failed runs
    are recorded with ``status=failed`` and retried on resume unless ``retry_failed=False``.
    The clocks are reset after every run and in every exit path (exception, SIGINT, SIGTERM);
    after a SIGKILL the backend's own state file repairs them on the next start.

    ``on_run(record)`` is called after each run of this session is committed, with its record
    (``{"row": runs.csv row, "extras": ...}``, as in ``runs/<run_id>.json``), failed runs
    included: for live plots and progress displays. An exception it raises is logged and the
    sweep goes on (the run is already on disk). ``consolidate_s``: rewrite ``runs.csv`` and
    ``meta.json`` after a run only once this many wall seconds have passed since the last
    rewrite (0: after every run; they are always rewritten at the end, and rebuilt from
    ``runs/`` on resume) — for the twin, whose runs take milliseconds.
    """
    cooldown = cooldown or Cooldown()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    board = board_lock_path(backend, lock_dir)
    with SweepLock(out / LOCK_NAME), (SweepLock(board, "board") if board else contextlib.nullcontext()):
        store = SweepStore(out)
        plan = store.open(plan, resume=resume)
        _check_levels(plan, backend)
        table = workloads if workloads is not None else workload_table(plan.workloads)
        todo = store.todo(plan, retry_failed=retry_failed)
        session = {"started_at": utc_now(), "pid": os.getpid(), "host": socket.gethostname(),
                   "runs_done_before": len(plan) - len(todo), "retry_failed": retry_failed}
        meta = sweep_meta(backend, executor, plan, cooldown, _stored_meta(out), session)
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
             progress: bool, on_run: Callable[[dict], object] | None = None, consolidate_s: float = 0.0) -> None:
    """Run, commit and report each run. A terminal gets a tqdm bar (runs done / total, current
    workload and level, ETA from this session's mean run time); a log file gets one line a run."""
    tty = progress and sys.stderr.isatty()
    n_failed, t0 = 0, time.monotonic()
    last_write = t0
    with tqdm(total=len(plan), initial=len(plan) - len(todo), unit="run", desc="sweep", smoothing=0,
              disable=not tty, dynamic_ncols=True) as bar:
        for i, spec in enumerate(todo, start=1):
            bar.set_postfix_str(f"{spec.workload_id} @ {spec.level_label} rep {spec.rep}"
                                + (f", {n_failed} failed" if n_failed else ""), refresh=True)
            row, extras = execute_run(spec, backend, executor, cooldown, idle_power_w)
            n_failed += row["status"] == "failed"
            store.commit(row, extras)
            if time.monotonic() - last_write >= consolidate_s or i == len(todo):
                store.write_dataset(plan, meta, table)
                last_write = time.monotonic()
            bar.update()
            if on_run is not None:
                _notify(on_run, store.records[spec.run_id])
            if progress and not tty:
                per_run_s = (time.monotonic() - t0) / i
                print(f"sweep [{len(plan) - len(todo) + i}/{len(plan)}] {spec.run_id}: {row['status']}; "
                      f"ETA {_hms(per_run_s * (len(todo) - i))}", file=sys.stderr, flush=True)


def _notify(on_run: Callable[[dict], object], record: dict) -> None:
    try:
        on_run(record)
    except Exception:  # a display must never stop days of measurement
        log.warning("on_run hook failed for run %s; the sweep goes on", record["row"]["run_id"], exc_info=True)


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def execute_run(spec: RunSpec, backend: Backend, executor: Executor, cooldown: Cooldown,
                idle_power_w: float | None) -> tuple[dict, dict]:
    """Cool down, set the policy, run the executor; a failure becomes a ``status=failed`` row."""
    row = {"run_id": spec.run_id, "workload_id": spec.workload_id, "policy": spec.policy,
           "gpu_freq_mhz": spec.freq_mhz, "rep": spec.rep, "steps": spec.steps,
           "status": "ok", "started_at": None, "error": None}
    extras: dict = {}
    try:
        sampler = make_sampler(backend, executor)
        with sampler_running(sampler):
            reset_clocks(backend)
            extras["cooldown"] = cool_down(backend, executor, sampler, cooldown, idle_power_w)
            set_policy(backend, spec)
            row["started_at"] = run_timestamp(backend)
            result = dict(executor.run(spec, backend, sampler))
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


def start_session(backend: Backend, executor: Executor, cooldown: Cooldown, session: dict) -> float | None:
    """Repair/reset the clocks, cool down (temperature only), measure the idle CPU+GPU power."""
    session["clock_repair"] = repair_clocks(backend)
    sampler = make_sampler(backend, executor)
    with sampler_running(sampler):
        session["initial_cooldown"] = cool_down(backend, executor, sampler, cooldown, None)
        idle_power_w = measure_idle_power_w(backend, executor, sampler, cooldown.idle_measure_s)
    session["idle_power_w"] = idle_power_w
    return idle_power_w


def sweep_meta(backend: Backend, executor: Executor, plan: SweepPlan, cooldown: Cooldown,
               stored: dict | None, session: dict) -> dict:
    """``meta.json``: the contract's keys, the board description and every sweep setting."""
    from dvfslab import __version__

    stored = stored or {}
    desc = jsonable(dict(backend.description))
    simulated = backend.simulated
    for key in ("board", "jetpack", "power_mode", "seed"):
        old = stored.get("device", {}).get(key)
        if old is not None and desc.get(key) is not None and old != desc[key]:
            raise SweepError(f"meta.json: this sweep was started with {key}={old!r} but the board now "
                             f"reports {key}={desc[key]!r}; resume with the same board and settings "
                             "(power mode, --seed on the twin) or start a new --out")
    levels = backend.clocks.levels_mhz() if backend.clocks is not None else list(plan.levels_mhz)
    meta = {"schema_version": 1, "source": "simulated" if simulated else "measured", "device": desc,
            "freq_table_mhz": [float(f) for f in levels], "baseline": "fmax",
            "created_at": stored.get("created_at", utc_now()), "dvfslab_version": __version__,
            "energy_measured": backend.power is not None,
            "sweep": {"backend": backend.name, "plan": plan.settings(), "cooldown": asdict(cooldown),
                      "executor": describe_executor(executor),
                      "sessions": stored.get("sweep", {}).get("sessions", []) + [session]}}
    if simulated:
        meta["generator"] = f"dvfslab sweep on the simulated board ({type(executor).__name__})"
        meta["seed"] = desc.get("seed", plan.seed)
    return meta


def _stored_meta(out: Path) -> dict | None:
    path = out / "meta.json"
    return _read_json(path) if path.exists() else None


def _check_levels(plan: SweepPlan, backend: Backend) -> None:
    if backend.clocks is None:
        return
    levels = backend.clocks.levels_mhz()
    for f in plan.levels_mhz:
        check_level(f, levels)


CHARACTERIZATION_TASKS = ("sst2", "qnli", "mrpc")  # the paper's; the other GLUE tasks are unseen


def workload_table(workload_ids: Sequence[str]) -> pd.DataFrame:
    """``workloads.csv`` rows: from the catalog (:mod:`dvfslab.data.catalog`) when it knows the id,
    else the minimum the id tells (model, task, split by task). Executors may refine a row
    by returning a ``workload`` dict (the fine-tuning harness measures ``avg_seq_len``)."""
    rows = []
    for wid in workload_ids:
        row = _catalog_row(wid)
        if row is None:
            model, _, task = wid.rpartition("/")
            row = {"workload_id": wid, "model": model, "task": task or model,
                   "split": "characterization" if task.rpartition(":")[2] in CHARACTERIZATION_TASKS
                   else "evaluation"}
        rows.append(row)
    return pd.DataFrame(rows, columns=list(WORKLOAD_COLUMNS))


def _catalog_row(workload_id: str) -> dict | None:
    from dvfslab.data import catalog

    model, _, task = workload_id.rpartition("/")
    try:
        row = catalog.workload_row(model, task)
    except catalog.UnknownWorkloadError:
        return None
    return row if row["workload_id"] == workload_id else None


def merge_workloads(table: pd.DataFrame, records: Mapping[str, dict]) -> pd.DataFrame:
    """The workloads table with the rows executors reported (``extras["workload"]``) applied."""
    table = table.astype(object)  # a column that was all empty must accept text and numbers
    index = {w: i for i, w in enumerate(table["workload_id"])}
    for rec in records.values():
        reported = rec.get("extras", {}).get("workload")
        if isinstance(reported, Mapping) and reported.get("workload_id") in index:
            i = index[reported["workload_id"]]
            for col in WORKLOAD_COLUMNS:
                if reported.get(col) is not None:
                    table.loc[table.index[i], col] = reported[col]
    return table

