"""A measuring governor replayed through the live runner: one code path for ``dvfslab govern``
and the evaluation's figures.

:func:`governed_row` fills one row of :func:`dvfslab.evaluation.replay.replay` for a probing
governor (``online``, ``profiled``, ``search``, ``voi``, ``zeus``, ``zeus-sim``, ...) by running
it on the replay board (:func:`dvfslab.job.replay.govern_replay`: calibration and baseline
windows at the default clock, the settle after each change of level, sensor windows of at least
``SENSOR_SAMPLES`` samples, the decision, the hold, the log's whole-job summary) — what
``dvfslab govern --backend replay:DATASET --workload W`` runs:

* **the cell**: each level's and the baseline's time and energy per unit
  (:meth:`~dvfslab.analysis.steps.StepSource.per_unit`: the rep means over the run's units) —
  the figures the replay's baseline and oracle are computed from;
* **the job**: ``J`` units (workloads.csv ``job_steps``; else the run), and the governor is told
  ``J`` (a progress source that states the job's length: a ``Trainer``'s ``max_steps``, a
  ``k/N`` bar); ``plan_job_units`` in the row is ``J``;
* **the noise**: the dataset's σ of the probe model (:mod:`dvfslab.evaluation.probes`: from
  replicates, else its estimators floored by the sensor prior; ``noise_scale`` applied), or the
  fixed ``probe_noise`` over one default window's read units, converted to one sensor sample's
  CV at the sensor's sampling interval (:func:`~dvfslab.job.replay.per_sample_sigma`;
  :func:`~dvfslab.evaluation.probes.sensor_of`: tegrastats' interval on a Jetson, NVML's 100 ms
  on a data-centre GPU); never 0 (a σ of 0 takes the sensor's prior,
  :data:`~dvfslab.job.replay.SENSOR_NOISE_PRIOR`); seeded by the steps' seed, the row's name and
  the workload;
* **the unit**: the dataset's, except a Zeus import's epoch, served as its iterations (a
  training job's progress and Zeus's profiler count iterations; the probe model's
  ``epoch_units`` is the epoch's iterations, so Zeus's epoch-end restart applies); the row's
  units are the dataset's again;
* **the hold** runs in one event after the decision (``fast_hold``,
  :mod:`dvfslab.job.replay`): the job's true account is the same as window by window;
* **the figures**: the whole job's energy and time are the board's true account of every unit
  it ran (calibration, baseline, probes, settles, hold); the per-run figures are the first ``n``
  units of that same job (the run's units; a job shorter than the run goes on at the chosen
  level); ``profiling_steps``: the probes the decision lists (as the in-process replay
  counted them; the log's ``probes`` counts windows, several for a level read in pieces),
  ``probe_units``: the units of the log's probe windows; the chosen level is the runner's (snapped to the cell's levels).

Idealised probes (instant, exact: a comparison, never a result) have no board: they keep the
in-process charge of :func:`dvfslab.evaluation.replay.charge`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

from dvfslab.analysis.aggregate import Sweep
from dvfslab.analysis.steps import StepSource
from dvfslab.evaluation import probes as P
from dvfslab.governors.base import Governor
from dvfslab.job.replay import SENSOR_NOISE_PRIOR, ReplayCell, govern_replay, per_sample_sigma

#: the row's ``note`` when the job ended before the governor decided
ENDED_NOTE = "the job ended before the governor decided"


def through_runner(governor: Governor, steps: StepSource, workload_id: str) -> bool:
    """Whether the governor is replayed through the runner: it measures the job and the probes
    are physical (idealised probes keep the in-process charge)."""
    model = steps.probe_model(workload_id)
    return bool(governor.probing) and model is not None and not model.idealised


def sample_sigma(steps: StepSource, workload_id: str, time_per_unit_s: float, interval_s: float) -> tuple[float, str]:
    """One sensor sample's CV for the replay board (module doc) and where it comes from."""
    model = steps.probe_model(workload_id)
    if steps.noise is not None:
        sigma, over = float(steps.noise), model.default_window * model.read_fraction
        where = f"fixed {steps.noise:g} over one default window's read units"
    else:
        sigma, over, where = float(model.sigma_ref), float(model.ref_units), model.sigma_source
    if not sigma > 0:
        sensor = "nvml" if P.sensor_of(steps.meta, steps.sweep.knob.name) is P.NVML_ENERGY else "ina3221"
        return SENSOR_NOISE_PRIOR[sensor], f"the {sensor} prior per sample (the dataset's σ is 0)"
    return per_sample_sigma(sigma, over, time_per_unit_s, interval_s), where


