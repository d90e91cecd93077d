"""Profiled governor, board side: measure a few steps at the default clock, then decide.

The bridge between the paper's offline tree (which decides from static model features before
the run) and the online governor (which probes several levels during the run). The profiled
governor runs the first ``warmup_steps + probe_steps`` steps of training on the board's
default clock (the baseline), measures

* ``probe_step_time_s`` — mean time per step over the ``probe_steps`` steps after the warm-up,
* ``probe_power_w`` — their mean power, energy / time,
* ``gpu_util_pct`` — GPU utilization at the default clock (a reading of jtop / NVML while probing),

and predicts, from those measurements (and optionally the static model features besides), the
energy and time of every level with a curve model (:mod:`dvfslab.governors.curve`: one ridge per
level, fitted on a sweep by :func:`dvfslab.governors.fit.fit_profiled`); it then locks the level
with the least predicted energy for the rest of the run.

The probe is charged: its steps run at the default clock instead of the chosen level, and the
replay (:class:`dvfslab.governors.fit.ProfiledReplay`) counts their energy and time, as the online
governor's probing is counted. File format::

    {"format": "dvfslab-profiled", "version": 1, "name": "profiled", "probe_steps": 5,
     "warmup_steps": 1, "curve": {... a dvfslab-curve spec on the probe features ...}}

Plain Python (no pandas, numpy or scikit-learn): this is what a board loads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.files import atomic_write_json
from dvfslab.governors.curve import CurveModel, pick_level
from dvfslab.governors.errors import GovernorError, check_format, read_model_json

PROFILED_FORMAT = "dvfslab-profiled"
PROFILED_VERSION = 1
#: feature -> transform before standardizing; measured at the default clock during the probe
PROBE_FEATURES: dict[str, str] = {"probe_step_time_s": "log", "probe_power_w": "log", "gpu_util_pct": "id"}
DEFAULT_PROBE_STEPS = 5
DEFAULT_WARMUP_STEPS = 1


def probe_features(steps: Sequence[tuple[float, float]], warmup_steps: int = DEFAULT_WARMUP_STEPS,
                   gpu_util_pct: float | None = None) -> dict[str, float]:
    """The probe's features from ``(energy_j, time_s)`` of the steps run at the default clock.

    The first ``warmup_steps`` steps are charged but not measured (a run's first step also
    builds kernels and caches). ``gpu_util_pct`` is passed through when given.
    """
    measured = [(float(e), float(t)) for e, t in steps[warmup_steps:]]
    if not measured:
        raise GovernorError(f"profiled: no probing step after the {warmup_steps} warm-up step(s); "
                            "record at least one more step at the default clock")
    energy, time = sum(e for e, _ in measured), sum(t for _, t in measured)
    if not (time > 0 and energy > 0):
        raise GovernorError(f"profiled: the probing steps need a positive time and energy, got {time!r} s, {energy!r} J")
    out = {"probe_step_time_s": time / len(measured), "probe_power_w": energy / time}
    if gpu_util_pct is not None:
        out["gpu_util_pct"] = float(gpu_util_pct)
    return out


class ProfiledGovernor:
    """Least predicted energy from a curve model on the probe's measurements (module doc).

    ``decide(workload)``: ``workload`` holds the probe features (:func:`probe_features`) and,
    if the model uses them, the static ones; a missing one takes the model's fill-in value.
    """

    def __init__(self, model: CurveModel, probe_steps: int = DEFAULT_PROBE_STEPS,
                 warmup_steps: int = DEFAULT_WARMUP_STEPS, name: str = "profiled",
                 max_slowdown_pct: float | None = None):
        if probe_steps < 1 or warmup_steps < 0:
            raise GovernorError(f"profiled: probe_steps must be >= 1 and warmup_steps >= 0, got {probe_steps}, {warmup_steps}")
        self.model = model
        self.probe_steps, self.warmup_steps = int(probe_steps), int(warmup_steps)
        self.name = name
        self.max_slowdown_pct = None if max_slowdown_pct is None else float(max_slowdown_pct)

    @property
    def levels_mhz(self) -> list[float]:
        return list(self.model.levels_mhz)

    @property
    def profiling_steps(self) -> int:
        """Steps run at the default clock before the level is locked (all of them charged)."""
        return self.warmup_steps + self.probe_steps

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        return pick_level(self.model.predict(workload), self.max_slowdown_pct)

    def decide_from_steps(self, steps: Sequence[tuple[float, float]], gpu_util_pct: float | None = None,
                          static: Mapping[str, Any] | None = None) -> float | None:
        """Decide from the probe's ``(energy_j, time_s)`` steps (live use), plus static features."""
        if len(steps) < self.profiling_steps:
            raise GovernorError(f"profiled: {len(steps)} of {self.profiling_steps} probing steps so far")
        feats = probe_features(steps[:self.profiling_steps], self.warmup_steps, gpu_util_pct)
        return self.decide({**(static or {}), **feats})

    def with_max_slowdown(self, max_slowdown_pct: float) -> ProfiledGovernor:
        return ProfiledGovernor(self.model, self.probe_steps, self.warmup_steps, self.name, max_slowdown_pct)

    def spec(self) -> dict:
        return {"format": PROFILED_FORMAT, "version": PROFILED_VERSION, "name": self.name,
                "probe_steps": self.probe_steps, "warmup_steps": self.warmup_steps, "curve": self.model.spec}

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, self.spec())

    @classmethod
    def load(cls, path: str | os.PathLike) -> ProfiledGovernor:
        """Read a file written by :meth:`save`; errors name the file and the problem."""
        spec = read_model_json(path, "profiled governor file",
                               "`dvfslab pipeline` writes it under <out>/models/profiled.json")
        try:
            return cls.from_spec(spec)
        except GovernorError as err:
            raise GovernorError(f"{Path(path)}: {err}") from None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ProfiledGovernor:
        check_format(spec, PROFILED_FORMAT, PROFILED_VERSION, "profiled governor")
        return cls(CurveModel(spec.get("curve", {})), int(spec.get("probe_steps", DEFAULT_PROBE_STEPS)),
                   int(spec.get("warmup_steps", DEFAULT_WARMUP_STEPS)), str(spec.get("name", "profiled")))
