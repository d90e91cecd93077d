"""The notebook series run by papermill (``dvfslab pipeline``), checked against runs.csv.

The expected numbers are recomputed here from the raw CSV files with the standard library,
independently of dvfslab.analysis.aggregate / dvfslab.evaluation.replay: the oracle's and FFG's savings must match
summary.json to floating-point rounding.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
from analysis_fixtures import XAVIER_FREQS_MHZ, make_dataset

from dvfslab import cli
from dvfslab.governors import registry as R
from dvfslab.governors.files import load_governor
from dvfslab.pipeline import runner as PL

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "data" / "replay"
EXPECTED_FIGURES = ["sweep_curves", "energy_u_curves", "optimal_level_heatmap", "feature_relations", "cv_comparison",
                    "mlg_tree", "mlg_paper_tree", "savings_slowdown", "saving_vs_slowdown"]
GOVERNOR_KEYS = ["mean_saving_pct", "max_saving_pct", "min_saving_pct", "mean_slowdown_pct", "mean_regret_pct"]


# --------------------------------------------------------------------------------------------
# Independent reference computation (stdlib only)
# --------------------------------------------------------------------------------------------


def _mean(xs):
    return sum(xs) / len(xs)


def reference(data_dir: Path) -> dict:
    """Oracle and FFG savings, the range of optimal levels and U-shape share, straight from the CSV files."""
    meta = json.loads((data_dir / "meta.json").read_text())
    with open(data_dir / "workloads.csv", newline="") as fh:
        split = {r["workload_id"]: r["split"] for r in csv.DictReader(fh)}
    energy, time, base_e, base_t = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(list)
    with open(data_dir / "runs.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            if r["status"] != "ok":
                continue
            if r["policy"] == "fixed":
                key = (r["workload_id"], float(r["gpu_freq_mhz"]))
                energy[key].append(float(r["energy_j"]))
                time[key].append(float(r["time_s"]))
            elif r["policy"] == "maxn":
                base_e[r["workload_id"]].append(float(r["energy_j"]))
                base_t[r["workload_id"]].append(float(r["time_s"]))
    curves = defaultdict(dict)  # wid -> {freq: (E, T)}
    for (wid, f), es in energy.items():
        curves[wid][f] = (_mean(es), _mean(time[(wid, f)]))
    baseline = {}
    for wid, curve in curves.items():
        if meta["baseline"] == "maxn" and base_e[wid]:
            baseline[wid] = (_mean(base_e[wid]), _mean(base_t[wid]))
        else:
            baseline[wid] = curve[max(curve)]
    oracle_f = {wid: min(curve, key=lambda f: curve[f][0]) for wid, curve in curves.items()}
    splits = set(split[w] for w in curves)
    train_split = "characterization" if "characterization" in splits else "evaluation"
    eval_split = "evaluation" if "evaluation" in splits else "characterization"
    train = [w for w in curves if split[w] == train_split]
    test = [w for w in curves if split[w] == eval_split]
    common = set.intersection(*(set(curves[w]) for w in train))
    ffg = min(sorted(common), key=lambda f: _mean([curves[w][f][0] / baseline[w][0] for w in train]))

    def saving(wid, f):
        return 100 * (1 - curves[wid][f][0] / baseline[wid][0])

    def slowdown(wid, f):
        return 100 * (curves[wid][f][1] / baseline[wid][1] - 1)

    ffg_at = {w: min(curves[w], key=lambda f: (abs(f - ffg), -f)) for w in test}  # nearest measured level
    return {
        "n_workloads": len(curves), "ffg_level": ffg, "eval_split": eval_split,
        "optimal_level_range": (min(oracle_f.values()), max(oracle_f.values())),
        "u_shaped": _mean([1.0 if min(c) < oracle_f[w] < max(c) else 0.0 for w, c in curves.items()]),
        "oracle": [saving(w, oracle_f[w]) for w in test], "oracle_slowdown": [slowdown(w, oracle_f[w]) for w in test],
        "ffg": [saving(w, ffg_at[w]) for w in test], "ffg_slowdown": [slowdown(w, ffg_at[w]) for w in test],
        "ffg_regret": [100 * (curves[w][ffg_at[w]][0] - curves[w][oracle_f[w]][0]) / baseline[w][0] for w in test],
    }


def check_summary(out: Path, data: Path) -> dict:
    """summary.json has every key of the issue and matches the reference computation."""
    summary = json.loads((out / "summary.json").read_text())
    ref = reference(data)
    assert summary["dataset"] == str(data.resolve())
    assert summary["source"] == json.loads((data / "meta.json").read_text())["source"]
    assert summary["baseline"] == json.loads((data / "meta.json").read_text())["baseline"]
    assert summary["n_workloads"] == ref["n_workloads"]
    ch = summary["characterization"]
    assert (ch["optimal_level_range"]["min"], ch["optimal_level_range"]["max"]) == ref["optimal_level_range"]
    assert ch["u_shaped_fraction"] == pytest.approx(ref["u_shaped"], abs=1e-12)
    ms = summary["model_selection"]
    assert isinstance(ms["best_model"], str) and ms["best_model"].startswith("tree(")
    for key in ("loocv_accuracy", "grouped_accuracy"):
        assert 0.0 <= ms[key] <= 1.0
    gov = summary["governors"]
    # the baseline row: maxn where the dataset ran MAXN, else its highest clock (docs/method.md)
    base = "maxn" if json.loads((data / "meta.json").read_text())["baseline"] == "maxn" else "max-clock"
    assert set(gov) >= {base, "ffg", "mlg", "mlg-paper", "oracle"}
    for name in (base, "ffg", "mlg", "mlg-paper", "oracle"):
        assert set(gov[name]) >= set(GOVERNOR_KEYS), name
    close = {"rel": 1e-9, "abs": 1e-9}
    assert summary["evaluation"]["eval_split"] == ref["eval_split"]
    assert summary["evaluation"]["ffg_level"] == ref["ffg_level"]
    for name in ("oracle", "ffg"):
        assert gov[name]["mean_saving_pct"] == pytest.approx(_mean(ref[name]), **close), name
        assert gov[name]["max_saving_pct"] == pytest.approx(max(ref[name]), **close), name
        assert gov[name]["min_saving_pct"] == pytest.approx(min(ref[name]), **close), name
        assert gov[name]["mean_slowdown_pct"] == pytest.approx(_mean(ref[name + "_slowdown"]), **close), name
    assert gov["oracle"]["mean_regret_pct"] == 0.0
    assert gov["ffg"]["mean_regret_pct"] == pytest.approx(_mean(ref["ffg_regret"]), **close)
    for name in ("mlg", "mlg-paper"):  # no policy beats the oracle, none regrets less than zero
        assert gov[name]["mean_saving_pct"] <= gov["oracle"]["mean_saving_pct"] + 1e-9
        assert gov[name]["mean_regret_pct"] >= -1e-9
        assert gov[name]["mean_saving_pct"] + gov[name]["mean_regret_pct"] == pytest.approx(
            gov["oracle"]["mean_saving_pct"], **close)
    assert gov[base]["mean_saving_pct"] == 0.0 and gov[base]["mean_slowdown_pct"] == 0.0
    return summary


def check_outputs(out: Path, html: bool = True) -> None:
    for name in PL.NOTEBOOKS:
        executed = nbformat.read(out / f"{name}.ipynb", as_version=4)
        assert executed.metadata["papermill"]["parameters"]["OUTPUT_DIR"] == str(out.resolve())
        assert not any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
        if html:
            assert (out / f"{name}.html").stat().st_size > 10_000
    for fig in EXPECTED_FIGURES:
        png = out / "figures" / f"{fig}.png"
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", fig
    for table in ("sweep_levels", "features", "cv_results", "cv_summary", "evaluation_per_workload",
                  "evaluation_summary", "evaluation_by_size", "paper_vs_dvfslab"):
        assert (out / "tables" / f"{table}.csv").stat().st_size > 0, table
    assert load_governor(out / "models" / "mlg.json", policy="mlg").tree_["nodes"]


# --------------------------------------------------------------------------------------------
# The notebooks as committed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PL.NOTEBOOKS)
def test_notebook_is_thin_parameterized_and_without_outputs(name):
    book = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    params = [c for c in book.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    for var in ("DATA_DIR", "OUTPUT_DIR", "SEED", "QUICK"):
        assert re.search(rf"^{var}: \w+ = ", params[0].source, re.M), var
    for cell in book.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
            assert not re.search(r"^\s*(def|class) ", cell.source, re.M)
    sources = "\n".join(c.source for c in book.cells)
    for fig in PL.FIGURES[name]:
        assert f'"{fig}.png"' in sources
    # governor lists among the parameters name registered governors (the notebook validates them too)
    for var, value in re.findall(r"^(\w+): list = (\[.*?\])", params[0].source, re.M):
        if var.endswith(("NAMES", "CANDIDATES")):
            assert set(json.loads(value)) <= set(R.names()), var


# --------------------------------------------------------------------------------------------
# End to end (papermill)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pipeline_on_the_default_data(bundled_pipeline):
    """The bundled data/replay, run once per session (conftest; test_docfigures checks the docs against it)."""
    out = bundled_pipeline
    check_outputs(out)
    summary = check_summary(out, BUNDLED)
    assert summary["pipeline"]["quick"] is False
    assert summary["source"] != "simulated" or "SIMULATED" in (out / "01_characterization.html").read_text()


@pytest.mark.slow
def test_quick_cli_on_another_board_without_maxn_and_with_missing_features(tmp_path, capsys):
    data = make_dataset(tmp_path / "xavier", freqs_mhz=XAVIER_FREQS_MHZ, baseline="fmax", tasks=["sst2", "qnli", "rte"],
                        models=["bert-tiny", "bert-small", "pythia-70m", "bert-base", "pythia-160m", "bert-large"],
                        missing={"avg_seq_len": 0.3, "hidden_size": 1.0}, failed_runs=3)
    out = tmp_path / "run"
    assert cli.main(["pipeline", "--data", str(data), "--out", str(out), "--quick", "--no-html"]) == 0
    printed = capsys.readouterr().out
    assert f"pipeline output (SIMULATED data): {out.resolve()}" in printed
    check_outputs(out, html=False)
    summary = check_summary(out, data)
    assert summary["baseline"] == "fmax" and summary["pipeline"]["quick"] is True
    assert summary["characterization"]["level_table"] == XAVIER_FREQS_MHZ
    assert "hidden_size" in summary["features"]["dropped"]
    assert "hidden_size" not in summary["model_selection"]["features_used"]
    assert "avg_seq_len" in summary["model_selection"]["features_used"]


@pytest.mark.slow
def test_a_failing_notebook_is_named_with_its_cell(tmp_path, monkeypatch):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    book = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('DATA_DIR = ""\nOUTPUT_DIR = ""\nSEED = 0\nQUICK = False', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("raise ValueError('the sweep is empty')"),
    ])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, nbdir / "01_characterization.ipynb")
    monkeypatch.setattr(PL, "notebook_dir", lambda: nbdir)
    data = REPO / "tests" / "data" / "example"
    with pytest.raises(PL.PipelineError, match=r"01_characterization\.ipynb failed in cell 4 .*ValueError: the sweep is empty"):
        PL.run_pipeline(data, tmp_path / "run", notebooks=("01_characterization",), progress=False, log=lambda s: None)
    # the failure, readable in a browser, kept beside --out; --out itself is not half-written
    assert (tmp_path / "run.incomplete" / "01_characterization.html").exists()
    assert not (tmp_path / "run").exists()


def test_invalid_dataset_stops_before_any_kernel(tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    assert cli.main(["pipeline", "--data", str(tmp_path / "bad"), "--out", str(tmp_path / "run")]) == 2
    assert "meta.json" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_default_output_folder_is_timestamped():
    from datetime import datetime

    assert PL.default_out_dir(datetime(2026, 1, 2, 3, 4, 5)) == Path("runs") / "20260102-030405"
    assert PL.default_data_dir().resolve() == (REPO / "data" / "replay").resolve()


def test_a_summary_written_by_an_older_dvfslab_says_how_to_regenerate(tmp_path):
    from dvfslab.core.errors import DvfsError
    from dvfslab.pipeline.summary import read_summary

    (tmp_path / "summary.json").write_text(json.dumps({"characterization": {"sweet_spot_mhz": {"min": 1, "max": 2}}}))
    with pytest.raises(DvfsError, match=r"characterization.sweet_spot_mhz is now characterization.optimal_level_range"
                                        r".*`dvfslab pipeline --data DATASET --out ") as err:
        read_summary(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "summary.json").write_text(json.dumps({"evaluation": {"ffg_level": 612.0}}))
    assert read_summary(tmp_path) == {"evaluation": {"ffg_level": 612.0}}


# --------------------------------------------------------------------------------------------
# Datasets with nothing to learn, in-sample runs, progress and the last line (issue 25)
# --------------------------------------------------------------------------------------------


def _uniform_dataset(root: Path) -> Path:
    """analysis_fixtures.TINY_RUNS with every feature the same (2 layers, hidden 128, 4.4 M
    parameters, encoder, 40 tokens, batch 16, 30 % GPU utilization) and one split.

    FFG by hand over the levels all three were measured at (612, 714 MHz), mean E / E_MAXN:
    612 -> (92/122 + 200/250 + 50/80) / 3 = (0.75410 + 0.8 + 0.625) / 3 = 0.72637,
    714 -> (98/122 + 175/250 + 54/80) / 3 = (0.80328 + 0.7 + 0.675) / 3 = 0.72609: 714 MHz.
    """
    from analysis_fixtures import tiny_frames

    from dvfslab.data.contract import write_dataset

    meta, wl, runs = tiny_frames()
    wl = wl.assign(model_type="encoder", params_m=4.4, n_layers=2, hidden_size=128, avg_seq_len=40.0)
    runs = runs.assign(gpu_util_pct=30.0)
    write_dataset(root, meta, wl, runs)
    return root


UNIFORM_WHY = ("no feature varies over the 3 training workloads (is_decoder is 0 in every training workload; "
               "gpu_util_pct is 30 in every training workload; n_layers is 2 in every training workload; "
               "hidden_size is 128 in every training workload; avg_seq_len is 40 in every training workload; "
               "params_m is 4.4 in every training workload; batch_size is 16 in every training workload)")


@pytest.mark.slow
def test_nothing_to_learn_and_in_sample_are_said_and_notebooks_01_to_03_run(tmp_path):
    logged: list[str] = []
    out = PL.run_pipeline(_uniform_dataset(tmp_path / "uniform"), tmp_path / "run", quick=True, html=False,
                          progress=False, notebooks=PL.NOTEBOOKS[:3], log=logged.append)
    summary = json.loads((out / "summary.json").read_text())
    feat = summary["features"]
    assert feat["in_sample"] is True and feat["train_split"] == feat["eval_split"] == "characterization"
    assert feat["used"] == [] and feat["dropped"]["batch_size"] == "batch_size is 16 in every training workload"
    assert feat["cannot_learn"] == UNIFORM_WHY
    assert summary["model_selection"]["cannot_learn"] == UNIFORM_WHY
    assert summary["model_selection"]["loocv_accuracy"] is None  # nothing was cross-validated
    tree = load_governor(out / "models" / "mlg.json", policy="mlg").tree_
    assert tree["nodes"] == [{"level": 714.0, "n": 3}] and tree["info"]["fallback"] == "ffg"
    assert logged[-2:] == [
        "IN-SAMPLE: the learned governors were trained and evaluated on the same 3 characterization workloads "
        "(the dataset has no evaluation split): their figures on them are optimistic",
        f"NOTHING TO LEARN: {UNIFORM_WHY} — the learned governors fall back to FFG"]
    book = (out / "02_feature_engineering.ipynb").read_text()
    assert "IN-SAMPLE." in book and f"Nothing to learn: {UNIFORM_WHY}" in book


@pytest.mark.slow
def test_a_one_workload_sim_sweep_runs_end_to_end(tmp_path, capsys):
    """The issue's reproduction: one workload swept at one level (612 MHz) on the twin."""
    data, out = tmp_path / "D", tmp_path / "run"
    assert cli.main(["sweep", "--backend", "sim", "--workloads", "bert-small/sst2", "--freqs", "612", "--reps", "1",
                     "--steps", "10", "--out", str(data), "--no-progress"]) == 0
    assert cli.main(["pipeline", "--data", str(data), "--quick", "--no-html", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("NOTHING TO LEARN: one training workload (bert-small/sst2): nothing to generalize from — the learned "
            "governors fall back to FFG") in printed
    assert ("IN-SAMPLE: the learned governors were trained and evaluated on the same 1 characterization workload "
            "(the dataset has no evaluation split): their figures on them are optimistic") in printed
    assert load_governor(out / "models" / "mlg.json", policy="mlg").tree_["nodes"] == [{"level": 612.0, "n": 1}]
    for fig in (*EXPECTED_FIGURES, "governor_cv", "pareto_energy_time"):
        assert (out / "figures" / f"{fig}.png").exists(), fig


class FakeStream(io.StringIO):
    """A stream that is a terminal or not."""

    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _three_cell_books(tmp_path: Path, monkeypatch, names: tuple[str, ...]) -> None:
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    for name in names:
        book = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell('DATA_DIR = ""\nOUTPUT_DIR = ""\nSEED = 0\nQUICK = False',
                                      metadata={"tags": ["parameters"]}),
            nbformat.v4.new_markdown_cell("a note"), nbformat.v4.new_code_cell("x = 1")])
        book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(book, nbdir / f"{name}.ipynb")
    monkeypatch.setattr(PL, "notebook_dir", lambda: nbdir)


