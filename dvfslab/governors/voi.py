"""``voi``: probe a level only when what it is expected to save over the rest of the job beats what it costs.

A value-of-information rule (a one-step preposterior analysis over a discrete prior):

* **Prior** — the fold's training curves: ``fit`` stores each training workload's energy and time
  per level divided by its own baseline's (``e_w(l) = E_w(l) / E_w,baseline``, ``t_w(l)`` alike),
  each an equally likely hypothesis about this job's curve. Untrained (no data, or fewer than two
  training workloads) the hypotheses are a U-shaped family instead (:func:`u_family`: power
  ``s + (1 - s) x^g`` times time ``a + (1 - a) / x`` at ``x = level / highest``, ``a`` the share
  of time that does not scale, ``s`` the static share of power): the only place voi assumes a
  U-shape.
* **Readings** — a probe of a level runs the probe model's window there (``model.window(level)``;
  without a model one unit) and reads the energy and time per unit. A reading is the true mean
  times log-normal noise of coefficient of variation ``model.sigma(units read)`` (without a model,
  ``noise_cv``), and the true curve is a training curve up to a shape misfit of log-sd
  ``shape_sigma``: a reading's log-variance is ``log(1 + cv^2) + shape_sigma^2``.
* **Posterior** — each hypothesis ``w`` scaled by this job's unknown factor ``k_w`` (its
  precision-weighted mean log-ratio of the readings to ``e_w``), weighted by the likelihood of
  the log-residuals. The posterior mean curves (energy and time per unit) give each level's cost
  under the ``objective`` (any :class:`~dvfslab.governors.objective.Selector`); the best level
  ``b`` is the least.
* **Probe rule** — for each level ``x`` not read yet: the expected gain of reading it is the
  expected drop, under the posterior, of the cost of the level chosen after the reading (each
  hypothesis as the truth, its reading noise integrated by 3-point Gauss-Hermite quadrature),
  times the units left after the probe (``plan_job_units - units used - window(x)``); its
  expected extra cost is ``window(x) * (C(x) - C(b))`` (the probe runs at ``x`` instead of the
  level it would hold). voi probes the ``x`` with the largest gain minus cost when that is
  positive and stops when none is; then it holds ``b``. Before any reading one reading alone
  teaches nothing (the scale absorbs it), so the first decision looks at pairs: read ``b`` (at no
  extra cost) and ``x``; voi starts (by reading ``b``) only when the best pair pays.
* **Candidates** — the levels weighed at a decision are not all ``L`` levels but a set from the
  prior: each hypothesis's own least-cost level, the ``candidates`` (default 8) levels of least
  posterior-mean cost, and the held level (:meth:`VoiSession._candidates`). A level that no
  hypothesis and not the posterior ranks near the top is rarely worth its window, and weighing
  every level made a decision cost ``O(L^2)`` (a posterior over all ``L`` levels per level).
  **Complexity of a decision**: at most ``H + candidates + 1`` posterior evaluations
  (:meth:`VoiSession._posterior`), each ``O(H · 3^n · L)`` (``H`` hypotheses, ``n`` <= 2 new
  readings by quadrature), so ``O((H + candidates) · 9 · H · L)``: linear in the levels.
* **Job length** — what it plans with is ``workload["plan_job_units"]`` (the replay sets the
  training workloads' median; never the job's true length), else ``job_units``. A length learnt
  while probing (:meth:`~dvfslab.governors.session.WindowSession.replan`: live, a progress source
  that states it late or changes it) replaces it when the open window completes, and the rule
  weighs the next probe against the new units left.

**Constants, fixed from the data's noise before any result** (none tuned on results):
``shape_sigma`` defaults to the training curves' own misfit (:func:`posterior_misfit`): for each
training curve, the RMS log-residual, after a fitted scale, of the posterior mean of the *other*
curves once all its levels are read, the curves weighted by their likelihood with that misfit as
the log-sd — the median over the curves, iterated to its fixed point from the best single curve's
misfit (:func:`loo_misfit`, which as the least of many under-states it); where the feature table
names each workload's ``model`` and the training curves span two models or more, only curves *of
other models* count (the replay's CV holds out models: the job is a model the prior has not
seen); for the U-family, the same over the family.
At a level it has read, a hypothesis's value moves toward the reading by ``shape_sigma^2 /
(shape_sigma^2 + read noise^2)`` (the share of the residual that is the level's own); the reading noise is the probe
model's; the quadrature is Gauss-Hermite's 3 nodes (``0, ±sqrt(3)`` standard deviations, weights
2/3, 1/6, 1/6). ``max_probes`` (default: the number of levels) only bounds the loop.

Works on any table (tested on 3 and 60 levels) and knob. numpy is imported when a session starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.core.errors import SweepError
from dvfslab.data.knobs import DEFAULT_KNOB, SETTING
from dvfslab.governors.base import GovernorTags, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Selector
from dvfslab.governors.session import WindowSession
from dvfslab.governors.voiprior import (  # noqa: F401  (the prior's functions, importable from here)
    GH_NODES,
    GH_WEIGHTS,
    VAR_FLOOR,
    Curve,
    _interp,
    loo_misfit,
    posterior_misfit,
    u_family,
)
from dvfslab.governors.zeus import POWER_KNOB

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData
    from dvfslab.governors.probemodel import ProbeModel

class VoiGovernor(ProbingGovernor):
    """The value-of-information rule (module doc). ``job_units``: the job length planned with when
    the workload has no ``plan_job_units``; ``noise_cv``: a reading's noise when the probe has no
    model; ``shape_sigma``: None, the training curves' leave-one-out misfit; ``max_probes``: None,
    the number of levels; ``candidates``: how many levels of least posterior-mean cost are weighed
    at each decision besides each hypothesis's own best (module doc, *Candidates*)."""

    name = "voi"
    summary = ("value of information: the training curves as a prior, probe a level only while its expected gain over "
               "the rest of the job beats its cost, then hold the best posterior level")
    tags = GovernorTags(needs_training=True, probes=True,
                        saves=("job_units", "noise_cv", "shape_sigma", "max_probes", "candidates", "curves_",
                               "info_"))

    def __init__(self, job_units: float = 1000.0, noise_cv: float = 0.0, shape_sigma: float | None = None,
                 max_probes: int | None = None, objective: Selector = LEAST_ENERGY, candidates: int = 8):
        self.job_units = job_units
        self.candidates = candidates
        self.noise_cv = noise_cv
        self.shape_sigma = shape_sigma
        self.max_probes = max_probes
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        curves: list[Curve] = []
        groups: list[Any] = []
        if data is not None:
            sweep = data.sweep
            model_of = (dict(zip(data.features["workload_id"], data.features["model"], strict=True))
                        if "model" in data.features else {})
            for w in data.train_ids:
                try:
                    levels, energy, time = sweep.curve(w)
                    e_b, t_b = sweep.baseline_of(w)
                except SweepError:  # a workload without level runs or a baseline teaches nothing here
                    continue
                curves.append({"level": [float(f) for f in levels], "energy_rel": [float(e) / e_b for e in energy],
                               "time_rel": [float(t) / t_b for t in time]})
                groups.append(model_of.get(w, w))
        if len(curves) < 2:
            if data is not None and data.knob.name == SETTING:
                if not curves:
                    raise GovernorError("voi: a joint setting needs at least one training curve (got none); its "
                                        "untrained U-shaped prior runs along one knob's levels, not setting indices")
                # one curve: nothing to learn (README): hold FFG's setting (the curve's least cost), no probe
                self.curves_ = curves
                self.info_ = {"prior": "one training curve", "n_curves": 1, "shape_sigma": 0.0,
                              "fallback": "ffg", "cannot_learn": f"one training workload ({data.train_ids[0]}): "
                                                                 "nothing to generalize from"}
                return
            self.curves_ = []
            self.info_ = {"prior": "u-shape", "n_curves": 0, "shape_sigma": None,
                          "why": "untrained: fewer than two training curves"}
        else:
            self.curves_ = curves
            by_model = len(set(groups)) >= 2  # a job is a new model in a grouped CV: misfit to other models
            self.info_ = {"prior": "training curves", "n_curves": len(curves),
                          "shape_sigma": posterior_misfit(curves, groups if by_model else None),
                          "shape_sigma_from": "leave-one-model-out" if by_model else "leave-one-curve-out"}

    def fallback_note(self) -> str:
        info = getattr(self, "info_", None) or {}
        if info.get("fallback"):
            return f"could not learn ({info.get('cannot_learn') or 'nothing to learn'}): falls back to FFG"
        return ""

    def check_state(self) -> None:
        for c in self._fitted("curves_"):
            if not (isinstance(c, Mapping) and len(c.get("level", ())) == len(c.get("energy_rel", ()))
                    == len(c.get("time_rel", ())) > 0):
                raise GovernorError("voi: each prior curve needs level, energy_rel and time_rel of one length")

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model: ProbeModel | None = None
              ) -> VoiSession:
        """A session on a job that can run ``levels``; ``model``: the probe model (None: one-unit
        windows read with ``noise_cv``)."""
        curves = getattr(self, "curves_", None)
        if curves is None:  # never fitted: the untrained prior
            curves = []
        return VoiSession(self, levels, workload, model, curves, getattr(self, "knob_", DEFAULT_KNOB))


