"""How one sweep run executes on a board, and how the board is brought back between runs.

An executor is anything with ``run(spec, backend, sampler) -> dict`` returning the measured
columns of one ``runs.csv`` row (``time_s``, ``energy_j``, ``energy_gpu_j``, ``energy_cpu_j``,
``avg_power_w``, ``peak_power_w``, ``gpu_util_pct``, ``mean_gpu_freq_mhz``, ``steps``,
``eval_metric``; anything else goes to the run's JSON record). The sweep has already set the
clocks (a locked level, or the board's default governor for MAXN) and started ``sampler``;
the executor does ``spec.warmup_steps`` of warm-up, then measures ``spec.steps`` inside one
sampler window. Optional attributes: ``threaded_sampler`` (False when the executor drives
``sampler.sample_once`` itself, as the simulated board does on its virtual clock) and
``wait(backend, sampler, seconds)`` (how to let board time pass: ``time.sleep`` on hardware,
advancing the virtual clock on the twin).

Executors here: :class:`FinetuneExecutor` (the Hugging Face harness on a Jetson or NVML GPU),
:class:`SimExecutor` (the digital twin) and :class:`SleepExecutor` (for tests only).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .backends.base import Backend, DvfsError

if TYPE_CHECKING:  # pragma: no cover
    from .energy import Measurement
    from .power import PowerSampler
    from .sweep import RunSpec

FIXED, MAXN = "fixed", "maxn"


@runtime_checkable
class Executor(Protocol):
    """Runs one planned run on a backend whose clocks the sweep has already set."""

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> Mapping[str, Any]:
        ...


class BaseExecutor:
    """Defaults for executors on real hardware: a threaded sampler, real-time waiting."""

    threaded_sampler: bool = True

    def wait(self, backend: Backend, sampler: PowerSampler | None, seconds: float) -> None:
        """Let ``seconds`` of board time pass (the sampler thread keeps sampling)."""
        if seconds > 0:
            time.sleep(seconds)

    def describe(self) -> dict:
        """Settings recorded in ``meta.json`` (public attributes with plain values)."""
        plain = (str, int, float, bool, type(None), list, tuple)
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}",
                **{k: v for k, v in vars(self).items() if not k.startswith("_") and isinstance(v, plain)}}

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        raise NotImplementedError


def describe_executor(executor: Executor) -> dict:
    if hasattr(executor, "describe"):
        return dict(executor.describe())
    return {"class": f"{type(executor).__module__}:{type(executor).__qualname__}"}


def wait(executor: Executor, backend: Backend, sampler: PowerSampler | None, seconds: float) -> None:
    """Let board time pass the executor's way (real sleep by default)."""
    if hasattr(executor, "wait"):
        executor.wait(backend, sampler, seconds)
    elif seconds > 0:
        time.sleep(seconds)


def load_executor(target: str, options: Mapping[str, Any] | None = None) -> Executor:
    """``"package.module:ClassName"`` -> ``ClassName(**options)`` (the CLI's ``--executor``)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise DvfsError(f"executor {target!r} must look like 'package.module:ClassName'")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise DvfsError(f"cannot load executor {target!r}: {err}") from None
    try:
        return cls(**dict(options or {}))
    except TypeError as err:
        raise DvfsError(f"executor {target!r} rejected its options {dict(options or {})}: {err}") from None


# --------------------------------------------------------------------------------------------
# Sampling and rows
# --------------------------------------------------------------------------------------------


def make_sampler(backend: Backend, executor: Executor) -> PowerSampler | None:
    """A fresh sampler on the backend's reader and clock (None without a power reader)."""
    if backend.power is None:
        return None
    from .power import PowerSampler

    return PowerSampler(backend.power, clock=backend.clock,
                        threaded=getattr(executor, "threaded_sampler", True))


@contextlib.contextmanager
def sampler_running(sampler: PowerSampler | None) -> Iterator[PowerSampler | None]:
    """Start the sampler (if any) for the block and always stop it."""
    if sampler is None:
        yield None
        return
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


def _rail_energy(by_rail: Mapping[str, float], rails: Sequence[str], want: str, other: str) -> float | None:
    picked = [r for r in rails if want in r.upper() and other not in r.upper()]
    return float(sum(by_rail[r] for r in picked)) if picked else None


