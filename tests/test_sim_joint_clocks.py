"""The twin with the other clocks as inputs (issue #32, item 4): EMC and CPU clocks. Simulated.

Expected values are worked by hand from the formulas of docs/calibration.md (section 1) with the
profile's parameters; the regression anchor's values were printed by the twin *before* the EMC and
CPU inputs existed (commit 470f0a0) and are written here as numbers: with both clocks left None the
twin must give exactly those (a regression anchor, not an independent truth).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dvfslab.cli import main
from dvfslab.core.errors import DvfsError
from dvfslab.sim.board import SimBoard
from dvfslab.sim.model import SimWorkload, step_table, work_rows
from dvfslab.sim.profiles import AGX_ORIN_64GB as ORIN
from dvfslab.sim.profiles import with_params
from dvfslab.sim.spec import WorkloadSpec, catalog_spec, evaluate, simulate_point

REL = 1e-12  # the regression anchor: same arithmetic, so equal to the last bits

# -- regression anchor: today's (pre-#32) numbers with emc_mhz = cpu_mhz = None ---------------------------

#: (workload, power mode, precision, GPU levels) -> step_table rows at padded lengths 64 and 128 (no
#: first-step warm-up), and a 50-step SimBoard run (seed 0, locked at the middle level, run_key
#: "anchor", evaluation and checkpoint phases in the window): (time_s, energy_j, energy_gpu_j, energy_cpu_j)
ANCHOR = {
    ("bert-base/rte", 0, "fp32", (306.0, 612.0, 1300.5)): {
        "time_s": [[2.8808187365569147, 1.4830371540197156, 0.7290009904205355],
                   [5.710647433981504, 2.9199411667243735, 1.4180250856031256]],
        "gpu_w": [[5.740167859470946, 10.949332970102187, 32.86792379034355],
                  [5.757880615940511, 11.044059512501308, 33.522247015307826]],
        "cpu_w": [[2.121648] * 3, [2.121648] * 3],
        "dram_w": [[0.061976312533078615, 0.12038978381901445, 0.24491396406060434],
                   [0.05410982862385561, 0.10582478767222646, 0.21791021690746237]],
        "board": (151.57372631623983, 1993.3456522574809, 1671.9913219952032, 321.35433026227764),
    },
    ("pythia-31m/cola", 0, "fp32", (306.0, 612.0, 1300.5)): {
        "time_s": [[0.26769630851886766, 0.1524148734491938, 0.09334421149732253],
                   [0.5379072420174074, 0.2917723233919306, 0.157218552362976]],
        "gpu_w": [[5.436952782597641, 9.511925626528265, 23.399797564096463],
                  [5.60927068855335, 10.25714580576667, 28.32295037829877]],
        "cpu_w": [[2.121648] * 3, [2.121648] * 3],
        "dram_w": [[0.11853668437778808, 0.2081938075589292, 0.33994430209429954],
                   [0.11288723656565852, 0.2081172791650717, 0.38623216641638447]],
        "board": (4.996207821264556, 44.824860999378686, 34.26196722108838, 10.5628937782903),
    },
    ("bert-small/sst2", 1, "fp16", (306.0, 408.0)): {
        "time_s": [[0.23446749690447738, 0.1912821444799673], [0.39291881480603336, 0.3075409800991981]],
        "gpu_w": [[3.435505324466628, 3.784726245111588], [3.5489131464471146, 4.000309723271843]],
        "cpu_w": [[0.7015788455224443] * 2, [0.7015788455224443] * 2],
        "dram_w": [[0.13443794798066133, 0.16478971018280897], [0.11711539901370333, 0.14962833168170678]],
        "board": (8.570919240868792, 36.533397050133075, 30.531034277048732, 6.002362773084339),
    },
}
#: dvfslab simulate --workload bert-base/rte --json (MAXN) before #32: (level, time, CPU W, GPU W, board W)
ANCHOR_SPEC = [(306.0, 5.689116915847511, 2.121648, 5.757811921430017, 12.263080640416579),
               (816.0, 2.226969250129351, 2.121648, 15.901844504861554, 22.49126730113144),
               (1300.5, 1.4127723842817053, 2.121648, 33.51982646268425, 40.18894436693473)]


@pytest.mark.parametrize("key", list(ANCHOR), ids=[k[0] for k in ANCHOR])
def test_regression_anchor_none_clocks_give_the_pre_issue_32_numbers(key):
    wid, mode, precision, levels = key
    want = ANCHOR[key]
    wl = SimWorkload.from_workload_id(wid, precision=precision, window_phases=("evaluation", "checkpoint"))
    t = step_table(ORIN, wl, [64.0, 128.0], list(levels), mode=ORIN.power_mode(mode), first_step=False,
                   emc_mhz=None, cpu_mhz=None)
    for attr in ("time_s", "gpu_w", "cpu_w", "dram_w"):
        np.testing.assert_allclose(getattr(t, attr), want[attr], rtol=REL, atol=0, err_msg=attr)
    board = SimBoard("agx-orin-64gb", 0, power_mode=mode)
    board.lock(levels[1])
    r = board.train(wl, 50, run_key="anchor")
    assert (r.time_s, r.energy_j, r.energy_gpu_j, r.energy_cpu_j) == pytest.approx(want["board"], rel=REL)


def test_regression_anchor_the_spec_path_gives_the_pre_issue_32_numbers():
    """The board power adds, since issue #38, the SYS5V rail's load term (docs/calibration.md 1.1):
    0.214788 W per W of CPU+GPU above an idle board's 2.764191 W; every other figure as before #32."""
    rows = {r["gpu_freq_mhz"]: r for r in evaluate(catalog_spec("bert-base/rte", ORIN), 0)["levels"]}
    for f, t, cpu, gpu, board in ANCHOR_SPEC:
        r = rows[f]
        board_38 = board + 0.214788 * (cpu + gpu - 2.764191)
        assert (r["time_per_step_s"], r["power_cpu_w"], r["power_gpu_w"]) == pytest.approx((t, cpu, gpu), rel=REL)
        assert r["power_board_w"] == pytest.approx(board_38, rel=1e-6)  # the share's 6 digits


