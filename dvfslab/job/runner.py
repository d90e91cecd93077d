"""A job under a governor, as a library object: :class:`GovernedRun`.

One code path for every board (:mod:`dvfslab.job.board`: a Jetson, NVML, the twin, a replayed
dataset) and every progress source (a command's output, a file, a Prometheus counter, the
caller's Python loop, the replay board itself). On the
:class:`~dvfslab.job.live.LiveProbe` it does:

1. **calibration** at the default clock: the time per unit, hence the probe model;
2. ``baseline_windows - 1`` more windows at the default clock (the saving's reference), whose
   spread is the reading noise the governor plans with (logged ``noise``);
3. the governor, told the job's length (``plan_job_units``: the job's own length less the units
   already run, from the progress source or ``job_units``; without one the log says what it
   assumes): a measuring one gets the probe (``governor.decide(workload, probe)``: its session
   probes through it, the replay's code path); any other decides from the features. A length
   the source states later, or changes (a ``k/N`` line after the calibration, a gauge set late,
   more epochs on a resume, :meth:`GovernedRun.set_job_units`), is checked after every window:
   while the session probes it is re-planned
   (:meth:`~dvfslab.governors.session.WindowSession.replan`: ``voi`` and ``bo`` weigh their next
   probe against the new units left; ``search`` and ``zeus`` do not plan with the length);
   after the hold it changes only the log's accounting. Each is a ``{"event": "plan"}`` line,
   and the summary's job length is the last one, with when it was learnt;
4. **hold** the decided level, one window after another, until the job ends;
5. the **summary** (:func:`dvfslab.job.log.summary`): the whole job against the default clock.

Three ways to run it: :meth:`GovernedRun.run_command` (a child command, SIGINT / SIGTERM
forwarded, ``dvfslab govern``), :meth:`GovernedRun.run` (a source that ends by itself: the replay
board), and the context manager with :meth:`GovernedRun.report` (a training loop in a notebook
feeds its progress; the governor runs in a thread)::

    with GovernedRun(make("voi"), sim_board(), job_units=600) as run:
        for step in range(1, 601):
            train_one_step()
            run.report(step)
    print(run.result)

The board's clocks are restored (``board.reset()``) when it ends, fails or is signalled.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError
from dvfslab.job.board import JobBoard
from dvfslab.job.checks import window_noise
from dvfslab.job.command import Forwarder, Signalled, exit_code, start_command
from dvfslab.job.live import JobEnded, LiveProbe, Window
from dvfslab.job.log import JobLog, summary
from dvfslab.job.progress import ProgressFeed

#: windows at the default clock before the governor starts (the first is the calibration)
BASELINE_WINDOWS = 3

__all__ = ["BASELINE_WINDOWS", "GovernedRun", "start_command"]


class GovernedRun:
    """One job under one governor on one board (module doc).

    ``feed``: the job's progress (default: the board's own, else a new feed the caller fills —
    :meth:`report`, or a command's output through :meth:`run_command`); ``job_units``: the job's
    length when the caller knows it (else the feed's, when its source states it); ``log``: a
    :class:`~dvfslab.job.log.JobLog` or a path; ``say``: where the one-line messages go;
    ``require_features``: a feature the governor reads and the workload lacks (after the GPU
    utilisation is measured) stops the run before the decision (False: the governor handles it,
    as the replay of a dataset's workload does)."""

    def __init__(self, governor: Governor, board: JobBoard, *, workload: Mapping[str, Any] | None = None,
                 feed: ProgressFeed | None = None, log: JobLog | str | None = None, job_units: float | None = None,
                 baseline_windows: int = BASELINE_WINDOWS, stall_s: float | None = None,
                 say: Callable[[str], None] = lambda s: None, unit: str | None = None,
                 require_features: bool = True):
        if baseline_windows < 1:
            raise DvfsError(f"--baseline-windows must be >= 1 (the first is the calibration), got {baseline_windows}")
        if job_units is not None and not job_units > 0:
            raise DvfsError(f"--job-units must be > 0, got {job_units!r}")
        self.governor, self.board, self.workload = governor, board, dict(workload or {})
        self.require_features = require_features
        self.feed = feed if feed is not None else (board.feed if board.feed is not None else ProgressFeed())
        if job_units is not None:
            self.feed.job_units, self.feed.job_units_source = float(job_units), "given (job_units / --job-units)"
            self.feed.job_units_given = True
        self.log = log if isinstance(log, JobLog) else JobLog(log)
        self.baseline_windows, self.simulated, self.say = baseline_windows, board.simulated, say
        self.probe = LiveProbe(board.levels, board.meter, self.feed, board.set_level, self._window,
                               handled=board.handled, stall_s=stall_s, settle_s=board.settle_s,
                               unit=unit or self.feed.unit, default_level=board.default_level,
                               clock_knob=board.clock_knob)
        self.probe.on_epoch_end = self._epoch_end
        self.probes = 0
        self.decision = None
        self.level: float | None = None
        self.plan: dict[str, Any] = {}
        self._length: float | None = None  # the job length the plan (or the last re-plan) used
        self._done_at_plan = 0.0  # units run when the governor started (its session counts from there)
        self.note = ""
        self.result: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._loads: list[float] = []

    # -- the log ----------------------------------------------------------------------------------
    def _window(self, w: Window) -> None:
        if w.level is None and w.measurement and self.decision is None and self.board.gpu_load is not None:
            load = self.board.gpu_load()  # the GPU's load over the default-clock windows (a feature)
            if load is not None:
                self._loads.append(float(load))
        rec = {"t_end_s": w.t_end_s, **w.record(), "probes_so_far": self.probes, "simulated": self.simulated}
        if w.phase == "probe" and w.measurement:
            self.probes += 1
            rec["probes_so_far"] = self.probes
        if not w.measurement:
            self.say(f"{w.why}")
        self.log.write(rec)
        self._check_length(w)

    def _noise(self) -> None:
        """The reading noise of the default-clock windows, into the probe model (module doc)."""
        rows = [r for r in self.log.lines if r.get("phase") in ("calibration", "baseline")]
        sigma, ref_units, n = window_noise([{**r, "level": "default"} for r in rows])
        if sigma is None:
            self.log.write({"event": "noise", "sigma": None, "windows": n,
                            "note": "one default-clock window: no spread to read the noise from (the governor "
                                    "plans with none; give --baseline-windows 2 or more)"})
            return
        source = f"spread of the energy per unit over the {n} default-clock windows of this job (live)"
        self.probe.with_noise(sigma, ref_units, source)
        self.log.write({"event": "noise", "sigma": sigma, "ref_units": ref_units, "windows": n, "source": source})
        self.say(f"reading noise {100 * sigma:.2g} % over {ref_units:.3g} {self.probe.unit}(s) "
                 f"(from {n} default-clock windows)")

    def _features(self) -> None:
        """A feature the user did not give, measured: the GPU's load over the default-clock windows."""
        if "gpu_util_pct" in self.workload:
            return
        if not self._loads:
            self.log.write({"event": "feature", "gpu_util_pct": None,
                            "note": "no GPU utilisation given (--gpu-util) and the board reports no GPU load: a "
                                    "governor that reads it has none"})
            return
        util = sum(self._loads) / len(self._loads)
        self.workload["gpu_util_pct"] = util
        self.log.write({"event": "feature", "gpu_util_pct": util, "readings": len(self._loads),
                        "source": "measured: the GPU load over the default-clock windows"})
        self.say(f"GPU utilisation {util:.3g} % measured over the default-clock windows (no --gpu-util given)")

    def _check_features(self) -> None:
        """Every feature the governor reads is given or was measured (:func:`~dvfslab.job.policy.check_features`):
        else :class:`~dvfslab.job.policy.FeatureRequired` — never a training median."""
        from dvfslab.job.policy import check_features

        if self.require_features:
            check_features(self.governor, self.workload)

    def _epoch_end(self) -> None:
        """The progress source reported an epoch end: the probe session (Zeus's restarts its
        unfinished window there) is told, and the log says so."""
        session = self.probe.session
        tell = getattr(session, "epoch_end", None) if session is not None and not session.done else None
        if tell is not None:
            tell()
        self.log.write({"event": "epoch-end", "units_done": self.probe.total, "session_told": tell is not None})

    def epoch_end(self) -> None:
        """The job's epoch ended (a Python loop's, or a ``TrainerCallback``'s ``on_epoch_end``):
        handed to the governor's thread in order with the units reported."""
        self.feed.epoch_end()

    def _ended_note(self) -> str:
        """Why the job ended before the governor decided: the lines read when none reported progress."""
        p, f = self.probe, self.feed
        if p.model is None and f.lines_read is not None and f.lines_matched == 0:
            return (f"{f.lines_matched} of {f.lines_read} output lines matched {f.lines_reader}: the command printed "
                    "no progress it reads; check its output or give --progress-regex")
        where = " (while probing)" if p.model is not None else " (during the calibration at the default clock"
        if p.model is None and f.lines_read is not None:
            where += f"; {f.lines_matched} of {f.lines_read} output lines matched {f.lines_reader}"
        return "the job ended before the governor decided" + where + ("" if p.model is not None else ")")

    def _plan(self) -> dict[str, Any]:
        """The job's length the governor plans with (module doc)."""
        done = self.probe.total
        n, source = self.feed.job_units, self.feed.job_units_source
        wl = self.workload
        if n is None:
            assumed = getattr(self.governor, "job_units", None)
            self.plan = {"job_units": None, "plan_job_units": None, "source": "none", "units_done": done,
                         "note": "the progress source states no job length and none was given (--job-units N): "
                                 + (f"{self.governor.name} plans with its default {assumed:g} units"
                                    if isinstance(assumed, (int, float)) else
                                    f"{self.governor.name} does not plan with one")}
            self.say(self.plan["note"])
        else:
            left = max(n - done, 1.0)
            self.plan = {"job_units": n, "plan_job_units": left, "units_done": done, "source": source,
                         "learnt": "before the governor started"}
            wl = {**wl, "plan_job_units": left}
            self.say(f"job length {n:g} {self.probe.unit}s ({source}): {left:g} left to plan with")
        self._length, self._done_at_plan = n, done
        self.log.write({"event": "plan", **self.plan})
        return wl

    def _check_length(self, w: Window | None = None) -> None:
        """The job's length stated or changed after the governor started (module doc, step 3):
        a probing session re-plans with it, told when a probe window has ended (the units left
        after it: :meth:`~dvfslab.governors.session.WindowSession.replan`); after the hold only
        the log's accounting changes. ``w``: the window just logged (None: the job has ended)."""
        n = self.feed.job_units
        if not self.plan or n is None or n == self._length:
            return  # before the plan (it reads the length itself), or nothing new
        session = self.probe.session
        probing = self.decision is None and session is not None and not session.done
        if probing and w is not None and not (w.phase == "probe" and w.measurement):
            return  # inside a probe window (a re-read, a stall): told when the window ends
        self._length = n
        done, source = self.probe.total, self.feed.job_units_source
        left = max(n - done, 0.0)
        rec: dict[str, Any] = {"event": "plan", "replan": True, "job_units": n, "units_done": done,
                               "units_left": left, "source": source}
        if probing and w is not None:
            plan_units = max(n - self._done_at_plan, 1.0)  # from the governor's start, as the first plan's
            replan = getattr(session, "replan", None)
            told = bool(replan(left)) if replan is not None else False
            rec.update(plan_job_units=plan_units, session_told=told)
            if told:
                self.plan["plan_job_units"] = plan_units
            when = f"learnt at {done:g} {self.probe.unit}s, while probing"
            rec["note"] = (f"{self.governor.name} re-plans: {left:g} {self.probe.unit}s left after this probe "
                           "window" if told else
                           f"{self.governor.name} does not plan with the job's length: nothing to re-plan")
        elif probing:
            when = f"learnt at {done:g} {self.probe.unit}s, as the job ended"
            rec["note"] = "the job ended before the governor decided: only the log's accounting uses it"
        else:
            when = f"learnt at {done:g} {self.probe.unit}s, after the decision"
            rec["note"] = "after the decision: only the log's accounting uses it"
        self.plan.update(job_units=n, source=source, learnt=when)
        self.log.write(rec)
        self.say(f"job length {n:g} {self.probe.unit}s ({source}), {when}: {rec['note']}")

    def set_job_units(self, units: float, source: str = "the caller (GovernedRun.set_job_units)") -> None:
        """The job's length, stated or changed by the caller while it runs (a training loop that
        learns it late, a resume with more epochs): the governor re-plans while it probes."""
        if not (isinstance(units, int | float) and units > 0):
            raise DvfsError(f"set_job_units: the job's length must be > 0 units, got {units!r}")
        self.feed.job_units, self.feed.job_units_source = float(units), source

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any] | None:
        """Calibrate, baseline, decide, hold until the progress ends (module doc); returns
        :attr:`decision`. The board is not restored here (:meth:`finish` does)."""
        p = self.probe
        source = getattr(self.governor, "source_", None)
        if source:
            self.log.write({"event": "governor", "policy": self.governor.name, "source": source})
        try:
            p.calibrate()
            for _ in range(self.baseline_windows - 1):
                p.window(None, p.model.window(None), "baseline")
            self._noise()
            self._features()
            self._check_features()
            self.log.write({"event": "probe-model", "tau_s": p.tau_s, **p.model.describe()})
            workload = self._plan()
            p.phase = "probe"
            if self.governor.probing:
                self.decision = self.governor.decide(workload, p)
            else:
                self.decision = self.governor.decide(workload)
            level = self.decision.level
            self.level = None if level is None else snap_mhz(float(level), p.levels)
            words = None if self.level is None or self.board.describe is None else self.board.describe(self.level)
            self.log.write({"event": "decision", "level": self.level, "decided_level": level,
                            "probes": self.probes, "probe_units": self.decision.probe_units,
                            "note": self.decision.note, **({"setting": words} if words else {})})
            self.say(f"{self.governor.name} decided "
                     + ("the default clock" if self.level is None else words or f"{self.level:g}")
                     + f" after {self.probes} probe window(s)" + (f" ({self.decision.note})" if self.decision.note else ""))
            while True:
                p.window(self.level, p.model.window(self.level), "hold")
        except JobEnded:
            if self.decision is None:
                self.note = self._ended_note()
        except GovernorError as err:
            self.note = f"the governor failed: {err}"
            raise
        return self.decision

    def finish(self, exit_code: int | None = None) -> dict[str, Any]:
        """Restore the board, close the meter, write the summary line; returns it (:attr:`result`)."""
        try:
            self.board.reset()
        finally:
            self.board.close()
            self._check_length()
            self.result = self.summary(exit_code)
            self.log.write(self.result)
            self.log.close()
        return self.result

    def summary(self, exit_code: int | None = None) -> dict[str, Any]:
        d = self.decision
        probe_units = sum(float(r.get("units", 0)) for r in self.log.lines if r.get("phase") == "probe"
                          and r.get("measurement"))
        note = "; ".join(x for x in (self.note, d.note if d is not None else "") if x)
        return summary(self.log.lines, policy=self.governor.name, chosen_level=self.level, decided=d is not None,
                       probes=self.probes, probe_units=probe_units, unit=self.probe.unit, simulated=self.simulated,
                       note=note, model=None if self.probe.model is None else self.probe.model.describe(),
                       exit_code=exit_code, plan=self.plan)

    # -- a child command --------------------------------------------------------------------------
    def run_command(self, cmd: Sequence[str], parser=None, poller=None, *, before: Callable[[], None] | None = None
                    ) -> int:
        """Run ``cmd`` under the governor: its output passed through while ``parser`` reads it (or
        ``poller`` reads a file / page); SIGINT / SIGTERM forwarded to it, the board restored first;
        returns the command's exit code (``128 + signal`` when signalled). ``before``: called once
        the signal handlers are in place (pinning other clocks)."""
        fwd = Forwarder()
        fwd.install()
        rc: int | None = None
        try:
            if before is not None:
                before()
            fwd.child = start_command(cmd, self.feed, parser)
            if poller is not None:
                poller.start()
            try:
                self.run()
            except Signalled:
                raise  # already forwarded to the command by the handler
            except BaseException:
                fwd.forward(signal.SIGTERM)  # the governor failed: stop the command too
                raise
            rc = exit_code(fwd.child.wait())
            return rc
        except Signalled as sig:
            if not fwd.forwarded:
                fwd.forward(sig.signum)
            self.board.reset()  # restore first, then wait for the command to finish
            if fwd.child is not None:
                fwd.child.wait()
            self.note = f"{signal.Signals(sig.signum).name}: the command was stopped"
            self.say(f"{signal.Signals(sig.signum).name} forwarded to the command")
            rc = 128 + sig.signum
            return rc
        finally:
            if poller is not None:
                poller.stop()
            fwd.uninstall()
            self.finish(rc)

    # -- a Python loop ----------------------------------------------------------------------------
    def report(self, total: float | None = None, *, units: float = 1.0) -> None:
        """The caller's progress: the running ``total`` of units done (or ``units`` more)."""
        if self._error is not None:
            raise self._error
        self.feed.put(self.feed.total + units if total is None else float(total))

    def __enter__(self) -> GovernedRun:
        def loop() -> None:
            try:
                self.run()
            except BaseException as err:  # noqa: BLE001 (raised again in the caller's thread)
                self._error = err

        self._thread = threading.Thread(target=loop, name="dvfslab-governed-run", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.feed.end()
        if self._thread is not None:
            self._thread.join()
        if exc is not None:
            self.note = f"the loop stopped: {exc_type.__name__}"
        self.finish()
        if self._error is not None and exc is None:
            raise self._error


#: the name dvfslab 0.x used (one command under one governor)
GovernedJob = GovernedRun
