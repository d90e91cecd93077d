"""The sweep directory on disk: plan, one record per finished run, the consolidated dataset.

Layout (a dataset directory plus bookkeeping)::

    plan.json          the ordered plan; ``--resume`` re-runs exactly this plan
    runs.journal       the runs committed since the last compaction, one JSON line each
                       (:mod:`dvfslab.data.journal`): a commit appends a line and fsyncs it
    runs/<run_id>.json one file per finished run (ok or failed), written atomically when the
                       journal is compacted
    runs.csv           consolidated from runs/ when the journal is compacted: when a session
                       ends and when a sweep resumes (readers add the journal's runs)
    steps.csv          per-step time and energy of the runs whose executor kept them (``step_rows``),
                       written when a session ends
    meta.json          board description, levels, sweep settings, sessions
    workloads.csv      the workloads of the plan
    .sweep.lock        pid of the sweep holding this directory

A commit costs the same whatever the number of runs already done (one appended, fsynced
line); the O(runs) rewrites happen once per session. A run killed half-way (SIGKILL, power
loss) leaves no line in the journal (or a cut-short last line, dropped with a warning) and is
simply run again on ``--resume``; a kill during a compaction leaves the journal to replay, and
replaying it twice gives the same files. The dataset never holds a run twice.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from dvfslab.core.errors import SweepError
from dvfslab.core.files import atomic_write_json, folder_contents, jsonable, utc_now
from dvfslab.data.contract import (
    RUN_COLUMNS,
    STEP_COLUMNS,
    WORKLOAD_COLUMNS,
    DatasetError,
    atomic_write_csv,
)
from dvfslab.data.journal import RunJournal, fsync_dir, read_journal
from dvfslab.data.workloads import merge_workloads
from dvfslab.hw.base import Backend
from dvfslab.sweep.board import board_identity
from dvfslab.sweep.executors import Executor, describe_executor
from dvfslab.sweep.plan import MAXN, RunSpec, SweepPlan, normalize_pins
from dvfslab.sweep.session import Cooldown

ROW_COLUMNS = list(RUN_COLUMNS) + ["error", "board_id"]
#: the other clocks read back per run (added to runs.csv when a run has them)
CLOCK_COLUMNS = ["emc_freq_mhz", "cpu_freq_mhz"]
VIRTUAL_EPOCH = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)  # as dvfslab simulate


class SweepStore:
    """The sweep directory: plan, journal, per-run files and the consolidated dataset."""

    def __init__(self, out_dir: str | Path):
        self.root = Path(out_dir)
        self.runs_dir = self.root / "runs"
        self.records: dict[str, dict] = {}
        self.journal = RunJournal(self.root)
        self._journaled: dict[str, None] = {}  # run ids committed since the last compaction

    def open(self, plan: SweepPlan | None, *, resume: bool) -> SweepPlan:
        """Write or check ``plan.json`` and load finished runs (``runs/``, then the journal,
        which is newer); return the plan to execute. The next :meth:`write_dataset` compacts."""
        plan = self._open_plan(plan, resume=resume)
        self.runs_dir.mkdir(exist_ok=True)
        for tmp in [*self.root.glob(".*.tmp"), *self.runs_dir.glob(".*.tmp")]:
            tmp.unlink(missing_ok=True)  # left by an atomic write a crash interrupted
        wanted = {r.run_id for r in plan.runs}
        for path in sorted(self.runs_dir.glob("*.json")):
            rec = read_json(path)
            if rec.get("row", {}).get("run_id") in wanted:
                self.records[rec["row"]["run_id"]] = rec
        for _, rec in read_journal(self.root):
            if rec["row"]["run_id"] in wanted:
                self.records[rec["row"]["run_id"]] = rec
                self._journaled[rec["row"]["run_id"]] = None
        return plan

    def _open_plan(self, plan: SweepPlan | None, *, resume: bool) -> SweepPlan:
        plan_path = self.root / "plan.json"
        if plan_path.exists():
            if not resume:
                raise SweepError(f"{self.root} already holds a sweep (plan.json); pass --resume to continue it "
                                 "or choose a new --out")
            stored = SweepPlan.from_json(read_json(plan_path), plan_path)
            if plan is not None and plan.to_json() != stored.to_json():
                raise SweepError(f"{plan_path}: the requested plan differs from the stored one "
                                 f"({plan.diff(stored)}); resume with the same arguments, "
                                 "or with only --out and --resume")
            return stored
        if plan is None:
            raise SweepError(f"{plan_path} is missing: nothing to resume; give --workloads to start a sweep")
        others = [p.name for p in self.root.iterdir() if not p.name.startswith(".sweep.lock")] if self.root.is_dir() else []
        if others:
            held = folder_contents(self.root) if "meta.json" in others else \
                f"{len(others)} entries ({', '.join(sorted(others)[:3])}{', ...' if len(others) > 3 else ''})"
            raise SweepError(f"{self.root} already holds {held}, not a sweep; a new sweep needs an empty or new "
                             "--out: pick another")
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(plan_path, plan.to_json())
        return plan

    def todo(self, plan: SweepPlan, *, retry_failed: bool = True) -> list[RunSpec]:
        """Runs still to do, in plan order: those with no record (and failed ones if ``retry_failed``)."""
        def done(spec: RunSpec) -> bool:
            rec = self.records.get(spec.run_id)
            return rec is not None and (rec["row"]["status"] == "ok" or not retry_failed)
        return [r for r in plan.runs if not done(r)]

    def commit(self, row: Mapping, extras: Mapping, meta: dict | None = None) -> None:
        """Commit one finished run: append its record to the journal, fsynced (O(1) in the runs
        done). With ``meta``, the first MAXN run also rewrites ``meta.json`` (baseline ``maxn``),
        so a reader of the sweep in progress compares with MAXN as soon as it has a MAXN run."""
        rec = {"row": dict(row), "extras": dict(extras)}
        self.journal.append(rec)
        self.records[row["run_id"]] = rec
        self._journaled[row["run_id"]] = None
        if meta is not None and row["policy"] == MAXN and meta.get("baseline") != MAXN:
            meta["baseline"] = MAXN
            atomic_write_json(self.root / "meta.json", meta)

    def runs_frame(self, plan: SweepPlan) -> pd.DataFrame:
        rows = [self.records[r.run_id]["row"] for r in plan.runs if r.run_id in self.records]
        return pd.DataFrame(rows, columns=ROW_COLUMNS + [c for c in CLOCK_COLUMNS if any(c in r for r in rows)])

    def steps_frame(self, plan: SweepPlan) -> pd.DataFrame:
        """``steps.csv`` rows from the records' ``extras["step_rows"]`` (ok runs that kept them)."""
        rows = []
        for spec in plan.runs:
            rec = self.records.get(spec.run_id)
            if rec and rec["row"]["status"] == "ok":
                rows += step_rows_of(rec, spec.run_id)
        return pd.DataFrame(rows, columns=list(STEP_COLUMNS))

    def write_dataset(self, plan: SweepPlan, meta: dict, workloads: pd.DataFrame, *, steps: bool = False) -> None:
        """Compact: write the journal's records to ``runs/``, rewrite ``workloads.csv``,
        ``runs.csv``, with ``steps`` also ``steps.csv`` (when runs kept per-step rows), then
        ``meta.json`` (each atomically, so the directory always validates), and empty the journal
        last. ``steps.csv`` grows with every run, so the sweep writes it only when a session ends
        (finished, failed or interrupted); after a SIGKILL it lags until ``--resume``."""
        for run_id in self._journaled:
            atomic_write_json(self.runs_dir / f"{run_id}.json", self.records[run_id])
        fsync_dir(self.runs_dir)
        runs = self.runs_frame(plan)
        meta["baseline"] = MAXN if (runs["policy"] == MAXN).any() else "fmax"
        atomic_write_csv(self.root / "workloads.csv", merge_workloads(workloads, self.records), WORKLOAD_COLUMNS)
        atomic_write_csv(self.root / "runs.csv", runs, list(runs.columns))
        step_rows = self.steps_frame(plan) if steps else ()
        if len(step_rows):  # after runs.csv: runs are only ever added, so the old steps.csv stays valid meanwhile
            atomic_write_csv(self.root / "steps.csv", step_rows, STEP_COLUMNS)
        atomic_write_json(self.root / "meta.json", meta)
        self.journal.reset()  # last: until here, a crash leaves the journal to replay
        self._journaled.clear()

    def stored_meta(self) -> dict | None:
        """``meta.json`` of an earlier session, if any."""
        path = self.root / "meta.json"
        return read_json(path) if path.exists() else None


