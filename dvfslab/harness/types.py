"""The small data types of the fine-tuning harness: its errors, a step's span, a run's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.measure.energy import Measurement

#: name of the energy window that covers the measured part of a run (after the warm-up steps)
RUN_WINDOW = "train"


class FinetuneError(DvfsError):
    """A fine-tuning run cannot start or finish (bad input, no memory, no clock control)."""


class EnergyNotMeasuredWarning(UserWarning):
    """The backend has no power reader: time and steps are recorded, energy is left empty."""


@dataclass
class StepSpan:
    """One optimizer step: its global number and begin/end times on the backend's clock."""

    step: int
    t0_s: float
    t1_s: float

    @property
    def time_s(self) -> float:
        return self.t1_s - self.t0_s


@dataclass
class FinetuneResult:
    """What :func:`dvfslab.harness.finetune.finetune` measured and wrote."""

    run: dict
    workload: dict
    metrics: dict
    steps: list[dict]
    epochs: list[Measurement]
    measurement: Measurement | None
    log_history: list[dict]
    dataset_dir: Path | None = None
    samples_path: Path | None = None
    # wall seconds of the run's phases, recorded separately: "tokenization" (data loading and
    # tokenizing, before train()), "training" (train(), the measured window), "evaluation" (after it)
    phases_s: dict = field(default_factory=dict)
