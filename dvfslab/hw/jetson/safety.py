"""What keeps a Jetson from being left pinned: the state file and the signal guard.

The state file holds the clock settings the board had before dvfslab first changed them
(governor, ``min_freq``, ``max_freq`` in Hz, the GPU's ``power/control``, and the EMC's and the
CPU clusters' settings when dvfslab pins them too). It is written
atomically *before* the first sysfs write and removed after a successful restore, so after a
SIGKILL or a power loss
``dvfslab clocks --restore`` (or the next lock, which adopts it) gets the originals back.

Files live in ``$DVFSLAB_STATE_DIR``, else ``$XDG_STATE_HOME/dvfslab``, else
``~/.local/state/dvfslab``; the name is keyed by sysfs root and devfreq node, so fake trees
in tests never collide with each other or with the real board.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import pid_alive

STATE_DIR_ENV = "DVFSLAB_STATE_DIR"
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def default_state_dir() -> Path:
    """``$DVFSLAB_STATE_DIR``, ``$XDG_STATE_HOME/dvfslab`` or ``~/.local/state/dvfslab``."""
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "dvfslab"
    return Path.home() / ".local" / "state" / "dvfslab"


@dataclass(frozen=True)
class SavedClocks:
    """The original clock settings of one devfreq node (Hz), and who saved them."""

    sysfs_root: str
    node: str
    governor: str | None
    min_freq_hz: int
    max_freq_hz: int
    pid: int
    saved_at: float
    railgate_control: str | None = None  # gpu.0/power/control ("auto"); None: no such file
    #: the other clocks' originals, by name ("emc": lock flag and rate; "cpu": each policy's
    #: governor, min and max), saved before their first write; None: none pinned
    others: dict | None = None

    def describe(self) -> str:
        rail = f", power/control={self.railgate_control}" if self.railgate_control else ""
        more = f", and the {' and '.join(sorted(self.others))} clocks" if self.others else ""
        return (
            f"governor={self.governor}, min_freq={self.min_freq_hz}, max_freq={self.max_freq_hz}{rail}{more} "
            f"(saved by pid {self.pid})"
        )


class StateFile:
    """The persisted originals of one (sysfs root, devfreq node) pair."""

    def __init__(self, sysfs_root: str | os.PathLike, node: str, state_dir=None):
        self.sysfs_root = str(Path(sysfs_root).absolute())
        self.node = str(node)
        key = hashlib.sha1(f"{self.sysfs_root}\0{self.node}".encode()).hexdigest()[:12]
        name = Path(self.node).name.replace(os.sep, "_")
        self.path = Path(state_dir or default_state_dir()) / f"gpu-clocks-{name}-{key}.json"

    def load(self) -> SavedClocks | None:
        """The saved originals, or ``None`` when nothing is saved."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise DvfsError(
                f"clock state file {self.path} is unreadable ({err}); inspect it, restore the "
                "clocks by hand (min_freq/max_freq) and delete it"
            ) from err
        fields = SavedClocks.__dataclass_fields__
        return SavedClocks(**{k: data[k] for k in fields if k in data})

    def save(self, saved: SavedClocks) -> None:
        """Write atomically (temporary file, fsync, rename)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            with os.fdopen(fd, "w") as fh:
                json.dump(asdict(saved), fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as err:
            raise DvfsError(
                f"cannot write the clock state file {self.path} ({err.strerror or err}); "
                f"set {STATE_DIR_ENV} to a writable directory. No clock was changed."
            ) from err

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def make_saved(sysfs_root: str, node: str, governor: str | None, min_hz: int, max_hz: int,
               railgate_control: str | None = None, others: dict | None = None) -> SavedClocks:
    """A :class:`SavedClocks` owned by this process, stamped now."""
    return SavedClocks(str(sysfs_root), str(node), governor, int(min_hz), int(max_hz), os.getpid(), time.time(),
                       railgate_control, dict(others) if others else None)


class SignalGuard:
    """Run ``restore`` on SIGINT/SIGTERM, then chain to the previous handler.

    Installed only from the main thread (Python allows nothing else). A signal whose previous
    disposition was ``SIG_IGN`` is left ignored. For ``SIG_DFL`` the default action is taken
    after restoring (the process dies by the signal, as it would have without dvfslab).
    """

    def __init__(self, restore: Callable[[], None], signals=HANDLED_SIGNALS):
        self._restore = restore
        self._signals = tuple(signals)
        self._previous: dict[int, object] = {}

    def install(self) -> bool:
        """Install the handlers; ``False`` (nothing done) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in self._signals:
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                continue
            self._previous[sig] = prev
            signal.signal(sig, self._handle)
        return True

    def uninstall(self) -> None:
        """Put the previous handlers back (only where ours is still installed)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, prev in self._previous.items():
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        prev = self._previous.get(signum, signal.SIG_DFL)
        try:
            self._restore()
        finally:
            self.uninstall()
            if callable(prev):
                prev(signum, frame)
            elif prev in (signal.SIG_DFL, None):
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)


def check_owner(saved: SavedClocks, state_path: Path) -> None:
    """Refuse to take over clocks that another live process holds."""
    if saved.pid != os.getpid() and pid_alive(saved.pid):
        raise DvfsError(
            f"the GPU clocks are held by another dvfslab process (pid {saved.pid}, state file "
            f"{state_path}); wait for it or stop it. If that pid is not dvfslab, run "
            "`dvfslab clocks --restore`"
        )
