"""The digital twin as a sweep executor: catalog workloads trained on the simulated board.

It implements the sweep's :class:`~dvfslab.sweep.executors.Executor` protocol, so it lives in
the sweep room (``--executor dvfslab.sweep.twin:SimExecutor``; the old
``dvfslab.sim.executor:SimExecutor`` still loads, see
:data:`~dvfslab.sweep.executors.MOVED_EXECUTORS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import Backend
from dvfslab.sim.backend import sim_board
from dvfslab.sim.model import SimWorkload
from dvfslab.sim.phases import check_phases
from dvfslab.sweep.executors import Executor, measurement_row

if TYPE_CHECKING:  # pragma: no cover
    from dvfslab.measure.sampler import PowerSampler
    from dvfslab.sweep.plan import RunSpec


class SimExecutor(Executor):
    """The digital twin: trains a catalog workload on the simulated board in virtual time.

    Needs the ``sim`` backend (its ``board``). Warm-up, measured steps and every wait run on
    the twin's virtual clock, and the rails are read at every ``tick_s`` of it into the sweep's
    :class:`~dvfslab.measure.sampler.PowerSampler`, so energy is measured the way it is on hardware
    (trapezoid windows with interpolated edges). The readings of a whole ``train``/``idle``
    call are taken in one go (:meth:`~dvfslab.sim.backend.SimPowerReader.read_ticks` into
    :meth:`~dvfslab.measure.sampler.PowerSampler.extend`): the same samples, noise included, as a call
    per tick, without the Python cost. The twin's own exact integrals go to the run record
    (``extras["twin"]``). A run's noise depends only on the board seed, the workload and
    (policy, level, rep); the board's clock, temperature and sensor noise stream carry over from
    run to run, and a resumed sweep puts back the state the run before left
    (:meth:`resume_state`), so a sweep interrupted and resumed writes the same runs as one never
    interrupted.

    ``step_rows``: for repetition 0 of each (workload, policy, level), the record also keeps
    the first ``step_rows`` steps (``extras["step_rows"]``: ``time_s`` and ``energy_j`` lists, time
    from the twin, energy measured by the sampler over each step, as the fine-tuning harness does) — what ``dvfslab simulate``
    writes to ``steps.csv``. ``workloads``: ``workloads.csv`` rows to run as given (else the
    catalog's row for each id, with ``batch_size`` / ``max_seq_len`` if set). ``window_phases``:
    the non-training phases inside each run's window (:mod:`dvfslab.sim.phases`); none by default,
    like dvfslab's harness, which measures ``train()`` with evaluation and saving off —
    ``dvfslab simulate`` passes its plan's (evaluation and checkpoints).
    """

    threaded_sampler = False

    def __init__(self, tick_s: float = 0.05, batch_size: int | None = None, max_seq_len: int | None = None,
                 step_rows: int = 0, workloads: Sequence[Mapping] | None = None,
                 window_phases: Sequence[str] = ()):
        self.tick_s = float(tick_s)
        self.window_phases = check_phases(window_phases)
        self.batch_size = batch_size
        self.max_seq_len = max_seq_len
        self.step_rows = int(step_rows)
        self._workloads: dict = {r["workload_id"]: SimWorkload.from_row(r, window_phases=self.window_phases)
                                     for r in workloads or ()}

    @staticmethod
    def _board(backend: Backend):
        return sim_board(backend, "SimExecutor", "use --backend sim")

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

    def resume_state(self, backend: Backend) -> dict:
        """The twin's state after a run (:meth:`dvfslab.sim.board.SimBoard.snapshot`), kept in the
        run's record: a resumed sweep puts it back before the next run (:meth:`resume_from`), so
        the twin's clock, temperature and noise stream continue as in a sweep never interrupted."""
        return self._board(backend).snapshot()

    def resume_from(self, backend: Backend, state: Mapping) -> None:
        """Put back the state :meth:`resume_state` kept after the run before this one."""
        self._board(backend).restore(state)

    def workload(self, workload_id: str):
        """The twin's view of a catalog workload (cached)."""
        if workload_id not in self._workloads:
            from dvfslab.data.workloads import workload_table

            row = workload_table([workload_id]).iloc[0].to_dict()
            if row.get("n_layers") is None or row["n_layers"] != row["n_layers"]:  # None or NaN
                raise DvfsError(f"workload {workload_id!r} is not in the catalog (dvfslab.data.catalog); "
                                "the simulated board only runs catalog workloads")
            row.update({k: v for k, v in (("batch_size", self.batch_size), ("max_seq_len", self.max_seq_len))
                        if v is not None})
            self._workloads[workload_id] = SimWorkload.from_row(row, window_phases=self.window_phases)
        return self._workloads[workload_id]

    def run(self, spec: RunSpec, backend: Backend, sampler: PowerSampler | None) -> dict:
        from dvfslab.hw.base import format_mhz

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
            # the whole module: its input rail alone when it has one (VDD_IN reads every other rail's load)
            rails = board.profile.board.board_rails
            row["energy_board_j"] = float(sum(m.energy_by_rail_j[r] for r in rails if r in m.energy_by_rail_j))
        twin = {"time_s": res.time_s, "energy_j": res.energy_j, "energy_gpu_j": res.energy_gpu_j,
                "energy_cpu_j": res.energy_cpu_j, "gpu_util_pct": res.gpu_util_pct,
                "mean_gpu_freq_mhz": res.mean_gpu_freq_mhz, "run_key": key,
                "phase_time_s": res.phase_time_s()}
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
        from dvfslab.measure.energy import MW_PER_W, integrate_intervals

        n = min(self.step_rows, res.steps)
        energy: list = [None] * n
        if sampler is not None:
            edges = res.t_start_s + np.concatenate(([0.0], np.cumsum(res.step_time_s[:n])))
            arr = sampler.arrays()
            total_w = sum(arr.rails_mw[r] for r in sampler.total_rails) / MW_PER_W
            energy = integrate_intervals(arr.t_s, total_w, edges).tolist()
        return {"time_s": res.step_time_s[:n].tolist(), "energy_j": energy}
