"""Issue 25, item 1-2: the smallest sweep a newcomer runs goes through every notebook.

One workload at one level (plus its MAXN run), ten steps: nothing can be learned (one workload,
one level), the evaluation is the training set (in-sample) and no cross-validation is possible.
Every notebook must still run, say so, and report the figures that exist: every governor that
decides from the features holds the only level there is, so each saves what that level saves
against MAXN, read here straight from runs.csv. A measuring governor runs through the live runner
(issue #35), whose first window is at the default clock and reads at least 5 samples of
tegrastats' 1 s (5 s): the 10-step run lasts 1.8 s at MAXN, so the run (the first 10 units of the
job) is spent whole at the default clock — a saving of exactly 0 — and only the rest of the whole
job is held at the level.
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
        ok = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
    runs = {r["policy"]: float(r["energy_j"]) for r in ok}
    saving = 100 * (1 - runs["fixed"] / runs["maxn"])  # the one level against MAXN
    summary = json.loads((out / "summary.json").read_text())
    ev, gov, rec = summary["evaluation"], summary["governors"], summary["recommended"]
    assert ev["in_sample"] is True and "in-sample" in ev["headline"] and ev["n_workloads"] == 1
    assert rec["policy"] == "ffg" and "CV" in rec["reason"] and rec["scheme"] == "lobo"
    assert "mlg" in ev["fallbacks"] and "falls back to FFG" in ev["fallbacks"]["mlg"]
    maxn_time_s = next(float(r["time_s"]) for r in ok if r["policy"] == "maxn")
    for name in ("ffg", "mlg", "oracle"):  # one level: every choice is that level
        assert gov[name]["mean_saving_pct"] == pytest.approx(saving, abs=1e-9 * abs(saving)), name
        assert gov[name]["job_regret_pct"] == pytest.approx(0.0, abs=1e-9), name
    assert maxn_time_s < 5.0  # the premise of the module doc: the run ends inside the first 5 s window
    for name in ("zeus-sim", "search"):  # the run is all default clock (module doc); the job ends at the level
        assert gov[name]["mean_saving_pct"] == pytest.approx(0.0, abs=1e-9), name
        assert 0.0 < gov[name]["job_regret_pct"] < saving, name
    assert summary["beyond"]["in_sample"] is True and "curve" in summary["beyond"]["fallbacks"]
    for name in ("04_governor_evaluation", "05_beyond_the_paper"):
        text = (out / f"{name}.ipynb").read_text()
        assert "IN-SAMPLE" in text and "could not learn" in text, name
