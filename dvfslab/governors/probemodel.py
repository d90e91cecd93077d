"""What a probe of a running job costs and how well it reads: the physical probe model.

A probe is not free and not exact. On a machine, reading the energy per unit of work at one
level takes a window: the clock settles (a Jetson) or warm-up iterations run (Zeus's profiler),
then enough units run for the power sensor to give several samples, or for the profiler's
iteration count. Warm-up and profiled units are training units: the job keeps them, and they
are charged at the probed level. The reading is the true per-unit mean times noise whose
coefficient of variation shrinks with the units read (``sigma ∝ 1/sqrt(units read)``).

:class:`ProbeModel` states that for one job: the window of each level in the job's unit, the
share of a window that is read (the rest is warm-up / settle), the noise at a reference
length, where the noise figure came from, and whether the model is *idealised* (instant,
exact probes: only for comparison, never quoted as a result). A :class:`~dvfslab.governors.base.Probe`
may carry one as its ``model`` attribute; :class:`~dvfslab.governors.base.ProbingGovernor`
extends any probe shorter than the level's window to the window, and governors that plan their
probes (``voi``, ``zeus``) read it. The replay builds one per workload from the dataset
(:mod:`dvfslab.evaluation.replay`); ``dvfslab govern`` builds one from the sensor's interval and
the clock's settle time.

Board side: plain Python (no numpy, no pandas).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvfslab.governors.errors import GovernorError


@dataclass(frozen=True)
class ProbeModel:
    """The probe model of one job (module doc).

    ``windows``: units one reading of a level takes (warm-up included), per level;
    ``default_window``: for a level not in ``windows`` (None: the default clock included);
    ``read_fraction``: the share of a window that is read (Zeus: 40 of 10 + 40 iterations);
    ``sigma_ref``: the reading's coefficient of variation (a fraction) over ``ref_units`` units
    read; ``sigma_source``: where that figure comes from; ``unit``: the job's unit (``step``,
    ``epoch``, ``inference``); ``idealised``: instant, exact probes (comparison only)."""

    windows: Mapping[float, float] = field(default_factory=dict)
    default_window: float = 1.0
    read_fraction: float = 1.0
    sigma_ref: float = 0.0
    ref_units: float = 1.0
    sigma_source: str = ""
    unit: str = "step"
    idealised: bool = False
    window_source: str = ""
    epoch_units: float | None = None

    def __post_init__(self) -> None:
        if not (self.default_window > 0 and math.isfinite(self.default_window)):
            raise GovernorError(f"a probe window is a positive number of units, got {self.default_window!r}")
        if not 0 < self.read_fraction <= 1:
            raise GovernorError(f"read_fraction is the share of a window that is read, in (0, 1], "
                                f"got {self.read_fraction!r}")
        if self.epoch_units is not None and not (self.epoch_units > 0 and math.isfinite(self.epoch_units)):
            raise GovernorError(f"an epoch is a positive number of units, got {self.epoch_units!r}")
        if not (self.sigma_ref >= 0 and self.ref_units > 0):
            raise GovernorError(f"noise: sigma_ref >= 0 over ref_units > 0, got {self.sigma_ref!r} "
                                f"over {self.ref_units!r}")

    def window(self, level: float | None) -> float:
        """Units one reading of ``level`` takes (warm-up included)."""
        if level is not None:
            got = self.windows.get(float(level))
            if got is not None:
                return float(got)
        return float(self.default_window)

    def sigma(self, units_read: float) -> float:
        """Coefficient of variation of a reading over ``units_read`` units: ``sigma_ref *
        sqrt(ref_units / units_read)`` (0 when idealised)."""
        if self.idealised or self.sigma_ref == 0:
            return 0.0
        if not units_read > 0:
            raise GovernorError(f"a reading covers a positive number of units, got {units_read!r}")
        return self.sigma_ref * math.sqrt(self.ref_units / units_read)

    def describe(self) -> dict[str, Any]:
        """The model as ``summary.json`` states it under ``evaluation.probe``."""
        return {"unit": self.unit, "window_per_level": {format(k, "g"): v for k, v in sorted(self.windows.items())},
                "default_window": self.default_window, "window_source": self.window_source,
                "read_fraction": self.read_fraction, "sigma": self.sigma_ref, "sigma_ref_units": self.ref_units,
                "sigma_source": self.sigma_source, "idealised": self.idealised, "epoch_units": self.epoch_units}


#: instant, exact probes of one unit: the old replay, kept for comparison only
IDEALISED = ProbeModel(idealised=True, sigma_source="none (idealised)", window_source="one unit (idealised)")


def noise_from_windows(windows: Sequence[tuple[float | None, float, float]], ref_units: float = 1.0
                       ) -> tuple[float, int]:
    """The reading noise a governor measures itself, from its own windows: ``(level, units,
    energy_j)`` per window, several of a level (the repeated default-level windows, repeated
    probes). A window over ``u`` units reads the level's mean times log-normal noise of
    log-variance ``s^2 ref_units / u`` (σ ∝ 1/sqrt(units)); per level the readings' log energy
    per unit, weighted by ``u / ref_units``, about their weighted mean; ``s^2`` = the pooled sum of
    squares over the pooled degrees of freedom (each level's count less one). Returns the
    coefficient of variation over ``ref_units`` units, ``sqrt(exp(s^2) - 1)``, and the degrees of
    freedom (0: no level read twice — no estimate, σ 0 returned with it)."""
    if not ref_units > 0:
        raise GovernorError(f"ref_units must be > 0, got {ref_units!r}")
    by_level: dict[Any, list[tuple[float, float]]] = {}
    for level, units, energy_j in windows:
        if not (units > 0 and energy_j > 0):
            raise GovernorError(f"a window needs units > 0 and energy > 0, got {units!r} units, {energy_j!r} J")
        by_level.setdefault(level, []).append((math.log(energy_j / units), units / ref_units))
    ss, dof = 0.0, 0
    for reads in by_level.values():
        if len(reads) < 2:
            continue
        wsum = sum(w for _, w in reads)
        mean = sum(w * x for x, w in reads) / wsum
        ss += sum(w * (x - mean) ** 2 for x, w in reads)
        dof += len(reads) - 1
    if dof == 0:
        return 0.0, 0
    return math.sqrt(math.expm1(ss / dof)), dof
