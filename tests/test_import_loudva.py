"""`dvfslab import loudva`: real Jetson rows in (LoudVA, MIT), a GPU-clock dataset per board out.

The ten rows of the first tests are copied by hand from data/external/loudva (AGX Xavier,
concurrency 1-5 at 1377 and 828.75 MHz: the first five rows of each performance file and the first
five lines of its power file). Every expected figure was worked out by hand with `bc` (8
decimals), not with the importer: energy per inference = mean power (W) / throughput (1/s), time
per inference = 1 / throughput.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dvfslab.analysis import aggregate as F
from dvfslab.cli import main
from dvfslab.data.contract import DatasetError, load_dataset
from dvfslab.data.loudva import LoudVAImportError, import_loudva

REPO_COPY = Path(__file__).resolve().parents[1] / "data" / "external" / "loudva"
PERF_HEADER = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
               "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency")
PERF = {
    1377000000: [  # performance_measurements_freq_1377000000.csv, lines 2-6
        "1,29.631,381,5985,291,264,26599,39,1,33355,35246,36010,36652",
        "2,37.7878,398,6359,19714,165,25961,39,1,52635,53143,53408,55411",
        "3,45.6143,442,6690,24879,236,32957,46,1,64132,66137,90181,92307",
        "4,50.2283,483,8354,29972,321,39912,48,1,76580,103404,105292,115794",
        "5,53.1828,508,11757,35495,355,42818,55,1,87927,124123,126217,127121",
    ],
    828750000: [  # performance_measurements_freq_828750000.csv, lines 2-6
        "1,21.5356,398,5256,263,242,40175,45,1,46027,46877,49383,50370",
        "2,24.8315,437,5101,34697,191,39708,49,1,80173,80905,81245,83271",
        "3,30.1314,509,7913,39449,274,50422,59,1,97508,98978,100664,138215",
        "4,33.6223,499,8127,50651,311,58357,55,1,114634,155279,159144,171595",
        "5,36.4365,465,10044,58138,362,66656,61,1,131849,173094,188734,204985",
    ],
}
POWER = {  # power_measurement_stats_freq_<Hz>.csv, lines 1-5 (mW)
    1377000000: ["Mean: 21969.18", "Mean: 26790.90", "Mean: 26442.00", "Mean: 26040.40", "Mean: 26439.40"],
    828750000: ["Mean: 13457.52", "Mean: 14800.76", "Mean: 14720.54", "Mean: 15010.09", "Mean: 15122.90"],
}
# by hand (bc, scale 8): J per inference = W / (1/s)
ENERGY_J = {
    (1377.0, 1): 0.74142553,  # 21.96918 / 29.631
    (1377.0, 2): 0.70898279,  # 26.7909 / 37.7878
    (1377.0, 3): 0.57968663,  # 26.442 / 45.6143
    (1377.0, 4): 0.51844079,  # 26.0404 / 50.2283
    (1377.0, 5): 0.49714193,  # 26.4394 / 53.1828
    (828.75, 1): 0.62489645,  # 13.45752 / 21.5356
    (828.75, 2): 0.59604776,  # 14.80076 / 24.8315
    (828.75, 3): 0.48854484,  # 14.72054 / 30.1314
    (828.75, 4): 0.44643257,  # 15.01009 / 33.6223
    (828.75, 5): 0.41504809,  # 15.1229 / 36.4365
}
BOARD_DIR = Path("measurements/archive/Representative/agx-xavier-00/measurements")


def write_board(root: Path, perf: dict = PERF, power: dict = POWER, header: str = PERF_HEADER) -> Path:
    base = root / BOARD_DIR
    for kind in ("performance", "power"):
        (base / kind / "freqs").mkdir(parents=True, exist_ok=True)
    for hz, rows in perf.items():
        (base / "performance" / "freqs" / f"performance_measurements_freq_{hz}.csv").write_text(
            header + "\n" + "\n".join(rows) + "\n")
        (base / "power" / "freqs" / f"power_measurement_stats_freq_{hz}.csv").write_text("\n".join(power[hz]) + "\n")
    return root


@pytest.fixture(scope="module")
def ten_rows(tmp_path_factory):
    src = write_board(tmp_path_factory.mktemp("loudva"))
    return import_loudva(src, "agx-xavier", tmp_path_factory.mktemp("out") / "agx")


def test_ten_real_rows_give_energy_and_time_per_inference(ten_rows):
    runs = load_dataset(ten_rows.path).runs
    assert len(runs) == 10 and set(runs["policy"]) == {"fixed"} and set(runs["steps"]) == {1}
    conc = runs["workload_id"].str.extract(r"/c(\d+)$")[0].astype(int)
    got = {(f, c): e for f, c, e in zip(runs["gpu_freq_mhz"], conc, runs["energy_j"], strict=True)}
    assert got == pytest.approx(ENERGY_J, rel=2e-6)  # the dataset CSV keeps 6 significant digits
    by = runs.set_index([runs["gpu_freq_mhz"], conc])
    assert by.loc[(1377.0, 1), "time_s"] == pytest.approx(0.03374843, rel=2e-6)  # 1 / 29.631
    assert by.loc[(828.75, 5), "time_s"] == pytest.approx(0.02744500, rel=2e-6)  # 1 / 36.4365
    assert by.loc[(828.75, 5), "avg_power_w"] == pytest.approx(15.1229, rel=2e-6)
    assert by.loc[(828.75, 5), "energy_board_j"] == pytest.approx(0.41504809, rel=2e-6)
    # LoudVA's own figure, mean power x server latency: 21.96918 W x (291 + 264 + 26599 + 39) us
    # = 0.59740791 J, the number of its energy_calculated_freq_1377000000.csv, line 2
    assert float(by.loc[(1377.0, 1), "loudva_energy_j"]) == pytest.approx(0.59740791174, rel=2e-6)


def test_each_concurrency_is_a_workload_and_its_optimum_by_hand(ten_rows):
    ds = load_dataset(ten_rows.path)
    assert ds.meta["knob"] == "gpu_freq_mhz" and ds.levels == [828.75, 1377.0] and ds.baseline == "fmax"
    assert ds.source == "measured" and ds.meta["job_steps"]["value"] == 108000.0
    wl = ds.workloads.set_index("workload_id")
    assert list(wl.index) == [f"agx-xavier/inception_v3/c00{c}" for c in range(1, 6)]
    assert wl["batch_size"].tolist() == [1, 2, 3, 4, 5] and wl["concurrency"].tolist() == ["1", "2", "3", "4", "5"]
    assert set(wl["job_steps"]) == {108000.0}  # the default job: 108,000 inferences
    assert wl["split"].tolist() == ["characterization", "evaluation"] * 2 + ["characterization"]
    optima = F.optimal_levels(F.sweep_from_dataset(ds)).set_index("workload_id")
    # the table above: 828.75 MHz uses less energy per inference at every concurrency
    assert set(optima["opt_level"]) == {828.75}
    # concurrency 1: 1 - 0.62489645 / 0.74142553 = 15.717 % saved against the highest clock
    assert optima.loc["agx-xavier/inception_v3/c001", "oracle_saving_pct"] == pytest.approx(15.717, abs=2e-3)


def test_a_file_without_a_column_names_file_and_column(tmp_path, capsys):
    header = PERF_HEADER.replace("Inferences/Second,", "")
    perf = {hz: [",".join(r.split(",")[:1] + r.split(",")[2:]) for r in rows] for hz, rows in PERF.items()}
    src = write_board(tmp_path / "src", perf=perf, header=header)
    with pytest.raises(DatasetError) as err:
        import_loudva(src, "agx-xavier", tmp_path / "out")
    message = str(err.value)
    assert "performance_measurements_freq_" in message and "column 'Inferences/Second'" in message
    assert "column is missing" in message and "\n" not in message
    assert main(["import", "loudva", str(src), "--board", "agx-xavier", "--out", str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_power_lines_must_match_the_performance_rows(tmp_path):
    power = {**POWER, 828750000: POWER[828750000][:4]}
    src = write_board(tmp_path / "src", power=power)
    with pytest.raises(DatasetError, match=r"power_measurement_stats_freq_828750000.csv: holds 4 power means for 5"):
        import_loudva(src, "agx-xavier", tmp_path / "out")
    bad = {**POWER, 828750000: [*POWER[828750000][:4], "Median: 15122.90"]}
    with pytest.raises(DatasetError, match=r"line 5: 'Median: 15122.90' is not 'Mean: <mW>'"):
        import_loudva(write_board(tmp_path / "src2", power=bad), "agx-xavier", tmp_path / "out2")
    with pytest.raises(LoudVAImportError, match="unknown board 'orin'"):
        import_loudva(src, "orin", tmp_path / "out3")


@pytest.mark.parametrize(("board", "line", "levels", "baseline"), [
    # 14 clocks x 112 concurrencies measured at all of them (16 of 128 have a gap, counted with
    # `cut | sort | uniq -c` over the 14 files) = 1568 runs
    ("agx-xavier", "ok: 112 workloads, 1568 runs (measured)", (114.75, 1377.0, 14), "fmax"),
    # 15 clocks x 18 concurrencies + 18 nvpmodel mode-8 runs = 288
    ("xavier-nx", "ok: 18 workloads, 288 runs (measured)", (114.75, 1109.25, 15), "maxn"),
    # 11 clocks x 13 concurrencies = 143; the mode-0 runs (concurrency 1-4) are not imported
    ("nano", "ok: 13 workloads, 143 runs (measured)", (153.6, 921.6, 11), "fmax"),
])
def test_each_board_imports_from_the_bundled_copy_and_validates(board, line, levels, baseline, tmp_path, capsys):
    out = tmp_path / board
    assert main(["import", "loudva", str(REPO_COPY), "--board", board, "--out", str(out),
                 "--job-inferences", "36000"]) == 0
    assert capsys.readouterr().out.startswith(line)
    assert main(["validate", str(out)]) == 0
    ds = load_dataset(out)
    assert (ds.levels[0], ds.levels[-1], len(ds.levels)) == levels and ds.baseline == baseline
    assert set(ds.workloads["job_steps"]) == {36000.0}
    assert ds.meta["origin"]["commit"] == "2b4b15efa5231d445b85d500ea5ef51d381a64c3"


def test_the_xavier_nx_baseline_is_its_mode_8_run(tmp_path):
    ds = import_loudva(REPO_COPY, "xavier-nx", tmp_path / "nx")
    maxn = ds.runs[ds.runs["policy"] == "maxn"].set_index("workload_id")
    assert len(maxn) == 18 and maxn["gpu_freq_mhz"].isna().all()
    # performance_measurements_mode_8.csv line 2: 20.8636 inferences/s; power line 1: 11821.92 mW
    # -> 11.82192 / 20.8636 = 0.56662896 J per inference (bc)
    assert maxn.loc["xavier-nx/inception_v3/c001", "energy_j"] == pytest.approx(0.56662896, rel=2e-6)
    base = F.sweep_from_dataset(ds).baseline.set_index("workload_id")
    assert set(base["baseline"]) == {"maxn"}


def test_an_unknown_source_folder_says_where_it_looked(tmp_path):
    with pytest.raises(LoudVAImportError, match="no LoudJetson0/measurements/performance/freqs there"):
        import_loudva(tmp_path, "nano", tmp_path / "out")


def test_pipeline_notebooks_01_to_03_run_on_an_imported_board(tmp_path):
    from dvfslab.pipeline import read_summary, run_pipeline

    ds = import_loudva(REPO_COPY, "nano", tmp_path / "nano")
    out = run_pipeline(ds.path, tmp_path / "run", quick=True, html=False, progress=False, log=lambda _: None,
                       notebooks=("01_characterization", "02_feature_engineering", "03_model_selection_loocv"))
    ch = read_summary(out)["characterization"]
    assert (ch["knob"], ch["knob_unit"], ch["n_workloads"]) == ("gpu_freq_mhz", "MHz", 13)
    assert ch["level_table"] == [153.6, 230.4, 307.2, 384.0, 460.8, 537.6, 614.4, 691.2, 768.0, 844.8, 921.6]