class VoiSession(WindowSession):
    """One job under voi (module doc): ``next_probe`` names the level and its window, ``observe``
    takes the steps run (whole windows in a replay, pieces live), and the rule plans again after
    each completed reading."""

    def __init__(self, governor: VoiGovernor, table: Sequence[float], workload: Mapping[str, Any],
                 model: ProbeModel | None, curves: Sequence[Curve], knob: str):
        import numpy as np

        self.np = np
        self.table = sorted({float(f) for f in table})
        if not self.table:
            raise GovernorError("voi: no level to probe")
        self.objective = governor.objective
        self.model = model
        self.knob = knob
        plan = workload.get("plan_job_units")
        plan = governor.job_units if plan is None or (isinstance(plan, float) and math.isnan(plan)) else plan
        if not (isinstance(plan, int | float) and float(plan) > 0):
            raise GovernorError(f"voi: the job length planned with must be > 0 units, got {plan!r}")
        self.plan_units = float(plan)
        if not float(governor.noise_cv) >= 0:
            raise GovernorError(f"voi: noise_cv must be >= 0, got {governor.noise_cv!r}")
        self.noise_cv = float(governor.noise_cv)
        info = getattr(governor, "info_", None) or {}
        fallback = bool(info.get("fallback")) and len(curves) == 1  # one training curve on a joint knob (_fit)
        self.untrained = len(curves) < 2 and not fallback
        prior = u_family(self.table) if self.untrained else list(curves)
        fitted = (getattr(governor, "info_", None) or {}).get("shape_sigma")
        self.shape_sigma = (float(governor.shape_sigma) if governor.shape_sigma is not None else
                            float(fitted) if fitted is not None and not self.untrained else posterior_misfit(prior))
        if not self.shape_sigma >= 0:
            raise GovernorError(f"voi: shape_sigma must be >= 0, got {governor.shape_sigma!r}")
        # hypotheses x levels: log energy and log time relative to each curve's baseline
        self.log_e = np.log(np.array([_interp(self.table, c["level"], c["energy_rel"]) for c in prior]))
        self.log_t = np.log(np.array([_interp(self.table, c["level"], c["time_rel"]) for c in prior]))
        self.windows = np.array([float(model.window(f)) if model is not None else 1.0 for f in self.table])
        n = len(self.table)
        self.budget = 0 if fallback else int(governor.max_probes) if governor.max_probes is not None else n
        if self.budget < 0:
            raise GovernorError(f"voi: max_probes must be >= 0, got {governor.max_probes!r}")
        self.n_candidates = int(getattr(governor, "candidates", 8))
        if self.n_candidates < 0:
            raise GovernorError(f"voi: candidates must be >= 0, got {self.n_candidates!r}")
        self._own_best: set[int] | None = None
        self.reads: list[tuple[int, float, float, float]] = []  # (level index, log E/unit, log T/unit, variance)
        self.used = 0.0
        self._begin()
        self._pending: int | None = None
        self._plan()

    plans_with_length = True

    def _replanned(self, plan_job_units: float) -> None:
        """The job's length changed (:mod:`dvfslab.governors.session`): the next :meth:`_plan` weighs
        its probes against ``plan_job_units - used`` units left."""
        self.plan_units = float(plan_job_units)

    # ---- the posterior ---------------------------------------------------------------------

    def _variance(self, i: int, units: float) -> float:
        """A reading's log-variance: the noise of ``units`` units at level ``i`` plus the shape misfit."""
        read = self.model.read_fraction if self.model is not None else 1.0
        cv = self.model.sigma(units * read) if self.model is not None else self.noise_cv
        return max(math.log1p(cv * cv) + self.shape_sigma ** 2, VAR_FLOOR)

    def _sums(self):
        """Precision-weighted sums of the log-residuals per hypothesis: ``(S_w, S_wd, S_wdd)`` and the time scale."""
        np = self.np
        h = self.log_e.shape[0]
        if not self.reads:
            return 0.0, np.zeros(h), np.zeros(h), np.zeros(h)
        idx = np.array([r[0] for r in self.reads])
        w = 1.0 / np.array([r[3] for r in self.reads])
        d = np.array([r[1] for r in self.reads])[None, :] - self.log_e[:, idx]
        log_kt = (np.array([r[2] for r in self.reads])[None, :] - self.log_t[:, idx]).mean(axis=1)
        return float(w.sum()), (w * d).sum(axis=1), (w * d * d).sum(axis=1), log_kt

    def _costs(self, energy, time, mask: bool = True):
        """The objective's cost per level of curves ``energy``/``time`` (..., levels): time relative to
        the highest level's; MAXPOWER the highest level on a power-limit knob once the scale is known
        (a reading), else the highest average power; ``inf`` beyond the slowdown limit (``mask``)."""
        np = self.np
        t_top = time[..., -1:]
        trel = time / t_top
        if self.knob == POWER_KNOB and self.reads:
            max_power = self.table[-1] * t_top
        else:
            max_power = (energy / trel).max(axis=-1, keepdims=True)
        c = np.asarray(self.objective.cost(energy, trel, max_power), float) * np.ones_like(energy)
        return np.where(trel <= self.objective.limit, c, np.inf) if mask else c

    def _shrink(self, variance: float) -> float:
        """How much of a reading's residual is the level's own deviation from the curve:
        ``shape_sigma^2 / (shape_sigma^2 + read noise^2)`` (the reading's log-variance is their sum)."""
        return self.shape_sigma ** 2 / variance

    def _old_reads(self) -> list[tuple[int, Any, Any, float]]:
        """The readings as ``(level index, log E, log T, shrink)`` for :meth:`_posterior`."""
        return [(i, e, t, self._shrink(v)) for i, e, t, v in self.reads]

    def _posterior(self, s_w, s_wd, s_wdd, log_kt, reads):
        """``(weights, mean energy, mean time)`` per level from the sums (any leading axes). Under
        each hypothesis a level's value is its curve times the job's scale, and at a level read, that
        moved toward the reading by the shrink factor (the level's own deviation, module doc)."""
        np = self.np
        log_k = s_wd / s_w if s_w > 0 else np.zeros_like(s_wd)
        ll = -0.5 * (s_wdd - log_k * s_wd)
        p = np.exp(ll - ll.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        energy = (p * np.exp(log_k)) @ np.exp(self.log_e)  # sum over hypotheses of p k e
        time = p @ np.exp(log_kt[:, None] + self.log_t)
        for j, r_e, r_t, rho in reads:
            if rho <= 0:
                continue
            pred_e = log_k + self.log_e[:, j]
            energy[..., j] = (p * np.exp((1 - rho) * pred_e + rho * np.asarray(r_e)[..., None])).sum(axis=-1)
            pred_t = log_kt + self.log_t[:, j]
            time[..., j] = (p * np.exp((1 - rho) * pred_t + rho * np.asarray(r_t)[..., None])).sum(axis=-1)
        return p, energy, time

    @staticmethod
    def _best(costs, np):
        """The least cost's index per row (ties: the lower level); -1 (the baseline) where all are inf."""
        b = np.argmin(costs, axis=-1)
        return np.where(np.isfinite(np.min(costs, axis=-1)), b, -1)

    def _gain(self, new: Sequence[int], b: int, s_w, s_wd, s_wdd, log_kt, p) -> float:
        """Expected drop per unit of the held level's cost after reading the levels ``new``: each
        hypothesis ``h`` the truth, each new reading its curve times the scale plus a deviation
        (the level's own, shrunk, and the reading noise), by quadrature; the held level's cost and
        the new choice's are taken under ``h`` with the deviations the readings revealed."""
        np = self.np
        n = len(new)
        log_k = s_wd / s_w if s_w > 0 else np.zeros_like(s_wd)
        nodes = np.array(GH_NODES)
        # the truth under h: curve x scale, moved at the levels read (old readings), axes (h, q1..qn, level)
        truth_e = (log_k[:, None] + self.log_e).reshape([-1] + [1] * n + [len(self.table)]).copy()
        truth_t = (log_kt[:, None] + self.log_t).reshape([-1] + [1] * n + [len(self.table)]).copy()
        for j, r_e, r_t, rho in self._old_reads():
            truth_e[..., j] += rho * (r_e - (log_k + self.log_e[:, j])).reshape([-1] + [1] * n)
            truth_t[..., j] += rho * (r_t - (log_kt + self.log_t[:, j])).reshape([-1] + [1] * n)
        truth_e = truth_e + np.zeros([1] + [len(nodes)] * n + [1])
        truth_t = truth_t + np.zeros([1] + [len(nodes)] * n + [1])
        sw = s_w
        swd = s_wd.reshape([1] * (n + 1) + [-1])
        swdd = s_wdd.reshape([1] * (n + 1) + [-1])
        reads = self._old_reads()
        for k, i in enumerate(new):
            v = self._variance(i, self.windows[i])
            rho = self._shrink(v)
            shape = [1] * (n + 1)
            shape[1 + k] = len(nodes)
            dev = (math.sqrt(v) * nodes).reshape(shape)  # (1, .., q_k, ..): the reading's log-residual under h
            reading = (log_k + self.log_e[:, i]).reshape([-1] + [1] * n) + dev  # (h, q..)
            truth_e[..., i] += rho * dev  # the part of it that is the level's own
            d = reading[..., None] - self.log_e[:, i]  # (h, q.., g)
            sw, swd, swdd = sw + 1.0 / v, swd + d / v, swdd + d * d / v
            pred_t = (log_kt + self.log_t[:, i]).reshape([-1] + [1] * n)
            reads = [*reads, (i, reading, pred_t, rho)]  # time: no reading noise modelled, its curve
        _, energy, time = self._posterior(sw, swd, swdd, log_kt, reads)
        chosen = self._best(self._costs(energy, time), np)  # (h, q..)
        chosen = np.where(chosen < 0, len(self.table) - 1, chosen)
        hold = len(self.table) - 1 if b < 0 else b
        true_cost = self._costs(np.exp(truth_e), np.exp(truth_t), mask=False)  # (h, q.., level)
        drop = true_cost[..., hold] - np.take_along_axis(true_cost, chosen[..., None], axis=-1)[..., 0]
        weights = p.reshape([-1] + [1] * n)
        for k in range(n):
            shape = [1] * (n + 1)
            shape[1 + k] = len(GH_WEIGHTS)
            weights = weights * np.array(GH_WEIGHTS).reshape(shape)
        return float((weights * drop).sum())

    # ---- the rule ----------------------------------------------------------------------------

    def _candidates(self, costs, b: int) -> list[int]:
        """The levels worth weighing a probe of (module doc, *Candidates*): each hypothesis's own
        least-cost level, the ``candidates`` levels of least posterior-mean cost (``costs``) and the
        held ``b``; ascending. At most ``H + candidates + 1`` of them whatever the table's size ``L``,
        found in O(H·L) (an argmin per hypothesis, an argpartition of ``costs``)."""
        np = self.np
        if self._own_best is None:  # the prior's: fixed for the session
            own = self._best(self._costs(np.exp(self.log_e), np.exp(self.log_t)), np)
            self._own_best = {int(i) for i in own if i >= 0}
        n = len(self.table)
        k = min(self.n_candidates, n)
        top = np.argpartition(np.where(np.isfinite(costs), costs, np.inf), k - 1)[:k] if k > 0 else []
        return sorted(self._own_best | {int(i) for i in top} | ({b} if b >= 0 else set()))

    def _plan(self) -> None:
        """Choose the next probe (``_pending``) or stop and hold the best level."""
        np = self.np
        s_w, s_wd, s_wdd, log_kt = self._sums()
        p, energy, time = self._posterior(s_w, s_wd, s_wdd, log_kt, self._old_reads())
        costs = self._costs(energy, time)
        b = int(self._best(costs, np))
        read = {r[0] for r in self.reads}
        left = self.plan_units - self.used
        best_net, best_x = 0.0, None
        if b >= 0 and len(self.reads) < self.budget:
            cb = costs[b]
            for x in self._candidates(costs, b):
                if x in read or not np.isfinite(costs[x]):
                    continue
                if self.reads:
                    new, spent = [x], self.windows[x]
                elif x != b:  # nothing read yet: a reading pays only beside another (read b first, free)
                    new, spent = [b, x], self.windows[b] + self.windows[x]
                else:
                    continue
                after = left - spent
                if after <= 0:
                    continue
                extra = self.windows[x] * (costs[x] - cb)
                net = after * self._gain(new, b, s_w, s_wd, s_wdd, log_kt, p) - extra
                if net > best_net:
                    best_net, best_x = net, (x if self.reads else b)
        if best_x is not None:
            self._pending = best_x
            self._read(self.table[best_x], float(self.windows[best_x]))
            return
        self._pending = None
        prior = "a U-shaped prior (untrained)" if self.untrained else f"{self.log_e.shape[0]} training curves"
        stop = ("probe budget reached" if len(self.reads) >= self.budget and b >= 0 else
                f"no probe's expected gain over the {max(left, 0.0):g} units left beats its cost")
        self._hold(None if b < 0 else self.table[b], f"voi: {len(self.reads)} levels read, {stop}; prior: {prior}")

    # ---- the session protocol (dvfslab.governors.session.WindowSession) ------------------------

    def _window_read(self, units: float, energy: float, time: float) -> None:
        i = self._pending
        if not (energy > 0 and time > 0):
            raise GovernorError(f"voi: a reading of level {self.table[i]:g} must have energy and time > 0, got "
                                f"{energy!r} J over {time!r} s")
        self.reads.append((i, math.log(energy / units), math.log(time / units), self._variance(i, units)))
        self.used += units
        self._plan()
