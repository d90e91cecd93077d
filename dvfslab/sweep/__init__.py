"""Characterization sweeps: plan, run on a board through an executor, record, resume.

``plan`` (what runs, in which order) -> ``session`` (clocks, cool-down, idle power) ->
``executors`` (how one run executes) -> ``store`` (the sweep directory) -> ``runner`` (the loop);
``safety`` holds the locks and signal handling. See docs/sweep.md.
"""

from dvfslab.sweep.executors import BaseExecutor, Executor, FinetuneExecutor, load_executor
from dvfslab.sweep.plan import RunSpec, SweepError, SweepPlan, make_plan
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.session import Cooldown

__all__ = ["BaseExecutor", "Cooldown", "Executor", "FinetuneExecutor", "RunSpec", "SweepError", "SweepPlan",
           "load_executor", "make_plan", "run_sweep"]
