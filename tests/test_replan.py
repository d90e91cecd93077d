"""The governor re-plans as the job's length becomes known (issue 35, item 3): a length the
progress source states after the governor started, or changes, reaches a probing session
(:meth:`~dvfslab.governors.session.WindowSession.replan`); after the decision it changes only
the log's accounting.

The board is the replay board on the hand-written cell of ``tests/test_governed_run.py``
(noise-free here): the default clock (the top, 800) runs a unit in 0.125 s for 1.0 J; 400:
0.25 s, 0.8 J; 600: 0.1875 s, 0.625 J. Sensor interval 0.125 s, settle 0.25 s, so (that file's
module doc) the probe model's window is 5 read + (floor(0.25 / 0.125) + 1 = 3) settle = 8 units
at every level. Unit 1 is start-up, the calibration reads units 2-6 and two baseline windows
5 units each: the governor starts after 16 units. A probe window at 600 runs 2 settle units
(0.1875 s < 0.25 s, and the unit the settle ends in) + 4 read (0.75 s >= 5 x 0.125 s) = 6 units.
"""

from __future__ import annotations

import json

import pytest

from dvfslab.governors.base import ProbeStep
from dvfslab.governors.static import FixedGovernor
from dvfslab.job.log import format_summary
from dvfslab.job.policy import job_governor
from dvfslab.job.progress import LineProgress, Poller, ProgressFeed
from dvfslab.job.replay import ReplayBoard, ReplayCell
from dvfslab.job.runner import GovernedRun

CELL = ReplayCell({400.0: (0.25, 0.8), 600.0: (0.1875, 0.625), 800.0: (0.125, 1.0)}, (0.125, 1.0))
INTERVAL_S, SETTLE_S = 0.125, 0.25


def _run(governor, units, statements=(), log=None, job_units=None):
    """Govern a replayed job of ``units`` units; ``statements``: ``(at_total, length)`` — the
    progress source states the length once the job has first reported ``at_total`` units or more
    (as a ``k/N`` line would: a restatement that replaces the one before; in order)."""
    board = ReplayBoard(CELL, units, sigma_sample=0.0, interval_s=INTERVAL_S, settle_s=SETTLE_S)
    jb = board.job_board()
    feed, get = jb.feed, jb.feed.get
    pending = list(statements)

    def get_and_state(timeout_s):
        got = get(timeout_s)
        while pending and feed.total >= pending[0][0]:  # once each, when the job first reaches it
            feed.set_job_units(pending.pop(0)[1], f"the 'step k/N' lines (k={feed.total:g})", restate=True)
        return got

    jb.feed.get = get_and_state
    said: list[str] = []
    run = GovernedRun(governor, jb, say=said.append, require_features=False, log=log, job_units=job_units)
    run.run()
    return run, run.finish(), board, said


def test_voi_holds_at_once_when_the_length_stated_late_leaves_less_than_a_probe_window(tmp_path):
    """No length at the start: voi plans with its default 1000 units and reads its first level
    (600: units 17-22). The job's 30 units are stated at unit 17: after that window 30 - 22 = 8
    units are left, and every probe window is 8 units, so no probe leaves a unit to hold a better
    level at (voi weighs a probe's gain over the units left *after* it): voi holds at once, after
    one probe, and the hold runs the 8 units left. Without the statement, the same 30-unit job
    under the assumed 1000 is still probing when it ends (no decision)."""
    log = tmp_path / "voi.jsonl"
    run, s, board, said = _run(job_governor("voi"), 30, [(17, 30)], log=str(log))
    assert s["decided"] is True and s["probes"] == 1
    assert board.units_at[None] == 16.0 and board.units_at[600.0] >= 6.0
    held = s["chosen_level"]
    assert sum(board.units_at.values()) == 30.0
    assert board.units_at[held] == (8.0 if held != 600.0 else 14.0)  # the 8 units after the probe
    assert "over the 8 units left" in run.decision.note
    # (2) the log's plan lines: the first says what voi assumes, the second the new length
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    plans = [r for r in rows if r.get("event") == "plan"]
    assert len(plans) == 2 and plans[0]["job_units"] is None and "default 1000 units" in plans[0]["note"]
    re = plans[1]
    assert re["replan"] is True and re["job_units"] == 30.0 and re["units_done"] == 22.0
    assert re["units_left"] == 8.0 and re["plan_job_units"] == 30.0 - 16.0 and re["session_told"] is True
    # the summary's length is the final one and says when it was learnt
    assert s["job_units"] == 30.0 and s["job_units_learnt"] == "learnt at 22 steps, while probing"
    assert "learnt at 22 steps, while probing" in format_summary(s)
    assert any("voi re-plans: 8 " in x for x in said)

    _, assumed, _, _ = _run(job_governor("voi"), 30)
    assert assumed["decided"] is False and assumed["probes"] >= 2 and assumed["job_units"] is None


