"""How one sweep run executes on a board: the executor protocol and its implementations.

An executor subclasses :class:`Executor` and implements ``run(spec, backend, sampler) -> dict``
returning the measured columns of one ``runs.csv`` row (:data:`MEASURE_COLUMNS`; anything else
goes to the run's JSON record). The sweep has already set the clocks (a locked level, or the
board's default governor for MAXN) and started ``sampler``; the executor does
``spec.warmup_steps`` of warm-up, then measures ``spec.steps`` inside one sampler window. The
protocol declares, with the hardware defaults, ``threaded_sampler`` (False when the executor
drives ``sampler.sample_once`` itself, as the simulated board does on its virtual clock),
``wait(backend, sampler, seconds)`` (how board time passes: ``time.sleep`` on hardware, the
virtual clock on the twin) and ``describe()`` (its settings for ``meta.json``).

Executors: :class:`FinetuneExecutor` here (the Hugging Face harness on a Jetson or NVML GPU),
:class:`dvfslab.sweep.twin.SimExecutor` (the digital twin), and the test-only
``SleepExecutor`` in :mod:`dvfslab.testing.executors`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dvfslab.core.errors import DvfsError
from dvfslab.core.plugins import load_object
from dvfslab.data.workloads import workload_table
from dvfslab.hw.base import Backend, rail_energy_split_j
from dvfslab.sweep.plan import RunSpec

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.measure.energy import Measurement
    from dvfslab.measure.sampler import PowerSampler


#: the measured columns of a ``runs.csv`` row that an executor fills in (identity and status
#: columns belong to the sweep)
MEASURE_COLUMNS = ("time_s", "energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w",
                   "peak_power_w", "gpu_util_pct", "mean_gpu_freq_mhz", "steps", "eval_metric")

#: where an executor class that moved lives now (``--executor`` strings of older commands)
MOVED_EXECUTORS = {"dvfslab.sim.executor:SimExecutor": "dvfslab.sweep.twin:SimExecutor"}


@runtime_checkable
class Executor(Protocol):
    """Runs one planned run on a backend whose clocks the sweep has already set.

    Executors subclass this protocol and implement :meth:`run`; the rest has the defaults of
    real hardware (a threaded sampler, real-time waiting).
    """

    threaded_sampler: bool = True

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> Mapping[str, Any]:
        """The measured columns of the run (:data:`MEASURE_COLUMNS`) and any extras."""
        raise NotImplementedError(f"{type(self).__name__} does not implement run()")

    def wait(self, backend: Backend, sampler: PowerSampler | None, seconds: float) -> None:
        """Let ``seconds`` of board time pass (the sampler thread keeps sampling)."""
        if seconds > 0:
            time.sleep(seconds)

    def describe(self) -> dict:
        """Settings recorded in ``meta.json`` (public attributes with plain values)."""
        plain = (str, int, float, bool, type(None), list, tuple)
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}",
                **{k: v for k, v in vars(self).items() if not k.startswith("_") and isinstance(v, plain)}}


def describe_executor(executor: Executor) -> dict:
    """The executor's settings for ``meta.json`` (:meth:`Executor.describe`), as a plain dict."""
    return dict(executor.describe())


def load_executor(target: str, options: Mapping[str, Any] | None = None) -> Executor:
    """``"package.module:ClassName"`` -> ``ClassName(**options)`` (the CLI's ``--executor``).

    A class that moved (:data:`MOVED_EXECUTORS`) is loaded from its new place; an object that is
    not an :class:`Executor` subclass is refused in one line.
    """
    target = MOVED_EXECUTORS.get(target, target)
    cls = load_object(target, label=f"executor {target!r}", what="executor")
    if not (isinstance(cls, type) and Executor in cls.__mro__):
        raise DvfsError(f"executor {target!r} is not a subclass of dvfslab.sweep.executors.Executor")
    try:
        return cls(**dict(options or {}))
    except TypeError as err:
        raise DvfsError(f"executor {target!r} rejected its options {dict(options or {})}: {err}") from None


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


