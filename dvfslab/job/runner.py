"""Run a command under a governor: start it, pass its output through, read its progress, probe,
hold the level, log every window.

:func:`start_command` starts the command with its stdout and stderr piped through this process
unchanged (byte for byte, as they come) while a :class:`~dvfslab.job.progress.LineProgress`
reads them; when the command exits the feed ends. :class:`GovernedJob` then does, on the
:class:`~dvfslab.job.live.LiveProbe`:

1. **calibration** at the default clock: the time per unit, hence the probe model;
2. ``baseline_windows - 1`` more windows at the default clock (the saving's reference);
3. the governor: a measuring one gets the probe (``governor.decide(workload, probe)``: its
   session probes through it, the replay's code path); any other decides from the features;
4. **hold** the decided level, one window after another, until the command exits.

The clocks are the caller's (``dvfslab govern`` restores them on exit, failure and signals).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError
from dvfslab.job.live import JobEnded, LiveProbe, Window
from dvfslab.job.log import JobLog, summary
from dvfslab.job.progress import LineProgress, ProgressFeed

#: windows at the default clock before the governor starts (the first is the calibration)
BASELINE_WINDOWS = 3


def _pump(src, dst, parser: LineProgress | None, lock: threading.Lock) -> None:
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


def start_command(cmd: Sequence[str], feed: ProgressFeed, parser: LineProgress | None = None,
                  env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``cmd``; its output reaches this process's stdout/stderr unchanged while ``parser``
    reads it; ``feed`` ends when the command has exited and its output is drained.
    ``PYTHONUNBUFFERED=1`` is set for it, so a Python program's lines arrive as printed."""
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


class GovernedJob:
    """One command under one governor (module doc)."""

    def __init__(self, governor: Governor, workload: Mapping[str, Any], probe: LiveProbe, log: JobLog, *,
                 interval_s: float | None = None, baseline_windows: int = BASELINE_WINDOWS, simulated: bool = False,
                 say: Callable[[str], None] = lambda s: None):
        if baseline_windows < 1:
            raise DvfsError(f"--baseline-windows must be >= 1 (the first is the calibration), got {baseline_windows}")
        self.governor, self.workload, self.probe, self.log = governor, dict(workload), probe, log
        self.interval_s, self.baseline_windows, self.simulated, self.say = interval_s, baseline_windows, simulated, say
        self.probes = 0
        self.decision = None
        self.level: float | None = None
        self.note = ""
        probe.on_window = self._window

    def _window(self, w: Window) -> None:
        rec = {"t_end_s": w.t_end_s, **w.record(), "probes_so_far": self.probes, "simulated": self.simulated}
        if w.phase == "probe" and w.measurement:
            self.probes += 1
            rec["probes_so_far"] = self.probes
        if not w.measurement:
            self.say(f"{w.why}")
        self.log.write(rec)

    def run(self) -> None:
        """Calibrate, baseline, decide, hold until the command exits (module doc)."""
        p = self.probe
        try:
            p.calibrate(self.interval_s)
            self.log.write({"event": "probe-model", "tau_s": p.tau_s, **p.model.describe()})
            for _ in range(self.baseline_windows - 1):
                p.window(None, p.model.window(None), "baseline")
            p.phase = "probe"
            if self.governor.probing:
                self.decision = self.governor.decide(self.workload, p)
            else:
                self.decision = self.governor.decide(self.workload)
            level = self.decision.level
            self.level = None if level is None else snap_mhz(float(level), p.levels)
            self.log.write({"event": "decision", "level": self.level, "decided_level": level,
                            "probes": self.probes, "probe_units": self.decision.probe_units,
                            "note": self.decision.note})
            self.say(f"{self.governor.name} decided "
                     + ("the default clock" if self.level is None else f"{self.level:g} MHz")
                     + f" after {self.probes} probe window(s)" + (f" ({self.decision.note})" if self.decision.note else ""))
            while True:
                p.window(self.level, p.model.window(self.level), "hold")
        except JobEnded:
            if self.decision is None:
                self.note = "the job ended before the governor decided" + (
                    " (while probing)" if p.model is not None else " (during the calibration at the default clock)")
        except GovernorError as err:
            self.note = f"the governor failed: {err}"
            raise

    def summary(self, exit_code: int | None = None) -> dict[str, Any]:
        d = self.decision
        probe_units = sum(float(r.get("units", 0)) for r in self.log.lines if r.get("phase") == "probe"
                          and r.get("measurement"))
        note = "; ".join(x for x in (self.note, d.note if d is not None else "") if x)
        s = summary(self.log.lines, policy=self.governor.name, chosen_level=self.level, decided=d is not None,
                    probes=self.probes, probe_units=probe_units, unit=self.probe.unit, simulated=self.simulated,
                    note=note, model=None if self.probe.model is None else self.probe.model.describe(),
                    exit_code=exit_code)
        return s
