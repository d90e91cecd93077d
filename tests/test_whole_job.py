"""Whole-job accounting (dvfslab.evaluation.replay) and seeded probe noise (dvfslab.analysis.steps).

A hand-written sweep of two workloads at three GPU levels, each run 100 steps (units), the
highest level the baseline, no steps.csv (a probe reads the per-unit rep means):

    per run (100 units)      510 MHz          714 MHz          1020 MHz (baseline)
    A/t (job_steps 1000)     200 J, 100 s     150 J, 80 s      180 J, 60 s
    B/t (no job_steps)       120 J,  90 s     160 J, 70 s      200 J, 50 s

per unit: A 2.0 / 1.5 / 1.8 J and 1.0 / 0.8 / 0.6 s; B 1.2 / 1.6 / 2.0 J and 0.9 / 0.7 / 0.5 s.
A's job is 1000 units (10 runs); B's job is its run (100 units). Every expected figure below is
worked out by hand from these rows in the comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import _run

from dvfslab import analysis as F
from dvfslab.analysis.steps import StepSource, noise_factors
from dvfslab.core.errors import SweepError
from dvfslab.data.contract import write_dataset
from dvfslab.evaluation import probes as P
from dvfslab.evaluation import replay as E
from dvfslab.governors import registry as G
from dvfslab.governors.zeus_jit import ZeusSimGovernor

LEVELS = [510.0, 714.0, 1020.0]
RUNS = {"A/t": {510.0: (100.0, 200.0), 714.0: (80.0, 150.0), 1020.0: (60.0, 180.0)},
        "B/t": {510.0: (90.0, 120.0), 714.0: (70.0, 160.0), 1020.0: (50.0, 200.0)}}


def _sweep(path, reps=1):
    wl = pd.DataFrame([{"workload_id": w, "model": w[0], "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "t", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "characterization",
                        "job_steps": 1000.0 if w == "A/t" else None} for w in RUNS])
    rows = []
    for w, curve in RUNS.items():
        for f, (t, e) in curve.items():
            for rep in range(reps):  # rep r: energy x (1 + 0.1 r), so rep 0 and 1 average 1.05 x
                rows.append({"run_id": f"{w}@{f:g}/{rep}", **_run(w, "fixed", f, rep, t, e * (1 + 0.1 * rep), 50.0, f)})
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": LEVELS, "baseline": "fmax", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_whole_job.py", "seed": 0}
    ds = write_dataset(path, meta, wl, pd.DataFrame(rows), None)
    sweep = F.sweep_from_dataset(ds)
    return sweep, F.feature_table(sweep)


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return _sweep(tmp_path_factory.mktemp("job") / "ds")


def test_units_and_jobs(hand):
    sweep, _ = hand
    source = StepSource.from_sweep(sweep)
    assert source.units("A/t") == 100.0 and source.job_units("A/t") == 1000.0 and source.job_known("A/t")
    assert source.job_units("B/t") == 100.0 and not source.job_known("B/t")  # the job is the run
    assert source.per_unit("A/t", 714.0) == (0.8, 1.5) and source.per_unit("B/t", None) == (0.5, 2.0)
    assert source.span("A/t", 510.0, 3.0, 0.25) == (0.25, 0.5)  # a quarter unit at 1.0 s, 2.0 J per unit


def test_every_governor_is_charged_over_the_whole_job(hand):
    sweep, table = hand
    data = F.TrainingData(sweep, table, ["A/t", "B/t"])
    govs = G.build(["maxn", "ffg", "oracle"], data) | {"zeus-sim": ZeusSimGovernor().fit(data)}
    # idealised probes (instant, exact: a probe lasts what the governor asks): the charge by hand
    per = E.replay(govs, sweep, table, steps=P.idealised(StepSource.from_sweep(sweep))).set_index(["policy", "workload_id"])
    # FFG: mean E / E_b at 510 (200/180 + 120/200)/2 = 0.856, 714 (150/180 + 160/200)/2 = 0.817, 1020: 1 -> 714
    ffg_a, ffg_b = per.loc[("ffg", "A/t")], per.loc[("ffg", "B/t")]
    assert ffg_a["level"] == ffg_b["level"] == 714.0
    # A: job = 1000 units = 10 runs: 10 x 150 = 1500 J vs the baseline's 10 x 180 = 1800 J, the oracle's (714) 1500 J
    assert ffg_a[["job_energy_j", "job_baseline_energy_j", "job_oracle_energy_j"]].tolist() == pytest.approx([1500, 1800, 1500])
    assert ffg_a["job_saving_pct"] == pytest.approx(100 / 6) and ffg_a["job_regret_pct"] == pytest.approx(0.0, abs=1e-12)
    assert ffg_a["job_slowdown_pct"] == pytest.approx(100 / 3)  # 10 x 80 s vs 10 x 60 s
    # B: no job_steps, the job is the run: 160 J vs 200 J, oracle 510 at 120 J: regret (160 - 120) / 200 = 20 %
    assert ffg_b["job_energy_j"] == 160.0 and ffg_b["job_regret_pct"] == pytest.approx(20.0)
    assert ffg_b["job_saving_pct"] == ffg_b["saving_pct"] == pytest.approx(20.0)
    assert per.loc[("max-clock", "A/t"), "job_energy_j"] == pytest.approx(1800.0) and per.loc[("max-clock", "A/t"), "job_saving_pct"] == 0  # fmax: the top clock
    assert per.loc[("oracle", "B/t"), "job_energy_j"] == 120.0 and (per["probe_units"].loc[["ffg", "oracle"]] == 0).all()
    # zeus-sim on A: one unit split over 1020, 714, 510 (1/3 each): (1.8 + 1.5 + 2.0) / 3 = 1.766667 J and
    # (0.6 + 0.8 + 1.0) / 3 = 0.8 s; least measured per unit 1.5 J -> 714; the rest: 10 x 150 J minus the first
    # unit at 714 (1.5 J): 1498.5 J -> 1500.266667 J; time 10 x 80 - 0.8 + 0.8 = 800 s
    z = per.loc[("zeus-sim", "A/t")]
    assert z["level"] == 714.0 and z["profiling_steps"] == 3 and z["probe_units"] == pytest.approx(1.0)
    assert z["job_energy_j"] == pytest.approx(1500.2666667) and z["job_time_s"] == pytest.approx(800.0)
    assert z["job_regret_pct"] == pytest.approx(100 * 0.2666667 / 1800, rel=1e-6)  # 0.0148 %
    assert z["probe_share_pct"] == pytest.approx(0.1)  # 1 of 1000 units
    # ... and per run (100 units): 150 - 1.5 + 1.766667 = 150.266667 J, regret 0.266667 / 180 = 0.148 %
    assert z["energy_j"] == pytest.approx(150.2666667) and z["regret_pct"] == pytest.approx(100 * 0.2666667 / 180, rel=1e-6)
    # zeus-sim on B (job = run): probes (2.0 + 1.6 + 1.2) / 3 = 1.6 J, picks 510, rest 120 - 1.2 = 118.8 J
    zb = per.loc[("zeus-sim", "B/t")]
    assert zb["level"] == 510.0 and zb["job_energy_j"] == pytest.approx(120.4) and zb["probe_share_pct"] == pytest.approx(1.0)
    assert zb["job_regret_pct"] == pytest.approx(0.2)  # 0.4 / 200
    s = E.summary_dict(E.summarize(per.reset_index()))
    assert s["zeus-sim"]["job_regret_pct"] == pytest.approx((100 * 0.2666667 / 1800 + 0.2) / 2, rel=1e-6)
    assert s["zeus-sim"]["probe_share_pct"] == pytest.approx(0.55) and s["zeus-sim"]["probe_units"] == 1.0
    assert s["ffg"]["job_regret_pct"] == pytest.approx(10.0) and "probe_units" not in s["ffg"]


def test_a_job_shorter_than_its_probes_ends_while_probing(hand):
    sweep, table = hand
    gov = ZeusSimGovernor(units=200.0).fit(None)  # 200/3 units per level, a 100-unit job (B)
    row = E.replay({"zeus-sim": gov}, sweep, table, ["B/t"], P.idealised(StepSource.from_sweep(sweep))).iloc[0]
    # 1020 for 66.667 units at 2.0 J = 133.333 J, then 714 for the job's last 33.333 units at 1.6 J = 53.333 J
    assert row["job_energy_j"] == pytest.approx(400 / 3 + 160 / 3)
    assert row["probe_units"] == pytest.approx(100.0) and row["probe_share_pct"] == pytest.approx(100.0)
    assert "the job ended while probing (100 of 200 probe units)" in row["note"]


def test_probe_noise_is_seeded_and_sized(tmp_path):
    sweep, table = _sweep(tmp_path / "reps", reps=2)
    source = StepSource.from_sweep(sweep)
    # the dataset's own figure: every cell has rep 0 at E and rep 1 at 1.1 E per unit: sd / mean =
    # (0.1 E / sqrt(2)) / (1.05 E) = 0.0673435 in every cell, so the median too
    assert source.rep_noise() == pytest.approx(0.1 / 2 ** 0.5 / 1.05)
    assert StepSource.from_sweep(hand_sweep := _sweep(tmp_path / "once")[0]).rep_noise() == 0.0  # one rep: no figure
    assert hand_sweep.workload_ids() == ["A/t", "B/t"]
    noisy = source.with_noise(0.05, seed=7)
    a, b = noisy.probe("A/t"), noisy.probe("A/t")
    first = [a.measure(714.0, 1.0) for _ in range(5)]
    assert first == [b.measure(714.0, 1.0) for _ in range(5)]  # same seed, same workload: same readings
    other = source.with_noise(0.05, seed=8).probe("A/t")
    assert [other.measure(714.0, 1.0) for _ in range(5)] != first
    assert source.probe("A/t").measure(714.0, 1.0) == (0.8, 1.575)  # no noise: the rep mean (1.05 x 1.5 J)
    # the factors: mean 1 and CV 0.05 exactly in distribution; over 20,000 draws the sample mean's
    # standard error is 0.05 / sqrt(20000) = 3.5e-4 and the sample CV's about 0.05 / sqrt(2 x 20000) =
    # 2.5e-4: 4 standard errors each
    f = noise_factors(np.random.default_rng(0), 0.05, 20000)
    assert f.mean() == pytest.approx(1.0, abs=4 * 3.5e-4) and f.std(ddof=1) / f.mean() == pytest.approx(0.05, abs=4 * 2.5e-4)
    assert (noise_factors(np.random.default_rng(0), 0.0, 3) == 1.0).all()
    with pytest.raises(SweepError, match="probe noise must be a fraction"):
        source.with_noise(5.0)
    # a replay with noise: the governor sees noisy readings, the charge is the true cost
    data = F.TrainingData(sweep, table, ["A/t", "B/t"])
    data = data.with_steps(P.idealised(data.steps()).with_noise(0.05, 7))  # instant probes, fixed 5 % noise
    row = E.replay({"zeus-sim": ZeusSimGovernor().fit(None)}, sweep, table, ["B/t"], data.steps()).iloc[0]
    per_unit = {f: 1.05 * e / 100 for f, (_, e) in RUNS["B/t"].items()}
    true_probes = sum(per_unit.values()) / 3
    assert row["job_energy_j"] == pytest.approx(true_probes + 100 * per_unit[row["level"]] - per_unit[row["level"]])
