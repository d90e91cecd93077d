"""Issue 36: the profiled governor's probe features are per unit of the job, whatever a probing
step's length.

A replay stretches each probe to the level's measurement window
(:meth:`dvfslab.governors.base.ProbeSession.stretch`: on the LoudVA AGX Xavier import about 229
inferences), while the profiled governor's curve model is fitted on one-unit steps. Before the
fix, :func:`probe_features` divided the window's time by the number of probing *steps*, so at
decide time ``probe_step_time_s`` was ~229 times what the model was fitted on, and the governor
picked 114.75 MHz for 56 of 56 LoudVA workloads. Expected values are hand-computed (T / k).
"""

from __future__ import annotations

import math

import pytest

from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.profiled import ProfiledGovernor, probe_features

WINDOW_UNITS = 229.0  # the LoudVA AGX Xavier's window, in inferences (the figure)
TIME_PER_UNIT_S, POWER_W = 0.004, 10.0  # the job: 4 ms and 40 mJ an inference, at any level


def test_a_window_of_k_units_and_time_t_gives_t_over_k():
    # warm-up window (229 units, 2.0 s, 30 J) charged, not measured; then two windows of 200
    # units: 1.0 s / 10 J and 1.2 s / 12 J -> T = 2.2 s over k = 400 units: 0.0055 s a unit;
    # power = 22 J / 2.2 s = 10 W
    f = probe_features([(30.0, 2.0, 229.0), (10.0, 1.0, 200.0), (12.0, 1.2, 200.0)], warmup_steps=1)
    assert f["probe_step_time_s"] == pytest.approx(0.0055, rel=1e-12)
    assert f["probe_power_w"] == pytest.approx(10.0, rel=1e-12)
    # one-unit steps (a training step each, the fit's form) are unchanged: 0.2 s over 2 steps
    assert probe_features([(2.5, 0.3), (2.0, 0.1), (1.0, 0.1)], warmup_steps=1)["probe_step_time_s"] == \
        pytest.approx(0.1, rel=1e-12)


class _Job:
    """A probe of a job whose every inference takes 4 ms and 40 mJ at any level, read in
    windows of ``WINDOW_UNITS`` (a real :class:`ProbeModel`: the replay stretches to it)."""

    levels = (408.0, 1020.0)
    model = ProbeModel(default_window=WINDOW_UNITS, unit="inference")

    def measure(self, level, units=1.0):
        return units * TIME_PER_UNIT_S, units * TIME_PER_UNIT_S * POWER_W


def _fast_jobs_low_clock() -> ProfiledGovernor:
    """A curve model on ``probe_step_time_s`` alone (log, centred on 10 ms): x = ln(t / 0.01);
    E/E_base = exp(x) at 408 MHz and exp(-x) at 1020 MHz. A job faster than 10 ms a unit
    (x < 0) spends least at 408 MHz, a slower one at 1020 MHz."""
    gov = ProfiledGovernor(probe_steps=5, warmup_steps=1)
    gov.knob_, gov.curve_ = "gpu_freq_mhz", {
        "features": ["probe_step_time_s"], "transforms": {"probe_step_time_s": "log"},
        "impute": {"probe_step_time_s": 0.01}, "mean": [math.log(0.01)], "scale": [1.0], "levels": [408.0, 1020.0],
        "energy": {"intercept": [0.0, 0.0], "coef": [[1.0, -1.0]]}, "time": {"intercept": [0.5, 0.0], "coef": [[0.0, 0.0]]}}
    return gov


def test_the_decision_reads_time_per_unit_from_stretched_probe_windows():
    decision = _fast_jobs_low_clock().decide({}, _Job())
    # every probing step ran the whole window at the default clock
    assert [s.units for s in decision.probed] == [WINDOW_UNITS] * 6
    assert all(s.level is None for s in decision.probed)
    # 4 ms a unit < 10 ms: x = ln(0.4) < 0, least energy at 408 MHz (the window's 0.916 s a step
    # would give x = ln(91.6) > 0 and 1020 MHz)
    assert decision.level == 408.0
    session = _fast_jobs_low_clock().start({}, _Job.levels)
    for step in decision.probed:
        session.observe(step)
    assert session.features()["probe_step_time_s"] == pytest.approx(TIME_PER_UNIT_S, rel=1e-12)
    assert session.features()["probe_power_w"] == pytest.approx(POWER_W, rel=1e-12)