def board_units(sweep: Sweep, steps: StepSource, workload_id: str) -> tuple[float, str]:
    """``(board units per dataset unit, the board's unit)``: a Zeus import's epoch is served as its
    iterations (:func:`~dvfslab.evaluation.probes.zeus_iterations`: what a training job's progress
    reports and Zeus's profiler counts), anything else as the dataset's unit."""
    if P.kind_of(steps.meta, sweep.knob.name) == "zeus":
        row = sweep.workloads.set_index("workload_id").loc[workload_id]
        return P.zeus_iterations(str(row["task"]), float(row["batch_size"])), "iteration"
    model = steps.probe_model(workload_id)
    return 1.0, getattr(model, "unit", "step") or "step"


def cell_of(sweep: Sweep, steps: StepSource, workload_id: str) -> ReplayCell:
    """The replay board's cell of a workload: each measured level's and the baseline's figures per
    board unit (:func:`board_units`; an epoch's iterations are its ``epoch_units``)."""
    k, unit = board_units(sweep, steps, workload_id)

    def per(level: float | None) -> tuple[float, float]:
        t, e = steps.per_unit(workload_id, level)
        return t / k, e / k

    levels = {float(f): per(float(f)) for f in sweep.curve(workload_id)[0]}
    return ReplayCell(levels, per(None), unit=unit, source=f"{sweep.dataset} {workload_id}",
                      simulated=bool(sweep.simulated), meta={"epoch_units": k} if unit == "iteration" else {})


def first_units(trace: list, cell: ReplayCell, units: float, then: float | None) -> tuple[float, float]:
    """``(energy_j, time_s)`` of the first ``units`` units of a board's trace (``[level, units]`` in
    order); past its end, at ``then``."""
    energy = time = left = 0.0
    left = float(units)
    for level, k in trace:
        take = min(float(k), left)
        t, e = cell.at(level)
        energy, time, left = energy + take * e, time + take * t, left - take
        if left <= 1e-12:
            break
    if left > 1e-12:
        t, e = cell.at(then)
        energy, time = energy + left * e, time + left * t
    return energy, time


def governed_row(row: dict[str, Any], name: str, governor: Governor, sweep: Sweep, workload: Mapping[str, Any],
                 steps: StepSource) -> dict[str, Any]:
    """Fill the replay's ``row`` of one probing governor on one workload through the runner
    (module doc); the governor sees the workload's row without its answer columns."""
    from dvfslab.analysis.features import governor_row

    wid = str(workload["workload_id"])
    cell = cell_of(sweep, steps, wid)
    k, _ = board_units(sweep, steps, wid)
    job, n = steps.job_units(wid), steps.units(wid)
    interval = P.sensor_of(steps.meta, sweep.knob.name).interval_s
    sigma, _ = sample_sigma(steps, wid, cell.default[0] * k, interval)
    seed = zlib.crc32(f"{steps.seed}|{name}|{wid}".encode())
    s = govern_replay(governor, cell, job * k, seed, sigma_sample=sigma, interval_s=interval,
                      workload=governor_row(dict(workload), job * k), fast_hold=True)
    level = s.get("chosen_level")
    row["plan_job_units"] = float(job)
    row["job_energy_j"], row["job_time_s"] = float(s["true_energy_j"]), float(s["true_time_s"])
    row["energy_j"], row["time_s"] = first_units(s["true_trace"], cell, n * k, level)
    probes = s.get("decision_probes")
    row["profiling_steps"] = int(s.get("probes") or 0) if probes is None else int(probes)
    row["probe_units"] = float(s.get("probe_units") or 0.0) / k
    notes = [s.get("note") or "", governor.fallback_note() or ""]
    if not s.get("decided"):
        notes.insert(0, ENDED_NOTE)
    if level is not None and s.get("decided"):
        row.update(decided_level=float(level), level=float(level), snapped=False)
    e_b = row["baseline_energy_j"]
    e_l = e_b if level is None else sweep.at(wid, float(level))[0]
    row["noise_floor_pct"] = P.noise_floor_pct(steps, wid, e_l, row["oracle_energy_j"], e_b)
    row["note"] = "; ".join(dict.fromkeys(x for x in notes if x))
    if not math.isfinite(row["job_energy_j"]):
        row["error"] = "the replay board's job has no finite energy"
    return row


__all__ = ["ENDED_NOTE", "board_units", "cell_of", "first_units", "governed_row", "sample_sigma", "through_runner"]
