"""``bo``: Bayesian optimisation over the clocks — a Gaussian-process surrogate of the job's energy per
unit over a (joint) setting's clocks in log space, warm-started from the training curves, probing
a setting only while its expected improvement over the rest of the job beats what the probe costs.

**Surrogate.** A setting ``s`` is a point ``z(s)`` = the log of each of its clocks (a one-knob
table: the log of its level). The job's log energy per unit is ``y(s) = c + m(s) + g(s)``:

* ``m(s)`` — the prior mean: with ``prior_mean="curve"`` (the default) the job's own curve as the
  ``curve`` governor predicts it from the job's features (a ridge regression per setting over the
  training curves, :mod:`dvfslab.governors.curvefit`; their mean curve when nothing can be
  learned); with ``"mean"`` the mean over the training workloads of ``log(E_w(s) / E_w,baseline)``
  (the training curves, each relative to its own baseline, in the log: FFG's score in log space);
* ``c`` — the job's unknown scale: a flat prior, estimated from the readings (ordinary kriging);
* ``g`` — the job's own deviation from the mean shape: a Gaussian process with covariance
  ``sigma^2 (rho · exp(-½ Σ_k ((z_k - z'_k) / l_k)^2) + (1 - rho) · [s = s'])``: a smooth part over
  the clocks (length ``l_k = length · (log range of clock k)``) and a part of each setting's own.

**Fit** (warm start, no result used): ``sigma^2`` is the pooled variance of the training curves'
residuals ``log e_w(s) - m(s)`` after each curve's own mean offset, times ``W / (W - 1)`` (``m`` is
the mean of the same ``W`` curves), less the training cells' own measurement noise (the dataset's
rep-to-rep CV squared over a cell's repetitions: in the residuals, but no deviation the job
has); ``length`` and ``rho`` maximise the residuals' Gaussian log-likelihood (that noise added)
over the grid ``LENGTHS`` × ``RHOS`` (on at most ``FIT_POINTS`` settings, a fixed sample, so a fit
costs no more on a big grid; :mod:`dvfslab.governors.gpsurrogate` holds that arithmetic). A parameter given by hand
(``sigma``, ``length``, ``rho``) is kept. Fewer than two training curves: nothing to learn
(README): the governor holds the one curve's least setting (FFG's) and probes nothing.

**Readings.** A probe of ``s`` runs its window (the probe model's ``window(s)``; without a model one
unit) and reads the log energy per unit; its noise variance is ``log(1 + cv^2)``, ``cv`` the probe
model's ``sigma(units read)`` (else ``noise_cv``). A probe that changes the EMC or the CPU clock
from the setting the job runs at (its default, all clocks at the top, before the first probe)
first lets ``ceil(settle_s / t)`` units pass unread (``t``: the time per unit last read; one unit
before any reading): the settle of those clocks (``settle_s`` = 0.2 s, dvfslab's clock lock's
bound, docs/hardware.md *Settle*). They run at the probed setting and are charged like any unit.

**Posterior** after readings ``X`` (ordinary kriging): with ``K = cov(X, X) + diag(noise)``,
``r = y_X - m(X)``, ``c = 1'K⁻¹r / 1'K⁻¹1``: ``mu(s) = m(s) + c + k_s'K⁻¹(r - c1)`` and
``var(s) = sigma^2 - k_s'K⁻¹k_s + (1 - 1'K⁻¹k_s)^2 / 1'K⁻¹1`` (``k_s = cov(X, s)``); its expected
energy per unit ``M(s) = exp(mu + var / 2)``.

**Probe rule.** The first probe reads the prior's best setting ``s0`` (least ``m`` among the
admissible: it would be held anyway, so reading it costs nothing beyond its settle). Then, with
``b`` the setting of least ``M`` (the one held if probing stopped) and ``U`` the units left:
for every admissible setting ``x`` not read, the expected improvement of a reading of ``x``:
a reading moves ``x``'s posterior mean, relative to ``b``'s, by a normal of sd
``u = (var(x) - cov(x, b)) / sqrt(var(x) + noise(x))`` (the job's scale moves both: what they
share does not count; a noisy reading moves the mean less), so ``EI(x) = E[max(0, M(b) - M'(x))]
= M(b) Φ(d) - M(x) Φ(d - u)``, ``d = (log M(b) - mu(x) - (var(x) - u^2) / 2) / u`` (exact,
noise-free readings and ``b`` read: ``u = sd(x)``, the classic expected improvement); its net value
``(U - u(x)) · EI(x) - u(x) · (M(x) - M(b))``, ``u(x)`` its units (the read units plus settle). The
read units are weighed too: the window times each of :data:`READ_LENGTHS` (a longer reading is
less noisy, ``noise`` shrinking as the probe model says, and costs more units). The setting and
length of the largest net value are probed while that is positive (and fewer than
``max_probes``, within ``max_probe_share`` of the planned job: a budget, not a value); then ``b``
is held. ``U`` and the budget follow a job length learnt while probing
(:meth:`~dvfslab.governors.session.WindowSession.replan`, from the next completed window on). Energies are in units of the prior's (relative to a baseline);
the rule is scale-free. A slowdown limit keeps the settings whose prior mean time
(``T_w(s) / T_w,baseline``, averaged) meets it; the held setting is the least cost of the
objective among them.

**Complexity.** A decision with ``n`` readings costs ``O(L · n^2 + n^3 + |READ_LENGTHS| · L)`` over ``L`` settings (one
covariance row per setting and reading): linear in the settings; a job makes at most
``max_probes`` of them. The fit costs ``O(W · L)`` plus ``O(|LENGTHS| · |RHOS| · W · FIT_POINTS^3)``.

**A design that is not the full grid** (a random or Latin-hypercube joint sweep): the surrogate
lives on the clocks, not on the grid's lines, so any set of settings works; a setting no training
workload ran is not a candidate (it has no prior mean).

numpy is imported when a session starts or the governor is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.core.errors import SweepError
from dvfslab.data.knobs import SETTING
from dvfslab.governors.base import GovernorTags, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.gpsurrogate import VAR_FLOOR, fit_shape, one_thread, phi, scaled, se_kernel
from dvfslab.governors.objective import LEAST_ENERGY, Selector
from dvfslab.governors.session import WindowSession

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData
    from dvfslab.governors.probemodel import ProbeModel

#: the clocks whose change settles before a reading (the GPU's is in the probe model's window)
SETTLING = ("emc_freq_mhz", "cpu_freq_mhz")
#: the reading lengths weighed, in windows of the probe model (a noisy reading may pay to read longer)
READ_LENGTHS = (1, 2, 4, 8, 16, 32, 64)


class BoGovernor(ProbingGovernor):
    """Bayesian optimisation over the clocks (module doc). ``job_units``: the job length planned with
    when the workload has no ``plan_job_units``; ``noise_cv``: a reading's noise without a probe
    model; ``sigma``, ``length``, ``rho``: the surrogate's (None: fitted); ``settle_s``: the EMC /
    CPU settle; ``max_probes``: the most settings read; ``max_probe_share``: the most of the planned
    job its probes may take (2 %: issue #37's budget, BoFL's papers' order)."""

    name = "bo"
    summary = ("Bayesian optimisation over the clocks: a Gaussian process in log-clock space warm-started from the "
               "training curves; probe while the expected improvement over the rest of the job beats the probe's cost")
    tags = GovernorTags(needs_training=True, probes=True,
                        saves=("job_units", "noise_cv", "sigma", "length", "rho", "settle_s", "max_probes",
                               "max_probe_share", "prior_mean", "prior_"))

    def __init__(self, job_units: float = 1000.0, noise_cv: float = 0.0, sigma: float | None = None,
                 length: float | None = None, rho: float | None = None, settle_s: float = 0.2,
                 max_probes: int = 20, max_probe_share: float = 0.02, prior_mean: str = "curve",
                 objective: Selector = LEAST_ENERGY):
        self.job_units = job_units
        self.max_probe_share = max_probe_share
        self.prior_mean = prior_mean
        self.noise_cv = noise_cv
        self.sigma = sigma
        self.length = length
        self.rho = rho
        self.settle_s = settle_s
        self.max_probes = max_probes
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        import numpy as np

        data = self._require(data)
        sweep = data.sweep
        table = [float(x) for x in data.level_table]
        knobs = list(sweep.joint_knobs) if sweep.knob.name == SETTING else [sweep.knob.name]
        clocks = ([[float(v) for v in sweep.settings[int(i)]] for i in table] if sweep.knob.name == SETTING
                  else [[x] for x in table])
        pos = {x: j for j, x in enumerate(table)}
        log_e, t_rel, ids = [], [], []
        for w in data.train_ids:
            try:
                levels, energy, time = sweep.curve(w)
                e_b, t_b = sweep.baseline_of(w)
            except SweepError:  # no level runs or no baseline: it teaches nothing here
                continue
            row_e, row_t = np.full(len(table), np.nan), np.full(len(table), np.nan)
            for lv, e, t in zip(levels, energy, time, strict=True):
                if float(lv) in pos:
                    row_e[pos[float(lv)]], row_t[pos[float(lv)]] = math.log(float(e) / e_b), float(t) / t_b
            log_e.append(row_e)
            t_rel.append(row_t)
            ids.append(w)
        if not ids:
            raise GovernorError("bo: needs at least one training workload with level runs and a baseline")
        log_e, t_rel = np.array(log_e), np.array(t_rel)
        seen = ~np.isnan(log_e).all(axis=0)  # a setting no training workload ran has no prior mean
        mean = np.where(seen, np.nanmean(np.where(seen, log_e, 0.0), axis=0), np.nan)
        mean_t = np.where(seen, np.nanmean(np.where(seen, t_rel, 1.0), axis=0), np.nan)
        prior: dict[str, Any] = {"knobs": knobs, "levels": [x for x, ok in zip(table, seen, strict=True) if ok],
                                 "clocks": [c for c, ok in zip(clocks, seen, strict=True) if ok],
                                 "mean_log_energy": [float(v) for v in mean[seen]],
                                 "mean_time_rel": [float(v) for v in mean_t[seen]], "n_curves": len(ids)}
        if len(ids) < 2:
            prior.update(sigma=0.0, length=1.0, rho=1.0, fallback="ffg",
                         cannot_learn=f"one training workload ({ids[0]}): nothing to generalize from")
            self.prior_ = prior
            return
        resid = log_e[:, seen] - mean[seen]
        resid = resid - np.nanmean(resid, axis=1, keepdims=True)  # each curve's own offset: the job's scale
        w = len(ids)
        total = float(np.nanmean(resid ** 2)) * w / (w - 1)
        # the training cells' own measurement noise (rep-to-rep CV over a cell's repetitions) is in
        # the residuals but is no deviation of the job's: taken out of the amplitude
        reps = float(sweep.levels["n_ok"].median()) if "n_ok" in sweep.levels else 1.0
        cell = data.steps().rep_noise() ** 2 / max(reps, 1.0)
        prior["cell_noise_var"] = cell
        sigma2 = max(total - cell, VAR_FLOOR)
        prior["sigma"] = float(self.sigma) if self.sigma is not None else math.sqrt(sigma2)
        with one_thread():
            length, rho = fit_shape(np.array(prior["clocks"]), resid, prior["sigma"] ** 2, cell, self.length, self.rho)
        prior.update(length=length, rho=rho)
        if self.prior_mean == "curve":  # the job's own predicted curve (the curve governor's model)
            from dvfslab.governors.curvefit import fit_curve_model

            prior["curve"] = fit_curve_model(sweep, data.features, ids).spec
        elif self.prior_mean != "mean":
            raise GovernorError(f"bo: prior_mean is 'curve' or 'mean', got {self.prior_mean!r}")
        self.prior_ = prior

    def fallback_note(self) -> str:
        prior = getattr(self, "prior_", None) or {}
        if prior.get("fallback"):
            return f"could not learn ({prior.get('cannot_learn')}): falls back to FFG"
        return ""

    def check_state(self) -> None:
        p = self._fitted("prior_")
        n = len(p.get("levels", ()))
        if not (n > 0 and len(p.get("clocks", ())) == len(p.get("mean_log_energy", ())) == len(
                p.get("mean_time_rel", ())) == n):
            raise GovernorError("bo: its prior needs levels, clocks, mean_log_energy and mean_time_rel of one length")

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model: ProbeModel | None = None
              ) -> BoSession:
        return BoSession(self, self._fitted("prior_"), workload, levels, model)


