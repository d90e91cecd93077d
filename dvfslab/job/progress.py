"""Progress of a job read from outside it: what it prints, a file it writes, a Prometheus counter.

A measuring governor needs the work done per window (``dvfslab govern --progress ...``). Each
source turns what the program already exposes into a running total of *units* (optimizer
steps, epochs, inferences) and hands every new total to a :class:`ProgressFeed`:

* :class:`LineProgress` parses the command's output lines (``\\n`` and tqdm's ``\\r`` both end a
  line) with a regular expression: a first group is the running total (``step 12`` -> 12), no
  group means one unit per matching line. Presets (:data:`PRESETS`): ``steps`` (a plain
  ``step N``), ``hf`` (the Hugging Face ``Trainer``'s tqdm bar ``N/M [...]``: the first bar's
  total ``M`` is the training bar, a bar with another total — evaluation — is not training
  progress; without any bar, the ``{'loss': ..., 'epoch': E}`` log lines give the epochs),
  ``lightning`` (PyTorch Lightning's ``Epoch K: ... N/M``: ``K * M + N`` batches);
* :class:`FileProgress`: a file holding one number (a counter the program rewrites) or a file
  the program appends one line to per unit (its line count);
* :class:`PrometheusProgress`: a counter on a ``/metrics`` page (Triton's
  ``nv_inference_count``, vLLM's and TGI's request counters), summed over its label sets and
  parsed with ``prometheus_client``'s text parser.

**The job's length** (what a governor plans its probing against) comes from the same source
where it states it: the ``hf`` bar's total ``M`` of ``N/M``, a ``step k/N`` line (``steps``), a
regex's group named ``total``, a Prometheus gauge (``units_metric``), or from Python
(:func:`job_units_from`: a ``TrainerState``'s ``max_steps``, a Lightning ``Trainer``'s
``estimated_stepping_batches``); the feed's ``job_units`` holds it. The ``hf`` bar's first total
is kept (a later bar of another total is an evaluation); a ``k/N`` line, a regex's ``total`` and
the gauge restate the whole length each time, and a change replaces it (the governor re-plans:
:mod:`dvfslab.job.runner`). A length the user gives (``--job-units``) is never replaced.

A total that does not grow is ignored (a restarted bar, a rewritten file). Board side: no numpy.
"""

from __future__ import annotations

import math
import os
import queue
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from dvfslab.core.errors import DvfsError

#: the event a feed carries when the command has exited
ENDED = None
#: the event a feed carries when the job's epoch ended
EPOCH_END = ("epoch-end",)


class ProgressError(DvfsError):
    """A progress source cannot be set up (bad regular expression, unreadable URL)."""


@dataclass(frozen=True)
class Preset:
    """A built-in way to read a framework's output: its patterns and the unit it counts."""

    name: str
    unit: str
    help: str


PRESETS = {
    "steps": Preset("steps", "step", "a line with 'step N' (N: the steps done so far)"),
    "hf": Preset("hf", "step", "the Hugging Face Trainer's tqdm bar 'N/M [' (training bar only; evaluation bars "
                               "are not progress), else its {'loss': ..., 'epoch': E} log lines (epochs)"),
    "lightning": Preset("lightning", "batch", "PyTorch Lightning's bar 'Epoch K: ... N/M' (K * M + N batches)"),
}

_STEP = re.compile(r"\bstep[s]?\s*[:=#]?\s*(\d+)\b(?:\s*/\s*(\d+))?", re.IGNORECASE)
_BAR = re.compile(r"(?<![\d/])(\d+)/(\d+)\s*\[")
_HF_LOG = re.compile(r"\{[^{}]*'loss'[^{}]*'epoch':\s*([0-9.eE+-]+)[^{}]*\}")
_HF_EPOCH = re.compile(r"\{[^{}]*'epoch':\s*([0-9.eE+-]+)[^{}]*\}")
_LIGHTNING = re.compile(r"^\s*Epoch\s+(\d+):.*?(?<![\d/])(\d+)/(\d+)\s*\[")


