"""A child command under dvfslab: started with its output passed through while its progress is
read, and SIGINT / SIGTERM forwarded to it (``dvfslab run``, ``dvfslab govern``, :class:`GovernedRun`).

:func:`start_command` starts the command with its stdout and stderr piped through this process
unchanged (byte for byte, as they come) while a :class:`~dvfslab.job.progress.LineProgress`
reads them; when the command has exited and its output is drained, the feed ends.
:class:`Forwarder` is the SIGINT / SIGTERM handler: it forwards the signal to the child and the
first one raises :class:`Signalled` in the main thread, so the caller restores its clocks first
and then waits for the command (exit ``128 + signal``, :func:`exit_code`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

from dvfslab.core.errors import DvfsError


def _pump(src, dst, parser, lock: threading.Lock) -> None:
    fd = src.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        dst.write(chunk)
        dst.flush()
        if parser is not None:
            with lock:
                parser.feed_text(chunk.decode("utf-8", errors="replace"))
    src.close()


def start_command(cmd: Sequence[str], feed, parser=None, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``cmd``; its output reaches this process's stdout/stderr unchanged while ``parser``
    reads it; ``feed`` (a :class:`~dvfslab.job.progress.ProgressFeed`) ends when the command has
    exited and its output is drained. ``PYTHONUNBUFFERED=1`` is set for it, so a Python
    program's lines arrive as printed."""
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env)
    except OSError as err:
        raise DvfsError(f"cannot start {cmd[0]!r}: {err.strerror or err}") from err
    lock = threading.Lock()
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, parser, lock), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, parser, lock), daemon=True)]
    for t in pumps:
        t.start()

    def wait() -> None:
        for t in pumps:
            t.join()
        proc.wait()
        if parser is not None:
            with lock:
                parser.flush()
        feed.end()

    threading.Thread(target=wait, name="dvfslab-command", daemon=True).start()
    return proc


class Signalled(BaseException):
    """SIGINT / SIGTERM arrived (raised in the main thread by :class:`Forwarder`)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class Forwarder:
    """SIGINT/SIGTERM handler: forward to the child; the first one also raises :class:`Signalled`."""

    def __init__(self):
        self.child: subprocess.Popen | None = None
        self.signum: int | None = None
        self.forwarded = False
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._previous = {}

    def forward(self, signum: int) -> None:
        if self.child is not None and self.child.poll() is None:
            try:
                self.child.send_signal(signum)
                self.forwarded = True
            except ProcessLookupError:
                pass

    def _handle(self, signum: int, frame) -> None:
        self.forward(signum)
        if self.signum is None:
            self.signum = signum
            raise Signalled(signum)


def exit_code(rc: int) -> int:
    """A child's return code as a shell gives it (killed by signal N: ``128 + N``)."""
    return 128 - rc if rc < 0 else rc
