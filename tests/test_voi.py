"""``voi``: the value-of-information rule on hand-written curves.

Three levels (1, 2, 3) and two training curves, each relative to its own baseline (level 3):

    level          1     2     3
    h1 energy      0.8   0.9   1.0
    h2 energy      1.2   0.9   1.0
    time (both)    1.5   1.2   1.0

The job's truth is h1 at scale 10 J per unit (8, 9, 10 J). Readings: cv 1 % (the probe model),
shape misfit fixed at 0.01 (log): a reading of level 1 tells h1 (0.8) from h2 (1.2) by
log(1.5) = 0.405, ~29 standard deviations, so the lookahead is decisive and the arithmetic is
exact to about 1e-4 (the levels' own deviations, log-sd 0.01, move the figures by that much).

Before any reading: prior 1/2 each, mean curve 1.0, 0.9, 1.0: the best level b is 2. A reading
alone teaches nothing (the scale absorbs it), so voi looks at the pair (2, 1) — level 2 is read at
no extra cost — and (2, 3):
* (2, 1): with probability 1/2 (h1) it learns level 1 is better and saves 0.9 - 0.8 = 0.1 per unit;
  with 1/2 (h2) nothing: expected gain 0.05 per unit over the units left after both windows,
  ``plan - 2``; the extra cost of reading level 1 is 1 unit x (1.0 - 0.9) = 0.1.
  It pays iff 0.05 (plan - 2) > 0.1, i.e. plan > 4.
* (2, 3): level 3 is worse than 2 under both curves: gain 0.
"""

from __future__ import annotations

import pytest

from dvfslab.governors import registry as G
from dvfslab.governors.base import ProbeStep
from dvfslab.governors.objective import LeastTime
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.voi import VoiGovernor, loo_misfit, posterior_misfit, u_family

CURVES = [{"level": [1.0, 2.0, 3.0], "energy_rel": [0.8, 0.9, 1.0], "time_rel": [1.5, 1.2, 1.0]},
          {"level": [1.0, 2.0, 3.0], "energy_rel": [1.2, 0.9, 1.0], "time_rel": [1.5, 1.2, 1.0]}]
TRUTH_E = {1.0: 8.0, 2.0: 9.0, 3.0: 10.0}
TRUTH_T = {1.0: 1.5, 2.0: 1.2, 3.0: 1.0}


class CurveProbe:
    def __init__(self, energy, time, model):
        self.energy, self.time, self.model = energy, time, model
        self.levels = sorted(energy)
        self.asked: list[tuple[float, float]] = []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        return self.time[level] * units, self.energy[level] * units


def _voi(**params):
    gov = VoiGovernor(shape_sigma=0.01, **params).fit(None)
    gov.curves_ = [dict(c) for c in CURVES]  # what fit() stores from two training workloads
    return gov


def test_voi_stops_without_probing_when_the_gain_is_below_the_cost():
    # plan 3: the pair (2, 1) leaves 3 - 2 = 1 unit: gain 0.05 x 1 = 0.05 < cost 0.1 -> no probe; hold 2
    probe = CurveProbe(TRUTH_E, TRUTH_T, ProbeModel(sigma_ref=0.01))
    d = _voi().decide({"plan_job_units": 3.0}, probe)
    assert probe.asked == [] and d.probed == () and d.level == 2.0
    assert "0 levels read" in d.note


def test_voi_probes_when_the_gain_beats_the_cost():
    # plan 100: pair (2, 1): 0.05 x 98 = 4.9 > 0.1 -> read level 2 (9 J: the scale is 10 for both curves).
    # Then level 1: gain 1/2 x 10 x (0.9 - 0.8) = 0.5 J per unit over 100 - 1 - 1 = 98 units = 49 J; cost
    # 1 x (10 x (0.8 + 1.2) / 2 - 9) = 1 J -> read it: 8 J, so h1. Then level 3: under h1 10 J > 8 J,
    # gain 0, cost 1 x (10 - 8) = 2 J -> stop; hold level 1.
    probe = CurveProbe(TRUTH_E, TRUTH_T, ProbeModel(sigma_ref=0.01))
    d = _voi().decide({"plan_job_units": 100.0}, probe)
    assert probe.asked == [(2.0, 1.0), (1.0, 1.0)]
    assert d.level == 1.0 and d.probe_units == pytest.approx(2.0)
    # the plan comes from the workload; without it, job_units (here 3: no probe)
    assert _voi(job_units=3.0).decide({}, CurveProbe(TRUTH_E, TRUTH_T, ProbeModel(sigma_ref=0.01))).probed == ()


