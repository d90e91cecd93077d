"""Physics of the simulated Jetson (digital twin): step time, phases and rail power.

Everything here is a pure, vectorized function of the board profile
(:mod:`dvfslab.sim.profiles`), the workload and the GPU clock; :mod:`dvfslab.sim.board` adds the
virtual clock, the governor and the protocols. Every parameter and its source is listed in
``docs/calibration.md``. The model in one screen:

* training work per step (fp32 or mixed fp16/bf16 — :data:`GEMM_SPEEDUP`, :data:`ACTIVATION_BYTES` —,
  AdamW, eager PyTorch, HF ``Trainer``) from the model config,
  batch size ``B`` and padded sequence length ``s`` (dynamic padding): matmul FLOPs
  ``6·N_mm·B·s`` (Kaplan et al. 2020) plus attention ``12·L·B·s²·d``; bytes moved by
  element-wise kernels ``(40·d + 8·ff + 12·heads·s)·4`` per token and layer, plus 44 bytes per
  parameter for gradients, clipping and AdamW; a kernel count ``70·L + 80``;
* GPU time: matmuls at the measured fp32 GEMM rate scaled by ``f/f_max`` and a size efficiency,
  memory traffic at the measured STREAM bandwidth (reduced below ``bw_sat_mhz`` and at a lower
  EMC level), a minimum duration per kernel ∝ ``1/f``;
* CPU time that does not scale with the GPU clock: a serial part per step (collation, Trainer
  bookkeeping, the per-step sync) and a dispatch cost per operator (measured on a CPU, scaled to
  the Cortex-A78AE) that overlaps the GPU work: ``T = t_serial + (t_ops^p + t_gpu^p)^(1/p)``;
  GPU utilization is ``t_gpu / T``;
* non-training phases inside the measured window (:func:`phase_table`): evaluation passes and
  checkpoint writes, amortized over the run;
* power: ``VDD_GPU_SOC = P_soc + k_emc·(f_emc − f_emc,idle) + e_byte·bytes/s + P_leak·(V/V_max)³ +
  (P_clk + P_dyn·activity)·(V/V_max)²·(f/f_max)``, with a linear V(f) above a floor and the EMC
  level following the GPU clock; ``VDD_CPU_CV = P_idle + (P_cluster·clusters + P_core·cores)·(f_cpu/f_cpu,max)^k``;
  the DRAM rail ``e_dram·bytes/s + k_dram·(f_emc − f_emc,idle)``;
* the other clocks as inputs (issue #32): ``emc_mhz`` pins the EMC (bandwidth
  ``∝ (f_emc/f_emc,top)^emc_bw_exp``, the EMC terms of the GPU/SoC and DRAM rails at that clock) and
  ``cpu_mhz`` the CPU clusters (CPU times ∝ ``f_cpu,max/f_cpu``, the CPU rail as above); None keeps
  the rules above (:func:`clock_inputs` checks them against the mode's caps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.sim.profiles import (  # noqa: F401  (re-exported: the twin's historical import path)
    AGX_ORIN_64GB,
    AGX_XAVIER,
    ORIN_LEVELS_MHZ,
    PROFILES,
    XAVIER_LEVELS_MHZ,
    BoardProfile,
    PowerMode,
    get_profile,
)

# --------------------------------------------------------------------------------------------
# Voltage, memory clock and power
# --------------------------------------------------------------------------------------------


def voltage_v(profile: BoardProfile, freq_mhz) -> np.ndarray:
    """GPU rail voltage: linear in f down to a floor (an assumption; no public V–f table)."""
    f = np.asarray(freq_mhz, dtype=float)
    return np.maximum(profile.v_min, profile.v_max - profile.v_slope_per_mhz * (profile.fmax_mhz - f))


def emc_mhz(profile: BoardProfile, freq_mhz, *, mode: PowerMode | None = None) -> np.ndarray:
    """EMC level while the GPU works at ``freq_mhz``: the lowest level at or above
    ``emc_top·f/f_max`` and at least the idle level, capped by the power mode (an assumption
    anchored on tegrastats: 3199 MHz with the GPU at 1300 MHz, 2133 MHz at 305 MHz)."""
    levels = np.asarray(profile.emc_levels_mhz, dtype=float)
    want = np.maximum(levels[-1] * np.asarray(freq_mhz, dtype=float) / profile.fmax_mhz, profile.emc_idle_mhz)
    out = levels[np.minimum(np.searchsorted(levels, want - 1e-9), levels.size - 1)]
    if mode is not None:
        out = np.minimum(out, profile.emc_cap_mhz(mode))
    return out


def gpu_rail_parts_w(profile: BoardProfile, freq_mhz, activity, bytes_per_s=0.0, *, tpc_fraction: float = 1.0,
                     power_scale=1.0, emc=None, powered: bool = True) -> dict[str, np.ndarray]:
    """The GPU rail's terms (W): ``soc`` floor, ``emc`` above its idle level, DRAM ``traffic``
    through the memory controller, GPU ``leakage``, ``clock`` tree and ``dynamic`` power.

    ``activity`` is the mean switching activity (0–1: busy fraction × activity while busy);
    ``powered=False`` is a rail-gated GPU (an idle board).
    """
    f = np.asarray(freq_mhz, dtype=float)
    vr = voltage_v(profile, f) / profile.v_max
    on = tpc_fraction * power_scale * (1.0 if powered else 0.0)
    emc_now = profile.emc_idle_mhz if emc is None else np.asarray(emc, dtype=float)
    fr = f / profile.fmax_mhz
    return {
        "soc": np.full(np.broadcast(f, np.asarray(activity)).shape, profile.soc_idle_w),
        "emc": profile.emc_w_per_ghz * (emc_now - profile.emc_idle_mhz) / 1000.0 * np.ones_like(f),
        "traffic": profile.soc_pj_per_byte * 1e-12 * np.asarray(bytes_per_s, dtype=float),
        "leakage": on * profile.gpu_leak_w_at_vmax * vr**3,
        "clock": on * profile.gpu_clock_w_at_fmax * vr**2 * fr,
        "dynamic": on * profile.gpu_dyn_w_at_fmax * vr**2 * fr * np.asarray(activity, dtype=float),
    }


def gpu_rail_w(profile: BoardProfile, freq_mhz, activity, bytes_per_s=0.0, **kwargs) -> np.ndarray:
    """Power of the GPU rail (W): the sum of :func:`gpu_rail_parts_w`."""
    return sum(gpu_rail_parts_w(profile, freq_mhz, activity, bytes_per_s, **kwargs).values())


#: the terms of :func:`gpu_rail_parts_w` that are the SoC's, not the GPU's (the record's ``soc`` load)
SOC_PARTS = ("soc", "emc", "traffic")


def sys_rail_w(profile: BoardProfile, total_w) -> np.ndarray:
    """The board's 5 V system rail above its idle watts: ``sys_w_per_w`` of the CPU+GPU power above
    an idle board's (docs/calibration.md, "The SYS5V rail"); the mode acts through that power."""
    idle = sum(idle_power_w(profile, profile.fmin_mhz))
    return profile.sys_w_per_w * np.maximum(0.0, np.asarray(total_w, dtype=float) - idle)


