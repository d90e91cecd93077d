"""Issue 25, item 1-2: the smallest sweep a newcomer runs goes through every notebook.

One workload at one level (plus its MAXN run), ten steps: nothing can be learned (one workload,
one level), the evaluation is the training set (in-sample) and no cross-validation is possible.
Every notebook must still run, say so, and report the figures that exist: every governor holds
the only level there is, so each saves what that level saves against MAXN, read here straight
from runs.csv.
"""

from __future__ import annotations

import csv
import json

import pytest

from dvfslab import cli


@pytest.mark.slow
def test_one_workload_one_level_runs_every_notebook(tmp_path, capsys):
    data, out = tmp_path / "D", tmp_path / "run"
    assert cli.main(["sweep", "--backend", "sim", "--workloads", "bert-small/sst2", "--freqs", "612", "--reps", "1",
                     "--steps", "10", "--out", str(data)]) == 0
    assert cli.main(["pipeline", "--data", str(data), "--quick", "--no-html", "--out", str(out)]) == 0
    capsys.readouterr()
    with open(data / "runs.csv", newline="") as fh:
        runs = {r["policy"]: float(r["energy_j"]) for r in csv.DictReader(fh) if r["status"] == "ok"}
    saving = 100 * (1 - runs["fixed"] / runs["maxn"])  # the one level against MAXN
    summary = json.loads((out / "summary.json").read_text())
    ev, gov, rec = summary["evaluation"], summary["governors"], summary["recommended"]
    assert ev["in_sample"] is True and "in-sample" in ev["headline"] and ev["n_workloads"] == 1
    assert rec["policy"] == "ffg" and "CV" in rec["reason"] and rec["scheme"] == "lobo"
    assert "mlg" in ev["fallbacks"] and "falls back to FFG" in ev["fallbacks"]["mlg"]
    for name in ("ffg", "mlg", "oracle", "zeus-sim", "search"):  # one level: every choice is that level
        # (a probe of the one level lasts 5.2 s — 5 samples of tegrastats' default 1 s + 0.2 s settle — longer than
        # the 10-step run: the run is all probe, charged from steps.csv, whose sum differs from runs.csv's energy_j
        # by its rounding to 6 significant digits, 1e-6 relative: 1e-3 points of saving is ample)
        tol = 1e-3 if name in ("zeus-sim", "search") else 1e-9 * abs(saving)
        assert gov[name]["mean_saving_pct"] == pytest.approx(saving, abs=tol), name
        assert gov[name]["job_regret_pct"] == pytest.approx(0.0, abs=1e-9), name
    assert summary["beyond"]["in_sample"] is True and "curve" in summary["beyond"]["fallbacks"]
    for name in ("04_governor_evaluation", "05_beyond_the_paper"):
        text = (out / f"{name}.ipynb").read_text()
        assert "IN-SAMPLE" in text and "could not learn" in text, name
