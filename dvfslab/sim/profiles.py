"""Board profiles of the digital twin: every number the physics (:mod:`dvfslab.sim.model`) uses.

Each parameter of the calibrated profile ``agx-orin-64gb`` has its source in
``docs/calibration.md`` (section 2). Its *fitted* parameters (:data:`ORIN_FITTED`) are not typed
in here: they are read from ``data/agx_orin_64gb_calibration.json``, which ``dvfslab calibrate``
(:mod:`dvfslab.sim.calibration`) writes from the fit readings (:mod:`dvfslab.sim.readings`);
the rest are anchors and stated assumptions, whose plausible ranges the calibration module
lists. What the module *is* — its GPU, EMC and CPU tables, its rails and which loads each feeds,
its nvpmodel modes, its always-on loads — is its record in :mod:`dvfslab.core.jetson_modules`
(``BoardProfile.board``): a profile holds only the physics' parameters, keyed by that record, and
is checked against it when built. ``orin-nx-16gb`` and ``agx-xavier`` are uncalibrated profiles
(their physics scaled from the AGX Orin's or illustrative; docs/calibration.md, section 2).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dvfslab.core import jetson_modules as records
from dvfslab.core.errors import DvfsError
from dvfslab.core.jetson_modules import Board
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

    board: Board  # the module record: identity, tables, rails and their loads, power modes
    other_rails_w: Mapping[str, float]  # rails outside the CPU+GPU total: watts at idle (an input rail: the
    # module's remainder beyond every modelled load)
    calibrated: bool
    # compute and memory
    gemm_flops_at_fmax: float  # sustained fp32 GEMM, FLOP/s, at the top level
    gemm_half_dim: float  # inner dimension at which a matmul reaches half that rate
    gemm_half_rows: float  # rows (tokens) at which a matmul reaches half that rate
    dram_bw_gbs: float  # best STREAM bandwidth (at the top EMC level)
    bw_sat_mhz: float  # GPU clock above which the SMs saturate DRAM bandwidth
    kernel_min_us_at_fmax: float  # shortest GPU time of a kernel at the top level
    # memory clock (EMC): the level of an idle board (the levels are the record's)
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
    # the board's 5 V system rail (VIN_SYS_5V0 / SYS5V): its idle watts (other_rails_w) plus this share
    # of the CPU+GPU power above its idle (docs/calibration.md, "The SYS5V rail"; 0: constant)
    sys_w_per_w: float = 0.0
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        b, where = self.board, f"simulated board {self.board.key}"
        outside = set(b.rail_names) - set(b.total_rails)
        if not set(self.other_rails_w) <= outside:
            raise DvfsError(f"{where}: idle watts given for {sorted(set(self.other_rails_w) - outside)}, which are "
                            f"not its rails outside the CPU+GPU total ({sorted(outside)})")
        for load in b.always_on:
            rail = b.rail_of(load)
            if rail is not None and rail not in b.total_rails and rail not in self.other_rails_w:
                raise DvfsError(f"{where}: its always-on {load} load's rail {rail} has no idle watts")
        if "soc" not in b.total_loads and (self.soc_idle_w or self.emc_w_per_ghz or self.soc_pj_per_byte):
            raise DvfsError(f"{where}: its SoC rail is outside the CPU+GPU total, so the SoC terms (soc_idle_w, "
                            "emc_w_per_ghz, soc_pj_per_byte) must be 0 (give the SoC rail's idle watts instead)")

    # -- the module record's answers --------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.board.key

    @property
    def display_name(self) -> str:
        return f"{self.board.display_name} (simulated{'' if self.calibrated else ', uncalibrated'})"

    @property
    def gpu(self) -> str:
        return self.board.gpu

    @property
    def levels_mhz(self) -> tuple[float, ...]:
        return self.board.gpu_levels_mhz

    @property
    def emc_levels_mhz(self) -> tuple[float, ...]:
        return self.board.emc_levels_mhz

    @property
    def cpu_levels_mhz(self) -> tuple[float, ...]:
        return self.board.cpu_levels_mhz

    @property
    def n_tpc(self) -> int:
        return self.board.n_tpc

    @property
    def n_cpu(self) -> int:
        return self.board.n_cpu

    @property
    def cpu_fmax_mhz(self) -> float:
        return self.board.cpu_max_mhz

    @property
    def gpu_rail(self) -> str:
        """The rail that feeds the GPU (on an Orin NX the shared VDD_CPU_GPU_CV)."""
        return self.board.rail_of("gpu")

    @property
    def cpu_rail(self) -> str:
        """The rail that feeds the CPU (on an Orin NX the same rail as the GPU's)."""
        return self.board.rail_of("cpu")

    @property
    def dram_rail(self) -> str | None:
        """The monitored rail that carries the DRAM (None: only an input rail reads it)."""
        return self.board.rail_of("dram")

    @property
    def power_modes(self) -> tuple[PowerMode, ...]:
        """The record's nvpmodel modes as the hardware's :class:`PowerMode`, the top mode first."""
        src = f"board record {self.board.key}"
        return tuple(PowerMode(m.id, m.name, m.gpu_max_mhz, None, m.tpc_pg_mask, src, m.cpu_online, m.cpu_max_mhz,
                               m.emc_max_mhz) for m in self.board.modes)

    @property
    def fmax_mhz(self) -> float:
        return self.levels_mhz[-1]

    @property
    def fmin_mhz(self) -> float:
        return self.levels_mhz[0]

    @property
    def rails(self) -> tuple[str, ...]:
        """Every rail the twin reads: the record's, in its order (a shared rail once)."""
        return self.board.rail_names

    @property
    def total_rails(self) -> tuple[str, ...]:
        """The rails of the CPU+GPU total, each once (an Orin NX: VDD_CPU_GPU_CV and VDD_SOC)."""
        return self.board.total_rails

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


ORIN_LEVELS_MHZ, XAVIER_LEVELS_MHZ = records.ORIN_LEVELS_MHZ, records.XAVIER_LEVELS_MHZ  # one board table
ORIN_CPU_LEVELS_MHZ = records.ORIN_CPU_LEVELS_MHZ


def orin_power_modes() -> tuple[PowerMode, ...]:
    """The AGX Orin 64GB's modes, MAXN first, as the real nvpmodel dump states them (read by
    nvpmodel's parser): the evidence the module record's modes are checked against (a test)."""
    modes = parse_power_modes(ORIN_NVPMODEL_DUMP.read_text(), source=ORIN_NVPMODEL_DUMP.name)
    return tuple(sorted(modes.values(), key=lambda m: (not m.is_maxn, m.id)))


#: real AGX Orin tegrastats snapshots whose load beyond idle is CPU and GPU work only (docs/calibration.md,
#: "The SYS5V rail"; the lines are in dvfslab.sim.readings): (VDD_GPU_SOC + VDD_CPU_CV, VIN_SYS_5V0) in W,
#: first the idle board (the mean of idle-64gb-jp5 and idle-64gb-go), then jp7-12pct and r36-305mhz
SYS5V_SNAPSHOTS_W = (((2.399 + 2.340) / 2 + (0.400 + 0.390) / 2, (4.032 + 4.025) / 2),
                     (5.139 + 3.268, 5.500), (3.205 + 4.405, 4.767))


def sys5v_share(snapshots=SYS5V_SNAPSHOTS_W) -> float:
    """VIN_SYS_5V0's watts per watt of CPU+GPU power above idle: the least-squares slope through the idle
    snapshot (Σ ΔP·ΔS / Σ ΔP²) of the loaded ones; 0.2148 from the two above."""
    (p0, s0), loaded = snapshots[0], snapshots[1:]
    return sum((p - p0) * (s - s0) for p, s in loaded) / sum((p - p0) ** 2 for p, _ in loaded)


ORIN_SYS_W_PER_W = sys5v_share()


def agx_orin_64gb(fitted: Mapping[str, float]) -> BoardProfile:
    """The AGX Orin 64GB profile with the fitted parameters ``fitted`` (:data:`ORIN_FITTED`).

    Sources of every other number: docs/calibration.md, section 2 (same order).
    """
    missing = [k for k in ORIN_FITTED if k not in fitted]
    if missing:
        raise DvfsError(f"agx-orin-64gb: the calibration lacks {missing}; run `dvfslab calibrate`")
    rails = {r: float(fitted[r]) for r in ("VIN_SYS_5V0", "VDDQ_VDD2_1V8AO")}
    return BoardProfile(
        board=records.AGX_ORIN_64GB, other_rails_w=rails, calibrated=True,
        gemm_flops_at_fmax=2.09e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=185.2,
        bw_sat_mhz=612.0, kernel_min_us_at_fmax=4.0,
        emc_idle_mhz=2133.0, emc_w_per_ghz=0.56,
        cpu_op_us=43.2, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
        ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=25.0, overlap_p=4.0, first_step_extra_s=0.3,
        v_max=1.0, v_min=0.60, gpu_leak_w_at_vmax=1.2,
        activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
        soc_pj_per_byte=16.0, dram_pj_per_byte=16.0,
        cpu_busy_cores_training=1.3, cpu_clusters_training=1.0, storage_write_mb_s=200.0,
        checkpoint_bytes_per_param=12.0, emc_bw_exp=1.0, dram_w_per_ghz=0.0, sys_w_per_w=ORIN_SYS_W_PER_W,
        **{k: float(fitted[k]) for k in ORIN_FITTED if k not in rails},
    )


def read_calibration(path: Path = ORIN_CALIBRATION) -> dict:
    """The checked-in calibration file (``dvfslab calibrate`` writes it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DvfsError(f"{path}: cannot read the twin's calibration ({err}); run `dvfslab calibrate`") from err


AGX_ORIN_64GB = agx_orin_64gb(read_calibration()["parameters"])

#: the Orin NX / Nano platform's idle rails (W): an Orin Nano 8GB's idle tegrastats (tests/test_tegrastats.py,
#: ``_NANO_IDLE``): VDD_IN 4.761, VDD_CPU_GPU_CV 0.515, VDD_SOC 1.428 (*unverified* on an Orin NX 16GB)
P3767_IDLE_W = {"VDD_IN": 4.761, "VDD_CPU_GPU_CV": 0.515, "VDD_SOC": 1.428}


def scaled_orin(base: BoardProfile, board: Board, *, dram_bw_gbs: float, idle_w: Mapping[str, float],
                input_rail: str) -> BoardProfile:
    """An uncalibrated profile of another Orin module from the AGX Orin's physics (docs/calibration.md,
    section 2, "Other modules"): the same silicon per TPC and per core, so the GPU's rate and
    power scale with its TPCs and its top clock at the AGX Orin's V(f) line, the CPU's with its top
    clock; the idle rails and the memory bandwidth are the given readings."""
    f_top, v_top = board.gpu_levels_mhz[-1], base.v_max - base.v_slope_per_mhz * (base.fmax_mhz - board.gpu_levels_mhz[-1])
    tpc, fr, vr = board.n_tpc / base.n_tpc, f_top / base.fmax_mhz, max(base.v_min, v_top) / base.v_max
    cpu_r = board.cpu_max_mhz / base.cpu_fmax_mhz
    rest = idle_w[input_rail] - sum(w for r, w in idle_w.items() if r != input_rail)
    return dataclasses.replace(
        base, board=board, calibrated=False, other_rails_w={input_rail: rest},
        gemm_flops_at_fmax=base.gemm_flops_at_fmax * tpc * fr, dram_bw_gbs=dram_bw_gbs,
        bw_sat_mhz=min(base.bw_sat_mhz, f_top), kernel_min_us_at_fmax=base.kernel_min_us_at_fmax / fr,
        v_max=max(base.v_min, v_top), gpu_leak_w_at_vmax=base.gpu_leak_w_at_vmax * tpc * vr**3,
        gpu_clock_w_at_fmax=base.gpu_clock_w_at_fmax * tpc * vr**2 * fr,
        gpu_dyn_w_at_fmax=base.gpu_dyn_w_at_fmax * tpc * vr**2 * fr,
        soc_idle_w=idle_w["VDD_SOC"], cpu_idle_w=idle_w["VDD_CPU_GPU_CV"],
        cpu_core_w_at_max=base.cpu_core_w_at_max * cpu_r**base.cpu_power_exp,
        cpu_cluster_w=base.cpu_cluster_w * cpu_r**base.cpu_power_exp, cpu_op_us=base.cpu_op_us / cpu_r,
        cpu_step_serial_ms=base.cpu_step_serial_ms / cpu_r, emc_idle_mhz=2133.0, sys_w_per_w=0.0,
        extra={"note": f"uncalibrated: the AGX Orin's physics scaled to the {board.display_name} (docs/calibration.md)"},
    )


#: an Orin NX 16GB: 69.5 GB/s, a user's GPU copy benchmark (read + write) at MAXN on a p3767-0000 (*unverified*)
ORIN_NX_16GB = scaled_orin(AGX_ORIN_64GB, records.ORIN_NX_16GB, dram_bw_gbs=69.5, idle_w=P3767_IDLE_W,
                           input_rail="VDD_IN")

#: an Orin NX 8GB and an Orin Nano 8GB (p3767 modules like the NX 16GB): the same copy bandwidth as the NX
#: 16GB's (the same 128-bit LPDDR5 at 3199 MHz) and, for the Nano (LPDDR5 at 2133 MHz), that figure x 2133/3199
#: (*unverified* both); the idle rails are the Orin Nano 8GB's own tegrastats
ORIN_NX_8GB = scaled_orin(AGX_ORIN_64GB, records.ORIN_NX_8GB, dram_bw_gbs=69.5, idle_w=P3767_IDLE_W,
                          input_rail="VDD_IN")
ORIN_NANO_8GB = scaled_orin(AGX_ORIN_64GB, records.ORIN_NANO_8GB, dram_bw_gbs=round(69.5 * 2133.0 / 3199.0, 1),
                            idle_w=P3767_IDLE_W, input_rail="VDD_IN")

AGX_XAVIER = BoardProfile(
    board=records.AGX_XAVIER, other_rails_w={"SOC": 2.9, "CV": 0.4, "VDDRQ": 0.8, "SYS5V": 3.5},
    calibrated=False,
    gemm_flops_at_fmax=0.56e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=105.0,
    bw_sat_mhz=675.75, kernel_min_us_at_fmax=5.0,
    emc_idle_mhz=1600.0, emc_w_per_ghz=0.0,
    cpu_op_us=40.0, ops_per_layer_encoder=184.0, ops_per_layer_decoder=151.0, ops_fixed=72.0,
    ops_per_tensor_optimizer=2.4, cpu_step_serial_ms=18.0, overlap_p=4.0, first_step_extra_s=0.4,
    v_max=1.05, v_min=0.62, v_slope_per_mhz=4.0e-4,
    soc_idle_w=0.0, gpu_leak_w_at_vmax=1.2, gpu_clock_w_at_fmax=0.8, gpu_dyn_w_at_fmax=16.0,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30,
    soc_pj_per_byte=0.0, dram_pj_per_byte=20.0,
    cpu_idle_w=0.8, cpu_cluster_w=0.0, cpu_core_w_at_max=1.0, cpu_power_exp=2.0, cpu_busy_cores_training=1.3,
    cpu_clusters_training=0.0, storage_write_mb_s=200.0, checkpoint_bytes_per_param=12.0,
    extra={"note": "illustrative profile for exercising the pipeline on a 14-level table; not calibrated "
                   "(its SoC floor, 0.4 W, is on its own SOC rail, outside the CPU+GPU total)"},
)

PROFILES: dict[str, BoardProfile] = {p.name: p for p in (AGX_ORIN_64GB, ORIN_NX_16GB, ORIN_NX_8GB, ORIN_NANO_8GB,
                                                         AGX_XAVIER)}


def get_profile(name: str) -> BoardProfile:
    """The board profile ``name``; :class:`DvfsError` listing the known boards otherwise."""
    if name not in PROFILES:
        raise DvfsError(f"unknown simulated board {name!r}; choose one of: {', '.join(PROFILES)}")
    return PROFILES[name]
