"""Any workload in any power mode: a step described by its totals, evaluated level by level. Simulated.

``dvfslab simulate --workload SPEC.json --power-mode MODE --json`` reads a :class:`WorkloadSpec`
— what one optimizer step does: ``flops_per_step`` (forward + backward), ``dram_bytes_per_step``,
``cpu_ops_per_step`` (operators dispatched), ``params_m`` and ``batch_size`` — and prints, for
every GPU level the mode allows and for the mode's default governor (the emulated
``nvhost_podgov``, capped by the mode), the time of a step, the CPU, GPU and board power and the
energy of a step (:func:`evaluate`); with ``--joint`` also the grid over the three clocks, GPU ×
EMC (the board's levels under the mode's cap) × CPU (every CPU clock the nvpmodel modes name under
the mode's cap), and its lowest-energy settings against the GPU-only ones (:func:`joint_grid`;
one setting: :func:`simulate_point`). The mode is one of the board's nvpmodel modes (for the AGX
Orin the real dump's MAXN, MODE_15W, MODE_30W, MODE_50W) with its GPU cap, TPC mask, online CPU
cores and their top clock and EMC cap.

The physics is the twin's (:func:`dvfslab.sim.model.work_rows`); a spec has no layer shapes, so
two optional fields stand in for them: ``gemm_efficiency`` (the matmuls' share of the anchor
GEMM rate; default :data:`DEFAULT_GEMM_EFFICIENCY`) and ``kernels_per_step`` (default
:data:`DEFAULT_KERNELS_PER_OP` per operator). :func:`catalog_spec` writes a catalog workload's
spec (``--print-spec``) with both filled in: the mean step of the 200-step run of
``dvfslab simulate --explain`` (its batches), so that a user can edit it. Training steps only,
no window phases, no noise.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.core.levels import check_level
from dvfslab.hw.jetson.nvpmodel import PowerMode
from dvfslab.sim.model import (
    GEMM_SPEEDUP,
    KERNELS_FIXED,
    KERNELS_PER_LAYER,
    PRECISIONS,
    SimWorkload,
    batch_work,
    clock_inputs,
    module_w,
    ops_of,
    work_rows,
)
from dvfslab.sim.model import emc_mhz as emc_of
from dvfslab.sim.podgov import PodGovernor
from dvfslab.sim.profiles import BoardProfile, get_profile

REQUIRED = ("name", "flops_per_step", "dram_bytes_per_step", "cpu_ops_per_step", "params_m", "batch_size")
#: BERT-base-shaped fp32 matmuls reach ≈0.75–0.85 of the anchor rate (docs/calibration.md, section 2)
DEFAULT_GEMM_EFFICIENCY = 0.75
#: kernels per dispatched operator: (70·12 + 80) kernels over 184·12 + 72 + 2.4·201 operators (BERT-base)
DEFAULT_KERNELS_PER_OP = 0.33
SPEC_STEPS = 200  # the run whose mean step a catalog spec is (as --explain)
#: the CPU clusters' floor in every mode of the AGX Orin's nvpmodel dump (``CPU_A78_* MIN_FREQ 729600``)
CPU_FLOOR_MHZ = 729.6
GOVERNOR_POLLS = 800  # 20 s of 25 ms polls (podgov.PodGovernor.poll_s); the second half is its steady state


@dataclass(frozen=True)
class WorkloadSpec:
    """One optimizer step by its totals (see the module doc)."""

    name: str
    flops_per_step: float
    dram_bytes_per_step: float
    cpu_ops_per_step: float
    params_m: float
    batch_size: int
    gemm_efficiency: float = DEFAULT_GEMM_EFFICIENCY
    kernels_per_step: float | None = None
    precision: str = "fp32"  # the GEMMs' precision: fp32, fp16 or bf16 (model.GEMM_SPEEDUP)
    seq_len: int | None = None  # the maximum (truncation) length the spec was made for; informative

    @property
    def kernels(self) -> float:
        return DEFAULT_KERNELS_PER_OP * self.cpu_ops_per_step if self.kernels_per_step is None else self.kernels_per_step


def spec_from_mapping(data: Mapping, where: str) -> WorkloadSpec:
    """A spec from a JSON object; one :class:`DvfsError` line naming the first bad field."""
    if not isinstance(data, Mapping):
        raise DvfsError(f"{where}: a workload spec is a JSON object with {', '.join(REQUIRED)}")
    hint = "(print one to edit with: dvfslab simulate --workload bert-base/rte --print-spec)"
    for key in REQUIRED:
        if key not in data:
            raise DvfsError(f"{where}: field {key!r} is missing; a spec needs {', '.join(REQUIRED)} {hint}")
    known = {*REQUIRED, "gemm_efficiency", "kernels_per_step", "precision", "seq_len"}
    extra = sorted(set(data) - known)
    if extra:
        raise DvfsError(f"{where}: unknown field(s) {', '.join(extra)}; a spec has {', '.join(sorted(known))} {hint}")
    precision = data.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise DvfsError(f"{where}: field 'precision' must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    values = {}
    for key in known - {"name", "precision"}:
        if key not in data or (key in ("kernels_per_step", "seq_len") and data[key] is None):
            continue
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise DvfsError(f"{where}: field {key!r} must be a number, got {v!r}")
        positive = key in ("flops_per_step", "batch_size", "gemm_efficiency")  # the rest may be 0
        if v < 0 or (v == 0 and positive):
            raise DvfsError(f"{where}: field '{key}' must be {'positive' if positive else 'non-negative'}, got {v:g}")
        values[key] = v
    if values.get("gemm_efficiency", DEFAULT_GEMM_EFFICIENCY) > 1:
        raise DvfsError(f"{where}: field 'gemm_efficiency' is a share of the anchor GEMM rate (0–1], "
                        f"got {values['gemm_efficiency']!r}")
    if int(values["batch_size"]) != values["batch_size"]:
        raise DvfsError(f"{where}: field 'batch_size' must be a whole number, got {values['batch_size']!r}")
    if "seq_len" in values:
        values["seq_len"] = int(values["seq_len"])
    return WorkloadSpec(name=str(data["name"]), **{**values, "batch_size": int(values["batch_size"])},
                        precision=str(precision))


def load_spec(path: str | os.PathLike) -> WorkloadSpec:
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as err:
        raise DvfsError(f"{path}: cannot read the workload spec ({err.strerror or err})") from err
    try:
        data = json.loads(text)
    except ValueError as err:
        raise DvfsError(f"{path}: not JSON ({err})") from err
    return spec_from_mapping(data, str(path))


def catalog_spec(workload_id: str, profile: BoardProfile, *, seed: int = 0, batch_size: int | None = None,
                 seq_len: int | None = None, precision: str = "fp32") -> WorkloadSpec:
    """The spec of a catalog workload ``model/task``: the mean step of its 200-step run, with the
    catalog's batch size and maximum length unless ``batch_size`` / ``seq_len`` are given, in
    ``precision``. ``gemm_efficiency`` is the share of the fp32 anchor rate (the precision's
    speed-up is applied on top of it, :data:`~dvfslab.sim.model.GEMM_SPEEDUP`)."""
    import dataclasses

    from dvfslab.sim.board import stable_seed

    kwargs = {k: v for k, v in (("batch_size", batch_size), ("max_seq_len", seq_len)) if v is not None}
    for key, v in kwargs.items():
        if int(v) < 1:
            raise DvfsError(f"simulate: --{key.replace('max_', '').replace('_', '-')} must be a positive whole "
                            f"number, got {v}")
    wl = SimWorkload.from_workload_id(workload_id, precision=precision, **kwargs)
    rng = np.random.default_rng(np.random.SeedSequence(stable_seed(seed, wl.workload_id, "data")))
    s = wl.padded_lengths(rng, SPEC_STEPS)
    flops, _anchor, nbytes, _kernels = batch_work(profile, wl, s)
    _f, anchor32, _b, _k = batch_work(profile, dataclasses.replace(wl, precision="fp32"), s)
    kernels = KERNELS_PER_LAYER * wl.n_layers + KERNELS_FIXED
    return WorkloadSpec(wl.workload_id, float(np.mean(flops)), float(np.mean(nbytes)), float(ops_of(profile, wl)),
                        round(wl.params_total / 1e6, 3), wl.batch_size,
                        gemm_efficiency=float(np.sum(flops) / np.sum(anchor32)), kernels_per_step=float(kernels),
                        precision=wl.precision, seq_len=wl.max_seq_len)


def gemm_anchor_flops(spec: WorkloadSpec) -> float:
    """A step's work at the anchor fp32 GEMM rate: FLOPs / efficiency / the precision's speed-up."""
    return spec.flops_per_step / spec.gemm_efficiency / GEMM_SPEEDUP[spec.precision]


def gemm_time_s(profile: BoardProfile, spec: WorkloadSpec, freq_mhz: float, mode: PowerMode) -> float:
    """GPU seconds of a step's matmuls at ``freq_mhz`` (the GEMM part of the step's GPU time)."""
    return gemm_anchor_flops(spec) / (profile.gemm_flops_at_fmax * freq_mhz / profile.fmax_mhz
                                      * profile.tpc_fraction(mode))


def _rows_at(profile: BoardProfile, spec: WorkloadSpec, levels: list[float], mode: PowerMode,
             emc_mhz: float | None = None, cpu_mhz: float | None = None):
    emc_mhz, cpu_now = clock_inputs(profile, mode, emc_mhz, cpu_mhz)
    cpu_ratio = profile.cpu_fmax_mhz / cpu_now
    one = np.ones((1, 1))
    return work_rows(profile, one * gemm_anchor_flops(spec), one * spec.dram_bytes_per_step,
                     spec.kernels, np.asarray(levels, dtype=float)[None, :], mode,
                     profile.cpu_step_serial_ms * 1e-3 * cpu_ratio,
                     spec.cpu_ops_per_step * profile.cpu_op_us * 1e-6 * cpu_ratio, cpu_ratio=cpu_ratio,
                     emc_mhz=emc_mhz)


def _entry(freq_mhz: float, time_s: float, cpu_w: float, gpu_w: float, board_w: float, util: float) -> dict:
    return {"gpu_freq_mhz": freq_mhz, "time_per_step_s": time_s, "power_cpu_w": cpu_w, "power_gpu_w": gpu_w,
            "power_board_w": board_w, "energy_per_step_j": (cpu_w + gpu_w) * time_s,
            "energy_board_per_step_j": board_w * time_s, "gpu_util_pct": 100.0 * util}


def evaluate(spec: WorkloadSpec, mode: int | str = 0, board: str | BoardProfile = "agx-orin-64gb", *,
             joint: bool = False, emc_levels: list[float] | None = None,
             cpu_levels: list[float] | None = None) -> dict:
    """Per allowed level and for the default governor: time, power and energy of one step (see
    module doc); with ``joint`` (or level lists) also the GPU × EMC × CPU grid (:func:`joint_grid`)."""
    profile = get_profile(board) if isinstance(board, str) else board
    pm = profile.power_mode(mode)
    cap = profile.gpu_cap_mhz(pm)
    levels = [f for f in profile.levels_mhz if f <= cap + 0.5]
    t = _rows_at(profile, spec, levels, pm)
    board_w = module_w(profile, t.gpu_w[0], t.cpu_w[0], t.dram_w[0], t.soc_w[0])
    rows = [_entry(f, float(t.time_s[0, j]), float(t.cpu_w[0, j]), float(t.gpu_w[0, j]), float(board_w[j]),
                   float(t.util[0, j])) | {"gemm_time_per_step_s": gemm_time_s(profile, spec, f, pm)}
            for j, f in enumerate(levels)]
    out = {"source": "simulated", "board": profile.name, "workload": asdict(spec) | {"kernels_per_step": spec.kernels},
           "power_mode": _mode_dict(profile, pm), "levels": rows,
           "default_governor": _governed(profile, rows, levels, cap)}
    if joint or emc_levels is not None or cpu_levels is not None:
        out["joint"] = joint_grid(spec, pm, profile, emc_levels=emc_levels, cpu_levels=cpu_levels)
    return out


def _clocked_rows(profile: BoardProfile, spec: WorkloadSpec, levels: list[float], pm: PowerMode,
                  emc_mhz: float | None, cpu_mhz: float | None) -> list[dict]:
    """One :func:`_entry` per GPU level at the other clocks ``emc_mhz`` / ``cpu_mhz`` (None: as
    :func:`~dvfslab.sim.model.step_table`), each with the EMC and CPU clocks it ran at."""
    t = _rows_at(profile, spec, levels, pm, emc_mhz, cpu_mhz)
    board_w = module_w(profile, t.gpu_w[0], t.cpu_w[0], t.dram_w[0], t.soc_w[0])
    emc = emc_of(profile, np.asarray(levels, dtype=float), mode=pm) if emc_mhz is None else np.full(len(levels), emc_mhz)
    cpu = profile.cpu_max_mhz(pm) if cpu_mhz is None else float(cpu_mhz)
    return [_entry(f, float(t.time_s[0, j]), float(t.cpu_w[0, j]), float(t.gpu_w[0, j]), float(board_w[j]),
                   float(t.util[0, j])) | {"emc_freq_mhz": float(emc[j]), "cpu_freq_mhz": cpu}
            for j, f in enumerate(levels)]


def _spec_of(workload: WorkloadSpec | str, profile: BoardProfile) -> WorkloadSpec:
    return workload if isinstance(workload, WorkloadSpec) else catalog_spec(str(workload), profile)


def simulate_point(workload: WorkloadSpec | str, gpu_mhz: float, emc_mhz: float | None = None,
                   cpu_mhz: float | None = None, *, mode: int | str = 0,
                   board: str | BoardProfile = "agx-orin-64gb") -> dict:
    """One training step of ``workload`` (a spec or a catalog ``model/task``) at one joint setting
    (GPU, EMC, CPU clocks, MHz) in power mode ``mode``: time, CPU / GPU / board power and energy,
    the clocks it ran at. ``emc_mhz`` None: the EMC follows the GPU clock; ``cpu_mhz`` None: the
    mode's top CPU clock (the twin before issue #32). A GPU level not in the board's table or a
    clock above the mode's caps is refused. Simulated."""
    profile = get_profile(board) if isinstance(board, str) else board
    pm = profile.power_mode(mode)
    level = check_level(gpu_mhz, profile.levels_mhz)
    if level > profile.gpu_cap_mhz(pm) + 0.5:
        raise DvfsError(f"GPU clock {level:g} MHz is above {profile.gpu_cap_mhz(pm):g} MHz, the GPU cap of power "
                        f"mode {pm.id} ({pm.name}) of the simulated {profile.name}")
    row = _clocked_rows(profile, _spec_of(workload, profile), [level], pm, emc_mhz, cpu_mhz)[0]
    return {"source": "simulated", **row}


