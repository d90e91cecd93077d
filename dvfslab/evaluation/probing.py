"""Probing governors beyond the replay's totals: their regret split into choice and probing, and a
live run on a (simulated) board."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.governors.base import ProbeStep, ProbingGovernor


def probing_breakdown(per_workload: pd.DataFrame, sweep: Sweep, policy: str = "online") -> pd.DataFrame:
    """Split a probing governor's regret per workload into the choice and the probing.

    ``choice_regret_pct``: the held level's energy over the oracle's (the same per run and over
    the whole job: both run every unit at their level); ``probing_cost_pct``: what the probing
    added to the run's regret, ``job_probing_cost_pct`` to the whole job's (all in % of the
    baseline energy). A job that ended before the governor decided (through the live runner: a job
    shorter than its probes) held no level: its choice costs nothing and its whole regret is probing.
    """
    rows = per_workload[(per_workload["policy"] == policy) & per_workload["regret_pct"].notna()]
    keep = ["workload_id", "level", "profiling_steps", "probe_units", "probe_share_pct", "regret_pct", "job_regret_pct",
            "slowdown_pct"]
    out = rows[[c for c in keep if c in rows]].copy()
    full = [sweep.at(w, f)[0] if pd.notna(f) else e_o
            for w, f, e_o in zip(rows["workload_id"], rows["level"], rows["oracle_energy_j"], strict=True)]
    out["oracle_level"] = [sweep.oracle_level(w) for w in rows["workload_id"]]
    out["choice_regret_pct"] = 100.0 * (pd.Series(full, index=rows.index) - rows["oracle_energy_j"]) / rows["baseline_energy_j"]
    out["probing_cost_pct"] = out["regret_pct"] - out["choice_regret_pct"]
    if "job_regret_pct" in out:
        out["job_probing_cost_pct"] = out["job_regret_pct"] - out["choice_regret_pct"]
    return out.reset_index(drop=True)


def run_on_board(governor: ProbingGovernor, board: Any, workload: Mapping[str, Any], level_table: Sequence[float],
                 total_steps: int) -> dict:
    """Run ``total_steps`` training steps of ``workload`` on a board that can ``lock(level)``,
    ``unlock()`` and ``train(workload, n, run_key=...)`` (returning per-step ``step_time_s`` /
    ``step_energy_j``: :class:`dvfslab.sim.board.SimBoard`) at ``level_table``, probing with
    ``governor`` first.

    Returns ``{"level", "energy_j", "time_s", "profiling_steps", "probe_energy_j"}``; the board is
    unlocked at the end, also on error.
    """
    session = governor.start(workload, level_table)
    energy = time = probe_e = 0.0
    done = 0
    try:
        while done < total_steps and not session.done:
            level = session.next_level()
            board.unlock() if level is None else board.lock(level)
            r = board.train(workload, 1, run_key=f"{governor.name}-{done}")
            e, t = float(r.step_energy_j[0]), float(r.step_time_s[0])
            session.observe(ProbeStep(level, t, e))
            energy, time, probe_e, done = energy + e, time + t, probe_e + e, done + 1
        if done < total_steps:
            level = session.next_level()
            board.unlock() if level is None else board.lock(level)
            r = board.train(workload, total_steps - done, run_key=f"{governor.name}-rest")
            energy, time = energy + float(r.step_energy_j.sum()), time + float(r.step_time_s.sum())
    finally:
        board.unlock()
    return {"level": session.level if session.done else None, "energy_j": energy, "time_s": time,
            "profiling_steps": min(done, session.profiling_steps), "probe_energy_j": probe_e}