def measurement_row(m: Measurement, total_rails: Sequence[str], steps: int,
                    eval_metric: float | None = None) -> dict:
    """Measured ``runs.csv`` columns from a sampler window.

    ``energy_gpu_j``/``energy_cpu_j`` sum the total rails named like GPU / CPU (``VDD_GPU_SOC``,
    ``VDD_CPU_CV`` on AGX Orin); a rail named like both (Orin NX ``VDD_CPU_GPU_CV``) is in
    neither, which leaves the split empty rather than wrong.
    """
    return {"time_s": m.time_s, "energy_j": m.energy_j,
            "energy_gpu_j": _rail_energy(m.energy_by_rail_j, total_rails, "GPU", "CPU"),
            "energy_cpu_j": _rail_energy(m.energy_by_rail_j, total_rails, "CPU", "GPU"),
            "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
            "gpu_util_pct": m.gpu_util_pct, "mean_gpu_freq_mhz": m.gpu_freq_mhz,
            "steps": steps, "eval_metric": eval_metric,
            "n_samples": m.n_samples, "n_lost": m.n_lost, "sample_rate_hz": m.rate_hz}


# --------------------------------------------------------------------------------------------
# Between runs: clocks, cool-down, idle power
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cooldown:
    """Settings of the pause before each run, in board seconds (virtual on the twin).

    The pause ends when the GPU temperature is under ``max_temp_c``; on a board without a
    readable GPU temperature (or with ``max_temp_c=None``), when the CPU+GPU power over one
    ``poll_s`` window is within ``idle_power_tol`` (relative) of the idle power measured at
    the start of the session. ``timeout_s`` bounds the pause; the run then goes ahead and its
    record says ``timed_out``. ``idle_measure_s`` is the length of that idle measurement.
    """

    max_temp_c: float | None = 50.0
    idle_power_tol: float = 0.15
    timeout_s: float = 300.0
    poll_s: float = 5.0
    min_s: float = 0.0
    idle_measure_s: float = 10.0


def gpu_temperature_c(backend: Backend) -> float | None:
    """The GPU temperature (``gpu-thermal`` zone, else the first zone named like ``gpu``)."""
    if backend.telemetry is None:
        return None
    try:
        temps = backend.telemetry.temperatures_c()
    except (DvfsError, OSError):
        return None
    for key in ("gpu-thermal", *sorted(k for k in temps if "gpu" in k.lower())):
        value = temps.get(key)
        if value is not None and math.isfinite(value):
            return float(value)
    return None


def _window_power_w(executor: Executor, backend: Backend, sampler: PowerSampler, seconds: float,
                    name: str) -> float:
    sampler.begin_window(name)
    try:
        wait(executor, backend, sampler, seconds)
    finally:
        m = sampler.end_window(name)
    return m.avg_power_w


def cool_down(backend: Backend, executor: Executor, sampler: PowerSampler | None,
              settings: Cooldown, idle_power_w: float | None) -> dict:
    """Wait until the board is cool (or idle); return what was waited and observed."""
    t0 = backend.clock()
    wait(executor, backend, sampler, settings.min_s)
    power_w = temp_c = None
    while True:
        temp_c = gpu_temperature_c(backend) if settings.max_temp_c is not None else None
        by_power = temp_c is None and sampler is not None and idle_power_w is not None
        if by_power:
            power_w = _window_power_w(executor, backend, sampler, settings.poll_s, "__cooldown__")
        if temp_c is not None:
            cool = temp_c < settings.max_temp_c
        elif by_power:
            cool = power_w <= idle_power_w * (1.0 + settings.idle_power_tol)
        else:
            cool = True  # nothing to watch: only min_s applies
        waited_s = backend.clock() - t0
        if cool or waited_s >= settings.timeout_s - 1e-6:
            return {"waited_s": waited_s, "gpu_temp_c": temp_c, "power_w": power_w,
                    "criterion": "temperature" if temp_c is not None else ("power" if by_power else "none"),
                    "timed_out": not cool}
        if not by_power:
            wait(executor, backend, sampler, min(settings.poll_s, settings.timeout_s - waited_s))


def measure_idle_power_w(backend: Backend, executor: Executor, sampler: PowerSampler | None,
                         seconds: float) -> float | None:
    """Mean CPU+GPU power (W) of the idle board over ``seconds`` (None without a reader)."""
    if sampler is None or seconds <= 0:
        return None
    return _window_power_w(executor, backend, sampler, seconds, "__idle__")


def set_policy(backend: Backend, spec: RunSpec) -> None:
    """Lock the level of a fixed run, or give the board its default governor for a MAXN run."""
    if backend.clocks is None:
        if spec.policy == FIXED:
            raise DvfsError(f"backend {backend.name!r} has no clock control; it cannot run {spec.level_label}")
        return
    if spec.policy == MAXN:
        backend.clocks.reset()
    else:
        backend.clocks.lock(spec.freq_mhz)


def reset_clocks(backend: Backend) -> None:
    """Give the clocks back (no-op without clock control)."""
    if backend.clocks is not None:
        backend.clocks.reset()