def test_voi_live_in_pieces_and_any_selector():
    # windows of 2 units, fed one unit at a time: pair (2, 1) pays (0.05 x 96 = 4.8 > 2 x 0.1); then level 1
    # (0.5 x 96 = 48 > 2 x 1): two units at 2, two at 1, then hold 1
    session = _voi().start({"plan_job_units": 100.0}, [1.0, 2.0, 3.0],
                           ProbeModel(default_window=2.0, sigma_ref=0.01))
    levels = []
    while not session.done:
        level = session.next_level()
        levels.append(level)
        session.observe(ProbeStep(level, TRUTH_T[level], TRUTH_E[level], 1.0))
    assert levels == [2.0, 2.0, 1.0, 1.0] and session.level == 1.0
    # least time: both curves say level 3 is the fastest, no reading can change that: no probe, hold 3
    probe = CurveProbe(TRUTH_E, TRUTH_T, ProbeModel(sigma_ref=0.01))
    d = _voi(objective=LeastTime()).decide({"plan_job_units": 100.0}, probe)
    assert probe.asked == [] and d.level == 3.0


def test_voi_untrained_on_a_60_level_grid():
    # no training data: the U-shaped prior. Truth: E(x) = 0.3 / x + 0.7 x at x = level / 1000, levels
    # 1000 j / 60 (j = 1..60); its least is at x = sqrt(0.3 / 0.7) = 0.6547 with E* = 2 sqrt(0.21) = 0.916515.
    # Over a long job with cheap windows voi must end within 1 % of E* and read fewer than all 60 levels.
    levels = [1000.0 * j / 60 for j in range(1, 61)]
    energy = {f: 0.3 / (f / 1000) + 0.7 * (f / 1000) for f in levels}
    time = {f: 1000.0 / f for f in levels}
    gov = VoiGovernor().fit(None)
    assert gov.info_["prior"] == "u-shape"
    probe = CurveProbe(energy, time, ProbeModel(sigma_ref=0.01))
    d = gov.decide({"plan_job_units": 1e6}, probe)
    assert d.level in levels
    assert energy[d.level] <= 1.01 * 2 * 0.21 ** 0.5
    read = [lv for lv, _ in probe.asked]
    assert len(read) == len(set(read)) and 0 < len(read) < 60
    assert "U-shaped prior" in d.note


def test_voi_fit_stores_normalised_curves_and_the_misfit():
    # two curves that differ only at level 1 (log 1.5 = 0.405465): after the best scale the log-residuals
    # are (2/3, -1/3, -1/3) x 0.405465, RMS 0.405465 x sqrt(6 / 27) = 0.190139, for each curve
    assert loo_misfit(CURVES) == pytest.approx(0.405465 * (6 / 27) ** 0.5, rel=1e-5)
    # a twin of h1 from the same model: leave-one-curve-out each h1 fits its twin exactly (0, 0, and h2's
    # 0.190139: median 0); leave-one-model-out each curve must fit the other model's (0.190139 for all three)
    three = [CURVES[0], dict(CURVES[0]), CURVES[1]]
    assert loo_misfit(three) == pytest.approx(0.0, abs=1e-12)
    assert loo_misfit(three, ["a", "a", "b"]) == pytest.approx(0.405465 * (6 / 27) ** 0.5, rel=1e-5)
    # the posterior's misfit: with one other curve (or two identical ones) the posterior mean is that curve,
    # so the fixed point is the same 0.190139; with a twin in the same group it starts, and stays, at 0
    assert posterior_misfit(CURVES) == pytest.approx(0.405465 * (6 / 27) ** 0.5, rel=1e-5)
    assert posterior_misfit(three, ["a", "a", "b"]) == pytest.approx(0.405465 * (6 / 27) ** 0.5, rel=1e-5)
    assert posterior_misfit(three) == 0.0
    assert len(u_family([1.0, 2.0])) == 60 and all(c["energy_rel"][-1] == pytest.approx(1.0) for c in u_family([1.0, 2.0]))
    assert G.governor_class("voi") is VoiGovernor


def test_voi_fits_on_a_sweep_saves_and_decides(tmp_path):
    from analysis_fixtures import make_dataset

    from dvfslab import analysis as F
    from dvfslab.data.contract import load_dataset
    from dvfslab.governors.files import load_governor, save_governor

    sweep = F.sweep_from_dataset(load_dataset(make_dataset(tmp_path / "ds", baseline="fmax")))
    table = F.feature_table(sweep)
    train = sweep.workload_ids()[:6]
    gov = VoiGovernor().fit(F.TrainingData(sweep, table, train))
    assert gov.info_["prior"] == "training curves" and len(gov.curves_) == 6
    top = max(sweep.level_table)
    for c in gov.curves_:  # each curve relative to its own baseline, the highest level here: 1 there
        assert c["energy_rel"][c["level"].index(top)] == pytest.approx(1.0, rel=1e-9)
        assert c["time_rel"][c["level"].index(top)] == pytest.approx(1.0, rel=1e-9)
    save_governor(gov, tmp_path / "voi.json")
    back = load_governor(tmp_path / "voi.json", policy="voi")
    assert back.curves_ == gov.curves_ and back.info_["n_curves"] == 6
    levels = list(sweep.level_table)
    energy = {f: 1.0 + ((f - levels[len(levels) // 2]) / top) ** 2 for f in levels}
    d = back.decide({"plan_job_units": 1000.0}, CurveProbe(energy, {f: top / f for f in levels},
                                                           ProbeModel(sigma_ref=0.02)))
    assert d.level in levels