class ProgressFeed:
    """Running totals from a source, in order, for the governed job (thread-safe).

    ``put(total)`` from the source's thread; ``end()`` when the command has exited; the job
    takes them with :meth:`get`. Each total is stamped with ``clock()`` when it arrives (None:
    unstamped; the job stamps it when it takes it): a window then starts after the clock's
    settle *by time*, and units that queued while the clock switched are not in it.

    ``job_units``: the job's own length when the source states it (a tqdm bar's ``N/M``, a
    Prometheus gauge, the caller's ``--job-units``), with ``job_units_source`` saying where it
    came from; None while unknown."""

    def __init__(self, clock: Callable[[], float] | None = None):
        self._q: queue.Queue = queue.Queue()
        self.total = 0.0
        self.unit = "unit"
        self.clock = clock
        self.job_units: float | None = None
        self.job_units_source = ""
        #: the length was given by the user (``--job-units``): no source replaces it
        self.job_units_given = False
        #: output lines read and those that reported progress, and what read them (a
        #: :class:`LineProgress`; None: the source reads no lines), for the message when none matched
        self.lines_read: int | None = None
        self.lines_matched = 0
        self.lines_reader = ""
        #: epoch ends the source reported (the hf preset's ``'epoch'`` crossing a whole number)
        self.epochs_ended = 0
        self._lock = threading.Lock()

    def put(self, total: float) -> None:
        with self._lock:
            if not total > self.total:
                return
            self.total = float(total)
        self._q.put((float(total), None if self.clock is None else float(self.clock())))

    def set_job_units(self, units: float | None, source: str, *, restate: bool = False) -> None:
        """The job's length as the source states it. The first statement is kept (an evaluation
        bar of another total later does not replace it) unless ``restate``: a source that states
        the whole job's length each time (a ``step k/N`` line, a regex's ``total``, a Prometheus
        gauge, the caller's :meth:`~dvfslab.job.runner.GovernedRun.set_job_units`) replaces it
        when it changes (more epochs on a resume). A length given by the user (``--job-units``,
        :attr:`job_units_given`) is never replaced."""
        if units is None or not units > 0 or not math.isfinite(units):
            return
        if self.job_units is not None and (not restate or self.job_units_given or float(units) == self.job_units):
            return
        self.job_units, self.job_units_source = float(units), source

    def epoch_end(self) -> None:
        """The job's epoch ended (the source says so): an :data:`EPOCH_END` event, in order with
        the totals, for a governor whose probe session restarts a window at an epoch end."""
        self.epochs_ended += 1
        self._q.put(EPOCH_END)

    def end(self) -> None:
        self._q.put(ENDED)

    def get(self, timeout_s: float | None) -> tuple[float, float | None] | None:
        """``(total, arrival time or None)``; :data:`EPOCH_END` when the job's epoch ended;
        :data:`ENDED` once the command has exited; raises ``queue.Empty`` after ``timeout_s``."""
        return self._q.get(timeout=timeout_s)


def job_units_from(obj) -> tuple[float | None, str]:
    """The job's length in optimizer steps from a framework's own object, and where it came from:
    a Hugging Face ``TrainerState`` (``max_steps``: what the ``Trainer`` computed from
    ``max_steps`` or epochs x steps per epoch; a callback receives it as ``state``), a path to a
    checkpoint's ``trainer_state.json`` (its ``max_steps``), or a PyTorch Lightning ``Trainer``
    (``estimated_stepping_batches``); ``(None, why)`` when it states none."""
    if isinstance(obj, (str, os.PathLike)):
        import json

        path = os.fspath(obj)
        if os.path.isdir(path):
            path = os.path.join(path, "trainer_state.json")
        try:
            with open(path, encoding="utf-8") as fh:
                state = json.load(fh)
        except (OSError, ValueError) as err:
            raise ProgressError(f"{path}: not a readable trainer_state.json ({err}); give --job-units N") from None
        n = state.get("max_steps") if isinstance(state, dict) else None
        return (float(n), f"{path} max_steps") if isinstance(n, (int, float)) and n > 0 else (
            None, f"{path} has no max_steps > 0")
    n = getattr(obj, "max_steps", None)
    if isinstance(n, (int, float)) and n > 0:
        return float(n), f"{type(obj).__name__}.max_steps"
    n = getattr(obj, "estimated_stepping_batches", None)
    if isinstance(n, (int, float)) and n > 0 and math.isfinite(n):
        return float(n), f"{type(obj).__name__}.estimated_stepping_batches"
    return None, f"{type(obj).__name__} states no max_steps or estimated_stepping_batches"