@pytest.mark.slow
@pytest.mark.parametrize("tty", [False, True])
def test_progress_is_one_line_or_one_bar_per_notebook(tmp_path, monkeypatch, tty):
    names = ("nb_a", "nb_b")
    _three_cell_books(tmp_path, monkeypatch, names)
    stream = FakeStream(tty)
    PL.run_pipeline(REPO / "tests" / "data" / "example", tmp_path / "run", notebooks=names, html=False,
                    log=lambda s: None, stream=stream)
    text = stream.getvalue()
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert len(lines) == 2  # one per notebook, nothing else
    for i, (name, line) in enumerate(zip(names, lines, strict=True), 1):
        # 4 cells: the notebook's 3 and the parameters cell papermill injects
        if tty:  # the bar redrawn in place (\r), left complete
            assert re.fullmatch(rf"\[{i}/2\] {name}: 100%\|[^|]+\| 4/4 cells \[\d\d:\d\d\]", line.split("\r")[-1])
        else:
            assert "\r" not in line and re.fullmatch(rf"\[{i}/2\] {name}: 4 cells in \d+\.\d s", line)


def test_the_last_line_names_every_output_folder(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    for sub in ("figures", "tables", "models"):
        (out / sub).mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps({"source": "simulated"}))
    monkeypatch.setattr(PL, "run_pipeline", lambda *a, **k: out)
    assert cli.main(["pipeline", "--no-html", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"pipeline output (SIMULATED data): {out}  (summary.json, figures/, models/, tables/, executed notebooks)")


def test_the_last_lines_say_in_sample_nothing_to_learn_and_where_the_headline_comes_from():
    from dvfslab.pipeline.summary import caveat_lines

    assert caveat_lines({}) == []
    held_out = {"features": {"in_sample": False, "train_split": "characterization", "eval_split": "evaluation",
                             "n_train_workloads": 27, "cannot_learn": None},
                "evaluation": {"headline": "evaluation split"}}
    assert caveat_lines(held_out) == ["headline figures come from: evaluation split"]
    in_sample = {"features": {"in_sample": True, "train_split": "characterization", "eval_split": "characterization",
                              "n_train_workloads": 27, "cannot_learn": None},
                 "evaluation": {"in_sample": True, "headline": "leave-one-model-out CV"}}
    assert caveat_lines(in_sample) == [
        "IN-SAMPLE: the learned governors were trained and evaluated on the same 27 characterization workloads "
        "(the dataset has no evaluation split): their figures on them are optimistic",
        "headline figures come from: leave-one-model-out CV"]
