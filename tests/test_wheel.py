"""The wheel: build it, install it outside the checkout, run ``dvfslab pipeline`` from it.

Offline throughout: the wheel is built without build isolation (setuptools from this
environment), installed with ``--no-deps --no-index --target`` into a temporary folder, and run
by this interpreter with ``PYTHONPATH`` = that folder from a working directory outside the
checkout, so the dependencies come from this environment and dvfslab comes from the wheel.
``pipeline`` gets no ``--data``: it must find the bundled dataset inside the installed package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("papermill")  # the notebooks extra (make test installs it)

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["01_characterization", "02_feature_engineering", "03_model_selection_loocv",
             "04_governor_evaluation", "05_beyond_the_paper"]
# what the wheel carries besides code: the notebooks and the bundled (simulated) dataset
PACKAGE_DATA = [f"dvfslab/pipeline/notebooks/{n}.ipynb" for n in NOTEBOOKS] + [
    f"dvfslab/pipeline/replay/{f}" for f in ("meta.json", "runs.csv", "steps.csv", "workloads.csv")
] + ["dvfslab/py.typed"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "MPLBACKEND": "Agg", "PIP_NO_INDEX": "1"}


def run(cmd: list[str], cwd: Path, env: dict | None = None, timeout_s: float = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-4000:]}"
    return out


def source_copy(dest: Path) -> Path:
    """The files a wheel is built from, copied (links kept) so that no build/ or *.egg-info
    left in the checkout can leak stale modules into the wheel."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.pyc")
    for name in ("dvfslab", "notebooks"):
        shutil.copytree(REPO / name, dest / name, symlinks=True, ignore=skip)
    shutil.copytree(REPO / "data" / "replay", dest / "data" / "replay")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = source_copy(tmp / "src")
    log = run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
               "--no-index", "-w", str(tmp / "dist"), str(src)], cwd=tmp,
              env={**os.environ, **OFFLINE})
    (whl,) = (tmp / "dist").glob("dvfslab-*.whl")
    return whl, log


def test_wheel_builds_without_deprecation_warnings_and_carries_the_package_data(wheel):
    whl, log = wheel
    assert "SetuptoolsDeprecationWarning" not in log and "DeprecationWarning" not in log, log[-3000:]
    names = set(zipfile.ZipFile(whl).namelist())
    missing = [p for p in PACKAGE_DATA if p not in names]
    assert not missing, f"{whl.name} lacks {missing}"
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/"))]


@pytest.mark.slow
def test_installed_wheel_runs_the_pipeline_on_its_bundled_dataset(wheel, tmp_path):
    whl, _ = wheel
    site, work, out = tmp_path / "site", tmp_path / "work", tmp_path / "out"
    work.mkdir()
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
         str(whl)], cwd=work, env={**os.environ, **OFFLINE})
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(site)}
    where = run([sys.executable, "-c", "import dvfslab; print(dvfslab.__file__)"], cwd=work, env=env)
    assert Path(where.strip()).is_relative_to(site), f"dvfslab imported from {where.strip()}, not {site}"

    log = run([sys.executable, "-m", "dvfslab", "pipeline", "--out", str(out), "--quick", "--no-html"],
              cwd=work, env=env)
    assert "SIMULATED" in log  # the bundled dataset is simulated and says so
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == "simulated"
    assert Path(summary["dataset"]) == site / "dvfslab" / "pipeline" / "replay"
    for name in NOTEBOOKS:
        nb = json.loads((out / f"{name}.ipynb").read_text())
        params = next(c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
        assert str(site) in "".join(params["source"]), f"{name} did not run on the bundled data"
    assert os.listdir(work) == []  # nothing written outside --out (no runs/ in the cwd)
