"""Online governor: profile a few levels at the start of the run, fit the U-curve, lock the best.

No training data, no features: the governor learns the workload it is running. Design (chosen
on principle, then evaluated; docs/governors.md):

* **Probe levels**: ``n_levels`` (default 5) levels spread evenly over the board's table,
  both ends included (306, 510, 816, 1122, 1300.5 MHz on the Orin). The minimum can be
  anywhere; an even spread brackets it, and the highest level doubles as the stand-in for
  the baseline's speed (MAXN's dynamic clock runs at or below it under load).
* **Schedule, coarse to fine**: ``warmup_steps`` (default 1) step, then ``coarse_steps``
  (default 2) steps at each probe level, round-robin (1, 2, ..., 5, 1, 2, ...), highest
  first, so that slow drifts (warm-up, temperature) spread over the levels instead of
  biasing the last ones; a first fit; then ``fine_steps`` (default 5) steps at each of the
  ``fine_levels`` (default 3) table levels around the coarse minimum, round-robin. In all
  1 + 5 x 2 + 3 x 5 = 26 profiling steps. The spread levels locate the minimum, the fine
  phase measures it well; most probing steps run near the optimum, where they cost little
  (probing the table's ends for long is what makes a one-phase design expensive).
* **Fit**: energy per step is power x time. Time per step follows the classic DVFS model
  ``T(f) = a + b / f`` (a part that does not scale with the GPU clock, and one that does),
  fitted with ``a, b >= 0`` on every probing step after the warm-up, in log space (a long
  batch multiplies its step's time: the noise is multiplicative and heavy-tailed); power
  varies much less from step to step than time (a longer batch mostly takes longer), so
  ``P(f)`` is a quadratic least-squares fit of the levels' mean power. ``E(f) = P(f) T(f)``
  is evaluated on the table levels; the final choice is the least among the fine phase's
  levels (a trust region: levels measured with two noisy steps are never locked on the
  strength of an extrapolation).
* **Charged**: the probing steps run at the probed levels, and their energy and time count
  against the governor (:meth:`OnlineGovernor.charge`).

:class:`OnlineProfiler` is the live object (a board loop or a training callback feeds it one
step at a time); :class:`OnlineGovernor` replays it over a dataset's ``steps.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import GovernorContext, register_governor
from dvfslab.governors.curve import pick_level
from dvfslab.governors.errors import GovernorError

DEFAULT_LEVELS = 5
DEFAULT_COARSE_STEPS = 2
DEFAULT_FINE_LEVELS = 3
DEFAULT_FINE_STEPS = 5
DEFAULT_WARMUP_STEPS = 1


def spread_levels(levels_mhz: Sequence[float], n: int) -> list[float]:
    """``n`` levels evenly spread over the table's indices, both ends included, ascending."""
    table = sorted(float(f) for f in levels_mhz)
    if n >= len(table):
        return table
    if n < 3:
        raise GovernorError(f"online: a U-curve needs at least 3 probe levels, got {n}")
    idx = sorted({int(round(i)) for i in np.linspace(0, len(table) - 1, n)})
    return [table[i] for i in idx]