# -- the EMC clock: memory traffic at its bandwidth ---------------------------------------------------------


def test_pure_memory_traffic_takes_bytes_over_the_bandwidth_at_each_emc_clock():
    """1 GB moved, nothing else, GPU at 1300.5 MHz (above the 612 MHz bandwidth saturation):
    the measured STREAM bandwidth 185.2 GB/s at 3199 MHz, ∝ the EMC clock (emc_bw_exp 1):
      3199 MHz: 1e9 / 185.2e9                 = 5.399568 ms
      2133 MHz: 1e9 / (185.2e9 · 2133/3199)   = 8.098086 ms   (× 3199/2133 = × 1.499766)
       665.6 MHz: 1e9 / (185.2e9 · 665.6/3199) = 25.951 ms  (× 3199/665.6 = × 4.806190)
    and with emc_bw_exp 0.8 the 2133 MHz step is × 1.499766^0.8 = × 1.382989 the 3199 MHz one."""
    pm = ORIN.power_modes[0]

    def t_ms(emc, profile=ORIN):
        rows = work_rows(profile, 0.0, 1e9, 0.0, np.array([[1300.5]]), pm, 0.0, 0.0, emc_mhz=emc)
        return float(rows.time_s[0, 0]) * 1e3

    assert t_ms(3199.0) == pytest.approx(5.399568, rel=1e-6)
    assert t_ms(2133.0) == pytest.approx(8.098086, rel=1e-6)
    assert t_ms(2133.0) / t_ms(3199.0) == pytest.approx(1.499766, rel=1e-6)
    assert t_ms(665.6) / t_ms(3199.0) == pytest.approx(4.806190, rel=1e-6)
    slow = with_params(ORIN, {"emc_bw_exp": 0.8})
    assert t_ms(2133.0, slow) / t_ms(3199.0, slow) == pytest.approx(1.382989, rel=1e-6)


def test_a_memory_bound_step_grows_by_the_bandwidth_ratio_when_the_emc_clock_falls():
    """A spec step of 18.52 GB and 2.09 MFLOP (efficiency 0.75), no operators, no kernels, MAXN,
    GPU 1300.5 MHz: t_mem = 18.52e9 / 185.2e9 = 0.1 s at 3199 MHz and 0.1 · 3199/2133 = 0.149977 s
    at 2133 MHz; t_mm = 2.09e6 / 0.75 / 2.09e12 = 1.3333 µs; the serial 25 ms (CPU at 2201.6 MHz)
    does not overlap: T = 0.025 + t_mm + t_mem = 0.1250013 s and 0.1749779 s."""
    spec = WorkloadSpec("memory-bound", 2.09e6, 18.52e9, 0.0, 1.0, 8, gemm_efficiency=0.75, kernels_per_step=0.0)
    fast = simulate_point(spec, 1300.5, emc_mhz=3199.0, cpu_mhz=2201.6)
    slow = simulate_point(spec, 1300.5, emc_mhz=2133.0, cpu_mhz=2201.6)
    t_mm = 2.09e6 / 0.75 / 2.09e12
    assert fast["time_per_step_s"] == pytest.approx(0.025 + t_mm + 0.1, rel=1e-9)
    assert slow["time_per_step_s"] == pytest.approx(0.025 + t_mm + 0.1 * 3199.0 / 2133.0, rel=1e-9)
    assert (slow["time_per_step_s"] - 0.025 - t_mm) / (fast["time_per_step_s"] - 0.025 - t_mm) == pytest.approx(
        1.499766, rel=1e-6)
    assert (fast["emc_freq_mhz"], slow["emc_freq_mhz"]) == (3199.0, 2133.0)


