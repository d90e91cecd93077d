"""All Jetson sysfs I/O goes through one small object: :class:`SysfsIO`.

Every path is relative to an injectable ``sysfs_root`` (``/`` on a board, a tree in
``tmp_path`` in tests). Reads and writes are real file operations under that root.

Another I/O class (a subclass of :class:`SysfsIO`, e.g. a fake kernel that applies the devfreq
write rules a plain file tree cannot) is *injected*, never looked up by this package: pass
``io=`` to the backend, the clocks or the power reader, or name it as ``package.module:Class``
in ``$DVFSLAB_SYSFS_IO`` (or the CLI's ``--sysfs-io``), which :func:`default_io` resolves with
importlib. A custom class is refused for the machine's real root ``/``.
"""

from __future__ import annotations

import errno
import glob
import os
from pathlib import Path
from typing import Protocol

from dvfslab.core.errors import DvfsError
from dvfslab.core.plugins import load_object
from dvfslab.hw.base import ClockPermissionError

#: ``package.module:Class`` of the sysfs I/O class to use instead of :class:`SysfsIO`
SYSFS_IO_ENV = "DVFSLAB_SYSFS_IO"


class VirtualClock(Protocol):
    """A clock that moves only when told to: ``clock()`` reads it, ``advance(dt_s)`` moves it."""

    def __call__(self) -> float:
        ...

    def advance(self, dt_s: float) -> None:
        ...


class SysfsIO:
    """Read and write sysfs attributes under ``root``.

    Paths given to the methods are either relative to the root (``"sys/class/devfreq"``) or
    absolute paths already under it (as returned by :meth:`path`). ``virtual_clock``: the clock
    time moves on for this I/O when it is not the machine's (an injected fake chip whose reads
    block on a virtual clock); None for real files.
    """

    virtual_clock: VirtualClock | None = None

    def __init__(self, root: str | os.PathLike = "/"):
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @property
    def is_real_root(self) -> bool:
        """True when this reads the machine's own ``/sys`` (root ``/``, also through a symlink)."""
        return os.path.realpath(self.root) == os.path.sep

    def path(self, rel: str | os.PathLike) -> Path:
        """The absolute path of ``rel`` under the root (absolute paths pass unchanged)."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    def glob(self, pattern: str) -> list[Path]:
        """Sorted matches of a root-relative glob pattern."""
        return [Path(p) for p in sorted(glob.glob(str(self.root / pattern)))]

    def exists(self, rel: str | os.PathLike) -> bool:
        return self.path(rel).exists()

    def read_text(self, rel: str | os.PathLike) -> str:
        """The attribute's content, stripped (device-tree strings lose their NUL)."""
        with open(self.path(rel), "rb") as fh:
            return fh.read().decode("utf-8", "replace").strip().strip("\x00").strip()

    def read_int(self, rel: str | os.PathLike) -> int:
        return int(self.read_text(rel).split()[0])

    def writable(self, rel: str | os.PathLike) -> bool:
        """Whether this process may write the attribute."""
        return os.access(self.path(rel), os.W_OK)

    def write(self, rel: str | os.PathLike, value: int | str) -> None:
        """Write ``value`` like ``echo value > path`` (truncating, one write call)."""
        self._write_bytes(self.path(rel), f"{value}\n".encode())

    def _write_bytes(self, path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def load_io_class(target: str, source: str = SYSFS_IO_ENV) -> type[SysfsIO]:
    """``"package.module:Class"`` -> the class, which must subclass :class:`SysfsIO`.

    ``source`` names where ``target`` came from (the variable or the CLI option) in errors.
    """
    cls = load_object(target, label=f"{source}={target!r}", what="the sysfs I/O class")
    if not (isinstance(cls, type) and issubclass(cls, SysfsIO)):
        raise DvfsError(f"{source}={target!r} is not a subclass of dvfslab.hw.jetson.sysfs.SysfsIO")
    return cls


def default_io(root: str | os.PathLike = "/", io_class: str | None = None) -> SysfsIO:
    """The I/O object for ``root``: :class:`SysfsIO`, or the class named by ``io_class``.

    ``io_class`` (the CLI's ``--sysfs-io``) defaults to ``$DVFSLAB_SYSFS_IO``; unset or empty
    means plain :class:`SysfsIO`. A custom class is refused when ``root`` is the real ``/``.
    """
    source = "--sysfs-io" if io_class else SYSFS_IO_ENV
    target = io_class or os.environ.get(SYSFS_IO_ENV, "").strip()
    plain = SysfsIO(root)
    if not target:
        return plain
    if plain.is_real_root:
        raise DvfsError(
            f"{source}={target} refused: the sysfs root is the real '/', and a custom sysfs I/O "
            f"class is only for test trees; unset {source} or pass --sysfs-root DIR"
        )
    return load_io_class(target, source)(root)


def udev_rule_example(node_name: str) -> str:
    """A udev rule granting group ``dvfslab`` write access to one devfreq node's limits."""
    files = " ".join(f"/sys%p/{f}" for f in ("min_freq", "max_freq", "governor"))
    return (
        f'SUBSYSTEM=="devfreq", KERNEL=="{node_name}", ACTION=="add", '
        f'RUN+="/bin/chgrp dvfslab {files}", RUN+="/bin/chmod g+w {files}"'
    )


def permission_error(path: Path, node_name: str, action: str = "write") -> ClockPermissionError:
    """The one-line error for a clock file this process may not write, naming the fix."""
    return ClockPermissionError(
        f"cannot {action} {path}: permission denied. Run as root (sudo), or grant write access "
        f"once with a udev rule in /etc/udev/rules.d/99-dvfslab.rules: {udev_rule_example(node_name)} "
        "then `sudo groupadd -f dvfslab && sudo usermod -aG dvfslab $USER && "
        "sudo udevadm trigger --subsystem-match=devfreq --action=add` and log in again "
        "(see docs/hardware.md)"
    )


def write_checked(io: SysfsIO, rel: str | os.PathLike, value: int | str, node_name: str) -> None:
    """Write one clock attribute, turning OS errors into one-line :class:`DvfsError` s."""
    path = io.path(rel)
    try:
        io.write(path, value)
    except PermissionError as err:
        raise permission_error(path, node_name) from err
    except OSError as err:
        reason = os.strerror(err.errno) if err.errno else str(err)
        hint = (
            " (not an integer or not a valid value; kernels before 5.10 also refuse min_freq above "
            "max_freq, 5.10 and later take both as requests)"
            if err.errno == errno.EINVAL
            else ""
        )
        raise DvfsError(f"writing {value} to {path} failed: {reason}{hint}") from err


def plan_range_writes(cur_min_hz: int, cur_max_hz: int, new_min_hz: int, new_max_hz: int) -> list[tuple[str, int]]:
    """Order the writes taking (min, max) to (new_min, new_max) so that min <= max throughout
    (the devfreq and cpufreq cores both refuse a min above the max: the GPU clock and the CPU
    policies use it).

    When the new minimum lies above the current maximum, ``max_freq`` goes first; otherwise
    ``min_freq`` goes first. Writes that would not change a value are left out.
    """
    if new_min_hz > new_max_hz:
        raise ValueError(f"new_min_hz {new_min_hz} > new_max_hz {new_max_hz}")
    order = ("max_freq", "min_freq") if new_min_hz > cur_max_hz else ("min_freq", "max_freq")
    current = {"min_freq": cur_min_hz, "max_freq": cur_max_hz}
    new = {"min_freq": new_min_hz, "max_freq": new_max_hz}
    return [(name, int(new[name])) for name in order if new[name] != current[name]]