class BoSession(WindowSession):
    """One job under ``bo`` (module doc): probes a setting's window (plus the settle of a changed
    EMC / CPU clock: the window session's settle, :mod:`dvfslab.governors.session`), plans again
    after each reading, then holds the least expected energy."""

    def __init__(self, governor: BoGovernor, prior: Mapping[str, Any], workload: Mapping[str, Any],
                 levels: Sequence[float], model: ProbeModel | None):
        import numpy as np

        self.np = np
        offered = {float(x) for x in levels}
        keep = [j for j, x in enumerate(prior["levels"]) if float(x) in offered]
        if not keep:
            raise GovernorError("bo: none of the job's levels is in its prior (fitted on another table?)")
        self.table = [float(prior["levels"][j]) for j in keep]
        self.clocks = np.array([prior["clocks"][j] for j in keep], float)
        self.mean = np.array([prior["mean_log_energy"][j] for j in keep], float)
        t_rel = np.array([prior["mean_time_rel"][j] for j in keep], float)
        if prior.get("curve"):  # warm start from the job's predicted curve (its features)
            from dvfslab.governors.curvemodel import CurveModel

            pred = CurveModel(prior["curve"]).predict(workload)
            at = {float(x): (e, t) for x, e, t in zip(pred["level"], pred["energy_rel"], pred["time_rel"], strict=True)}
            if all(x in at for x in self.table):
                self.mean = np.log([at[x][0] for x in self.table])
                t_rel = np.array([at[x][1] for x in self.table], float)
        self.knobs = list(prior["knobs"])
        self.objective, self.model = governor.objective, model
        self.sigma2 = float(prior["sigma"]) ** 2
        self.rho = float(prior["rho"])
        self.z = scaled(self.clocks, self.clocks, float(prior["length"]))
        plan = workload.get("plan_job_units")
        plan = governor.job_units if plan is None or (isinstance(plan, float) and math.isnan(plan)) else plan
        if not (isinstance(plan, int | float) and float(plan) > 0):
            raise GovernorError(f"bo: the job length planned with must be > 0 units, got {plan!r}")
        self.plan_units, self.noise_cv = float(plan), float(governor.noise_cv)
        self.settle_s = float(governor.settle_s)
        if not (self.noise_cv >= 0 and self.settle_s >= 0):
            raise GovernorError(f"bo: noise_cv and settle_s must be >= 0, got {governor.noise_cv!r}, "
                                f"{governor.settle_s!r}")
        self.budget = 0 if prior.get("fallback") else int(governor.max_probes)
        share = float(getattr(governor, "max_probe_share", 1.0))
        if not 0 < share <= 1:
            raise GovernorError(f"bo: max_probe_share is a share of the job in (0, 1], got {share!r}")
        self.probe_share = share
        self.probe_units_budget = share * self.plan_units
        # the admissible settings: the prior's mean time relative to the baseline meets the limit
        self.admissible = t_rel <= self.objective.limit
        self.t_rel = t_rel
        self.current = self.clocks.max(axis=0)  # the job starts at its default: every clock at the top
        self.reads: list[tuple[int, float, float]] = []  # (index, log energy per unit, noise variance)
        self.tau: float | None = None  # time per unit last read
        self.used = 0.0  # units the probes ran, settles included
        self._begin(model)
        self._pending: int | None = None  # the setting being read
        self._windows = None
        self.evaluations = 0  # posterior evaluations (each O(L n^2)): what a decision costs
        self._plan()

    # ---- the surrogate ---------------------------------------------------------------------

    def _noise(self, units: float) -> float:
        read = self.model.read_fraction if self.model is not None else 1.0
        cv = self.model.sigma(units * read) if self.model is not None else self.noise_cv
        return math.log1p(cv * cv)

    def posterior(self):
        """``(mu, var)`` of the job's log energy per unit at every setting (module doc)."""
        np = self.np
        self.evaluations += 1
        if not self.reads:
            return self.mean.copy(), np.full(len(self.table), np.inf)
        idx = np.array([r[0] for r in self.reads])
        y = np.array([r[1] for r in self.reads])
        noise = np.array([r[2] for r in self.reads])
        smooth = se_kernel(self.z[idx], self.z)  # (n, L)
        own = (idx[:, None] == np.arange(len(self.table))[None, :]).astype(float)
        k = self.sigma2 * (self.rho * smooth + (1 - self.rho) * own)  # cov(X, s), (n, L)
        cov = k[:, idx] + np.diag(np.maximum(noise, VAR_FLOOR))
        r = y - self.mean[idx]
        sol = np.linalg.solve(cov, np.column_stack([r, np.ones(len(idx)), k]))  # K⁻¹ [r, 1, k]: O(n^2 L)
        a_r, a_1, a_k = sol[:, 0], sol[:, 1], sol[:, 2:]
        ones_a_1 = float(a_1.sum())
        c = float(a_r.sum()) / ones_a_1
        mu = self.mean + c + (k * (a_r - c * a_1)[:, None]).sum(axis=0)
        var = self.sigma2 - (k * a_k).sum(axis=0) + (1.0 - a_k.sum(axis=0)) ** 2 / ones_a_1
        self._parts = (idx, k, a_k, ones_a_1)
        return mu, np.maximum(var, 0.0)

    def covariance_with(self, b: int):
        """The posterior covariance of every setting's log energy with setting ``b``'s (after
        :meth:`posterior`): ``cov(s, b) - k_s'K⁻¹k_b + (1 - 1'K⁻¹k_s)(1 - 1'K⁻¹k_b) / 1'K⁻¹1``; O(n L)."""
        np = self.np
        idx, k, a_k, ones_a_1 = self._parts
        prior = self.sigma2 * (self.rho * se_kernel(self.z[[b]], self.z)[0] + (1 - self.rho) * (np.arange(
            len(self.table)) == b))
        return prior - (k * a_k[:, [b]]).sum(axis=0) + (1.0 - a_k.sum(axis=0)) * (1.0 - a_k[:, b].sum()) / ones_a_1

    def _units(self, i: int) -> tuple[float, float]:
        """``(window, settle)`` units of a probe of setting ``i`` from the current setting."""
        window = float(self.model.window(self.table[i])) if self.model is not None else 1.0
        moved = any(k in SETTLING and self.clocks[i][j] != self.current[j] for j, k in enumerate(self.knobs))
        if not (moved and self.settle_s > 0):
            return window, 0.0
        return window, float(math.ceil(self.settle_s / self.tau - 1e-9)) if self.tau else 1.0

    def _all_units(self):
        """:meth:`_units` of every setting at once: ``(windows, settles)``, O(L)."""
        np = self.np
        if self._windows is None:
            self._windows = np.array([float(self.model.window(x)) if self.model is not None else 1.0
                                      for x in self.table])
        cols = [j for j, k in enumerate(self.knobs) if k in SETTLING]
        moved = (self.clocks[:, cols] != self.current[cols]).any(axis=1) if cols else np.zeros(len(self.table), bool)
        per = float(math.ceil(self.settle_s / self.tau - 1e-9)) if self.tau else 1.0
        return self._windows, np.where(moved & (self.settle_s > 0), per, 0.0)

    # ---- the rule ----------------------------------------------------------------------------

    def _costs(self, expected):
        np = self.np
        trel = self.t_rel / self.t_rel[int(np.argmax(self.clocks.sum(axis=1)))]
        maxp = float(np.max(expected / trel))
        c = np.array([self.objective.cost(float(e), float(t), maxp) for e, t in zip(expected, trel, strict=True)])
        return np.where(self.admissible, c, np.inf)

    plans_with_length = True

    def _replanned(self, plan_job_units: float) -> None:
        """The job's length changed (:mod:`dvfslab.governors.session`): the rest of the job its
        expected improvement is over, and the probe budget (``max_probe_share`` of it), follow."""
        self.plan_units = float(plan_job_units)
        self.probe_units_budget = self.probe_share * self.plan_units

    def _plan(self) -> None:
        with one_thread():
            self._plan_now()

    def _plan_now(self) -> None:
        np = self.np
        mu, var = self.posterior()
        read = {r[0] for r in self.reads}
        if not self.reads:
            costs = self._costs(np.exp(mu))
            b = int(np.argmin(costs))
            if not np.isfinite(costs[b]):
                return self._hold_setting(None, "no setting meets the slowdown limit: the board's default")
            if self.budget > 0:
                return self._probe(b)
            return self._hold_setting(b, "no probe")
        expected = np.exp(mu + var / 2)
        costs = self._costs(expected)
        b = int(np.argmin(costs))
        if len(self.reads) >= self.budget:
            return self._hold_setting(b, f"probe budget reached ({self.budget} settings)")
        # what a reading of x can move x's posterior mean by, against b's (their shared
        # uncertainty, the job's scale, moves both): sd of the update, a noisy reading shrinks it;
        # each reading length of READ_LENGTHS (times the window) weighed, settings x lengths
        window, settle = self._all_units()
        shared = np.maximum(var - self.covariance_with(b), 0.0)
        m_b = float(expected[b])
        left = self.plan_units - self.used
        best_net, best = 0.0, None
        for mult in READ_LENGTHS:
            read_units = window * mult
            lengths, where = np.unique(read_units, return_inverse=True)  # few distinct windows
            noise = np.array([self._noise(float(u)) for u in lengths])[where]
            sd = np.maximum(shared / np.sqrt(np.maximum(var + noise, VAR_FLOOR)), math.sqrt(VAR_FLOOR))
            d = (math.log(m_b) - mu - (var - sd * sd) / 2) / sd
            ei = m_b * phi(d) - expected * phi(d - sd)
            units = read_units + settle
            net = (left - units) * ei - units * (expected - m_b)
            net[list(read)] = -np.inf
            net[~self.admissible | (left - units <= 0) | (self.used + units > self.probe_units_budget)] = -np.inf
            x = int(np.argmax(net))
            if net[x] > best_net:
                best_net, best = float(net[x]), (x, float(read_units[x]))
        if best is not None:
            return self._probe(*best)
        return self._hold_setting(b, f"no probe's expected improvement over the {max(left, 0.0):g} units left beats its cost")

    def _probe(self, i: int, read_units: float | None = None) -> None:
        self._pending = i
        window, settle = self._units(i)
        self._read(self.table[i], window if read_units is None else read_units, settle)

    def _hold_setting(self, b: int | None, why: str) -> None:
        self._pending = None
        self._hold(None if b is None else self.table[b], f"bo: {len(self.reads)} settings read, {why}")

    def _window_read(self, units: float, energy_j: float, time_s: float) -> None:
        i = self._pending
        if not (energy_j > 0 and time_s > 0):
            raise GovernorError(f"bo: a reading of level {self.table[i]:g} must have energy and time > 0, got "
                                f"{energy_j!r} J over {time_s!r} s")
        self.reads.append((i, math.log(energy_j / units), self._noise(units)))
        self.tau = time_s / units
        self.current = self.clocks[i]
        self.used += self.last_window_units
        self._plan()
