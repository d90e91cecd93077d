"""Physics of the simulated Jetson (digital twin): board profiles, step time, power.

Everything here is a pure, vectorized function of the board profile, the workload and the GPU
clock; :mod:`dvfslab.sim.board` adds the virtual clock, the governor and the protocols.
Every parameter and its source is listed in ``docs/calibration.md``. The model in one screen:

* training work per step (fp32, AdamW, eager PyTorch, HF ``Trainer``) from the model config,
  batch size ``B`` and padded sequence length ``s`` (dynamic padding): matmul FLOPs
  ``6·N_mm·B·s`` (Kaplan et al. 2020) plus attention ``12·L·B·s²·d``; bytes moved by
  element-wise kernels ``(40·d + 8·ff + 12·heads·s)·4`` per token and layer, plus 44 bytes per
  parameter for gradients, clipping and AdamW; a kernel count ``70·L + 80``;
* GPU time: matmuls at the measured fp32 GEMM rate scaled by ``f/f_max`` and a size efficiency,
  memory traffic at the measured STREAM bandwidth (reduced below ``bw_sat_mhz``), a minimum
  duration per kernel ∝ ``1/f``;
* CPU time that does not scale with the GPU clock: a serial part per step (data collation in the
  main process, Trainer bookkeeping, the per-step device sync of ``logging_nan_inf_filter``) and
  a launch cost per kernel that overlaps the GPU work: ``T = t_serial + (t_launch^p + t_gpu^p)^(1/p)``;
  GPU utilization is ``t_gpu / T``;
* power: ``VDD_GPU_SOC = P_soc + P_leak·(V/V_max)³ + P_dyn·(V/V_max)²·(f/f_max)·activity +
  e_byte·bytes/s``, with a linear V(f) above a floor; ``VDD_CPU_CV = P_idle + P_core·cores``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dvfslab.hw.base import DvfsError

# --------------------------------------------------------------------------------------------
# Board profiles
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerMode:
    """An nvpmodel mode: GPU cap, fraction of GPU TPCs powered, CPU clock cap."""

    mode_id: int
    name: str
    gpu_max_mhz: float
    tpc_fraction: float
    cpu_max_mhz: float


@dataclass(frozen=True)
class BoardProfile:
    """Everything the twin knows about one board. Units are in the names."""

    name: str
    display_name: str
    gpu: str
    levels_mhz: tuple[float, ...]
    gpu_rail: str
    cpu_rail: str
    other_rails_w: Mapping[str, float]  # rails read but not in the CPU+GPU total: constant watts
    dram_rail: str | None  # the rail (among other_rails_w) that also carries DRAM traffic power
    power_modes: tuple[PowerMode, ...]
    calibrated: bool
    # compute and memory
    gemm_flops_at_fmax: float  # sustained fp32 GEMM, FLOP/s, at the top level
    gemm_half_dim: float  # inner dimension at which a matmul reaches half that rate
    gemm_half_rows: float  # rows (tokens) at which a matmul reaches half that rate
    dram_bw_gbs: float  # best STREAM bandwidth
    bw_sat_mhz: float  # GPU clock above which the SMs saturate DRAM bandwidth
    kernel_min_us_at_fmax: float  # shortest GPU time of a kernel at the top level
    # CPU side (does not scale with the GPU clock)
    cpu_launch_us: float  # CPU time per kernel launch (dispatcher + autograd + launch)
    cpu_step_serial_ms: float  # serial per-step work: collation, Trainer loop, sync
    cpu_per_tensor_us: float  # serial per parameter tensor: optimizer, zero_grad, clipping lists
    overlap_p: float  # smooth-max exponent for the overlap of launch and GPU work
    first_step_extra_s: float  # CUDA lazy init / allocator warm-up on the first step
    # voltage
    v_max: float
    v_min: float
    v_slope_per_mhz: float
    # GPU rail
    soc_idle_w: float
    gpu_leak_w_at_vmax: float
    gpu_dyn_w_at_fmax: float  # dynamic power at f_max, V_max, activity 1 (the stress test)
    activity_matmul: float
    activity_memory: float
    activity_kernel_overhead: float
    activity_idle: float
    soc_pj_per_byte: float
    dram_pj_per_byte: float
    # CPU rail
    cpu_idle_w: float
    cpu_core_w_at_max: float
    cpu_busy_cores_training: float
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


ORIN_LEVELS_MHZ = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
XAVIER_LEVELS_MHZ = (114.75, 216.75, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25,
                     1032.75, 1198.5, 1236.75, 1338.75, 1377.0)

AGX_ORIN_64GB = BoardProfile(
    name="agx-orin-64gb", display_name="Jetson AGX Orin 64GB (simulated)", gpu="ga10b",
    levels_mhz=ORIN_LEVELS_MHZ, gpu_rail="VDD_GPU_SOC", cpu_rail="VDD_CPU_CV",
    other_rails_w={"VIN_SYS_5V0": 4.5, "VDDQ_VDD2_1V8AO": 0.7}, dram_rail="VDDQ_VDD2_1V8AO",
    power_modes=(PowerMode(0, "MAXN", 1300.5, 1.0, 2201.6), PowerMode(1, "MODE_15W", 408.0, 0.375, 1113.6),
                 PowerMode(2, "MODE_30W", 612.0, 0.5, 1728.0), PowerMode(3, "MODE_50W", 816.0, 1.0, 1497.6)),
    calibrated=True,
    gemm_flops_at_fmax=2.09e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=185.2,
    bw_sat_mhz=612.0, kernel_min_us_at_fmax=4.0,
    cpu_launch_us=35.0, cpu_step_serial_ms=25.0, cpu_per_tensor_us=5.0, overlap_p=4.0,
    first_step_extra_s=0.3,
    v_max=1.0, v_min=0.60, v_slope_per_mhz=4.128e-4,
    soc_idle_w=3.0, gpu_leak_w_at_vmax=2.0, gpu_dyn_w_at_fmax=35.0,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30, activity_idle=0.05,
    soc_pj_per_byte=16.0, dram_pj_per_byte=16.0,
    cpu_idle_w=1.0, cpu_core_w_at_max=1.18, cpu_busy_cores_training=1.3,
)

AGX_XAVIER = BoardProfile(
    name="agx-xavier", display_name="Jetson AGX Xavier (simulated, uncalibrated)", gpu="gv11b",
    levels_mhz=XAVIER_LEVELS_MHZ, gpu_rail="GPU", cpu_rail="CPU",
    other_rails_w={"SOC": 2.5, "CV": 0.4, "VDDRQ": 0.8, "SYS5V": 3.5}, dram_rail="VDDRQ",
    power_modes=(PowerMode(0, "MAXN", 1377.0, 1.0, 2265.6), PowerMode(3, "MODE_30W_ALL", 1032.75, 1.0, 1200.0)),
    calibrated=False,
    gemm_flops_at_fmax=0.56e12, gemm_half_dim=128.0, gemm_half_rows=128.0, dram_bw_gbs=105.0,
    bw_sat_mhz=675.75, kernel_min_us_at_fmax=5.0,
    cpu_launch_us=30.0, cpu_step_serial_ms=18.0, cpu_per_tensor_us=6.0, overlap_p=4.0,
    first_step_extra_s=0.4,
    v_max=1.05, v_min=0.62, v_slope_per_mhz=4.0e-4,
    soc_idle_w=0.4, gpu_leak_w_at_vmax=1.2, gpu_dyn_w_at_fmax=16.0,
    activity_matmul=0.85, activity_memory=0.45, activity_kernel_overhead=0.30, activity_idle=0.05,
    soc_pj_per_byte=0.0, dram_pj_per_byte=20.0,
    cpu_idle_w=0.8, cpu_core_w_at_max=1.0, cpu_busy_cores_training=1.3,
    extra={"note": "illustrative profile for exercising the pipeline on a 14-level table; not calibrated"},
)

PROFILES: dict[str, BoardProfile] = {p.name: p for p in (AGX_ORIN_64GB, AGX_XAVIER)}


def get_profile(name: str) -> BoardProfile:
    """The board profile ``name``; :class:`DvfsError` listing the known boards otherwise."""
    if name not in PROFILES:
        raise DvfsError(f"unknown simulated board {name!r}; choose one of: {', '.join(PROFILES)}")
    return PROFILES[name]


# --------------------------------------------------------------------------------------------
# Voltage and power
# --------------------------------------------------------------------------------------------


def voltage_v(profile: BoardProfile, freq_mhz) -> np.ndarray:
    """GPU rail voltage: linear in f down to a floor (an assumption; no public V–f table)."""
    f = np.asarray(freq_mhz, dtype=float)
    return np.maximum(profile.v_min, profile.v_max - profile.v_slope_per_mhz * (profile.fmax_mhz - f))


def gpu_rail_w(profile: BoardProfile, freq_mhz, activity, bytes_per_s=0.0, *, tpc_fraction: float = 1.0,
               power_scale=1.0) -> np.ndarray:
    """Power of the GPU rail (W) at a clock, a mean switching activity (0–1) and DRAM traffic."""
    f = np.asarray(freq_mhz, dtype=float)
    vr = voltage_v(profile, f) / profile.v_max
    leak = profile.gpu_leak_w_at_vmax * vr**3
    dyn = profile.gpu_dyn_w_at_fmax * vr**2 * (f / profile.fmax_mhz) * np.asarray(activity, dtype=float)
    mem = profile.soc_pj_per_byte * 1e-12 * np.asarray(bytes_per_s, dtype=float)
    return profile.soc_idle_w + tpc_fraction * (leak + dyn) * power_scale + mem


def cpu_rail_w(profile: BoardProfile, busy_cores, *, cpu_clock_ratio: float = 1.0) -> np.ndarray:
    """Power of the CPU rail (W): idle plus busy cores (dynamic power ∝ f·V² ≈ f² for the CPU)."""
    return profile.cpu_idle_w + profile.cpu_core_w_at_max * cpu_clock_ratio**2 * np.asarray(busy_cores, dtype=float)


def stress_test_gpu_rail_w(profile: BoardProfile, mode: int | str) -> float:
    """GPU-rail power of a GPU stress test (activity 1) in a power mode: the calibration check."""
    pm = profile.power_mode(mode)
    return float(gpu_rail_w(profile, pm.gpu_max_mhz, 1.0, tpc_fraction=pm.tpc_fraction))


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

KERNELS_PER_LAYER = 70  # eager PyTorch: ~25 forward + ~45 backward kernels per transformer layer
KERNELS_FIXED = 80  # embeddings, head, loss, grad clipping and foreach AdamW
OPTIMIZER_BYTES_PER_PARAM = 44  # grad write 4 + clip (norm 4, scale 8) + AdamW foreach (r 16, w 12)
ELEMENTWISE_D, ELEMENTWISE_FF, ELEMENTWISE_ATT = 40, 8, 12  # fp32 values moved per token and layer


@dataclass(frozen=True)
class SimWorkload:
    """What the twin needs to know about a fine-tuning workload."""

    workload_id: str
    n_layers: int
    hidden_size: int
    n_heads: int
    ffn_size: int
    params_total: float
    matmul_params: float
    param_tensors: int
    avg_seq_len: float
    max_seq_len: int
    batch_size: int
    seq_len_cv: float = 0.5

    @classmethod
    def from_row(cls, row: Mapping) -> SimWorkload:
        """From a ``workloads.csv`` row; the catalog fills in heads, FFN and exact counts.

        A model that is not in the catalog gets heads = hidden/64, FFN = 4·hidden and its
        ``params_m`` as the parameter count; a task that is not in the catalog a length spread
        (coefficient of variation) of 0.5.
        """
        from dvfslab.data.catalog import MODELS, TASKS

        d, layers = int(row["hidden_size"]), int(row["n_layers"])
        spec = MODELS.get(str(row.get("model", "")))
        if spec is not None and (spec.hidden_size, spec.n_layers) == (d, layers):
            heads, ff, mm, tensors = spec.n_heads, spec.ffn_size, spec.matmul_params(), spec.param_tensors()
            total = float(row.get("params_m") or spec.params() / 1e6) * 1e6
        else:
            heads, ff = max(1, d // 64), 4 * d
            mm, tensors, total = layers * (4 * d * d + 2 * d * ff), 16 * layers + 10, float(row["params_m"]) * 1e6
        task = TASKS.get(str(row.get("task", "")))
        return cls(str(row["workload_id"]), layers, d, heads, ff, total, float(mm), tensors,
                   float(row["avg_seq_len"]), int(row["max_seq_len"]), int(row["batch_size"]),
                   task.seq_len_cv if task is not None else 0.5)

    @classmethod
    def from_catalog(cls, model: str, task: str, **kwargs) -> SimWorkload:
        from dvfslab.data.catalog import workload_row

        return cls.from_row(workload_row(model, task, **kwargs))

    def padded_lengths(self, rng: np.random.Generator, n_steps: int) -> np.ndarray:
        """Padded sequence length of each step's batch (dynamic padding: the batch's longest).

        Example lengths are log-normal with mean ``avg_seq_len`` and coefficient of variation
        ``seq_len_cv``, clipped to ``[2, max_seq_len]``.
        """
        sigma2 = np.log1p(self.seq_len_cv**2)
        mu = np.log(self.avg_seq_len) - sigma2 / 2
        lengths = np.ceil(rng.lognormal(mu, np.sqrt(sigma2), size=(n_steps, self.batch_size)))
        return np.clip(lengths, 2, self.max_seq_len).max(axis=1)


@dataclass
class StepTable:
    """Per-step quantities for each step (rows) at each clock (columns)."""

    freq_mhz: np.ndarray  # (k,)
    time_s: np.ndarray  # (n, k)
    gpu_busy_s: np.ndarray  # (n, k)
    util: np.ndarray  # (n, k), 0–1
    gpu_w: np.ndarray  # (n, k)
    cpu_w: np.ndarray  # (n, k)
    dram_w: np.ndarray  # (n, k): DRAM traffic power on the profile's dram_rail (not in the total)
    bytes_per_step: np.ndarray  # (n,)

    @property
    def total_w(self) -> np.ndarray:
        return self.gpu_w + self.cpu_w


def _efficiency(dim, rows, profile: BoardProfile):
    return dim / (dim + profile.gemm_half_dim) * rows / (rows + profile.gemm_half_rows)


def step_table(profile: BoardProfile, wl: SimWorkload, seq_len, freq_mhz, *, mode: PowerMode | None = None,
               cpu_scale=1.0, gpu_scale=1.0, power_scale=1.0, first_step: bool = True) -> StepTable:
    """Time, utilization and rail power of each step (padded length ``seq_len[i]``) at each clock.

    ``cpu_scale`` (scalar or per step), ``gpu_scale`` and ``power_scale`` are the run's noise
    factors (1 = nominal). ``first_step`` adds the warm-up cost to step 0.
    """
    mode = mode or profile.power_modes[0]
    s = np.asarray(seq_len, dtype=float)[:, None]
    f = np.atleast_1d(np.asarray(freq_mhz, dtype=float))[None, :]
    L, d, h, B = wl.n_layers, wl.hidden_size, wl.n_heads, wl.batch_size
    tokens = B * s
    clock = f / profile.fmax_mhz * mode.tpc_fraction
    rate = profile.gemm_flops_at_fmax * clock
    t_linear = 6.0 * wl.matmul_params * tokens / (rate * _efficiency(d, tokens, profile))
    t_attn = 12.0 * L * tokens * s * d / (rate * _efficiency(d / h, B * h * s, profile))
    elem = (ELEMENTWISE_D * d + ELEMENTWISE_FF * wl.ffn_size + ELEMENTWISE_ATT * h * s) * 4.0 * L * tokens
    nbytes = elem + OPTIMIZER_BYTES_PER_PARAM * wl.params_total
    bw = profile.dram_bw_gbs * 1e9 * np.minimum(1.0, f / profile.bw_sat_mhz)
    t_mem = nbytes / bw
    kernels = KERNELS_PER_LAYER * L + KERNELS_FIXED
    t_kern = kernels * profile.kernel_min_us_at_fmax * 1e-6 / clock
    t_gpu = (t_linear + t_attn + t_mem + t_kern) * gpu_scale
    activity_busy = (profile.activity_matmul * (t_linear + t_attn) + profile.activity_memory * t_mem
                     + profile.activity_kernel_overhead * t_kern) * gpu_scale / t_gpu

    cpu_ratio = profile.power_modes[0].cpu_max_mhz / mode.cpu_max_mhz
    cpu_scale = np.asarray(cpu_scale, dtype=float).reshape(-1, 1) * cpu_ratio
    t_launch = kernels * profile.cpu_launch_us * 1e-6 * cpu_scale
    t_serial = (profile.cpu_step_serial_ms * 1e-3 + wl.param_tensors * profile.cpu_per_tensor_us * 1e-6) * cpu_scale
    if first_step:
        t_serial = t_serial + np.where(np.arange(s.shape[0])[:, None] == 0, profile.first_step_extra_s, 0.0)
    p = profile.overlap_p
    time_s = t_serial + (t_launch**p + t_gpu**p) ** (1.0 / p)
    util = t_gpu / time_s
    activity = activity_busy * util + profile.activity_idle * (1.0 - util)
    bytes_per_s = nbytes / time_s
    gpu_w = gpu_rail_w(profile, f, activity, bytes_per_s, tpc_fraction=mode.tpc_fraction, power_scale=power_scale)
    cpu_w = cpu_rail_w(profile, profile.cpu_busy_cores_training, cpu_clock_ratio=1.0 / cpu_ratio)
    dram_w = profile.dram_pj_per_byte * 1e-12 * bytes_per_s
    shape = time_s.shape
    return StepTable(f.ravel(), time_s, t_gpu * np.ones(shape), util, gpu_w,
                     np.broadcast_to(cpu_w, shape).astype(float), np.broadcast_to(dram_w, shape).astype(float),
                     nbytes[:, 0])


def idle_power_w(profile: BoardProfile, freq_mhz: float, *, mode: PowerMode | None = None) -> tuple[float, float]:
    """(GPU rail, CPU rail) watts of an idle board with the GPU clocked at ``freq_mhz``."""
    mode = mode or profile.power_modes[0]
    gpu = float(gpu_rail_w(profile, freq_mhz, profile.activity_idle, tpc_fraction=mode.tpc_fraction))
    return gpu, float(profile.cpu_idle_w)
