"""File helpers used by every writer: atomic writes of files and whole folders, strict JSON, one lock, one timestamp."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def utc_now() -> str:
    """The current UTC time as ``2026-01-01T12:00:00Z`` (seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def jsonable(obj: Any) -> Any:
    """A strict-JSON copy: numpy scalars to Python, NaN/inf to None, tuples to lists, keys to str.

    Objects JSON cannot hold (paths, dates ...) become their ``str``.
    """
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, then rename.

    A reader (or a crash) never sees a half-written file: it sees the old file or the new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Strict JSON (see :func:`jsonable`), indented, keys sorted, written atomically."""
    atomic_write_text(path, json.dumps(jsonable(obj), indent=2, sort_keys=True, allow_nan=False) + "\n")


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created when missing) for the ``with`` block;
    the file is removed when the block ends, however it ends, so no stale lock file stays.

    Advisory and per open file: it serializes dvfslab processes writing the same folder. A
    waiter that gets the lock of a file its holder has meanwhile removed locks the new one.
    On systems without ``fcntl`` the block runs unlocked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(path, "a")  # noqa: SIM115 - closed below, after the unlock
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            held, named = os.fstat(fh.fileno()), os.stat(path)
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                break
        except FileNotFoundError:
            pass
        fh.close()  # removed (and perhaps recreated) by the holder before us: lock what the path names now
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


# --------------------------------------------------------------------------------------------
# Whole folders: written beside, renamed into place
# --------------------------------------------------------------------------------------------

#: a temporary sibling of ``DEST`` is ``.DEST.dvfslab-<pid>-<random>`` (its writer's pid: a later
#: write to ``DEST`` removes those whose writer is dead)
_SIBLING = ".{name}.dvfslab-"
#: TEST-ONLY: with ``DVFSLAB_TEST_PAUSE_AT=<point>`` in its environment, a process that reaches
#: that point of :func:`new_folder` prints ``dvfslab-test: paused at <point>`` to standard error
#: and waits for its standard input to close, so that a test can kill it exactly there. Never set
#: it outside tests.
TEST_PAUSE_ENV = "DVFSLAB_TEST_PAUSE_AT"
#: the points of :func:`new_folder`: the empty sibling made, the new folder written in it,
#: the new folder in place with the old one not yet deleted
FOLDER_POINTS = ("sibling-created", "written", "swapped")


def pause_point(name: str) -> None:
    """TEST-ONLY (see :data:`TEST_PAUSE_ENV`); does nothing unless that variable names ``name``."""
    if os.environ.get(TEST_PAUSE_ENV) == name:
        import sys

        print(f"dvfslab-test: paused at {name}", file=sys.stderr, flush=True)
        sys.stdin.read()


def folder_contents(path: str | os.PathLike) -> str | None:
    """What ``path`` holds, in words (None: nothing there, or an empty folder).

    "a sweep (plan.json, N runs committed)", "a dataset (meta.json says source=...)",
    "a file", or "N entries (first names ...)".
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_dir():
        return "a file, not a folder"
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return None
    if "plan.json" in entries:
        n = len(list((path / "runs").glob("*.json"))) if (path / "runs").is_dir() else 0
        return f"a sweep (plan.json, {n} run records in runs/)"
    if "meta.json" in entries:
        try:
            source = json.loads((path / "meta.json").read_text(encoding="utf-8")).get("source")
        except (OSError, ValueError, AttributeError):
            source = "unreadable"
        return f"a dataset (meta.json says source={source})"
    if "ensemble.json" in entries:
        return "an ensemble (ensemble.json)"
    if "summary.json" in entries:
        return "a pipeline output (summary.json)"
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    return f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} ({shown})"


#: the file a folder writer (``pipeline``, ``simulate``, ``import``) leaves in its output, naming
#: the command that wrote it: ``--force`` replaces only a folder holding this command's own marker
OUTPUT_MARKER = ".dvfslab-output.json"


def write_output_marker(folder: str | os.PathLike, command: str) -> None:
    """Mark ``folder`` as ``command``'s output (no time in it: the same output, the same bytes)."""
    atomic_write_json(Path(folder) / OUTPUT_MARKER, {"written_by": command})