def test_a_length_that_grows_while_probing_keeps_voi_probing():
    """The source states 30 units from unit 2 on (before the governor starts: the plan is 30 - 16
    = 14 units, as today). Stated 30 throughout, voi's first decision weighs a pair of readings
    (its best, then another: 8 + 8 = 16 units > 14 left): it never probes. Stated 30 until unit
    17 and 400 from then on (more epochs on a resume), the same: the first decision, at unit 16,
    is made on 14 units and holds — a restatement after it changes only the log. Stated 400 at
    unit 17 after no length at first (1000 assumed: voi reads 600, units 17-22), 400 - 22 = 378
    units are left after that read, and voi probes again."""
    _, fixed, _, _ = _run(job_governor("voi"), 30, [(2, 30)])
    assert fixed["probes"] == 0 and fixed["plan_job_units"] == 14.0 and fixed["decided"] is True
    assert fixed["job_units_learnt"] == "before the governor started"
    run, late, _, _ = _run(job_governor("voi"), 400, [(2, 30), (17, 400)])
    assert late["probes"] == 0 and late["job_units"] == 400.0 and "after the decision" in late["job_units_learnt"]
    run, grown, _, _ = _run(job_governor("voi"), 400, [(17, 400)])
    assert grown["probes"] >= 2 and grown["job_units"] == 400.0
    plans = [r for r in run.log.lines if r.get("event") == "plan"]
    assert [p["job_units"] for p in plans] == [None, 400.0] and plans[1]["units_left"] == 400.0 - 22.0


def test_a_length_given_by_the_user_is_not_replaced_by_the_source():
    run, s, _, _ = _run(job_governor("voi"), 30, [(17, 400)], job_units=30)
    assert s["job_units"] == 30.0 and s["plan_job_units"] == 14.0
    assert [r.get("replan") for r in run.log.lines if r.get("event") == "plan"] == [None]


def test_after_the_decision_a_new_length_is_only_the_log_s_accounting():
    """FFG-like fixed 600 decides at unit 16 (no probe); the length 60 stated at unit 40 is logged
    as learnt after the decision, and the summary's length is it."""
    run, s, board, _ = _run(FixedGovernor(level=600).fit(), 60, [(40, 60)])
    assert board.units_at == {None: 16.0, 600.0: 44.0}
    plans = [r for r in run.log.lines if r.get("event") == "plan"]
    assert len(plans) == 2 and "session_told" not in plans[1] and "after the decision" in plans[1]["note"]
    assert plans[1]["units_done"] >= 40.0
    assert s["job_units"] == 60.0 and "after the decision" in s["job_units_learnt"]


def test_a_governor_whose_plan_ignores_the_length_is_told_nothing():
    """``search`` plans without the job's length: its session's replan returns False."""
    run, s, _, _ = _run(job_governor("search"), 100, [(17, 100)])
    plans = [r for r in run.log.lines if r.get("event") == "plan"]
    assert plans[1]["session_told"] is False and "does not plan with the job's length" in plans[1]["note"]


