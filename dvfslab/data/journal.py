"""The run journal of a sweep in progress: ``runs.journal``, one JSON line per committed run.

A sweep commits a finished run by appending its record (``{"row": runs.csv row, "extras":
...}``) to this file and fsyncing it: the commit costs the same whatever the number of runs
already done. The sweep compacts the journal (into ``runs/<run_id>.json`` and ``runs.csv``,
then empties it) when a session ends and when it resumes; meanwhile :func:`read_journal`
gives readers of the directory (:func:`dvfslab.data.contract.load_dataset`, hence
``dvfslab validate`` and the pipeline) the runs not yet in ``runs.csv``.

Format: a first line ``{"format": "dvfslab-run-journal", "version": 1}``, then one record per
line, so record ``k`` is on line ``k + 1``. Appends are the only writes between compactions, so
only the last line can be cut short (a kill in the middle of a write, or a power loss before
its fsync): a last line without its newline is dropped with a :class:`JournalWarning` naming
it (its run was never committed and is run again on resume). Any other unreadable line is
damage from outside, refused with a :class:`JournalError` naming it.

Readers read the journal *before* ``runs.csv``: compaction writes ``runs.csv`` first and
empties the journal last, so a reader never misses a committed run.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import atomic_write_bytes, jsonable

JOURNAL_NAME = "runs.journal"
HEADER = {"format": "dvfslab-run-journal", "version": 1}


class JournalWarning(UserWarning):
    """A journal's last line was cut short (a write a kill interrupted); it was dropped."""


class JournalError(DvfsError):
    """A journal line other than the last is unreadable: the file was damaged from outside."""


def journal_path(root: str | os.PathLike, name: str = JOURNAL_NAME) -> Path:
    return Path(root) / name


def read_journal(root: str | os.PathLike, name: str = JOURNAL_NAME) -> list[tuple[int, dict]]:
    """``(line number, record)`` of every committed run in ``root``'s journal ``name`` (none when
    absent); another ``name`` holds other records of the same form (a fine-tuning run kept aside)."""
    path = journal_path(root, name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with its newline
    if torn:
        warnings.warn(f"{path}: line {len(lines) + 1} was cut short (a write interrupted by a kill or a "
                      "power loss) and is ignored; its run was not committed and is run again on --resume",
                      JournalWarning, stacklevel=2)
    if not lines or _parse(path, 1, lines[0]) != HEADER:
        raise JournalError(f"{path}: line 1 is not a dvfslab run journal header {json.dumps(HEADER)}; "
                           "move the file away (the runs it holds are then done again on --resume)")
    out = []
    for number, line in enumerate(lines[1:], start=2):
        record = _parse(path, number, line)
        if not isinstance(record.get("row"), dict) or "run_id" not in record["row"]:
            raise JournalError(f"{path}: line {number} is not a run record; delete that line "
                               "(its run is then done again on --resume)")
        out.append((number, record))
    return out


def _parse(path: Path, number: int, line: bytes) -> dict:
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        obj = None
    if not isinstance(obj, dict):
        raise JournalError(f"{path}: line {number} is not a JSON object; delete that line "
                           "(its run is then done again on --resume)")
    return obj


def fsync_dir(path: str | os.PathLike) -> None:
    """Make the entries of directory ``path`` (files created or renamed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that cannot sync a directory
        pass
    finally:
        os.close(fd)


class RunJournal:
    """The writer's side: :meth:`append` a record (fsynced), :meth:`reset` after a compaction."""

    def __init__(self, root: str | os.PathLike, name: str = JOURNAL_NAME):
        self.path = journal_path(root, name)
        self._fh = None

    def reset(self) -> None:
        """Replace the journal by an empty one (its header only), atomically and durably."""
        self.close()
        atomic_write_bytes(self.path, _line(HEADER))
        fsync_dir(self.path.parent)

    def append(self, record: dict) -> None:
        """Commit one record: one write of one line, then fsync."""
        if self._fh is None:
            if not self.path.exists():
                self.reset()
            self._fh = open(self.path, "ab")  # noqa: SIM115 - held across appends, closed by close()
        self._fh.write(_line(record))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _line(obj: dict) -> bytes:
    return (json.dumps(jsonable(obj), allow_nan=False, separators=(",", ":")) + "\n").encode()
