"""Reading noise never 0: the sensor prior of a dataset measured once per cell, and σ a governor
estimates from its own windows. Expected values by hand in the comments (docs/hardware.md,
*Sensor priors*: NVML's counter, 1 mJ, 100 ms updates; tegrastats, 1 mW samples)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from analysis_fixtures import _run

from dvfslab import analysis as F
from dvfslab.analysis.steps import StepSource
from dvfslab.data.contract import write_dataset
from dvfslab.evaluation import probes as P
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.probemodel import noise_from_windows


def test_sigma_from_a_hand_written_set_of_windows():
    # 612 MHz: two 1-unit windows, 1.0 and 1.1 J a unit: log-deviations -+ln(1.1)/2, weight 1 each: SS = ln(1.1)^2 / 2
    # 816 MHz: two 4-unit windows, 2.0 and 2.2 J a unit: weight 4 each: SS = 4 x 2 x (ln(1.1)/2)^2 = 2 ln(1.1)^2
    # 1020 MHz: read once: no degree of freedom. Pooled: s^2 = 2.5 ln(1.1)^2 / 2 = 1.25 x 0.0090840 = 0.0113550,
    # the CV over one unit sqrt(exp(0.0113550) - 1) = 0.106863
    windows = [(612.0, 1.0, 1.0), (612.0, 1.0, 1.1), (816.0, 4.0, 8.0), (816.0, 4.0, 8.8), (1020.0, 2.0, 5.0)]
    cv, dof = noise_from_windows(windows)
    assert dof == 2 and cv == pytest.approx(0.106863, rel=1e-5)
    # over 4 units the same readings mean a CV half as large in log terms: s^2 / 4 = 0.00283876 -> 0.053318
    cv4, _ = noise_from_windows(windows, ref_units=4.0)
    assert cv4 == pytest.approx(math.sqrt(math.expm1(0.0113550 / 4)), rel=1e-4)
    assert noise_from_windows([(612.0, 1.0, 1.0), (816.0, 1.0, 2.0)]) == (0.0, 0)  # nothing read twice
    with pytest.raises(GovernorError, match="energy > 0"):
        noise_from_windows([(612.0, 1.0, 0.0)])


def _once_per_cell(path, device, power_w=(3.0, 4.0)):
    """Two workloads, one batch size, one reading per (workload, clock): no estimator of the data
    applies. The baseline (1020 MHz) of A: 60 s, 180 J (3 W); of B: 50 s, 200 J (4 W)."""
    runs = {"A/t": {510.0: (100.0, 200.0), 1020.0: (60.0, 60.0 * power_w[0])},
            "B/t": {510.0: (90.0, 120.0), 1020.0: (50.0, 50.0 * power_w[1])}}
    wl = pd.DataFrame([{"workload_id": w, "model": w[0], "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "t", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "characterization", "job_steps": 1000.0}
                       for w in runs])
    rows = [{"run_id": f"{w}@{f:g}", **_run(w, "fixed", f, 0, t, e, 50.0, f)}
            for w, curve in runs.items() for f, (t, e) in curve.items()]
    meta = {"source": "measured", "device": device, "freq_table_mhz": [510.0, 1020.0], "baseline": "fmax",
            "created_at": "2026-01-01T00:00:00Z", "generator": "tests/test_noise_prior.py"}
    return StepSource.from_sweep(F.sweep_from_dataset(write_dataset(path, meta, wl, pd.DataFrame(rows), None)))


def test_the_tegrastats_prior_when_one_reading_per_cell(tmp_path):
    # a Jetson, no interval stated: tegrastats' 1 s; a reading = 5 samples; 1 mW quantisation: 0.001 / sqrt(12)
    # per sample over the median baseline power (3 and 4 W: 3.5 W), over sqrt(5) samples = 3.68856e-5
    steps = _once_per_cell(tmp_path / "j", {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"})
    got = P.noise_estimate(steps)
    assert got["sigma"] == pytest.approx(3.68856e-5, rel=1e-4) and got["sigma"] > 0
    assert "sensor prior" in got["source"] and "INA3221" in got["source"]
    model = P.physical_models(steps)["A/t"]
    assert model.sigma_ref == pytest.approx(3.68856e-5, rel=1e-4)
    # the window is the Jetson's: 5 x 1 s + 0.2 s settle = 5.2 s at 0.6 s a unit (A at 1020 MHz, 60 s / 100 units)
    assert model.window(1020.0) == pytest.approx(5.2 / 0.6)


def test_a_data_centre_gpu_gets_nvmls_counter_and_window(tmp_path):
    # read through NVML: the energy counter, updated every 100 ms, 1 mJ: a reading of 5 updates = 0.5 s; each end
    # uncertain by one update: 0.1 / (0.5 x sqrt 6) = 0.0816497; 1 mJ at each end over 3.5 W x 0.5 s: 2.33e-4;
    # together hypot = 0.0816500
    device = {"gpu": "NVIDIA A100", "power": "GPU card power read through NVML"}
    steps = _once_per_cell(tmp_path / "n", device)
    got = P.noise_estimate(steps)
    assert got["sigma"] == pytest.approx(math.hypot(0.0816497, 0.001 * math.sqrt(2 / 12) / (3.5 * 0.5)), rel=1e-5)
    assert "NVML" in got["source"]
    # the window is NVML's, not tegrastats' 1 s: 5 x 0.1 s + 0.2 s settle = 0.7 s at 0.6 s a unit
    assert P.physical_models(steps)["A/t"].window(1020.0) == pytest.approx(0.7 / 0.6)
    # a sensitivity run scales it
    assert P.physical_models(steps, noise_scale=2.0)["A/t"].sigma_ref == pytest.approx(2 * got["sigma"], rel=1e-12)
