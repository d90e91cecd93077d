"""Joint settings (issue #32): a level is one setting of several clocks.

A hand-written 2-knob grid: GPU {306, 714, 1300.5} MHz × EMC {2133, 3199} MHz, the full product
in meta.json ``settings`` (lexicographic, GPU first), so a run's level is the setting's index:

    index         0      1      2      3      4       5
    GPU (MHz)     306    306    714    714    1300.5  1300.5
    EMC (MHz)     2133   3199   2133   3199   2133    3199
    A energy (J)  30     32     20     24     26      28      least: index 2 (714, 2133)
    B energy (J)  40     36     30     25     35      40      least: index 3 (714, 3199)
    time (s)      10     9      6      5      4       3.5     (both workloads)

The baseline (``fmax``: the highest level) is index 5, GPU 1300.5 × EMC 3199: A 28 J, B 40 J.
FFG takes the setting with the least mean of E / E_baseline over A and B:
    index 2: (20/28 + 30/40) / 2 = (0.714286 + 0.75) / 2  = 0.732143
    index 3: (24/28 + 25/40) / 2 = (0.857143 + 0.625) / 2 = 0.741071
    index 4: (26/28 + 35/40) / 2 = (0.928571 + 0.875) / 2 = 0.901786
    index 0: (30/28 + 1) / 2 = 1.035714;  index 1: (32/28 + 0.9) / 2 = 1.021429;  index 5: 1
so FFG holds index 2 = (714, 2133).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dvfslab.analysis.aggregate import optimal_levels, read_sweep, sweep_from_dataset, write_sweep
from dvfslab.analysis.features import feature_table
from dvfslab.analysis.training import TrainingData
from dvfslab.data.contract import DatasetError, write_dataset
from dvfslab.governors.base import GovernorError
from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.registry import make as make_governor
from dvfslab.governors.static import FixedGovernor, OracleGovernor

SETTINGS = [[306.0, 2133.0], [306.0, 3199.0], [714.0, 2133.0], [714.0, 3199.0], [1300.5, 2133.0], [1300.5, 3199.0]]
ENERGY = {"a/sst2": [30.0, 32.0, 20.0, 24.0, 26.0, 28.0], "b/qnli": [40.0, 36.0, 30.0, 25.0, 35.0, 40.0]}
TIME = [10.0, 9.0, 6.0, 5.0, 4.0, 3.5]


def grid_frames():
    wl = pd.DataFrame([("a/sst2", "a", "a", "encoder", 4.4, 2, 128, "sst2", 13.3, 128, 16, "characterization"),
                       ("b/qnli", "b", "b", "decoder", 160.0, 12, 768, "qnli", 50.2, 128, 16, "characterization")],
                      columns=["workload_id", "model", "model_family", "model_type", "params_m", "n_layers",
                               "hidden_size", "task", "avg_seq_len", "max_seq_len", "batch_size", "split"])
    rows = []
    for wid, energies in ENERGY.items():
        for i, (gpu, emc) in enumerate(SETTINGS):
            rows.append({"run_id": f"{wid}-{i}", "workload_id": wid, "policy": "fixed", "gpu_freq_mhz": gpu,
                         "emc_freq_mhz": emc, "rep": 0, "time_s": TIME[i], "energy_j": energies[i],
                         "avg_power_w": energies[i] / TIME[i], "gpu_util_pct": 50.0, "steps": 100, "status": "ok"})
    meta = {"source": "simulated", "device": {"board": "hand-written toy"}, "baseline": "fmax",
            "knobs": ["gpu_freq_mhz", "emc_freq_mhz"], "settings": SETTINGS,
            "generator": "tests/test_joint.py (hand-written numbers, not a board model)"}
    return meta, wl, pd.DataFrame(rows)


@pytest.fixture
def grid(tmp_path):
    return write_dataset(tmp_path / "grid", *grid_frames())


def training(ds) -> TrainingData:
    sweep = sweep_from_dataset(ds)
    return TrainingData(sweep, feature_table(sweep), sweep.workload_ids())


def test_a_joint_dataset_loads_with_the_setting_index_as_its_level(grid):
    assert grid.knob.name == "setting" and grid.levels == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert grid.joint_knobs == ("gpu_freq_mhz", "emc_freq_mhz")
    runs = grid.runs.set_index("run_id")
    assert runs.loc["a/sst2-3", "setting"] == 3.0  # 714 x 3199 is the 4th setting
    # the derived column is never stored: runs.csv holds the clocks only
    assert "setting" not in pd.read_csv(grid.path / "runs.csv").columns
    sweep = sweep_from_dataset(grid)
    assert sweep.baseline_of("b/qnli") == (40.0, 3.5)  # index 5 = 1300.5 x 3199
    assert sweep.setting_of(3.0) == {"gpu_freq_mhz": 714.0, "emc_freq_mhz": 3199.0}


def test_ffg_and_the_oracle_pick_the_hand_computed_tuples(grid):
    data = training(grid)
    ffg = FixedGovernor().fit(data)
    assert ffg.level_ == 2.0 and data.sweep.setting_of(ffg.level_) == {"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}
    oracle = OracleGovernor().fit(data)
    assert oracle.decide({"workload_id": "a/sst2"}).level == 2.0  # A: 20 J at (714, 2133)
    assert oracle.decide({"workload_id": "b/qnli"}).level == 3.0  # B: 25 J at (714, 3199)
    opt = optimal_levels(data.sweep).set_index("workload_id")
    # saving of the oracle against the baseline: A 1 - 20/28 = 28.571 %, B 1 - 25/40 = 37.5 %
    assert opt.loc["a/sst2", "oracle_saving_pct"] == pytest.approx(100 * (1 - 20 / 28), abs=1e-9)
    assert opt.loc["b/qnli", "oracle_saving_pct"] == pytest.approx(37.5, abs=1e-9)


class GridProbe:
    """A job whose truth is workload B's curve at 10x scale (400, 360, 300, 250, 350, 400 J per unit)."""

    def __init__(self, energy, model):
        self.energy = {float(i): 10.0 * e for i, e in enumerate(energy)}
        self.time = {float(i): t for i, t in enumerate(TIME)}
        self.model, self.levels, self.asked = model, sorted(self.energy), []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        return self.time[level] * units, self.energy[level] * units