def stored_plan(out_dir: str | Path) -> SweepPlan | None:
    """The plan of the sweep in ``out_dir`` (its ``plan.json``, checked), None when there is none."""
    path = Path(out_dir) / "plan.json"
    return SweepPlan.from_json(read_json(path), path) if path.exists() else None


def stored_sim_board(out_dir: str | Path) -> str | None:
    """The simulated module the twin sweep in ``out_dir`` was started on (its meta.json
    ``device.profile``), None when there is no such sweep or it names none."""
    path = Path(out_dir) / "meta.json"
    if not path.exists():
        return None
    try:
        return (read_json(path).get("device") or {}).get("profile")
    except (OSError, ValueError, AttributeError):
        return None


def refuse_plan_changes(out_dir: str | Path, options: Mapping[str, object], *,
                        levels_mhz: Sequence[float] | None = None, pins: Mapping[str, object] | None = None,
                        joint: bool = False, no_maxn: bool = False) -> SweepPlan | None:
    """A resume without a plan runs the stored one: a plan setting given with another value is
    refused rather than ignored (applying it would mix runs measured two ways, e.g. 50 and 100
    steps, in one dataset, whose levels are then compared unfairly). ``options``: the plan's
    scalar settings given (``reps``, ``order``, ``seed``, ``steps``, ``warmup_steps``; None: not
    given); ``levels_mhz``: the GPU levels given; ``pins``: the other clocks given (``--emc``,
    ``--cpu``); ``joint``: a joint plan's options given; ``no_maxn``: MAXN runs left out. Return
    the stored plan (None: nothing to resume, which :meth:`SweepStore.open` then says)."""
    stored = stored_plan(out_dir)
    if stored is None:
        return None
    changed = [f"--{k.replace('_', '-')} {v} (the sweep has {getattr(stored, k)})" for k, v in options.items()
               if v is not None and v != getattr(stored, k)]
    if levels_mhz and sorted(float(f) for f in levels_mhz) != sorted(stored.levels_mhz):
        changed.append(f"--freqs {' '.join(f'{f:g}' for f in levels_mhz)} (the sweep has "
                       f"{' '.join(f'{f:g}' for f in stored.levels_mhz)})")
    if joint:
        changed.append("--knob/--design/--settings (the sweep has "
                       + (f"knobs {', '.join(n for n, _ in stored.knob_tables)}, design {stored.design}"
                          if stored.joint else "no joint knobs") + ")")
    if no_maxn and stored.maxn:
        changed.append("--no-maxn (the sweep has MAXN runs)")
    stored_pins = dict(stored.pins)
    for name, value in (pins or {}).items():
        if dict(normalize_pins({name: value}))[name] != stored_pins[name]:
            changed.append(f"--{name} {value} (the sweep has {name}={stored_pins[name]})")
    if changed:
        raise SweepError(f"{Path(out_dir) / 'plan.json'}: {'; '.join(changed)}: a resumed sweep keeps its plan, so "
                         "that every run of the dataset is measured the same way; resume with only --backend, --out "
                         "and --resume, or start a new sweep in another --out")
    return stored


