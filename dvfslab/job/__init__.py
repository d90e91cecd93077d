"""Running a job under a governor (``dvfslab govern``, or a training loop in Python): progress
read from outside the program, the running job as the governor's probe, the log of windows and
its whole-job summary — one code path on every board, the replayed dataset included.

* :mod:`dvfslab.job.runner`: :class:`GovernedRun`, the library object (a command, a Python loop, a
  replay board);
* :mod:`dvfslab.job.board`: :class:`JobBoard` and its builders (the twin, NVML, a Jetson);
* :mod:`dvfslab.job.replay`: the replay board (a dataset's cell on a virtual clock), :func:`govern_replay`;
* :mod:`dvfslab.job.progress`: progress sources (output lines and presets, a file, a Prometheus
  counter) and the job's own length;
* :mod:`dvfslab.job.live`: :class:`~dvfslab.job.live.LiveProbe` (the job as a governor's probe,
  windows timed after the settle), the live probe model, the meters (power sampler, digital twin);
* :mod:`dvfslab.job.checks`: the reading noise of repeated windows, impossible windows;
* :mod:`dvfslab.job.command`: a child command with its output passed through, signals forwarded;
* :mod:`dvfslab.job.log`: the JSON-lines log, its summary (whole-job saving and slowdown, bootstrap intervals);
* :mod:`dvfslab.job.policy`: any registry governor, from a pipeline run's folder or none;
* :mod:`dvfslab.job.joint`: a joint model's settings (GPU x EMC x CPU) as a board's levels, each
  checked on the board before the job starts.

No transformers: the in-process path (a ``Trainer`` callback) is :mod:`dvfslab.harness`.
"""

from dvfslab.job.board import JobBoard, jetson_board, nvml_board, sim_board
from dvfslab.job.command import Forwarder, Signalled, start_command
from dvfslab.job.joint import joint_board
from dvfslab.job.live import JobEnded, LiveProbe, SamplerMeter, SimMeter, Window, live_probe_model
from dvfslab.job.log import JobLog, format_summary, read_summary, summary, whole_job
from dvfslab.job.policy import job_governor
from dvfslab.job.progress import (
           FileProgress,
           LineProgress,
           ProgressFeed,
           PrometheusProgress,
           job_units_from,
)
from dvfslab.job.replay import ReplayBoard, ReplayCell, cell_from_dataset, govern_replay
from dvfslab.job.runner import GovernedJob, GovernedRun

__all__ = ["FileProgress", "Forwarder", "GovernedJob", "GovernedRun", "JobBoard", "JobEnded", "JobLog", "LineProgress",
           "LiveProbe", "ProgressFeed", "PrometheusProgress", "ReplayBoard", "ReplayCell", "SamplerMeter", "Signalled",
           "SimMeter", "Window", "cell_from_dataset", "format_summary", "govern_replay", "jetson_board",
           "job_governor", "joint_board", "job_units_from", "live_probe_model", "nvml_board", "read_summary", "sim_board",
           "start_command", "summary", "whole_job"]
