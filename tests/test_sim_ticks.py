"""Bulk sampling on the simulated board (``on_ticks`` -> ``read_ticks`` -> ``PowerSampler.extend``)
gives the same samples as one ``sample_once`` per tick, and the one-pass step integral agrees
with the sampler's window integral."""

from __future__ import annotations

import numpy as np
import pytest

from dvfslab.core.errors import DvfsError
from dvfslab.measure.energy import integrate_intervals, integrate_window
from dvfslab.measure.sampler import PowerSampler
from dvfslab.sim.backend import open_backend
from dvfslab.sim.model import SimWorkload


def _session(lock: float | None, bulk: bool):
    """Idle, a measured training window, idle again; every tick sampled one way or the other."""
    backend = open_backend(seed=2)
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False).start()
    if lock is not None:
        backend.clocks.lock(lock)
    board, tick = backend.board, {"tick_s": 0.05}
    if bulk:
        tick["on_ticks"] = lambda ticks: sampler.extend(**backend.power.read_ticks(ticks))
    else:
        tick["on_tick"] = lambda _t: sampler.sample_once()
    board.idle(3.0, **tick)
    sampler.begin_window("train")
    board.train(SimWorkload.from_catalog("bert-base", "mrpc"), 30, run_key="k", **tick)
    m = sampler.end_window("train")
    board.idle(2.0, **tick)
    return sampler.samples(), m, board.temperature_c()


@pytest.mark.parametrize("lock", [714.0, None], ids=["fixed", "maxn"])
def test_bulk_ticks_give_the_samples_of_one_read_per_tick(lock):
    per_tick, m_a, temp_a = _session(lock, bulk=False)
    bulk, m_b, temp_b = _session(lock, bulk=True)
    assert list(bulk.columns) == list(per_tick.columns) and len(bulk) == len(per_tick) > 100
    np.testing.assert_allclose(bulk.to_numpy(), per_tick.to_numpy(), rtol=0, atol=1e-9)  # noise included
    assert m_b.energy_j == pytest.approx(m_a.energy_j, rel=1e-12)
    assert abs(m_b.n_samples - m_a.n_samples) <= 1  # a tick on the window edge, ± rounding of its time
    assert temp_b == pytest.approx(temp_a, abs=1e-9)
    if lock is None:
        assert bulk["gpu_freq_mhz"].nunique() > 1  # the governor moved the clock during the run


def test_on_tick_and_on_ticks_are_exclusive_and_ticks_must_be_positive():
    board = open_backend().board
    with pytest.raises(DvfsError, match="not both"):
        board.idle(1.0, on_tick=lambda t: None, on_ticks=lambda s: None)
    with pytest.raises(DvfsError, match="tick_s must be > 0"):
        board.train(SimWorkload.from_catalog("bert-small", "sst2"), 2, tick_s=0.0)


def test_extend_checks_time_order_and_rails_and_stores_nothing_on_error():
    backend = open_backend()
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False).start()
    rails = {r: np.array([1000.0, 1100.0]) for r in sampler.rails}
    assert sampler.extend(np.array([1.0, 2.0]), rails) == 2
    with pytest.raises(ValueError, match="must not decrease"):
        sampler.extend(np.array([1.5, 3.0]), rails)  # before the last stored sample
    with pytest.raises(ValueError, match="must not decrease"):
        sampler.extend(np.array([4.0, 3.0]), rails)
    with pytest.raises(KeyError):
        sampler.extend(np.array([5.0]), {sampler.rails[0]: np.array([1.0])})
    frame = sampler.samples()
    assert list(frame["t_s"]) == [1.0, 2.0] and "gpu_util_pct" not in frame


def test_one_pass_interval_integral_is_the_window_integral():
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.uniform(0.01, 0.1, 200))
    t[50] = t[49]  # a repeated timestamp, as an edge sample on a tick
    p = rng.uniform(5.0, 30.0, t.size)
    edges = np.sort(np.concatenate(([t[0] - 0.3], rng.uniform(t[0], t[-1], 40), [t[-1] + 0.2])))
    got = integrate_intervals(t, p, edges)
    want = [integrate_window(t, p, a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert got.sum() == pytest.approx(integrate_window(t, p, edges[0], edges[-1]), rel=1e-12)
