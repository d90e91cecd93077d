"""The bundled replay dataset (data/replay): valid, labelled simulated, reproducible byte for byte
(meta.json up to its dvfslab_version field, which follows the package, not the data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation.findings import findings_markdown, twin_findings
from dvfslab.sweep.simulate import SimulationPlan, simulate_dataset

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "data" / "replay"
FILES = ("meta.json", "workloads.csv", "runs.csv", "steps.csv")
REGENERATE = "regenerate it with: dvfslab simulate --out data/replay --seed 0 --force (see docs/calibration.md)"


@pytest.fixture(scope="module")
def bundled():
    return load_dataset(REPLAY)


def test_bundled_dataset_validates_and_is_labelled_simulated(bundled, capsys):
    assert main(["validate", str(REPLAY)]) == 0
    assert "simulated" in capsys.readouterr().out
    assert bundled.simulated and bundled.meta["device"]["simulated"] is True
    assert "NOT A MEASUREMENT" in bundled.meta["note"]
    assert len(bundled.workloads) == 81 and len(bundled.runs) == 81 * 36
    assert sum((REPLAY / f).stat().st_size for f in FILES) < 3_000_000  # small enough to bundle


def _without_version(meta_bytes: bytes) -> bytes:
    """meta.json minus ``dvfslab_version``: the package version changes with every release while
    the data does not (the twin's own version is ``generator.twin_version``, which is compared)."""
    meta = json.loads(meta_bytes)
    meta.pop("dvfslab_version", None)
    return json.dumps(meta, indent=2, sort_keys=True).encode()


@pytest.mark.slow  # the whole paper grid through the sweep: about half a minute
def test_regenerating_with_the_recorded_seed_reproduces_it_byte_for_byte(bundled, tmp_path):
    plan_meta = dict(bundled.meta["generator"]["plan"])
    plan = SimulationPlan(**{k: tuple(v) if isinstance(v, list) else v for k, v in plan_meta.items()})
    assert plan.seed == bundled.meta["seed"]
    simulate_dataset(tmp_path, plan, progress=False)
    for name in FILES:
        new, old = (tmp_path / name).read_bytes(), (REPLAY / name).read_bytes()
        if name == "meta.json":
            new, old = _without_version(new), _without_version(old)
        if new != old:
            lines = zip(new.decode().splitlines(), old.decode().splitlines(), strict=False)
            first = next(((i, a, b) for i, (a, b) in enumerate(lines, 1) if a != b), None)
            pytest.fail(f"data/replay/{name} differs from a fresh generation (first differing line: {first}); "
                        + REGENERATE)


def test_calibration_doc_shows_the_bundled_findings(bundled):
    doc = (ROOT / "docs" / "calibration.md").read_text()
    assert findings_markdown(bundled) in doc, "docs/calibration.md is stale; paste findings_markdown(...)"


def test_bundled_physics(bundled):
    f = twin_findings(bundled)
    assert f["power_increasing"] == f["interior_minimum"] == 81
    # a CPU-bound workload's time is flat near the top levels, where run-to-run noise can win
    assert f["time_decreasing"] >= 78
    assert f["saving_pct"]["oracle"]["gt70m"]["min"] > 0
    runs = bundled.ok_runs()
    top = runs[runs["gpu_freq_mhz"] == 1300.5]
    assert (top["energy_gpu_j"] / top["time_s"]).max() < 60.0


def test_board_total_is_recorded_and_changes_the_findings_as_the_static_rails_predict(bundled):
    """All four rails (energy_board_j) exceed CPU+GPU in every run; adding two nearly constant
    rails makes slow levels costlier, so the sweet spot's upper end does not move down and the
    oracle's mean saving falls."""
    from dvfslab.evaluation.findings import board_total_view

    runs = bundled.ok_runs()
    assert (runs["energy_board_j"] > runs["energy_j"]).all()
    cpu_gpu, board = twin_findings(bundled), twin_findings(board_total_view(bundled))
    assert board["sweet_spot_mhz"][1] >= cpu_gpu["sweet_spot_mhz"][1]
    assert board["saving_pct"]["oracle"]["all"]["mean"] < cpu_gpu["saving_pct"]["oracle"]["all"]["mean"]
