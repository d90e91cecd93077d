"""No traceback a user can reach (issue 30, item 4): Ctrl-C in the pipeline, a closed pipe.

Each test runs ``python -m dvfslab`` as a process and waits on what it reports (a progress
line), never on a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example"


def _env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _dvfslab(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dvfslab", *args], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def test_validate_into_a_closed_pipe_ends_quietly():
    """``dvfslab validate DIR | head -0``: the reader is gone before the first line."""
    proc = _dvfslab("validate", str(EXAMPLE))
    proc.stdout.close()  # what head -0 does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)  # 141 = 128 + SIGPIPE, as a shell shows for cat
    assert err == ""


def test_simulate_json_into_a_pipe_closed_after_600_bytes_ends_quietly():
    """``dvfslab simulate --workload bert-base/rte --json | head -c 600``."""
    proc = _dvfslab("simulate", "--workload", "bert-base/rte", "--json")
    head = proc.stdout.read(600)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)
    assert head.startswith(b"{") and len(head) == 600
    assert "Traceback" not in err and "BrokenPipe" not in err and err == ""


@pytest.mark.slow
def test_ctrl_c_in_the_pipeline_names_the_notebook_what_is_complete_and_the_rerun(tmp_path):
    out = tmp_path / "run"
    proc = _dvfslab("pipeline", "--data", str(EXAMPLE), "--out", str(out), "--quick", "--no-html", text=True)
    # not a terminal: one line per finished notebook on standard error; the first line means
    # notebook 01 is complete and the runner has gone on to 02
    seen = []
    while not seen or not seen[-1].startswith("[1/5] 01_characterization"):
        line = proc.stderr.readline()
        assert line, f"the pipeline exited with {proc.wait()} before notebook 01 finished: {''.join(seen)}"
        seen.append(line)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Task exception" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("dvfslab pipeline: interrupted during notebook 02_feature_engineering; "), last
    assert f"complete: 01_characterization (executed notebooks, figures and tables in {out}.incomplete)" in last
    assert last.endswith(f"rerun with: dvfslab pipeline --data {EXAMPLE} --out {out} --quick --no-html")
    # nothing half-written at --out; what was complete is kept beside it
    assert not out.exists()
    assert (Path(f"{out}.incomplete") / "01_characterization.ipynb").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
