"""Joint clocks at real scale (issue #37): bounded decisions on big grids, the ``bo`` governor on a
hand-written GPU × EMC × CPU grid, and a one-workload joint sweep that has nothing to learn.

**The hand-written grid** (3 × 3 × 2 = 18 settings, lexicographic, GPU first; index = 6 i + 2 j + k):
GPU {400, 800, 1200} × EMC {800, 1600, 3200} × CPU {1000, 2000} MHz. Two training workloads A and B,
``E_A(s) = 100 m(s) e^0.1``, ``E_B(s) = 200 m(s) e^-0.1`` (``e^0`` at the baseline), so the mean of
their ``log(E / E_baseline)`` is ``log m(s)`` exactly, with

    m = 0.70 at index 9 = (800, 1600, 2000)   the prior's best, s0
    m = 0.72 at index 3 = (400, 1600, 2000)   x1: s0 with the GPU moved
    m = 0.72 at index 7 = (800, 800, 2000)    x2: s0 with the EMC moved
    m = 1    at index 17 = (1200, 3200, 2000) the baseline (every clock at the top)
    m = 0.9  elsewhere.

``bo`` with ``prior_mean = "mean"``, ``sigma = 0.05``, ``length = 0.01`` (distinct settings at least 63 length scales apart
in every clock: uncorrelated), ``rho = 1``, exact readings (``noise_cv = 0``), ``settle_s = 0.2``.
The job: ``10 m(s)`` J per unit except 6.5 at x1 and 7.5 at x2, 0.5 s per unit (so a settle is
``ceil(0.2 / 0.5) = 1`` unit), 1,000 units planned. With uncorrelated settings and readings
``X``, an unread setting has ``mu = log m + c`` (``c`` the mean of ``y - log m`` over ``X``) and
``var = sigma^2 (1 + 1/|X|)``; a read one its reading, variance 0.

1. Nothing read: hold-or-read ``s0`` (least ``m``). It moves the EMC from 3200: 1 settle unit +
   1 read unit. Reads 7.0: ``c = log 10``.
2. ``b = s0`` (``M = 7.0``); x1 and x2: ``mu = log 7.2``, ``sd = 0.05 sqrt 2 = 0.070711``,
   ``M = 7.2 e^0.0025 = 7.218023``, ``d = log(7 / 7.2) / sd = -0.398396``, ``Φ(d) = 0.345169``,
   ``Φ(d - sd) = 0.319497``: ``EI = 7 · 0.345169 - 7.218023 · 0.319497 = 0.110050``. Units left
   998: x1 (GPU only, 1 unit) nets ``997 · 0.110050 - 0.218023 = 109.50``; x2 (EMC moved: 2
   units) ``996 · 0.110050 - 2 · 0.218023 = 109.17``; a ``m = 0.9`` setting (``EI = 2.3e-5``)
   ``-2.00``. **Probe x1** (the settle breaks the tie). It reads 6.5.
3. ``c = (log 10 + log(6.5 / 0.72)) / 2 = 2.251446``; ``b = x1`` (6.5); x2: ``mu = log 0.72 + c``
   (6.841053), ``sd = 0.05 sqrt 1.5``, ``M = 6.853892``, ``EI = 0.043681``; 997 units left, x2
   moves the EMC (1600 -> 800): 2 units, net ``995 · 0.043681 - 2 · 0.353892 = 42.75 > 0``; the
   ``m = 0.9`` ones ``-2.07``. **Probe x2**: reads 7.5.
4. Every unread setting has ``m = 0.9`` or 1 (``M`` ≈ 8.8 against 6.5, EI ≈ 0): **hold x1** =
   index 3 = (400, 1600, 2000), after probes 9, 3, 7 of 2, 1 and 2 units.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dvfslab.analysis.aggregate import sweep_from_dataset
from dvfslab.analysis.features import feature_table
from dvfslab.analysis.training import TrainingData
from dvfslab.data.contract import write_dataset
from dvfslab.governors.jointbo import BoGovernor
from dvfslab.governors.registry import make as make_governor
from dvfslab.governors.voi import VoiGovernor, VoiSession

GPU, EMC, CPU = (400.0, 800.0, 1200.0), (800.0, 1600.0, 3200.0), (1000.0, 2000.0)
SETTINGS = [[g, e, c] for g in GPU for e in EMC for c in CPU]
M = {9: 0.70, 3: 0.72, 7: 0.72, 17: 1.0}


def m_of(i: int) -> float:
    return M.get(i, 0.9)


def grid_data(tmp_path, skip: tuple[int, ...] = ()) -> TrainingData:
    wl = pd.DataFrame([(w, w, "encoder", 10.0 * (k + 1), 2 * (k + 1), "sst2", "characterization")
                       for k, w in enumerate(("a", "b"))],
                      columns=["workload_id", "model", "model_type", "params_m", "n_layers", "task", "split"])
    rows = []
    for w, base, delta in (("a", 100.0, 0.1), ("b", 200.0, -0.1)):
        for i, (g, e, c) in enumerate(SETTINGS):
            if i in skip:  # a design: this setting was not run
                continue
            energy = base * m_of(i) * (math.exp(delta) if i != 17 else 1.0)
            rows.append({"run_id": f"{w}-{i}", "workload_id": w, "policy": "fixed", "gpu_freq_mhz": g,
                         "emc_freq_mhz": e, "cpu_freq_mhz": c, "rep": 0, "time_s": 50.0, "energy_j": energy,
                         "steps": 100, "status": "ok"})
    meta = {"source": "simulated", "device": {"board": "hand-written toy"}, "baseline": "fmax",
            "knobs": ["gpu_freq_mhz", "emc_freq_mhz", "cpu_freq_mhz"],
            "settings": SETTINGS, "generator": "tests/test_joint_scale.py (hand-written numbers, not a board model)"}
    sweep = sweep_from_dataset(write_dataset(tmp_path / "grid3", meta, wl, pd.DataFrame(rows)))
    return TrainingData(sweep, feature_table(sweep), ["a", "b"])


class Job:
    """The job of the module doc: 10 m(s) J per unit, 6.5 at index 3 and 7.5 at index 7; 0.5 s per unit."""

    levels = [float(i) for i in range(18)]
    model = None

    def __init__(self):
        self.asked: list[tuple[float, float]] = []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        per = {3.0: 6.5, 7.0: 7.5}.get(level, 10.0 * m_of(int(level)))
        return 0.5 * units, per * units


def test_bo_probes_the_hand_derived_settings_in_order_and_holds_the_least(tmp_path):
    bo = BoGovernor(sigma=0.05, length=0.01, rho=1.0, noise_cv=0.0, settle_s=0.2, prior_mean="mean").fit(grid_data(tmp_path))
    # runs.csv keeps the energies to a few decimals: their logs agree to 1e-5
    assert bo.prior_["mean_log_energy"][9] == pytest.approx(math.log(0.70), abs=1e-5)
    job = Job()
    d = bo.decide({"plan_job_units": 1000.0}, job)
    assert job.asked == [(9.0, 2.0), (3.0, 1.0), (7.0, 2.0)]  # module doc steps 1-3: settle units on EMC moves
    assert d.level == 3.0 and d.probe_units == 5.0  # step 4: (400, 1600, 2000)


def test_bo_with_one_training_curve_holds_its_least_setting_without_probing(tmp_path):
    data = grid_data(tmp_path)
    bo = BoGovernor().fit(TrainingData(data.sweep, data.features, ["a"]))
    job = Job()
    assert bo.decide({"plan_job_units": 1000.0}, job).level == 9.0 and job.asked == []  # A's least: m = 0.70
    assert "one training workload (a)" in bo.fallback_note()


def test_bo_is_in_the_registry_and_decides_on_a_design_that_is_not_the_full_grid(tmp_path):
    # a design: the job can run 6 of the 18 settings, s0 (9) and x2 (7) among them, x1 (3) not.
    # Module doc step 2 without x1: x2 nets 109.17 > 0 and is probed (2 units: the EMC moves); it
    # reads 7.5, worse than s0's 7.0; the rest (m = 0.9 or 1) net < 0: s0 is held.
    bo = make_governor("bo", sigma=0.05, length=0.01, rho=1.0, prior_mean="mean").fit(grid_data(tmp_path))
    job = Job()
    job.levels = [0.0, 7.0, 9.0, 12.0, 15.0, 17.0]
    d = bo.decide({"plan_job_units": 1000.0}, job)
    assert job.asked == [(9.0, 2.0), (7.0, 2.0)] and d.level == 9.0


def test_bo_fitted_on_a_design_leaves_out_the_settings_no_workload_ran(tmp_path):
    # x1 (index 3) never run by A or B: it has no prior mean, so it is no candidate even when the
    # job could run it; then the walk of the design test above: s0 (9), x2 (7), hold s0
    bo = BoGovernor(sigma=0.05, length=0.01, rho=1.0, prior_mean="mean").fit(grid_data(tmp_path, skip=(3,)))
    assert 3.0 not in bo.prior_["levels"] and len(bo.prior_["levels"]) == 17
    job = Job()
    d = bo.decide({"plan_job_units": 1000.0}, job)
    assert job.asked == [(9.0, 2.0), (7.0, 2.0)] and d.level == 9.0


def _bowl_curves(n_settings: int, n_curves: int) -> list[dict]:
    """``n_curves`` smooth curves over ``n_settings`` setting indices, their least at different indices."""
    out = []
    for k in range(n_curves):
        opt = (k + 1) * n_settings / (n_curves + 1)
        energy = [1.0 + ((i - opt) / n_settings) ** 2 for i in range(n_settings)]
        out.append({"level": [float(i) for i in range(n_settings)], "energy_rel": energy,
                    "time_rel": [1.0 + (n_settings - i) / n_settings for i in range(n_settings)]})
    return out


def test_a_voi_decision_on_5000_settings_evaluates_a_bounded_number_of_posteriors(monkeypatch):
    n, h = 5000, 4
    voi = VoiGovernor(shape_sigma=0.02, noise_cv=0.05, candidates=8)
    voi.curves_, voi.info_, voi.knob_ = _bowl_curves(n, h), {"shape_sigma": 0.02}, "setting"
    counts, plans = [0], []
    posterior, plan = VoiSession._posterior, VoiSession._plan

    def counting(self, *a, **k):
        counts[0] += 1
        return posterior(self, *a, **k)

    def planning(self):
        before = counts[0]
        plan(self)
        plans.append(counts[0] - before)

    monkeypatch.setattr(VoiSession, "_posterior", counting)
    monkeypatch.setattr(VoiSession, "_plan", planning)
    session = voi.start({"plan_job_units": 1e5}, [float(i) for i in range(n)])
    # one posterior for the plan itself, one per candidate: at most h hypotheses' own bests + 8 + the held one
    assert plans and plans[0] <= 1 + h + 8 + 1
    assert not session.done  # a long job with four different curves: worth a probe


def test_a_bo_decision_is_one_posterior_evaluation_whatever_the_grid(tmp_path):
    data = grid_data(tmp_path)
    bo = BoGovernor(sigma=0.05, length=0.01, rho=1.0, prior_mean="mean").fit(data)
    job = Job()
    session = bo.start({"plan_job_units": 1000.0}, job.levels)
    from dvfslab.governors.base import ProbeStep

    while not session.done:
        level, units = session.next_probe()
        time_s, energy_j = job.measure(level, units)
        session.observe(ProbeStep(level, time_s, energy_j, units))
    assert session.evaluations == 1 + len(job.asked)  # one per plan: the start and after each reading


@pytest.mark.slow
def test_a_one_workload_joint_sweep_reaches_nothing_to_learn(tmp_path, capsys):
    """The issue's reproduction: a sim sweep GPU × EMC over one workload, then the pipeline."""
    from dvfslab import cli

    data, out = tmp_path / "D", tmp_path / "run"
    assert cli.main(["sweep", "--backend", "sim", "--knob", "gpu=306,510,714,1020,1300.5", "--knob", "emc=2133,3199",
                     "--workloads", "bert-small/sst2", "--reps", "1", "--steps", "10", "--out", str(data),
                     "--no-progress"]) == 0
    assert cli.main(["pipeline", "--data", str(data), "--quick", "--no-html", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("NOTHING TO LEARN: one training workload (bert-small/sst2): nothing to generalize from — the learned "
            "governors fall back to FFG") in printed


def test_a_joint_level_is_named_in_mhz(tmp_path):
    sweep = grid_data(tmp_path).sweep
    # index 3 = 6·0 + 2·1 + 1: GPU 400, EMC 1600, CPU 2000 (module doc)
    assert sweep.setting_of(3.0) == {"gpu_freq_mhz": 400.0, "emc_freq_mhz": 1600.0, "cpu_freq_mhz": 2000.0}
    assert sweep.format_level(3.0) == "GPU 400 MHz × EMC 1600 MHz × CPU 2000 MHz"
    listed = sweep.settings_mhz()
    assert len(listed) == 18 and listed[17] == {"gpu_freq_mhz": 1200.0, "emc_freq_mhz": 3200.0, "cpu_freq_mhz": 2000.0}
