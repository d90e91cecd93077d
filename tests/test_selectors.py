"""The objectives as a family of selectors (after Zeus's ``OptimumSelector``), on a hand table.

Four power limits, per unit of work (energy J, time s), written by hand:

    level (W)   100    150    200    250
    E (J)       30     24     26     30
    T (s)       0.300  0.180  0.140  0.125
    T / T_250   2.40   1.44   1.12   1.00
    E / T (W)   100    133.3  185.7  240

Every expected level below is worked out by hand in the comments.
"""

from __future__ import annotations

import math

import pytest

from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import (
    LEAST_ENERGY,
    LeastEnergy,
    LeastTime,
    Objective,
    SlowdownLimit,
    ZeusCost,
    objective_from,
    parse_objective,
)

LEVELS = [100.0, 150.0, 200.0, 250.0]
E = [30.0, 24.0, 26.0, 30.0]
T = [0.300, 0.180, 0.140, 0.125]


def test_least_energy_and_least_time():
    assert LEAST_ENERGY.select_measured(LEVELS, E, T) == 150.0  # 24 J is the least
    assert LeastEnergy is Objective and Objective() == LEAST_ENERGY
    assert LeastTime().select_measured(LEVELS, E, T) == 250.0  # 0.125 s is the least


def test_zeus_cost_by_hand():
    # eta E + (1 - eta) MAXPOWER T with MAXPOWER = 250 W (the highest limit, as Zeus):
    # eta = 0.5: 15 + 125 x 0.300 = 52.5 | 12 + 22.5 = 34.5 | 13 + 17.5 = 30.5 | 15 + 15.625 = 30.625 -> 200 W
    assert ZeusCost(0.5).select_measured(LEVELS, E, T, max_power_w=250.0) == 200.0
    # eta = 0.9: 27 + 25 x 0.300 = 34.5 | 21.6 + 4.5 = 26.1 | 23.4 + 3.5 = 26.9 | 27 + 3.125 = 30.125 -> 150 W
    assert ZeusCost(0.9).select_measured(LEVELS, E, T, max_power_w=250.0) == 150.0
    # eta = 1: the least energy; eta = 0: the least time
    assert ZeusCost(1.0).select_measured(LEVELS, E, T, max_power_w=250.0) == 150.0
    assert ZeusCost(0.0).select_measured(LEVELS, E, T, max_power_w=250.0) == 250.0
    # without MAXPOWER: the highest average power measured, 30 / 0.125 = 240 W; eta = 0.5:
    # 15 + 120 x 0.300 = 51 | 12 + 21.6 = 33.6 | 13 + 16.8 = 29.8 | 15 + 15 = 30 -> 200 W
    assert ZeusCost(0.5).select_measured(LEVELS, E, T) == 200.0
    # the relative form: energy / E_250 and T / T_250, max_power = MAXPOWER x T_250 / E_250 = 250 x 0.125 / 30
    rel = ZeusCost(0.5).select(LEVELS, [e / 30.0 for e in E], [t / 0.125 for t in T], max_power=250 * 0.125 / 30)
    assert rel == 200.0
    assert ZeusCost(0.5).cost(24.0, 1.44, 31.25) == pytest.approx(0.5 * 24 + 0.5 * 31.25 * 1.44, rel=1e-12)


def test_slowdown_limit_by_hand():
    # T / T_250 = 2.40, 1.44, 1.12, 1.00: within 20 % only 200 and 250 (26, 30 J) -> 200;
    # within 50 % also 150 (24 J) -> 150; within 10 % only 250
    assert SlowdownLimit(20.0).select_measured(LEVELS, E, T) == 200.0
    assert Objective(20.0).select_measured(LEVELS, E, T) == 200.0  # the same rule, the old spelling
    assert SlowdownLimit(50.0).select_measured(LEVELS, E, T) == 150.0
    assert SlowdownLimit(10.0).select_measured(LEVELS, E, T) == 250.0
    # the limit applies to every selector: least time within 20 % is still 250; Zeus's cost (eta 0.9, which
    # picks 150 unconstrained) within 20 %: 26.9 (200) < 30.125 (250) -> 200
    assert ZeusCost(0.9, max_slowdown_pct=20.0).select_measured(LEVELS, E, T, max_power_w=250.0) == 200.0
    assert Objective(50.0).limit == pytest.approx(1.5) and math.isinf(Objective().limit)
    # nothing admissible: the baseline (None)
    assert SlowdownLimit(50.0).select([100.0, 150.0], [1.0, 2.0], [1.6, 1.7]) is None
    with pytest.raises(GovernorError, match="needs max_slowdown_pct"):
        SlowdownLimit()


def test_ties_lower_by_default_higher_as_zeus():
    assert LEAST_ENERGY.select([100.0, 200.0], [5.0, 5.0], [1.2, 1.0]) == 100.0
    assert LEAST_ENERGY.select([100.0, 200.0], [5.0, 5.0], [1.2, 1.0], ties_high=True) == 200.0


