"""No command destroys what it reads (issue 36, item 1).

Every writer refuses an ``--out`` that is, contains or lies inside one of its inputs, ``--force``
or not, in one line naming both paths; and ``--force`` never replaces a folder the command did
not write itself (its :data:`~dvfslab.core.files.OUTPUT_MARKER`). Each test builds the tree,
hashes every file (hidden ones too) before, and checks every byte survived.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.core.errors import DvfsError
from dvfslab.core.files import (
    OUTPUT_MARKER,
    file_lock,
    refuse_overlap,
    write_output_marker,
    written_by,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example"
ZEUS = ROOT / "data" / "external" / "zeus_nsdi23"


def hashes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) by its relative name: its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_pipeline_out_equal_to_its_data_is_refused(tmp_path, capsys, force):
    data = shutil.copytree(EXAMPLE, tmp_path / "X")
    before = hashes(tmp_path)
    assert main(["pipeline", "--data", str(data), "--out", str(data), "--quick", "--no-html", *force]) == 2
    err = one_error_line(capsys)
    assert f"--out {data} is --data {data}, which dvfslab pipeline reads" in err
    assert hashes(tmp_path) == before


def test_pipeline_out_holding_its_data_spares_the_data_and_its_siblings(tmp_path, capsys):
    parent = tmp_path / "P"
    twin = shutil.copytree(EXAMPLE, parent / "twin")
    shutil.copytree(EXAMPLE, parent / "other")
    before = hashes(tmp_path)
    assert main(["pipeline", "--data", str(twin), "--out", str(parent), "--quick", "--no-html", "--force"]) == 2
    assert f"--out {parent} contains --data {twin}" in one_error_line(capsys)
    assert hashes(tmp_path) == before
    # inside the dataset: refused as well (its report would sit among the dataset's files)
    assert main(["pipeline", "--data", str(twin), "--out", str(twin / "report"), "--quick", "--no-html"]) == 2
    assert f"--out {twin / 'report'} lies inside --data {twin}" in one_error_line(capsys)
    assert hashes(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["P"]


def test_pipeline_force_spares_a_folder_it_did_not_write(tmp_path, capsys):
    """`--data X --out P --force` where P holds another dataset: P is not a pipeline output."""
    shutil.copytree(EXAMPLE, tmp_path / "P" / "other")
    before = hashes(tmp_path)
    assert main(["pipeline", "--data", str(EXAMPLE), "--out", str(tmp_path / "P"), "--quick", "--no-html",
                 "--force"]) == 2
    err = one_error_line(capsys)
    assert "already holds 1 entry (other); dvfslab pipeline --force replaces only a folder it wrote itself" in err
    assert hashes(tmp_path) == before


def test_pipeline_keeps_its_incomplete_folder_off_a_foreign_one(tmp_path, capsys):
    """`<out>.incomplete` (where a failed run is kept) holding something the pipeline did not
    write: refused before the run, never deleted."""
    (tmp_path / "out.incomplete").mkdir()
    (tmp_path / "out.incomplete" / "notes.txt").write_text("mine\n")
    before = hashes(tmp_path)
    assert main(["pipeline", "--data", str(EXAMPLE), "--out", str(tmp_path / "out"), "--quick", "--no-html"]) == 2
    assert f"{tmp_path / 'out.incomplete'} holds a folder this pipeline did not write" in one_error_line(capsys)
    assert hashes(tmp_path) == before


@pytest.mark.parametrize("kind", ["zeus-nsdi", "loudva"])
def test_import_out_inside_or_around_its_source_is_refused(tmp_path, capsys, kind):
    src = shutil.copytree(ZEUS if kind == "zeus-nsdi" else ROOT / "data" / "external" / "loudva", tmp_path / "src")
    extra = ["--gpu", "v100"] if kind == "zeus-nsdi" else ["--board", "nano"]
    before = hashes(tmp_path)
    for out, how in ((src, "is"), (src / "ds", "lies inside"), (tmp_path, "contains")):
        assert main(["import", kind, str(src), *extra, "--out", str(out), "--force"]) == 2
        assert f"--out {out} {how} SRC {src}, which dvfslab import {kind} reads" in one_error_line(capsys)
    assert hashes(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_simulate_out_inside_its_work_folder_is_refused(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.json").write_text("{}\n")
    before = hashes(tmp_path)
    assert main(["simulate", "--quick", "--no-progress", "--work", str(work), "--out", str(work / "ds"),
                 "--force"]) == 2
    assert f"--out {work / 'ds'} lies inside --work {work}, which dvfslab simulate reads" in one_error_line(capsys)
    assert hashes(tmp_path) == before


def test_sweep_out_inside_its_sysfs_tree_is_refused(tmp_path, capsys):
    root = tmp_path / "sysfs"
    (root / "sys").mkdir(parents=True)
    (root / "sys" / "marker").write_text("board\n")
    before = hashes(tmp_path)
    assert main(["sweep", "--backend", "jetson", "--sysfs-root", str(root), "--out", str(root / "sys"),
                 "--workloads", "bert-base/sst2", "--no-progress"]) == 2
    assert f"--out {root / 'sys'} lies inside --sysfs-root {root}, which dvfslab sweep reads" in \
        one_error_line(capsys)
    assert hashes(tmp_path) == before


def test_finetune_out_equal_to_its_task_files_is_refused_before_loading(tmp_path, capsys):
    data = tmp_path / "glue"
    data.mkdir()
    (data / "train.csv").write_text("sentence,label\nfine,1\n")
    before = hashes(tmp_path)
    assert main(["finetune", "--model", "bert-tiny", "--random-init", "--task", "sst2", "--backend", "none",
                 "--data-dir", str(data), "--out", str(data), "--steps", "2", "--no-progress"]) == 2
    assert f"--out {data} is --data-dir {data}, which dvfslab finetune reads" in one_error_line(capsys)
    assert hashes(tmp_path) == before


def test_overlap_is_decided_on_resolved_paths(tmp_path):
    """A link to the input is the input; a sibling whose name starts alike is not inside it."""
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    with pytest.raises(DvfsError, match="is --data"):
        refuse_overlap(tmp_path / "link", {"--data": data}, "cmd")
    with pytest.raises(DvfsError, match="lies inside --data"):
        refuse_overlap(tmp_path / "link" / "out", {"--data": data}, "cmd")
    refuse_overlap(tmp_path / "data-out", {"--data": data, "--other": None}, "cmd")  # no error: a sibling


def test_the_marker_names_its_writer(tmp_path):
    write_output_marker(tmp_path, "dvfslab simulate")
    assert (tmp_path / OUTPUT_MARKER).read_text() == '{\n  "written_by": "dvfslab simulate"\n}\n'
    assert written_by(tmp_path) == "dvfslab simulate" and written_by(tmp_path / "nothing") is None


def test_the_bundled_dataset_is_marked_as_simulate_output():
    """`dvfslab simulate --out data/replay --seed 0 --force` (docs/calibration.md) may replace it."""
    assert written_by(ROOT / "data" / "replay") == "dvfslab simulate"


def test_a_lock_file_is_removed_on_every_exit(tmp_path):
    lock = tmp_path / ".dvfslab.lock"
    with file_lock(lock):
        assert lock.exists()
    assert not lock.exists()
    with pytest.raises(RuntimeError), file_lock(lock):
        raise RuntimeError("refused half-way")
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.slow  # two kernels
def test_a_successful_rerun_removes_the_failed_runs_incomplete_folder(tmp_path, monkeypatch):
    import nbformat

    from dvfslab.pipeline import runner

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()

    def notebook(code: str) -> None:
        book = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell('DATA_DIR = ""\nOUTPUT_DIR = ""\nSEED = 0\nQUICK = False',
                                      metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(code)])
        book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(book, nbdir / "00_probe.ipynb")

    monkeypatch.setattr(runner, "notebook_dir", lambda: nbdir)
    run = dict(notebooks=("00_probe",), progress=False, html=False, log=lambda s: None)
    notebook("raise ValueError('first try')")
    with pytest.raises(runner.PipelineError, match="first try"):
        runner.run_pipeline(EXAMPLE, tmp_path / "out", **run)
    assert written_by(tmp_path / "out.incomplete") == "dvfslab pipeline" and not (tmp_path / "out").exists()
    notebook("x = 1")
    runner.run_pipeline(EXAMPLE, tmp_path / "out", **run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbs", "out"]  # the stale .incomplete is gone
    assert written_by(tmp_path / "out") == "dvfslab pipeline"


def test_a_removed_lock_file_still_excludes_the_next_holder(tmp_path):
    """The holder removes the file when it is done; a waiter that locked the removed file locks
    the path again, so two holders never overlap (their entries and exits alternate)."""
    import threading

    lock, events, b_started = tmp_path / ".dvfslab.lock", [], threading.Event()

    def second():
        b_started.set()
        with file_lock(lock):
            events.append("B in")
        events.append("B out")

    with file_lock(lock):
        events.append("A in")
        thread = threading.Thread(target=second)
        thread.start()
        b_started.wait(timeout=30)  # B is on its way to the lock A holds
        events.append("A out")
    thread.join(timeout=30)
    assert events == ["A in", "A out", "B in", "B out"] and not lock.exists()
