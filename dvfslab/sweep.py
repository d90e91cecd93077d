"""Characterization sweeps that survive days of running.

A sweep runs every (workload, policy, level, repetition) of a :class:`SweepPlan` on one
backend through a pluggable executor (:mod:`dvfslab.executors`), and keeps the board in a
comparable state between runs (cool-down, warm-up). The same code plans, orders, resumes,
records and restores the clocks for the real fine-tuning harness and for the simulated board.

Layout of a sweep directory (a dataset directory plus bookkeeping)::

    plan.json          the ordered plan; ``--resume`` re-runs exactly this plan
    runs/<run_id>.json one file per finished run (ok or failed), written atomically
    runs.csv           consolidated from runs/, rewritten atomically after every run
    meta.json          board description, levels, sweep settings, sessions
    workloads.csv      the workloads of the plan
    .sweep.lock        pid of the sweep holding this directory

A run killed half-way (SIGKILL, power loss) leaves no file under ``runs/`` and is simply
run again on ``--resume``; the dataset never holds a run twice.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import random
import re
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from .backends.base import Backend, DvfsError, check_level, format_mhz
from .dataset import (
    RUN_COLUMNS,
    WORKLOAD_COLUMNS,
    Dataset,
    DatasetError,
    atomic_write_csv,
    atomic_write_json,
    load_dataset,
)
from .executors import (
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


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


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

    def write_dataset(self, plan: SweepPlan, meta: dict, workloads: pd.DataFrame) -> None:
        """Rewrite ``runs.csv`` then ``meta.json`` (each atomically) so the directory always validates."""
        runs = self.runs_frame(plan)
        meta["baseline"] = MAXN if (runs["policy"] == MAXN).any() else "fmax"
        atomic_write_csv(self.root / "workloads.csv", merge_workloads(workloads, self.records), WORKLOAD_COLUMNS)
        atomic_write_csv(self.root / "runs.csv", runs, ROW_COLUMNS)
        atomic_write_json(self.root / "meta.json", meta)


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
# Signals
# --------------------------------------------------------------------------------------------


class SweepInterrupted(KeyboardInterrupt):
    """SIGTERM / SIGHUP turned into an exception so that every ``finally`` restores the clocks."""


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """While active, SIGTERM and SIGHUP raise :class:`SweepInterrupted` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise SweepInterrupted(f"received signal {signal.Signals(signum).name}")

    sigs = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s]
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)



# --------------------------------------------------------------------------------------------
# Locks: one sweep per output directory and per board
# --------------------------------------------------------------------------------------------