def rail_watts(profile: BoardProfile, gpu_w, cpu_w, dram_w, soc_w) -> dict:
    """Every rail of the module record from the physics' loads (W; arrays broadcast): a rail reads
    the loads it feeds, each load counted on one rail only (an Orin NX's ``VDD_CPU_GPU_CV`` reads
    the CPU *and* the GPU), plus its idle watts; an input rail (``VDD_IN``) reads every load plus
    the module's remainder. ``gpu_w`` includes ``soc_w`` (the SoC share), as :class:`StepTable` does."""
    gpu_w, cpu_w = np.asarray(gpu_w, dtype=float), np.asarray(cpu_w, dtype=float)
    soc_w, dram_w = np.asarray(soc_w, dtype=float), np.asarray(dram_w, dtype=float)
    loads = {"gpu": gpu_w - soc_w, "soc": soc_w, "cpu": cpu_w, "dram": dram_w,
             "sys": sys_rail_w(profile, gpu_w + cpu_w), "cv": np.zeros_like(gpu_w)}
    board, out = profile.board, {}
    for rail in board.rails:
        fed = loads if rail.is_input else {k: v for k, v in loads.items() if k in rail.feeds}
        idle = sum(profile.other_rails_w.values()) if rail.is_input else profile.other_rails_w.get(rail.name, 0.0)
        out[rail.name] = sum(fed.values(), np.zeros_like(gpu_w)) + idle
    return out


