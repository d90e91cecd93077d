"""Pure energy integration: analytic signals, exactness, properties, windows, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvfslab.core.errors import DvfsError
from dvfslab.measure.energy import (
    EnergyInputError,
    SampleArrays,
    clip_window,
    integrate_energy,
    integrate_rails,
    integrate_window,
    measure_window,
)

DEFAULT_PERIOD_S = 0.010  # the sampler's default when the reader exposes no update interval
T0_S, T1_S = 0.0137, 9.9871  # window edges that fall between samples


def jittered_times(period_s: float, t_end_s: float, seed: int, jitter: float = 0.3) -> np.ndarray:
    """Sample times every ``period_s`` with uniform jitter of ±``jitter`` periods, covering the window."""
    rng = np.random.default_rng(seed)
    k = np.arange(-1, int(t_end_s / period_s) + 2)
    return k * period_s + rng.uniform(-jitter, jitter, k.size) * period_s


def square_high_time(t_s: float, period_s: float) -> float:
    """Time spent in the high half of a 50 % square wave (high first) over [0, t_s]."""
    n, rest = divmod(t_s, period_s)
    return n * period_s / 2 + min(rest, period_s / 2)


# name -> (power in W as a function of t, exact integral over [a, b])
SIGNALS = {
    "constant": (lambda t: np.full_like(t, 12.5), lambda a, b: 12.5 * (b - a)),
    "ramp": (lambda t: 5 + 2 * t, lambda a, b: 5 * (b - a) + (b**2 - a**2)),
    "step": (lambda t: np.where(t < 3.33, 5.0, 20.0),
             lambda a, b: 5 * (3.33 - a) + 20 * (b - 3.33)),
    "sine": (lambda t: 10 + 5 * np.sin(2 * np.pi * 0.7 * t),
             lambda a, b: 10 * (b - a) + 5 / (2 * np.pi * 0.7)
             * (np.cos(2 * np.pi * 0.7 * a) - np.cos(2 * np.pi * 0.7 * b))),
    "square": (lambda t: np.where(np.mod(t, 1.0) < 0.5, 15.0, 5.0),
               lambda a, b: 5 * (b - a) + 10 * (square_high_time(b, 1.0) - square_high_time(a, 1.0))),
}


@pytest.mark.parametrize("name", sorted(SIGNALS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_analytic_signals_within_half_percent_at_default_rate(name, seed):
    power, exact = SIGNALS[name]
    t = jittered_times(DEFAULT_PERIOD_S, T1_S, seed)
    energy = integrate_window(t, power(t), T0_S, T1_S)
    want = exact(T0_S, T1_S)
    assert abs(energy - want) / want < 0.005, (name, energy, want)


def test_square_wave_error_obeys_the_per_edge_bound():
    """Each power step costs at most ΔP·Δt/2 with the trapezoid; check the bound, not only 0.5 %."""
    power, exact = SIGNALS["square"]
    t = jittered_times(DEFAULT_PERIOD_S, T1_S, seed=7, jitter=0.45)
    err = abs(integrate_window(t, power(t), T0_S, T1_S) - exact(T0_S, T1_S))
    n_edges = 2 * 10
    assert err <= n_edges * 10.0 * np.max(np.diff(t)) / 2
    assert err > 0  # jittered edges are not hit exactly: the check above is not vacuous


def test_right_endpoint_rectangle_is_worse_than_trapezoid_on_a_ramp():
    """The rule zeus uses on Jetson (power at the end of the interval × dt) is biased on a ramp."""
    power, exact = SIGNALS["ramp"]
    t = np.arange(0.0, 10.0 + 1e-9, 0.1)
    p = power(t)
    rectangle = float(np.sum(p[1:] * np.diff(t)))
    trapezoid = integrate_energy(t, p)
    want = exact(0.0, 10.0)
    assert trapezoid == pytest.approx(want, rel=1e-12)
    assert abs(rectangle - want) > 0.005 * want


def hinge(t, a0, breaks, slopes):
    """Piecewise-linear f(t) = a0 + Σ c_i · max(0, t − b_i)."""
    t = np.asarray(t, dtype=float)
    return a0 + sum(c * np.maximum(0.0, t - b) for b, c in zip(breaks, slopes, strict=True))


def hinge_integral(a, b, a0, breaks, slopes):
    """Exact integral of :func:`hinge` over [a, b] (closed form, independent of the trapezoid)."""
    total = a0 * (b - a)
    for bi, c in zip(breaks, slopes, strict=True):
        total += c * (max(0.0, b - bi) ** 2 - max(0.0, a - bi) ** 2) / 2
    return total


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.floats(0.01, 2.0), min_size=1, max_size=12),
    slopes=st.lists(st.floats(-5.0, 5.0), min_size=12, max_size=12),
    a0=st.floats(0.0, 50.0),
    cut=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)),
)
def test_piecewise_linear_sampled_at_breakpoints_is_exact(steps, slopes, a0, cut):
    breaks = np.cumsum(steps)
    slopes = slopes[: len(breaks)]
    t = np.concatenate(([0.0], breaks, [breaks[-1] + 1.0]))
    p = hinge(t, a0, breaks, slopes)
    lo, hi = sorted(cut)
    t0, t1 = lo * t[-1], hi * t[-1]
    got = integrate_window(t, p, t0, t1)
    want = hinge_integral(t0, t1, a0, breaks, slopes)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


times = st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=40).map(lambda d: np.cumsum(d))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), t=times)
def test_energy_is_additive_over_adjacent_windows(data, t):
    p = np.array(data.draw(st.lists(st.floats(0.0, 100.0), min_size=t.size, max_size=t.size)))
    a, b, c = sorted(data.draw(st.lists(st.floats(-1.0, 45.0), min_size=3, max_size=3)))
    whole = integrate_window(t, p, a, c)
    parts = integrate_window(t, p, a, b) + integrate_window(t, p, b, c)
    assert parts == pytest.approx(whole, rel=1e-9, abs=1e-9)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), t=times, k=st.floats(0.0, 1e3))
def test_scaling_power_scales_energy(data, t, k):
    p = np.array(data.draw(st.lists(st.floats(0.0, 100.0), min_size=t.size, max_size=t.size)))
    assert integrate_energy(t, k * p) == pytest.approx(k * integrate_energy(t, p), rel=1e-9, abs=1e-9)
    assert integrate_window(t, k * p, t[0], t[-1]) == pytest.approx(k * integrate_energy(t, p), rel=1e-9, abs=1e-9)


def test_edges_interpolate_instead_of_dropping_partial_intervals():
    t = np.array([0.0, 1.0, 2.0])
    p = np.array([0.0, 10.0, 10.0])
    tt, pp = clip_window(t, p, 0.5, 1.5)
    assert tt.tolist() == [0.5, 1.0, 1.5]
    assert pp.tolist() == [5.0, 10.0, 10.0]
    assert integrate_window(t, p, 0.5, 1.5) == pytest.approx(3.75 + 5.0)


def test_window_beyond_samples_holds_the_nearest_reading():
    t, p = np.array([1.0, 2.0]), np.array([4.0, 6.0])
    assert integrate_window(t, p, 0.0, 3.0) == pytest.approx(4.0 + 5.0 + 6.0)
    assert integrate_window([1.0], [7.0], 0.0, 2.0) == pytest.approx(14.0)


def test_fewer_than_two_samples_span_no_energy():
    assert integrate_energy([], []) == 0.0
    assert integrate_energy([3.0], [5.0]) == 0.0


@pytest.mark.parametrize(
    "t, p, match",
    [
        ([0.0, 1.0], [1.0], "shape"),
        ([0.0, 2.0, 1.0], [1.0, 1.0, 1.0], "decrease at index 2"),
        ([0.0, 1.0], [1.0, math.nan], "NaN"),
    ],
)
def test_bad_arrays_are_clear_errors(t, p, match):
    with pytest.raises(EnergyInputError, match=match):
        integrate_energy(t, p)


def test_bad_windows_are_clear_errors():
    with pytest.raises(EnergyInputError, match="not an interval"):
        integrate_window([0.0, 1.0], [1.0, 1.0], 1.0, 0.5)
    with pytest.raises(EnergyInputError, match="no samples"):
        integrate_window([], [], 0.0, 1.0)
    assert issubclass(EnergyInputError, DvfsError)


def test_rails_in_mw_give_joules_per_rail_and_per_window():
    t = np.array([0.0, 1.0, 2.0])
    rails = {"VDD_GPU_SOC": [1000.0, 3000.0, 3000.0], "VDD_CPU_CV": [500.0] * 3, "VIN_SYS_5V0": [9e3] * 3}
    by_rail = integrate_rails(t, rails)
    assert by_rail == pytest.approx({"VDD_GPU_SOC": 5.0, "VDD_CPU_CV": 1.0, "VIN_SYS_5V0": 18.0})
    # window 0.5 .. 2 s: GPU 0.5 s x (2 + 3) / 2 W + 1 s x 3 W = 4.25 J, CPU 1.5 s x 0.5 W = 0.75 J
    window = integrate_rails(t, rails, 0.5, 2.0)
    assert (window["VDD_GPU_SOC"], window["VDD_CPU_CV"]) == (pytest.approx(4.25), pytest.approx(0.75))


def test_measure_window_fields():
    t = np.arange(0.0, 10.01, 0.5)
    gpu = 2000.0 + 100.0 * t  # mW, ramp
    cpu = np.full_like(t, 1000.0)
    samples = SampleArrays(
        t_s=t, rails_mw={"VDD_GPU_SOC": gpu, "VDD_CPU_CV": cpu, "VIN_SYS_5V0": cpu * 5},
        gpu_util_pct=np.where(t < 5, 20.0, np.nan), gpu_freq_mhz=np.full_like(t, 612.0),
        lost_t_s=np.array([0.7, 3.2, 11.0]),
    )
    m = measure_window(samples, 1.0, 4.0, ("VDD_GPU_SOC", "VDD_CPU_CV"), name="w", idle_power_w=2.5)
    # GPU 2 + 0.1 t W over [1, 4]: 2 * 3 + 0.1 * (4² - 1²) / 2 = 6.75 J; CPU 1 W * 3 s = 3 J
    assert m.name == "w" and m.time_s == pytest.approx(3.0)
    assert m.energy_by_rail_j["VDD_GPU_SOC"] == pytest.approx(6.75)
    assert m.energy_j == pytest.approx(9.75)
    assert m.avg_power_w == pytest.approx(3.25)  # 9.75 J / 3 s
    assert m.peak_power_w == pytest.approx(2.4 + 1.0)
    assert m.n_samples == 7 and m.rate_hz == pytest.approx(2.0)
    assert m.n_lost == 1
    assert m.idle_power_w == 2.5 and m.energy_above_idle_j == pytest.approx(2.25)  # 9.75 - 2.5 * 3
    assert m.gpu_util_pct == pytest.approx(20.0) and m.gpu_freq_mhz == pytest.approx(612.0)
    assert m.to_dict()["energy_by_rail_j"]["VDD_CPU_CV"] == pytest.approx(3.0)


def test_measure_window_on_a_piecewise_linear_trace_by_hand():
    """Samples (t s, W): (0, 2) (1, 6) (2, 6) (4, 0); window [0.5, 3] cuts between samples.

    Edges interpolate: P(0.5) = 4 W, P(3) = 3 W. Trapezoids: [0.5, 1] (4 + 6) / 2 * 0.5 = 2.5;
    [1, 2] 6 * 1 = 6; [2, 3] (6 + 3) / 2 * 1 = 4.5. Energy 13 J over 2.5 s: 5.2 W on average,
    6 W at the peak; the samples at t = 1 and 2 s lie inside (1 Hz between them).
    """
    t = np.array([0.0, 1.0, 2.0, 4.0])
    samples = SampleArrays(t_s=t, rails_mw={"GPU": np.array([2000.0, 6000.0, 6000.0, 0.0])})
    m = measure_window(samples, 0.5, 3.0, ("GPU",))
    assert m.energy_j == pytest.approx(13.0)
    assert m.avg_power_w == pytest.approx(5.2)
    assert m.peak_power_w == pytest.approx(6.0)
    assert m.n_samples == 2 and m.rate_hz == pytest.approx(1.0)


def test_measure_window_without_samples_is_nan_not_zero():
    empty = SampleArrays(t_s=np.empty(0), rails_mw={"A": np.empty(0)})
    m = measure_window(empty, 0.0, 1.0, ("A",))
    assert m.n_samples == 0 and math.isnan(m.energy_j) and math.isnan(m.rate_hz)
    assert m.gpu_util_pct is None and m.idle_power_w is None
