"""Board profiles of the digital twin: every number the physics (:mod:`dvfslab.sim.model`) uses.

Each parameter of the calibrated profile ``agx-orin-64gb`` has its source in
``docs/calibration.md`` (section 2). Its *fitted* parameters (:data:`ORIN_FITTED`) are not typed
in here: they are read from ``data/agx_orin_64gb_calibration.json``, which ``dvfslab calibrate``
(:mod:`dvfslab.sim.calibration`) writes from the fit readings (:mod:`dvfslab.sim.readings`);
the rest are anchors and stated assumptions, whose plausible ranges the calibration module
lists. The four power modes are the real ``nvpmodel -p --verbose`` dump in ``data/`` read by
nvpmodel's own parser (:func:`dvfslab.hw.jetson.nvpmodel.parse_power_modes`). ``agx-xavier`` is
an uncalibrated profile for exercising the pipeline on a 14-level table.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.hw.jetson.nvpmodel import PowerMode, parse_power_modes

DATA_DIR = Path(__file__).parent / "data"
ORIN_NVPMODEL_DUMP = DATA_DIR / "agx_orin_64gb_nvpmodel_p_verbose.txt"
ORIN_CALIBRATION = DATA_DIR / "agx_orin_64gb_calibration.json"
#: the AGX Orin parameters set by the fit (rail names: the idle watts of that rail)
ORIN_FITTED = ("soc_idle_w", "cpu_idle_w", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO", "cpu_cluster_w", "cpu_core_w_at_max",
               "cpu_power_exp", "gpu_clock_w_at_fmax", "gpu_dyn_w_at_fmax", "v_slope_per_mhz")


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
    power_modes: tuple[PowerMode, ...]  # the first one is the default of a board the twin opens (MAXN)
    calibrated: bool
    n_tpc: int  # GPU TPCs (a mode's TPC power-gating mask switches some off)
    n_cpu: int  # CPU cores (in clusters of four)
    cpu_fmax_mhz: float  # the CPU clusters' top clock (a mode without a CPU cap runs up to it)
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
    cpu_core_w_at_max: float  # per fully busy core at cpu_fmax_mhz
    cpu_power_exp: float  # a core's and a cluster's power scale as (f/cpu_fmax)^cpu_power_exp (f·V²)
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
    # the other clocks as inputs (issue #32): how effective DRAM bandwidth scales with the EMC clock,
    # the DRAM rail's EMC-clock term, and the CPU clusters' table (docs/calibration.md, section 1)
    emc_bw_exp: float = 1.0  # effective bandwidth ∝ (f_emc / f_emc,top)^emc_bw_exp (1: ∝ the clock)
    dram_w_per_ghz: float = 0.0  # dram_rail watts per GHz of EMC clock above emc_idle_mhz (0: no clock term)
    cpu_levels_mhz: tuple[float, ...] = ()  # the CPU clusters' cpufreq table (empty: not known)
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

    def power_mode(self, mode: int | str | PowerMode) -> PowerMode:
        """A mode by id or name (``2``, ``"2"``, ``"MODE_30W"``, ``"30W"``, ``"maxn"``)."""
        if isinstance(mode, PowerMode):
            return mode
        key = str(mode).strip().upper()
        for pm in self.power_modes:
            if key in (str(pm.id), pm.name.upper(), pm.name.upper().removeprefix("MODE_")):
                return pm
        names = ", ".join(f"{pm.id} ({pm.name})" for pm in self.power_modes)
        raise DvfsError(f"board {self.name}: unknown power mode {mode!r}; modes: {names}")

    def gpu_cap_mhz(self, mode: PowerMode) -> float:
        """The highest GPU level the mode allows."""
        cap = self.fmax_mhz if mode.gpu_max_mhz is None else min(mode.gpu_max_mhz, self.fmax_mhz)
        return max(f for f in self.levels_mhz if f <= cap + 0.5)

    def tpc_fraction(self, mode: PowerMode) -> float:
        return mode.tpc_fraction(self.n_tpc)

    def cpu_max_mhz(self, mode: PowerMode) -> float:
        return self.cpu_fmax_mhz if mode.cpu_max_mhz is None else min(mode.cpu_max_mhz, self.cpu_fmax_mhz)

    def cpu_online(self, mode: PowerMode) -> int:
        return self.n_cpu if mode.cpu_online is None else mode.cpu_online

    def emc_cap_mhz(self, mode: PowerMode) -> float:
        return self.emc_levels_mhz[-1] if mode.emc_max_mhz is None else mode.emc_max_mhz

    def emc_allowed_mhz(self, mode: PowerMode) -> tuple[float, ...]:
        """The EMC levels the mode allows (at or below its EMC cap)."""
        cap = self.emc_cap_mhz(mode)
        return tuple(f for f in self.emc_levels_mhz if f <= cap + 0.5)

    def cpu_allowed_mhz(self, mode: PowerMode) -> tuple[float, ...]:
        """The CPU table's clocks the mode allows (at or below its CPU cap)."""
        cap = self.cpu_max_mhz(mode)
        return tuple(f for f in self.cpu_levels_mhz if f <= cap + 0.05)