def module_w(profile: BoardProfile, gpu_w, cpu_w, dram_w, soc_w) -> np.ndarray:
    """The whole module's power (W): its input rail alone when it has one (it reads every load),
    else the sum of every rail (:func:`rail_watts`; the record's ``board_rails``)."""
    rails = rail_watts(profile, gpu_w, cpu_w, dram_w, soc_w)
    return sum((rails[r] for r in profile.board.board_rails), np.zeros_like(np.asarray(gpu_w, dtype=float)))


def cpu_rail_w(profile: BoardProfile, busy_cores, *, clusters=0.0, cpu_clock_ratio=1.0) -> np.ndarray:
    """Power of the CPU rail (W): idle, plus clusters clocked up and busy cores at ``cpu_clock_ratio``
    of the top CPU clock, both ∝ ratio^cpu_power_exp (f·V²)."""
    scale = np.asarray(cpu_clock_ratio, dtype=float) ** profile.cpu_power_exp
    return profile.cpu_idle_w + scale * (profile.cpu_cluster_w * np.asarray(clusters, dtype=float)
                                         + profile.cpu_core_w_at_max * np.asarray(busy_cores, dtype=float))


def stress_test_gpu_rail_w(profile: BoardProfile, mode: int | str) -> float:
    """GPU-rail power of a GPU stress test (activity 1) in a power mode: the calibration check."""
    pm = profile.power_mode(mode)
    f = profile.gpu_cap_mhz(pm)
    return float(gpu_rail_w(profile, f, 1.0, tpc_fraction=profile.tpc_fraction(pm), emc=emc_mhz(profile, f, mode=pm)))


def idle_power_w(profile: BoardProfile, freq_mhz: float, *, mode: PowerMode | None = None) -> tuple[float, float]:
    """(GPU rail, CPU rail) watts of an idle board: GPU rail-gated, EMC at its idle level
    (whatever level is locked: the clock applies when the GPU wakes up)."""
    gpu = float(gpu_rail_w(profile, freq_mhz, 0.0, powered=False))
    return gpu, float(profile.cpu_idle_w)


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------

#: Peak GEMM rate of each precision relative to fp32 on the AGX Orin's GPU. NVIDIA's Jetson AGX Orin
#: Series Technical Brief (v1.2): 2048 CUDA cores, "5.3 FP32 TFLOPs", and 64 third-generation Tensor
#: Cores, "170 Sparse TOPs of INT8"; an Ampere Tensor Core's dense rate is half its sparse rate and its
#: FP16 (and BF16) rate half its INT8 rate (NVIDIA A100 Tensor Core GPU Architecture whitepaper: 312
#: dense FP16/BF16 TFLOPS, 624 dense INT8 TOPS, 1248 sparse), so FP16/BF16 = 170 / 2 / 2 = 42.5 TFLOPS
#: dense, 42.5 / 5.3 = 8.02× the fp32 rate. The twin applies the ratio to its sustained (measured)
#: fp32 GEMM rate: that the sustained/peak ratio is the same for both is an assumption.
ORIN_FP32_TFLOPS, ORIN_INT8_SPARSE_TOPS = 5.3, 170.0
GEMM_SPEEDUP = {"fp32": 1.0, "fp16": ORIN_INT8_SPARSE_TOPS / 2 / 2 / ORIN_FP32_TFLOPS,
                "bf16": ORIN_INT8_SPARSE_TOPS / 2 / 2 / ORIN_FP32_TFLOPS}
#: bytes per activation value moved by element-wise kernels (mixed precision keeps fp32 master weights,
#: gradients and optimizer state: those bytes do not change)
ACTIVATION_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0}
PRECISIONS = tuple(GEMM_SPEEDUP)

KERNELS_PER_LAYER = 70  # eager PyTorch: ~25 forward + ~45 backward kernels per transformer layer
KERNELS_FIXED = 80  # embeddings, head, loss, grad clipping and foreach AdamW
OPTIMIZER_BYTES_PER_PARAM = 44  # grad write 4 + clip (norm 4, scale 8) + AdamW foreach (r 16, w 12)
ELEMENTWISE_D, ELEMENTWISE_FF, ELEMENTWISE_ATT = 40, 8, 12  # fp32 values moved per token and layer


