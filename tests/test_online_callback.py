"""The online governor live, as a Trainer callback, on the fake JetPack 6 AGX Orin tree.

A fake training loop calls the callback's hooks like a ``Trainer``; each "step" sleeps for
``T(f) = 0.02 + 12 / f`` s while the fake rails draw ``P(f)`` W, with ``f`` the level the
kernel files say is locked — so the measured energies trace a U-curve with a known minimum.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("transformers")

from test_cli_hardware import ORIGINAL, limits  # noqa: E402

from dvfslab.governors.online import OnlineProfiler  # noqa: E402
from dvfslab.harness.online_callback import OnlineDvfsCallback  # noqa: E402
from dvfslab.hw.base import DvfsError  # noqa: E402
from dvfslab.hw.jetson.backend import open_backend  # noqa: E402

LEVELS = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


def step_time_s(f: float) -> float:
    return 0.02 + 12.0 / f


def power_w(f: float) -> float:
    return 4.0 + 0.004 * f + 6e-6 * f * f


class _State:
    global_step = 0


def fake_training(board, cb: OnlineDvfsCallback, n_steps: int, fail_at: int | None = None) -> list[float]:
    """Drive the hooks like a Trainer; return the level the kernel files showed at each step."""
    seen = []
    state = _State()
    cb.on_train_begin(None, state, None)
    try:
        for i in range(n_steps):
            cb.on_step_begin(None, state, None)
            f = board.state()["cur_freq_hz"] / 1e6
            seen.append(f)
            board.set_rail("VDD_GPU_SOC", 700.0 * power_w(f))
            board.set_rail("VDD_CPU_CV", 300.0 * power_w(f))
            if i == fail_at:
                raise RuntimeError("training blew up")
            time.sleep(step_time_s(f))
            state.global_step += 1
            cb.on_step_end(None, state, None)
        cb.on_train_end(None, state, None)
    finally:
        cb.close()
    return seen


@pytest.fixture
def backend(orin_jp6, tmp_path):
    orin_jp6.set_rail("VDD_GPU_SOC", 5000.0)
    orin_jp6.set_rail("VDD_CPU_CV", 2000.0)
    return open_backend(io=orin_jp6.io(), state_dir=tmp_path / "state")


def test_probes_locks_the_minimum_and_restores(orin_jp6, backend):
    truth = min(LEVELS, key=lambda f: power_w(f) * step_time_s(f))
    cb = OnlineDvfsCallback(backend, sample_period_s=0.002)
    n = cb.profiler.profiling_steps
    seen = fake_training(orin_jp6, cb, n + 4)
    assert seen[:n] == cb.levels_by_step[:n] == cb.profiler.schedule  # each step ran where the profiler asked
    chosen = cb.profiler.chosen_mhz
    assert seen[n:] == [chosen] * 4  # then the chosen level, for the rest of training
    assert abs(LEVELS.index(chosen) - LEVELS.index(truth)) <= 1, (chosen, truth)
    assert len(cb.profiler.observed) == n and all(e > 0 for _, e, _ in cb.profiler.observed)
    assert limits(orin_jp6) == ORIGINAL and not cb.sampler.running


def test_a_failing_step_still_restores_the_clocks(orin_jp6, backend):
    cb = OnlineDvfsCallback(backend, OnlineProfiler(LEVELS, coarse_steps=1, fine_steps=1), sample_period_s=0.002)
    with pytest.raises(RuntimeError, match="blew up"):
        fake_training(orin_jp6, cb, 10, fail_at=3)
    assert limits(orin_jp6) == ORIGINAL and not cb.sampler.running
    cb.close()  # idempotent


def test_refuses_a_backend_without_clocks_or_power(backend):
    from dvfslab.hw.base import Backend

    with pytest.raises(DvfsError, match="no GPU clock control"):
        OnlineDvfsCallback(Backend(name="none"))
    with pytest.raises(DvfsError, match="no power reader"):
        OnlineDvfsCallback(Backend(name="clocks-only", clocks=backend.clocks))


def test_inside_a_real_trainer_with_a_tiny_model(orin_jp6, backend):
    pytest.importorskip("torch")
    from test_finetune import QUICK, TINY_BERT, ClockSpy

    from dvfslab.harness.finetune import finetune

    prof = OnlineProfiler(LEVELS, coarse_steps=1, fine_steps=1)  # 1 + 5 + 3 = 9 probing steps
    cb, spy = OnlineDvfsCallback(backend, prof, sample_period_s=0.005), ClockSpy(orin_jp6)
    try:
        res = finetune(TINY_BERT, "synthetic:sst2", backend=backend, steps=prof.profiling_steps + 2,
                       callbacks=[cb, spy], **QUICK)
    finally:
        cb.close()
    at_step_end = [s["cur_freq_hz"] / 1e6 for s in spy.states]
    assert at_step_end[:9] == prof.schedule and at_step_end[9:] == [prof.chosen_mhz] * 2
    assert prof.done and res.run["status"] == "ok"
    assert limits(orin_jp6) == ORIGINAL
