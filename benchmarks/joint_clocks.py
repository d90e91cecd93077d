"""How much the joint (GPU, EMC, CPU) setting saves beyond the best GPU-only level, on the twin. SIMULATED.

For every workload of the paper's grid (81: 9 models × 9 tasks, batch 32, max length 128; the mean
training step of its 200-step run, :func:`dvfslab.sim.spec.catalog_spec`) in MAXN, the joint
oracle is the lowest-energy setting of the GPU × EMC × CPU grid (11 × 4 × 5,
:func:`dvfslab.sim.spec.joint_grid`) and the GPU-only oracle the lowest-energy GPU level with the
EMC and the CPU at the mode's top (3199 / 2201.6 MHz: a sweep's pinned default). Printed per size
group (the paper's > 70M / <= 70M parameters), for CPU+GPU energy (the paper's total) and board
energy (all four rails), each with its own oracle: the saving ``1 − E_joint/E_gpu-only`` (median and
mean over the group's workloads), the joint oracle's slowdown against the GPU-only one, and the
settings it picks; which knob does it: the saving of GPU × CPU alone (EMC at the top) and of
GPU × EMC alone (CPU at the top), and of the grid without the EMC levels below the idle 2133 MHz
(where the EMC term of the GPU/SoC rail is a linear extrapolation no reading covers), medians.
Also printed: the saving against today's unpinned twin, where the EMC follows
the GPU clock (the grid's ``levels``).

``--ensemble N`` repeats the central figure on N parameter sets drawn as ``dvfslab simulate
--ensemble`` draws them (:func:`dvfslab.sim.calibration.sample_profile`, seeds ``[seed, i]``; the
assumed ranges include the two of issue #32, ``emc_bw_exp`` and ``dram_w_per_ghz``) and prints
p5 / p50 / p95 over the sets of each group's mean saving, with the wall time.

    .venv/bin/python benchmarks/joint_clocks.py [--ensemble 16] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from dvfslab.analysis.features import SIZE_SPLIT_M
from dvfslab.sim.calibration import sample_profile
from dvfslab.sim.profiles import AGX_ORIN_64GB, BoardProfile
from dvfslab.sim.spec import catalog_spec, evaluate, joint_grid
from dvfslab.sweep.simulate import simulation_plan

METRICS = (("CPU+GPU", "energy_per_step_j", "lowest_energy"), ("board", "energy_board_per_step_j", "lowest_board_energy"))
GROUPS = (f"> {SIZE_SPLIT_M:g}M", f"<= {SIZE_SPLIT_M:g}M")


def group_of(params_m: float) -> str:
    return GROUPS[0] if params_m > SIZE_SPLIT_M else GROUPS[1]


def per_workload(profile: BoardProfile, workloads: list[dict]) -> list[dict]:
    """One row per workload: each metric's joint and GPU-only oracles."""
    rows = []
    for w in workloads:
        spec = catalog_spec(w["workload_id"], profile, batch_size=w["batch_size"], seq_len=w["max_seq_len"])
        res = evaluate(spec, 0, profile, joint=True)
        j = res["joint"]
        top_emc, top_cpu = j["gpu_only"]["emc_freq_mhz"], j["gpu_only"]["cpu_freq_mhz"]
        gpu_cpu = joint_grid(spec, 0, profile, emc_levels=[top_emc])  # EMC held at the top
        gpu_emc = joint_grid(spec, 0, profile, cpu_levels=[top_cpu])  # CPU held at the top
        no_low_emc = joint_grid(spec, 0, profile, emc_levels=[e for e in j["emc_levels_mhz"] if e >= 2133.0])
        row = {"workload_id": w["workload_id"], "group": group_of(float(w["params_m"]))}
        for name, key, best in METRICS:
            joint, gpu_only = j[best], j["gpu_only"][best]
            follow = min(res["levels"], key=lambda r, k=key: r[k])
            row[name] = {"saving": 1.0 - joint[key] / gpu_only[key], "saving_vs_follow": 1.0 - joint[key] / follow[key],
                         "slowdown": joint["time_per_step_s"] / gpu_only["time_per_step_s"] - 1.0,
                         "setting": (joint["gpu_freq_mhz"], joint["emc_freq_mhz"], joint["cpu_freq_mhz"]),
                         "gpu_only_mhz": gpu_only["gpu_freq_mhz"],
                         "saving_gpu_cpu": 1.0 - gpu_cpu[best][key] / gpu_only[key],
                         "saving_gpu_emc": 1.0 - gpu_emc[best][key] / gpu_only[key],
                         "saving_emc_2133_up": 1.0 - no_low_emc[best][key] / gpu_only[key]}
        rows.append(row)
    return rows