@dataclass(frozen=True)
class SimWorkload:
    """What the twin needs to know about a fine-tuning workload.

    ``train_size`` / ``validation_size``: examples in the task's splits (for the amortized
    evaluation passes); ``window_phases``: the non-training phases inside the measured window.
    """

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
    decoder: bool = False
    train_size: int = 0
    validation_size: int = 0
    window_phases: tuple[str, ...] = ()
    precision: str = "fp32"  # "fp32", "fp16" or "bf16" (mixed precision: GEMMs and activations)
    rel_positions: int = 0  # relative-position rows each query also attends to (DeBERTa-v2)

    def __post_init__(self) -> None:
        if self.precision not in GEMM_SPEEDUP:
            raise DvfsError(f"workload {self.workload_id}: precision {self.precision!r} is not one of "
                            f"{', '.join(PRECISIONS)}")

    @classmethod
    def from_row(cls, row: Mapping, *, window_phases: tuple[str, ...] = (), precision: str = "fp32") -> SimWorkload:
        """From a ``workloads.csv`` row; the catalog fills in heads, FFN, exact counts and split sizes.

        A model that is not in the catalog gets heads = hidden/64, FFN = 4·hidden and its
        ``params_m`` as the parameter count; a task that is not in the catalog a length spread
        (coefficient of variation) of 0.5 and no evaluation phase.
        """
        from dvfslab.data.catalog import MODELS, TASKS

        d, layers = int(row["hidden_size"]), int(row["n_layers"])
        spec = MODELS.get(str(row.get("model", "")))
        rel = 0
        if spec is not None and (spec.hidden_size, spec.n_layers) == (d, layers):
            rel = spec.rel_positions
            heads, ff, mm, tensors = spec.n_heads, spec.ffn_size, spec.matmul_params(), spec.param_tensors()
            total = float(row.get("params_m") or spec.params() / 1e6) * 1e6
        else:
            heads, ff = max(1, d // 64), 4 * d
            mm, tensors, total = layers * (4 * d * d + 2 * d * ff), 16 * layers + 10, float(row["params_m"]) * 1e6
        task = TASKS.get(str(row.get("task", "")))
        decoder = str(row.get("model_type", "")) == "decoder"
        return cls(str(row["workload_id"]), layers, d, heads, ff, total, float(mm), tensors,
                   float(row["avg_seq_len"]), int(row["max_seq_len"]), int(row["batch_size"]),
                   task.seq_len_cv if task is not None else 0.5, decoder,
                   task.train_size if task is not None else 0, task.validation_size if task is not None else 0,
                   tuple(window_phases), str(precision), rel)

    @classmethod
    def from_catalog(cls, model: str, task: str, *, window_phases: tuple[str, ...] = (), precision: str = "fp32",
                     **kwargs) -> SimWorkload:
        """A catalog model on a catalog task; ``kwargs`` go to :func:`~dvfslab.data.catalog.workload_row`
        (``batch_size``, ``max_seq_len``, ``avg_seq_len``)."""
        from dvfslab.data.catalog import workload_row

        return cls.from_row(workload_row(model, task, **kwargs), window_phases=window_phases, precision=precision)

    @classmethod
    def from_workload_id(cls, workload_id: str, **kwargs) -> SimWorkload:
        """A catalog workload named ``model/task`` (e.g. ``bert-base/rte``)."""
        model, sep, task = str(workload_id).partition("/")
        if not sep or not model or not task:
            raise DvfsError(f"workload {workload_id!r}: name a catalog workload as model/task "
                            f"(e.g. {model or 'bert-base'}/rte)")
        return cls.from_catalog(model, task, **kwargs)

    def padded_lengths(self, rng: np.random.Generator, n_steps: int) -> np.ndarray:
        """Padded sequence length of each step's batch (dynamic padding: the batch's longest).

        Example lengths are log-normal with mean ``avg_seq_len`` and coefficient of variation
        ``seq_len_cv``, clipped to ``[2, max_seq_len]``.
        """
        sigma2 = np.log1p(self.seq_len_cv**2)
        mu = np.log(self.avg_seq_len) - sigma2 / 2
        lengths = np.ceil(rng.lognormal(mu, np.sqrt(sigma2), size=(n_steps, self.batch_size)))
        return np.clip(lengths, 2, self.max_seq_len).max(axis=1)


def ops_of(profile: BoardProfile, wl: SimWorkload, *, optimizer: bool = True) -> float:
    """Operators dispatched per training step (forward + backward, plus clipping and AdamW)."""
    per_layer = profile.ops_per_layer_decoder if wl.decoder else profile.ops_per_layer_encoder
    ops = wl.n_layers * per_layer + profile.ops_fixed
    return ops + (profile.ops_per_tensor_optimizer * wl.param_tensors if optimizer else 0.0)


FORWARD_OPS_SHARE = 0.4  # forward operators / (forward + backward) in eager PyTorch (benchmarks/cpu_overhead.py)
EVAL_SERIAL_MS = 5.0  # per evaluation batch: collation, logits gathering (assumption)


@dataclass
class StepTable:
    """Per-row quantities (training steps, then phase rows) at each clock (columns)."""

    freq_mhz: np.ndarray  # (k,)
    time_s: np.ndarray  # (n, k)
    gpu_busy_s: np.ndarray  # (n, k)
    util: np.ndarray  # (n, k), 0–1
    gpu_w: np.ndarray  # (n, k)
    cpu_w: np.ndarray  # (n, k)
    dram_w: np.ndarray  # (n, k): DRAM traffic power on the profile's dram_rail (not in the total)
    bytes_per_step: np.ndarray  # (n,)
    phase: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))  # (n,): "train", ...
    gpu_parts: dict = field(default_factory=dict)  # term -> (n, k) watts (gpu_rail_parts_w)

    @property
    def total_w(self) -> np.ndarray:
        return self.gpu_w + self.cpu_w

    @property
    def soc_w(self) -> np.ndarray:
        """The SoC share of ``gpu_w`` (its floor, the EMC term, DRAM traffic through the controller):
        the load the record's ``soc`` rail reads."""
        return sum((self.gpu_parts[k] for k in SOC_PARTS if k in self.gpu_parts), np.zeros_like(self.gpu_w))

    def concat(self, other: StepTable) -> StepTable:
        """This table's rows followed by ``other``'s (same clocks)."""
        cat = np.concatenate
        return StepTable(self.freq_mhz, *(cat([getattr(self, a), getattr(other, a)]) for a in (
            "time_s", "gpu_busy_s", "util", "gpu_w", "cpu_w", "dram_w", "bytes_per_step", "phase")),
            {k: cat([v, other.gpu_parts[k]]) for k, v in self.gpu_parts.items()})