class _Job:
    """A job on the 18-setting grid of ``tests/test_joint_scale.py``: 10 m(s) J per unit, 0.5 s."""

    levels = [float(i) for i in range(18)]
    model = None

    def measure(self, level, units=1.0):
        from test_joint_scale import m_of

        return 0.5 * units, {3.0: 6.5, 7.0: 7.5}.get(level, 10.0 * m_of(int(level))) * units


def test_bo_weighs_its_next_probe_against_the_units_left(tmp_path):
    """``bo`` on the grid of ``tests/test_joint_scale.py`` planned for 1000 units reads setting 9
    first (2 units: 1 settle + 1 read), then 3, then 7 (that file's hand derivation). Told after the first read that one unit
    is left, every probe (at least one unit) leaves none to hold at: it holds its best, 9 (read
    7.0 J a unit, the prior's 0.70 x 10), after one probe."""
    from test_joint_scale import grid_data

    from dvfslab.governors.jointbo import BoGovernor

    bo = BoGovernor(sigma=0.05, length=0.01, rho=1.0, noise_cv=0.0, settle_s=0.2, prior_mean="mean",
                    max_probe_share=1.0)  # no budget binds: only the units left stop it
    bo.fit(grid_data(tmp_path))
    job = _Job()
    session = bo.start({"plan_job_units": 1000.0}, job.levels)
    asked = []
    while not session.done:
        level, units = session.next_probe()
        asked.append((level, units))
        if len(asked) == 1:
            assert session.replan(1.0) is True  # the length, learnt while the first window runs
        time_s, energy_j = job.measure(level, units)
        session.observe(ProbeStep(level, time_s, energy_j, units))
    assert asked == [(9.0, 2.0)] and session.level == 9.0
    assert session.plan_units == pytest.approx(3.0) and session.probe_units_budget == pytest.approx(3.0)
    assert session.replan(50.0) is False  # after the hold


def test_sources_that_restate_the_length_replace_it_and_the_hf_bar_does_not():
    feed = ProgressFeed()
    lp = LineProgress(feed, preset="steps")
    lp.line("step 5/100")
    lp.line("step 6/200")
    assert feed.job_units == 200 and "6/200" in feed.job_units_source
    feed = ProgressFeed()
    lp = LineProgress(feed, preset="hf")
    lp.line(" 10%|#  | 6/60 [00:01<00:09]")
    lp.line(" 50%|#  | 2/4 [00:01<00:01]")  # an evaluation bar: another total
    assert feed.job_units == 60
    feed = ProgressFeed()
    lengths = iter([(None, ""), (300.0, "gauge"), (600.0, "gauge")])
    poller = Poller(feed, lambda: None, 1.0, "test", length=lambda: next(lengths))
    poller.poll_once()
    assert feed.job_units is None
    poller.poll_once()
    assert feed.job_units == 300
    poller.poll_once()
    assert feed.job_units == 600
    feed.job_units_given = True
    feed.set_job_units(900.0, "a k/N line", restate=True)
    assert feed.job_units == 600


def test_a_python_loop_states_its_length_late_and_voi_re_plans():
    """The first test's job run by the caller's own loop (``GovernedRun.report``, the governor in
    its thread) on the same cell: the loop learns its length (30) at step 17 and says so with
    ``set_job_units``; voi holds after its one probe window, as on the replay board."""
    from test_governed_run import LoopBoard

    b = LoopBoard()
    with GovernedRun(job_governor("voi"), b.job_board(), require_features=False) as run:
        for k in range(1, 31):
            b.step(k)  # waits until the run has handled unit k - 1: at 17, the governor is probing
            if k == 17:
                run.set_job_units(30)
            run.report(k)
    s = run.result
    assert s["decided"] is True and s["probes"] == 1 and s["job_units"] == 30.0
    assert "over the 8 units left" in run.decision.note
    assert s["job_units_learnt"] == "learnt at 22 units, while probing" and b.level is None