def central_report(rows: list[dict]) -> None:
    print("SIMULATED (digital twin, central parameters), MAXN, paper grid; saving = 1 - E_joint / E_gpu-only "
          "(EMC 3199, CPU 2201.6 MHz)")
    for name, _key, _best in METRICS:
        print(f"\n{name} energy, each workload's own oracle:")
        print(f"  {'group':>8} {'n':>3} {'median %':>9} {'mean %':>7} {'min %':>6} {'max %':>6} {'vs follow %':>11} "
              f"{'GPUxCPU %':>9} {'GPUxEMC %':>9} {'EMC>=2133 %':>11} {'slowdown %':>10}  most picked (GPU/EMC/CPU MHz)")
        for g in GROUPS:
            sel = [r[name] for r in rows if r["group"] == g]
            s = np.array([x["saving"] for x in sel]) * 100
            fol = np.array([x["saving_vs_follow"] for x in sel]) * 100
            slow = np.array([x["slowdown"] for x in sel]) * 100
            g_cpu = np.array([x["saving_gpu_cpu"] for x in sel]) * 100
            g_emc = np.array([x["saving_gpu_emc"] for x in sel]) * 100
            hi_emc = np.array([x["saving_emc_2133_up"] for x in sel]) * 100
            picks = collections.Counter(x["setting"] for x in sel).most_common(3)
            picked = ", ".join(f"{'/'.join(f'{v:g}' for v in k)} ×{c}" for k, c in picks)
            print(f"  {g:>8} {len(sel):>3} {np.median(s):9.1f} {s.mean():7.1f} {s.min():6.1f} {s.max():6.1f} "
                  f"{np.median(fol):11.1f} {np.median(g_cpu):9.1f} {np.median(g_emc):9.1f} {np.median(hi_emc):11.1f} {np.median(slow):10.1f}  "
                  f"{picked}")


def ensemble_report(n: int, seed: int, workloads: list[dict]) -> None:
    t0 = time.perf_counter()
    means: dict = {(name, g): [] for name, _k, _b in METRICS for g in GROUPS}
    for i in range(n):
        profile, _drawn = sample_profile(np.random.default_rng(np.random.SeedSequence([seed, i])))
        rows = per_workload(profile, workloads)
        for name, _k, _b in METRICS:
            for g in GROUPS:
                means[(name, g)].append(100 * np.mean([r[name]["saving"] for r in rows if r["group"] == g]))
    wall = time.perf_counter() - t0
    print(f"\nensemble: {n} parameter sets (seed {seed}), each group's MEAN saving over its workloads, "
          f"p5 / p50 / p95 over the sets ({wall:.0f} s wall); SIMULATED")
    for name, _k, _b in METRICS:
        for g in GROUPS:
            p5, p50, p95 = np.percentile(means[(name, g)], [5, 50, 95])
            print(f"  {name:>8} {g:>8}: {p5:5.1f} / {p50:5.1f} / {p95:5.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ensemble", type=int, default=0, metavar="N", help="parameter sets for the bands (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    workloads = simulation_plan().workloads()
    t0 = time.perf_counter()
    rows = per_workload(AGX_ORIN_64GB, workloads)
    central_report(rows)
    print(f"\n(central: {len(rows)} workloads × 220 settings in {time.perf_counter() - t0:.1f} s wall)")
    if args.ensemble:
        ensemble_report(args.ensemble, args.seed, workloads)


if __name__ == "__main__":
    main()