def _efficiency(dim, rows, profile: BoardProfile):
    return dim / (dim + profile.gemm_half_dim) * rows / (rows + profile.gemm_half_rows)


def batch_work(profile: BoardProfile, wl: SimWorkload, s, *, forward_only: bool = False):
    """The clock-independent GPU work of batches of padded length ``s``: ``(flops, anchor_flops,
    bytes, kernels)``. ``anchor_flops`` is the FLOPs divided by the matmuls' size efficiency and by
    the precision's GEMM speed-up (:data:`GEMM_SPEEDUP`): the work at the anchor fp32 GEMM rate
    (matmuls and attention have different shapes)."""
    L, d, h, B = wl.n_layers, wl.hidden_size, wl.n_heads, wl.batch_size
    share = 1.0 / 3.0 if forward_only else 1.0  # forward = 2 of the 6 FLOP per parameter and token
    tokens = B * s
    mm = share * 6.0 * wl.matmul_params * tokens
    # scores (Q·Kᵀ, half of 12) against s keys plus, for DeBERTa-v2, c2p and p2c against the relative rows;
    # the weighted sum (the other half) against s values
    att = share * 6.0 * L * tokens * d * (2.0 * s + 2.0 * wl.rel_positions)
    speed = GEMM_SPEEDUP[wl.precision]
    anchor = (mm / _efficiency(d, tokens, profile) + att / _efficiency(d / h, B * h * s, profile)) / speed
    elem = (ELEMENTWISE_D * d + ELEMENTWISE_FF * wl.ffn_size + ELEMENTWISE_ATT * h * s) * ACTIVATION_BYTES[
        wl.precision] * L * tokens
    nbytes = share * elem + (0.0 if forward_only else OPTIMIZER_BYTES_PER_PARAM * wl.params_total)
    kernels = (KERNELS_PER_LAYER * L + KERNELS_FIXED) * (FORWARD_OPS_SHARE if forward_only else 1.0)
    return mm + att, anchor, nbytes, kernels