def with_params(profile: BoardProfile, params: Mapping[str, float]) -> BoardProfile:
    """``profile`` with some parameters replaced; a rail name sets that rail's idle watts."""
    rails = {k: float(v) for k, v in params.items() if k in profile.other_rails_w}
    unknown = set(params) - set(rails) - {f.name for f in dataclasses.fields(profile)}
    if unknown:
        raise DvfsError(f"board {profile.name}: no parameter(s) {sorted(unknown)}")
    fields = {k: float(v) for k, v in params.items() if k not in rails}
    return dataclasses.replace(profile, **fields, other_rails_w={**profile.other_rails_w, **rails})


from dvfslab.core.boards import ORIN_LEVELS_MHZ, XAVIER_LEVELS_MHZ  # noqa: E402  (one board table)

#: the AGX Orin's CPU clusters' cpufreq table (MHz): 115.2 MHz in steps of 76.8 MHz to 2188.8, then
#: 2201.6 (the table of public Orin DVFS studies, as the fake sysfs writes it; every CPU clock of the
#: nvpmodel dump — MIN_FREQ 729.6, the caps 1113.6 / 1497.6 / 1728 and the top 2201.6 — lies on it)
ORIN_CPU_LEVELS_MHZ = tuple(round(115.2 + 76.8 * k, 1) for k in range(28)) + (2201.6,)


def orin_power_modes() -> tuple[PowerMode, ...]:
    """The AGX Orin 64GB's modes, MAXN first: the real nvpmodel dump read by nvpmodel's parser."""
    modes = parse_power_modes(ORIN_NVPMODEL_DUMP.read_text(), source=ORIN_NVPMODEL_DUMP.name)
    return tuple(sorted(modes.values(), key=lambda m: (not m.is_maxn, m.id)))


