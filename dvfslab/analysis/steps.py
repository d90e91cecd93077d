"""A dataset's runs unit by unit: what a probing governor measures in a replay, and how long a job is.

**Units.** A run's unit is the unit of runs.csv ``steps``: an optimizer step in a dvfslab sweep,
one inference in the LoudVA import (``steps`` = 1). A run without a ``steps`` count is *one*
unit: an imported trace whose rows are one epoch each (the Zeus NSDI'23 traces). The **whole
job** is ``job_steps`` of those units (workloads.csv, optional); without it the job is the
measured run itself (:meth:`StepSource.job_units`).

Governors that measure the workload while it runs (``online``, ``profiled``, ``zeus-sim``,
``search``) probe the first units of a job. Replaying them over a sweep takes unit ``i`` of the
run at the level the governor asked for it: a workload's runs share their data order (seeded
loader), so step ``i`` processes the same batch at every level. :class:`StepSource` serves them:

* **Recorded** (``steps.csv``): the steps of one run per (workload, level) — its lowest ok
  repetition of ``policy == "fixed"`` — and of its default-clock run: the lowest ok MAXN
  repetition with steps, or, when the workload's baseline is its highest level (``fmax`` /
  ``max_level``), that level's run. A fraction of a step is that fraction of it (linear within
  the step).
* **Mean units**: a workload with no recorded step at all is served from runs.csv: every unit
  is the level's per-unit rep mean (the mean energy and time of its ok runs / the units of a
  run), so any contract dataset replays a probe, with its cost spread evenly.

A workload is served from one of the two: its probe and the units that probe replaces come from
the same source; only units beyond a recorded workload's recorded steps (a physical probe
window may reach past the 50 a twin run records) are its level's per-unit rep mean, for the
probe and the charge alike (:meth:`StepSource.span_parts`). ``level=None`` is the default clock
(the baseline).

**The probe model.** A source may carry one probe model per workload
(:meth:`StepSource.with_probe_models`: a :class:`~dvfslab.governors.probemodel.ProbeModel`, built
by :mod:`dvfslab.evaluation.probes` from the dataset — this room sits below the governors and
only passes it on); its probes carry it as ``model``, so a probing governor's probe lasts at
least the level's window, and a reading over ``u`` units reads with the model's noise,
``model.sigma(u x read_fraction)``.

**Noise**: a probe's measured time and energy are each multiplied by an independent log-normal
factor of mean 1 and coefficient of variation ``cv`` (seeded per workload, so every governor
replaying a workload draws the same factors in the same order); the replay charges the true
cost, the governor sees the noisy reading. ``cv`` is the probe model's (above) unless
:meth:`StepSource.with_noise` fixes one figure for every probe (a sensitivity run). The
dataset's rep-to-rep figure is :func:`rep_cv` (the median rep-to-rep CV of energy per unit over
its (workload, level) cells; ``benchmarks/noise.py`` prints it): a dataset measured once per
cell has none, and its noise is estimated otherwise (:mod:`dvfslab.evaluation.probes`).
"""

from __future__ import annotations

import copy
import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep, snap_levels
from dvfslab.core.errors import SweepError

Steps = tuple[np.ndarray, np.ndarray]  # (time_s, energy_j) of the first n steps


def rep_cv(runs: pd.DataFrame, knob: str) -> dict:
    """Coefficients of variation of energy and time per unit over the ok repetitions of each
    (workload, level) cell of fixed-level runs: ``{"cells", "cells_with_reps", "reps_max",
    "energy": {"median", "q25", "q75"} | None, "time": ...}`` (None: no cell has two)."""
    runs = runs[(runs["status"] == "ok") & (runs["policy"] == "fixed")]
    units = run_units(runs)
    per = pd.DataFrame({"workload_id": runs["workload_id"], "level": runs[knob].astype(float),
                        "energy": runs["energy_j"] / units, "time": runs["time_s"] / units})
    groups = per.groupby(["workload_id", "level"])
    n = groups.size()
    out: dict = {"cells": int(len(n)), "cells_with_reps": int((n >= 2).sum()), "reps_max": int(n.max()) if len(n) else 0}
    for col in ("energy", "time"):
        cv = (groups[col].std(ddof=1) / groups[col].mean())[n >= 2].dropna()
        out[col] = None if cv.empty else {"median": float(cv.median()), "q25": float(cv.quantile(0.25)),
                                          "q75": float(cv.quantile(0.75))}
    return out


def run_units(runs: pd.DataFrame) -> pd.Series:
    """The units of each run: its ``steps`` count, 1 where it has none (module doc)."""
    if "steps" not in runs:
        return pd.Series(1.0, index=runs.index)
    n = runs["steps"].astype(float)
    return n.where(n > 0, 1.0).fillna(1.0)


def noise_factors(rng: np.random.Generator, cv: float, size: int) -> np.ndarray:
    """Log-normal factors of mean exactly 1 and coefficient of variation exactly ``cv``."""
    if cv == 0:
        return np.ones(size)
    s = math.sqrt(math.log1p(cv * cv))
    return np.exp(s * rng.standard_normal(size) - s * s / 2)


