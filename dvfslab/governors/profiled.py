"""Profiled governor: measure a few steps at the default clock, then decide.

The bridge between the paper's offline tree (which decides from static model features before
the run) and the online governor (which probes several levels during the run). The profiled
governor runs the first ``warmup_steps + probe_steps`` steps of training on the board's
default clock (the baseline), measures

* ``probe_step_time_s`` — mean time per step (per unit of the job) over the ``probe_steps`` steps
  after the warm-up (a replay's probing step lasts at least the level's window, several units: its
  time is divided by its units, as the fit's one-unit steps are),
* ``probe_power_w`` — their mean power, energy / time,
* ``gpu_util_pct`` — GPU utilization at the default clock (from the workload's features: a
  reading of jtop / NVML while probing),

and predicts, from those measurements (and optionally the static model features besides), the
energy and time of every level with a curve model (:mod:`dvfslab.governors.curvemodel`: one ridge
per level, fitted on a sweep's probes); it then holds the objective's choice (least predicted
energy) for the rest of the run. The probing steps are charged: they run at the default clock
instead of the chosen level, and the replay counts their energy and time
(:mod:`dvfslab.evaluation.replay`), as it counts the online governor's.

Plain Python at decide time (no pandas, numpy or scikit-learn): this is what a board loads.

**Complexity**: a decision predicts every level once from the profiled features, O(F · L):
linear in the settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.governors.base import GovernorTags, ProbeSession, ProbeStep, ProbingGovernor
from dvfslab.governors.curvemodel import DEFAULT_ALPHA, FittedCurve
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Objective

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData

#: feature -> transform before standardizing; measured at the default clock during the probe
PROBE_FEATURES: dict[str, str] = {"probe_step_time_s": "log", "probe_power_w": "log", "gpu_util_pct": "id"}
DEFAULT_PROBE_STEPS = 5
DEFAULT_WARMUP_STEPS = 1


def probe_features(steps: Sequence[tuple[float, ...]], warmup_steps: int = DEFAULT_WARMUP_STEPS,
                   gpu_util_pct: float | None = None) -> dict[str, float]:
    """The probe's features from ``(energy_j, time_s)`` or ``(energy_j, time_s, units)`` of the
    probing steps run at the default clock (without ``units``: one unit each, a training step).

    A probing step of a replay may run several units: a reading takes at least the level's
    window on the machine (:meth:`~dvfslab.governors.base.ProbeSession.stretch`; e.g. ~229
    inferences on the LoudVA AGX Xavier). ``probe_step_time_s`` is the time per **unit** (the
    measured steps' time over their units), what the fit reads from one-unit steps. The first
    ``warmup_steps`` steps are charged but not measured (a run's first step also builds kernels
    and caches). ``gpu_util_pct`` is passed through when given.
    """
    measured = [(float(s[0]), float(s[1]), float(s[2]) if len(s) > 2 else 1.0) for s in steps[warmup_steps:]]
    if not measured:
        raise GovernorError(f"profiled: no probing step after the {warmup_steps} warm-up step(s); "
                            "record at least one more step at the default clock")
    energy, time, units = (sum(m[i] for m in measured) for i in range(3))
    if not (time > 0 and energy > 0 and units > 0):
        raise GovernorError(f"profiled: the probing steps need a positive time, energy and units, got {time!r} s, "
                            f"{energy!r} J over {units!r} units")
    out = {"probe_step_time_s": time / units, "probe_power_w": energy / time}
    if gpu_util_pct is not None:
        out["gpu_util_pct"] = float(gpu_util_pct)
    return out


class ProfiledGovernor(FittedCurve, ProbingGovernor):
    """Least predicted energy from a curve model on the probe's measurements (module doc).

    ``alpha``: the ridge penalty of the fit; ``with_static``: the fit may use the static model
    features besides the probe's.
    """

    name = "profiled"
    summary = "measures the first steps at the default clock (time, power, GPU util), predicts every level's energy"
    tags = GovernorTags(
        probes=True, saves=("probe_steps", "warmup_steps", "curve_"),
        not_on_command_line="the profiled governor decides from its first warm-up + probe steps measured at the "
                            "default clock inside training, which a plain command cannot report; in your training "
                            "script add dvfslab.harness.online_callback.OnlineDvfsCallback(backend, "
                            "governor=load_governor(FILE), workload=FEATURES) to the Trainer's callbacks (it runs "
                            "those steps under DvfsCallback's energy windows, docs/governors.md), or use --policy mlg, "
                            "curve or ffg here")

    def __init__(self, probe_steps: int = DEFAULT_PROBE_STEPS, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 alpha: float = DEFAULT_ALPHA, with_static: bool = False, objective: Objective = LEAST_ENERGY):
        self.probe_steps = probe_steps
        self.warmup_steps = warmup_steps
        self.alpha = alpha
        self.with_static = with_static
        self.objective = objective

    @property
    def profiling_steps(self) -> int:
        """Steps run at the default clock before the level is held (all of them charged)."""
        if self.probe_steps < 1 or self.warmup_steps < 0:
            raise GovernorError(f"profiled: probe_steps must be >= 1 and warmup_steps >= 0, got {self.probe_steps}, "
                                f"{self.warmup_steps}")
        return int(self.warmup_steps) + int(self.probe_steps)

    def _fit(self, data: TrainingData | None) -> None:
        from dvfslab.governors.curvefit import CURVE_FEATURES, fit_curve_model

        data = self._require(data)
        n, source = self.profiling_steps, data.steps()
        rows = data.rows().copy()
        probe = [probe_features(list(zip(e, t, strict=True)), self.warmup_steps)
                 for t, e in (source.steps(str(w), None, n) for w in rows["workload_id"])]
        for col in ("probe_step_time_s", "probe_power_w"):
            rows[col] = [p[col] for p in probe]
        candidates = dict(PROBE_FEATURES)
        if self.with_static:
            candidates.update({k: v for k, v in CURVE_FEATURES.items() if k not in candidates})
        self.curve_ = fit_curve_model(data.sweep, rows, data.train_ids, alpha=float(self.alpha),
                                      candidates=candidates).spec

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model=None) -> ProfiledSession:
        return ProfiledSession(self, workload)

    def steps_reason(self, data: TrainingData) -> str:
        source, ids = data.steps(), data.sweep.workload_ids()
        if all(source.counts_steps(w) for w in ids) and source.covers(ids, self.profiling_steps):
            return ""
        return ("the dataset records no steps at the default level (no steps.csv, no steps count in runs.csv: a run "
                "is one unit, e.g. an epoch), so its probe of the first steps cannot be read")


class ProfiledSession(ProbeSession):
    """The profiled governor on one job: ``profiling_steps`` steps at the default clock (None), then
    the objective's choice on the curves predicted from what they measured."""

    def __init__(self, governor: ProfiledGovernor, workload: Mapping[str, Any]):
        self.governor, self.workload = governor, dict(workload)
        self.model = governor.model
        self.profiling_steps = governor.profiling_steps
        self.observed: list[ProbeStep] = []
        self._level: float | None = None

    def next_level(self) -> float | None:
        return None if not self.done else self._level

    def observe(self, step: ProbeStep) -> None:
        if self.done:
            return
        self.observed.append(step)
        if self.done:
            self._level = self._decide()

    def features(self) -> dict[str, Any]:
        """The workload's features with the probe's measurements added."""
        util = self.workload.get("gpu_util_pct")
        util = None if util is None or util != util else float(util)
        steps = [(s.energy_j, s.time_s, s.units) for s in self.observed]  # a replay's probe: its window's units
        return {**self.workload, **probe_features(steps, self.governor.warmup_steps, util)}

    def _decide(self) -> float | None:
        c = self.model.predict(self.features())
        return self.governor.objective.select(c["level"], c["energy_rel"], c["time_rel"])

    @property
    def level(self) -> float | None:
        return self._level