def test_parse_and_command_line():
    assert parse_objective(None) == Objective() and parse_objective("energy") == Objective()
    assert parse_objective("time") == LeastTime()
    assert parse_objective("zeus-cost:eta=0.25,max_slowdown_pct=10") == ZeusCost(0.25, max_slowdown_pct=10.0)
    assert parse_objective("energy:max_slowdown_pct=10") == Objective(10.0)
    for sel in (Objective(), Objective(10.0), LeastTime(5.0), ZeusCost(0.3), ZeusCost(0.5, max_slowdown_pct=20.0)):
        assert parse_objective(sel.spec) == sel
    assert objective_from() == Objective() and objective_from(max_slowdown_pct=5.0) == Objective(5.0)
    assert objective_from(eta=0.5, max_slowdown_pct=5.0) == ZeusCost(0.5, max_slowdown_pct=5.0)
    assert ZeusCost(0.5).describe() == {"selector": "zeus-cost", "spec": "zeus-cost:eta=0.5", "max_slowdown_pct": None,
                                        "eta": 0.5}
    for bad, msg in (("power", "unknown objective 'power'"), ("energy:eta=0.5", "is not one of max_slowdown_pct"),
                     ("zeus-cost:eta=x", "eta must be a number")):
        with pytest.raises(GovernorError, match=msg):
            parse_objective(bad)
    with pytest.raises(GovernorError, match="eta must be between 0 and 1"):
        ZeusCost(1.5)
    with pytest.raises(GovernorError, match="max_slowdown_pct must be >= 0"):
        LeastTime(-1.0)


def test_the_pipeline_passes_the_run_objective_to_notebooks_04_and_05(tmp_path, monkeypatch):
    """``dvfslab pipeline --eta / --max-slowdown``: OBJECTIVE (the spec string) reaches notebooks 04 and
    05 only, and summary.json records it; the notebooks are not run here (a fake executor)."""
    from analysis_fixtures import make_dataset

    from dvfslab import cli
    from dvfslab.pipeline import kernels, runner

    class Pool:  # stands for the kernel pool: no kernel is started
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def take(self):
            return None

        def stop(self, km):
            return None

    seen = {}

    def execute(name, out_dir, parameters, progress, km):
        seen[name] = dict(parameters)
        for fig in runner.FIGURES.get(name, ()):
            (out_dir / "figures").mkdir(exist_ok=True)
            (out_dir / "figures" / f"{fig}.png").write_bytes(b"")
        return out_dir / f"{name}.ipynb"

    monkeypatch.setattr(kernels, "KernelPool", Pool)
    monkeypatch.setattr(runner, "execute", execute)
    data = make_dataset(tmp_path / "ds")
    out = runner.run_pipeline(data, tmp_path / "run", html=False, progress=False, log=lambda _: None,
                              objective=objective_from(0.5, 20.0))
    assert seen["04_governor_evaluation"]["OBJECTIVE"] == "zeus-cost:eta=0.5,max_slowdown_pct=20"
    assert seen["05_beyond_the_paper"]["OBJECTIVE"] == "zeus-cost:eta=0.5,max_slowdown_pct=20"
    assert "OBJECTIVE" not in seen["01_characterization"]
    assert parse_objective(seen["04_governor_evaluation"]["OBJECTIVE"]) == ZeusCost(0.5, max_slowdown_pct=20.0)
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["pipeline"]["objective"] == {"selector": "zeus-cost", "spec": "zeus-cost:eta=0.5,max_slowdown_pct=20",
                                                "max_slowdown_pct": 20.0, "eta": 0.5}
    # the default run: the least energy
    runner.run_pipeline(data, tmp_path / "run2", html=False, progress=False, log=lambda _: None)
    assert seen["04_governor_evaluation"]["OBJECTIVE"] == "energy"
    # the command line refuses a wrong eta in one line, before any notebook
    seen.clear()
    assert cli.main(["pipeline", "--data", str(data), "--out", str(tmp_path / "run3"), "--eta", "2"]) != 0
    assert seen == {}


def test_notebooks_04_and_05_declare_the_objective_parameter():
    """papermill must parse OBJECTIVE from the parameters cell (a '=' in its comment would hide it)."""
    from pathlib import Path

    import nbformat
    from papermill.inspection import _infer_parameters

    for name in ("04_governor_evaluation", "05_beyond_the_paper"):
        book = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / f"{name}.ipynb", as_version=4)
        for cell in book.cells:
            cell.metadata.setdefault("tags", [])
        found = {p.name: p for p in _infer_parameters(book)}
        assert found["OBJECTIVE"].default == '"energy"', name
        assert parse_objective(found["OBJECTIVE"].default.strip('"')) == Objective()
