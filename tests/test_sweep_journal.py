"""The sweep's run journal (issue 25, item 6): a commit appends one fsynced line; the journal is
compacted into runs/ and runs.csv when a session ends and on resume; every reader of a sweep in
progress (load_dataset, hence `dvfslab validate` and the pipeline; the live lab's sweep panel; a
fleet client resuming it) sees every committed run, and a cut-short last line is dropped with a
warning.

``uncompacted_sweep`` leaves a directory exactly as a sweep killed after some commits does: the
sweep's own store, its first compaction (session start), then commits and nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dvfslab.cli import main
from dvfslab.data.contract import load_dataset, read_runs
from dvfslab.data.journal import (
    JOURNAL_NAME,
    JournalError,
    JournalWarning,
    RunJournal,
    read_journal,
)
from dvfslab.data.workloads import workload_table
from dvfslab.hw import get_backend
from dvfslab.sweep.plan import make_plan
from dvfslab.sweep.runner import execute_run, run_sweep
from dvfslab.sweep.session import Cooldown
from dvfslab.sweep.store import ROW_COLUMNS, SweepStore, committed_run_ids, sweep_meta
from dvfslab.sweep.twin import SimExecutor

REPO = Path(__file__).resolve().parents[1]
COOL = Cooldown(max_temp_c=None, idle_power_tol=1.0, timeout_s=0.0, idle_measure_s=0.0)


def small_plan():
    return make_plan(["bert-small/sst2", "pythia-70m/rte"], [306.0, 1300.5], steps=4, warmup_steps=1,
                     order="sequential")  # 2 workloads x (2 levels + MAXN) = 6 runs, MAXN 3rd and 6th


def uncompacted_sweep(out: Path, n_committed: int, *, fail: bool = False):
    """A sweep of ``small_plan()`` on the twin killed after committing its first ``n_committed``
    runs (``fail``: the first one failed): returns the plan and the committed records."""
    backend, executor, plan = get_backend("sim", seed=0), SimExecutor(), small_plan()
    store = SweepStore(out)
    plan = store.open(plan, resume=False)
    meta = sweep_meta(backend, executor, plan, COOL, None, {"started_at": "2026-01-01T00:00:00Z"})
    store.write_dataset(plan, meta, workload_table(plan.workloads))  # the session's first compaction
    records = []
    for i, spec in enumerate(plan.runs[:n_committed]):
        row, extras = execute_run(spec, backend, executor, COOL, None)
        if fail and i == 0:
            row.update(status="failed", error="RuntimeError: injected")
        store.commit(row, extras, meta)
        records.append({"row": row, "extras": extras})
    store.journal.close()  # the process dies here: no compaction
    return plan, records


def test_a_commit_appends_one_line_and_rewrites_nothing(tmp_path):
    out = tmp_path / "s"
    _, records = uncompacted_sweep(out, 4)
    lines = (out / JOURNAL_NAME).read_text().splitlines()
    assert json.loads(lines[0]) == {"format": "dvfslab-run-journal", "version": 1}
    assert [json.loads(line) for line in lines[1:]] == records  # one line per commit, in order
    assert (out / "runs.csv").read_text() == ",".join(ROW_COLUMNS) + "\n"  # as the session began: no row
    assert not list((out / "runs").glob("*.json"))
    # the first MAXN run (the 3rd) turned meta.json's baseline to maxn at once
    assert json.loads((out / "meta.json").read_text())["baseline"] == "maxn"


def test_load_dataset_and_validate_see_every_committed_run(tmp_path, capsys):
    out = tmp_path / "s"
    plan, records = uncompacted_sweep(out, 4)
    ds = load_dataset(out)
    assert list(ds.runs["run_id"]) == [r.run_id for r in plan.runs[:4]]
    assert ds.baseline == "maxn" and (ds.runs["policy"] == "maxn").sum() == 1
    assert ds.runs["time_s"].tolist() == [r["row"]["time_s"] for r in records]  # exact: JSON keeps every digit
    assert main(["validate", str(out)]) == 0
    assert "4 runs" in capsys.readouterr().out


def test_a_cut_short_last_line_is_dropped_with_a_warning(tmp_path):
    """A kill in the middle of the 4th append: line 5 (header + 3 records + the torn one)."""
    out = tmp_path / "s"
    plan, records = uncompacted_sweep(out, 4)
    journal = out / JOURNAL_NAME
    data = journal.read_bytes()
    journal.write_bytes(data[: len(data) - 40])  # the last record lost its end and its newline
    with pytest.warns(JournalWarning, match=rf"{JOURNAL_NAME}: line 5 was cut short .* run again on --resume"):
        ds = load_dataset(out)
    assert list(ds.runs["run_id"]) == [r.run_id for r in plan.runs[:3]]
    with pytest.warns(JournalWarning):  # resume: the torn run is done again, each run once
        done = run_sweep(None, get_backend("sim", seed=0), SimExecutor(), out, resume=True, cooldown=COOL,
                         progress=False)
    assert list(done.runs["run_id"]) == [r.run_id for r in plan.runs]
    assert read_journal(out) == [] and journal.read_text().count("\n") == 1  # compacted: header only
    kept = json.loads((out / "runs" / f"{plan.runs[0].run_id}.json").read_text())
    assert kept == records[0]  # the committed record, compacted unchanged


def test_damaged_lines_other_than_the_last_are_refused_naming_the_line(tmp_path):
    out = tmp_path / "s"
    uncompacted_sweep(out, 3)
    journal = out / JOURNAL_NAME
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:2] + ["{not json\n"] + lines[3:]))
    with pytest.raises(JournalError, match=rf"{JOURNAL_NAME}: line 3 is not a JSON object; delete that line"):
        load_dataset(out)
    journal.write_text("".join(lines[1:]))  # no header
    with pytest.raises(JournalError, match="line 1 is not a dvfslab run journal header"):
        read_journal(out)
    assert main(["validate", str(out)]) == 2


def test_a_retried_run_replaces_its_failed_row_for_readers(tmp_path):
    out = tmp_path / "s"
    plan, _ = uncompacted_sweep(out, 2, fail=True)
    run_sweep(None, get_backend("sim", seed=0), SimExecutor(), out, resume=True, cooldown=COOL, progress=False,
              retry_failed=False)  # compacted: runs.csv holds the failed run
    first = plan.runs[0].run_id
    assert pd.read_csv(out / "runs.csv").set_index("run_id").loc[first, "status"] == "failed"
    store = SweepStore(out)
    plan = store.open(None, resume=True)
    row, extras = execute_run(plan.runs[0], get_backend("sim", seed=0), SimExecutor(), COOL, None)
    store.commit(row, extras)  # the retry, then a kill
    store.journal.close()
    runs = read_runs(out)
    assert runs["run_id"].is_unique and len(runs) == len(plan)
    assert runs.set_index("run_id").loc[first, "status"] == "ok"


def test_resume_compacts_and_runs_only_what_was_not_committed(tmp_path):
    out = tmp_path / "s"
    plan, records = uncompacted_sweep(out, 4)
    assert committed_run_ids(out) == {r.run_id for r in plan.runs[:4]}
    ran = []
    ds = run_sweep(None, get_backend("sim", seed=0), SimExecutor(), out, resume=True, cooldown=COOL,
                   progress=False, on_run=lambda rec: ran.append(rec["row"]["run_id"]))
    assert ran == [r.run_id for r in plan.runs[4:]]
    assert list(ds.runs["run_id"]) == [r.run_id for r in plan.runs]
    assert ds.meta["sweep"]["sessions"][-1]["runs_done_before"] == 4
    assert sorted(p.stem for p in (out / "runs").glob("*.json")) == sorted(r.run_id for r in plan.runs)
    assert read_journal(out) == []


def test_the_sweep_panel_draws_the_runs_of_a_killed_session(tmp_path):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("matplotlib")
    from dvfslab.lab.sweep_panel import SweepPanel

    out = tmp_path / "s"
    plan, records = uncompacted_sweep(out, 4)
    twin = get_backend("sim", seed=0)
    panel = SweepPanel(twin, SimExecutor(), out, plan, resume=True, cooldown=COOL)
    panel._load_existing()  # what run() draws before the sweep goes on
    assert [p["run_id"] for p in panel.points] == [r.run_id for r in plan.runs[:4]]
    assert [p["energy_j"] for p in panel.points] == [r["row"]["energy_j"] for r in records]
    assert panel.progress.value == 4


def test_a_fleet_client_resuming_the_sweep_keeps_every_committed_run(tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from dvfslab.sweep.fleet import run_fleet_sweep

    out = tmp_path / "s"
    plan, records = uncompacted_sweep(out, 4)
    ran = []
    with LocalCluster(n_workers=1, threads_per_worker=1, resources={"board": 1}, dashboard_address=":0",
                      processes=False, protocol="tcp://", host="127.0.0.1") as cluster, Client(cluster) as client:
        ds = run_fleet_sweep(None, client, out, executor=SimExecutor(), cooldown=COOL, resume=True, progress=False,
                             on_run=lambda rec: ran.append(rec["row"]["run_id"]))
    assert sorted(ran) == sorted(r.run_id for r in plan.runs[4:])
    assert sorted(ds.runs["run_id"]) == sorted(r.run_id for r in plan.runs)
    for rec in records:  # the committed runs, compacted as they were, not run again
        assert json.loads((out / "runs" / f"{rec['row']['run_id']}.json").read_text()) == rec


def test_validate_of_a_killed_sweep_in_a_subprocess(tmp_path):
    """`python -m dvfslab validate` (a separate reader process) on the uncompacted directory."""
    out = tmp_path / "s"
    uncompacted_sweep(out, 5)
    done = subprocess.run([sys.executable, "-m", "dvfslab", "validate", str(out)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "5 runs" in done.stdout


def test_run_journal_appends_after_a_reset_only(tmp_path):
    journal = RunJournal(tmp_path)
    journal.append({"row": {"run_id": "a"}, "extras": {}})  # creates the file with its header first
    journal.reset()
    journal.append({"row": {"run_id": "b"}, "extras": {"x": float("nan")}})
    journal.close()
    assert [rec["row"]["run_id"] for _, rec in read_journal(tmp_path)] == ["b"]
    assert read_journal(tmp_path)[0] == (2, {"row": {"run_id": "b"}, "extras": {"x": None}})


def test_the_cut_short_line_warning_is_one_line_in_the_cli(tmp_path, capsys):
    out = tmp_path / "s"
    uncompacted_sweep(out, 2)
    journal = out / JOURNAL_NAME
    journal.write_bytes(journal.read_bytes()[:-30])
    assert main(["validate", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"dvfslab validate: warning: {journal}: line 3 was cut short (a write interrupted by "
                            "a kill or a power loss) and is ignored; its run was not committed and is run again "
                            "on --resume\n")
    assert "1 runs" in captured.out