def repair_clocks(backend: Backend) -> dict | None:
    """Restore clocks a killed process left pinned (the backend's state file), then reset.

    Backends that persist their originals (Jetson: ``restore_saved``) get them back here, so
    that a resumed sweep's idle measurement and MAXN runs see the board's own governor.
    """
    state_file = getattr(backend.clocks, "state_file", None)
    if state_file is not None:  # never take over clocks another live process holds
        from .backends.jetson_safety import check_owner

        held = state_file.load()
        if held is not None:
            check_owner(held, state_file.path)
    restore = getattr(backend.clocks, "restore_saved", None)
    saved = restore() if callable(restore) else None
    reset_clocks(backend)
    return None if saved is None else {"restored_from_state_file": repr(saved)}


# --------------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------------


class SleepExecutor(BaseExecutor):
    """FOR TESTS: each run waits ``warmup_s`` then measures a ``seconds`` long window.

    Nothing is trained: the row holds the time and the energy the sampler measured while
    waiting (on a fake sysfs tree, the fake rails). Runs whose id matches the regular
    expression ``fail`` raise ``RuntimeError`` (to test failure records).
    """

    def __init__(self, seconds: float = 0.05, warmup_s: float = 0.0, fail: str | None = None):
        self.seconds = float(seconds)
        self.warmup_s = float(warmup_s)
        self.fail = fail

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        self.wait(backend, sampler, self.warmup_s)
        if self.fail and re.search(self.fail, spec.run_id):
            raise RuntimeError(f"SleepExecutor: injected failure for {spec.run_id}")
        if sampler is None:
            t0 = backend.clock()
            self.wait(backend, sampler, self.seconds)
            return {"time_s": backend.clock() - t0, "steps": spec.steps}
        sampler.begin_window(spec.run_id)
        try:
            self.wait(backend, sampler, self.seconds)
        finally:
            m = sampler.end_window(spec.run_id)
        row = measurement_row(m, sampler.total_rails, spec.steps)
        if backend.clocks is not None:  # what the clocks were during the run, for the tests
            st = backend.clocks.state()
            row["clock_state"] = {"min_freq_mhz": st.min_freq_mhz, "max_freq_mhz": st.max_freq_mhz,
                                  "governor": st.governor}
        return row


