"""Joint settings named in MHz (issue #37, item 5): summary.json and the figures of a joint
dataset name a level by its clocks, never "setting 5".

The hand-written grid is tests/test_joint.py's (GPU {306, 714, 1300.5} × EMC {2133, 3199} MHz,
lexicographic, GPU first), so level ``i`` is setting ``i`` of this table, written out by hand:

    index   0            1            2            3            4             5
    clocks  306 / 2133   306 / 3199   714 / 2133   714 / 3199   1300.5 / 2133 1300.5 / 3199

and, from its docstring: workload A's least energy is index 2 (714, 2133), B's index 3 (714, 3199),
FFG holds index 2 (714, 2133).
"""

from __future__ import annotations

import json

import pytest
from test_joint import grid_frames

from dvfslab.analysis import plots as P
from dvfslab.analysis.aggregate import (
    characterization_summary,
    optimal_levels,
    optimal_range_words,
    sweep_from_dataset,
)
from dvfslab.core.summaryfile import SCHEMA_VERSION, load_summary
from dvfslab.data.contract import write_dataset
from dvfslab.pipeline.summary import name_settings, update_summary

BY_HAND = [{"gpu_freq_mhz": 306.0, "emc_freq_mhz": 2133.0}, {"gpu_freq_mhz": 306.0, "emc_freq_mhz": 3199.0},
           {"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}, {"gpu_freq_mhz": 714.0, "emc_freq_mhz": 3199.0},
           {"gpu_freq_mhz": 1300.5, "emc_freq_mhz": 2133.0}, {"gpu_freq_mhz": 1300.5, "emc_freq_mhz": 3199.0}]


@pytest.fixture
def sweep(tmp_path):
    return sweep_from_dataset(write_dataset(tmp_path / "grid", *grid_frames()))


def test_the_characterization_lists_the_settings_and_the_optima_in_mhz(sweep):
    char = characterization_summary(optimal_levels(sweep), sweep)
    assert char["knobs"] == ["gpu_freq_mhz", "emc_freq_mhz"]
    assert char["settings_mhz"] == BY_HAND
    assert char["optimal_settings_mhz"] == [BY_HAND[2], BY_HAND[3]]  # A at index 2, B at index 3
    assert char["optimal_setting_range_mhz"] == {"gpu_freq_mhz": {"min": 714.0, "max": 714.0},
                                                 "emc_freq_mhz": {"min": 2133.0, "max": 3199.0}}
    assert optimal_range_words(char, sweep) == "at GPU 714 MHz × EMC 2133–3199 MHz"


def test_summary_json_names_ffgs_level_by_its_clocks(sweep, tmp_path):
    written = update_summary(tmp_path, {"evaluation": {"ffg_level": 2.0, "n_workloads": 2},
                                        "governors": {"x": {"decided_level": 5.0, "off_level": 7.0}}}, sweep=sweep)
    summary = load_summary(tmp_path / "summary.json")  # the one reader: schema unchanged, keys added
    assert summary == written and summary["schema_version"] == SCHEMA_VERSION == 1
    assert summary["evaluation"]["ffg_level"] == 2.0
    assert summary["evaluation"]["ffg_setting_mhz"] == {"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}
    assert "n_workloads_setting_mhz" not in summary["evaluation"]
    assert summary["governors"]["x"]["decided_setting_mhz"] == {"gpu_freq_mhz": 1300.5, "emc_freq_mhz": 3199.0}
    assert summary["governors"]["x"]["off_setting_mhz"] is None  # 7 is no setting's index


def test_a_single_knob_summary_is_left_as_it_is():
    class OneKnob:
        joint_knobs = ()

    assert name_settings({"evaluation": {"ffg_level": 612.0}}, OneKnob()) == {"evaluation": {"ffg_level": 612.0}}


def test_the_figures_name_a_joint_level_by_its_clocks(sweep):
    assert sweep.format_level(3.0) == "GPU 714 MHz × EMC 3199 MHz"
    assert sweep.format_level(2.5) == "setting 2.5"  # no setting's index: the knob's words
    tree = {"nodes": [{"level": 3.0}], "level_table": list(sweep.level_table)}
    fig = P.tree_diagram(tree, True, knob=sweep.knob, format_level=sweep.format_level)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["GPU 714\nEMC 3199 MHz"]
    optima = optimal_levels(sweep)
    levels = sweep.levels.merge(sweep.workloads[["workload_id", "model", "task"]], on="workload_id")
    fig = P.u_curves(levels, optima, True, knob=sweep.knob, format_level=sweep.format_level)
    fig.canvas.draw()
    ticks = {t.get_text() for ax in fig.axes if ax.get_visible() for t in ax.get_xticklabels()} - {""}
    assert ticks and ticks <= {"GPU 306\nEMC 2133", "GPU 306\nEMC 3199", "GPU 714\nEMC 2133",
                               "GPU 714\nEMC 3199", "GPU 1300.5\nEMC 2133", "GPU 1300.5\nEMC 3199"}
    assert {ax.get_xlabel() for ax in fig.axes if ax.get_visible()} == {"joint setting (MHz)"}


def test_a_twin_joint_pipeline_names_ffgs_setting_in_mhz_as_the_plan_lists_it(tmp_path, capsys):
    """A 3-workload twin sweep of GPU {306, 714, 1300.5} × EMC {2133, 3199} MHz (SIMULATED)
    through notebooks 01-04: summary.json lists the plan's 6 settings in its order (the product,
    GPU first: written out above) and names FFG's level by the plan's setting at that index."""
    from dvfslab.cli import main
    from dvfslab.pipeline import runner as PL

    data = tmp_path / "twin"
    code = main(["sweep", "--backend", "sim", "--out", str(data), "--no-progress", "--idle-s", "0", "--steps", "10",
                 "--warmup-steps", "1", "--workloads", "bert-small/sst2,bert-base/sst2,pythia-70m/sst2",
                 "--knob", "gpu=306,714,1300.5", "--knob", "emc=2133,3199"])
    assert code == 0, capsys.readouterr().err
    out = PL.run_pipeline(data, tmp_path / "run", quick=True, html=False, progress=False,
                          notebooks=PL.NOTEBOOKS[:4], log=lambda line: None)
    summary = json.loads((out / "summary.json").read_text())
    plan = json.loads((data / "plan.json").read_text())
    assert summary["characterization"]["settings_mhz"] == BY_HAND
    ffg = summary["evaluation"]["ffg_level"]
    gpu, emc = plan["settings"][int(ffg)]
    assert summary["evaluation"]["ffg_setting_mhz"] == {"gpu_freq_mhz": gpu, "emc_freq_mhz": emc}
    assert "setting " not in json.dumps(summary["features"])  # cannot_learn names the clocks, if it says a level