def test_voi_over_the_product_grid_ends_at_the_hand_computed_tuple(grid):
    voi = make_governor("voi", shape_sigma=0.01).fit(training(grid))
    assert voi.info_["prior"] == "training curves" and voi.info_["n_curves"] == 2
    # too short a job to pay for a probe: voi holds the prior mean's least setting, FFG's index 2
    # (the prior mean of E / E_baseline is FFG's score above: 0.732 at index 2)
    short = GridProbe(ENERGY["b/qnli"], ProbeModel(sigma_ref=0.01))
    assert voi.decide({"plan_job_units": 2.0}, short).level == 2.0 and short.asked == []
    # a long job: once its readings tell B from A (index 3 reads 250 J against 300 J at index 2:
    # ratio 0.833, where A would read 24/20 = 1.2), it holds B's least setting, index 3 = (714, 3199)
    long = GridProbe(ENERGY["b/qnli"], ProbeModel(sigma_ref=0.01))
    d = voi.decide({"plan_job_units": 1000.0}, long)
    assert d.level == 3.0 and 3.0 in [lvl for lvl, _ in long.asked]


def test_voi_with_one_training_curve_falls_back_to_ffgs_setting(grid):
    # nothing to learn from one curve (README): voi holds FFG's setting for A alone, its least
    # energy 20 J at index 2 = (714, 2133), and probes nothing, whatever the job's length
    voi = make_governor("voi").fit(training(grid).subset(["a/sst2"]))
    assert voi.info_["fallback"] == "ffg" and "one training workload (a/sst2)" in voi.fallback_note()
    job = GridProbe(ENERGY["b/qnli"], ProbeModel(sigma_ref=0.01))
    assert voi.decide({"plan_job_units": 1000.0}, job).level == 2.0 and job.asked == []


def test_voi_without_a_training_curve_refuses_a_joint_setting(grid):
    # its untrained prior is a U-shaped family along one knob's levels: meaningless over setting indices
    with pytest.raises(GovernorError, match="U-shaped prior"):
        make_governor("voi").fit(training(grid).subset([]))