def joint_cpu_levels_mhz(profile: BoardProfile, mode: PowerMode) -> tuple[float, ...]:
    """The CPU clocks of the joint grid: every CPU clock the board's nvpmodel modes name — the
    floor :data:`CPU_FLOOR_MHZ`, each mode's cap and the top clock — at or below ``mode``'s cap."""
    cap = profile.cpu_max_mhz(mode)
    named = {CPU_FLOOR_MHZ, profile.cpu_fmax_mhz, *(m.cpu_max_mhz for m in profile.power_modes if m.cpu_max_mhz)}
    return tuple(sorted(f for f in named if f <= cap + 0.05))


def joint_grid(workload: WorkloadSpec | str, mode: int | str = 0, board: str | BoardProfile = "agx-orin-64gb", *,
               emc_levels: list[float] | None = None, cpu_levels: list[float] | None = None) -> dict:
    """Every (GPU, EMC, CPU) setting of the grid in power mode ``mode``: the GPU levels the mode
    allows × ``emc_levels`` (default: the board's EMC levels under the mode's cap) × ``cpu_levels``
    (default :func:`joint_cpu_levels_mhz`); the rows, and the lowest CPU+GPU and board energy of
    the whole grid and of the GPU-only grid (EMC and CPU at the mode's top: a sweep's pinned
    default). Simulated."""
    profile = get_profile(board) if isinstance(board, str) else board
    pm = profile.power_mode(mode)
    spec = _spec_of(workload, profile)
    cap = profile.gpu_cap_mhz(pm)
    levels = [f for f in profile.levels_mhz if f <= cap + 0.5]
    emcs = [float(e) for e in (profile.emc_allowed_mhz(pm) if emc_levels is None else emc_levels)]
    cpus = [float(c) for c in (joint_cpu_levels_mhz(profile, pm) if cpu_levels is None else cpu_levels)]
    if not emcs or not cpus:
        raise DvfsError(f"simulate --joint: no {'EMC' if not emcs else 'CPU'} clock to sweep in power mode "
                        f"{pm.id} ({pm.name}) of {profile.name}")
    rows = [r for e in emcs for c in cpus for r in _clocked_rows(profile, spec, levels, pm, e, c)]
    top_emc, top_cpu = profile.emc_allowed_mhz(pm)[-1], profile.cpu_max_mhz(pm)
    gpu_only = _clocked_rows(profile, spec, levels, pm, top_emc, top_cpu)

    def best(rs: list[dict], key: str) -> dict:
        return min(rs, key=lambda r: r[key])

    return {"knobs": ["gpu", "emc", "cpu"], "gpu_levels_mhz": levels, "emc_levels_mhz": emcs,
            "cpu_levels_mhz": cpus, "rows": rows,
            "lowest_energy": best(rows, "energy_per_step_j"),
            "lowest_board_energy": best(rows, "energy_board_per_step_j"),
            "gpu_only": {"emc_freq_mhz": top_emc, "cpu_freq_mhz": top_cpu,
                         "lowest_energy": best(gpu_only, "energy_per_step_j"),
                         "lowest_board_energy": best(gpu_only, "energy_board_per_step_j")}}