def written_by(path: str | os.PathLike) -> str | None:
    """The command whose output ``path`` is (its :data:`OUTPUT_MARKER`), else None."""
    try:
        obj = json.loads((Path(path) / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    owner = obj.get("written_by") if isinstance(obj, dict) else None
    return owner if isinstance(owner, str) else None


def refuse_occupied(path: str | os.PathLike, command: str, *, force: bool = False) -> None:
    """Raise a one-line error when ``path`` holds anything, unless it is ``command``'s own earlier
    output (its :data:`OUTPUT_MARKER`) and ``force``: ``--force`` never replaces a dataset, a
    sweep or a folder some other command (or a person) wrote."""
    held = folder_contents(path)
    if held is None:
        return
    owner = written_by(path) if Path(path).is_dir() else None
    if owner == command:
        if force:
            return
        from dvfslab.core.errors import DvfsError

        raise DvfsError(f"{path} already holds {held}, an earlier output of {command}; pick another --out, "
                        "or add --force to replace it")
    from dvfslab.core.errors import DvfsError

    by = f", written by {owner}" if owner else ""
    raise DvfsError(f"{path} already holds {held}{by}; {command} {'--force ' if force else ''}replaces only a "
                    f"folder it wrote itself ({OUTPUT_MARKER} in it): pick another --out, or move that folder "
                    "away yourself if you mean to lose it")


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


def refuse_overlap(out: str | os.PathLike, inputs: Mapping[str, str | os.PathLike | None], command: str) -> None:
    """Raise a one-line error naming both paths when ``out`` is, contains or lies inside one of
    the folders or files ``command`` reads (``inputs``: the option that names it -> its path;
    None: not given). Paths are compared resolved (links followed), whether they exist or not."""
    target = _real(out)
    for option, given in inputs.items():
        if given is None:
            continue
        read = _real(given)
        if target == read:
            how = "is"
        elif target in read.parents:
            how = "contains"
        elif read in target.parents:
            how = "lies inside"
        else:
            continue
        from dvfslab.core.errors import DvfsError

        raise DvfsError(f"--out {out} {how} {option} {given}, which {command} reads: writing there would replace "
                        "what it reads; pick an --out outside it")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (other users' count; zombies do not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: a killed process its parent has not reaped yet is a zombie ("Z")
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")
    except (OSError, ValueError, IndexError):
        return True


def _clean_dead_siblings(dest: Path) -> None:
    """Remove temporary siblings of ``dest`` whose writer died (SIGKILL, power loss)."""
    import shutil

    prefix = _SIBLING.format(name=dest.name)
    for p in dest.parent.glob(prefix + "*"):
        pid = p.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def publish_folder(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Put the complete folder ``tmp`` at ``dest`` (a sibling), replacing what is there.

    ``dest`` missing or an empty folder: one rename. Otherwise the two are swapped in one atomic
    step where the system allows it (Linux), else ``dest`` is renamed aside first; the old
    folder is deleted last. At every moment ``dest`` is the old folder, the new one, or (only
    between the two renames of the fallback) absent with both complete beside it.
    """
    import shutil

    tmp, dest = Path(tmp), Path(dest)
    fsync_tree(tmp)
    try:
        os.rename(tmp, dest)  # onto a missing path or an empty folder
        old = None
    except OSError:
        if dest.is_symlink() or not dest.is_dir():  # a file, or a link: replace it, not what it points at
            dest.unlink()
            os.rename(tmp, dest)
            old = None
        elif _exchange(tmp, dest):
            old = tmp  # now holds the old folder
        else:
            old = tmp.with_name(tmp.name + "-old")
            os.rename(dest, old)
            os.rename(tmp, dest)
    _fsync_dir(dest.parent)
    if old is not None:
        pause_point("swapped")
        shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """fsync every file and folder under ``root`` (what a rename then publishes is on disk)."""
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        _fsync_dir(Path(dirpath))


def new_sibling(dest: str | os.PathLike) -> Path:
    """An empty temporary folder beside ``dest`` (``.DEST.dvfslab-<pid>-…``), to be published with
    :func:`publish_folder`; siblings that dead writers left are removed first."""
    dest = Path(dest).absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    _clean_dead_siblings(dest)
    tmp = Path(tempfile.mkdtemp(prefix=_SIBLING.format(name=dest.name) + f"{os.getpid()}-", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp.resolve()


@contextlib.contextmanager
def new_folder(dest: str | os.PathLike, command: str, *, force: bool = False,
               reads: Mapping[str, str | os.PathLike | None] | None = None) -> Iterator[Path]:
    """Write a whole folder: yield an empty temporary sibling of ``dest``; when the block ends
    without an exception, mark it as ``command``'s output (:data:`OUTPUT_MARKER`) and rename it
    into place (:func:`publish_folder`).

    ``dest`` that is, contains or lies inside one of ``reads`` (option -> path) is refused, with
    ``force`` too (:func:`refuse_overlap`); ``dest`` holding anything is refused unless it is
    ``command``'s own earlier output and ``force`` (:func:`refuse_occupied`); on an exception
    (Ctrl-C included) the sibling is deleted and ``dest`` is left as it was; after a SIGKILL the
    sibling stays until the next write to ``dest`` removes it.
    """
    import shutil

    dest = Path(dest)
    refuse_overlap(dest, reads or {}, command)
    refuse_occupied(dest, command, force=force)
    tmp = new_sibling(dest)
    try:
        pause_point("sibling-created")
        yield tmp
        write_output_marker(tmp, command)
        pause_point("written")
        refuse_occupied(dest, command, force=force)  # something appeared there meanwhile
        publish_folder(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