class OnlineProfiler:
    """Live probing: ask :meth:`next_level`, run one step there, :meth:`observe` it; repeat.

    Two phases (coarse to fine): ``warmup_steps`` + ``coarse_steps`` steps at each of the
    spread probe levels, a fit, then ``fine_steps`` steps at each of ``fine_levels`` table
    levels around the fitted minimum, and a final fit on every probing step. After
    :attr:`profiling_steps` observed steps :attr:`done` is true and :meth:`next_level` returns
    the chosen level for the rest of the run. ``max_slowdown_pct`` limits the predicted
    slowdown against the fitted time at the highest probed level.
    """

    def __init__(self, levels_mhz: Sequence[float], *, n_levels: int = DEFAULT_LEVELS,
                 coarse_steps: int = DEFAULT_COARSE_STEPS, fine_levels: int = DEFAULT_FINE_LEVELS,
                 fine_steps: int = DEFAULT_FINE_STEPS, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 probe_levels: Sequence[float] | None = None, max_slowdown_pct: float | None = None):
        if coarse_steps < 1 or fine_steps < 0 or fine_levels < 0 or warmup_steps < 0:
            raise GovernorError(f"online: coarse_steps must be >= 1 and fine_steps, fine_levels, warmup_steps >= 0, "
                                f"got {coarse_steps}, {fine_steps}, {fine_levels}, {warmup_steps}")
        self.levels_mhz = sorted(float(f) for f in levels_mhz)
        self.probe_levels = sorted(float(f) for f in probe_levels) if probe_levels else spread_levels(self.levels_mhz, n_levels)
        if len(self.probe_levels) < 3:
            raise GovernorError(f"online: needs at least 3 probe levels, got {self.probe_levels}")
        self.coarse_steps, self.fine_levels, self.fine_steps = int(coarse_steps), int(fine_levels), int(fine_steps)
        self.warmup_steps = int(warmup_steps)
        self.max_slowdown_pct = max_slowdown_pct
        order = self.probe_levels[::-1]  # highest first: the warm-up runs at the fastest level
        self.schedule = [order[0]] * self.warmup_steps + order * self.coarse_steps
        self._coarse_end = len(self.schedule)
        self.observed: list[tuple[float, float, float]] = []  # (freq_mhz, energy_j, time_s)
        self.coarse_mhz: float | None = None
        self.fine_mhz: list[float] = []
        self.chosen_mhz: float | None = None
        self.curves: pd.DataFrame | None = None

    @property
    def profiling_steps(self) -> int:
        """Steps spent probing in all (known before the run starts)."""
        n_fine = min(self.fine_levels, len(self.levels_mhz)) * self.fine_steps
        return self._coarse_end + n_fine

    @property
    def done(self) -> bool:
        return len(self.observed) >= self.profiling_steps

    def next_level(self) -> float | None:
        """The level to run the next step at (the chosen one once probing is over)."""
        if not self.done:
            return self.schedule[len(self.observed)]
        return self.chosen_mhz

    def observe(self, freq_mhz: float, energy_j: float, time_s: float) -> None:
        """Record one step run at ``freq_mhz``; fit at the end of each phase."""
        if self.done:
            return
        if not (time_s > 0 and energy_j > 0 and math.isfinite(time_s) and math.isfinite(energy_j)):
            raise GovernorError(f"online: a step needs a positive time and energy, got {time_s!r} s, {energy_j!r} J")
        self.observed.append((float(freq_mhz), float(energy_j), float(time_s)))
        n = len(self.observed)
        if n == self._coarse_end:
            coarse = fit_u_curve(self.observed[self.warmup_steps:], self.levels_mhz)
            self.coarse_mhz = pick_level(coarse, self.max_slowdown_pct) or max(self.probe_levels)
            self.fine_mhz = neighbours(self.levels_mhz, self.coarse_mhz, self.fine_levels)
            self.schedule += self.fine_mhz * self.fine_steps
        if n == self.profiling_steps:
            self.curves = fit_u_curve(self.observed[self.warmup_steps:], self.levels_mhz)
            # trust region: choose among the levels the fine phase measured (when it ran)
            region = self.curves[self.curves["freq_mhz"].isin(self.fine_mhz)] if self.fine_mhz else self.curves
            self.chosen_mhz = pick_level(region, self.max_slowdown_pct)

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        if not self.done:
            raise GovernorError("online: the level is chosen during the run — feed steps with next_level()/observe() "
                                f"({len(self.observed)} of {self.profiling_steps} profiling steps so far)")
        return self.chosen_mhz


