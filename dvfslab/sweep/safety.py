"""What keeps a days-long sweep safe: lock files that survive crashes, signals as exceptions.

* :class:`SweepLock`: an exclusive lock file (``O_CREAT | O_EXCL``) recording its owner
  (pid, host, boot id, process start time). A lock whose owner is dead, or from an earlier
  boot, is stale and taken over; one from another host is never taken over.
* :func:`board_lock_path`: the per-board lock, so that two sweeps (in two output
  directories) cannot drive one board's clocks at once.
* :func:`signals_as_interrupt`: SIGTERM and SIGHUP raise :class:`SweepInterrupted`, so that
  every ``finally`` runs (clocks restored, lock released) as on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import file_lock, pid_alive, utc_now
from dvfslab.hw.base import Backend

LOCK_DIR_ENV = "DVFSLAB_LOCK_DIR"


class SweepLockedError(DvfsError):
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
    if not pid_alive(pid):  # no such process, or a zombie
        return False
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
        with file_lock(self.path.with_name(self.path.name + ".guard")):
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

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def board_lock_path(backend: Backend, lock_dir: str | Path | None = None) -> Path | None:
    """Where the per-board lock lives (``$DVFSLAB_LOCK_DIR`` or the temp dir); None for a
    simulated board (each process has its own) and a backend without clock control.

    The board is identified by the backend name and the identity keys of its description
    (sysfs root, device index, PCI bus id, ...), so fake trees in tests get their own lock.
    """
    if backend.clocks is None or backend.simulated:
        return None
    ident = {k: str(v) for k, v in sorted(backend.description.items()) if k in BOARD_ID_KEYS}
    digest = hashlib.sha1(json.dumps([backend.name, ident]).encode()).hexdigest()[:16]
    root = Path(lock_dir or os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir())
    return root / f"dvfslab-board-{backend.name}-{digest}.lock"


BOARD_ID_KEYS = ("sysfs_root", "devfreq", "devfreq_path", "gpu_node", "index", "device_index",
                 "pci_bus_id", "uuid", "serial")


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
