"""Non-training phases inside a measured run: evaluation passes and checkpoint writes (simulated).

A Hugging Face ``Trainer`` run measured from ``on_train_begin`` to ``on_train_end`` contains
more than optimizer steps when evaluation or saving is switched on: an evaluation pass over the
validation split (``eval_strategy="epoch"``, forward only, GPU partly idle) and checkpoints
(``save_steps=500``, the ``Trainer`` default: weights 4 B + AdamW moments 8 B per parameter
written to storage, GPU idle but clocked). A run of ``n`` steps covers ``n·B/train_size``
epochs, so it carries that fraction of one evaluation pass per epoch and ``n/500`` of a
checkpoint: the twin appends them, amortized, after the training steps. Tokenization happens
before ``train()`` (``datasets.map``) and is outside the window; the harness records it
separately (:mod:`dvfslab.harness.finetune`). Which phases are inside the window is part of the
workload (``SimWorkload.window_phases``) and recorded in ``meta.json``; docs/calibration.md
gives the sources.
"""

from __future__ import annotations

import math

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.sim.model import (
    EVAL_SERIAL_MS,
    FORWARD_OPS_SHARE,
    BoardProfile,
    PowerMode,
    SimWorkload,
    StepTable,
    batch_work,
    clock_inputs,
    cpu_rail_w,
    dram_rail_w,
    emc_mhz,
    gpu_rail_parts_w,
    ops_of,
    work_rows,
)

PHASES = ("evaluation", "checkpoint")
DEFAULT_WINDOW_PHASES = ("evaluation", "checkpoint")
SAVE_STEPS = 500  # transformers.TrainingArguments default


def check_phases(phases) -> tuple[str, ...]:
    phases = tuple(phases)
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise DvfsError(f"unknown window phase(s) {bad}; choose from {', '.join(PHASES)} (or none)")
    return phases


def eval_examples(wl: SimWorkload, n_steps: int) -> int:
    """Validation examples evaluated, amortized, in a run of ``n_steps`` (one pass per epoch)."""
    if wl.train_size <= 0 or wl.validation_size <= 0:
        return 0
    return int(round(wl.validation_size * n_steps * wl.batch_size / wl.train_size))


def checkpoint_s(profile: BoardProfile, wl: SimWorkload, n_steps: int) -> float:
    """Seconds of checkpoint writing, amortized, in a run of ``n_steps`` (``save_steps=500``)."""
    nbytes = profile.checkpoint_bytes_per_param * wl.params_total
    return n_steps / SAVE_STEPS * nbytes / (profile.storage_write_mb_s * 1e6)


def phase_table(profile: BoardProfile, wl: SimWorkload, n_steps: int, rng: np.random.Generator, freq_mhz, *,
                mode: PowerMode, cpu_scale: float = 1.0, gpu_scale: float = 1.0,
                power_scale: float = 1.0, emc_mhz: float | None = None,
                cpu_mhz: float | None = None) -> StepTable | None:
    """Rows of the workload's window phases after ``n_steps`` training steps (None: no phase);
    ``emc_mhz`` / ``cpu_mhz`` as in :func:`~dvfslab.sim.model.step_table`."""
    f = np.atleast_1d(np.asarray(freq_mhz, dtype=float))[None, :]
    emc_mhz, cpu_now = clock_inputs(profile, mode, emc_mhz, cpu_mhz)
    cpu_ratio = profile.cpu_fmax_mhz / cpu_now
    scale = float(cpu_scale) * cpu_ratio
    tables = []
    if "evaluation" in wl.window_phases:
        n_batches = math.ceil(eval_examples(wl, n_steps) / wl.batch_size)
        if n_batches:
            s = wl.padded_lengths(rng, n_batches)[:, None]
            t_ops = FORWARD_OPS_SHARE * ops_of(profile, wl, optimizer=False) * profile.cpu_op_us * 1e-6 * scale
            _flops, anchor, nbytes, kernels = batch_work(profile, wl, s, forward_only=True)
            tables.append(work_rows(profile, anchor, nbytes, kernels, f, mode, EVAL_SERIAL_MS * 1e-3 * scale, t_ops,
                                    gpu_scale=gpu_scale, power_scale=power_scale, cpu_ratio=cpu_ratio,
                                    phase="evaluation", emc_mhz=emc_mhz))
    if "checkpoint" in wl.window_phases and checkpoint_s(profile, wl, n_steps) > 0:
        tables.append(_checkpoint_row(profile, wl, n_steps, f, mode, cpu_ratio, power_scale, emc_mhz))
    if not tables:
        return None
    out = tables[0]
    for t in tables[1:]:
        out = out.concat(t)
    return out


def _checkpoint_row(profile: BoardProfile, wl: SimWorkload, n_steps: int, f, mode: PowerMode, cpu_ratio: float,
                    power_scale: float, emc: float | None = None) -> StepTable:
    """One row: the GPU idle at its clock, one CPU core serializing and writing."""
    shape = f.shape
    emc_now = emc_mhz(profile, f, mode=mode) if emc is None else np.full(shape, float(emc))
    parts = gpu_rail_parts_w(profile, f, 0.0, 0.0, tpc_fraction=profile.tpc_fraction(mode), power_scale=power_scale,
                             emc=emc_now)
    parts = {k: np.broadcast_to(v, shape).astype(float) for k, v in parts.items()}
    cpu_w = cpu_rail_w(profile, 1.0, clusters=1.0, cpu_clock_ratio=1.0 / cpu_ratio)
    zeros = np.zeros(shape)
    return StepTable(f.ravel(), np.full(shape, checkpoint_s(profile, wl, n_steps)), zeros, zeros.copy(),
                     sum(parts.values()), np.full(shape, float(cpu_w)), dram_rail_w(profile, 0.0, emc_now) + zeros,
                     np.zeros(1),
                     np.array(["checkpoint"], dtype=object), parts)
