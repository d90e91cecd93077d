"""Where a training step's energy goes on the twin, level by level (``dvfslab simulate --explain``).

For a catalog workload ``model/task`` at a few GPU levels: the time of a step, the GPU
utilization, and the energy of a step split into GPU dynamic power, GPU leakage and clock tree,
the CPU rail, the memory / SoC floor of the GPU rail (SoC, EMC above its idle level, DRAM traffic
through the controller) and the rest of the board (``VIN_SYS_5V0``, ``VDDQ``). The sum of the
first four is the paper's CPU+GPU energy. Nominal values (no noise), the steps of a 200-step run
with the workload's batches, and the window phases amortized over them. Simulated, not measured.
"""

from __future__ import annotations

import numpy as np

from dvfslab.sim.board import stable_seed
from dvfslab.sim.model import SimWorkload, module_w, step_table
from dvfslab.sim.phases import DEFAULT_WINDOW_PHASES, phase_table
from dvfslab.sim.profiles import BoardProfile, get_profile

TERMS = ("gpu_dynamic_j", "gpu_leakage_j", "cpu_j", "soc_memory_j", "board_j")


def decompose(workload_id: str, *, board: str | BoardProfile = "agx-orin-64gb", levels=None, n_steps: int = 200,
              window_phases=DEFAULT_WINDOW_PHASES, seed: int = 0) -> list[dict]:
    """Per level: step time, utilization and energy per step by term (J); see the module doc."""
    profile = get_profile(board) if isinstance(board, str) else board
    wl = SimWorkload.from_workload_id(workload_id, window_phases=tuple(window_phases))
    levels = list(levels) if levels is not None else [f for f in profile.levels_mhz[::2]] + [profile.fmax_mhz]
    levels = sorted(set(levels))
    rng = np.random.default_rng(np.random.SeedSequence(stable_seed(seed, wl.workload_id, "data")))
    seq = wl.padded_lengths(rng, n_steps)
    mode = profile.power_modes[0]
    table = step_table(profile, wl, seq, levels, mode=mode, first_step=False)
    extra = phase_table(profile, wl, n_steps, rng, levels, mode=mode)
    if extra is not None:
        table = table.concat(extra)
    t = table.time_s
    parts = table.gpu_parts
    board_w = module_w(profile, table.gpu_w, table.cpu_w, table.dram_w, table.soc_w) - table.gpu_w - table.cpu_w
    energy = {
        "gpu_dynamic_j": (parts["dynamic"] * t).sum(axis=0),
        "gpu_leakage_j": ((parts["leakage"] + parts["clock"]) * t).sum(axis=0),
        "cpu_j": (table.cpu_w * t).sum(axis=0),
        "soc_memory_j": ((parts["soc"] + parts["emc"] + parts["traffic"]) * t).sum(axis=0),
        "board_j": (board_w * t).sum(axis=0),
    }
    rows = []
    for j, f in enumerate(levels):
        row = {"freq_mhz": f, "step_time_s": float(t[:, j].sum() / n_steps),
               "gpu_util_pct": float(100 * table.gpu_busy_s[:, j].sum() / t[:, j].sum())}
        row.update({k: float(v[j] / n_steps) for k, v in energy.items()})
        row["cpu_gpu_j"] = sum(row[k] for k in TERMS[:4])
        rows.append(row)
    return rows


def explain_text(workload_id: str, **kwargs) -> str:
    """The decomposition as a text table (what ``dvfslab simulate --explain`` prints)."""
    rows = decompose(workload_id, **kwargs)
    best = min(rows, key=lambda r: r["cpu_gpu_j"])
    head = (f"{workload_id}: energy per training step on the twin (SIMULATED), J; CPU+GPU = the paper's "
            "total; phases in the window amortized per step")
    cols = ("MHz", "step s", "util %", "GPU dyn", "GPU leak", "CPU", "SoC/mem", "CPU+GPU", "board rest")
    lines = [head, " ".join(f"{c:>10}" for c in cols)]
    for r in rows:
        vals = (r["freq_mhz"], r["step_time_s"], r["gpu_util_pct"], *(r[k] for k in TERMS[:4]), r["cpu_gpu_j"],
                r["board_j"])
        mark = "  <- lowest CPU+GPU" if r is best else ""
        lines.append(" ".join(f"{v:>10.4g}" for v in vals) + mark)
    lines.append("GPU dynamic energy per step falls with the clock (V² falls), the static terms (leakage, "
                 "CPU, SoC/memory, board) grow with the step time: the sum is U-shaped.")
    return "\n".join(lines)
