"""All Jetson sysfs I/O goes through one small object: :class:`SysfsIO`.

Every path is relative to an injectable ``sysfs_root`` (``/`` on a board, a tree in
``tmp_path`` in tests). Reads and writes are real file operations under that root.
:class:`dvfslab.testing.fake_sysfs.FakeKernelIO` subclasses it to add the rules the kernel
applies to devfreq writes (``min > max`` rejected, ``max_freq`` capped by the power mode,
``cur_freq`` following the limits), which a plain file tree cannot do on its own.

Testing hook: for a root other than ``/`` that holds the marker ``.fake_kernel.json`` (written
by ``build_board``), :func:`default_io` returns the fake kernel, so that ``dvfslab`` commands
and sub-processes run on a fake tree see the same rules. ``DVFSLAB_FAKE_KERNEL=0`` turns this
off (plain file I/O); nothing of it ever applies to the real root ``/``.
"""

from __future__ import annotations

import errno
import glob
import logging
import os
from pathlib import Path

from dvfslab.hw.base import ClockPermissionError, DvfsError

log = logging.getLogger(__name__)

FAKE_KERNEL_ENV = "DVFSLAB_FAKE_KERNEL"
FAKE_KERNEL_MARKER = ".fake_kernel.json"


class SysfsIO:
    """Read and write sysfs attributes under ``root``.

    Paths given to the methods are either relative to the root (``"sys/class/devfreq"``) or
    absolute paths already under it (as returned by :meth:`path`).
    """

    def __init__(self, root: str | os.PathLike = "/"):
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @property
    def is_real_root(self) -> bool:
        """True when this reads the machine's own ``/sys`` (root ``/``)."""
        return self.root == Path("/")

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


def default_io(root: str | os.PathLike = "/") -> SysfsIO:
    """The I/O object for ``root``: real I/O, or the fake kernel for a marked fake tree."""
    root = Path(root).absolute()
    if root == Path("/"):
        if os.environ.get(FAKE_KERNEL_ENV) == "1":
            log.warning("%s=1 ignored: the sysfs root is the real '/'", FAKE_KERNEL_ENV)
        return SysfsIO(root)
    if os.environ.get(FAKE_KERNEL_ENV) != "0" and (root / FAKE_KERNEL_MARKER).is_file():
        from dvfslab.testing.fake_sysfs import FakeKernelIO

        return FakeKernelIO(root)
    return SysfsIO(root)


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
            " (the kernel refuses a min_freq above max_freq or a value outside the table)"
            if err.errno == errno.EINVAL
            else ""
        )
        raise DvfsError(f"writing {value} to {path} failed: {reason}{hint}") from err
