"""No write destroys a dataset (issue 30, item 2; issue 36, item 1).

``dvfslab simulate`` and ``dvfslab import`` refuse an ``--out`` that holds anything (a sweep
here), leaving it byte for byte as it was, ``--force`` or not; ``--force`` replaces only an
earlier output of the same command (its marker file), writing the new folder beside it and
swapping it in. Killed (SIGKILL) at seeded points of that write, a destination is either the old
folder, intact, or the new one, complete: the same bytes as a write nobody killed. The kill
points are where the child reports it stands (``dvfslab-test: paused at <point>``, the
test-only hook :data:`dvfslab.core.files.TEST_PAUSE_ENV`), never a sleep.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.core.errors import DvfsError
from dvfslab.core.files import (
    FOLDER_POINTS,
    OUTPUT_MARKER,
    TEST_PAUSE_ENV,
    new_folder,
    write_output_marker,
)
from dvfslab.data.contract import load_dataset

ROOT = Path(__file__).resolve().parents[1]
ZEUS = ROOT / "data" / "external" / "zeus_nsdi23"
SIMULATE = ["simulate", "--quick", "--models", "bert-small", "--steps", "10", "--reps", "1", "--no-progress"]
IMPORT = ["import", "zeus-nsdi", str(ZEUS), "--gpu", "v100"]
ENSEMBLE = ["simulate", "--ensemble", "2", "--quick", "--no-progress"]
PIPELINE = ["pipeline", "--data", str(ROOT / "tests" / "data" / "example"), "--quick", "--no-html"]
LOUDVA = ["import", "loudva", str(ROOT / "data" / "external" / "loudva"), "--board", "nano"]


def tree_hash(path: Path) -> str:
    """Every file under ``path`` (hidden ones too): relative name and bytes."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(str(p.relative_to(path)).encode() + b"\0")
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def a_sweep(path: Path) -> Path:
    """A folder holding a sweep in progress (what `dvfslab sweep` leaves: plan.json, runs/, journal)."""
    (path / "runs").mkdir(parents=True)
    (path / "plan.json").write_text('{"format": "dvfslab-sweep-plan", "run_ids": ["a", "b"]}\n')
    (path / "runs" / "a.json").write_text('{"row": {"run_id": "a", "status": "ok"}}\n')
    (path / "runs.journal").write_text('{"row": {"run_id": "b", "status": "ok"}}\n')
    return path


def an_earlier_output(path: Path, command: str) -> Path:
    """A folder ``command`` wrote before (its marker, and a file of the old output)."""
    path.mkdir(parents=True)
    write_output_marker(path, command)
    (path / "runs.csv").write_text("run_id\nold\n")
    return path


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("command", [SIMULATE, IMPORT, LOUDVA, ENSEMBLE, PIPELINE],
                         ids=["simulate", "import-zeus", "import-loudva", "ensemble", "pipeline"])
