"""The dataset contract's schema (version 1): its files' columns and kinds, the allowed values,
the knob a meta.json names, :class:`DatasetError` and the loaded :class:`Dataset`.

Split out of :mod:`dvfslab.data.contract` (which re-exports every name here): the reading and
writing of a dataset directory stay there, the cross-file rules of the runs live in
:mod:`dvfslab.data.validation`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.data.knobs import DEFAULT_KNOB, SETTING, Knob, get_knob

SCHEMA_VERSION = 1
SOURCES = ("measured", "simulated")
# "fmax": the highest level of a clock sweep; "max_level": the highest level of any knob (a
# power-limit sweep's default limit); both mean the same rule in the analysis
BASELINES = ("maxn", "fmax", "max_level")
RUN_STATUSES = ("ok", "failed")
#: a workload's model type: a transformer (encoder-only, decoder-only), a convolutional network, a
#: recurrent one (LSTM, GRU), or other; features that do not apply to it stay empty (is_decoder for a
#: CNN, avg_seq_len for an image model), never invented
MODEL_TYPES = ("encoder", "decoder", "cnn", "rnn", "other")
SPLITS = ("characterization", "evaluation")

# column -> kind: "str" (required, non-empty), "str?" (may be empty), "float", "float?",
# "int", "int?"
WORKLOAD_COLUMNS: dict[str, str] = {
    "workload_id": "str",
    "model": "str",
    "model_family": "str?",
    "model_type": "str?",
    "params_m": "float?",
    "n_layers": "int?",
    "hidden_size": "int?",
    "task": "str",
    "avg_seq_len": "float?",
    "max_seq_len": "int?",
    "batch_size": "int?",
    "split": "str",
}
# optional workloads.csv columns (kept, typed, checked when present). ``job_steps``: how many of
# the runs' units (the unit of runs.csv ``steps``: optimizer steps, or epochs / inferences in an
# imported trace; fractional allowed) the whole job runs; positive and finite. Without it the
# job is the measured run itself.
WORKLOAD_EXTRA_COLUMNS: dict[str, str] = {"job_steps": "float?"}
RUN_COLUMNS: dict[str, str] = {
    "run_id": "str",
    "workload_id": "str",
    "policy": "str",
    "gpu_freq_mhz": "float?",
    "rep": "int",
    "time_s": "float?",
    "energy_j": "float?",
    "energy_gpu_j": "float?",
    "energy_cpu_j": "float?",
    "avg_power_w": "float?",
    "peak_power_w": "float?",
    "gpu_util_pct": "float?",
    "mean_gpu_freq_mhz": "float?",
    "steps": "int?",
    "eval_metric": "float?",
    "status": "str",
    "started_at": "str?",
}
# optional columns a writer may add (kept, typed, not required). ``board_id``: the board a run
# ran on (sweeps record it; a fleet sweep's dataset holds several boards, each described under
# meta.json "boards"); ``energy_board_j``: the energy of every rail of the board (on AGX Orin
# VDD_GPU_SOC + VDD_CPU_CV + VIN_SYS_5V0 + VDDQ_VDD2_1V8AO) beside the CPU+GPU ``energy_j``.
# Datasets without these columns still load.
#
# ``emc_freq_mhz`` / ``cpu_freq_mhz``: the memory clock and the CPU clusters' clock as read back
# from the board right after the run's policy was set (a sweep records them when the backend can
# read them, pinned or not: docs/sweep.md, "The other clocks"); positive when given. A joint
# sweep over several knobs reuses them as the knobs' columns.
RUN_EXTRA_COLUMNS: dict[str, str] = {"error": "str?", "board_id": "str?", "energy_board_j": "float?",
                                     "emc_freq_mhz": "float?", "cpu_freq_mhz": "float?"}
#: the other clocks' runs.csv columns, by clock name
CLOCK_COLUMNS: dict[str, str] = {"emc": "emc_freq_mhz", "cpu": "cpu_freq_mhz"}
STEP_COLUMNS: dict[str, str] = {
    "run_id": "str",
    "step": "int",
    "time_s": "float",
    "energy_j": "float?",
}
META_REQUIRED = ("schema_version", "source", "device", "freq_table_mhz", "baseline")


def run_columns(knob: Knob) -> dict[str, str]:
    """:data:`RUN_COLUMNS` with the level column named after ``knob`` (same position); a joint
    dataset keeps ``gpu_freq_mhz`` (its level column, ``setting``, is derived on loading)."""
    if knob.name == SETTING:
        return dict(RUN_COLUMNS)
    return {(knob.name if col == DEFAULT_KNOB else col): kind for col, kind in RUN_COLUMNS.items()}


class DatasetError(DvfsError):
    """A dataset directory breaks the contract. ``str(err)`` is one line naming the place."""

    def __init__(self, file: str | os.PathLike, problem: str, *, column: str | None = None,
                 row: int | None = None, fix: str | None = None):
        self.file = str(file)
        self.column = column
        self.row = row
        self.problem = problem
        where = self.file
        if column is not None:
            where += f": column '{column}'"
        if row is not None:
            where += f", row {row} (line {row + 1})"
        super().__init__(f"{where}: {problem}" + (f" — {fix}" if fix else ""))


@dataclass
class Dataset:
    """A loaded, validated dataset directory."""

    path: Path
    meta: dict
    workloads: pd.DataFrame
    runs: pd.DataFrame
    steps: pd.DataFrame | None = None

    @property
    def source(self) -> str:
        return self.meta["source"]

    @property
    def knob(self) -> Knob:
        """What the fixed-policy runs set (meta.json ``knob``; default ``gpu_freq_mhz``; a joint
        dataset's: :data:`SETTING`)."""
        return get_knob(knob_name(self.meta))

    @property
    def levels(self) -> list[float]:
        """The knob's levels, in its unit (``freq_table_mhz`` or ``power_limit_table_w``; a
        joint dataset's: the setting indices 0, 1, ..., N-1)."""
        if self.knob.name == SETTING:
            return [float(i) for i in range(len(self.meta["settings"]))]
        return [float(f) for f in self.meta[self.knob.table_key]]

    @property
    def joint_knobs(self) -> tuple[str, ...]:
        """The clocks of a joint dataset (runs.csv columns, meta.json ``knobs``); ``()`` otherwise."""
        return tuple(self.meta.get("knobs") or ()) if self.knob.name == SETTING else ()

    @property
    def settings(self) -> list[tuple[float, ...]]:
        """A joint dataset's settings (level ``i`` is ``settings[i]``); ``[]`` otherwise."""
        return [tuple(float(v) for v in s) for s in self.meta.get("settings") or []] if self.joint_knobs else []

    @property
    def freq_table_mhz(self) -> list[float]:
        if self.knob.name != DEFAULT_KNOB:
            raise DatasetError(self.path / "meta.json", f"the knob is {self.knob.name}, not the GPU clock: "
                                                        "there is no freq_table_mhz", fix="use Dataset.levels")
        return self.levels

    @property
    def baseline(self) -> str:
        return self.meta["baseline"]

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"

    def ok_runs(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] == "ok"]

    def summary_line(self) -> str:
        return f"ok: {len(self.workloads)} workloads, {len(self.runs)} runs ({self.source})"


def knob_name(meta: Mapping) -> str:
    """The knob a meta.json names: ``knob``, else :data:`SETTING` when it lists ``knobs`` (a
    joint dataset), else the GPU clock."""
    return meta.get("knob") or (SETTING if "knobs" in meta else DEFAULT_KNOB)

