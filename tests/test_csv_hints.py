"""A missing column names what the file has instead (issue 36): a renamed column, another delimiter."""

from __future__ import annotations

import shutil
from pathlib import Path

from dvfslab.cli import main

EXAMPLE = Path(__file__).resolve().parent / "data" / "example"
RUN_COLUMNS = ("run_id, workload_id, policy, gpu_freq_mhz, rep, time_s, energy_j, energy_gpu_j, energy_cpu_j, "
               "avg_power_w, peak_power_w, gpu_util_pct, mean_gpu_freq_mhz, steps, eval_metric, status, started_at")


def validate(capsys, data: Path) -> str:
    assert main(["validate", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_renamed_column_is_named(tmp_path, capsys):
    data = shutil.copytree(EXAMPLE, tmp_path / "ds")
    runs = data / "runs.csv"
    header, rest = runs.read_text().split("\n", 1)
    runs.write_text(header.replace("energy_j", "energy", 1) + "\n" + rest)
    assert validate(capsys, data) == (
        f"dvfslab validate: error: {runs}: column 'energy_j': column is missing; the file has a column 'energy' the "
        f"contract does not know — rename 'energy' to 'energy_j' if it holds that; expected columns: {RUN_COLUMNS}")


def test_a_semicolon_csv_is_told_its_delimiter(tmp_path, capsys):
    data = shutil.copytree(EXAMPLE, tmp_path / "ds")
    runs = data / "runs.csv"
    runs.write_text(runs.read_text().replace(",", ";"))
    assert validate(capsys, data) == (
        f"dvfslab validate: error: {runs}: column 'run_id': column is missing: the header is one column separated by "
        "semicolons (';'), not commas — save the file as comma-separated CSV (the contract's delimiter is ','); "
        f"expected columns: {RUN_COLUMNS}")


def test_a_dropped_column_without_a_stranger_keeps_the_plain_message(tmp_path, capsys):
    import pandas as pd

    data = shutil.copytree(EXAMPLE, tmp_path / "ds")
    runs = data / "runs.csv"
    pd.read_csv(runs, dtype=str, keep_default_na=False).drop(columns=["status"]).to_csv(runs, index=False)
    err = validate(capsys, data)
    assert err.startswith(f"dvfslab validate: error: {runs}: column 'status': column is missing — expected columns")
