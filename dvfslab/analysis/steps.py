"""A dataset's training steps, one by one: what a probing governor measures in a replay.

Governors that measure the workload while it runs (``online``, ``profiled``) probe a few steps
at the start of a run. Replaying them over a sweep takes step ``i`` of the run at the level the
governor asked for step ``i``: a workload's runs share their data order (seeded loader), so step
``i`` processes the same batch at every level. :class:`StepSource` serves those steps.

* **Recorded** (``steps.csv``): the steps of one run per (workload, level) — its lowest ok
  repetition of ``policy == "fixed"`` — and of its default-clock run: the lowest ok MAXN
  repetition with steps, or, when the workload's baseline is its highest level (``fmax`` /
  ``max_level``), that level's run.
* **Mean steps**: a workload with no recorded step at all is served from runs.csv: every step is
  the run's mean step (energy and time / the mean ``steps`` count of its ok runs), so a dataset
  without per-step records still replays a probe, with its cost spread evenly.

A workload is served from one of the two, never a mix: its probe and the steps that probe
replaces come from the same source. ``level=None`` is the default clock (the baseline).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep, SweepError, snap_levels

Steps = tuple[np.ndarray, np.ndarray]  # (time_s, energy_j) of the first n steps


class StepSource:
    """Per-step ``(time_s, energy_j)`` of a sweep's runs (module doc)."""

    def __init__(self, sweep: Sweep, runs: pd.DataFrame, steps: pd.DataFrame | None = None,
                 path: str = "steps.csv"):
        self.sweep, self.path = sweep, path
        ok = runs[runs["status"] == "ok"]
        counts = ok.groupby("workload_id")["steps"].mean() if "steps" in ok else pd.Series(dtype=float)
        self._n_steps = {str(w): float(n) for w, n in counts.items() if pd.notna(n) and n > 0}
        self.recorded = steps is not None
        self._level: dict[tuple[str, float], Steps] = {}
        self._maxn: dict[str, Steps] = {}
        if steps is None:
            return
        by_run = {r: (g["time_s"].to_numpy(float), g["energy_j"].to_numpy(float))
                  for r, g in steps.sort_values(["run_id", "step"]).groupby("run_id")}
        fixed = ok[ok["policy"] == "fixed"].sort_values("rep")
        fixed = fixed.assign(level=snap_levels(fixed[sweep.knob.name], sweep.level_table))
        fixed = fixed.drop_duplicates(["workload_id", "level"])  # the lowest repetition per level
        for wid, level, run_id in zip(fixed["workload_id"], fixed["level"], fixed["run_id"], strict=True):
            if run_id in by_run:
                self._level[(str(wid), float(level))] = by_run[run_id]
        for wid, g in ok[ok["policy"] == "maxn"].sort_values("rep").groupby("workload_id"):
            run_id = next((r for r in g["run_id"] if r in by_run), None)
            if run_id is not None:
                self._maxn[str(wid)] = by_run[run_id]
        self._has_steps = {w for w, _ in self._level} | set(self._maxn)

    @classmethod
    def from_sweep(cls, sweep: Sweep) -> StepSource:
        """The steps of the dataset the sweep was read from (``steps.csv`` when it has one)."""
        from dvfslab.data.contract import load_dataset

        ds = load_dataset(sweep.dataset)
        return cls(sweep, ds.runs, ds.steps, f"{sweep.dataset}/steps.csv")

    def is_recorded(self, workload_id: str) -> bool:
        """Whether the workload is served from recorded steps (else from mean steps)."""
        return self.recorded and workload_id in self._has_steps

    def steps(self, workload_id: str, level: float | None, n: int) -> Steps:
        """``(time_s, energy_j)`` of the first ``n`` steps at ``level`` (None: the default clock)."""
        wid = str(workload_id)
        if self.is_recorded(wid):
            return self._recorded(wid, level, n)
        if wid not in self._n_steps:
            raise SweepError(f"{self.path} has no steps of {wid!r} and runs.csv no `steps` count for it — "
                             "a probe needs per-step records or the number of steps per run")
        e, t = self.sweep.baseline_of(wid) if level is None else self.sweep.at(wid, level)
        k = self._n_steps[wid]
        return np.full(n, t / k), np.full(n, e / k)

    def _recorded(self, wid: str, level: float | None, n: int) -> Steps:
        where = "the default clock" if level is None else self.sweep.knob.format(float(level))
        if level is None and self.sweep.baseline.loc[wid, "baseline"] == "maxn":
            got = self._maxn.get(wid)
        else:
            key = float(self.sweep.baseline.loc[wid, "level"]) if level is None else float(level)
            got = self._level.get((wid, key))
        if got is None:
            raise SweepError(f"{self.path} has no steps of {wid!r} at {where} — replaying a probe needs the steps "
                             "of every level it runs (dvfslab sweep and dvfslab simulate record them)")
        if len(got[0]) < n:
            raise SweepError(f"{self.path} has {len(got[0])} steps of {wid!r} at {where}, the probe needs {n}; "
                             "record more steps per run or probe fewer")
        return got[0][:n], got[1][:n]

    def covers(self, workload_ids: Iterable[str], n: int) -> bool:
        """Whether every workload has ``n`` steps at the default clock (recorded or mean)."""
        try:
            for w in workload_ids:
                self.steps(str(w), None, n)
        except SweepError:
            return False
        return True

    def probe(self, workload_id: str) -> StepProbe:
        """A probe that replays ``workload_id``'s steps from step 0."""
        return StepProbe(self, str(workload_id))


@dataclass
class StepProbe:
    """Runs "the next step" of one workload at a level by reading it from a :class:`StepSource`:
    the :class:`~dvfslab.governors.base.Probe` of a replay."""

    source: StepSource
    workload_id: str
    taken: int = 0

    @property
    def levels(self) -> tuple[float, ...]:
        """The levels a probe may ask for: the sweep's table."""
        return self.source.sweep.level_table

    def measure(self, level: float | None) -> tuple[float, float]:
        """``(time_s, energy_j)`` of step ``taken`` of the run at ``level`` (None: the default clock)."""
        t, e = self.source.steps(self.workload_id, level, self.taken + 1)
        self.taken += 1
        return float(t[-1]), float(e[-1])
