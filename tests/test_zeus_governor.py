"""``zeus``: Zeus's live GlobalPowerLimitOptimizer on hand-written traces.

Zeus's state machine (zeus/optimizer/power_limit.py, commit 75a8b93): 1 wait step at the highest
limit, then per limit from the highest down in 25 W strides 10 warm-up + 40 profiled steps, then
the selector (default ZeusCost, eta = 0.5, MAXPOWER = the highest limit). The wait runs at the
highest limit, the first profiled, so that limit runs 1 + 10 + 40 = 51 steps and the others 50.

The 4-limit trace, per step (energy J, time s), written by hand:

    limit (W)   250     225     200     175
    E (J)       2.00    1.70    1.60    1.62
    T (s)       0.0100  0.0105  0.0115  0.0130
"""

from __future__ import annotations

import pytest

from dvfslab.governors import registry as G
from dvfslab.governors.base import ProbeStep
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import Objective, ZeusCost
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.zeus import ZeusGovernor, zeus_levels

ENERGY = {250.0: 2.00, 225.0: 1.70, 200.0: 1.60, 175.0: 1.62}
TIME = {250.0: 0.0100, 225.0: 0.0105, 200.0: 0.0115, 175.0: 0.0130}


class TraceProbe:
    """``units`` at a level cost ``units`` x its per-step figures; ``asked`` records the charge."""

    def __init__(self, model=None):
        self.levels = sorted(ENERGY)
        self.model = model
        self.asked: list[tuple[float, float]] = []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        return TIME[level] * units, ENERGY[level] * units


def _zeus(**params):
    gov = ZeusGovernor(**params).fit(None)
    gov.knob_ = "power_limit_w"  # what a fit on a power-limit dataset records
    return gov


def test_zeus_sequence_and_choice_eta_half_and_one():
    probe = TraceProbe()
    d = _zeus().decide({}, probe)  # Zeus's default: ZeusCost(eta = 0.5)
    # steps charged: 250 W for 1 wait + 10 + 40 = 51, then 50 at each lower limit: 201 steps
    assert probe.asked == [(250.0, 51.0), (225.0, 50.0), (200.0, 50.0), (175.0, 50.0)]
    assert [(s.level, s.units) for s in d.probed] == probe.asked and d.probe_units == pytest.approx(201.0)
    # eta = 0.5, MAXPOWER 250 W: 0.5 E + 125 T per step =
    # 250: 1.00 + 1.2500 = 2.2500 | 225: 0.85 + 1.3125 = 2.1625 | 200: 0.80 + 1.4375 = 2.2375 | 175: 0.81 + 1.625 = 2.435
    assert d.level == 225.0
    # eta = 1: the least energy, 1.60 J at 200 W
    probe = TraceProbe()
    assert _zeus(objective=ZeusCost(1.0)).decide({}, probe).level == 200.0
    assert probe.asked == [(250.0, 51.0), (225.0, 50.0), (200.0, 50.0), (175.0, 50.0)]
    # a pipeline run passes its own objective (least energy): the same as eta = 1 here
    assert _zeus().with_params(objective=Objective()).decide({}, TraceProbe()).level == 200.0
    assert ZeusGovernor().objective == ZeusCost(0.5)


def test_zeus_window_from_the_probe_model():
    # a trace in epochs: Zeus's 10 + 40 iterations at 500 iterations per epoch are 0.1 epoch; the wait is
    # 1/50 of that at the highest limit: 0.102 epoch there, 0.1 at the others
    model = ProbeModel(default_window=0.1, read_fraction=0.8, unit="epoch")
    probe = TraceProbe(model)
    d = _zeus().decide({}, probe)
    assert [lv for lv, _ in probe.asked] == [250.0, 225.0, 200.0, 175.0]
    assert [u for _, u in probe.asked] == pytest.approx([0.102, 0.1, 0.1, 0.1])
    assert d.level == 225.0 and d.probe_units == pytest.approx(0.402)


def test_zeus_live_one_step_at_a_time():
    gov = _zeus()
    session = gov.start({}, sorted(ENERGY))
    levels = []
    while not session.done:
        level = session.next_level()
        levels.append(level)
        session.observe(ProbeStep(level, TIME[level], ENERGY[level], 1.0))
    assert levels == [250.0] * 51 + [225.0] * 50 + [200.0] * 50 + [175.0] * 50
    assert session.level == 225.0 and session.next_level() == 225.0


def test_zeus_levels_strides_and_ties():
    # a 100-260 W table with a 250 W level: targets 260, 235, 210, 185, 160, 135, 110 snap to the nearest
    # level (235 -> 225 at 10 W, not 250 at 15 W; 110 -> 100): 250 W is never profiled
    table = [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 260.0]
    assert zeus_levels(table, "power_limit_w") == [260.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    assert zeus_levels(table, "power_limit_w", pl_step_w=50.0) == [260.0, 200.0, 150.0, 100.0]  # 210->200, 160->150, 110->100
    # a clock knob: every level from the highest down, or every level_stride-th
    clocks = [306.0, 408.0, 510.0, 612.0, 714.0]
    assert zeus_levels(clocks, "gpu_freq_mhz") == [714.0, 612.0, 510.0, 408.0, 306.0]
    assert zeus_levels(clocks, "gpu_freq_mhz", level_stride=2) == [714.0, 510.0, 306.0]
    # a tie in cost goes to the higher limit (Zeus's min over limits profiled from the highest keeps the first)
    session = _zeus(objective=Objective()).start({}, [200.0, 225.0])
    for level in (225.0, 200.0):
        session.observe(ProbeStep(level, 1.0, 5.0 * session.next_probe()[1], session.next_probe()[1]))
    assert session.level == 225.0


def test_zeus_registered_and_checked():
    assert G.governor_class("zeus") is ZeusGovernor and G.governor_class("zeus-sim").name == "zeus-sim"
    with pytest.raises(GovernorError, match="profile_steps must be a number >= 1"):
        _zeus(profile_steps=0).start({}, [200.0])
    with pytest.raises(GovernorError, match="the level is chosen during the run"):
        _zeus().decide({})
