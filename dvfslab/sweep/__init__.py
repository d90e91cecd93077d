"""Characterization sweeps: plan, run on a board through an executor, record, resume.

``plan`` (what runs, in which order) -> ``session`` (clocks, cool-down, idle power) ->
``executors`` (how one run executes) -> ``store`` (the sweep directory) -> ``runner`` (the loop);
``safety`` holds the locks and signal handling. See docs/sweep.md. ``fleet`` (client) and
``fleet_worker`` (Dask workers) run one sweep over many boards (docs/fleet.md); they need the
``fleet`` extra, so ``run_fleet_sweep`` is loaded on first use.
"""

from dvfslab.sweep.executors import Executor, FinetuneExecutor, load_executor
from dvfslab.sweep.plan import RunSpec, SweepPlan, make_plan
from dvfslab.sweep.runner import run_sweep
from dvfslab.sweep.session import Cooldown

__all__ = ["Cooldown", "Executor", "FinetuneExecutor", "RunSpec", "SweepPlan",
           "load_executor", "make_plan", "run_fleet_sweep", "run_sweep"]


def __getattr__(name: str):
    if name == "run_fleet_sweep":  # imports dask distributed (the fleet extra)
        from dvfslab.sweep.fleet import run_fleet_sweep

        return run_fleet_sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