class LineProgress:
    """Totals from output lines (module doc): ``regex`` (a first group is the total, none: one unit
    per matching line) or a preset name."""

    def __init__(self, feed: ProgressFeed, *, regex: str | None = None, preset: str | None = None):
        if (regex is None) == (preset is None):
            raise ProgressError("give one of --progress-regex REGEX or --progress PRESET")
        self.feed, self.preset = feed, preset
        feed.lines_read, feed.lines_matched = 0, 0
        feed.lines_reader = f"--progress {preset}" if preset is not None else f"--progress-regex {regex!r}"
        self._count = 0.0
        self._epoch: float | None = None  # the hf log lines' last 'epoch' (an epoch end: it crosses a whole number)
        self._bar_total: int | None = None
        self._kind: str | None = None  # hf: "bar" or "log", whichever is seen first
        if preset is not None:
            if preset not in PRESETS:
                raise ProgressError(f"unknown --progress preset {preset!r}; known: {', '.join(PRESETS)}")
            feed.unit = PRESETS[preset].unit
            self.regex = None
        else:
            try:
                self.regex = re.compile(regex)
            except re.error as err:
                raise ProgressError(f"--progress-regex {regex!r} is not a regular expression: {err}") from None
        self._partial = ""

    def feed_text(self, text: str) -> None:
        """Text as it arrives (any chunking); complete lines are parsed."""
        parts = re.split(r"[\r\n]", self._partial + text)
        self._partial = parts.pop()
        for line in parts:
            self.line(line)
        if self.preset in ("hf", "lightning") and _BAR.search(self._partial) and self._partial.rstrip().endswith("]"):
            self.line(self._partial)  # tqdm's bar is redrawn after a \r: a complete bar needs no line end
            self._partial = ""

    def flush(self) -> None:
        if self._partial:
            self.line(self._partial)
            self._partial = ""

    def line(self, line: str) -> None:
        self.feed.lines_read += 1
        total = self.parse(line)
        if total is not None:
            self.feed.lines_matched += 1
            self.feed.put(total)
        if self.preset == "hf":
            self._epoch_end(line)

    def _epoch_end(self, line: str) -> None:
        """The Trainer's log lines' ``'epoch': E``: an epoch ended when E reaches the next whole
        number (``0.98`` then ``1.02``, or ``1.0``)."""
        m = _HF_EPOCH.search(line)
        epoch = _number(m.group(1)) if m else None
        if epoch is None:
            return
        before, self._epoch = self._epoch, epoch
        if int(epoch + 1e-9) > int((before or 0.0) + 1e-9):
            self.feed.epoch_end()

    def parse(self, line: str) -> float | None:
        """The running total this line reports (None: no progress in it)."""
        if self.regex is not None:
            m = self.regex.search(line)
            if m is None:
                return None
            if m.groups():
                total = m.groupdict().get("total")
                if total is not None:
                    self.feed.set_job_units(_number(total), f"--progress-regex's group 'total' ({total})",
                                               restate=True)
                return _number(m.group(1))
            self._count += 1
            return self._count
        if self.preset == "steps":
            m = _STEP.search(line)
            if m and m.group(2):
                self.feed.set_job_units(float(m.group(2)), f"the 'step k/N' lines ({m.group(1)}/{m.group(2)})",
                                        restate=True)
            return float(m.group(1)) if m else None
        if self.preset == "lightning":
            m = _LIGHTNING.search(line)
            return float(int(m.group(1)) * int(m.group(3)) + int(m.group(2))) if m else None
        return self._hf(line)

    def _hf(self, line: str) -> float | None:
        bar = _BAR.search(line)
        if bar is not None and self._kind != "log":
            n, total = int(bar.group(1)), int(bar.group(2))
            if self._bar_total is None:
                self._bar_total, self._kind = total, "bar"
                self.feed.set_job_units(float(total), f"the training bar's total ({n}/{total})")
            return float(n) if total == self._bar_total else None  # another total: an evaluation bar
        log = _HF_LOG.search(line)
        if log is not None and self._kind != "bar":
            self._kind = "log"
            self.feed.unit = "epoch"
            return _number(log.group(1))
        return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class Poller:
    """A daemon thread calling ``read()`` every ``period_s`` and putting the total it returns."""

    def __init__(self, feed: ProgressFeed, read: Callable[[], float | None], period_s: float, name: str,
                 length: Callable[[], tuple[float | None, str]] | None = None):
        self.feed, self.read, self.period_s, self.length = feed, read, float(period_s), length
        self._stop = threading.Event()
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name=f"dvfslab-progress-{name}", daemon=True)

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def poll_once(self) -> None:
        try:
            total = self.read()
        except (OSError, ValueError, ProgressError) as err:
            self.last_error = str(err)
            return
        if total is not None:
            self.feed.put(total)
        if self.length is not None:  # a gauge states the whole length each time: a change replaces it
            self.feed.set_job_units(*self.length(), restate=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.period_s)