def measurement_row(m: Measurement, total_rails: Sequence[str], steps: int,
                    eval_metric: float | None = None) -> dict:
    """Measured ``runs.csv`` columns from a sampler window.

    ``energy_gpu_j``/``energy_cpu_j``: the total rails split by :func:`dvfslab.hw.base.split_rails`.
    """
    gpu_j, cpu_j = rail_energy_split_j(m.energy_by_rail_j, total_rails)
    return {"time_s": m.time_s, "energy_j": m.energy_j, "energy_gpu_j": gpu_j, "energy_cpu_j": cpu_j,
            "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
            "gpu_util_pct": m.gpu_util_pct, "mean_gpu_freq_mhz": m.gpu_freq_mhz,
            "steps": steps, "eval_metric": eval_metric,
            "n_samples": m.n_samples, "n_lost": m.n_lost, "sample_rate_hz": m.rate_hz,
            "energy_source": m.energy_source}


# --------------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------------


class FinetuneExecutor(Executor):
    """The Hugging Face fine-tuning harness (:func:`dvfslab.harness.finetune.finetune`) on a real GPU.

    A workload ``model/task`` trains ``spec.warmup_steps + spec.steps`` optimizer steps; the
    harness's callback measures the last ``spec.steps`` in the sweep's sampler. ``model`` is a
    catalog name, a hub id or a local directory, or a key of ``models`` (name -> config dict
    or path, e.g. a random-init config for tests). The same ``seed`` for every repetition:
    repetitions repeat the same computation, so their spread is measurement noise.
    ``batch_size`` / ``max_seq_len`` default to the catalog's values for the workload (else
    32 / 128); other keyword arguments go to ``finetune`` (``n_train``, ``data_dir`` ...).
    ``step_rows``: as for :class:`~dvfslab.sweep.twin.SimExecutor`, repetition 0 of each (workload, policy, level)
    keeps the time and energy of its first ``step_rows`` measured steps (``steps.csv``, which
    the online governor replays).
    """

    def __init__(self, batch_size: int | None = None, max_seq_len: int | None = None, seed: int = 0,
                 models: Mapping[str, Any] | None = None, step_rows: int = 0, **finetune_kwargs):
        self.batch_size = batch_size
        self.max_seq_len = max_seq_len
        self.seed = seed
        self.step_rows = int(step_rows)
        self.models = dict(models or {})
        self.finetune_kwargs = dict(finetune_kwargs)

    def describe(self) -> dict:
        return {**super().describe(), "models": sorted(self.models),
                **{k: v for k, v in self.finetune_kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}}

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        from dvfslab.harness.finetune import finetune

        model, _, task = spec.workload_id.rpartition("/")
        known = workload_table([spec.workload_id]).iloc[0]
        keep_steps = self.step_rows > 0 and spec.rep == 0
        kwargs = {"progress": False, "save_samples": False, "record_steps": keep_steps, "split": known["split"],
                  "batch_size": self.batch_size or _int_or(known["batch_size"], 32),
                  "max_seq_len": self.max_seq_len or _int_or(known["max_seq_len"], 128),
                  **self.finetune_kwargs}
        if model in self.models:
            kwargs["model_label"] = model
        res = finetune(self.models.get(model, model), task, backend=backend, freq_mhz=spec.freq_mhz,
                       policy=spec.policy, steps=spec.steps + spec.warmup_steps, warmup_steps=spec.warmup_steps,
                       seed=self.seed, sampler=sampler, **kwargs)
        row = {k: res.run.get(k) for k in MEASURE_COLUMNS}
        out = {**row, "workload": res.workload, "metrics": res.metrics,
               "train_loss": res.run.get("train_loss"), "eval_metric_name": res.run.get("eval_metric_name")}
        if keep_steps:  # the measured steps only (the harness's rows include the warm-up)
            kept = res.steps[spec.warmup_steps:][:self.step_rows]
            out["step_rows"] = {"time_s": [r["time_s"] for r in kept], "energy_j": [r["energy_j"] for r in kept]}
        return out


def _int_or(value, default: int) -> int:
    try:
        return int(value) if value is not None and not math.isnan(float(value)) else default
    except (TypeError, ValueError):
        return default