def test_online_refuses_a_joint_dataset_in_one_line(grid):
    with pytest.raises(GovernorError) as err:
        make_governor("online").fit(training(grid))
    assert "joint setting" in str(err.value) and "\n" not in str(err.value)


def test_search_makes_coordinate_moves_to_the_hand_computed_tuple(grid):
    # The job is B (per unit 40, 36, 30, 25, 35, 40 J x 10 at indices 0-5). From FFG's index 2 =
    # (714, 2133): along the GPU at EMC 2133 (indices 0, 2, 4) it measures 2 (300), 0 (400), 4 (350):
    # 2 is least. Along the EMC at GPU 714 (indices 2, 3): 3 (250) < 300, the end of the line: move
    # to 3. Round 2 along the GPU at EMC 3199 (1, 3, 5): 1 (360) and 5 (400) cost more; along the EMC
    # nothing new: no move, stop at 3 = (714, 3199). Probes: 2, 0, 4, 3, 1, 5.
    search = make_governor("search").fit(training(grid))
    probe = GridProbe(ENERGY["b/qnli"], ProbeModel(sigma_ref=0.01))
    d = search.decide({"plan_job_units": 100.0}, probe)
    assert [lvl for lvl, _ in probe.asked] == [2.0, 0.0, 4.0, 3.0, 1.0, 5.0]
    assert d.level == 3.0


def test_search_refuses_a_joint_design_that_is_not_the_full_grid(tmp_path):
    meta, wl, runs = grid_frames()
    meta = dict(meta, settings=SETTINGS[:5])  # 5 of the 6 settings: not a product
    ds = write_dataset(tmp_path / "design", meta, wl, runs[runs["run_id"].str[-1] != "5"])
    with pytest.raises(GovernorError, match="full grid"):
        make_governor("search").fit(training(ds))


def test_the_sweep_round_trips_its_settings(grid, tmp_path):
    sweep = sweep_from_dataset(grid)
    write_sweep(sweep, tmp_path / "out")
    back = read_sweep(tmp_path / "out")
    assert back.joint_knobs == sweep.joint_knobs and back.settings == sweep.settings
    assert back.oracle_level("b/qnli") == 3.0


def test_a_run_off_the_settings_is_refused_naming_the_row(tmp_path):
    meta, wl, runs = grid_frames()
    runs.loc[3, "emc_freq_mhz"] = 2500.0  # a read-back EMC the sweep never set: the pin did not hold
    with pytest.raises(DatasetError, match=r"column 'emc_freq_mhz', row 4 .*2500 is not one of the knob's values"):
        write_dataset(tmp_path / "bad", meta, wl, runs)
    meta2 = dict(meta, settings=SETTINGS[:-1] + [SETTINGS[0]])
    with pytest.raises(DatasetError, match="settings 0 and 5 are the same setting"):
        write_dataset(tmp_path / "dup", meta2, wl, grid_frames()[2])
    json.dumps(meta)  # the fixture's meta is plain JSON


def test_the_replay_and_the_tree_work_on_the_joint_setting(grid):
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.tree import DecisionTreeClassifier

    from dvfslab.evaluation.replay import replay

    data = training(grid)
    # the tree is one classifier whose classes are setting indices (not one tree per knob: the
    # setting is one decision, and per-knob trees could combine into a setting never measured).
    # Two workloads with different least settings (2 and 3) and different n_layers (2, 12): the
    # fitted tree splits on n_layers and sends A to index 2, B to index 3.
    tree = make_governor("mlg", features=["n_layers"], estimator=Pipeline(
        [("impute", SimpleImputer(strategy="median")), ("model", DecisionTreeClassifier(random_state=0))])).fit(data)
    govs = {"ffg": FixedGovernor().fit(data), "oracle": OracleGovernor().fit(data), "mlg": tree}
    out = replay(govs, data.sweep, data.features).set_index(["policy", "workload_id"])
    assert out.loc[("mlg", "a/sst2"), "level"] == 2.0 and out.loc[("mlg", "b/qnli"), "level"] == 3.0
    # FFG holds index 2 everywhere: A saves 1 - 20/28 = 28.571 %, B 1 - 30/40 = 25 %
    assert out.loc[("ffg", "a/sst2"), "saving_pct"] == pytest.approx(100 * (1 - 20 / 28), abs=1e-6)
    assert out.loc[("ffg", "b/qnli"), "saving_pct"] == pytest.approx(25.0, abs=1e-6)
    # the oracle: B at index 3, 1 - 25/40 = 37.5 %; FFG's regret on B (30 - 25) / 40 = 12.5 %
    assert out.loc[("oracle", "b/qnli"), "saving_pct"] == pytest.approx(37.5, abs=1e-6)
    assert out.loc[("ffg", "b/qnli"), "regret_pct"] == pytest.approx(12.5, abs=1e-6)