def clock_inputs(profile: BoardProfile, mode: PowerMode, emc_mhz=None, cpu_mhz=None) -> tuple[float | None, float]:
    """Check a joint setting's other clocks against the mode's caps: ``(emc_mhz, cpu_mhz)``.

    ``emc_mhz`` None keeps the EMC following the GPU clock (:func:`emc_mhz`); ``cpu_mhz`` None is
    the mode's top CPU clock (the twin's behaviour before issue #32). A clock above the mode's cap
    (nvpmodel's ``EMC MAX_FREQ`` / ``CPU_A78_* MAX_FREQ``) or not positive is refused, naming it.
    """
    where = f"power mode {mode.id} ({mode.name}) of the simulated {profile.name}"
    emc_cap, cpu_cap = profile.emc_cap_mhz(mode), profile.cpu_max_mhz(mode)
    if emc_mhz is not None:
        emc_mhz = float(emc_mhz)
        if not emc_mhz > 0:
            raise DvfsError(f"EMC clock {emc_mhz:g} MHz: give a positive clock (the board's levels: "
                            f"{', '.join(f'{f:g}' for f in profile.emc_levels_mhz)})")
        if emc_mhz > emc_cap + 0.5:
            raise DvfsError(f"EMC clock {emc_mhz:g} MHz is above {emc_cap:g} MHz, the EMC cap of {where}")
    if cpu_mhz is None:
        return emc_mhz, cpu_cap
    cpu_mhz = float(cpu_mhz)
    if not cpu_mhz > 0:
        raise DvfsError(f"CPU clock {cpu_mhz:g} MHz: give a positive clock")
    if cpu_mhz > cpu_cap + 0.05:
        raise DvfsError(f"CPU clock {cpu_mhz:g} MHz is above {cpu_cap:g} MHz, the CPU cap of {where}")
    return emc_mhz, cpu_mhz


def emc_bandwidth_ratio(profile: BoardProfile, emc) -> np.ndarray:
    """Effective DRAM bandwidth at EMC clock ``emc`` relative to the top level's (measured STREAM):
    ``(f_emc/f_emc,top)^emc_bw_exp`` — the peak is ∝ the clock (LPDDR5, 256 bit: 204.8 GB/s at
    3199 MHz); how the achieved share of it changes with the clock is the assumption ``emc_bw_exp``."""
    return (np.asarray(emc, dtype=float) / profile.emc_levels_mhz[-1]) ** profile.emc_bw_exp


def _gpu_times(profile: BoardProfile, anchor_flops, nbytes, kernels, f, mode: PowerMode, emc=None):
    """GPU seconds of matmuls, memory traffic and kernel floors at clocks ``f``, and the EMC level
    (``emc`` None: the level that follows the GPU clock, :func:`emc_mhz`)."""
    clock = f / profile.fmax_mhz * profile.tpc_fraction(mode)
    t_mm = anchor_flops / (profile.gemm_flops_at_fmax * clock)
    emc = emc_mhz(profile, f, mode=mode) if emc is None else np.full(np.shape(f), float(emc))
    bw = profile.dram_bw_gbs * 1e9 * np.minimum(np.minimum(1.0, f / profile.bw_sat_mhz),
                                                emc_bandwidth_ratio(profile, emc))
    t_kern = kernels * profile.kernel_min_us_at_fmax * 1e-6 / clock
    return t_mm, nbytes / bw, t_kern, emc


def dram_rail_w(profile: BoardProfile, bytes_per_s, emc) -> np.ndarray:
    """The DRAM traffic and clock power on the profile's ``dram_rail`` (W, above its idle watts):
    ``e_dram·bytes/s + k_dram·(f_emc − f_emc,idle)``."""
    return (profile.dram_pj_per_byte * 1e-12 * np.asarray(bytes_per_s, dtype=float)
            + profile.dram_w_per_ghz * (np.asarray(emc, dtype=float) - profile.emc_idle_mhz) / 1000.0)