class FileProgress:
    """A file holding one number (a counter), or one line per unit (module doc)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def read(self) -> float | None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except FileNotFoundError:
            return None  # not written yet
        lines = [x for x in text.splitlines() if x.strip()]
        if len(lines) == 1 and _number(lines[0].strip()) is not None and text.count("\n") <= 1:
            return _number(lines[0].strip())
        if text and not text.endswith("\n"):
            lines = lines[:-1]  # a line still being written is not a unit yet
        return float(len(lines))


class PrometheusProgress:
    """A counter read from a Prometheus text page: the sum of the samples of ``metric`` (also
    ``metric_total``) over their label sets; with ``units_metric``, a gauge on the same page
    holding the job's length (e.g. the requests a benchmark client will send), read by
    :meth:`length`."""

    def __init__(self, url: str, metric: str, timeout_s: float = 2.0, units_metric: str | None = None):
        if not metric:
            raise ProgressError("--progress-url needs --progress-metric NAME (e.g. nv_inference_count for Triton)")
        import importlib.util

        if importlib.util.find_spec("prometheus_client") is None:
            raise ProgressError("--progress-url reads the page with prometheus_client's text parser: pip install "
                                "'dvfslab[govern]'")
        self.url, self.metric, self.timeout_s, self.units_metric = url, metric, float(timeout_s), units_metric
        self._text: str | None = None

    def _page(self) -> str | None:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as resp:  # noqa: S310 (a URL the user gave)
                self._text = resp.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError):
            return None  # the server is not up yet
        return self._text

    def read(self) -> float | None:
        text = self._page()
        return None if text is None else sum_samples(text, self.metric)

    def length(self) -> tuple[float | None, str]:
        """The job's length from ``units_metric`` on the page last read (None: none stated)."""
        if not self.units_metric or self._text is None:
            return None, ""
        return sum_samples(self._text, self.units_metric), f"the gauge {self.units_metric} on {self.url}"


def sum_samples(text: str, metric: str) -> float | None:
    """The sum of the samples of ``metric`` (or ``metric_total``) on a Prometheus text page, over
    their label sets (``prometheus_client``'s parser); None when the page has none."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise ProgressError("--progress-url reads the page with prometheus_client: pip install "
                            "'dvfslab[govern]'") from None
    names = {metric, f"{metric}_total"}
    found, total = False, 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                found, total = True, total + float(sample.value)
    return total if found else None