def test_the_gpu_by_emc_energy_map_outlines_each_workloads_least_setting(grid):
    from dvfslab.analysis.aggregate import joint_levels_frame
    from dvfslab.analysis.plots import joint_energy_map

    frame = joint_levels_frame(sweep_from_dataset(grid))
    # A at (714, 2133): 20 / 28 = 0.714286 of its baseline
    row = frame[(frame["workload_id"] == "a/sst2") & (frame["level"] == 2.0)].iloc[0]
    assert (row["gpu_freq_mhz"], row["emc_freq_mhz"]) == (714.0, 2133.0)
    assert row["energy_rel"] == pytest.approx(20 / 28, abs=1e-12)
    fig = joint_energy_map(frame, simulated=True)
    panels = [ax for ax in fig.axes if ax.get_title() in ENERGY]
    assert [ax.get_title() for ax in panels] == ["a/sst2", "b/qnli"]
    # rows: EMC descending (3199, 2133), columns: GPU ascending (306, 714, 1300.5): A's least
    # (714, 2133) is row 1, column 1; B's (714, 3199) row 0, column 1
    outlined = [[(p.get_x() + 0.5, p.get_y() + 0.5) for p in ax.patches if p.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
                for ax in panels]  # the cell centred on (column, row)
    assert outlined == [[(1, 1)], [(1, 0)]]
    assert "SIMULATED" in fig._suptitle.get_text()


def test_the_joint_oracle_against_the_gpu_only_oracle(grid):
    from dvfslab.analysis.aggregate import joint_vs_gpu_only

    out = joint_vs_gpu_only(sweep_from_dataset(grid)).set_index("workload_id")
    # GPU-only: the settings with the EMC at its top, 3199 (indices 1, 3, 5)
    # A: joint 20 J (index 2); GPU-only min(32, 24, 28) = 24 J (index 3); extra (24 - 20) / 28 = 14.2857 %
    assert out.loc["a/sst2", ["joint_level", "gpu_only_level"]].tolist() == [2.0, 3.0]
    assert out.loc["a/sst2", "extra_saving_pct"] == pytest.approx(100 * 4 / 28, abs=1e-9)
    assert out.loc["a/sst2", "gpu_only_saving_pct"] == pytest.approx(100 * (1 - 24 / 28), abs=1e-9)
    # B: joint 25 J at index 3, which has the EMC at its top: the GPU-only oracle is the same, extra 0
    assert out.loc["b/qnli", ["joint_level", "gpu_only_level"]].tolist() == [3.0, 3.0]
    assert out.loc["b/qnli", "extra_saving_pct"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow
def test_notebook_01_draws_the_joint_map_and_the_gpu_only_comparison(grid, tmp_path):
    from dvfslab.pipeline import runner as PL

    out = PL.run_pipeline(grid.path, tmp_path / "run", quick=True, html=False, progress=False,
                          notebooks=PL.NOTEBOOKS[:1], log=lambda line: None)
    assert (out / "figures" / "joint_energy_map.png").stat().st_size > 0
    table = pd.read_csv(out / "tables" / "joint_vs_gpu_only.csv").set_index("workload_id")
    assert table.loc["a/sst2", "extra_saving_pct"] == pytest.approx(100 * 4 / 28, abs=1e-6)  # as computed above
    summary = json.loads((out / "summary.json").read_text())
    assert summary["characterization"]["knob"] == "setting"