def committed_run_ids(out_dir: str | Path) -> set[str]:
    """Ids of the runs committed in a sweep directory: compacted (``runs/``) or in the journal."""
    root = Path(out_dir)
    return {p.stem for p in (root / "runs").glob("*.json")} | {rec["row"]["run_id"] for _, rec in read_journal(root)}


def step_rows_of(record: Mapping, run_id: str) -> list[dict]:
    """``steps.csv`` rows of one run record (its ``extras["step_rows"]``; none if it kept none)."""
    per_step = record["extras"].get("step_rows") or {"time_s": [], "energy_j": []}
    return [{"run_id": run_id, "step": i, "time_s": t, "energy_j": e}
            for i, (t, e) in enumerate(zip(per_step["time_s"], per_step["energy_j"], strict=True))]


def read_json(path: Path) -> dict:
    """A JSON object from ``path``; :class:`DatasetError` naming the file and the fix otherwise."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DatasetError(path, f"unreadable JSON: {err}", fix="delete the file to redo that run") from None
    if not isinstance(obj, dict):
        raise DatasetError(path, "must hold a JSON object")
    return obj


# --------------------------------------------------------------------------------------------
# Record fields
# --------------------------------------------------------------------------------------------


def run_timestamp(backend: Backend) -> str:
    """``started_at``: wall-clock UTC on hardware; on the simulated board its virtual time
    counted from a fixed epoch (as ``dvfslab simulate`` does), so simulated sweeps are
    reproducible."""
    if backend.virtual_time:
        return (VIRTUAL_EPOCH + _dt.timedelta(seconds=round(backend.clock()))).strftime("%Y-%m-%dT%H:%M:%SZ")
    return utc_now()


def sweep_meta(backend: Backend, executor: Executor, plan: SweepPlan, cooldown: Cooldown,
               stored: dict | None, session: dict) -> dict:
    """``meta.json``: the contract's keys, the board description and every sweep setting."""
    desc = jsonable(dict(backend.description))
    _check_same_board((stored or {}).get("device", {}), desc)
    levels = backend.clocks.levels_mhz() if backend.clocks is not None else list(plan.levels_mhz)
    return build_meta(desc, levels, backend.name, simulated=backend.simulated,
                      energy_measured=backend.power is not None, executor=executor, plan=plan,
                      cooldown=cooldown, stored=stored, session=session, boards=[board_identity(backend)])