def test_the_emc_term_moves_the_gpu_rail_and_the_dram_term_the_board():
    """Same step, same GPU clock: only the EMC terms of the rails differ. VDD_GPU_SOC's EMC term is
    0.56 W/GHz · (f_emc − 2133); the traffic terms are per byte/s, so compare at the same time by
    taking a step with no bytes: GPU rail 3199 − 2133 MHz → +0.56 · 1.066 = +0.59696 W. With
    dram_w_per_ghz 0.14 the board rises by a further 0.14 · 1.066 = 0.149240 W at 3199 MHz."""
    spec = WorkloadSpec("compute", 2.09e12, 0.0, 0.0, 1.0, 8, gemm_efficiency=0.75, kernels_per_step=0.0)
    hi = simulate_point(spec, 1300.5, emc_mhz=3199.0)
    lo = simulate_point(spec, 1300.5, emc_mhz=2133.0)
    assert hi["time_per_step_s"] == pytest.approx(lo["time_per_step_s"], rel=1e-12)  # no bytes: same time
    assert hi["power_gpu_w"] - lo["power_gpu_w"] == pytest.approx(ORIN.emc_w_per_ghz * 1.066, rel=1e-9)
    assert ORIN.emc_w_per_ghz == 0.56
    dram = with_params(ORIN, {"dram_w_per_ghz": 0.14})
    hi2 = simulate_point(spec, 1300.5, emc_mhz=3199.0, board=dram)
    assert hi2["power_board_w"] - hi["power_board_w"] == pytest.approx(0.149240, rel=1e-9)
    assert hi2["power_cpu_w"] + hi2["power_gpu_w"] == pytest.approx(hi["power_cpu_w"] + hi["power_gpu_w"], rel=1e-12)


def test_pinning_the_emc_at_the_level_it_would_follow_changes_nothing():
    """The follow rule (3199·f/1300.5, rounded up to a level, at least 2133) gives 3199 MHz at
    1300.5 MHz and 2133 MHz at 612 MHz (3199·612/1300.5 = 1505.4): pinning those gives the same run."""
    wl = SimWorkload.from_workload_id("bert-small/rte")
    for f, emc in ((1300.5, 3199.0), (612.0, 2133.0)):
        runs = []
        for pin in (None, emc):
            board = SimBoard("agx-orin-64gb", 3)
            board.lock(f)
            board.set_other_clocks(emc_mhz=pin)
            runs.append(board.train(wl, 20, run_key="same"))
        assert runs[0].energy_j == pytest.approx(runs[1].energy_j, rel=1e-12)
        assert runs[0].time_s == pytest.approx(runs[1].time_s, rel=1e-12)


# -- the CPU clock: dispatch time and the CPU rail -----------------------------------------------------------


