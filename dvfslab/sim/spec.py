"""Any workload in any power mode: a step described by its totals, evaluated level by level. Simulated.

``dvfslab simulate --workload SPEC.json --power-mode MODE --json`` reads a :class:`WorkloadSpec`
— what one optimizer step does: ``flops_per_step`` (forward + backward), ``dram_bytes_per_step``,
``cpu_ops_per_step`` (operators dispatched), ``params_m`` and ``batch_size`` — and prints, for
every GPU level the mode allows and for the mode's default governor (the emulated
``nvhost_podgov``, capped by the mode), the time of a step, the CPU, GPU and board power and the
energy of a step (:func:`evaluate`). The mode is one of the board's nvpmodel modes (for the AGX
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
from dvfslab.hw.jetson.nvpmodel import PowerMode
from dvfslab.sim.model import (
    KERNELS_FIXED,
    KERNELS_PER_LAYER,
    SimWorkload,
    batch_work,
    ops_of,
    work_rows,
)
from dvfslab.sim.podgov import PodGovernor
from dvfslab.sim.profiles import BoardProfile, get_profile

REQUIRED = ("name", "flops_per_step", "dram_bytes_per_step", "cpu_ops_per_step", "params_m", "batch_size")
#: BERT-base-shaped fp32 matmuls reach ≈0.75–0.85 of the anchor rate (docs/calibration.md, section 2)
DEFAULT_GEMM_EFFICIENCY = 0.75
#: kernels per dispatched operator: (70·12 + 80) kernels over 184·12 + 72 + 2.4·201 operators (BERT-base)
DEFAULT_KERNELS_PER_OP = 0.33
SPEC_STEPS = 200  # the run whose mean step a catalog spec is (as --explain)
GOVERNOR_POLLS = 400  # 20 s of 50 ms polls; the second half is the governor's steady state


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
    known = {*REQUIRED, "gemm_efficiency", "kernels_per_step"}
    extra = sorted(set(data) - known)
    if extra:
        raise DvfsError(f"{where}: unknown field(s) {', '.join(extra)}; a spec has {', '.join(sorted(known))} {hint}")
    values = {}
    for key in known - {"name"}:
        if key not in data or (key == "kernels_per_step" and data[key] is None):
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
    return WorkloadSpec(name=str(data["name"]), **{**values, "batch_size": int(values["batch_size"])})


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


def catalog_spec(workload_id: str, profile: BoardProfile, *, seed: int = 0) -> WorkloadSpec:
    """The spec of a catalog workload ``model/task``: the mean step of its 200-step run."""
    from dvfslab.sim.board import stable_seed

    wl = SimWorkload.from_workload_id(workload_id)
    rng = np.random.default_rng(np.random.SeedSequence(stable_seed(seed, wl.workload_id, "data")))
    s = wl.padded_lengths(rng, SPEC_STEPS)
    flops, anchor, nbytes, _kernels = batch_work(profile, wl, s)
    kernels = KERNELS_PER_LAYER * wl.n_layers + KERNELS_FIXED
    return WorkloadSpec(wl.workload_id, float(np.mean(flops)), float(np.mean(nbytes)), float(ops_of(profile, wl)),
                        round(wl.params_total / 1e6, 3), wl.batch_size,
                        gemm_efficiency=float(np.sum(flops) / np.sum(anchor)), kernels_per_step=float(kernels))


def _rows_at(profile: BoardProfile, spec: WorkloadSpec, levels: list[float], mode: PowerMode):
    cpu_ratio = profile.cpu_fmax_mhz / profile.cpu_max_mhz(mode)
    one = np.ones((1, 1))
    return work_rows(profile, one * spec.flops_per_step / spec.gemm_efficiency, one * spec.dram_bytes_per_step,
                     spec.kernels, np.asarray(levels, dtype=float)[None, :], mode,
                     profile.cpu_step_serial_ms * 1e-3 * cpu_ratio,
                     spec.cpu_ops_per_step * profile.cpu_op_us * 1e-6 * cpu_ratio, cpu_ratio=cpu_ratio)


def _entry(freq_mhz: float, time_s: float, cpu_w: float, gpu_w: float, board_w: float, util: float) -> dict:
    return {"gpu_freq_mhz": freq_mhz, "time_per_step_s": time_s, "power_cpu_w": cpu_w, "power_gpu_w": gpu_w,
            "power_board_w": board_w, "energy_per_step_j": (cpu_w + gpu_w) * time_s,
            "energy_board_per_step_j": board_w * time_s, "gpu_util_pct": 100.0 * util}


def evaluate(spec: WorkloadSpec, mode: int | str = 0, board: str | BoardProfile = "agx-orin-64gb") -> dict:
    """Per allowed level and for the default governor: time, power and energy of one step (see module doc)."""
    profile = get_profile(board) if isinstance(board, str) else board
    pm = profile.power_mode(mode)
    cap = profile.gpu_cap_mhz(pm)
    levels = [f for f in profile.levels_mhz if f <= cap + 0.5]
    t = _rows_at(profile, spec, levels, pm)
    rest = sum(profile.other_rails_w.values())
    board_w = t.gpu_w[0] + t.cpu_w[0] + rest + t.dram_w[0]
    rows = [_entry(f, float(t.time_s[0, j]), float(t.cpu_w[0, j]), float(t.gpu_w[0, j]), float(board_w[j]),
                   float(t.util[0, j])) for j, f in enumerate(levels)]
    return {"source": "simulated", "board": profile.name, "workload": asdict(spec) | {"kernels_per_step": spec.kernels},
            "power_mode": _mode_dict(profile, pm), "levels": rows,
            "default_governor": _governed(profile, rows, levels, cap)}


def _governed(profile: BoardProfile, rows: list[dict], levels: list[float], cap: float) -> dict:
    """The emulated nvhost_podgov on this step repeated: each 50 ms poll sees the busy fraction of
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
    return "\n".join(lines)