def _governed(profile: BoardProfile, rows: list[dict], levels: list[float], cap: float) -> dict:
    """The emulated nvhost_podgov on this step repeated: each 25 ms poll sees the busy fraction of
    the level it ran at; the time-weighted mean over the second half of 20 s is its steady state."""
    gov = PodGovernor(profile.levels_mhz, cap)
    by_f = dict(zip(levels, rows, strict=True))
    f, visits = gov.fmin, []
    for i in range(GOVERNOR_POLLS):
        if i >= GOVERNOR_POLLS // 2:
            visits.append(f)
        f = gov.decide(by_f[f]["gpu_util_pct"] / 100.0, f)
    share = {lv: visits.count(lv) / len(visits) for lv in dict.fromkeys(visits)}
    steps_per_s = sum(p / by_f[lv]["time_per_step_s"] for lv, p in share.items())
    time_s = 1.0 / steps_per_s
    mean = {k: sum(p * by_f[lv][k] for lv, p in share.items())
            for k in ("power_cpu_w", "power_gpu_w", "power_board_w", "gpu_util_pct")}
    out = _entry(sum(p * lv for lv, p in share.items()), time_s, mean["power_cpu_w"], mean["power_gpu_w"],
                 mean["power_board_w"], mean["gpu_util_pct"] / 100.0)
    return {"governor": "nvhost_podgov (emulated)", **out, "level_share": {f"{lv:g}": p for lv, p in share.items()}}


