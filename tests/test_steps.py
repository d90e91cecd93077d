"""A dataset's steps one by one (dvfslab.analysis.steps): what a probe reads in a replay.

Hand-written toy: one workload measured at 510 and 714 MHz (plus MAXN, or not), each run 100
steps; steps.csv records the first 4 steps of some runs. Every expected value is read off the
rows written here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, _run

from dvfslab import analysis as F
from dvfslab.analysis.steps import StepSource
from dvfslab.core.errors import SweepError
from dvfslab.data.contract import write_dataset


def _dataset(path, baseline="maxn", record=("510", "714", "maxn")):
    wl = pd.DataFrame([{"workload_id": "w/t", "model": "w", "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "t", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "characterization"}])
    # (policy, level, rep): time 100 s, energy 200 J at 510 (rep 0: 200, rep 1: 220), 150 J at 714, MAXN 300 J
    rows = [("fixed", 510.0, 0, 200.0), ("fixed", 510.0, 1, 220.0), ("fixed", 714.0, 0, 150.0)]
    if baseline == "maxn":
        rows.append(("maxn", None, 0, 300.0))
    runs = pd.DataFrame([{"run_id": f"r{i}", **_run("w/t", p, f, rep, 100.0, e, 50.0, f or 1300.5)}
                         for i, (p, f, rep, e) in enumerate(rows)])
    keys = {"510": "r0", "714": "r2", "maxn": "r3"}
    # step i of run r: time 1 + i/10 s, energy (run index + 1) * (i + 1) J
    steps = pd.DataFrame([{"run_id": keys[k], "step": i, "time_s": 1.0 + i / 10, "energy_j": (int(keys[k][1]) + 1) * (i + 1.0)}
                          for k in record if k in keys and (k != "maxn" or baseline == "maxn") for i in range(4)])
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": ORIN_FREQS_MHZ, "baseline": baseline, "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_steps.py", "seed": 0}
    ds = write_dataset(path, meta, wl, runs, steps if len(steps) else None)
    return F.sweep_from_dataset(ds)


def test_recorded_steps_are_the_lowest_repetition_and_the_maxn_run(tmp_path):
    source = StepSource.from_sweep(_dataset(tmp_path / "ds"))
    t, e = source.steps("w/t", 510.0, 3)
    np.testing.assert_allclose(t, [1.0, 1.1, 1.2])
    np.testing.assert_allclose(e, [1.0, 2.0, 3.0])  # run r0 (rep 0), not r1
    assert source.steps("w/t", None, 2)[1].tolist() == [4.0, 8.0]  # the default clock: the MAXN run r3
    probe = source.probe("w/t")
    assert probe.measure(714.0) == (1.0, 3.0) and probe.measure(None) == (1.1, 8.0) and probe.measure(510.0) == (1.2, 3.0)
    with pytest.raises(SweepError, match="has 4 steps of 'w/t' at 714 MHz, the probe needs 5"):
        source.steps("w/t", 714.0, 5)
    assert source.covers(["w/t"], 4) and not source.covers(["w/t"], 5)


def test_without_maxn_the_default_clock_is_the_highest_level(tmp_path):
    source = StepSource.from_sweep(_dataset(tmp_path / "ds", baseline="fmax"))
    assert source.steps("w/t", None, 2)[1].tolist() == [3.0, 6.0]  # the 714 MHz run r2


def test_a_workload_is_served_from_one_source_never_a_mix(tmp_path):
    # recorded at 510 and MAXN only: the workload is recorded, so 714 is missing, not averaged
    source = StepSource.from_sweep(_dataset(tmp_path / "rec", record=("510", "maxn")))
    with pytest.raises(SweepError, match="no steps of 'w/t' at 714 MHz"):
        source.steps("w/t", 714.0, 1)
    # nothing recorded: mean steps of runs.csv (100 steps a run): 150 J / 100 and 100 s / 100 at 714
    source = StepSource.from_sweep(_dataset(tmp_path / "mean", record=()))
    assert not source.recorded and not source.is_recorded("w/t")
    t, e = source.steps("w/t", 714.0, 3)
    assert t.tolist() == [1.0] * 3 and e.tolist() == [1.5] * 3
    assert source.steps("w/t", None, 1)[1].tolist() == [3.0]  # MAXN: 300 J / 100
    with pytest.raises(SweepError, match="'x/y' has no baseline run"):
        source.steps("x/y", None, 1)
