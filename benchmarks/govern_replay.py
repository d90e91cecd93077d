"""Governors replayed through the live runner: every workload of a dataset served by the replay
board (:mod:`dvfslab.job.replay`) and governed by :class:`dvfslab.job.runner.GovernedRun` — the
code ``dvfslab govern`` runs on a machine: calibration windows, settle, sensor windows, the
decision, the hold, the log and its whole-job summary.

Per governor (untrained: ``search`` from the middle of the table, ``voi`` from its U-shaped
prior; ``zeus`` on a power-limit dataset), over the workloads: the true whole-job saving against
the baseline (``1 - E_job / E_default``, the board's own account of every unit), the oracle's
(the least-energy level held from the first unit, no probing), the regret
``E_job / E_oracle - 1`` (% of the oracle's job), the share of the job spent probing, and how far
the log's own estimate (``job_saving_pct``, from its windows) lies from the true saving, and
how often its 95 % interval holds the true saving.

Noise: one sensor sample's CV from the dataset's σ (:func:`dvfslab.evaluation.probes.noise_estimate`
— over one run's units or one default window — converted with :func:`dvfslab.job.replay.per_sample_sigma`),
never 0: where no estimator applies, the sensor's stated prior (``SENSOR_NOISE_PRIOR``).
The job's length: workloads.csv ``job_steps`` (else the run), capped at ``--max-units``; the
governors are told it (as a progress bar would). Untrained governors: a trained ``voi`` (its
prior curves from the training workloads) is the evaluation's, not this script's.

    PYTHONPATH=. .venv/bin/python benchmarks/govern_replay.py data/replay [--max-workloads 6] [--max-units 2000]

Measured (2-vCPU VM; medians over workloads, seed 0): LoudVA AGX Xavier (``dvfslab import
loudva --board agx-xavier``), 20 workloads, whole jobs of 108000 inferences: ``voi`` (untrained)
saves 15.87 % against the oracle's 16.34 % (regret 0.17 %, 0.68 % of the job probing), ``search``
13.99 % (regret 2.86 %); the log's own whole-job estimate lies 0.05 points from the truth (at
most 3.2) and its 95 % interval holds the truth in 18 of 20 (9.8 s). The twin (``data/replay``, 27
workloads, jobs capped at 2000 steps, seed 1): voi 22.50 % vs the oracle's 24.23 %, search
21.88 %; the interval holds the truth in 25 of 27 (SIMULATED; 21 s). (Since the replay board
draws one normal per window instead of one per sample — the same distribution, another stream —
these moved from 15.98 / 13.81 % and 20 of 20, 23.18 / 21.94 % and 27 of 27: seed variation.)
"""

from __future__ import annotations

import argparse
import statistics
import time

from dvfslab.analysis import sweep_from_dataset
from dvfslab.analysis.steps import StepSource
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation.probes import SENSOR_SAMPLES, kind_of, noise_estimate, sensor_interval_s
from dvfslab.job.policy import job_governor
from dvfslab.job.replay import (
    SENSOR_NOISE_PRIOR,
    cell_from_dataset,
    govern_replay,
    per_sample_sigma,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--max-workloads", type=int, default=6)
    p.add_argument("--max-units", type=float, default=float("inf"), help="cap each job's units (default: none)")
    p.add_argument("--governors", nargs="+", default=["search", "voi"])
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    ds = load_dataset(a.dataset)
    sweep = sweep_from_dataset(ds)
    src = StepSource(sweep, ds.runs, None)
    src.meta = dict(ds.meta)
    kind = kind_of(ds.meta, sweep.knob.name)
    noise = noise_estimate(src)
    interval, where = sensor_interval_s(ds.meta) if kind == "jetson" else (0.1, "NVML, 100 ms (assumed)")
    sensor = "ina3221" if kind == "jetson" else "nvml"
    print(f"{a.dataset}: {'SIMULATED' if sweep.simulated else 'measured'}; knob {sweep.knob.name}; sensor interval "
          f"{interval:g} s ({where}); noise sigma {noise['sigma']:.4g} over {noise['over']} ({noise['source']})")
    rows: dict[str, list[dict]] = {g: [] for g in a.governors}
    t0 = time.perf_counter()
    for i, wid in enumerate(sweep.workload_ids()[: a.max_workloads]):
        cell = cell_from_dataset(a.dataset, wid)
        t_def, e_def = cell.default
        units = min(src.job_units(wid), a.max_units)
        if noise["sigma"] > 0:
            over = src.units(wid) if noise["over"] == "run" else SENSOR_SAMPLES * interval / t_def
            sigma = per_sample_sigma(noise["sigma"], over, t_def, interval)
        else:
            sigma = SENSOR_NOISE_PRIOR[sensor]
        e_oracle = min(e for _, e in cell.levels.values())
        for g in a.governors:
            s = govern_replay(job_governor(g), cell, units, seed=1000 * a.seed + i, sigma_sample=sigma, interval_s=interval)
            true_saving = 100 * (1 - s["true_energy_j"] / s["default_energy_j"])
            rows[g].append({"saving": true_saving, "oracle": 100 * (1 - e_oracle / e_def),
                            "regret": 100 * (s["true_energy_j"] / (units * e_oracle) - 1),
                            "probe_share": 100 * s["probe_units"] / units,
                            "log_error": (s["job_saving_pct"] or 0.0) - true_saving, "sigma": sigma,
                            "covered": float(bool(s["job_saving_pct_ci"])
                                             and s["job_saving_pct_ci"][0] <= true_saving <= s["job_saving_pct_ci"][1])})
    print(f"{len(next(iter(rows.values())))} workloads, {time.perf_counter() - t0:.1f} s")
    print(f"{'governor':8s} {'saving %':>9s} {'oracle %':>9s} {'regret %':>9s} {'probing %':>10s} "
          f"{'log - true (pts)':>17s} {'true in log CI':>15s}")
    for g, rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        worst = max(abs(r["log_error"]) for r in rs)
        covered = sum(r["covered"] for r in rs)
        print(f"{g:8s} {med['saving']:9.2f} {med['oracle']:9.2f} {med['regret']:9.2f} {med['probe_share']:10.2f} "
              f"{med['log_error']:+9.2f} (max {worst:.2f}) {covered:6.0f} of {len(rs)}   [medians over workloads; "
              f"sample sigma {med['sigma']:.3g}]")


if __name__ == "__main__":
    main()
