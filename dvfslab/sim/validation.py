"""Real readings the twin is checked against, kept apart from the readings it was fitted to.

``FIT_READINGS`` set parameters of the calibrated profile (docs/calibration.md, section 2);
``VALIDATION_READINGS`` did not set any parameter: each is a rail power of a real AGX Orin at a
known state (GPU clock and load, EMC level, CPU loads and clocks, power mode), copied as numbers
from public tegrastats lines and forum stress figures (sources in words in ``source``; the
repository keeps none of their text). :func:`validation_table` gives the twin's prediction for
each, the error and the stated tolerance; ``tests/test_twin_validation.py`` checks them.

Tolerances are stated per reading class, not per reading: 10 % for idle floors and GPU stress
figures, 20 % for the low-power stress mode, 40 % for rails under a partial, unknown load (the
twin's weakest part: the CPU rail at partial per-core load and the carrier-board rail, which
carries the fan). They guard against regressions; they are not a claim of accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dvfslab.sim.model import cpu_rail_w, emc_mhz, gpu_rail_w, stress_test_gpu_rail_w
from dvfslab.sim.profiles import AGX_ORIN_64GB, BoardProfile

CPU_IDLE_MHZ = 729.0  # the CPU clusters' lowest clock on AGX Orin: a cluster there counts as idle


@dataclass(frozen=True)
class Reading:
    """One real rail reading and how the twin predicts it."""

    reading_id: str
    source: str  # the public source, in words
    state: str  # the board's state, as the source shows it
    rail: str
    measured_w: float
    tolerance: float  # relative
    predict: Callable[[BoardProfile], float]


def cpu_rail_from_loads_w(profile: BoardProfile, loads_pct: Sequence[float], clocks_mhz: Sequence[float]) -> float:
    """CPU rail of per-core loads (%) at per-core clocks (MHz), clusters of four cores: a cluster
    above the lowest CPU clock adds ``cpu_cluster_w·(f/f_max)²``, a core ``cpu_core_w·load·(f/f_max)²``."""
    fmax = profile.power_modes[0].cpu_max_mhz
    clusters = 0.0
    for i in range(0, len(clocks_mhz), 4):
        f = max(clocks_mhz[i:i + 4])
        clusters += (f / fmax) ** 2 if f > CPU_IDLE_MHZ + 1 else 0.0
    cores = sum(load / 100.0 * (f / fmax) ** 2 for load, f in zip(loads_pct, clocks_mhz, strict=True))
    return float(cpu_rail_w(profile, cores, clusters=clusters))


def _gpu_idle(p: BoardProfile) -> float:
    return float(gpu_rail_w(p, p.fmin_mhz, 0.0, powered=False))


def _gpu_light_load(p: BoardProfile) -> float:
    """12 % GR3D load at 1300 MHz, EMC 3199 MHz; an unknown light load: the twin's activity of
    short kernels (``activity_kernel_overhead``)."""
    return float(gpu_rail_w(p, 1300.5, 0.12 * p.activity_kernel_overhead, emc=emc_mhz(p, 1300.5)))


_JP7 = ("a real tegrastats line of an AGX Orin developer kit on JetPack 7.2, in the unit tests of "
        "jetson-stats (rbonghi/jetson_stats)")
_GO_IDLE = "a real tegrastats line of an idle AGX Orin 64GB (JetPack 5), test data of a public Go tegrastats parser"
_JP6 = ("a real tegrastats line of an AGX Orin 64GB on JetPack 6 (L4T 36.4.4) encoding video, test data "
        "of a public Go tegrastats parser")
_DD = "a real tegrastats line in the unit tests of the Datadog agent's Jetson check"
_FORUM = "GPU-rail figure under a GPU stress test, NVIDIA developer forum (32GB module)"
_C_LOADS, _C_CLOCKS = ((14, 5, 8, 14, 46, 47, 2, 10, 4, 5, 6, 10),
                       (2188, 2112, 2035, 2201, 1267, 1267, 1267, 1267, 1036, 1036, 1036, 1036))
_G_LOADS = (23, 10, 4, 14, 30, 18, 10, 10, 33, 7, 5, 27)

VALIDATION_READINGS: tuple[Reading, ...] = (
    Reading("idle-64gb/gpu", _GO_IDLE, "idle, GPU off, EMC 2133 MHz", "VDD_GPU_SOC", 2.340, 0.10, _gpu_idle),
    Reading("idle-64gb/cpu", _GO_IDLE, "idle, 12 cores at 729 MHz", "VDD_CPU_CV", 0.390, 0.10,
            lambda p: cpu_rail_from_loads_w(p, [0] * 12, [729] * 12)),
    Reading("idle-64gb/sys", _GO_IDLE, "idle", "VIN_SYS_5V0", 4.025, 0.10, lambda p: p.other_rails_w["VIN_SYS_5V0"]),
    Reading("idle-64gb/ddr", _GO_IDLE, "idle, EMC 2133 MHz", "VDDQ_VDD2_1V8AO", 0.301, 0.10,
            lambda p: p.other_rails_w["VDDQ_VDD2_1V8AO"]),
    Reading("nvenc-64gb/gpu", _JP6, "GPU off (0 %), EMC 3 % at 2133 MHz, encoder busy", "VDD_GPU_SOC", 2.412, 0.10,
            _gpu_idle),
    Reading("nvenc-64gb/cpu", _JP6, "per-core loads 2–47 % at 1036–2201 MHz", "VDD_CPU_CV", 1.607, 0.40,
            lambda p: cpu_rail_from_loads_w(p, _C_LOADS, _C_CLOCKS)),
    Reading("idle-32gb-305/gpu", _DD + " (32GB module)", "GPU clocked at 305 MHz, 0 % load, EMC 2133 MHz",
            "VDD_GPU_SOC", 2.389, 0.10, _gpu_idle),
    Reading("clocks-max-64gb/cpu", _DD, "12 cores at 2201 MHz, 0 % load", "VDD_CPU_CV", 0.988, 0.10,
            lambda p: cpu_rail_from_loads_w(p, [0] * 12, [2201] * 12)),
    Reading("jp7-12pct/gpu", _JP7, "GR3D 12 % at 1300 MHz, EMC 3 % at 3199 MHz", "VDD_GPU_SOC", 5.139, 0.40,
            _gpu_light_load),
    Reading("jp7-12pct/cpu", _JP7, "per-core loads 4–33 % at 2201 MHz", "VDD_CPU_CV", 3.268, 0.40,
            lambda p: cpu_rail_from_loads_w(p, _G_LOADS, [2201] * 12)),
    Reading("jp7-12pct/sys", _JP7, "GPU and CPUs lightly loaded", "VIN_SYS_5V0", 5.500, 0.40,
            lambda p: p.other_rails_w["VIN_SYS_5V0"]),
    Reading("stress-30w/gpu", _FORUM, "MODE_30W: 612 MHz, 4 of 8 TPCs", "VDD_GPU_SOC", 7.6, 0.10,
            lambda p: stress_test_gpu_rail_w(p, "MODE_30W")),
    Reading("stress-15w/gpu", _FORUM, "MODE_15W: 408 MHz, 3 of 8 TPCs, EMC capped at 2133 MHz", "VDD_GPU_SOC",
            5.2, 0.20, lambda p: stress_test_gpu_rail_w(p, "MODE_15W")),
)

# The readings that set parameters (never used above): (id, source, state, rail, watts, parameter)
FIT_READINGS: tuple[tuple[str, str, str, str, float, str], ...] = (
    ("idle-64gb-jp5/gpu", "tegrastats line of an idle AGX Orin 64GB (JetPack 5) in a public setup guide",
     "idle, GPU off, EMC 2133 MHz", "VDD_GPU_SOC", 2.399, "soc_idle_w = 2.40"),
    ("idle-64gb-jp5/cpu", "the same line", "idle", "VDD_CPU_CV", 0.400, "cpu_idle_w = 0.40"),
    ("idle-64gb-jp5/sys", "the same line", "idle", "VIN_SYS_5V0", 4.032, "VIN_SYS_5V0 = 4.03"),
    ("idle-64gb-jp5/ddr", "the same line", "idle", "VDDQ_VDD2_1V8AO", 0.301, "VDDQ_VDD2_1V8AO = 0.30"),
    ("clocks-max-64gb/gpu", _DD, "GPU clocked at 1300 MHz idle, EMC 3199 MHz (jetson_clocks)", "VDD_GPU_SOC",
     4.940, "gpu_clock_w_at_fmax = 4.94 − 2.40 − 0.60 (EMC) − 1.20 (leakage)"),
    ("two-cores-32gb/cpu", _DD + " (32GB module)", "2 cores 100 % at 2201 MHz", "VDD_CPU_CV", 4.405,
     "cpu_core_w_at_max, cpu_cluster_w (with the CPU stress figure)"),
    ("stress-maxn/gpu", _FORUM, "MAXN: 1300.5 MHz, 8 of 8 TPCs", "VDD_GPU_SOC", 40.0, "gpu_dyn_w_at_fmax"),
    ("stress-50w/gpu", _FORUM, "MODE_50W: 816 MHz, 8 of 8 TPCs", "VDD_GPU_SOC", 18.0, "v_slope_per_mhz"),
    ("stress-cpu-maxn/cpu", "CPU-rail figure under a CPU stress test, NVIDIA developer forum (32GB module, 8 cores)",
     "8 cores 100 % at 2201.6 MHz", "VDD_CPU_CV", 15.2, "cpu_core_w_at_max, cpu_cluster_w"),
)


def validation_table(profile: BoardProfile = AGX_ORIN_64GB) -> list[dict]:
    """One row per validation reading: measured, twin, relative error, tolerance, within it."""
    rows = []
    for r in VALIDATION_READINGS:
        twin = float(r.predict(profile))
        err = twin / r.measured_w - 1.0
        rows.append({"reading": r.reading_id, "rail": r.rail, "state": r.state, "source": r.source,
                     "measured_w": r.measured_w, "twin_w": round(twin, 3), "error_pct": round(100 * err, 1),
                     "tolerance_pct": round(100 * r.tolerance), "within": abs(err) <= r.tolerance})
    return rows


def validation_markdown(profile: BoardProfile = AGX_ORIN_64GB) -> str:
    """The validation table of docs/calibration.md."""
    lines = ["| Reading | Rail | State | Measured (W) | Twin (W) | Error | Tolerance |",
             "|---|---|---|---|---|---|---|"]
    for row in validation_table(profile):
        lines.append(f"| {row['reading']} | {row['rail']} | {row['state']} | {row['measured_w']:.3f} | "
                     f"{row['twin_w']:.3f} | {row['error_pct']:+.1f} % | ±{row['tolerance_pct']} % |")
    return "\n".join(lines)