def neighbours(levels_mhz: Sequence[float], center_mhz: float, n: int) -> list[float]:
    """``n`` consecutive table levels centred on ``center_mhz`` (shifted inward at the ends)."""
    table = sorted(float(f) for f in levels_mhz)
    n = min(n, len(table))
    if n == 0:
        return []
    c = table.index(snap_mhz(center_mhz, table))
    lo = min(max(c - (n - 1) // 2, 0), len(table) - n)
    return table[lo:lo + n]


def fit_u_curve(steps: Sequence[tuple[float, float, float]], levels_mhz: Sequence[float]) -> pd.DataFrame:
    """Predicted per-step ``energy_j``, ``time_s``, ``power_w`` on the table levels within the
    probed range, plus ``energy_rel`` / ``time_rel`` relative to the highest probed level.

    ``steps``: (freq_mhz, energy_j, time_s) of the probing steps (warm-up excluded).
    """
    arr = np.asarray(steps, dtype=float)
    f, e, t = arr[:, 0], arr[:, 1], arr[:, 2]
    probed = np.unique(f)
    if probed.size < 3:
        raise GovernorError(f"online: needs steps at 3 levels or more to fit a U-curve, got {probed.tolist()}")
    a, b = _fit_time(f, t)
    p_lvl = np.array([e[f == x].sum() / t[f == x].sum() for x in probed])
    deg = min(2, probed.size - 1)
    p_coef = np.polyfit(probed, p_lvl, deg)
    grid = np.array([x for x in sorted(levels_mhz) if probed.min() - 1e-6 <= x <= probed.max() + 1e-6])
    time = a + b / grid
    power = np.polyval(p_coef, grid)
    energy = power * time
    top = a + b / probed.max(), float(np.polyval(p_coef, probed.max())) * (a + b / probed.max())
    return pd.DataFrame({"freq_mhz": grid, "time_s": time, "power_w": power, "energy_j": energy,
                         "energy_rel": energy / top[1], "time_rel": time / top[0]})


def _fit_time(f: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """``t = a + b / f`` with ``a, b >= 0``, fitted in log space (multiplicative noise).

    A batch's length scales its whole step, so step-to-step noise multiplies the time; least
    squares on ``ln t`` weighs a long batch by how many times longer it is, not by how many
    seconds. Parameterized as ``t = c (phi + (1 - phi) f_max / f)`` with ``phi`` in [0, 1] (the
    share of the time at ``f_max`` that does not scale with the clock): for each ``phi`` on a
    fine grid ``ln c`` is the mean residual; the ``phi`` with the least squared error wins.
    """
    fmax = float(f.max())
    phi = np.linspace(0.0, 1.0, 401)[:, None]
    shape = np.log(phi + (1.0 - phi) * fmax / f[None, :])
    log_c = (np.log(t)[None, :] - shape).mean(axis=1, keepdims=True)
    sse = ((np.log(t)[None, :] - shape - log_c) ** 2).sum(axis=1)
    k = int(np.argmin(sse))
    c = float(np.exp(log_c[k, 0]))
    return c * float(phi[k, 0]), c * (1.0 - float(phi[k, 0])) * fmax


# --------------------------------------------------------------------------------------------
# Replay over steps.csv
# --------------------------------------------------------------------------------------------


class StepRecords:
    """Per-step (time, energy) of one repetition per (workload, level), from a dataset.

    Replaying one run at a changing clock takes step ``i`` from the run at the level used
    for step ``i``: the sweep's runs of a workload share their data order (seeded loader), so
    step ``i`` processes the same batch at every level.
    """

    def __init__(self, steps: pd.DataFrame, runs: pd.DataFrame, freq_table_mhz: Sequence[float], path: str = "steps.csv"):
        ok = runs[(runs["status"] == "ok") & (runs["policy"] == "fixed")]
        ok = ok.sort_values("rep").drop_duplicates(["workload_id", "gpu_freq_mhz"])  # lowest rep per level
        table = sorted(float(f) for f in freq_table_mhz)
        snap = [snap_mhz(f, table) for f in ok["gpu_freq_mhz"]]
        run_of = dict(zip(zip(ok["workload_id"], snap, strict=True), ok["run_id"], strict=True))
        by_run = {r: g.sort_values("step") for r, g in steps.groupby("run_id")}
        self._steps: dict[tuple[str, float], tuple[np.ndarray, np.ndarray]] = {}
        for key, run_id in run_of.items():
            if run_id in by_run:
                g = by_run[run_id]
                self._steps[key] = (g["time_s"].to_numpy(float), g["energy_j"].to_numpy(float))
        self.path = path

    def get(self, workload_id: str, freq_mhz: float, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(time_s, energy_j) of the first ``n`` steps at a level; errors name the file."""
        key = (workload_id, float(freq_mhz))
        if key not in self._steps:
            raise GovernorError(f"online: {self.path} has no steps of {workload_id!r} at {freq_mhz:g} MHz "
                                "— the online replay needs the steps of every level (dvfslab sweep writes them)")
        t, e = self._steps[key]
        if len(t) < n:
            raise GovernorError(f"online: {self.path} has {len(t)} steps of {workload_id!r} at {freq_mhz:g} MHz, "
                                f"the profiling needs {n}; record more steps per run or probe fewer")
        return t[:n], e[:n]


class OnlineGovernor:
    """Replays :class:`OnlineProfiler` on each workload from a dataset's step records.

    :meth:`decide` runs the profiling on the recorded steps and returns the locked level;
    :meth:`charge` corrects the locked level's run energy and time for the probing steps:
    ``E = E(f*) - sum_{i<n} e(f*, i) + sum_{i<n} e(f_i, i)`` (same for time), i.e. the run at
    the chosen level with its first ``n`` steps replaced by the probing steps actually run.
    """

    def __init__(self, records: StepRecords, levels_mhz: Sequence[float], *, name: str = "online",
                 max_slowdown_pct: float | None = None, **profiler_kw):
        self.records = records
        self.levels_mhz = list(levels_mhz)
        self.name = name
        self.max_slowdown_pct = max_slowdown_pct
        self.profiler_kw = profiler_kw
        self._runs: dict[str, OnlineProfiler] = {}

    def with_max_slowdown(self, max_slowdown_pct: float) -> OnlineGovernor:
        return OnlineGovernor(self.records, self.levels_mhz, name=self.name, max_slowdown_pct=max_slowdown_pct,
                              **self.profiler_kw)

    @property
    def profiling_steps(self) -> int:
        return self._profiler().profiling_steps

    def _profiler(self) -> OnlineProfiler:
        return OnlineProfiler(self.levels_mhz, max_slowdown_pct=self.max_slowdown_pct, **self.profiler_kw)

    def profile(self, workload_id: str) -> OnlineProfiler:
        """The profiler after probing ``workload_id`` on its recorded steps (cached)."""
        if workload_id not in self._runs:
            prof = self._profiler()
            for i, f in enumerate(prof.schedule):
                t, e = self.records.get(workload_id, f, i + 1)
                prof.observe(f, e[i], t[i])
            self._runs[workload_id] = prof
        return self._runs[workload_id]

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        return self.profile(str(workload.get("workload_id"))).chosen_mhz

    def charge(self, workload_id: str, freq_mhz: float | None, energy_j: float, time_s: float) -> tuple[float, float, int]:
        """``(energy_j, time_s, profiling_steps)`` of the run including its probing steps.

        ``freq_mhz`` is the level the run continued at (None: the baseline; then the
        baseline run's own first steps are what the probing replaced, taken as the highest
        level's, its closest recorded stand-in).
        """
        prof = self.profile(workload_id)
        n = prof.profiling_steps
        locked = max(prof.probe_levels) if freq_mhz is None else float(freq_mhz)
        t_l, e_l = self.records.get(workload_id, locked, n)
        e, t = energy_j - e_l.sum(), time_s - t_l.sum()
        e += sum(step[1] for step in prof.observed)
        t += sum(step[2] for step in prof.observed)
        return e, t, n


PROFILER_OPTIONS = ("n_levels", "coarse_steps", "fine_levels", "fine_steps", "warmup_steps")


@register_governor("online")
def _build_online(ctx: GovernorContext) -> OnlineGovernor:
    records = ctx.options.get("step_records")
    if records is None:
        from dvfslab.data.contract import load_dataset

        ds = load_dataset(ctx.sweep.dataset)
        if ds.steps is None:
            raise GovernorError(f"online: {ctx.sweep.dataset}/steps.csv is missing — the online governor replays "
                                "per-step records (dvfslab sweep and dvfslab simulate write them)")
        records = StepRecords(ds.steps, ds.runs, ds.freq_table_mhz, f"{ctx.sweep.dataset}/steps.csv")
    kw = {k: ctx.options[k] for k in PROFILER_OPTIONS if k in ctx.options}
    return OnlineGovernor(records, ctx.sweep.freq_table_mhz, **kw)


def probing_breakdown(per_workload: pd.DataFrame, sweep: Any, policy: str = "online") -> pd.DataFrame:
    """Split the online governor's regret per workload into the choice and the probing.

    ``choice_regret_pct``: the locked level's full-run energy over the oracle's;
    ``probing_cost_pct``: what the probing steps added (both in % of the baseline energy).
    """
    rows = per_workload[(per_workload["policy"] == policy) & per_workload["freq_mhz"].notna()]
    out = rows[["workload_id", "freq_mhz", "profiling_steps", "regret_pct", "slowdown_pct"]].copy()
    full = [sweep.at(w, f)[0] for w, f in zip(rows["workload_id"], rows["freq_mhz"], strict=True)]
    out["oracle_freq_mhz"] = [sweep.oracle_freq(w) for w in rows["workload_id"]]
    out["choice_regret_pct"] = 100.0 * (pd.Series(full, index=rows.index) - rows["oracle_energy_j"]) / rows["baseline_energy_j"]
    out["probing_cost_pct"] = out["regret_pct"] - out["choice_regret_pct"]
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Live on a (simulated) board
# --------------------------------------------------------------------------------------------


def profile_on_board(board: Any, workload: Any, profiler: OnlineProfiler, total_steps: int) -> dict:
    """Run ``total_steps`` training steps of ``workload`` on a :class:`~dvfslab.sim.board.SimBoard`
    (or anything with ``lock(freq_mhz)``, ``unlock()`` and ``train(workload, n)`` returning
    per-step ``step_time_s`` / ``step_energy_j``), probing with ``profiler`` first.

    Returns ``{"freq_mhz", "energy_j", "time_s", "profiling_steps", "probe_energy_j"}``; the
    clock is unlocked at the end, also on error.
    """
    energy = time = probe_e = 0.0
    done = 0
    try:
        while done < total_steps and not profiler.done:
            f = profiler.next_level()
            board.lock(f)
            r = board.train(workload, 1, run_key=f"online-{done}")
            e, t = float(r.step_energy_j[0]), float(r.step_time_s[0])
            profiler.observe(f, e, t)
            energy, time, probe_e, done = energy + e, time + t, probe_e + e, done + 1
        chosen = profiler.next_level()
        if done < total_steps:
            if chosen is None:
                board.unlock()
            else:
                board.lock(chosen)
            r = board.train(workload, total_steps - done, run_key="online-rest")
            energy, time = energy + float(r.step_energy_j.sum()), time + float(r.step_time_s.sum())
    finally:
        board.unlock()
    return {"freq_mhz": profiler.chosen_mhz, "energy_j": energy, "time_s": time,
            "profiling_steps": min(done, profiler.profiling_steps), "probe_energy_j": probe_e}