class StepSource:
    """Per-unit ``(time_s, energy_j)`` of a sweep's runs, and each job's length (module doc)."""

    def __init__(self, sweep: Sweep, runs: pd.DataFrame, steps: pd.DataFrame | None = None,
                 path: str = "steps.csv"):
        self.sweep, self.path = sweep, path
        ok = runs[runs["status"] == "ok"]
        self._ok = ok
        counted = ok[ok["steps"].astype(float) > 0] if "steps" in ok else ok.iloc[:0]
        self._counted = {str(w): float(n) for w, n in counted.groupby("workload_id")["steps"].mean().items()}
        self._jobs = {}
        if "job_steps" in sweep.workloads:
            self._jobs = {str(w): float(j) for w, j in zip(sweep.workloads["workload_id"], sweep.workloads["job_steps"],
                                                           strict=True) if pd.notna(j) and float(j) > 0}
        self.noise: float | None = None  # None: each probe model's noise (module doc)
        self.seed = 0
        self.meta: dict = {}  # the dataset's meta.json (from_sweep), for the probe model
        self.probe_models: dict[str, Any] | None = None  # workload -> ProbeModel (None: not set)
        self.recorded = steps is not None
        self._level: dict[tuple[str, float], Steps] = {}
        self._maxn: dict[str, Steps] = {}
        self._has_steps: set[str] = set()
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
        out = cls(sweep, ds.runs, ds.steps, f"{sweep.dataset}/steps.csv")
        out.meta = dict(ds.meta)
        return out

    def with_noise(self, cv: float | None, seed: int = 0) -> StepSource:
        """The same source whose probes read with multiplicative noise of coefficient of variation
        ``cv`` (a fraction: 0.02 = 2 %; None: each probe model's own), seeded by ``seed`` and the
        workload (module doc)."""
        if cv is not None and not (math.isfinite(cv) and 0 <= cv < 1):
            raise SweepError(f"probe noise must be a fraction in [0, 1) (0.02 = 2 %), got {cv!r}")
        out = copy.copy(self)
        out.noise, out.seed = (None if cv is None else float(cv)), int(seed)
        return out

    def with_probe_models(self, models: Mapping[str, Any]) -> StepSource:
        """The same source whose probes carry ``models[workload_id]`` (a
        :class:`~dvfslab.governors.probemodel.ProbeModel`; module doc)."""
        out = copy.copy(self)
        out.probe_models = {str(k): v for k, v in models.items()}
        return out

    def probe_model(self, workload_id: str) -> Any:
        """The workload's probe model (None: none set)."""
        return None if self.probe_models is None else self.probe_models.get(str(workload_id))

    def probe_cv(self, workload_id: str, units: float, recorded: bool | None = None) -> float:
        """The coefficient of variation of a reading of ``units`` units of the workload: the fixed
        figure of :meth:`with_noise`; else 0 for recorded steps (single measurements, their own
        noise in them; ``recorded`` overrides whether these units are); else the probe model's
        ``sigma(units x read_fraction)``; else 0."""
        if self.noise is not None:
            return self.noise
        if self.is_recorded(str(workload_id)) if recorded is None else recorded:  # single measurements: noise in them
            return 0.0
        model = self.probe_model(workload_id)
        return 0.0 if model is None else float(model.sigma(units * model.read_fraction))

    def rep_noise(self) -> float:
        """The dataset's own probe noise: the median rep-to-rep CV of energy per unit (:func:`rep_cv`);
        0 when no (workload, level) cell was measured twice."""
        got = rep_cv(self._ok, self.sweep.knob.name)["energy"]
        return 0.0 if got is None else got["median"]

    # -- units and jobs ------------------------------------------------------------------

    def counts_steps(self, workload_id: str) -> bool:
        """Whether the workload's runs count their steps (runs.csv ``steps``, or steps.csv): its
        unit is a step, not a whole run."""
        return workload_id in self._counted or self.is_recorded(workload_id)

    def units(self, workload_id: str) -> float:
        """The units of one run of the workload: the mean ``steps`` count of its ok runs, 1 without."""
        return self._counted.get(str(workload_id), 1.0)

    def job_known(self, workload_id: str) -> bool:
        """Whether workloads.csv gives the workload's whole job (``job_steps``)."""
        return str(workload_id) in self._jobs

    def job_units(self, workload_id: str) -> float:
        """The units of the whole job: ``job_steps``, else one run (the job is the run itself)."""
        return self._jobs.get(str(workload_id), self.units(workload_id))

    def per_unit(self, workload_id: str, level: float | None) -> tuple[float, float]:
        """``(time_s, energy_j)`` of one unit at ``level`` (None: the baseline): the rep means / units."""
        e, t = self.sweep.baseline_of(workload_id) if level is None else self.sweep.at(workload_id, level)
        k = self.units(workload_id)
        return t / k, e / k

    # -- unit by unit --------------------------------------------------------------------

    def is_recorded(self, workload_id: str) -> bool:
        """Whether the workload is served from recorded steps (else from mean units)."""
        return self.recorded and workload_id in self._has_steps

    def steps(self, workload_id: str, level: float | None, n: int) -> Steps:
        """``(time_s, energy_j)`` of the first ``n`` units at ``level`` (None: the default clock)."""
        wid = str(workload_id)
        if self.is_recorded(wid):
            t, e = self._recorded(wid, level, n)
            return t[:n], e[:n]
        t, e = self.per_unit(wid, level)
        return np.full(n, t), np.full(n, e)

    def span(self, workload_id: str, level: float | None, start: float, units: float) -> tuple[float, float]:
        """``(time_s, energy_j)`` of units ``[start, start + units)`` of the run at ``level``
        (fractional: a fraction of a recorded step is that fraction of it; beyond the recorded
        steps, the level's per-unit rep mean: :meth:`span_parts`)."""
        t_rec, e_rec, t_mean, e_mean, _ = self.span_parts(workload_id, level, start, units)
        return t_rec + t_mean, e_rec + e_mean

    def span_parts(self, workload_id: str, level: float | None, start: float,
                   units: float) -> tuple[float, float, float, float, float]:
        """``(time_s, energy_j)`` of units ``[start, start + units)`` split into what recorded steps
        serve and what the level's per-unit rep mean serves (a workload without recorded steps;
        units beyond the recorded ones — the twin records 50 per run, a physical probe window may
        reach past them), and the units of the latter: ``(t_rec, e_rec, t_mean, e_mean, u_mean)``."""
        wid = str(workload_id)
        a, b = float(start), float(start) + float(units)
        if not self.is_recorded(wid):
            t, e = self.per_unit(wid, level)
            return 0.0, 0.0, t * units, e * units, float(units)
        t, e = self._recorded(wid, level, 0)
        end = min(b, float(len(t)))
        t_rec = e_rec = 0.0
        if a < end:
            k = np.arange(math.floor(a + 1e-9), math.ceil(end - 1e-9))
            share = np.clip(np.minimum(end, k + 1) - np.maximum(a, k), 0.0, 1.0)  # of each step, in [a, end)
            t_rec, e_rec = float((share * t[k]).sum()), float((share * e[k]).sum())
        beyond = max(0.0, b - max(a, float(len(t))))
        if beyond <= 1e-12:
            return t_rec, e_rec, 0.0, 0.0, 0.0
        tu, eu = self.per_unit(wid, level)
        return t_rec, e_rec, tu * beyond, eu * beyond, beyond

    def _recorded(self, wid: str, level: float | None, n: int) -> Steps:
        where = "the default clock" if level is None else self.sweep.format_level(float(level))
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
        return got

    def covers(self, workload_ids: Iterable[str], n: int) -> bool:
        """Whether every workload has ``n`` units at the default clock."""
        try:
            for w in workload_ids:
                self.steps(str(w), None, n)
        except SweepError:
            return False
        return True

    def probe(self, workload_id: str) -> StepProbe:
        """A probe that replays ``workload_id``'s units from unit 0 (with this source's noise)."""
        wid = str(workload_id)
        rng = np.random.default_rng([self.seed, zlib.crc32(wid.encode())])
        return StepProbe(self, wid, rng=rng, model=self.probe_model(wid))


