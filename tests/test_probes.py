"""The physical probe model of a replay (dvfslab.evaluation.probes), what a governor sees in a replay,
and the bootstrap intervals and noise floor of dvfslab.evaluation.replay.

Expected values are worked out by hand in the comments: the training-set sizes of
``ZEUS_TRAIN_SAMPLES`` and Zeus's 10 + 40 iterations; LoudVA's runs.csv time per inference and
its 500 ms tegrastats interval; hand-written regrets for the intervals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import _run

from dvfslab import analysis as F
from dvfslab.analysis.features import ANSWER_COLUMNS
from dvfslab.analysis.steps import StepSource
from dvfslab.data.contract import write_dataset
from dvfslab.data.loudva import import_loudva
from dvfslab.data.zeus import import_zeus
from dvfslab.evaluation import probes as P
from dvfslab.evaluation import replay as E
from dvfslab.governors.base import Decision, Governor, ProbeStep, ProbingGovernor
from dvfslab.governors.probemodel import ProbeModel

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def zeus_v100(tmp_path_factory):
    ds = import_zeus(REPO / "data" / "external" / "zeus_nsdi23", "v100", tmp_path_factory.mktemp("z") / "v100")
    return StepSource.from_sweep(F.sweep_from_dataset(ds))


@pytest.fixture(scope="module")
def loudva_nano(tmp_path_factory):
    ds = import_loudva(REPO / "data" / "external" / "loudva", "nano", tmp_path_factory.mktemp("l") / "nano")
    return StepSource.from_sweep(F.sweep_from_dataset(ds))


def test_zeus_window_in_job_units_on_two_real_rows(zeus_v100):
    models = P.physical_models(zeus_v100)
    # ResNet-50 on ImageNet, batch 256: ceil(1,281,167 / 256) = ceil(5004.56) = 5005 iterations per epoch;
    # Zeus's 10 warm-up + 40 profiled iterations = 50 / 5005 = 0.00999001 epoch per power limit, 40 / 5005 =
    # 0.00799201 read; its job is 21 epochs (workloads.csv), so one limit costs 0.00999001 / 21 = 4.7571e-4 of it
    m = models["resnet50/imagenet/adadelta/b256"]
    assert m.unit == "epoch" and m.window(250.0) == pytest.approx(0.00999001, rel=1e-6)
    assert m.window(100.0) == m.window(250.0) and m.read_fraction == pytest.approx(0.8)
    assert m.window(250.0) * m.read_fraction == pytest.approx(0.00799201, rel=1e-6)
    assert m.window(250.0) / zeus_v100.job_units("resnet50/imagenet/adadelta/b256") == pytest.approx(4.7571e-4, rel=1e-4)
    # ShuffleNet-v2 on CIFAR-100, batch 1024: ceil(50,000 / 1024) = ceil(48.83) = 49 iterations per epoch:
    # 50 / 49 = 1.020408 epoch per limit — longer than an epoch; its job is 77 epochs: 1.3252 % of it per limit
    s = models["shufflenetv2/cifar100/adadelta/b1024"]
    assert s.window(175.0) == pytest.approx(1.020408, rel=1e-6)
    assert s.window(175.0) / zeus_v100.job_units("shufflenetv2/cifar100/adadelta/b1024") == pytest.approx(0.013252, rel=1e-4)
    assert "10 warm-up + 40 profiled" in s.window_source and not s.idealised


def test_loudva_window_in_job_units_on_a_real_row(loudva_nano):
    m = P.physical_models(loudva_nano)["nano/inception_v3/c001"]
    # 5 tegrastats samples at LoudVA's 500 ms + 0.2 s settle = 2.7 s per clock; runs.csv: 0.918611 s per
    # inference at 153.6 MHz, 0.183694 s at 921.6 MHz -> 2.7 / 0.918611 = 2.939220 and 2.7 / 0.183694 =
    # 14.698357 inferences; read 2.5 / 2.7 = 0.925926 of them; the job is 108,000 inferences
    assert m.unit == "inference"
    assert m.window(153.6) == pytest.approx(2.939220, rel=1e-6) and m.window(921.6) == pytest.approx(14.698357, rel=1e-6)
    assert m.read_fraction == pytest.approx(0.925926, rel=1e-6)
    assert m.window(921.6) / loudva_nano.job_units("nano/inception_v3/c001") == pytest.approx(1.36096e-4, rel=1e-5)
    assert "500" in m.window_source


def test_sigma_shrinks_as_one_over_root_units_and_readings_have_that_spread(tmp_path):
    sweep, _ = _hand_sweep(tmp_path / "ds")
    # sigma 4 % over 1 unit read: over 4 units 4 % / sqrt(4) = 2 %, over 16 units 1 %
    m = ProbeModel(sigma_ref=0.04, ref_units=1.0, read_fraction=1.0)
    assert m.sigma(4.0) == pytest.approx(0.02) and m.sigma(16.0) == pytest.approx(0.01)
    source = StepSource.from_sweep(sweep).with_probe_models({"A/t": m, "B/t": m})
    assert source.probe_cv("A/t", 4.0) == pytest.approx(0.02)
    probe = source.probe("A/t")
    assert probe.model is m
    # 4000 readings of 1 unit and of 4 units at 714 MHz (true 1.5 J per unit): sample CV 4 % and 2 %; the
    # sample CV's standard error is about cv / sqrt(2 n): 4.5e-4 and 2.2e-4; 4 standard errors each
    one = np.array([probe.measure(714.0, 1.0)[1] for _ in range(4000)]) / 1.5
    four = np.array([probe.measure(714.0, 4.0)[1] for _ in range(4000)]) / 6.0
    assert one.std(ddof=1) / one.mean() == pytest.approx(0.04, abs=4 * 4.5e-4)
    assert four.std(ddof=1) / four.mean() == pytest.approx(0.02, abs=4 * 2.2e-4)
    # the same seed and workload: the same readings; the charge is the truth whatever is read
    assert [source.probe("A/t").measure(714.0, 1.0) for _ in range(2)] == \
        [source.probe("A/t").measure(714.0, 1.0) for _ in range(2)]


class Spy(Governor):
    """Records the rows it is given; holds 714."""

    name = "spy"
    needs_training = False

    def __init__(self):
        pass

    def decide(self, workload, probe=None):
        type(self).seen.append(dict(workload))
        return Decision(714.0)


class SpyProbe(ProbingGovernor):
    """Probes 0.1 unit at 510 once; holds 510."""

    name = "spy-probe"
    needs_training = False

    def __init__(self):
        pass

    def decide(self, workload, probe=None):
        type(self).seen.append(dict(workload))
        return super().decide(workload, probe)

    def start(self, workload, levels, model=None):
        return _OneProbe()


class _OneProbe:
    def __init__(self):
        self.observed = []

    @property
    def done(self):
        return len(self.observed) >= 1

    def next_probe(self):
        return 510.0, 0.1

    def observe(self, step: ProbeStep):
        self.observed.append(step)

    def decision(self):
        return Decision(510.0, tuple(self.observed))


def _hand_sweep(path):
    """Two workloads, three levels, 100 units a run: A's job 1000 units, B's none (its run: 100);
    per unit A 2.0 / 1.5 / 1.8 J and 1.0 / 0.8 / 0.6 s at 510 / 714 / 1020 MHz."""
    runs = {"A/t": {510.0: (100.0, 200.0), 714.0: (80.0, 150.0), 1020.0: (60.0, 180.0)},
            "B/t": {510.0: (90.0, 120.0), 714.0: (70.0, 160.0), 1020.0: (50.0, 200.0)}}
    wl = pd.DataFrame([{"workload_id": w, "model": w[0], "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "t", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "characterization",
                        "job_steps": 1000.0 if w == "A/t" else None} for w in runs])
    rows = [{"run_id": f"{w}@{f:g}", **_run(w, "fixed", f, 0, t, e, 50.0, f)}
            for w, curve in runs.items() for f, (t, e) in curve.items()]
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": [510.0, 714.0, 1020.0], "baseline": "fmax", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_probes.py", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(path, meta, wl, pd.DataFrame(rows), None))
    return sweep, F.feature_table(sweep)


def test_a_replayed_governor_sees_no_answer_and_plans_with_the_training_median_job(tmp_path):
    sweep, table = _hand_sweep(tmp_path / "ds")
    table = table.merge(sweep.workloads[["workload_id", "job_steps"]], on="workload_id")  # the true job, too
    assert {"opt_level", "opt_energy_j", "oracle_saving_pct", "job_steps"} <= set(table.columns)  # in the table ...
    Spy.seen, SpyProbe.seen = [], []
    per = E.replay({"spy": Spy(), "spy-probe": SpyProbe()}, sweep, table, ["B/t"]).set_index("policy")
    for row in Spy.seen + SpyProbe.seen:  # ... never in what decide() gets
        assert not set(row) & set(ANSWER_COLUMNS) and row["workload_id"] == "B/t"
    # B replayed alone: the job a governor that decides up front could know is the median of the
    # others' jobs: A's 1000 units
    assert [r["plan_job_units"] for r in Spy.seen] == [1000.0]
    # a measuring one runs through the live runner, told B's job (100 units, its run) by the progress
    # source, less the units run before it decides: B at the default (1020 MHz) takes 0.5 s a unit,
    # the sensor 1 s (tegrastats' default): start-up 1 unit, the calibration >= 2 units and >= 5 x 1 s
    # = 10 units, two baseline windows of 10: 31 units; 100 - 31 = 69 to plan with
    assert [r["plan_job_units"] for r in SpyProbe.seen] == [69.0] and per.loc["spy-probe", "plan_job_units"] == 100.0
    # the charge uses B's true job, its run of 100 units: 100 x 1.6 J at 714
    assert per.loc["spy", "job_energy_j"] == pytest.approx(160.0) and per.loc["spy", "plan_job_units"] == 1000.0
    # both replayed: the median of 1000 and 100 = 550; a user-given figure wins
    Spy.seen = []
    E.replay({"spy": Spy()}, sweep, table)
    assert [r["plan_job_units"] for r in Spy.seen] == [550.0, 550.0]
    Spy.seen = []
    E.replay({"spy": Spy()}, sweep, table, plan_job_units=42.0)
    assert [r["plan_job_units"] for r in Spy.seen] == [42.0, 42.0]


def test_the_replay_is_physical_by_default_and_idealised_only_when_asked(tmp_path):
    sweep, table = _hand_sweep(tmp_path / "ds")
    SpyProbe.seen = []
    per = E.replay({"spy-probe": SpyProbe()}, sweep, table, ["B/t"]).iloc[0]
    # through the live runner (physical probes): no sensor interval in meta.json, tegrastats' 1000 ms
    # default. 31 units at the default first (1020 MHz, 0.5 s and 2.0 J a unit: start-up, the
    # calibration of 10, two baselines of 10); the 0.1-unit probe at 510 (0.9 s, 1.2 J a unit): the
    # settle skips the unit it ends in (0.9 s >= 0.2 s), the read lasts >= 5 x 1 s: 6 units (5.4 s):
    # 7 units; the 62 left at 510 too. Job: 31 x 2.0 + 69 x 1.2 = 144.8 J
    assert per["probe_units"] == pytest.approx(7.0) and per["job_energy_j"] == pytest.approx(144.8)
    ideal = E.replay({"spy-probe": SpyProbe()}, sweep, table, ["B/t"], P.idealised(StepSource.from_sweep(sweep))).iloc[0]
    assert ideal["probe_units"] == pytest.approx(0.1)  # instant: what the governor asked (the in-process charge)
    assert ideal["job_energy_j"] == pytest.approx(120.0)  # 0.1 unit at 510, the rest of the 100 at 510: 100 x 1.2 J
    d = P.describe(P.with_physical(StepSource.from_sweep(sweep)))
    assert d["idealised"] is False and d["unit"] == "step" and d["window_per_level"]["510"] == pytest.approx(
        np.median([5.2 / 1.0, 5.2 / 0.9]))  # A 1.0 s, B 0.9 s per unit at 510: median of 5.2 and 5.777778
    # one rep, one batch size: no estimator of the data; the sensor prior (tegrastats, 1 s, 1 mW): 0.001 / sqrt(12) over
    # the median baseline power (A 3.0 W, B 4.0 W at 1020 MHz: 3.5 W), over sqrt(5) samples = 3.68856e-5; never 0
    assert d["sigma"] == pytest.approx(3.68856e-5, rel=1e-4) and "sensor prior" in d["sigma_source"]
    assert P.describe(P.idealised(StepSource.from_sweep(sweep)))["idealised"] is True


def test_noise_estimators_by_hand(tmp_path):
    # neighbouring loads: at one level, e = 1.0, 1.1, 1.0, 1.0 (order of batch size): the triples give
    # r = 1.1 / 1.0 - 1 = 0.1 and 1.0 / 1.05 - 1 = -0.047619; median 0.026190, |r - median| = 0.073810 twice,
    # MAD 0.073810: sigma = 1.4826 x 0.073810 / sqrt(1.5) = 0.089351
    energies = [1.0, 1.1, 1.0, 1.0]
    ids = [f"c{i}" for i in range(4)]
    wl = pd.DataFrame([{"workload_id": w, "model": "m", "model_family": "toy", "model_type": "encoder", "params_m": 1.0,
                        "n_layers": 1, "hidden_size": 8, "task": "t", "avg_seq_len": None, "max_seq_len": None,
                        "batch_size": i + 1, "split": "characterization", "job_steps": None} for i, w in enumerate(ids)])
    rows = [{"run_id": f"{w}@510", **_run(w, "fixed", 510.0, 0, 1.0, e, 50.0, 510.0)} for w, e in zip(ids, energies, strict=True)]
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": [510.0], "baseline": "fmax", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_probes.py", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(tmp_path / "n", meta, wl, pd.DataFrame(rows), None))
    got = P.neighbour_spread(StepSource.from_sweep(sweep))
    assert got["triples"] == 2 and got["sigma"] == pytest.approx(0.089351, rel=1e-4)


def test_noncapped_spread_on_the_real_p100_trace(tmp_path):
    # NCF on MovieLens-1M draws 34 W against the P100's lowest 125 W limit (the issue's example): its energy
    # varies across the limits only by noise, so it is among the workloads the estimator reads
    ds = import_zeus(REPO / "data" / "external" / "zeus_nsdi23", "p100", tmp_path / "p100")
    got = P.noncapped_spread(StepSource.from_sweep(F.sweep_from_dataset(ds)))
    assert any(w.startswith("ncf/") for w in got["workloads"]) and 0 < got["sigma"] < 0.1
    assert not any(w.startswith("resnet50/") for w in got["workloads"])  # ResNet-50 is capped at 125 W


def test_intervals_keys_and_the_interval_holds_the_point_estimate():
    # groups g1 = {w1, w2}, g2 = {w3}, g3 = {w4}; FFG's regrets 4, 2, 3, 1 (mean 2.5), p's 1, 1, 0, 1 (mean 0.75):
    # gap closed 100 (2.5 - 0.75) / 2.5 = 70 %. FFG's floors 1.5, 2.5, 1.0, 1.5: below on w2 (2 < 2.5) and w4
    # (1 < 1.5); above: w1, w3: FFG 4 + 3 = 7, p 1 + 0 = 1 -> 100 x 6 / 7 = 85.714 %
    w = ["w1", "w2", "w3", "w4"]
    per = pd.DataFrame({"policy": ["ffg"] * 4 + ["p"] * 4, "workload_id": w * 2, "scheme": "lomo",
                        "held_out": ["g1", "g1", "g2", "g3"] * 2, "energy_j": 1.0, "saving_pct": 0.0,
                        "slowdown_pct": 0.0, "regret_pct": 0.0,
                        "job_regret_pct": [4.0, 2.0, 3.0, 1.0, 1.0, 1.0, 0.0, 1.0],
                        "noise_floor_pct": [1.5, 2.5, 1.0, 1.5] + [np.nan] * 4})
    s = E.summarize(per).set_index("policy")
    assert s.loc["p", "job_regret_pct"] == pytest.approx(0.75) and s.loc["p", "gap_closed_pct"] == pytest.approx(70.0)
    assert s.loc["p", "gap_closed_above_floor_pct"] == pytest.approx(600 / 7) and s.loc["p", "ffg_below_floor"] == 2
    lo, hi = s.loc["p", "job_regret_pct_ci"]
    # resampling groups: p's group means are 1, 0, 1 -> any resample's mean lies in [0, 1]
    assert 0.0 <= lo <= 0.75 <= hi <= 1.0
    glo, ghi = s.loc["p", "gap_closed_pct_ci"]
    assert glo <= 70.0 <= ghi
    d = E.summary_dict(E.summarize(per))["p"]
    assert {"job_regret_pct_ci", "gap_closed_pct", "gap_closed_pct_ci"} <= set(d)
    assert d["gap_closed_pct"] == pytest.approx(70.0) and d["n_groups"] == 3
    assert E.summary_dict(E.summarize(per))["ffg"]["gap_closed_pct"] == 0.0


def test_a_window_past_the_recorded_steps_reads_the_level_mean_for_the_rest(tmp_path):
    # one workload, 100-unit runs (200 J, 100 s at 510: 2.0 J, 1.0 s per unit), 3 recorded steps at 510 of
    # 1.0, 3.0, 2.0 J and 0.5, 1.5, 1.0 s; a probe of units [2, 5): step 2 (2.0 J, 1.0 s) recorded, then 2 units
    # past the recorded three at the rep mean: 2 x 2.0 J, 2 x 1.0 s -> 6.0 J, 3.0 s; the charge reads the same
    wl = pd.DataFrame([{"workload_id": "A/t", "model": "A", "model_family": "toy", "model_type": "encoder",
                        "params_m": 10.0, "n_layers": 4, "hidden_size": 256, "task": "t", "avg_seq_len": 30.0,
                        "max_seq_len": 128, "batch_size": 16, "split": "characterization", "job_steps": None}])
    runs = pd.DataFrame([{"run_id": f"A@{f:g}", **_run("A/t", "fixed", f, 0, t, e, 50.0, f)}
                         for f, (t, e) in {510.0: (100.0, 200.0), 1020.0: (50.0, 180.0)}.items()])
    steps = pd.DataFrame({"run_id": ["A@510"] * 3 + ["A@1020"] * 3, "step": [0, 1, 2] * 2,
                          "time_s": [0.5, 1.5, 1.0, 0.5, 0.5, 0.5], "energy_j": [1.0, 3.0, 2.0, 1.8, 1.8, 1.8]})
    meta = {"source": "simulated", "device": {"board": "toy", "gpu": "none", "jetpack": "n/a", "power_mode": "MAXN"},
            "freq_table_mhz": [510.0, 1020.0], "baseline": "fmax", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_probes.py", "seed": 0}
    sweep = F.sweep_from_dataset(write_dataset(tmp_path / "r", meta, wl, runs, steps))
    source = StepSource.from_sweep(sweep)
    assert source.is_recorded("A/t")
    assert source.span_parts("A/t", 510.0, 2.0, 3.0) == pytest.approx((1.0, 2.0, 2.0, 4.0, 2.0))
    assert source.span("A/t", 510.0, 0.5, 1.0) == pytest.approx((0.25 + 0.75, 0.5 + 1.5))  # halves of steps 0, 1
    # read with a 10 % model: the recorded part as recorded, the mean part times one log-normal factor
    noisy = source.with_probe_models({"A/t": ProbeModel(sigma_ref=0.1, ref_units=1.0)})
    t, e = noisy.probe("A/t").measure(510.0, 5.0)  # units [0, 5): 6.0 J recorded + 2 x 2.0 J at the mean
    assert e != pytest.approx(10.0) and e - 6.0 == pytest.approx(4.0, rel=0.6)
