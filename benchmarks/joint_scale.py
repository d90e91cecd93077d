"""Joint clocks at real scale (issue #37): what a decision costs on big grids, and the pipeline on an
AGX Xavier-sized joint dataset. SIMULATED.

1. **Per decision.** On synthetic product grids of 100, 1,000 and 5,000 settings (GPU × EMC × CPU,
   energy per unit a smooth bowl in the log clocks, 8 training curves with their optima moved
   around), the wall time of one decision of ``voi``, ``bo`` and ``search`` (the session's first
   plan, then the plan after one reading) and the count of posterior evaluations, median of 3.
2. **The pipeline.** A joint dataset of the digital twin's AGX Xavier profile (illustrative,
   uncalibrated): 14 GPU × 6 EMC (204, 408, 665.6, 1065.6, 1600, 2133 MHz) × 29 CPU clocks
   (115.2 + 76.8 k MHz, the cpufreq table, to 2265.6) = 2,436 settings, over ``--workloads``
   (default three models on SST-2), each setting run twice for 100 steps, the twin's step energy
   (CPU+GPU) and time times a log-normal rep-to-rep noise of ``--noise`` (1 %: the twin's 200-step
   runs show 1.2 %); ``dvfslab pipeline --quick`` on it, its wall time and the machine's load.
3. **The governors over whole jobs** (leave-one-model-out, the physical probe model of the dataset,
   probing charged): per governor the whole-job saving against every clock at its top, as a share
   of the joint oracle's, the share of the job spent probing and the probes.

    PYTHONPATH=. .venv/bin/python benchmarks/joint_scale.py [--out /tmp/joint_scale] [--skip-pipeline]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.data.catalog import workload_row
from dvfslab.data.contract import write_dataset

EMC_MHZ = [204.0, 408.0, 665.6, 1065.6, 1600.0, 2133.0]
CPU_MHZ = [round(115.2 + 76.8 * k, 1) for k in range(29)]
WORKLOADS = ("bert-base/sst2", "pythia-160m/sst2", "bert-small/sst2")


def write_joint_dataset(out: Path, workloads=WORKLOADS, *, reps: int = 2, steps: int = 100, noise: float = 0.01,
                        seed: int = 0) -> Path:
    """The twin's joint dataset of module doc item 2 (SIMULATED)."""
    from dvfslab.sim.profiles import AGX_XAVIER
    from dvfslab.sim.spec import joint_grid

    rng = np.random.default_rng(seed)
    settings, runs, rows = None, [], []
    for wid in workloads:
        model, task = wid.split("/")
        rows.append(workload_row(model, task, split="characterization"))
        grid = joint_grid(wid, 0, AGX_XAVIER, emc_levels=EMC_MHZ, cpu_levels=CPU_MHZ)["rows"]
        grid = sorted(grid, key=lambda r: (r["gpu_freq_mhz"], r["emc_freq_mhz"], r["cpu_freq_mhz"]))
        if settings is None:
            settings = [[r["gpu_freq_mhz"], r["emc_freq_mhz"], r["cpu_freq_mhz"]] for r in grid]
        for r in grid:
            for rep in range(reps):
                e = r["energy_per_step_j"] * steps * math.exp(noise * rng.standard_normal())
                t = r["time_per_step_s"] * steps * math.exp(noise * rng.standard_normal())
                runs.append({"workload_id": wid, "policy": "fixed", "gpu_freq_mhz": r["gpu_freq_mhz"],
                             "emc_freq_mhz": r["emc_freq_mhz"], "cpu_freq_mhz": r["cpu_freq_mhz"], "rep": rep,
                             "time_s": t, "energy_j": e, "avg_power_w": e / t, "gpu_util_pct": r["gpu_util_pct"],
                             "steps": steps, "status": "ok"})
    frame = pd.DataFrame(runs)
    frame.insert(0, "run_id", [f"r{i:06d}" for i in range(len(frame))])
    meta = {"source": "simulated", "baseline": "fmax", "knobs": ["gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz"],
            "settings": settings, "device": {"board": "Jetson AGX Xavier (simulated, uncalibrated)"},
            "generator": f"benchmarks/joint_scale.py (the twin's joint_grid, AGX Xavier profile; rep-to-rep noise "
                         f"{noise:g} log-sd; seed {seed})"}
    wl = pd.DataFrame(rows)  # job_steps: the GLUE task's whole job (3 epochs), what a governor is charged over
    return write_dataset(out, meta, wl, frame).path


def synthetic_prior(n_settings: int, n_curves: int = 8, seed: int = 0):
    """A product grid of about ``n_settings`` (GPU × EMC × CPU) and ``n_curves`` bowls in the log clocks."""
    rng = np.random.default_rng(seed)
    n_emc = 4 if n_settings <= 200 else 6
    n_gpu = max(2, round(math.sqrt(n_settings / n_emc / 1.5)))
    n_cpu = max(2, round(n_settings / n_emc / n_gpu))
    gpu, emc, cpu = np.geomspace(300, 1300, n_gpu), np.geomspace(200, 3200, n_emc), np.geomspace(115, 2200, n_cpu)
    clocks = np.array([[g, e, c] for g in gpu for e in emc for c in cpu])
    z = np.log(clocks / clocks.max(axis=0))
    curves = []
    for _ in range(n_curves):
        opt = rng.uniform(z.min(axis=0) / 2, 0)
        log_e = ((z - opt) ** 2 * np.array([1.0, 0.3, 0.2])).sum(axis=1)
        t_rel = np.exp(-0.6 * z[:, 0] - 0.1 * z[:, 1] - 0.1 * z[:, 2])
        curves.append((np.exp(log_e - log_e[-1]), t_rel))
    return clocks, curves


