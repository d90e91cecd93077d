"""The window session's settle (``governors/session.py``, module doc *Settle*): units run first at
the level, charged but not read. Expected sums by hand: step ``k`` (1, 2, ...) spends ``10 k`` J
and ``k`` s, so a window's sums are the sums of the read steps' ``k``."""

from __future__ import annotations

import pytest

from dvfslab.governors.base import ProbeStep
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.session import WindowSession


class Reader(WindowSession):
    """Reads the ``(level, window, settle)`` of ``plan`` in turn, then holds 99."""

    def __init__(self, plan, model=None):
        self._begin(model)
        self.plan, self.windows = list(plan), []
        self._next()

    def _next(self):
        if self.plan:
            self._read(*self.plan.pop(0))
        else:
            self._hold(99.0, "read all")

    def _window_read(self, units, energy_j, time_s):
        self.windows.append((units, energy_j, time_s, self.last_window_units))
        self._next()


def feed(session, piece):
    """Run the session in steps of ``piece`` units; step ``k``: ``10 k`` J, ``k`` s."""
    k, asked = 0, []
    while not session.done:
        asked.append(session.next_probe())
        k += 1
        session.observe(ProbeStep(session.next_level(), float(k), 10.0 * k, piece))
    return asked


def test_live_steps_inside_the_settle_are_charged_not_read():
    s = Reader([(1.0, 3.0, 2.0)])
    assert s.next_probe() == (1.0, 5.0)  # settle + window
    asked = feed(s, 1.0)
    # steps 1, 2 settle; 3, 4, 5 read: 3 units, 10 (3 + 4 + 5) J, 12 s; the window ran 5 units
    assert s.windows == [(3.0, 120.0, 12.0, 5.0)]
    assert [u for _, u in asked] == [5.0, 4.0, 3.0, 2.0, 1.0]
    assert len(s.observed) == 5 and s.level == 99.0


def test_a_replay_probe_in_one_piece_is_read_whole():
    s = Reader([(1.0, 3.0, 2.0)])
    feed(s, 5.0)
    assert s.windows == [(5.0, 10.0, 1.0, 5.0)]  # one step, past the settle: all of it read


def test_a_step_that_ends_past_the_settle_is_read_whole():
    s = Reader([(1.0, 3.0, 2.0)])
    feed(s, 1.5)
    # step 1 runs units 0-1.5 (inside the settle: not read); steps 2-4 run 1.5-6 (read): 4.5 units,
    # 10 (2 + 3 + 4) J, 9 s; the window is complete at 6 >= 5 units
    assert s.windows == [(4.5, 90.0, 9.0, 6.0)]


def test_without_a_settle_every_unit_is_read():
    s = Reader([(1.0, 3.0), (2.0, 2.0, 0.0)])
    feed(s, 1.0)
    assert s.windows == [(3.0, 60.0, 6.0, 3.0), (2.0, 90.0, 9.0, 2.0)]


class Restarting(Reader):
    restarts_at_epoch_end = True


def test_a_window_restarted_at_an_epoch_end_pays_no_second_settle():
    # epochs of 4 units; window 3 after a settle of 2: the probe stops at the epoch end (4 units
    # asked, not 5); steps 3, 4 read and cancelled by the epoch end; the clock stays settled, so
    # the restarted window reads steps 5, 6, 7: 3 units, 10 (5 + 6 + 7) J, 18 s
    s = Restarting([(1.0, 3.0, 2.0)], ProbeModel(epoch_units=4.0))
    assert s.next_probe() == (1.0, 4.0)
    asked = feed(s, 1.0)
    assert s.windows == [(3.0, 180.0, 18.0, 3.0)]
    assert [u for _, u in asked][4:] == [3.0, 2.0, 1.0]
    assert s.units_run == pytest.approx(7.0, abs=1e-12)