class SweepLockedError(SweepError):
    """Another live process holds the lock."""


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_start(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process, from /proc; None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def holder_alive(holder: Mapping) -> bool:
    """Whether the process recorded in a lock file still runs (same boot, same pid start time).

    A lock from another host cannot be checked and counts as alive.
    """
    if holder.get("host") != socket.gethostname():
        return True
    if holder.get("boot_id") and _boot_id() and holder["boot_id"] != _boot_id():
        return False
    pid = int(holder.get("pid", -1))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = _proc_start(pid)
    if proc is not None and (proc[0] in ("Z", "X") or
                             (holder.get("start_ticks") is not None and proc[1] != holder["start_ticks"])):
        return False  # a zombie, or the pid was reused by another process
    return True


class SweepLock:
    """An exclusive lock file created with ``O_CREAT | O_EXCL`` that records its owner.

    A lock whose owner is dead (killed, power loss) is stale and taken over. Checking and
    replacing a stale lock happens under an ``flock`` on a ``.guard`` file, which the kernel
    releases when its holder dies, so two starters cannot both take over the same stale lock.
    """

    def __init__(self, path: str | Path, what: str = "output directory"):
        self.path = Path(path)
        self.what = what
        self.held = False

    def holder(self) -> dict | None:
        """The owner recorded in the lock file, or None when there is none or it is unreadable."""
        try:
            obj = json.loads(self.path.read_text() or "null")
        except (OSError, json.JSONDecodeError):
            return None
        return obj if isinstance(obj, dict) else None

    def acquire(self) -> SweepLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "boot_id": _boot_id(),
              "start_ticks": (_proc_start(os.getpid()) or (None, None))[1], "since": utc_now(),
              "argv": sys.argv}
        with self._guard():
            for _ in range(2):
                try:
                    fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    holder = self.holder()
                    if holder is not None and holder_alive(holder):
                        raise SweepLockedError(
                            f"{self.path}: another sweep (pid {holder.get('pid')} on {holder.get('host')}, "
                            f"since {holder.get('since')}) holds this {self.what}; wait for it, stop it, "
                            "or delete the lock file if you are sure it is gone") from None
                    self.path.unlink(missing_ok=True)  # stale: its owner is dead
                    continue
                with os.fdopen(fd, "w") as fh:
                    json.dump(me, fh)
                    fh.flush()
                    os.fsync(fh.fileno())
                self.held = True
                return self
        raise SweepLockedError(f"{self.path}: could not take the lock; retry")

    def release(self) -> None:
        if self.held and (self.holder() or {}).get("pid") == os.getpid():
            self.path.unlink(missing_ok=True)
        self.held = False

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        with open(self.path.with_name(self.path.name + ".guard"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def board_lock_path(backend: Backend, lock_dir: str | Path | None = None) -> Path | None:
    """Where the per-board lock lives (``$DVFSLAB_LOCK_DIR`` or the temp dir); None for the twin.

    The board is identified by the backend name and the identity keys of its description
    (sysfs root, device index, PCI bus id, ...), so fake trees in tests get their own lock.
    """
    if backend.clocks is None or backend.name == "sim":
        return None
    ident = {k: str(v) for k, v in sorted(backend.description.items()) if k in BOARD_ID_KEYS}
    digest = hashlib.sha1(json.dumps([backend.name, ident]).encode()).hexdigest()[:16]
    root = Path(lock_dir or os.environ.get("DVFSLAB_LOCK_DIR") or tempfile.gettempdir())
    return root / f"dvfslab-board-{backend.name}-{digest}.lock"


BOARD_ID_KEYS = ("sysfs_root", "devfreq", "devfreq_path", "gpu_node", "index", "device_index",
                 "pci_bus_id", "uuid", "serial")


# --------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------

LOCK_NAME = ".sweep.lock"


def run_sweep(plan: SweepPlan | None, backend: Backend, executor: Executor, out_dir: str | Path, *,
              resume: bool = False, retry_failed: bool = True, cooldown: Cooldown | None = None,
              workloads: pd.DataFrame | None = None, progress: bool = True,
              lock_dir: str | Path | None = None) -> Dataset:
    """Run (or resume) a sweep into ``out_dir`` and return the validated dataset.

    ``plan`` may be None with ``resume=True`` (the stored ``plan.json`` is used). Failed runs
    are recorded with ``status=failed`` and retried on resume unless ``retry_failed=False``.
    The clocks are reset after every run and in every exit path (exception, SIGINT, SIGTERM);
    after a SIGKILL the backend's own state file repairs them on the next start.
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
                _run_all(todo, plan, store, meta, table, backend, executor, cooldown, idle_power_w, progress)
            finally:
                reset_clocks(backend)
                session["ended_at"] = utc_now()
                store.write_dataset(plan, meta, table)
    return load_dataset(out)


def _run_all(todo: list[RunSpec], plan: SweepPlan, store: SweepStore, meta: dict, table: pd.DataFrame,
             backend: Backend, executor: Executor, cooldown: Cooldown, idle_power_w: float | None,
             progress: bool) -> None:
    n_failed = 0
    with tqdm(total=len(plan), initial=len(plan) - len(todo), unit="run", desc="sweep", smoothing=0,
              disable=not progress, dynamic_ncols=True) as bar:
        for spec in todo:
            bar.set_postfix_str(f"{spec.workload_id} @ {spec.level_label} rep {spec.rep}"
                                + (f", {n_failed} failed" if n_failed else ""), refresh=True)
            row, extras = execute_run(spec, backend, executor, cooldown, idle_power_w)
            n_failed += row["status"] == "failed"
            store.commit(row, extras)
            store.write_dataset(plan, meta, table)
            bar.update()


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
            row["started_at"] = utc_now()
            result = dict(executor.run(spec, backend, sampler))
        missing = [c for c in ("time_s", "energy_j")[: 1 + (backend.power is not None)]
                   if _plain(result.get(c)) is None]
        if missing:
            raise SweepError(f"executor {type(executor).__name__} returned no {', '.join(missing)}")
    except Exception as err:  # recorded, and the sweep goes on
        row.update(status="failed", error=f"{type(err).__name__}: {err}".replace("\n", " ")[:500])
        extras["traceback"] = traceback.format_exc()
        return row, _plain(extras)
    finally:
        reset_clocks(backend)
    row.update({k: result[k] for k in MEASURE_COLUMNS if k in result})
    extras.update({k: v for k, v in result.items() if k not in MEASURE_COLUMNS})
    return _plain(row), _plain(extras)


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
    from . import __version__

    stored = stored or {}
    desc = _plain(dict(backend.description))
    simulated = backend.name == "sim" or bool(desc.get("simulated"))
    for key in ("board", "jetpack", "power_mode"):
        old = stored.get("device", {}).get(key)
        if old is not None and desc.get(key) is not None and old != desc[key]:
            raise SweepError(f"meta.json: this sweep was started with {key}={old!r} but the board now "
                             f"reports {desc[key]!r}; restore it or start a new --out")
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
    """``workloads.csv`` rows: from the catalog (:mod:`dvfslab.workloads`) when it knows the id,
    else the minimum the id tells (model, task, split by task). Executors may refine a row
    by returning a ``workload`` dict (the fine-tuning harness measures ``avg_seq_len``)."""
    rows = []
    for wid in workload_ids:
        row = _catalog_row(wid)
        if row is None:
            model, _, task = wid.partition("/")
            row = {"workload_id": wid, "model": model, "task": task or model,
                   "split": "characterization" if task in CHARACTERIZATION_TASKS else "evaluation"}
        rows.append(row)
    return pd.DataFrame(rows, columns=list(WORKLOAD_COLUMNS))


def _catalog_row(workload_id: str) -> dict | None:
    return None


WORKLOAD_GROUPS = ("all", "characterization", "evaluation")


def resolve_workloads(tokens: Sequence[str]) -> list[str]:
    """Expand ``all`` / ``characterization`` / ``evaluation`` (catalog groups); keep other ids."""
    out: list[str] = []
    for tok in tokens:
        if tok in WORKLOAD_GROUPS:
            out += _catalog_group(tok)
        elif "/" not in tok:
            raise SweepError(f"workload {tok!r} is not an id like 'bert-base/sst2' nor one of "
                             f"{', '.join(WORKLOAD_GROUPS)}")
        else:
            out.append(tok)
    return list(dict.fromkeys(out))


def _catalog_group(group: str) -> list[str]:
    raise SweepError(f"--workloads {group}: the workload catalog is not available")


def merge_workloads(table: pd.DataFrame, records: Mapping[str, dict]) -> pd.DataFrame:
    """The workloads table with the rows executors reported (``extras["workload"]``) applied."""
    table = table.copy()
    index = {w: i for i, w in enumerate(table["workload_id"])}
    for rec in records.values():
        reported = rec.get("extras", {}).get("workload")
        if isinstance(reported, Mapping) and reported.get("workload_id") in index:
            i = index[reported["workload_id"]]
            for col in WORKLOAD_COLUMNS:
                if reported.get(col) is not None:
                    table.loc[table.index[i], col] = reported[col]
    return table


def _plain(obj):
    """JSON-ready copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)