def test_cpu_rail_power_at_two_cpu_clocks_by_the_hand_formula():
    """VDD_CPU_CV = P_idle + (P_cluster·1 + P_core·1.3)·(f_cpu/2201.6)^k (1 cluster, 1.3 busy cores).
    With the fitted values (calibration file at the time of writing: P_idle 0.394911, P_cluster
    0.197833, P_core 1.17608, k 2.53559):
      2201.6 MHz: 0.394911 + 0.197833 + 1.3·1.17608                  = 2.121648 W
      1113.6 MHz: 0.394911 + (1113.6/2201.6)^2.53559 · 1.726737
                = 0.394911 + 0.505814^2.53559 · 1.726737 = 0.394911 + 0.177630·1.726737 ≈ 0.70163 W
    The formula is checked against the parameters as they stand (a refit moves the numbers, not the formula)."""
    p = ORIN
    spec = catalog_spec("bert-base/rte", p)
    for f_cpu in (2201.6, 1113.6):
        got = simulate_point(spec, 612.0, cpu_mhz=f_cpu)["power_cpu_w"]
        want = p.cpu_idle_w + (p.cpu_cluster_w + 1.3 * p.cpu_core_w_at_max) * (f_cpu / 2201.6) ** p.cpu_power_exp
        assert got == pytest.approx(want, rel=1e-12)
    if (p.cpu_idle_w, p.cpu_cluster_w, p.cpu_core_w_at_max, p.cpu_power_exp) == (0.394911, 0.197833, 1.17608, 2.53559):
        assert simulate_point(spec, 612.0, cpu_mhz=2201.6)["power_cpu_w"] == pytest.approx(2.121648, rel=1e-6)
        assert simulate_point(spec, 612.0, cpu_mhz=1113.6)["power_cpu_w"] == pytest.approx(0.70163, rel=1e-4)


def test_a_cpu_bound_step_slows_by_the_cpu_clock_ratio():
    """1000 operators and 2.09 MFLOP (GPU time 1.33 µs: negligible in the smooth maximum), MAXN:
    T = c·(25 ms + 1000 · cpu_op_us) with c = 2201.6 / f_cpu; at 2201.6 MHz c = 1, at 1113.6 MHz
    c = 1.977011 (the time ratio)."""
    spec = WorkloadSpec("cpu-bound", 2.09e6, 0.0, 1000.0, 1.0, 8, gemm_efficiency=0.75, kernels_per_step=0.0)
    base = 0.025 + 1000 * ORIN.cpu_op_us * 1e-6
    top = simulate_point(spec, 612.0, cpu_mhz=2201.6)["time_per_step_s"]
    low = simulate_point(spec, 612.0, cpu_mhz=1113.6)["time_per_step_s"]
    assert top == pytest.approx(base, rel=1e-9)
    assert low == pytest.approx(base * 2201.6 / 1113.6, rel=1e-9)
    assert low / top == pytest.approx(1.977011, rel=1e-6)


def test_clocks_above_the_modes_caps_are_refused_naming_the_cap():
    spec = catalog_spec("bert-small/rte", ORIN)
    with pytest.raises(DvfsError, match="above 2133 MHz, the EMC cap of power mode 1 \\(MODE_15W\\)"):
        simulate_point(spec, 408.0, emc_mhz=3199.0, mode="15W")
    with pytest.raises(DvfsError, match="above 1728 MHz, the CPU cap of power mode 2 \\(MODE_30W\\)"):
        simulate_point(spec, 612.0, cpu_mhz=2201.6, mode="30W")
    with pytest.raises(DvfsError, match="the GPU cap"):
        simulate_point(spec, 1300.5, mode="30W")
    with pytest.raises(DvfsError, match="EMC cap"):
        SimBoard("agx-orin-64gb", 0, power_mode=1).set_other_clocks(emc_mhz=3199.0)


# -- the JSON grid ----------------------------------------------------------------------------------------


