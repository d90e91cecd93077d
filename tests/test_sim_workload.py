"""``dvfslab simulate --workload SPEC --power-mode MODE``: any workload in the AGX Orin's four modes.

The modes' numbers are read by hand off the real ``nvpmodel -p --verbose`` dump in
tests/data/nvpmodel/ (the twin ships the same bytes); the energy check is worked by hand from the
twin's formulas (docs/calibration.md, section 1). Everything here is simulated.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dvfslab.cli import main
from dvfslab.sim.profiles import AGX_ORIN_64GB as ORIN
from dvfslab.sim.profiles import ORIN_NVPMODEL_DUMP
from dvfslab.sim.spec import WorkloadSpec, evaluate

TESTS_DUMP = Path(__file__).parent / "data" / "nvpmodel" / "agx_orin_64gb_nvpmodel_p_verbose.txt"
# read off the dump by hand: "GPU MAX_FREQ 408000000", "TPC_PG_MASK 248" (5 of 8 bits set -> 3 TPCs on),
# "CPU_ONLINE CORE_4 0" ..., "CPU_A78_0 MAX_FREQ 1113600" (kHz), "EMC MAX_FREQ 2133000000" (Hz; 0 = no cap);
# MAXN caps nothing: the GPU's top level 1300.5 MHz, the CPU's 2201.6 MHz, the EMC's 3199 MHz
MODES = {  # name: (id, GPU cap MHz, TPCs on, CPU cores online, CPU max MHz, EMC max MHz)
    "MAXN": (0, 1300.5, 8, 12, 2201.6, 3199.0),
    "MODE_15W": (1, 408.0, 3, 4, 1113.6, 2133.0),
    "MODE_30W": (2, 612.0, 4, 8, 1728.0, 3199.0),
    "MODE_50W": (3, 816.0, 8, 12, 1497.6, 3199.0),
}
KEYS = {"gpu_freq_mhz", "time_per_step_s", "power_cpu_w", "power_gpu_w", "power_board_w", "energy_per_step_j",
        "energy_board_per_step_j"}


def _run_json(capsys, *args) -> dict:
    assert main(["simulate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_twin_ships_the_real_dump_unchanged():
    assert ORIN_NVPMODEL_DUMP.read_bytes() == TESTS_DUMP.read_bytes()


@pytest.mark.parametrize("name", list(MODES))
def test_each_mode_has_the_dumps_limits_by_name_and_by_id(name, tmp_path, capsys):
    mode_id, cap, tpcs, cores, cpu_max, emc = MODES[name]
    by_name = _run_json(capsys, "--workload", "bert-small/rte", "--power-mode", name.removeprefix("MODE_"))
    by_id = _run_json(capsys, "--workload", "bert-small/rte", "--power-mode", str(mode_id))
    assert by_name == by_id and by_name["source"] == "simulated"
    m = by_name["power_mode"]
    assert (m["id"], m["name"], m["gpu_max_mhz"], m["tpcs_on"], m["cpu_online"], m["cpu_max_mhz"], m["emc_max_mhz"]) \
        == (mode_id, name, cap, tpcs, cores, cpu_max, emc)
    levels = [row["gpu_freq_mhz"] for row in by_name["levels"]]
    assert levels == [f for f in ORIN.levels_mhz if f <= cap]  # every level the mode allows, no other
    for row in [*by_name["levels"], by_name["default_governor"]]:
        assert KEYS <= set(row)
        assert row["energy_per_step_j"] == pytest.approx((row["power_cpu_w"] + row["power_gpu_w"])
                                                         * row["time_per_step_s"], rel=1e-12)
    assert by_name["default_governor"]["gpu_freq_mhz"] <= cap


def test_one_level_by_hand_in_mode_30w():
    """A step of pure matmul work in MODE_30W at 612 MHz, worked through by hand.

    Spec: flops F = 0.5·R (R = 2.09e12 FLOP/s, the anchor rate at 1300.5 MHz) at efficiency 0.5,
    no DRAM bytes, no kernels, no operators. The mode keeps 4 of 8 TPCs and caps the CPU at
    1728 MHz, so the GPU's rate is R·(612/1300.5)·0.5 and the CPU is slower by c = 2201.6/1728:
      t_gpu = (F/0.5) / (R·612/1300.5·0.5) = 2·1300.5/612 s,   T = 25 ms·c + t_gpu
    (no operators: the smooth maximum is t_gpu itself). The GPU rail at 612 MHz, with the EMC at
    2133 MHz (3199·612/1300.5 = 1505 rounds up to 2133: no EMC term) and v = 1 − slope·(1300.5 − 612):
      P_gpu = P_soc + 0.5·[P_leak·v³ + (P_clk + P_dyn·a_mm·t_gpu/T)·v²·612/1300.5]
    and the CPU rail with 1.3 busy cores and one cluster at the mode's top clock:
      P_cpu = P_idle + (P_cluster + 1.3·P_core)·(1728/2201.6)^k.
    The board adds the idle VIN_SYS_5V0 and VDDQ rails and the SYS5V rail's load term (issue #38):
      0.214788·(P_gpu + P_cpu − (P_soc + P_idle)).
    """
    p = ORIN
    spec = WorkloadSpec("toy", 0.5 * 2.09e12, 0.0, 0.0, 1.0, 8, gemm_efficiency=0.5, kernels_per_step=0.0)
    row = next(r for r in evaluate(spec, "MODE_30W")["levels"] if r["gpu_freq_mhz"] == 612.0)
    c = 2201.6 / 1728.0
    t_gpu = 2.0 * 1300.5 / 612.0
    t = 0.025 * c + t_gpu
    v = 1.0 - p.v_slope_per_mhz * (1300.5 - 612.0)
    fr = 612.0 / 1300.5
    gpu_w = p.soc_idle_w + 0.5 * (p.gpu_leak_w_at_vmax * v**3
                                  + (p.gpu_clock_w_at_fmax + p.gpu_dyn_w_at_fmax * p.activity_matmul * t_gpu / t)
                                  * v**2 * fr)
    cpu_w = p.cpu_idle_w + (p.cpu_cluster_w + 1.3 * p.cpu_core_w_at_max) * (1728.0 / 2201.6) ** p.cpu_power_exp
    assert row["time_per_step_s"] == pytest.approx(t, rel=1e-12)
    assert row["power_gpu_w"] == pytest.approx(gpu_w, rel=1e-12)
    assert row["power_cpu_w"] == pytest.approx(cpu_w, rel=1e-12)
    assert row["energy_per_step_j"] == pytest.approx((cpu_w + gpu_w) * t, rel=1e-12)
    rest = p.other_rails_w["VIN_SYS_5V0"] + p.other_rails_w["VDDQ_VDD2_1V8AO"]  # no DRAM traffic
    sys_load = 0.214788 * (cpu_w + gpu_w - (p.soc_idle_w + p.cpu_idle_w))
    assert row["energy_board_per_step_j"] == pytest.approx((cpu_w + gpu_w + rest + sys_load) * t, rel=1e-6)


def test_a_printed_catalog_spec_runs_as_a_file_with_the_same_numbers(tmp_path, capsys):
    assert main(["simulate", "--workload", "pythia-70m/cola", "--print-spec"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert {"name", "flops_per_step", "dram_bytes_per_step", "cpu_ops_per_step", "params_m", "batch_size"} <= set(spec)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    from_file = _run_json(capsys, "--workload", str(path), "--power-mode", "50W")
    from_catalog = _run_json(capsys, "--workload", "pythia-70m/cola", "--power-mode", "50W")
    assert from_file == from_catalog


def test_the_default_governor_runs_a_gpu_bound_step_at_the_cap_and_a_cpu_bound_one_lower():
    gpu_bound = WorkloadSpec("gpu", 2.0e12, 1.0e9, 500.0, 100.0, 32)
    cpu_bound = WorkloadSpec("cpu", 2.0e9, 1.0e8, 3000.0, 10.0, 32)
    top = evaluate(gpu_bound, "MAXN")
    assert top["default_governor"]["gpu_freq_mhz"] == 1300.5
    assert top["default_governor"]["time_per_step_s"] == pytest.approx(top["levels"][-1]["time_per_step_s"])
    low = evaluate(cpu_bound, "MAXN")["default_governor"]
    assert low["gpu_freq_mhz"] < 1000 and sum(low["level_share"].values()) == pytest.approx(1.0)
    capped = evaluate(gpu_bound, "MODE_15W")["default_governor"]
    assert capped["gpu_freq_mhz"] == 408.0


@pytest.mark.parametrize("change, message", [
    ({"flops_per_step": None}, "field 'flops_per_step' is missing"),
    ({"batch_size": None}, "field 'batch_size' is missing"),
    ({"cpu_ops_per_step": -1}, "field 'cpu_ops_per_step' must be non-negative, got -1"),
    ({"dram_bytes_per_step": -2.5}, "field 'dram_bytes_per_step' must be non-negative"),
    ({"params_m": "big"}, "field 'params_m' must be a number"),
    ({"flops": 1.0}, "unknown field(s) flops; a spec has"),
    # one word per field, whatever the value: batch_size must be positive (-4 and 0 alike)
    ({"batch_size": -4}, "field 'batch_size' must be positive, got -4"),
    ({"batch_size": 0}, "field 'batch_size' must be positive, got 0"),
])
def test_a_bad_spec_gets_one_line_naming_the_field(change, message, tmp_path, capsys):
    spec = {"name": "x", "flops_per_step": 1e12, "dram_bytes_per_step": 1e9, "cpu_ops_per_step": 1000,
            "params_m": 100, "batch_size": 32}
    for key, value in change.items():
        if value is None:
            del spec[key]
        else:
            spec[key] = value
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["simulate", "--workload", str(path), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and str(path) in err and len(err.splitlines()) == 1


def test_an_unknown_mode_or_workload_name_is_one_line(capsys):
    assert main(["simulate", "--workload", "bert-base/rte", "--power-mode", "20W"]) == 2
    err = capsys.readouterr().err
    assert "unknown power mode '20W'" in err and "1 (MODE_15W)" in err
    assert main(["simulate", "--workload", "bert-base", "--json"]) == 2
    assert "model/task" in capsys.readouterr().err


def test_the_table_form_marks_the_lowest_energy_level(capsys):
    assert main(["simulate", "--workload", "bert-base/rte", "--power-mode", "MAXN"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" in out and "<- lowest CPU+GPU" in out and "default governor" in out
    assert np.isfinite([float(x) for x in out.splitlines()[2].split()]).all()