class SimExecutor(BaseExecutor):
    """The digital twin: trains a catalog workload on the simulated board in virtual time.

    Needs the ``sim`` backend (its ``board``). Warm-up, measured steps and every wait run on
    the twin's virtual clock, and the rails are read at every ``tick_s`` of it into the sweep's
    :class:`~dvfslab.power.PowerSampler`, so energy is measured the way it is on hardware
    (trapezoid windows with interpolated edges). The readings of a whole ``train``/``idle``
    call are taken in one go (:meth:`~dvfslab.backends.sim.SimPowerReader.read_ticks` into
    :meth:`~dvfslab.power.PowerSampler.extend`): the same samples, noise included, as a call
    per tick, without the Python cost. The twin's own exact integrals go to the run record
    (``extras["twin"]``). A run's noise depends only on the board seed, the workload and
    (policy, level, rep), so runs are reproducible whatever the order and however often the
    sweep was resumed.

    ``step_rows``: for repetition 0 of each (workload, policy, level), the record also keeps
    the first ``step_rows`` steps (``extras["step_rows"]``: ``time_s`` and ``energy_j`` lists, time
    from the twin, energy measured by the sampler over each step, as the fine-tuning harness does) — what ``dvfslab simulate``
    writes to ``steps.csv``. ``workloads``: ``workloads.csv`` rows to run as given (else the
    catalog's row for each id, with ``batch_size`` / ``max_seq_len`` if set).
    """

    threaded_sampler = False

    def __init__(self, tick_s: float = 0.05, batch_size: int | None = None, max_seq_len: int | None = None,
                 step_rows: int = 0, workloads: Sequence[Mapping] | None = None):
        from .backends.sim import SimWorkload

        self.tick_s = float(tick_s)
        self.batch_size = batch_size
        self.max_seq_len = max_seq_len
        self.step_rows = int(step_rows)
        self._workloads: dict = {r["workload_id"]: SimWorkload.from_row(r) for r in workloads or ()}

    @staticmethod
    def _board(backend: Backend):
        board = getattr(backend, "board", None)
        if board is None or not hasattr(board, "train"):
            raise DvfsError(f"SimExecutor needs the simulated board (--backend sim), not {backend.name!r}")
        return board

    @staticmethod
    def _ticks(sampler: PowerSampler | None):
        """``on_ticks`` for the board: read every tick's rails into ``sampler`` (None: no sampling)."""
        if sampler is None:
            return None
        read = sampler.reader.read_ticks
        return lambda ticks: sampler.extend(**read(ticks))

    def wait(self, backend: Backend, sampler: PowerSampler | None, seconds: float) -> None:
        """Idle the twin for ``seconds`` of virtual time (no real sleeping), sampling every tick."""
        if seconds > 0:
            self._board(backend).idle(seconds, on_ticks=self._ticks(sampler), tick_s=self.tick_s)

    def workload(self, workload_id: str):
        """The twin's view of a catalog workload (cached)."""
        if workload_id not in self._workloads:
            from .backends.sim import SimWorkload
            from .sweep import workload_table

            row = workload_table([workload_id]).iloc[0].to_dict()
            if row.get("n_layers") is None or row["n_layers"] != row["n_layers"]:  # None or NaN
                raise DvfsError(f"workload {workload_id!r} is not in the catalog (dvfslab.workloads); "
                                "the simulated board only runs catalog workloads")
            row.update({k: v for k, v in (("batch_size", self.batch_size), ("max_seq_len", self.max_seq_len))
                        if v is not None})
            self._workloads[workload_id] = SimWorkload.from_row(row)
        return self._workloads[workload_id]

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        from .backends.base import format_mhz

        board, wl, ticks = self._board(backend), self.workload(spec.workload_id), self._ticks(sampler)
        key = f"{spec.policy}/{format_mhz(spec.freq_mhz)}/{spec.rep}" if spec.freq_mhz is not None \
            else f"{spec.policy}/{spec.rep}"
        if spec.warmup_steps:
            board.train(wl, spec.warmup_steps, on_ticks=ticks, tick_s=self.tick_s, run_key=f"{key}/warmup")
        if sampler is None:
            res = board.train(wl, spec.steps, run_key=key)
            row = {"time_s": res.time_s, "steps": spec.steps}
        else:
            sampler.begin_window(spec.run_id)
            try:
                res = board.train(wl, spec.steps, on_ticks=ticks, tick_s=self.tick_s, run_key=key)
            finally:
                m = sampler.end_window(spec.run_id)
            row = measurement_row(m, sampler.total_rails, spec.steps)
        twin = {"time_s": res.time_s, "energy_j": res.energy_j, "energy_gpu_j": res.energy_gpu_j,
                "energy_cpu_j": res.energy_cpu_j, "gpu_util_pct": res.gpu_util_pct,
                "mean_gpu_freq_mhz": res.mean_gpu_freq_mhz, "run_key": key}
        for col in ("gpu_util_pct", "mean_gpu_freq_mhz"):
            if row.get(col) is None:
                row[col] = twin[col]
        out = {**row, "twin": twin}
        if self.step_rows > 0 and spec.rep == 0:
            out["step_rows"] = self._step_records(res, sampler)
        return out

    def _step_records(self, res, sampler: PowerSampler | None) -> dict:
        """The first ``step_rows`` steps: ``{"time_s": [...], "energy_j": [...]}``, time from the
        twin, energy over each step from the sampler (None without one).

        Energy per step is the sampler's window integral over the step (as ``sampler.measure``
        would give for each, the fine-tuning harness's way), computed for all steps at once.
        """
        from .energy import MW_PER_W, integrate_intervals

        n = min(self.step_rows, res.steps)
        energy: list = [None] * n
        if sampler is not None:
            edges = res.t_start_s + np.concatenate(([0.0], np.cumsum(res.step_time_s[:n])))
            arr = sampler.arrays()
            total_w = sum(arr.rails_mw[r] for r in sampler.total_rails) / MW_PER_W
            energy = integrate_intervals(arr.t_s, total_w, edges).tolist()
        return {"time_s": res.step_time_s[:n].tolist(), "energy_j": energy}


class FinetuneExecutor(BaseExecutor):
    """The Hugging Face fine-tuning harness (:func:`dvfslab.finetune.finetune`) on a real GPU.

    A workload ``model/task`` trains ``spec.warmup_steps + spec.steps`` optimizer steps; the
    harness's callback measures the last ``spec.steps`` in the sweep's sampler. ``model`` is a
    catalog name, a hub id or a local directory, or a key of ``models`` (name -> config dict
    or path, e.g. a random-init config for tests). The same ``seed`` for every repetition:
    repetitions repeat the same computation, so their spread is measurement noise.
    ``batch_size`` / ``max_seq_len`` default to the catalog's values for the workload (else
    32 / 128); other keyword arguments go to ``finetune`` (``n_train``, ``data_dir`` ...).
    ``step_rows``: as for :class:`SimExecutor`, repetition 0 of each (workload, policy, level)
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
        from .finetune import finetune
        from .sweep import workload_table

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
        row = {k: res.run.get(k) for k in ("time_s", "energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w",
                                           "peak_power_w", "gpu_util_pct", "mean_gpu_freq_mhz", "steps",
                                           "eval_metric")}
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