def agx_orin_64gb(fitted: Mapping[str, float]) -> BoardProfile:
    """The AGX Orin 64GB profile with the fitted parameters ``fitted`` (:data:`ORIN_FITTED`).

    Sources of every other number: docs/calibration.md, section 2 (same order).
    """
    missing = [k for k in ORIN_FITTED if k not in fitted]
    if missing:
        raise DvfsError(f"agx-orin-64gb: the calibration lacks {missing}; run `dvfslab calibrate`")
    rails = {r: float(fitted[r]) for r in ("VIN_SYS_5V0", "VDDQ_VDD2_1V8AO")}
    return BoardProfile(
        name="agx-orin-64gb", display_name="Jetson AGX Orin 64GB (simulated)", gpu="ga10b",
        levels_mhz=ORIN_LEVELS_MHZ, gpu_rail="VDD_GPU_SOC", cpu_rail="VDD_CPU_CV", other_rails_w=rails,
        dram_rail="VDDQ_VDD2_1V8AO", power_modes=orin_power_modes(), calibrated=True, n_tpc=8, n_cpu=12,
        cpu_fmax_mhz=2201.6,
        gemm_flops_at_fmax=2.09e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=185.2,
        bw_sat_mhz=612.0, kernel_min_us_at_fmax=4.0,
        emc_levels_mhz=(204.0, 665.6, 2133.0, 3199.0), emc_idle_mhz=2133.0, emc_w_per_ghz=0.56,
        cpu_op_us=43.2, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
        ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=25.0, overlap_p=4.0, first_step_extra_s=0.3,
        v_max=1.0, v_min=0.60, gpu_leak_w_at_vmax=1.2,
        activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
        soc_pj_per_byte=16.0, dram_pj_per_byte=16.0,
        cpu_busy_cores_training=1.3, cpu_clusters_training=1.0, storage_write_mb_s=200.0,
        checkpoint_bytes_per_param=12.0, emc_bw_exp=1.0, dram_w_per_ghz=0.0, cpu_levels_mhz=ORIN_CPU_LEVELS_MHZ,
        **{k: float(fitted[k]) for k in ORIN_FITTED if k not in rails},
    )


def read_calibration(path: Path = ORIN_CALIBRATION) -> dict:
    """The checked-in calibration file (``dvfslab calibrate`` writes it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DvfsError(f"{path}: cannot read the twin's calibration ({err}); run `dvfslab calibrate`") from err


AGX_ORIN_64GB = agx_orin_64gb(read_calibration()["parameters"])

AGX_XAVIER = BoardProfile(
    name="agx-xavier", display_name="Jetson AGX Xavier (simulated, uncalibrated)", gpu="gv11b",
    levels_mhz=XAVIER_LEVELS_MHZ, gpu_rail="GPU", cpu_rail="CPU",
    other_rails_w={"SOC": 2.5, "CV": 0.4, "VDDRQ": 0.8, "SYS5V": 3.5}, dram_rail="VDDRQ",
    power_modes=(PowerMode(0, "MAXN", tpc_pg_mask=0), PowerMode(3, "MODE_30W_ALL", 1032.75, cpu_max_mhz=1200.0)),
    calibrated=False, n_tpc=4, n_cpu=8, cpu_fmax_mhz=2265.6,
    gemm_flops_at_fmax=0.56e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=105.0,
    bw_sat_mhz=675.75, kernel_min_us_at_fmax=5.0,
    emc_levels_mhz=(204.0, 665.6, 1600.0, 2133.0), emc_idle_mhz=1600.0, emc_w_per_ghz=0.0,
    cpu_op_us=40.0, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
    ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=18.0, overlap_p=4.0, first_step_extra_s=0.4,
    v_max=1.05, v_min=0.62, v_slope_per_mhz=4.0e-4,
    soc_idle_w=0.4, gpu_leak_w_at_vmax=1.2, gpu_clock_w_at_fmax=0.8, gpu_dyn_w_at_fmax=16.0,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
    soc_pj_per_byte=0.0, dram_pj_per_byte=20.0,
    cpu_idle_w=0.8, cpu_cluster_w=0.0, cpu_core_w_at_max=1.0, cpu_power_exp=2.0, cpu_busy_cores_training=1.3,
    cpu_clusters_training=0.0, storage_write_mb_s=200.0, checkpoint_bytes_per_param=12.0,
    extra={"note": "illustrative profile for exercising the pipeline on a 14-level table; not calibrated"},
)

PROFILES: dict[str, BoardProfile] = {p.name: p for p in (AGX_ORIN_64GB, AGX_XAVIER)}


def get_profile(name: str) -> BoardProfile:
    """The board profile ``name``; :class:`DvfsError` listing the known boards otherwise."""
    if name not in PROFILES:
        raise DvfsError(f"unknown simulated board {name!r}; choose one of: {', '.join(PROFILES)}")
    return PROFILES[name]