def build_meta(device: dict, levels_mhz, backend_name: str, *, simulated: bool, energy_measured: bool,
               executor: Executor, plan: SweepPlan, cooldown: Cooldown, stored: dict | None, session: dict,
               boards: list[dict]) -> dict:
    """``meta.json`` from a board (or board kind) description; ``boards`` (identities, see
    :func:`dvfslab.sweep.board.board_identity`) are added to those of earlier sessions."""
    from dvfslab import __version__

    stored = stored or {}
    known = dict(stored.get("boards") or {})
    known.update({b["board_id"]: b for b in boards})
    meta = {"schema_version": 1, "source": "simulated" if simulated else "measured", "device": device,
            "freq_table_mhz": [float(f) for f in levels_mhz], "baseline": "fmax",
            "created_at": stored.get("created_at", utc_now()), "dvfslab_version": __version__,
            "energy_measured": energy_measured, "boards": known,
            "sweep": {"backend": backend_name, "plan": plan.settings(), "cooldown": asdict(cooldown),
                      "executor": describe_executor(executor),
                      "sessions": stored.get("sweep", {}).get("sessions", []) + [session]}}
    meta.update(plan.joint_meta())  # a joint plan's knobs and settings (empty for a GPU-only plan)
    if simulated:
        meta["generator"] = f"dvfslab sweep on the simulated board ({type(executor).__name__})"
        meta["seed"] = device.get("seed", plan.seed)
    return meta


def _check_same_board(stored_device: Mapping, desc: Mapping) -> None:
    for key in ("board", "jetpack", "power_mode", "seed"):
        old = stored_device.get(key)
        if old is not None and desc.get(key) is not None and old != desc[key]:
            raise SweepError(f"meta.json: this sweep was started with {key}={old!r} but the board now "
                             f"reports {key}={desc[key]!r}; resume with the same board and settings "
                             "(power mode, --seed on the twin) or start a new --out")
