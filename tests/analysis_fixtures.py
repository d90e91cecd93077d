"""Small synthetic sweeps for the analysis tests (features, selection, governors, notebooks).

Every dataset built here is labelled ``source: "simulated"`` with ``generator:
"tests/analysis_fixtures.py"``: the numbers are a closed-form toy, not a board model.

Energy is U-shaped in log-frequency with its minimum exactly at a known level::

    E(f) = E0 * (1 + CURVATURE * ln(f / f_opt)^2),   T(f) = T0 * (0.3 + 0.7 * f_max / f)

and ``f_opt`` is a known function of the features (:func:`optimal_position`), so a classifier
has a right answer to find. Multiplicative noise (``noise``, default 0.1 %) is far below the
energy step between adjacent levels, so the per-workload optimum is never moved by it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.data.contract import write_dataset

ORIN_FREQS_MHZ = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]
XAVIER_FREQS_MHZ = [114.75, 216.75, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25, 1032.75,
                    1198.5, 1236.75, 1338.75, 1377.0]
CURVATURE = 2.0

# name, family, type, params_m, layers, hidden
MODELS = [
    ("bert-tiny", "bert", "encoder", 4.4, 2, 128),
    ("bert-small", "bert", "encoder", 28.8, 4, 512),
    ("pythia-31m", "pythia", "decoder", 31.0, 6, 256),
    ("pythia-70m", "pythia", "decoder", 70.4, 6, 512),
    ("bert-base", "bert", "encoder", 109.5, 12, 768),
    ("pythia-160m", "pythia", "decoder", 162.3, 12, 768),
    ("bert-large", "bert", "encoder", 335.1, 24, 1024),
    ("pythia-410m", "pythia", "decoder", 405.3, 24, 1024),
]
# task -> (avg_seq_len tokens, split)
TASKS = {"sst2": (13.3, "characterization"), "qnli": (50.2, "characterization"), "mrpc": (53.2, "characterization"),
         "rte": (71.1, "evaluation"), "cola": (11.1, "evaluation")}


def optimal_position(n_layers: float, avg_seq_len: float) -> float:
    """Where the optimum sits in the table, as a fraction of its length (the known answer)."""
    return 0.3 + (0.3 if n_layers > 7 else 0.0) + (0.1 if avg_seq_len > 40 else 0.0)


def optimal_freq(freqs_mhz: list[float], n_layers: float, avg_seq_len: float) -> float:
    """The table level that :func:`optimal_position` names."""
    grid = sorted(freqs_mhz)
    return grid[int(round(optimal_position(n_layers, avg_seq_len) * (len(grid) - 1)))]


def make_dataset(root: Path, *, freqs_mhz: list[float] | None = None, models: list[str] | None = None,
                 tasks: list[str] | None = None, reps: int = 2, baseline: str = "maxn", seed: int = 0,
                 noise: float = 0.001, missing: dict[str, float] | None = None, failed_runs: int = 0,
                 split_of: dict[str, str] | None = None) -> Path:
    """Write a contract-valid simulated dataset to ``root`` and return ``root``.

    ``missing``: feature column -> fraction of workloads whose value is blanked (1.0 = all).
    ``failed_runs``: that many extra runs with ``status=failed`` and absurd numbers, which
    every analysis must ignore. ``split_of`` overrides a task's split.
    """
    rng = np.random.default_rng(seed)
    freqs = sorted(freqs_mhz or ORIN_FREQS_MHZ)
    fmax = freqs[-1]
    chosen = [m for m in MODELS if models is None or m[0] in models]
    task_names = tasks or list(TASKS)
    wl_rows, run_rows = [], []
    for name, fam, mtype, params, layers, hidden in chosen:
        for task in task_names:
            seq, split = TASKS[task]
            split = (split_of or {}).get(task, split)
            wid = f"{name}/{task}"
            wl_rows.append({"workload_id": wid, "model": name, "model_family": fam, "model_type": mtype,
                            "params_m": params, "n_layers": layers, "hidden_size": hidden, "task": task,
                            "avg_seq_len": seq, "max_seq_len": 128, "batch_size": 16, "split": split})
            f_opt = optimal_freq(freqs, layers, seq)
            e0, t0 = 50.0 * params ** 0.8 * (1 + seq / 100), 20.0 + params * (1 + seq / 60)
            util = min(95.0, 20.0 + 3.0 * layers + seq / 4)
            for f in freqs:
                for rep in range(reps):
                    e = e0 * (1 + CURVATURE * math.log(f / f_opt) ** 2) * (1 + noise * rng.standard_normal())
                    t = t0 * (0.3 + 0.7 * fmax / f) * (1 + noise * rng.standard_normal())
                    run_rows.append(_run(wid, "fixed", f, rep, t, e, util * f / fmax, f))
            if baseline == "maxn":
                e_top = e0 * (1 + CURVATURE * math.log(fmax / f_opt) ** 2)
                for rep in range(reps):
                    run_rows.append(_run(wid, "maxn", None, rep, t0 * 1.01, e_top * 1.02 * (1 + noise * rng.standard_normal()),
                                         util, 0.97 * fmax))
    workloads = pd.DataFrame(wl_rows)
    for col, frac in (missing or {}).items():
        blank = rng.permutation(len(workloads))[: int(round(frac * len(workloads)))]
        workloads[col] = workloads[col].astype(object)
        workloads.loc[blank, col] = None
    for i in range(failed_runs):
        wid = workloads["workload_id"].iloc[i % len(workloads)]
        bad = _run(wid, "fixed", freqs[0], 90 + i, 1e-3, 1e-3, 1.0, freqs[0])
        bad.update(status="failed")
        run_rows.append(bad)
    runs = pd.DataFrame(run_rows)
    runs.insert(0, "run_id", [f"r{i:05d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "toy U-curve board", "gpu": "none", "jetpack": "n/a",
                                              "power_mode": "MAXN"},
            "freq_table_mhz": freqs, "baseline": baseline, "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/analysis_fixtures.py (closed-form U-curves, not a board model)", "seed": seed}
    write_dataset(root, meta, workloads, runs)
    return root


def _run(wid: str, policy: str, freq: float | None, rep: int, time_s: float, energy_j: float, util: float,
         mean_freq: float) -> dict:
    return {"workload_id": wid, "policy": policy, "gpu_freq_mhz": freq, "rep": rep, "time_s": time_s,
            "energy_j": energy_j, "energy_gpu_j": 0.7 * energy_j, "energy_cpu_j": 0.3 * energy_j,
            "avg_power_w": energy_j / time_s, "peak_power_w": 1.2 * energy_j / time_s, "gpu_util_pct": util,
            "mean_gpu_freq_mhz": mean_freq, "steps": 100, "eval_metric": 0.8, "status": "ok",
            "started_at": "2026-01-01T00:00:00Z"}


# --------------------------------------------------------------------------------------------
# A tiny hand-written sweep: every expected number in the tests is computed by hand from these
# rows (the comments next to the assertions show the arithmetic).
# --------------------------------------------------------------------------------------------

# workload_id, model, model_type, params_m, n_layers, hidden_size, task, avg_seq_len, split
TINY_WORKLOADS = [
    ("tiny-enc/sst2", "tiny-enc", "encoder", 4.4, 2, 128, "sst2", 13.3, "characterization"),
    ("big-dec/qnli", "big-dec", "decoder", 162.3, 12, 768, "qnli", 50.2, "characterization"),
    ("tiny-enc/mrpc", "tiny-enc", "encoder", 4.4, 2, 128, "mrpc", 53.2, "characterization"),
]
# workload_id, policy, gpu_freq_mhz, time_s, (energy_j of rep 0, rep 1), gpu_util_pct; every run
# has avg_power_w = energy_j / time_s (one time per level, so mean power = mean energy / time).
#   tiny-enc/sst2: 510 -> 105 J, 612 -> 92 J, 714 -> 98 J, MAXN 122 J   optimum 612 (interior)
#   big-dec/qnli:  612 -> 200 J, 714 -> 175 J, 1020 -> 192 J, MAXN 250 J  optimum 714 (interior)
#   tiny-enc/mrpc: 510 -> 48 J, 612 -> 50 J, 714 -> 54 J, MAXN 80 J     optimum 510 (lowest: no U)
TINY_RUNS = [
    ("tiny-enc/sst2", "fixed", 510.0, 25.0, (100.0, 110.0), 30.0),
    ("tiny-enc/sst2", "fixed", 612.0, 20.0, (90.0, 94.0), 30.0),
    ("tiny-enc/sst2", "fixed", 714.0, 16.0, (96.0, 100.0), 30.0),
    ("tiny-enc/sst2", "maxn", None, 10.0, (120.0, 124.0), 40.0),   # util 40, 44 -> mean 42 (below)
    ("big-dec/qnli", "fixed", 612.0, 50.0, (200.0, 200.0), 80.0),
    ("big-dec/qnli", "fixed", 714.0, 40.0, (170.0, 180.0), 80.0),
    ("big-dec/qnli", "fixed", 1020.0, 25.0, (190.0, 194.0), 80.0),
    ("big-dec/qnli", "maxn", None, 20.0, (250.0, 250.0), 90.0),
    ("tiny-enc/mrpc", "fixed", 510.0, 12.0, (48.0, 48.0), 30.0),
    ("tiny-enc/mrpc", "fixed", 612.0, 10.0, (50.0, 50.0), 30.0),
    ("tiny-enc/mrpc", "fixed", 714.0, 9.0, (54.0, 54.0), 30.0),
    ("tiny-enc/mrpc", "maxn", None, 5.0, (80.0, 80.0), 50.0),
]


def tiny_frames() -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """``(meta, workloads, runs)`` of the hand-written sweep, on the Orin table.

    Besides the rows above, runs.csv has one ``status=failed`` run (tiny-enc/sst2 at 612 MHz,
    1 J in 1 s) that every analysis must ignore; the second MAXN run of tiny-enc/sst2 has
    ``gpu_util_pct`` 44 (so the baseline utilisation is (40 + 44) / 2 = 42).
    """
    wl = pd.DataFrame(TINY_WORKLOADS, columns=["workload_id", "model", "model_type", "params_m", "n_layers",
                                               "hidden_size", "task", "avg_seq_len", "split"])
    wl.insert(2, "model_family", wl["model"])
    wl["max_seq_len"], wl["batch_size"] = 128, 16
    rows = []
    for wid, policy, freq, time_s, energies, util in TINY_RUNS:
        for rep, energy in enumerate(energies):
            rows.append(_run(wid, policy, freq, rep, time_s, energy, util, freq or ORIN_FREQS_MHZ[-1]))
    rows[7]["gpu_util_pct"] = 44.0  # tiny-enc/sst2, MAXN rep 1
    failed = _run("tiny-enc/sst2", "fixed", 612.0, 9, 1.0, 1.0, 1.0, 612.0)
    failed.update(status="failed")
    rows.append(failed)
    runs = pd.DataFrame(rows)
    runs.insert(0, "run_id", [f"t{i:03d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "hand-written toy", "gpu": "none", "jetpack": "n/a",
                                              "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/analysis_fixtures.py (hand-written numbers, not a board model)"}
    return meta, wl, runs


def make_tiny_dataset(root: Path) -> Path:
    """Write the hand-written sweep as a contract-valid dataset (labelled simulated)."""
    meta, wl, runs = tiny_frames()
    write_dataset(root, meta, wl, runs)
    return root


# --------------------------------------------------------------------------------------------
# Two hand-written sweeps for the recommendation: one whose features carry the optimum, one
# whose features carry nothing. Six models, two tasks each, measured at four levels; every
# baseline (MAXN) run is 100 J in 10 s at 60 % GPU utilization, so the profiled governor's probe
# (per-step means of the baseline: 0.1 s and 10 W) is the same for every workload in both.
#
#   E (J)            408    612    816   1020
#   "low" workload    70     90     95     84    -> optimum 408 MHz
#   "high" workload   84     90     95     70    -> optimum 1020 MHz
#
# One fixed level costs (84 - 70) / 100 = 14 % of the baseline on the workloads of the other kind.
# --------------------------------------------------------------------------------------------

SIGNAL_LEVELS_MHZ = (408.0, 612.0, 816.0, 1020.0)
SIGNAL_ENERGY_J = {"low": (70.0, 90.0, 95.0, 84.0), "high": (84.0, 90.0, 95.0, 70.0)}
SIGNAL_TIME_S = (30.0, 20.0, 15.0, 12.0)
SIGNAL_MODELS = ("m1", "m2", "m3", "m4", "m5", "m6")


def signal_kind(model_index: int, task_index: int, signal: bool) -> str:
    """``"low"`` or ``"high"``: the optimum's side.

    With ``signal`` the kind follows the model (m1-m3 low, m4-m6 high) and so does ``n_layers``
    (4 vs 24): a feature names the optimum, and a held-out model is of a kind its training folds
    have seen. Without it the kind follows the task (t0 low, t1 high) while every workload has the
    same features (layers, size, sequence length, utilization, probe): no function of the
    features can tell the two kinds apart, and on every fold both kinds are equally frequent.
    """
    if signal:
        return "low" if model_index < 3 else "high"
    return "low" if task_index == 0 else "high"


def signal_frames(signal: bool) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """``(meta, workloads, runs)`` of the sweep described above (labelled simulated)."""
    wl, rows = [], []
    for i, model in enumerate(SIGNAL_MODELS):
        layers = (4 if i < 3 else 24) if signal else 12
        for j in range(2):
            wid = f"{model}/t{j}"
            wl.append({"workload_id": wid, "model": model, "model_family": "toy", "model_type": "encoder",
                       "params_m": 50.0, "n_layers": layers, "hidden_size": 512, "task": f"t{j}", "avg_seq_len": 40.0,
                       "max_seq_len": 128, "batch_size": 16, "split": "characterization"})
            energy = SIGNAL_ENERGY_J[signal_kind(i, j, signal)]
            for f, e, t in zip(SIGNAL_LEVELS_MHZ, energy, SIGNAL_TIME_S, strict=True):
                rows.append(_run(wid, "fixed", f, 0, t, e, 60.0, f))
            rows.append(_run(wid, "maxn", None, 0, 10.0, 100.0, 60.0, ORIN_FREQS_MHZ[-1]))
    runs = pd.DataFrame(rows)
    runs.insert(0, "run_id", [f"s{i:04d}" for i in range(len(runs))])
    meta = {"source": "simulated", "device": {"board": "hand-written toy", "gpu": "none", "jetpack": "n/a",
                                              "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/analysis_fixtures.py (hand-written numbers, not a board model)"}
    return meta, pd.DataFrame(wl), runs


def make_signal_dataset(root: Path, signal: bool) -> Path:
    """Write :func:`signal_frames` as a contract-valid dataset."""
    write_dataset(root, *signal_frames(signal))
    return root
