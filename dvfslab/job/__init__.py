"""Running a command under a governor (``dvfslab govern``): progress read from outside the
program, a running job as the governor's probe, the log of windows and its summary.

* :mod:`dvfslab.job.progress`: progress sources (output lines and presets, a file, a Prometheus counter);
* :mod:`dvfslab.job.live`: :class:`~dvfslab.job.live.LiveProbe` (the command as a governor's
  probe), the live probe model, the meters (power sampler, digital twin);
* :mod:`dvfslab.job.runner`: starting the command with its output passed through, :class:`GovernedJob`;
* :mod:`dvfslab.job.log`: the JSON-lines log, its summary (saving and its bootstrap interval);
* :mod:`dvfslab.job.policy`: any registry governor, from a pipeline run's folder or none.

No transformers: the in-process path (a ``Trainer`` callback) is :mod:`dvfslab.harness`.
"""

from dvfslab.job.live import JobEnded, LiveProbe, SamplerMeter, SimMeter, Window, live_probe_model
from dvfslab.job.log import JobLog, format_summary, read_summary, summary
from dvfslab.job.policy import job_governor
from dvfslab.job.progress import FileProgress, LineProgress, ProgressFeed, PrometheusProgress
from dvfslab.job.runner import GovernedJob, start_command

__all__ = ["FileProgress", "GovernedJob", "JobEnded", "JobLog", "LineProgress", "LiveProbe", "ProgressFeed",
           "PrometheusProgress", "SamplerMeter", "SimMeter", "Window", "format_summary", "job_governor",
           "live_probe_model", "read_summary", "start_command", "summary"]