def decision_times(sizes=(100, 1000, 5000), repeat: int = 3) -> list[dict]:
    """Module doc item 1: one row per governor and grid size."""
    from dvfslab.governors.base import ProbeStep
    from dvfslab.governors.jointbo import BoGovernor
    from dvfslab.governors.probemodel import ProbeModel
    from dvfslab.governors.search import SearchGovernor
    from dvfslab.governors.voi import VoiGovernor, VoiSession

    out = []
    model = ProbeModel(sigma_ref=0.05)
    for n in sizes:
        clocks, curves = synthetic_prior(n)
        levels = [float(i) for i in range(len(clocks))]
        voi = VoiGovernor(shape_sigma=0.05)
        voi.curves_ = [{"level": levels, "energy_rel": list(e), "time_rel": list(t)} for e, t in curves]
        voi.info_, voi.knob_ = {"shape_sigma": 0.05}, "setting"
        mean_log = np.mean([np.log(e) for e, _ in curves], axis=0)
        bo = BoGovernor(sigma=0.1, length=0.5, rho=0.8)
        bo.prior_ = {"knobs": ["gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz"], "levels": levels,
                     "clocks": clocks.tolist(), "mean_log_energy": mean_log.tolist(),
                     "mean_time_rel": np.mean([t for _, t in curves], axis=0).tolist(), "n_curves": len(curves),
                     "sigma": 0.1, "length": 0.5, "rho": 0.8}
        search = SearchGovernor(prior=None)
        search.settings_ = clocks.tolist()
        for name, gov in (("voi", voi), ("bo", bo), ("search", search)):
            first, second, evals = [], [], []
            for _ in range(repeat):
                counted = [0]
                if name == "voi":
                    orig = VoiSession._posterior

                    def counting(self, *a, _orig=orig, _c=counted, **k):
                        _c[0] += 1
                        return _orig(self, *a, **k)

                    VoiSession._posterior = counting
                t0 = time.perf_counter()
                s = gov.start({"plan_job_units": 5000.0}, levels, model)
                t1 = time.perf_counter()
                level, units = s.next_probe()
                t2 = time.perf_counter()
                if level is not None and not s.done:
                    s.observe(ProbeStep(level, 1.0 * units, 10.0 * units, units))
                t3 = time.perf_counter()
                if name == "voi":
                    VoiSession._posterior = orig
                    evals.append(counted[0])
                else:
                    evals.append(getattr(s, "evaluations", float("nan")))
                first.append(t1 - t0)
                second.append(t3 - t2)
            out.append({"governor": name, "settings": len(clocks), "first_decision_s": statistics.median(first),
                        "after_one_reading_s": statistics.median(second),
                        "posterior_evaluations": statistics.median(evals)})
    return out


def replay_governors(data_dir: Path, names=("oracle", "ffg", "curve", "voi", "bo", "search")) -> pd.DataFrame:
    """Module doc item 3: per governor, its share of the joint oracle's saving, probing, probes."""
    from dvfslab import analysis as F
    from dvfslab.data.contract import load_dataset
    from dvfslab.evaluation import probes as PR
    from dvfslab.evaluation.govcv import cv_replay
    from dvfslab.governors import registry as G

    sweep = F.sweep_from_dataset(load_dataset(data_dir))
    data = PR.physical_data(F.TrainingData(sweep, F.feature_table(sweep), sweep.workload_ids()), False)
    per = cv_replay(G.make_all(names), data, schemes=["lomo"])
    oracle = per[per["policy"] == "oracle"].set_index("workload_id")["job_saving_pct"]
    rows = []
    for name in names:
        r = per[per["policy"] == name].set_index("workload_id")
        share = 100 * r["job_saving_pct"] / oracle.loc[r.index]
        rows.append({"governor": name, "job_saving_pct": r["job_saving_pct"].mean(),
                     "share_of_oracle_mean_saving_pct": 100 * r["job_saving_pct"].mean() / oracle.mean(),
                     "share_of_oracle_saving_pct_median": share.median(), "share_min": share.min(),
                     "probe_share_pct_max": r["probe_share_pct"].max(), "probes_median": r["profiling_steps"].median(),
                     "probes_max": r["profiling_steps"].max()})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/joint_scale"))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--skip-pipeline", action="store_true")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds the pipeline may take")
    args = ap.parse_args()
    print("1. per decision (synthetic product grids, 8 training curves; median of 3):")
    print(pd.DataFrame(decision_times()).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    data = args.out / "data"
    if not (data / "runs.csv").exists():
        t0 = time.perf_counter()
        write_joint_dataset(data, args.workloads.split(","), noise=args.noise)
        print(f"wrote {data} in {time.perf_counter() - t0:.1f} s (SIMULATED)")
    runs = pd.read_csv(data / "runs.csv", usecols=["workload_id"])
    print(f"2. the dataset: {runs['workload_id'].nunique()} workloads, {len(runs)} runs, "
          f"{len(json.loads((data / 'meta.json').read_text())['settings'])} settings (SIMULATED)")
    if not args.skip_pipeline:
        load = os.getloadavg()
        run = args.out / "run"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "dvfslab", "pipeline", "--data", str(data), "--out", str(run),
                               "--quick", "--no-html", "--force"], capture_output=True, text=True,
                              timeout=args.timeout)
        wall = time.perf_counter() - t0
        print(f"   pipeline --quick: {wall:.0f} s wall, exit {proc.returncode}; load average before "
              f"{load[0]:.1f}, after {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        steps = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]  # each notebook's time
        print("   " + "\n   ".join(steps + proc.stdout.strip().splitlines()))
        if proc.returncode:
            print(proc.stderr[-2000:])
    print("3. governors over whole jobs, leave-one-model-out, probing charged:")
    t0 = time.perf_counter()
    print(replay_governors(data).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"   ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
