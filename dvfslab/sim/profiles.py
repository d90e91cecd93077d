"""Board profiles of the digital twin: every number the physics (:mod:`dvfslab.sim.model`) uses.

Each parameter of the calibrated profile ``agx-orin-64gb`` has its source in
``docs/calibration.md`` (section 2); the readings used to *check* the twin
(:mod:`dvfslab.sim.validation`) were not used to set any of them. ``agx-xavier`` is an
uncalibrated profile for exercising the pipeline on a 14-level table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dvfslab.core.errors import DvfsError


@dataclass(frozen=True)
class PowerMode:
    """An nvpmodel mode: GPU cap, fraction of GPU TPCs powered, CPU clock cap, EMC cap (0: none)."""

    mode_id: int
    name: str
    gpu_max_mhz: float
    tpc_fraction: float
    cpu_max_mhz: float
    emc_max_mhz: float = 0.0


@dataclass(frozen=True)
class BoardProfile:
    """Everything the twin knows about one board. Units are in the names."""

    name: str
    display_name: str
    gpu: str
    levels_mhz: tuple[float, ...]
    gpu_rail: str
    cpu_rail: str
    other_rails_w: Mapping[str, float]  # rails read but not in the CPU+GPU total: watts at idle
    dram_rail: str | None  # the rail (among other_rails_w) that also carries DRAM traffic power
    power_modes: tuple[PowerMode, ...]
    calibrated: bool
    # compute and memory
    gemm_flops_at_fmax: float  # sustained fp32 GEMM, FLOP/s, at the top level
    gemm_half_dim: float  # inner dimension at which a matmul reaches half that rate
    gemm_half_rows: float  # rows (tokens) at which a matmul reaches half that rate
    dram_bw_gbs: float  # best STREAM bandwidth (at the top EMC level)
    bw_sat_mhz: float  # GPU clock above which the SMs saturate DRAM bandwidth
    kernel_min_us_at_fmax: float  # shortest GPU time of a kernel at the top level
    # memory clock (EMC): levels, the level of an idle board, and the GPU's floor request
    emc_levels_mhz: tuple[float, ...]
    emc_idle_mhz: float
    emc_w_per_ghz: float  # VDD_GPU_SOC watts per GHz of EMC clock above emc_idle_mhz
    # CPU side (does not scale with the GPU clock)
    cpu_op_us: float  # CPU time per dispatched operator (Python, autograd, dispatcher, launch)
    ops_per_layer_encoder: float  # operators per layer and step, forward + backward (BERT)
    ops_per_layer_decoder: float  # the same for GPT-NeoX (Pythia)
    ops_fixed: float  # embeddings, head, loss
    ops_per_tensor_optimizer: float  # clipping + foreach AdamW, per parameter tensor
    cpu_step_serial_ms: float  # serial per-step work: collation, Trainer loop, per-step sync
    overlap_p: float  # smooth-max exponent for the overlap of dispatch and GPU work
    first_step_extra_s: float  # CUDA lazy init / allocator warm-up on the first step
    # voltage
    v_max: float
    v_min: float
    v_slope_per_mhz: float
    # GPU rail
    soc_idle_w: float  # VDD_GPU_SOC of an idle board: GPU rail-gated, EMC at emc_idle_mhz
    gpu_leak_w_at_vmax: float  # GPU leakage when powered, ∝ (V/V_max)³
    gpu_clock_w_at_fmax: float  # clocked but idle GPU (clock tree), ∝ (V/V_max)²·f
    gpu_dyn_w_at_fmax: float  # dynamic power at f_max, V_max, activity 1 (the stress test)
    activity_matmul: float
    activity_memory: float
    activity_kernel_overhead: float
    soc_pj_per_byte: float
    dram_pj_per_byte: float
    # CPU rail
    cpu_idle_w: float
    cpu_cluster_w: float  # per CPU cluster clocked up (L3, cluster logic)
    cpu_core_w_at_max: float  # per fully busy core at the mode's top CPU clock
    cpu_busy_cores_training: float
    cpu_clusters_training: float
    # non-training phases inside the measured window (amortized per run)
    storage_write_mb_s: float  # checkpoint write speed
    checkpoint_bytes_per_param: float
    # noise (log-normal sigmas)
    sigma_run_cpu: float = 0.03
    sigma_run_gpu: float = 0.01
    sigma_run_power: float = 0.015
    sigma_step_cpu: float = 0.05
    sensor_sigma: float = 0.005
    # thermal (telemetry only; no feedback on power)
    ambient_c: float = 25.0
    thermal_r_c_per_w: float = 1.2
    thermal_tau_s: float = 60.0
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def fmax_mhz(self) -> float:
        return self.levels_mhz[-1]

    @property
    def fmin_mhz(self) -> float:
        return self.levels_mhz[0]

    @property
    def rails(self) -> tuple[str, ...]:
        return (self.gpu_rail, self.cpu_rail, *self.other_rails_w)

    @property
    def total_rails(self) -> tuple[str, str]:
        return (self.gpu_rail, self.cpu_rail)

    def power_mode(self, mode: int | str) -> PowerMode:
        for pm in self.power_modes:
            if mode in (pm.mode_id, pm.name, str(pm.mode_id)):
                return pm
        names = ", ".join(f"{pm.mode_id} ({pm.name})" for pm in self.power_modes)
        raise DvfsError(f"board {self.name}: unknown power mode {mode!r}; modes: {names}")


from dvfslab.core.boards import ORIN_LEVELS_MHZ, XAVIER_LEVELS_MHZ  # noqa: E402  (one board table)

# Sources of every number: docs/calibration.md, section 2 (same order).
AGX_ORIN_64GB = BoardProfile(
    name="agx-orin-64gb", display_name="Jetson AGX Orin 64GB (simulated)", gpu="ga10b",
    levels_mhz=ORIN_LEVELS_MHZ, gpu_rail="VDD_GPU_SOC", cpu_rail="VDD_CPU_CV",
    other_rails_w={"VIN_SYS_5V0": 4.03, "VDDQ_VDD2_1V8AO": 0.30}, dram_rail="VDDQ_VDD2_1V8AO",
    power_modes=(PowerMode(0, "MAXN", 1300.5, 1.0, 2201.6), PowerMode(1, "MODE_15W", 408.0, 0.375, 1113.6, 2133.0),
                 PowerMode(2, "MODE_30W", 612.0, 0.5, 1728.0), PowerMode(3, "MODE_50W", 816.0, 1.0, 1497.6)),
    calibrated=True,
    gemm_flops_at_fmax=2.09e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=185.2,
    bw_sat_mhz=612.0, kernel_min_us_at_fmax=4.0,
    emc_levels_mhz=(204.0, 665.6, 2133.0, 3199.0), emc_idle_mhz=2133.0, emc_w_per_ghz=0.56,
    cpu_op_us=43.2, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
    ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=25.0, overlap_p=4.0, first_step_extra_s=0.3,
    v_max=1.0, v_min=0.60, v_slope_per_mhz=3.802e-4,
    soc_idle_w=2.40, gpu_leak_w_at_vmax=1.2, gpu_clock_w_at_fmax=0.74, gpu_dyn_w_at_fmax=35.06,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
    soc_pj_per_byte=16.0, dram_pj_per_byte=16.0,
    cpu_idle_w=0.40, cpu_cluster_w=0.20, cpu_core_w_at_max=1.80, cpu_busy_cores_training=1.3,
    cpu_clusters_training=1.0, storage_write_mb_s=200.0, checkpoint_bytes_per_param=12.0,
)

AGX_XAVIER = BoardProfile(
    name="agx-xavier", display_name="Jetson AGX Xavier (simulated, uncalibrated)", gpu="gv11b",
    levels_mhz=XAVIER_LEVELS_MHZ, gpu_rail="GPU", cpu_rail="CPU",
    other_rails_w={"SOC": 2.5, "CV": 0.4, "VDDRQ": 0.8, "SYS5V": 3.5}, dram_rail="VDDRQ",
    power_modes=(PowerMode(0, "MAXN", 1377.0, 1.0, 2265.6), PowerMode(3, "MODE_30W_ALL", 1032.75, 1.0, 1200.0)),
    calibrated=False,
    gemm_flops_at_fmax=0.56e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=105.0,
    bw_sat_mhz=675.75, kernel_min_us_at_fmax=5.0,
    emc_levels_mhz=(204.0, 665.6, 1600.0, 2133.0), emc_idle_mhz=1600.0, emc_w_per_ghz=0.0,
    cpu_op_us=40.0, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
    ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=18.0, overlap_p=4.0, first_step_extra_s=0.4,
    v_max=1.05, v_min=0.62, v_slope_per_mhz=4.0e-4,
    soc_idle_w=0.4, gpu_leak_w_at_vmax=1.2, gpu_clock_w_at_fmax=0.8, gpu_dyn_w_at_fmax=16.0,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
    soc_pj_per_byte=0.0, dram_pj_per_byte=20.0,
    cpu_idle_w=0.8, cpu_cluster_w=0.0, cpu_core_w_at_max=1.0, cpu_busy_cores_training=1.3,
    cpu_clusters_training=0.0, storage_write_mb_s=200.0, checkpoint_bytes_per_param=12.0,
    extra={"note": "illustrative profile for exercising the pipeline on a 14-level table; not calibrated"},
)

PROFILES: dict[str, BoardProfile] = {p.name: p for p in (AGX_ORIN_64GB, AGX_XAVIER)}


def get_profile(name: str) -> BoardProfile:
    """The board profile ``name``; :class:`DvfsError` listing the known boards otherwise."""
    if name not in PROFILES:
        raise DvfsError(f"unknown simulated board {name!r}; choose one of: {', '.join(PROFILES)}")
    return PROFILES[name]
