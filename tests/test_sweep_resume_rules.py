"""The resume rules live in the library (issue 36, items 6 and 7).

:func:`dvfslab.sweep.store.refuse_plan_changes` reads the stored plan typed (``SweepPlan``) and
refuses a plan option given with another value; the CLI only parses. A plan level the board
lacks (a sweep resumed on another board) names the way out, not ``--nearest`` (``sweep`` has none).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.core.errors import SweepError
from dvfslab.core.files import atomic_write_json
from dvfslab.sweep.plan import make_plan
from dvfslab.sweep.store import refuse_plan_changes, stored_plan


def a_stored_plan(out: Path, levels_mhz=(612.0, 1300.5), **settings) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "plan.json", make_plan(["bert-base/sst2"], list(levels_mhz), **settings).to_json())


def test_stored_plan_is_typed_and_none_without_one(tmp_path):
    assert stored_plan(tmp_path) is None
    a_stored_plan(tmp_path, reps=2, steps=50, pins={"emc": "none"})
    plan = stored_plan(tmp_path)
    assert (plan.reps, plan.steps, plan.levels_mhz, dict(plan.pins)["emc"]) == (2, 50, (612.0, 1300.5), "none")
    # 1 workload x 2 levels x 2 reps + MAXN x 2 reps
    assert len(plan.runs) == 6


def test_the_same_options_pass_and_changed_ones_are_refused_in_one_line(tmp_path):
    a_stored_plan(tmp_path, reps=2, steps=50, pins={"emc": "none"})
    same = refuse_plan_changes(tmp_path, {"reps": 2, "steps": 50, "seed": None}, levels_mhz=[1300.5, 612.0],
                               pins={"emc": "none"})
    assert same is not None and same.reps == 2
    with pytest.raises(SweepError) as caught:
        refuse_plan_changes(tmp_path, {"reps": 3, "steps": 50, "order": None}, levels_mhz=[612.0],
                            pins={"emc": "max"}, joint=True, no_maxn=True)
    assert str(caught.value) == (
        f"{tmp_path / 'plan.json'}: --reps 3 (the sweep has 2); --freqs 612 (the sweep has 612 1300.5); "
        "--knob/--design/--settings (the sweep has no joint knobs); --no-maxn (the sweep has MAXN runs); "
        "--emc max (the sweep has emc=none): a resumed sweep keeps its plan, so that every run of the dataset is "
        "measured the same way; resume with only --backend, --out and --resume, or start a new sweep in another --out")
    assert refuse_plan_changes(tmp_path / "none", {"reps": 9}) is None  # nothing to resume: the store says so


def test_resuming_on_a_board_without_the_plans_level_does_not_suggest_nearest(tmp_path, capsys):
    out = tmp_path / "sweep"
    a_stored_plan(out, levels_mhz=(612.0, 1234.0))  # 1234 MHz: no level of the simulated AGX Orin
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--nearest" not in err
    assert "1234 MHz is not a GPU level of this board" in err
    assert err.endswith("The sweep's plan holds this level and this board has not: resume the sweep on the board "
                        "(kind, power mode) that started it, or start a new sweep in another --out.")
