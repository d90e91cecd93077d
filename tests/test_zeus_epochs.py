"""``zeus`` with the job's epochs known: Zeus restarts an unfinished profiling window at each epoch end.

Zeus's ``GlobalPowerLimitOptimizer`` (zeus/optimizer/power_limit.py, commit 75a8b93, lines 337-358
and 360-431): ``on_epoch_end`` in ``Warmup`` or ``Profiling`` cancels the window and goes back to
``Ready(next_power_limit=current, steps=1)``, so the next epoch's first step starts the same
limit's 10 warm-up steps again; a profiling window is closed on the ``on_step_begin`` of the step
*after* its 40th, so it completes only when that step begins inside the same epoch. The first
limit is preceded by ``wait_steps = 1`` step (``Ready(steps=wait_steps + 1)``).

The unit here is an epoch (as in the Zeus traces): ``I`` iterations an epoch make one step
``1/I`` epoch and a limit's window ``50/I`` epoch. Per step (J, s), by hand:

    limit (W)   250     225     200     175
    E (J)       2.00    1.70    1.60    1.62
    T (s)       0.0100  0.0105  0.0115  0.0130

An epoch costs ``I`` times that. ZeusCost(eta = 0.5), MAXPOWER 250 W, per step: 250: 2.2500,
225: 2.1625, 200: 2.2375, 175: 2.435 — 225 W the least (a cost linear in E and T keeps its argmin
when both are scaled by ``I``).
"""

from __future__ import annotations

import pytest

from dvfslab.governors.base import ProbeStep
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.zeus import ZeusGovernor

ENERGY = {250.0: 2.00, 225.0: 1.70, 200.0: 1.60, 175.0: 1.62}
TIME = {250.0: 0.0100, 225.0: 0.0105, 200.0: 0.0115, 175.0: 0.0130}


class EpochTrace:
    """``units`` epochs at a level cost ``units x I`` steps of its per-step figures."""

    def __init__(self, iters: int):
        self.levels = sorted(ENERGY)
        self.iters = iters
        w = 50.0 / iters
        self.model = ProbeModel(windows={lv: w for lv in ENERGY}, default_window=w, read_fraction=0.8,
                                unit="epoch", epoch_units=1.0)
        self.asked: list[tuple[float, float]] = []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        return TIME[level] * units * self.iters, ENERGY[level] * units * self.iters


def _zeus():
    gov = ZeusGovernor().fit(None)
    gov.knob_ = "power_limit_w"
    return gov


def test_30_iterations_an_epoch_never_leave_the_highest_limit():
    # 1 wait + 10 warm-up + 40 profiled + the step that closes the window = 52 steps > 30, and after
    # the first epoch 10 + 40 + 1 = 51 > 30: every window is cut by an epoch end and restarted, so
    # the first limit, 250 W, is never left: no level is measured, the whole job runs at 250 W
    probe = EpochTrace(30)
    d = _zeus().decide({}, probe)
    assert d.level == 250.0
    assert d.probed == () and probe.asked == []  # what it runs is the held limit: the replay charges 250 W
    assert "never completes" in d.note
    # a 10-epoch job: 10 x 30 steps x 2.00 J = 600 J, all at 250 W
    job_energy = sum(s.energy_j for s in d.probed) + (10 - d.probe_units) * 30 * ENERGY[d.level]
    assert job_energy == pytest.approx(600.0, rel=1e-12)


def test_60_iterations_an_epoch_restart_each_next_limit_once():
    # epoch 1: 250 W for 1 + 50 steps (done at step 51, step 52 begins in the epoch), 225 W warms up
    # 9 steps and is cut; epoch 2: 225 W 50 steps, 200 W 10 steps cut; epoch 3: 200 W 50, 175 W 10
    # cut; epoch 4: 175 W 50 steps, done: 51 + 9 + 50 + 10 + 50 + 10 + 50 = 230 steps = 230/60 epochs
    probe = EpochTrace(60)
    d = _zeus().decide({}, probe)
    expected = [(250.0, 51), (225.0, 9), (225.0, 50), (200.0, 10), (200.0, 50), (175.0, 10), (175.0, 50)]
    assert [lv for lv, _ in probe.asked] == [lv for lv, _ in expected]
    assert [u for _, u in probe.asked] == pytest.approx([n / 60 for _, n in expected], rel=1e-9)
    assert d.probe_units == pytest.approx(230 / 60, rel=1e-9)
    assert d.level == 225.0 and "3 profiling window(s) restarted" in d.note


def test_the_boundary_50_and_51_iterations_an_epoch():
    # 51: the first window (1 + 50 steps) ends on the epoch's last step and is cancelled before it
    # closes; from then on 50 steps + the closing step fit: 250 W completes in epoch 2, and each
    # next limit is cut after 1 step: 51 + (50 + 1) x 3 + 50 = 254 steps = 254/51 epochs
    probe = EpochTrace(51)
    d = _zeus().decide({}, probe)
    assert d.level == 225.0 and d.probe_units == pytest.approx(254 / 51, rel=1e-9)
    assert probe.asked[0] == (250.0, pytest.approx(1.0)) and probe.asked[1] == (250.0, pytest.approx(50 / 51))
    # 50: 50 steps + the closing step never fit in an epoch: 250 W is held
    probe = EpochTrace(50)
    d = _zeus().decide({}, probe)
    assert d.level == 250.0 and d.probed == ()


def test_live_one_step_at_a_time_follows_the_same_levels():
    # 60 iterations an epoch fed one step (1/60 epoch) at a time: the levels step by step are the
    # hand sequence above, then the chosen 225 W
    gov = _zeus()
    session = gov.start({}, sorted(ENERGY), EpochTrace(60).model)
    seen = []
    for _ in range(240):
        level = session.next_level()
        seen.append(level)
        session.observe(ProbeStep(level, TIME[level], ENERGY[level], 1 / 60))
    expected = [250.0] * 51 + [225.0] * 59 + [200.0] * 60 + [175.0] * 60 + [225.0] * 10
    assert seen == expected


def test_without_epochs_known_nothing_restarts():
    # the same 30 iterations an epoch but the model does not know the epoch: Zeus's tour as without epochs
    probe = EpochTrace(30)
    probe.model = ProbeModel(windows=probe.model.windows, default_window=50 / 30, read_fraction=0.8, unit="epoch")
    d = _zeus().decide({}, probe)
    assert [lv for lv, _ in probe.asked] == [250.0, 225.0, 200.0, 175.0]
    assert d.probe_units == pytest.approx(51 / 30 + 3 * 50 / 30, rel=1e-9) and d.note == ""


def test_live_an_epoch_end_heard_from_the_trainer_restarts_the_window():
    # no epoch length known; the Trainer's on_epoch_end after 20 steps at 250 W (1 wait + 19 of its window):
    # Zeus's window starts again, 10 + 40 = 50 steps at 250 W, then 225 W
    from dvfslab.harness.policy import OnlineLevel

    session = _zeus().start({}, sorted(ENERGY), None)
    policy = OnlineLevel(session, "zeus")
    seen = []
    for i in range(71):
        if i == 20:
            policy.epoch_end()
        level = policy.step_mhz()
        seen.append(level)
        policy.observe(level, ENERGY[level], TIME[level])
    assert seen == [250.0] * 70 + [225.0] and session.restarts == 1