def _mode_dict(profile: BoardProfile, pm: PowerMode) -> dict:
    return {"id": pm.id, "name": pm.name, "gpu_max_mhz": profile.gpu_cap_mhz(pm),
            "tpcs_on": round(profile.tpc_fraction(pm) * profile.n_tpc), "n_tpc": profile.n_tpc,
            "cpu_online": profile.cpu_online(pm), "cpu_max_mhz": profile.cpu_max_mhz(pm),
            "emc_max_mhz": profile.emc_cap_mhz(pm)}


def evaluation_text(result: dict) -> str:
    """The result as a text table (``--workload`` without ``--json``)."""
    m, w = result["power_mode"], result["workload"]
    head = (f"{w['name']} on the simulated {result['board']} in {m['name']} (id {m['id']}: GPU ≤ {m['gpu_max_mhz']:g} MHz, "
            f"{m['tpcs_on']} of {m['n_tpc']} TPCs, {m['cpu_online']} CPU cores ≤ {m['cpu_max_mhz']:g} MHz, "
            f"EMC ≤ {m['emc_max_mhz']:g} MHz) — SIMULATED, one training step")
    cols = ("MHz", "step s", "util %", "CPU W", "GPU W", "board W", "CPU+GPU J", "board J")
    keys = ("gpu_freq_mhz", "time_per_step_s", "gpu_util_pct", "power_cpu_w", "power_gpu_w", "power_board_w",
            "energy_per_step_j", "energy_board_per_step_j")
    lines = [head, " ".join(f"{c:>10}" for c in cols)]
    best = min(result["levels"], key=lambda r: r["energy_per_step_j"])
    for r in result["levels"]:
        lines.append(" ".join(f"{r[k]:>10.4g}" for k in keys) + ("  <- lowest CPU+GPU" if r is best else ""))
    g = result["default_governor"]
    lines.append(" ".join(f"{g[k]:>10.4g}" for k in keys) + "  <- default governor (nvhost_podgov, mean clock)")
    if "joint" in result:
        j = result["joint"]
        lines.append(f"joint grid: {len(j['gpu_levels_mhz'])} GPU × {len(j['emc_levels_mhz'])} EMC × "
                     f"{len(j['cpu_levels_mhz'])} CPU settings (--json for every row)")
        for what, key, r, base in (
                ("CPU+GPU", "energy_per_step_j", j["lowest_energy"], j["gpu_only"]["lowest_energy"]),
                ("board", "energy_board_per_step_j", j["lowest_board_energy"], j["gpu_only"]["lowest_board_energy"])):
            lines.append(f"  lowest {what} J: {r[key]:.4g} at GPU {r['gpu_freq_mhz']:g} / EMC {r['emc_freq_mhz']:g} / "
                         f"CPU {r['cpu_freq_mhz']:g} MHz; GPU-only (EMC, CPU at the top) {base[key]:.4g} at "
                         f"{base['gpu_freq_mhz']:g} MHz: {100.0 * (1.0 - r[key] / base[key]):.1f} % less")
    return "\n".join(lines)