def work_rows(profile: BoardProfile, anchor_flops, nbytes, kernels, f, mode: PowerMode, t_serial, t_ops, *,
              gpu_scale=1.0, power_scale=1.0, cpu_ratio: float = 1.0, phase: str = "train",
              emc_mhz: float | None = None) -> StepTable:
    """Time, utilization and rail power of batches of the given work (n, 1) at clocks ``f`` (1, k).

    ``cpu_ratio`` is the CPU's top clock over the clock it runs at (the CPU times given are
    already scaled by it); ``emc_mhz`` a pinned EMC clock (None: it follows the GPU clock)."""
    t_mm, t_mem, t_kern, emc = _gpu_times(profile, anchor_flops, nbytes, kernels, f, mode, emc_mhz)
    t_gpu = (t_mm + t_mem + t_kern) * gpu_scale
    activity_busy = (profile.activity_matmul * t_mm + profile.activity_memory * t_mem
                     + profile.activity_kernel_overhead * t_kern) * gpu_scale / t_gpu
    p = profile.overlap_p
    time_s = t_serial + (t_ops**p + t_gpu**p) ** (1.0 / p)
    util = t_gpu / time_s
    bytes_per_s = nbytes / time_s
    parts = gpu_rail_parts_w(profile, f, activity_busy * util, bytes_per_s, tpc_fraction=profile.tpc_fraction(mode),
                             power_scale=power_scale, emc=emc)
    shape = time_s.shape
    parts = {k: np.broadcast_to(v, shape).astype(float) for k, v in parts.items()}
    cpu_w = cpu_rail_w(profile, min(profile.cpu_busy_cores_training, profile.cpu_online(mode)),
                       clusters=profile.cpu_clusters_training, cpu_clock_ratio=1.0 / cpu_ratio)
    dram_w = dram_rail_w(profile, bytes_per_s, emc)
    return StepTable(f.ravel(), time_s, t_gpu * np.ones(shape), util, sum(parts.values()),
                     np.broadcast_to(cpu_w, shape).astype(float), np.broadcast_to(dram_w, shape).astype(float),
                     np.broadcast_to(nbytes, (shape[0], 1))[:, 0].astype(float),
                     np.full(shape[0], phase, dtype=object), parts)


def step_table(profile: BoardProfile, wl: SimWorkload, seq_len, freq_mhz, *, mode: PowerMode | None = None,
               cpu_scale=1.0, gpu_scale=1.0, power_scale=1.0, first_step: bool = True,
               emc_mhz: float | None = None, cpu_mhz: float | None = None) -> StepTable:
    """Time, utilization and rail power of each training step (padded length ``seq_len[i]``) at each clock.

    ``cpu_scale`` (scalar or per step), ``gpu_scale`` and ``power_scale`` are the run's noise
    factors (1 = nominal). ``first_step`` adds the warm-up cost to step 0. ``emc_mhz`` /
    ``cpu_mhz`` pin the memory clock and the CPU clusters' clock (None: the EMC follows the GPU
    clock and the CPU runs at the mode's top clock, the twin's behaviour before issue #32).
    """
    mode = mode or profile.power_modes[0]
    emc_mhz, cpu_now = clock_inputs(profile, mode, emc_mhz, cpu_mhz)
    s = np.asarray(seq_len, dtype=float)[:, None]
    f = np.atleast_1d(np.asarray(freq_mhz, dtype=float))[None, :]
    cpu_ratio = profile.cpu_fmax_mhz / cpu_now
    cpu_scale = np.asarray(cpu_scale, dtype=float).reshape(-1, 1) * cpu_ratio
    t_ops = ops_of(profile, wl) * profile.cpu_op_us * 1e-6 * cpu_scale
    t_serial = profile.cpu_step_serial_ms * 1e-3 * cpu_scale
    if first_step:
        t_serial = t_serial + np.where(np.arange(s.shape[0])[:, None] == 0, profile.first_step_extra_s, 0.0)
    _flops, anchor, nbytes, kernels = batch_work(profile, wl, s)
    return work_rows(profile, anchor, nbytes, kernels, f, mode, t_serial, t_ops, gpu_scale=gpu_scale,
                     power_scale=power_scale, cpu_ratio=cpu_ratio, phase="train", emc_mhz=emc_mhz)
