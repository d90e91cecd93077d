"""benchmarks/noise.py: the rep-to-rep spread of a dataset, and Zeus's profiling windows.

Every expected value is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from dvfslab.data.contract import load_dataset, write_dataset

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("noise", REPO / "benchmarks" / "noise.py")
noise = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(noise)


def _dataset(tmp_path: Path):
    workloads = pd.DataFrame([{"workload_id": w, "model": "m", "task": "t", "split": "characterization"}
                              for w in ("a", "b")])
    rows = [  # (workload, level, rep, energy_j, time_s, steps, status)
        ("a", 900, 0, 10.0, 4.0, 2, "ok"), ("a", 900, 1, 12.0, 4.0, 2, "ok"),
        ("b", 900, 0, 9.0, 3.0, 3, "ok"), ("b", 900, 1, 9.0, 3.0, 3, "ok"), ("b", 900, 2, 12.0, 6.0, 3, "ok"),
        ("b", 900, 3, 99.0, 99.0, 3, "failed"),  # not counted
        ("a", 1300, 0, 7.0, 2.0, 2, "ok"),  # one repetition: no CV
    ]
    runs = pd.DataFrame([{"run_id": f"r{i}", "workload_id": w, "policy": "fixed", "gpu_freq_mhz": float(f), "rep": r,
                          "energy_j": e, "time_s": t, "steps": s, "status": st}
                         for i, (w, f, r, e, t, s, st) in enumerate(rows)])
    meta = {"source": "measured", "device": {}, "freq_table_mhz": [900.0, 1300.0], "baseline": "fmax"}
    return write_dataset(tmp_path / "ds", meta, workloads, runs)


def test_cv_across_repetitions_per_unit_by_hand(tmp_path):
    got = noise.rep_cv(load_dataset(_dataset(tmp_path).path))
    assert (got["cells"], got["cells_with_reps"], got["reps_max"]) == (3, 2, 3)
    # energy per step: a@900 5, 6 -> sd 0.707107 / mean 5.5 = 0.128565;
    # b@900 3, 3, 4 -> sd sqrt(1/3) = 0.577350 / mean 3.333333 = 0.173205; median (two cells) 0.150885
    assert got["energy"]["median"] == pytest.approx(0.150885, abs=1e-6)
    # time per step: a@900 2, 2 -> 0; b@900 1, 1, 2 -> 0.577350 / 1.333333 = 0.433013; median 0.216506
    assert got["time"]["median"] == pytest.approx(0.216506, abs=1e-6)


def test_a_dataset_measured_once_per_cell_has_no_figure(tmp_path):
    ds = _dataset(tmp_path)
    once = ds.runs[ds.runs["rep"] == 0]
    single = write_dataset(tmp_path / "once", ds.meta, ds.workloads, once)
    got = noise.rep_cv(single)
    assert got["cells_with_reps"] == 0 and got["energy"] is None and got["time"] is None
    assert "repetitions: none" in "\n".join(noise.report(single.path, noise.ZEUS_PROFILE, 2))


def test_zeus_windows_gpu_to_gpu_and_around_a_curve_by_hand(tmp_path):
    (tmp_path / "X+net+gpu0,1.csv").write_text(
        "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n"
        "1.0,__GlobalPowerLimitOptimizer_300,10.0,100.0,110.0\n"   # sd 7.071068 / mean 105 = 0.067344
        "2.0,__GlobalPowerLimitOptimizer_200,12.0,200.0,200.0\n"   # 0
        "3.0,__GlobalPowerLimitOptimizer_100,17.0,300.0,300.0\n")  # 0
    (tmp_path / "X+net+gpu0.csv").write_text(  # one GPU: no GPU-to-GPU figure from it
        "start_time,window_name,elapsed_time,gpu0_energy\n1.0,__GlobalPowerLimitOptimizer_300,1.0,5.0\n")
    got = noise.gpu_to_gpu_cv(tmp_path)
    assert got["windows"] == 3 and got["median"] == pytest.approx(0.0, abs=1e-12)  # median of 0.067, 0, 0
    assert got["q75"] == pytest.approx(0.067344 / 2, abs=1e-6)  # halfway between 0 and 0.067344
    (tmp_path / "X+net+gpu0.csv").unlink()
    # three windows and a quadratic: no degree of freedom left, the file says nothing of the noise
    assert noise.curve_residuals(tmp_path, degree=2) == {"files": 0, "degree": 2, "energy": None, "time": None}
    # a line through three windows, by hand: time 17, 12, 10 s at 100, 200, 300 W; mean 13, slope
    # (-100 * 4 + 100 * -3) / 20000 = -0.035 s/W; fitted 16.5, 13, 9.5; relative residuals 0.5 / 16.5,
    # -1 / 13, 0.5 / 9.5: squares 0.000918274 + 0.005917160 + 0.002770083 = 0.009605517 over 3 - 2 = 1
    # degree of freedom -> 0.0980077. Energy 300, 200, 100 J lies on a line: 0.
    fit = noise.curve_residuals(tmp_path, degree=1)
    assert fit["files"] == 1 and fit["energy"] == pytest.approx(0.0, abs=1e-9)
    assert fit["time"] == pytest.approx(0.0980077, abs=1e-6)


def test_the_bundled_zeus_windows_are_counted_whole():
    # the multi-GPU files: A40 resnet18 and resnet50 on 4 GPUs (9 limits each), V100 resnet18 and
    # resnet50 on 2 GPUs (7 limits each): 9 + 9 + 7 + 7 = 32 windows; 12 files in all
    assert noise.gpu_to_gpu_cv(noise.ZEUS_PROFILE)["windows"] == 32
    assert noise.curve_residuals(noise.ZEUS_PROFILE)["files"] == 12
