"""The dataset contract: loading, one test per kind of bad input, atomic writes, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dvfslab.cli import main
from dvfslab.data.contract import (
    RUN_COLUMNS,
    DatasetError,
    atomic_write_text,
    load_dataset,
    write_dataset,
)

EXAMPLE = Path(__file__).parent / "data" / "example"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dst = tmp_path / "ds"
    shutil.copytree(EXAMPLE, dst)
    return dst


def edit_csv(path: Path, row: int, column: str, value: str) -> None:
    """Set one cell (row is the 1-based data row) of a CSV, keeping everything as text."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[row - 1, column] = value
    frame.to_csv(path, index=False)


def edit_meta(path: Path, **changes) -> None:
    meta = json.loads((path / "meta.json").read_text())
    meta.update(changes)
    (path / "meta.json").write_text(json.dumps(meta))


def test_example_loads_with_types():
    ds = load_dataset(EXAMPLE)
    assert (len(ds.workloads), len(ds.runs)) == (3, 10)
    assert ds.source == "measured" and ds.baseline == "maxn"
    assert ds.freq_table_mhz == [612.0, 1300.5]
    assert str(ds.runs["rep"].dtype) == "Int64"
    assert ds.runs["time_s"].dtype == float
    assert ds.runs["gpu_freq_mhz"].isna().sum() == 3  # the MAXN runs
    assert len(ds.ok_runs()) == 9
    assert ds.summary_line() == "ok: 3 workloads, 10 runs (measured)"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: (d / "runs.csv").unlink(), ["runs.csv", "file is missing"]),
        (lambda d: (d / "meta.json").write_text("{not json"), ["meta.json", "malformed JSON", "line 1"]),
        (lambda d: edit_meta(d, schema_version=7), ["meta.json", "unknown schema_version 7"]),
        (lambda d: edit_meta(d, source="guessed"), ["meta.json", "source 'guessed'"]),
        (lambda d: edit_meta(d, freq_table_mhz=[]), ["meta.json", "freq_table_mhz"]),
        (
            lambda d: pd.read_csv(d / "workloads.csv").drop(columns="hidden_size").to_csv(d / "workloads.csv", index=False),
            ["workloads.csv", "column 'hidden_size'", "column is missing"],
        ),
        (lambda d: edit_csv(d / "runs.csv", 4, "time_s", "fast"), ["runs.csv", "column 'time_s'", "row 4", "'fast' is not a number"]),
        (lambda d: edit_csv(d / "runs.csv", 2, "rep", "1.5"), ["runs.csv", "column 'rep'", "row 2", "not an integer"]),
        (lambda d: edit_csv(d / "runs.csv", 5, "energy_j", "nan"), ["runs.csv", "column 'energy_j'", "row 5", "NaN"]),
        (lambda d: edit_csv(d / "runs.csv", 3, "time_s", ""), ["runs.csv", "column 'time_s'", "row 3", "NaN or empty"]),
        (lambda d: edit_csv(d / "runs.csv", 6, "energy_j", "-3"), ["runs.csv", "column 'energy_j'", "row 6", ">= 0"]),
        (lambda d: edit_csv(d / "runs.csv", 7, "status", "done"), ["runs.csv", "column 'status'", "row 7", "'done' is not one of ok, failed"]),
        (lambda d: edit_csv(d / "runs.csv", 8, "workload_id", "bert-huge/qqp"), ["runs.csv", "column 'workload_id'", "row 8", "not in workloads.csv"]),
        (lambda d: edit_csv(d / "runs.csv", 1, "gpu_freq_mhz", "600"), ["runs.csv", "column 'gpu_freq_mhz'", "row 1", "600 is not in meta.json freq_table_mhz"]),
        (lambda d: edit_csv(d / "runs.csv", 9, "run_id", "r001"), ["runs.csv", "column 'run_id'", "row 9", "duplicate run_id 'r001'"]),
        (lambda d: edit_csv(d / "workloads.csv", 2, "split", "train"), ["workloads.csv", "column 'split'", "row 2"]),
        (lambda d: edit_csv(d / "workloads.csv", 1, "model_type", "seq2seq"), ["workloads.csv", "column 'model_type'", "row 1"]),
        (lambda d: edit_csv(d / "workloads.csv", 2, "job_steps", "0"), ["workloads.csv", "column 'job_steps'", "row 2", "positive finite"]),
        (lambda d: edit_csv(d / "workloads.csv", 3, "job_steps", "-12.5"), ["workloads.csv", "column 'job_steps'", "row 3", "got -12.5"]),
        (lambda d: edit_csv(d / "workloads.csv", 1, "job_steps", "inf"), ["workloads.csv", "column 'job_steps'", "row 1", "got inf"]),
        (lambda d: edit_csv(d / "workloads.csv", 2, "job_steps", "three epochs"), ["workloads.csv", "column 'job_steps'", "row 2", "'three epochs' is not a number"]),
    ],
    ids=[
        "missing-file", "malformed-json", "schema-version", "source", "freq-table", "missing-column",
        "wrong-type", "non-integer", "nan-energy", "empty-time", "negative-energy", "status",
        "unknown-workload", "freq-not-in-table", "duplicate-run-id", "split", "model-type",
        "job-steps-zero", "job-steps-negative", "job-steps-inf", "job-steps-text",
    ],
)
def test_bad_input_names_file_column_row(example: Path, mutate, expected, capsys):
    mutate(example)
    with pytest.raises(DatasetError) as info:
        load_dataset(example)
    message = str(info.value)
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"
    assert "\n" not in message
    # the CLI prints exactly that line and exits 2, no traceback
    assert main(["validate", str(example)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_failed_runs_may_have_empty_measurements(example: Path):
    ds = load_dataset(example)
    failed = ds.runs[ds.runs["status"] == "failed"]
    assert failed["time_s"].isna().all() and failed["energy_j"].isna().all()


def test_energy_may_be_empty_when_not_measured(example: Path):
    edit_csv(example / "runs.csv", 1, "energy_j", "")
    with pytest.raises(DatasetError):
        load_dataset(example)
    edit_meta(example, energy_measured=False)
    assert load_dataset(example).runs["energy_j"].isna().sum() == 2


def test_maxn_baseline_requires_maxn_runs(example: Path):
    runs = pd.read_csv(example / "runs.csv", dtype=str, keep_default_na=False)
    runs[runs["policy"] != "maxn"].to_csv(example / "runs.csv", index=False)
    with pytest.raises(DatasetError, match="baseline is 'maxn' but runs.csv has no policy=maxn run"):
        load_dataset(example)
    edit_meta(example, baseline="fmax")
    assert load_dataset(example).baseline == "fmax"


def test_steps_must_reference_known_runs(example: Path):
    (example / "steps.csv").write_text("run_id,step,time_s,energy_j\nr001,0,0.5,3.1\nzzz,0,0.5,3.0\n")
    with pytest.raises(DatasetError, match=r"steps.csv: column 'run_id', row 2 \(line 3\)"):
        load_dataset(example)


def test_job_steps_is_optional_and_may_be_fractional(example: Path, tmp_path: Path):
    assert "job_steps" not in load_dataset(example).workloads.columns  # an older dataset loads unchanged
    edit_csv(example / "workloads.csv", 1, "job_steps", "6315")
    edit_csv(example / "workloads.csv", 2, "job_steps", "3.5")  # row 3 left empty: no whole job known
    ds = load_dataset(example)
    assert ds.workloads["job_steps"].tolist()[:2] == [6315.0, 3.5] and pd.isna(ds.workloads["job_steps"].iloc[2])
    again = write_dataset(tmp_path / "copy", ds.meta, ds.workloads, ds.runs)
    assert again.workloads["job_steps"].tolist()[:2] == [6315.0, 3.5]


def test_write_dataset_round_trip(tmp_path: Path):
    src = load_dataset(EXAMPLE)
    out = write_dataset(tmp_path / "copy", src.meta, src.workloads, src.runs)
    assert out.summary_line() == src.summary_line()
    pd.testing.assert_frame_equal(out.runs[list(RUN_COLUMNS)], src.runs[list(RUN_COLUMNS)])
    # byte-identical when written twice
    first = (tmp_path / "copy" / "runs.csv").read_bytes()
    write_dataset(tmp_path / "copy", src.meta, src.workloads, src.runs)
    assert (tmp_path / "copy" / "runs.csv").read_bytes() == first


def test_atomic_write_never_leaves_half_a_file(tmp_path: Path, monkeypatch):
    target = tmp_path / "runs.csv"
    atomic_write_text(target, "old\n")

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new contents that never land\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]  # temp file cleaned up


def test_cli_validate_ok_subprocess():
    proc = subprocess.run([sys.executable, "-m", "dvfslab", "validate", str(EXAMPLE)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok: 3 workloads, 10 runs (measured)"


def test_cli_validate_not_a_directory(tmp_path: Path, capsys):
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_atomic_write_uses_the_usual_file_mode(tmp_path: Path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "meta.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "meta.json").stat().st_mode & 0o777 == 0o644


# --------------------------------------------------------------------------------------------
# The knob (meta.json "knob"): the GPU clock by default, or a GPU power limit
# --------------------------------------------------------------------------------------------


def test_a_dataset_without_knob_loads_unchanged_as_a_clock_sweep():
    meta = json.loads((EXAMPLE / "meta.json").read_text())
    assert "knob" not in meta  # the example predates the knob
    ds = load_dataset(EXAMPLE)
    assert ds.knob.name == "gpu_freq_mhz" and ds.knob.unit == "MHz"
    assert ds.levels == ds.freq_table_mhz == [612.0, 1300.5]  # meta.json freq_table_mhz, as written
    assert list(ds.runs.columns[:5]) == ["run_id", "workload_id", "policy", "gpu_freq_mhz", "rep"]


def _as_power_limit(path: Path) -> None:
    """Turn the example into a power-limit sweep: 612 -> 150 W, 1300.5 -> 250 W, MAXN runs dropped."""
    runs = pd.read_csv(path / "runs.csv", dtype=str, keep_default_na=False)
    runs = runs[runs["policy"] == "fixed"].rename(columns={"gpu_freq_mhz": "power_limit_w"})
    runs["power_limit_w"] = runs["power_limit_w"].map({"612": "150", "1300.5": "250"})
    runs.to_csv(path / "runs.csv", index=False)
    meta = json.loads((path / "meta.json").read_text())
    del meta["freq_table_mhz"]
    meta.update(knob="power_limit_w", power_limit_table_w=[150, 250], baseline="max_level")
    (path / "meta.json").write_text(json.dumps(meta))


def test_a_power_limit_dataset_loads_with_its_levels_in_watts(example: Path):
    _as_power_limit(example)
    ds = load_dataset(example)
    assert ds.knob.name == "power_limit_w" and ds.knob.axis_label == "GPU power limit (W)"
    assert ds.levels == [150.0, 250.0]
    assert sorted(ds.runs["power_limit_w"].unique()) == [150.0, 250.0]
    with pytest.raises(DatasetError, match="not the GPU clock"):
        ds.freq_table_mhz  # noqa: B018  (watts must never pass for MHz)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: edit_csv(d / "runs.csv", 1, "power_limit_w", "175"),
         ["runs.csv", "column 'power_limit_w'", "row 1", "175 is not in meta.json power_limit_table_w (150, 250)"]),
        (lambda d: edit_meta(d, power_limit_table_w=[]), ["meta.json", "power_limit_table_w", "(W)"]),
        (lambda d: edit_meta(d, knob="voltage_mv"), ["meta.json", "knob 'voltage_mv' is not one of"]),
    ],
)
def test_power_limit_problems_name_the_knob(example: Path, mutate, expected):
    _as_power_limit(example)
    mutate(example)
    with pytest.raises(DatasetError) as err:
        load_dataset(example)
    for part in expected:
        assert part in str(err.value)


def test_a_power_limit_dataset_needs_its_table_not_the_clock_table(example: Path):
    _as_power_limit(example)
    meta = json.loads((example / "meta.json").read_text())
    del meta["power_limit_table_w"]
    (example / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="key 'power_limit_table_w' is missing"):
        load_dataset(example)
