"""The digital twin's physics (not just its output) and its backend protocols."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dvfslab.core.errors import DvfsError
from dvfslab.core.jetson_modules import ModeCaps
from dvfslab.data.catalog import PAPER_MODELS
from dvfslab.hw import get_backend
from dvfslab.hw.base import (
    ClockControl,
    FrequencyCappedError,
    PowerReader,
    Telemetry,
    UnsupportedFrequencyError,
)
from dvfslab.sim.backend import open_backend
from dvfslab.sim.board import SimBoard
from dvfslab.sim.model import (
    AGX_ORIN_64GB,
    AGX_XAVIER,
    SimWorkload,
    emc_mhz,
    gpu_rail_w,
    step_table,
    voltage_v,
)
from dvfslab.sim.podgov import PodGovernor
from dvfslab.sweep.simulate import SimulationPlan

ORIN = AGX_ORIN_64GB
LEVELS = np.array(ORIN.levels_mhz)
ALL_ROWS = SimulationPlan().workloads()  # the paper's 81 workloads


def _table(row_or_wl, n=60, seed=0, profile=ORIN, levels=None):
    wl = row_or_wl if isinstance(row_or_wl, SimWorkload) else SimWorkload.from_row(row_or_wl)
    seq = wl.padded_lengths(np.random.default_rng(seed), n)
    return step_table(profile, wl, seq, LEVELS if levels is None else levels, first_step=False)


def _mean_over_steps(t):
    return t.time_s.mean(0), t.total_w.mean(0), (t.time_s * t.total_w).mean(0), t.util.mean(0)


@pytest.mark.parametrize("profile", [ORIN, AGX_XAVIER], ids=lambda p: p.name)
def test_time_falls_and_power_rises_with_frequency_for_every_workload(profile):
    for row in ALL_ROWS:
        t = _table(row, profile=profile, levels=np.array(profile.levels_mhz))
        time_s, power_w, _, _ = _mean_over_steps(t)
        assert np.all(np.diff(time_s) < 0), row["workload_id"]
        assert np.all(np.diff(power_w) > 0), row["workload_id"]
        assert np.all(np.diff(t.gpu_w, axis=1) > 0)  # every step, not just on average


def test_deeper_and_longer_workloads_have_higher_utilization():
    seq = np.full(20, 40.0)

    def util(model, task, s=seq):
        return step_table(ORIN, SimWorkload.from_catalog(model, task), s, [1300.5]).util.mean()

    assert util("bert-medium", "sst2") > util("bert-small", "sst2")  # 8 vs 4 layers, same width
    assert util("bert-large", "sst2") > util("bert-base", "sst2")
    assert util("pythia-410m", "sst2") > util("pythia-160m", "sst2")
    for model in PAPER_MODELS:  # longer sequences, same model
        assert util(model, "rte", np.full(20, 120.0)) > util(model, "sst2", seq) > 0
    # utilization is an outcome: small models are partly CPU-bound at the top clock
    assert util("pythia-31m", "sst2") < 0.8 < util("pythia-1b", "sst2")


def test_utilization_rises_as_the_clock_falls():
    t = _table(SimWorkload.from_catalog("pythia-31m", "cola"))
    assert np.all(np.diff(t.util.mean(0)) < 0)


def test_minimum_energy_is_interior_for_the_large_models():
    large = [r for r in ALL_ROWS if r["params_m"] > 70]
    assert len(large) == 54
    for row in large:
        energy = _mean_over_steps(_table(row))[2]
        best = int(np.argmin(energy))
        assert 0 < best < len(LEVELS) - 1, (row["workload_id"], LEVELS[best])
        assert energy[-1] > 1.15 * energy[best]  # a real U, not a flat floor


def test_gpu_rail_at_top_level_on_the_largest_workload_is_inside_the_module_limit():
    biggest = max(ALL_ROWS, key=lambda r: (r["params_m"], r["avg_seq_len"]))
    t = _table(biggest, levels=np.array([1300.5]))
    gpu_w, total_w = t.gpu_w.max(), t.total_w.max()
    assert gpu_w < 40.0  # below the GPU stress-test figure (training switches less than a power virus)
    assert total_w < 60.0  # the 64GB module's limit
    assert gpu_w > 25.0  # and the big model does load the GPU


def test_voltage_has_a_floor_and_rises_linearly_above_it():
    v = voltage_v(ORIN, LEVELS)
    assert v[-1] == ORIN.v_max and v[0] == pytest.approx(1.0 - ORIN.v_slope_per_mhz * (1300.5 - 306.0), rel=1e-12)
    assert float(voltage_v(ORIN, 100.0)) == ORIN.v_min  # the floor lies under the lowest level
    assert np.all(np.diff(v) >= 0) and np.all(np.diff(v[1:]) > 0)


def test_podgov_ramps_to_the_cap_under_load_and_down_under_light_load():
    gov = PodGovernor(ORIN.levels_mhz, 1300.5)
    f = gov.fmin
    for _ in range(10):
        f = gov.decide(1.0, f)
    assert f == 1300.5
    for _ in range(60):
        f = gov.decide(0.30, f)
    assert f < 900


def test_podgov_skip_is_the_closed_form_of_busy_polls():
    a, b = PodGovernor(ORIN.levels_mhz, 1300.5), PodGovernor(ORIN.levels_mhz, 1300.5)
    for _ in range(17):
        assert a.decide(0.97, 1300.5) == 1300.5
    b.skip_busy(17, 0.97, 1300.5)
    assert (b.cycles_avg, b.freq_avg) == pytest.approx((a.cycles_avg, a.freq_avg), rel=1e-12)


def test_maxn_runs_a_gpu_bound_workload_at_the_top_and_a_cpu_bound_one_lower():
    board = SimBoard(seed=1)
    big = board.train(SimWorkload.from_catalog("pythia-1b", "sst2"), 30)
    board.idle(60)
    small = board.train(SimWorkload.from_catalog("pythia-31m", "cola"), 300)
    assert big.mean_gpu_freq_mhz > 1250
    assert small.mean_gpu_freq_mhz < 900
    assert np.all(np.isin(np.unique(board.governor.levels), ORIN.levels_mhz))


def test_a_locked_run_is_the_same_with_and_without_sampler_ticks():
    wl = SimWorkload.from_catalog("bert-base", "mrpc")
    plain, ticked = SimBoard(seed=4), SimBoard(seed=4)
    plain.lock(714)
    ticked.lock(714)
    a = plain.train(wl, 40, run_key="k")
    ticks = []
    b = ticked.train(wl, 40, run_key="k", on_tick=ticks.append, tick_s=0.05)
    np.testing.assert_allclose(a.step_time_s, b.step_time_s, rtol=1e-9)
    np.testing.assert_allclose(a.step_energy_j, b.step_energy_j, rtol=1e-9)
    assert len(ticks) == pytest.approx(a.time_s / 0.05, abs=1)
    assert plain.now() == pytest.approx(ticked.now())


def test_idling_with_and_without_sampler_ticks_cools_the_board_the_same():
    wl = SimWorkload.from_catalog("pythia-1b", "qnli")
    plain, ticked = SimBoard(seed=4), SimBoard(seed=4)
    for board in (plain, ticked):
        board.lock(1300.5)
        board.train(wl, 40, run_key="k")
    hot = plain.temperature_c()
    assert ticked.temperature_c() == hot and hot > 60.0
    ticks = []
    plain.idle(90.0)
    ticked.idle(90.0, on_tick=ticks.append, tick_s=0.05)
    assert len(ticks) == pytest.approx(90.0 / 0.05, abs=1) and ticked.now() == plain.now()
    assert ticked.temperature_c() == pytest.approx(plain.temperature_c(), abs=1e-9)
    assert plain.temperature_c() < hot - 20.0  # 1.5 thermal time constants of cooling


@pytest.mark.parametrize("lock", [612.0, None], ids=["fixed", "maxn"])
def test_sampled_rails_integrate_to_the_model_energy(lock):
    backend = open_backend(seed=2)
    board, reader = backend.board, backend.power
    if lock:
        backend.clocks.lock(lock)
    t, p = [], []

    def tick(_t):
        s = reader.read()
        t.append(s.t_s)
        p.append(s.total_mw(reader.total_rails) / 1000.0)

    result = board.train(SimWorkload.from_catalog("bert-small", "qnli"), 150, on_tick=tick, tick_s=0.01)
    sampled_j = float(np.trapezoid(p, t))
    covered = result.step_energy_j.sum() * (t[-1] - t[0]) / result.time_s
    assert sampled_j == pytest.approx(covered, rel=0.01)
    assert t[0] >= result.t_start_s and t[-1] <= result.t_end_s == backend.clock()


def test_power_sampler_on_the_virtual_clock_agrees_with_the_model():
    from dvfslab.measure import sampler as power
    backend = open_backend(seed=5)
    backend.clocks.lock(816)
    sampler = power.PowerSampler(backend.power, period_s=0.01, clock=backend.clock, threaded=False)
    with sampler:
        sampler.begin_window("run")
        result = backend.board.train(SimWorkload.from_catalog("pythia-70m", "rte"), 80,
                                     on_tick=lambda _t: sampler.sample_once(), tick_s=0.01)
        m = sampler.end_window("run")
    assert m.time_s == pytest.approx(result.time_s, rel=1e-6)
    assert m.energy_j == pytest.approx(result.energy_j, rel=0.01)


def test_same_seed_same_numbers_and_batches_shared_across_levels():
    wl = SimWorkload.from_catalog("bert-small", "sst2")
    runs = []
    for seed in (7, 7, 8):
        board = SimBoard(seed=seed)
        board.lock(510)
        runs.append(board.train(wl, 30, run_key="fixed/510/0"))
    np.testing.assert_array_equal(runs[0].step_energy_j, runs[1].step_energy_j)
    assert not np.array_equal(runs[0].step_energy_j, runs[2].step_energy_j)
    board = SimBoard(seed=7)
    a, b = (board._table(wl, 30, key) for key in ("fixed/510/0", "fixed/510/1"))
    assert not np.array_equal(a.time_s, b.time_s)  # run-to-run noise ...
    np.testing.assert_array_equal(a.bytes_per_step, b.bytes_per_step)  # ... on the same batches


def test_backend_implements_the_protocols_on_a_virtual_clock():
    backend = get_backend("sim", seed=3, sysfs_root="/ignored")
    assert backend.name == "sim" and backend.description["simulated"] is True
    assert backend.simulated is True and backend.virtual_time is True  # typed, for the sweep and the lab
    assert isinstance(backend.clocks, ClockControl)
    assert isinstance(backend.power, PowerReader)
    assert isinstance(backend.telemetry, Telemetry)
    assert backend.power.total_rails == ("VDD_GPU_SOC", "VDD_CPU_CV")
    assert backend.clocks.levels_mhz() == list(ORIN.levels_mhz)
    state = backend.clocks.lock(1224)
    assert state.locked and state.cur_freq_mhz == 1224
    before = backend.clock()
    backend.board.train(SimWorkload.from_catalog("bert-base", "sst2"), 20)
    assert backend.clock() > before + 5  # virtual seconds, instantly
    assert backend.telemetry.temperatures_c()["gpu-thermal"] > ORIN.ambient_c
    sample = backend.power.read()
    assert set(sample.power_mw) == set(backend.power.rails) and sample.t_s == backend.clock()
    backend.close()
    assert not backend.clocks.state().locked


def test_clock_errors():
    board = SimBoard(power_mode="MODE_30W")
    with pytest.raises(UnsupportedFrequencyError):
        board.lock(700)
    with pytest.raises(FrequencyCappedError, match="MODE_30W"):
        board.lock(816)
    assert board.lock(612) == 612
    board.unlock()
    run = board.train(SimWorkload.from_catalog("pythia-410m", "rte"), 10)
    assert run.mean_gpu_freq_mhz <= 612  # the governor respects the mode's cap
    with pytest.raises(DvfsError, match="n_steps >= 1"):
        board.train(SimWorkload.from_catalog("pythia-410m", "rte"), 0)


def test_workload_outside_the_catalog():
    row = {"workload_id": "my-encoder/sst2", "model": "my-encoder", "n_layers": 10, "hidden_size": 640,
           "params_m": 70.0, "avg_seq_len": 20.0, "max_seq_len": 128, "batch_size": 16, "task": "sst2"}
    wl = SimWorkload.from_row(row)
    assert (wl.n_heads, wl.ffn_size, wl.params_total) == (10, 2560, 70e6)
    bigger = SimWorkload.from_row(dict(row, n_layers=20))
    seq = np.full(5, 30.0)
    assert step_table(ORIN, bigger, seq, [918]).time_s.mean() > step_table(ORIN, wl, seq, [918]).time_s.mean()


def test_noise_comes_only_from_the_stated_sigmas_and_the_first_step_warms_up():
    quiet = dataclasses.replace(ORIN, sigma_run_cpu=0.0, sigma_run_gpu=0.0, sigma_run_power=0.0, sigma_step_cpu=0.0)
    wl = SimWorkload.from_catalog("bert-large", "mrpc")
    board = SimBoard(quiet, seed=0)
    board.lock(306)
    a, b = board.train(wl, 12, run_key="a"), board.train(wl, 12, run_key="b")
    np.testing.assert_array_equal(a.step_time_s, b.step_time_s)  # same batches and no noise
    seq = wl.padded_lengths(np.random.default_rng(1), 12)
    warm, cold = (step_table(quiet, wl, seq, [306], first_step=f).time_s[:, 0] for f in (True, False))
    assert warm[0] - cold[0] == pytest.approx(quiet.first_step_extra_s)
    np.testing.assert_array_equal(warm[1:], cold[1:])


# -- closed forms, computed by hand from the model as docs/calibration.md states it ----------------

# A board whose every term is easy to follow by hand: constant voltage, no size efficiency loss,
# no kernel floor, no launch cost, no noise; 1 TFLOP/s at 1000 MHz, DRAM at 20.672 GB/s above 500 MHz.
TOY = dataclasses.replace(
    ORIN, board=dataclasses.replace(ORIN.board, key="toy", gpu_levels_mhz=(500.0, 1000.0), emc_levels_mhz=(1000.0,),
                                    modes=(ModeCaps(0, "MAXN"),)),
    gemm_flops_at_fmax=1e12, gemm_half_dim=0.0, gemm_half_rows=0.0, dram_bw_gbs=20.672, bw_sat_mhz=500.0,
    kernel_min_us_at_fmax=0.0, emc_idle_mhz=1000.0, emc_w_per_ghz=0.0,
    cpu_op_us=0.0, ops_per_tensor_optimizer=0.0, cpu_step_serial_ms=10.0,
    first_step_extra_s=0.5, v_max=1.0, v_min=1.0, soc_idle_w=3.0, gpu_leak_w_at_vmax=2.0, gpu_clock_w_at_fmax=0.0,
    gpu_dyn_w_at_fmax=30.0, activity_matmul=1.0, activity_memory=1.0, activity_kernel_overhead=1.0,
    soc_pj_per_byte=0.0, dram_pj_per_byte=0.0, cpu_idle_w=1.0, cpu_cluster_w=0.0, cpu_core_w_at_max=1.0,
    cpu_busy_cores_training=1.0, cpu_clusters_training=0.0, sigma_run_cpu=0.0, sigma_run_gpu=0.0, sigma_run_power=0.0,
    sigma_step_cpu=0.0, sensor_sigma=0.0)
# one layer, width 64, one head, no FFN, 5e8 matmul parameters; batch 1 padded to exactly 2 tokens
TINY = SimWorkload("toy/tiny", n_layers=1, hidden_size=64, n_heads=1, ffn_size=0, params_total=0.0,
                   matmul_params=5e8, param_tensors=0, avg_seq_len=2.0, max_seq_len=2, batch_size=1)
# per step, by hand: matmuls 6·5e8·2 FLOP = 6 ms at 1000 MHz; attention 12·1·2·2·64 FLOP = 3.072 ns;
# bytes (40·64 + 12·1·2)·4·1·2 = 20672 B at 20.672 GB/s = 1 µs (both levels are >= bw_sat_mhz)
T_GPU_S = {1000.0: 6e-3 + 3.072e-9 + 1e-6, 500.0: 12e-3 + 6.144e-9 + 1e-6}
T_SERIAL_S = 0.010


@pytest.mark.parametrize("freq_mhz", [1000.0, 500.0])
@pytest.mark.parametrize("ticked", [False, True], ids=["closed-form-path", "event-loop-path"])
def test_energy_of_a_fixed_level_run_is_the_integral_of_the_stated_power(freq_mhz, ticked):
    """T = t_serial + t_gpu (no launch cost); util = t_gpu/T, activity = util, so per step
    E = (P_soc + P_leak + P_cpu)·T + P_dyn·(f/f_max)·t_gpu with 3 + 2 + 2 W static and 30 W dynamic."""
    board = SimBoard(TOY, seed=0)
    board.lock(freq_mhz)
    kw = {"on_tick": lambda _t: None, "tick_s": 0.003} if ticked else {}
    n, t_gpu = 4, T_GPU_S[freq_mhz]
    res = board.train(TINY, n, run_key="k", **kw)
    time_s = n * (T_SERIAL_S + t_gpu) + 0.5  # + the first step's warm-up
    assert res.time_s == pytest.approx(time_s, rel=1e-12)
    assert res.energy_cpu_j == pytest.approx(2.0 * time_s, rel=1e-12)
    assert res.energy_gpu_j == pytest.approx(5.0 * time_s + n * 30.0 * (freq_mhz / 1000.0) * t_gpu, rel=1e-12)
    assert res.gpu_util_pct == pytest.approx(100.0 * n * t_gpu / time_s, rel=1e-12)
    assert board.now() == pytest.approx(time_s, rel=1e-12)


def test_step_time_follows_serial_plus_compute_over_clock_plus_memory():
    """Halving the clock doubles the compute part only: T(500) − T(1000) = 6 ms + 3.072 ns
    (t_serial and the memory time, both levels at or above bw_sat_mhz, stay)."""
    board = SimBoard(TOY)
    times = {}
    for f in (1000.0, 500.0):
        board.lock(f)
        times[f] = board.train(TINY, 3, run_key="law").step_time_s[1:]  # past the warm-up step
    np.testing.assert_allclose(times[500.0] - times[1000.0], 6e-3 + 3.072e-9, rtol=1e-9)
    np.testing.assert_allclose(times[1000.0], T_SERIAL_S + T_GPU_S[1000.0], rtol=1e-12)


def test_idle_power_is_the_floor_of_a_rail_gated_gpu_cold_or_hot():
    """An idle board: GPU rail-gated, EMC at 2133 MHz, so VDD_GPU_SOC is the SoC floor and
    VDD_CPU_CV the CPU's idle power (both fitted to the idle tegrastats lines of 64GB modules),
    whatever level is locked; the temperature does not feed back on power."""
    board = SimBoard(seed=0)
    floor = ORIN.soc_idle_w
    assert 2.340 <= floor <= 2.399  # between the two idle lines it was fitted to
    assert board.freq_mhz == 306.0
    assert board.power_w()["VDD_GPU_SOC"] == floor
    assert board.power_w()["VDD_CPU_CV"] == ORIN.cpu_idle_w
    board.lock(612)
    assert board.power_w()["VDD_GPU_SOC"] == floor
    board.train(SimWorkload.from_catalog("pythia-1b", "qnli"), 40, run_key="heat")
    assert board.temperature_c() > 40.0
    assert board.power_w()["VDD_GPU_SOC"] == floor  # hot, same idle power


def test_clocked_gpu_power_by_hand():
    """A powered GPU at 612 MHz, activity 0.5, no traffic: P_soc + k_emc·(2133 − 2133)/1000 +
    P_leak·v³ + (P_clk + P_dyn·0.5)·v²·612/1300.5 with v = 1 − slope·(1300.5 − 612) (the EMC
    follows the GPU clock: 3199·612/1300.5 = 1505 MHz rounds up to the 2133 MHz level)."""
    p = ORIN
    v = 1.0 - p.v_slope_per_mhz * 688.5
    want = (p.soc_idle_w + p.gpu_leak_w_at_vmax * v**3
            + (p.gpu_clock_w_at_fmax + p.gpu_dyn_w_at_fmax * 0.5) * v**2 * 612.0 / 1300.5)
    assert float(emc_mhz(ORIN, 612.0)) == 2133.0 and float(emc_mhz(ORIN, 1300.5)) == 3199.0
    got = gpu_rail_w(ORIN, 612.0, 0.5, emc=emc_mhz(ORIN, 612.0))
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_temperature_relaxes_exponentially_to_ambient_plus_r_times_power():
    """First-order RC: from 25 °C at constant idle power P, after one time constant (60 s)
    T = 25 + 1.2 °C/W·P·(1 − 1/e); after another 120 s, T∞ + (T − T∞)·e⁻²."""
    board = SimBoard(seed=0)
    p_w = ORIN.soc_idle_w + ORIN.cpu_idle_w  # idle: floor of the GPU rail (GPU rail-gated) + CPU rail
    t_inf = 25.0 + 1.2 * p_w
    board.idle(60.0)
    t1 = 25.0 + 1.2 * p_w * (1.0 - np.exp(-1.0))
    assert board.temperature_c() == pytest.approx(t1, rel=1e-12)
    board.idle(120.0, on_tick=lambda _t: None, tick_s=0.7)  # ticks split the interval: same result
    assert board.temperature_c() == pytest.approx(t_inf + (t1 - t_inf) * np.exp(-2.0), rel=1e-12)
    assert board.now() == 180.0


def test_podgov_one_poll_by_hand():
    """nvhost_podgov's arithmetic (L4T r36 governor_pod_scaling.c), worked through by hand (cap 1300.5, smooth 10)."""
    gov = PodGovernor(ORIN.levels_mhz, 1300.5)
    # load 1.0 > 90 %: undamped boost of cap/3 = 433.5 -> 306 + 433.5 = 739.5, rounded up to 816
    assert gov.decide(1.0, 306.0) == 816.0
    gov.cycles_avg, gov.freq_avg, gov.since_change_s = 0.8 * 816.0, 816.0, 1.0
    # cycles_avg stays 652.8 (busyness 0.8); boost 0.8·816·(0.8 − 0.7)/0.7 = 93.257 -> request 909.257;
    # freq_avg (10·816 + 909.257)/11 = 824.478; damped (7·909.257 + 3·824.478)/10 = 883.82 -> 918
    assert gov.decide(0.8, 816.0) == 918.0
    assert gov.cycles_avg == pytest.approx(652.8)
    assert gov.freq_avg == pytest.approx((10 * 816.0 + 816.0 + 0.8 * 816.0 * 0.1 / 0.7) / 11)
