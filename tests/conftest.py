"""Shared fixtures: fake Jetson boards built in tmp_path, an isolated clock state dir, and one
`dvfslab pipeline` run on the bundled data per session (test_notebooks and test_docfigures read it)."""

from __future__ import annotations

import os
import signal

import pytest

# Hugging Face never reaches the network in tests (set once, before any test imports transformers):
# models are built from configs, datasets in memory.
for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"

# Ctrl-C is Python's KeyboardInterrupt here and in every child, also when the suite runs in the
# background (`make test &`, CI): a shell starts a background job with SIGINT ignored, which a
# child inherits across exec, and Python then installs no handler; the signal tests send SIGINT.
signal.signal(signal.SIGINT, signal.default_int_handler)

from pathlib import Path  # noqa: E402

from dvfslab.testing.fake_sysfs import FAKE_KERNEL_IO, PROFILES, FakeBoard, build_board  # noqa: E402

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "replay"


@pytest.fixture(autouse=True)
def _isolated_dvfslab_state(tmp_path_factory, monkeypatch) -> None:
    """No test writes clock state files to ~/.local/state/dvfslab."""
    monkeypatch.setenv("DVFSLAB_STATE_DIR", str(tmp_path_factory.mktemp("dvfslab-state")))


@pytest.fixture(scope="session")
def bundled_pipeline(tmp_path_factory) -> Path:
    """`dvfslab pipeline` (HTML included) on the bundled data/replay, run once per session: its output folder."""
    from dvfslab.pipeline import runner

    return runner.run_pipeline(BUNDLED, tmp_path_factory.mktemp("bundled") / "run", progress=False,
                               log=lambda s: None)


@pytest.fixture
def orin_jp6(tmp_path) -> FakeBoard:
    """A fake JetPack 6 AGX Orin in MAXN (11 levels, 306 ... 1300.5 MHz)."""
    return build_board(tmp_path / "orin-jp6", "agx-orin-jp6")


@pytest.fixture(params=sorted(PROFILES))
def any_board(request, tmp_path) -> FakeBoard:
    """Every board profile in turn."""
    return build_board(tmp_path / request.param, request.param)


@pytest.fixture
def fake_kernel_env(monkeypatch) -> None:
    """Inject the fake kernel into code that opens sysfs by root (``dvfslab`` commands, sub-processes)."""
    monkeypatch.setenv("DVFSLAB_SYSFS_IO", FAKE_KERNEL_IO)
