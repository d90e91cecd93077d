"""One snapping rule end to end: decide -> run -> evaluate pick the same level on a tie.

On an AGX Orin (levels ... 612, 714 ...) a governor answering 663 MHz sits exactly half-way.
The devfreq core rounds a request up to the next level, so every stage must take 714 MHz: the
decision a board prints, the level the callback locks, and the level the replay charges.
Expected energies come from the hand-written rows of ``analysis_fixtures.TINY_RUNS``.
"""

from __future__ import annotations

import pytest
from analysis_fixtures import make_tiny_dataset

from dvfslab.analysis import feature_table, sweep_from_dataset
from dvfslab.data.contract import load_dataset
from dvfslab.evaluation.replay import replay
from dvfslab.governors.io import decide
from dvfslab.governors.tree import TreeGovernor
from dvfslab.harness.callback import DvfsCallback
from dvfslab.sim.backend import open_backend

ORIN_TABLE_MHZ = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


class _State:
    global_step = 0
    epoch = 0.0


def _leaf(level: float) -> TreeGovernor:
    """A one-leaf tree with no level table of its own: the raw answer reaches every stage."""
    gov = TreeGovernor()
    gov.knob_, gov.tree_ = "gpu_freq_mhz", {"features": [], "impute": {}, "nodes": [{"level": level}],
                                            "level_table": [], "info": {}}
    return gov


@pytest.mark.parametrize("answer_mhz, level_mhz", [(663.0, 714.0), (662.9, 612.0), (663.1, 714.0)])
def test_decide_run_and_evaluate_use_the_same_level(tmp_path, answer_mhz, level_mhz):
    governor = _leaf(answer_mhz)

    # decide: what `dvfslab govern` prints and locks
    assert decide(governor, {}, level_table=ORIN_TABLE_MHZ)[0] == level_mhz

    # run: the fine-tuning callback locks the simulated Orin (virtual time, nothing sleeps)
    backend = open_backend(seed=0)
    assert list(backend.clocks.levels_mhz()) == ORIN_TABLE_MHZ
    cb = DvfsCallback(backend, governor=governor)
    with cb:
        cb.on_train_begin(None, _State(), None)
        assert backend.clocks.state().cur_freq_mhz == level_mhz
        cb.on_train_end(None, _State(), None)

    # evaluate: the replay charges the hand-written run at that level
    sweep = sweep_from_dataset(load_dataset(make_tiny_dataset(tmp_path / "ds")))
    per = replay({"leaf": governor}, sweep, feature_table(sweep)).set_index("workload_id")
    assert (per["level"] == level_mhz).all()
    # big-dec/qnli: 714 -> (170 + 180) / 2 = 175 J; 612 -> (200 + 200) / 2 = 200 J
    assert per.loc["big-dec/qnli", "energy_j"] == pytest.approx({714.0: 175.0, 612.0: 200.0}[level_mhz])