def _json(capsys, *args) -> dict:
    assert main(["simulate", "--workload", "bert-small/rte", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_joint_json_grid_has_every_setting_of_the_mode(capsys):
    """MAXN: 11 GPU levels × 4 EMC levels (204, 665.6, 2133, 3199) × 5 CPU clocks named by the
    nvpmodel dump (MIN_FREQ 729.6, the caps 1113.6, 1497.6, 1728, the top 2201.6) = 220 rows.
    MODE_15W: GPU ≤ 408 (306, 408) × EMC ≤ 2133 (204, 665.6, 2133) × CPU ≤ 1113.6 (729.6, 1113.6) = 12."""
    out = _json(capsys, "--joint")
    j = out["joint"]
    assert j["knobs"] == ["gpu", "emc", "cpu"]
    assert j["emc_levels_mhz"] == [204.0, 665.6, 2133.0, 3199.0]
    assert j["cpu_levels_mhz"] == [729.6, 1113.6, 1497.6, 1728.0, 2201.6]
    assert len(j["rows"]) == 220
    assert {(r["gpu_freq_mhz"], r["emc_freq_mhz"], r["cpu_freq_mhz"]) for r in j["rows"]} == {
        (g, e, c) for g in j["gpu_levels_mhz"] for e in j["emc_levels_mhz"] for c in j["cpu_levels_mhz"]}
    assert {"emc_freq_mhz", "cpu_freq_mhz", "energy_per_step_j", "energy_board_per_step_j"} <= set(j["rows"][0])
    # the grid contains the GPU-only settings (EMC 3199, CPU 2201.6), so its minimum is at most theirs
    assert (j["gpu_only"]["emc_freq_mhz"], j["gpu_only"]["cpu_freq_mhz"]) == (3199.0, 2201.6)
    for key, best in (("energy_per_step_j", "lowest_energy"), ("energy_board_per_step_j", "lowest_board_energy")):
        assert j[best][key] == min(r[key] for r in j["rows"])
        assert j[best][key] <= j["gpu_only"][best][key]
    small = _json(capsys, "--joint", "--power-mode", "15W")["joint"]
    assert (small["gpu_levels_mhz"], small["emc_levels_mhz"], small["cpu_levels_mhz"]) == (
        [306.0, 408.0], [204.0, 665.6, 2133.0], [729.6, 1113.6])
    assert len(small["rows"]) == 12
    assert small["gpu_only"]["emc_freq_mhz"] == 2133.0 and small["gpu_only"]["cpu_freq_mhz"] == 1113.6
    chosen = _json(capsys, "--emc-levels", "2133,3199", "--cpu-levels", "1497.6")["joint"]
    assert len(chosen["rows"]) == 11 * 2 * 1
    assert "joint" not in _json(capsys)  # without --joint: today's output


def test_joint_flags_out_of_place_get_one_line(capsys):
    assert main(["simulate", "--workload", "bert-small/rte", "--emc-levels", "fast"]) != 0
    assert "--emc-levels takes clocks in MHz" in capsys.readouterr().err
    assert main(["simulate", "--workload", "bert-small/rte", "--joint", "--emc-levels", "3199",
                 "--power-mode", "15W"]) != 0
    assert "EMC cap of power mode 1" in capsys.readouterr().err


def test_the_table_form_names_the_joint_and_the_gpu_only_oracles(capsys):
    """The text form prints the grid's size (11 × 4 × 5 in MAXN) and each oracle's setting."""
    assert main(["simulate", "--workload", "bert-small/rte", "--joint"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" in out
    assert "joint grid: 11 GPU × 4 EMC × 5 CPU settings" in out
    assert "lowest CPU+GPU J:" in out and "lowest board J:" in out
    assert "GPU-only (EMC, CPU at the top)" in out


def test_backend_pins_reach_the_physics_only_when_asked():
    """``open_backend(physical_pins=True)``: an EMC pin at 2133 MHz with the GPU at 1300.5 MHz (where
    the EMC would follow to 3199) runs as SimBoard.set_other_clocks(emc_mhz=2133) does, reads back
    2133 as verified, and ``reset`` returns to the follow rule. By default a pin is reported
    unverified and the run is the unpinned one."""
    from dvfslab.sim.backend import open_backend

    wl = SimWorkload.from_workload_id("bert-small/rte")

    def energy(backend_kwargs, pin_emc=None, board_pin=None):
        be = open_backend("agx-orin-64gb", 5, **backend_kwargs)
        be.clocks.lock(1300.5)
        if pin_emc is not None:
            check = be.clocks.other_clocks()["emc"].pin(pin_emc)
        else:
            check = None
        if board_pin is not None:
            be.board.set_other_clocks(emc_mhz=board_pin)
        return be, check, be.board.train(wl, 10, run_key="r").energy_j

    _, _, follow = energy({})
    _, _, direct = energy({}, board_pin=2133.0)
    be, check, physical = energy({"physical_pins": True}, pin_emc=2133.0)
    assert physical == pytest.approx(direct, rel=1e-12) and physical != pytest.approx(follow, rel=1e-6)
    assert (check.status, check.measured_mhz) == ("verified", 2133.0)
    assert be.clocks.other_clocks()["emc"].read_mhz() == 2133.0
    be.clocks.reset()
    assert be.board.emc_mhz is None
    # unpinned, it reads the level the EMC follows: at 1300.5 MHz (f_max) 3199 x 1300.5 / 1300.5 = 3199
    be.clocks.lock(1300.5)
    assert be.clocks.other_clocks()["emc"].read_mhz() == 3199.0
    _, check, default = energy({}, pin_emc=2133.0)
    assert check.status == "unverified" and default == pytest.approx(follow, rel=1e-12)
    with pytest.raises(DvfsError):  # not one of the EMC levels
        open_backend("agx-orin-64gb", 5, physical_pins=True).clocks.other_clocks()["emc"].pin(1000.0)