def test_a_folder_holding_a_sweep_is_refused_and_left_unchanged(tmp_path, capsys, command, force):
    out = a_sweep(tmp_path / "out")
    before = tree_hash(out)
    assert main([*command, "--out", str(out), *force]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{out} already holds a sweep (plan.json, 1 run records in runs/)" in err
    assert "add --force" not in err and "replaces only a folder it wrote itself" in err  # no hint towards a loss
    assert tree_hash(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no sibling left behind


def test_an_empty_folder_is_not_refused(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert main([*IMPORT, "--out", str(out)]) == 0
    assert load_dataset(out).meta["source"] == "measured"


def test_force_replaces_its_own_earlier_output_by_a_complete_dataset(tmp_path, capsys):
    out = an_earlier_output(tmp_path / "out", "dvfslab import zeus-nsdi")
    assert main([*IMPORT, "--out", str(out)]) == 2  # without --force: refused, with the hint
    assert "an earlier output of dvfslab import zeus-nsdi; pick another --out, or add --force" in \
        capsys.readouterr().err
    assert main([*IMPORT, "--out", str(out), "--force"]) == 0
    assert f"-> {out}" in capsys.readouterr().out  # the dataset's path is --out, not the sibling
    assert (out / "runs.csv").read_text() != "run_id\nold\n" and load_dataset(out).meta["source"] == "measured"
    assert json.loads((out / OUTPUT_MARKER).read_text()) == {"written_by": "dvfslab import zeus-nsdi"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # another command's output is foreign to this one: --force does not replace it
    before = tree_hash(out)
    assert main([*LOUDVA, "--out", str(out), "--force"]) == 2
    assert "written by dvfslab import zeus-nsdi; dvfslab import loudva --force replaces only" in \
        capsys.readouterr().err
    assert tree_hash(out) == before


def test_an_exception_inside_leaves_the_destination_as_it_was(tmp_path):
    out = a_sweep(tmp_path / "out")
    before = tree_hash(out)
    with pytest.raises(DvfsError, match="already holds a sweep"), new_folder(out, "test", force=True):
        pass  # a foreign folder: refused before the block, --force or not
    out = an_earlier_output(tmp_path / "own", "test")
    before = tree_hash(out)
    with pytest.raises(RuntimeError), new_folder(out, "test", force=True) as tmp:
        (tmp / "meta.json").write_text("{}")
        raise RuntimeError("half-way")
    assert tree_hash(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out", "own"]
    with pytest.raises(DvfsError, match="an earlier output of test; pick another --out, or add --force"), \
            new_folder(out, "test"):
        pass


def _env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _kill_at(command: list[str], out: Path, point: str) -> None:
    """Run ``dvfslab COMMAND --out OUT --force`` until it reports ``point``, then SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-m", "dvfslab", *command, "--out", str(out), "--force"],
                            env={**_env(), TEST_PAUSE_ENV: point}, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    while True:
        line = proc.stderr.readline()
        if not line:  # never reached the point (not expected: each trial picks one it passes)
            raise AssertionError(f"dvfslab exited with {proc.wait()} before {point}: {''.join(seen)}")
        seen.append(line)
        if line.strip() == f"dvfslab-test: paused at {point}":
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdin.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("command,seed,writer", [(SIMULATE, 30, "dvfslab simulate"),
                                                 (IMPORT, 31, "dvfslab import zeus-nsdi")], ids=["simulate", "import"])
def test_sigkill_at_seeded_points_leaves_the_old_folder_or_the_new_one_complete(tmp_path, command, seed, writer):
    """5 kills each; a trial picks (seeded) a point of the write and whether --out held an old
    folder (the command's earlier output). "swapped" (new folder in place, old one not yet
    deleted) needs an old folder."""
    reference = tmp_path / "reference"
    assert subprocess.run([sys.executable, "-m", "dvfslab", *command, "--out", str(reference)], env=_env(),
                          capture_output=True, timeout=600).returncode == 0
    new = tree_hash(reference)
    rng = random.Random(seed)
    outcomes = []
    for trial in range(5):
        point = rng.choice(FOLDER_POINTS)
        had_old = point == "swapped" or rng.random() < 0.5
        parent = tmp_path / f"t{trial}"
        parent.mkdir()
        out = an_earlier_output(parent / "out", writer) if had_old else parent / "out"
        old = tree_hash(out) if had_old else None
        _kill_at(command, out, point)
        now = tree_hash(out) if out.exists() else None
        assert now in (old, new), f"trial {trial} ({point}, old folder: {had_old}): {out} is neither"
        # before the new folder is published the destination is the old one (or absent); once
        # swapped, it is the new one, complete: it validates
        assert now == (new if point == "swapped" else old)
        if now == new:
            load_dataset(out)
        outcomes.append(point)
        # what the killed writer left beside --out goes with the next write there
        assert main([*command, "--out", str(out), "--force"]) == 0
        assert tree_hash(out) == new and sorted(p.name for p in parent.iterdir()) == ["out"]
    assert len(outcomes) == 5
