"""`dvfslab import zeus-nsdi`: real Zeus NSDI'23 power-trace rows in, a power-limit dataset out.

The rows below are copied by hand from data/external/zeus_nsdi23/summary_power_v100.csv (the
file and line of each is given). Every expected energy is time_per_epoch x average_power worked
out by hand (with `bc`, 6 decimals), not with the importer's code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dvfslab.analysis import aggregate as F
from dvfslab.analysis import features as FT
from dvfslab.cli import main
from dvfslab.data.contract import DatasetError, load_dataset
from dvfslab.data.zeus import ZeusImportError, import_zeus
from dvfslab.governors import registry as R

REPO_COPY = Path(__file__).resolve().parents[1] / "data" / "external" / "zeus_nsdi23"
HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
ROWS = [
    # summary_power_v100.csv lines 408-414: BERT-base fine-tuned on SQuAD, batch 24, AdamW
    "squad,bert_base_uncased,24,adamw,100,3453.855,99.66284900905228",
    "squad,bert_base_uncased,24,adamw,125,2589.6949999999997,122.8144819251004",
    "squad,bert_base_uncased,24,adamw,150,2149.79,146.65184715482764",
    "squad,bert_base_uncased,24,adamw,175,1944.445,170.74665862716662",
    "squad,bert_base_uncased,24,adamw,200,1844.225,191.8274515444473",
    "squad,bert_base_uncased,24,adamw,225,1770.29,212.17857354018864",
    "squad,bert_base_uncased,24,adamw,250,1727.98,227.85675128318152",
    # summary_power_v100.csv lines 2-5: ShuffleNetV2 on CIFAR-100, batch 1024, two optimizers, 100 and 125 W
    "cifar100,shufflenetv2,1024,adadelta,100,11.276666666666666,86.86460850784009",
    "cifar100,shufflenetv2,1024,adam,100,11.086666666666668,91.0042349567595",
    "cifar100,shufflenetv2,1024,adadelta,125,9.216666666666667,109.29691814892352",
    "cifar100,shufflenetv2,1024,adam,125,8.97,106.22992952119247",
]
# by hand: time_per_epoch (s) x average_power (W) = J per epoch
SQUAD_ENERGY_J = {100: 344221.029364, 125: 318052.049769, 150: 315270.674495, 175: 332007.486634,
                  200: 353772.981824, 225: 375617.606952, 250: 393731.909082}
TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
TRAIN_ROWS = [
    # summary_train.csv lines 2641-2648: SQuAD, batch 24, run 1, every target (82.5 ... 86.0 F1)
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,82.5,3",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,83.0,3",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,83.5,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,84.5,5",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,85.0,nan",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,85.5,nan",
    "squad,bert_base_uncased,24,adamw,4.24e-6,1,86.0,nan",
    # lines 2652, 2660, ..., 2716: runs 10, 2, 3, ..., 9 at Zeus's target 84.0 F1
    "squad,bert_base_uncased,24,adamw,4.24e-6,10,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,2,84.0,5",
    "squad,bert_base_uncased,24,adamw,4.24e-6,3,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,4,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,5,84.0,5",
    "squad,bert_base_uncased,24,adamw,4.24e-6,6,84.0,5",
    "squad,bert_base_uncased,24,adamw,4.24e-6,7,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,8,84.0,4",
    "squad,bert_base_uncased,24,adamw,4.24e-6,9,84.0,5",
    # lines 13, 32, 51, ..., 184: ShuffleNetV2 / CIFAR-100, batch 1024, Adadelta, runs 1, 10, 2..9 at 0.6
    "cifar100,shufflenetv2,1024,adadelta,1e-1,1,0.6,74",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,10,0.6,71",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,2,0.6,80",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,3,0.6,71",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,4,0.6,70",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,5,0.6,80",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,6,0.6,77",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,7,0.6,97",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,8,0.6,77",
    "cifar100,shufflenetv2,1024,adadelta,1e-1,9,0.6,90",
]
SQUAD = "bert_base_uncased/squad/adamw/b24"
SHUFFLE_ADADELTA = "shufflenetv2/cifar100/adadelta/b1024"
SHUFFLE_ADAM = "shufflenetv2/cifar100/adam/b1024"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("zeus")
    (src / "summary_power_v100.csv").write_text(HEADER + "\n".join(ROWS) + "\n")
    (src / "summary_train.csv").write_text(TRAIN_HEADER + "\n".join(TRAIN_ROWS) + "\n")
    return src


@pytest.fixture(scope="module")
def imported(trace_dir, tmp_path_factory):
    """Every row kept (the ShuffleNet configurations were measured at 100 and 125 W only)."""
    return import_zeus(trace_dir, "v100", tmp_path_factory.mktemp("out") / "v100", keep_incomplete=True)


def test_configurations_without_every_limit_are_left_out_by_default(trace_dir, tmp_path):
    ds = import_zeus(trace_dir, "v100", tmp_path / "v100")
    assert list(ds.workloads["workload_id"]) == [SQUAD]  # the only one measured at all 7 limits
    assert len(ds.runs) == 7 and ds.levels == [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0]
    assert ds.meta["incomplete_left_out"] == {SHUFFLE_ADADELTA: [100.0, 125.0], SHUFFLE_ADAM: [100.0, 125.0]}


def test_meta_names_the_power_limit_knob_and_the_highest_limit_as_baseline(imported):
    ds = load_dataset(imported.path)  # what was written validates
    assert ds.meta["knob"] == "power_limit_w" and ds.knob.unit == "W"
    assert ds.levels == [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0]  # the limits of the rows
    assert ds.baseline == "max_level" and ds.source == "measured"
    assert ds.meta["origin"]["file"] == "summary_power_v100.csv" and ds.meta["incomplete_left_out"] == {}


def test_energy_is_time_times_average_power(imported):
    runs = load_dataset(imported.path).runs.set_index(["workload_id", "power_limit_w"])
    for limit_w, energy_j in SQUAD_ENERGY_J.items():
        run = runs.loc[(SQUAD, float(limit_w))]
        assert run["energy_j"] == pytest.approx(energy_j, rel=2e-6)  # the CSV keeps 6 significant digits
        assert run["energy_gpu_j"] == pytest.approx(energy_j, rel=2e-6)
    at_150 = runs.loc[(SQUAD, 150.0)]
    assert at_150["time_s"] == pytest.approx(2149.79, rel=2e-6)
    assert at_150["avg_power_w"] == pytest.approx(146.651847, rel=2e-6)
    assert runs.loc[(SHUFFLE_ADADELTA, 100.0), "energy_j"] == pytest.approx(979.543235, rel=2e-6)
    assert runs.loc[(SHUFFLE_ADAM, 125.0), "energy_j"] == pytest.approx(952.882468, rel=2e-6)
    assert set(runs["policy"]) == {"fixed"} and set(runs["status"]) == {"ok"} and set(runs["rep"]) == {0}
    assert len(runs) == len(ROWS)


def test_optimum_and_baseline_by_hand(imported):
    optima = F.optimal_levels(F.sweep_from_dataset(load_dataset(imported.path))).set_index("workload_id")
    # SQuAD: 344.2, 318.1, 315.3, 332.0, 353.8, 375.6, 393.7 kJ -> least at 150 W, an interior minimum
    assert optima.loc[SQUAD, "opt_level"] == 150.0 and optima.loc[SQUAD, "u_shaped"]
    assert optima.loc[SQUAD, "baseline_energy_j"] == pytest.approx(393731.909, rel=2e-6)  # 250 W, the default
    assert optima.loc[SQUAD, "oracle_saving_pct"] == pytest.approx(19.92758, abs=1e-3)  # 1 - 315270.7 / 393731.9
    # ShuffleNet measured at 100 and 125 W only: its baseline is 125 W, its own highest limit
    assert optima.loc[SHUFFLE_ADADELTA, "opt_level"] == 100.0  # 979.5 J < 1007.4 J
    assert optima.loc[SHUFFLE_ADADELTA, "oracle_saving_pct"] == pytest.approx(2.76070, abs=1e-3)
    assert optima.loc[SHUFFLE_ADAM, "opt_level"] == 125.0  # 1008.9 J > 952.9 J
    assert optima.loc[SHUFFLE_ADAM, "oracle_saving_pct"] == pytest.approx(0.0, abs=1e-9)


def test_workload_features_come_from_the_network_table_and_the_batch_size(imported):
    wl = load_dataset(imported.path).workloads.set_index("workload_id")
    bert = wl.loc[SQUAD]
    assert (bert["model"], bert["task"], bert["model_type"]) == ("bert_base_uncased", "squad", "encoder")
    assert (bert["params_m"], bert["n_layers"], bert["hidden_size"], bert["batch_size"]) == (110.0, 12, 768, 24)
    shuffle = wl.loc[SHUFFLE_ADAM]
    assert shuffle["params_m"] == pytest.approx(1.356)  # (2,278,604 - 922,500) / 1e6, see SOURCE.md
    assert shuffle["batch_size"] == 1024 and pd.isna(shuffle["model_type"])  # not an encoder / decoder
    # one batch size per (network, dataset, optimizer) here: each is the first, so characterization
    assert set(wl["split"]) == {"characterization"}
    table = FT.feature_table(F.sweep_from_dataset(load_dataset(imported.path)))
    assert "batch_size" in FT.usable_features(table, FT.FEATURES + FT.EXTRA_FEATURES)[0]  # 24, 1024, 1024


def test_job_steps_are_the_median_epochs_to_zeus_target(imported):
    ds = load_dataset(imported.path)
    job = dict(zip(ds.workloads["workload_id"], ds.workloads["job_steps"], strict=True))
    # SQuAD at 84.0 F1, runs 1..10: 4 4 5 4 4 5 5 4 4 5 -> sorted six 4s and four 5s, median (4 + 4) / 2
    assert job[SQUAD] == 4.0  # not 5 (84.5 F1) nor 3 (83.0 F1): the other targets of run 1 are ignored
    # ShuffleNet at 0.6: 74 71 80 71 70 80 77 97 77 90 -> sorted 70 71 71 74 77 77 80 80 90 97, median 77
    assert job[SHUFFLE_ADADELTA] == 77.0
    assert pd.isna(job[SHUFFLE_ADAM])  # the train trace has ShuffleNet with Adadelta only
    info = ds.meta["job_steps"]
    assert info["unit"] == "epochs" and info["target_metric"]["squad"] == 84.0 and info["file"] == "summary_train.csv"
    assert info["without"] == {SHUFFLE_ADAM: "no row in the train trace"}


def test_a_target_most_runs_never_reach_gives_no_job(tmp_path):
    power = [f"{d},{n},{b},{o},{w},10,100" for d, n, b, o in (("cifar100", "shufflenetv2", 4096, "adadelta"),
                                                            ("movielens-1m", "ncf", 32, "adam")) for w in (100, 250)]
    (tmp_path / "summary_power_a40.csv").write_text(HEADER + "\n".join(power) + "\n")
    (tmp_path / "summary_train.csv").write_text(TRAIN_HEADER + "\n".join([
        # summary_train.csv lines 678, 697, 716, 735, 754: CIFAR-100 at batch 4096, runs 1-5, target 0.6
        "cifar100,shufflenetv2,4096,adadelta,1e-1,1,0.6,566", "cifar100,shufflenetv2,4096,adadelta,1e-1,2,0.6,456",
        "cifar100,shufflenetv2,4096,adadelta,1e-1,3,0.6,498", "cifar100,shufflenetv2,4096,adadelta,1e-1,4,0.6,nan",
        "cifar100,shufflenetv2,4096,adadelta,1e-1,5,0.6,421",
        # lines 2255-2283 (every 7th): NCF at batch 32, runs 1-5, target 0.41: only run 2 gets there
        "movielens-1m,ncf,32,adam,3.54e-4,1,0.41,nan", "movielens-1m,ncf,32,adam,3.54e-4,2,0.41,34",
        "movielens-1m,ncf,32,adam,3.54e-4,3,0.41,nan", "movielens-1m,ncf,32,adam,3.54e-4,4,0.41,nan",
        "movielens-1m,ncf,32,adam,3.54e-4,5,0.41,nan"]) + "\n")
    ds = import_zeus(tmp_path, "a40", tmp_path / "out")
    job = dict(zip(ds.workloads["workload_id"], ds.workloads["job_steps"], strict=True))
    # 421 456 498 566 and one never: sorted 421 456 498 566 never -> the middle one, 498 epochs
    assert job["shufflenetv2/cifar100/adadelta/b4096"] == 498.0
    assert pd.isna(job["ncf/movielens-1m/adam/b32"])  # 4 of 5 never: the median run never gets there
    assert ds.meta["job_steps"]["without"] == {"ncf/movielens-1m/adam/b32": "0.41 reached by 1 of 5 runs"}


def test_without_a_train_trace_there_is_no_job_and_meta_says_so(tmp_path):
    (tmp_path / "summary_power_v100.csv").write_text(HEADER + "\n".join(ROWS[:7]) + "\n")
    ds = import_zeus(tmp_path, "v100", tmp_path / "out")
    assert ds.workloads["job_steps"].isna().all()
    assert ds.meta["job_steps"]["rule"] == "none: no summary_train.csv under SRC_DIR"


def test_a_train_trace_without_a_column_names_file_and_column(tmp_path):
    (tmp_path / "summary_power_v100.csv").write_text(HEADER + "\n".join(ROWS[:7]) + "\n")
    (tmp_path / "summary_train.csv").write_text(TRAIN_HEADER.replace(",target_epoch", "") + "squad,bert_base_uncased,"
                                                "24,adamw,4.24e-6,1,84.0\n")
    with pytest.raises(DatasetError) as err:
        import_zeus(tmp_path, "v100", tmp_path / "out")
    assert str(err.value).startswith(f"{tmp_path / 'summary_train.csv'}: column 'target_epoch': column is missing")
    assert "\n" not in str(err.value)


def test_every_second_batch_size_is_held_out(tmp_path):
    rows = [f"cifar100,shufflenetv2,{b},adam,{w},10,100" for b in (8, 16, 32, 64) for w in (100, 250)]
    (tmp_path / "summary_power_a40.csv").write_text(HEADER + "\n".join(rows) + "\n")
    wl = import_zeus(tmp_path, "a40", tmp_path / "out").workloads
    assert dict(zip(wl["batch_size"], wl["split"], strict=True)) == {
        8: "characterization", 16: "evaluation", 32: "characterization", 64: "evaluation"}
    every = import_zeus(tmp_path, "a40", tmp_path / "all", eval_every=0).workloads
    assert set(every["split"]) == {"characterization"}


def test_bad_trace_rows_name_file_column_and_line(tmp_path):
    bad = ROWS[:2] + [ROWS[2].replace("2149.79", "n/a")]
    (tmp_path / "summary_power_p100.csv").write_text(HEADER + "\n".join(bad) + "\n")
    with pytest.raises(DatasetError) as err:
        import_zeus(tmp_path, "p100", tmp_path / "out")
    assert "summary_power_p100.csv: column 'time_per_epoch', row 3 (line 4)" in str(err.value)
    with pytest.raises(ZeusImportError, match="no summary_power_rtx6000.csv"):
        import_zeus(tmp_path, "rtx6000", tmp_path / "out")
    with pytest.raises(ZeusImportError, match="unknown GPU 'h100'"):
        import_zeus(tmp_path, "h100", tmp_path / "out")


def test_cli_imports_the_bundled_v100_trace(tmp_path, capsys):
    out = tmp_path / "v100"
    assert main(["import", "zeus-nsdi", str(REPO_COPY), "--gpu", "v100", "--out", str(out)]) == 0
    # the file has 476 data lines over 68 (network, dataset, optimizer, batch size) configurations
    assert "ok: 68 workloads, 476 runs (measured); knob power_limit_w" in capsys.readouterr().out
    assert main(["validate", str(out)]) == 0
    job = load_dataset(out).workloads.set_index("workload_id")["job_steps"]
    # the bundled train trace, SQuAD at batch 24: runs reach 84.0 F1 at 4 4 5 4 4 5 5 4 4 5 epochs
    # 68 - 50 = 18 without: ShuffleNet/Adam x10 and ImageNet b8, b16, b32 have no train-trace row;
    # ImageNet b64 (0 of 4 runs) and NCF b4, b8, b16 (0 of 3-5), b32 (1 of 5) miss the target
    assert job[SQUAD] == 4.0 and job.notna().sum() == 50


def test_pipeline_notebooks_01_to_03_run_on_an_imported_trace(imported, tmp_path):
    from dvfslab.pipeline import read_summary, run_pipeline

    out = run_pipeline(imported.path, tmp_path / "run", quick=True, html=False, progress=False, log=lambda _: None,
                       notebooks=("01_characterization", "02_feature_engineering", "03_model_selection_loocv"))
    ch = read_summary(out)["characterization"]
    assert (ch["knob"], ch["knob_unit"]) == ("power_limit_w", "W")
    assert ch["optimal_level_range"] == {"min": 100.0, "max": 150.0}  # the three optima above, in W
    assert ch["level_table"][-1] == 250.0
    nb01 = json.loads((out / "01_characterization.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in nb01["cells"] for o in c.get("outputs", []))
    assert "GPU power limit levels (W): 100, 125, 150, 175, 200, 225, 250" in printed


@pytest.mark.slow
def test_notebook_04_on_an_imported_trace_leaves_out_the_clock_tree_and_says_why(imported, tmp_path):
    """On a power-limit knob: no `mlg-paper` (it answers MHz), no `profiled` (no steps in the trace),
    and the recommendation says why each is missing."""
    from dvfslab.pipeline import read_summary, run_pipeline

    out = run_pipeline(imported.path, tmp_path / "run", quick=True, html=False, progress=False, log=lambda _: None,
                       notebooks=("01_characterization", "02_feature_engineering", "03_model_selection_loocv",
                                  "04_governor_evaluation"))
    summary = read_summary(out)
    # every registered governor but mlg-paper and profiled (below) and online (a U-curve needs 3
    # levels; ShuffleNet was measured at 100 and 125 W only); probing: an epoch a unit
    left_out = {"mlg-paper", "profiled", "online"}
    # the baseline row is named from the knob: Zeus's baseline is the highest power limit, not MAXN
    assert set(summary["governors"]) == (set(R.names()) - left_out - {"maxn"}) | {"max-limit"}
    assert summary["recommended"]["policy"] in {"ffg", *R.recommendable_names()} - left_out
    nb04 = json.loads((out / "04_governor_evaluation.ipynb").read_text())
    shown = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
                    for c in nb04["cells"] for o in c.get("outputs", []))
    assert "mlg-paper is left out: it decides the GPU level (MHz) and the knob here is the GPU power limit (W)" in shown
    assert "`profiled` was not a candidate" in shown
    assert "FFG level: " in shown and " MHz (least" not in shown and "MHz" not in summary["recommended"]["reason"]