@dataclass
class StepProbe:
    """Runs "the next units" of one workload at a level by reading them from a :class:`StepSource`:
    the :class:`~dvfslab.governors.base.Probe` of a replay."""

    source: StepSource
    workload_id: str
    taken: float = 0.0
    rng: np.random.Generator | None = field(default=None, repr=False)
    #: the workload's :class:`~dvfslab.governors.probemodel.ProbeModel` (None: none)
    model: Any = None

    @property
    def levels(self) -> tuple[float, ...]:
        """The levels a probe may ask for: those the workload was measured at (the sweep's table,
        or the part of it a sweep of fewer levels ran)."""
        return tuple(float(f) for f in self.source.sweep.curve(self.workload_id)[0])

    def measure(self, level: float | None, units: float = 1.0) -> tuple[float, float]:
        """``(time_s, energy_j)`` of units ``[taken, taken + units)`` of the run at ``level`` (None:
        the default clock), as read with the source's noise (:meth:`StepSource.probe_cv`)."""
        if not (units > 0 and math.isfinite(units)):
            raise SweepError(f"a probe runs a positive number of units, got {units!r}")
        t_rec, e_rec, t, e, u_mean = self.source.span_parts(self.workload_id, level, self.taken, units)
        self.taken += units
        if self.source.noise is not None:  # a fixed figure: on the whole reading
            t, e, u_mean = t + t_rec, e + e_rec, float(units)
            t_rec = e_rec = 0.0
        cv = self.source.probe_cv(self.workload_id, u_mean, recorded=False) if u_mean > 0 else 0.0
        if self.rng is not None and cv > 0:  # recorded steps carry their own noise; means are read with the model's
            f_t, f_e = noise_factors(self.rng, cv, 2)
            t, e = t * f_t, e * f_e
        return float(t_rec + t), float(e_rec + e)
