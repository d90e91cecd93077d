"""The selection rule every governor applies: least energy, within a slowdown limit when one is set.

One :class:`Objective` is the ``objective`` parameter of every governor (after Zeus's
``OptimumSelector``, which chooses a power limit from profiling results by a pluggable rule).
``max_slowdown_pct`` bounds ``T / T_baseline - 1`` in % (docs/method.md). A governor meets it in
the way that is coherent with what it knows:

* a governor that has a curve of energy and time per level (``curve``, ``profiled`` and
  ``online`` predict one; ``oracle`` has the measured one) takes :meth:`Objective.select`: the
  least energy among the levels whose time meets the limit;
* a governor that only names a level (``ffg``, ``mlg``, ``mlg-paper``) takes
  :meth:`Objective.admit`: keep its level when ``time_model`` (a curve model) predicts that it
  meets the limit, else step *up* to the lowest level that does;
* ``maxn`` is the baseline: slowdown 0, within any limit >= 0.

When no level meets the limit the answer is ``None``: the board's default (the baseline), which
meets it by definition. Plain Python: ``dvfslab govern --max-slowdown`` uses it on a board.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    from dvfslab.governors.curvemodel import CurveModel


@dataclass(frozen=True)
class Objective:
    """Least energy; with ``max_slowdown_pct``, least energy among the levels at most that much
    slower than the baseline. ``time_model`` predicts the time of the governors that only name
    a level (module doc)."""

    max_slowdown_pct: float | None = None
    time_model: CurveModel | None = None

    def __post_init__(self) -> None:
        if self.max_slowdown_pct is not None and not self.max_slowdown_pct >= 0:
            raise GovernorError(f"max_slowdown_pct must be >= 0, got {self.max_slowdown_pct:g}")

    @property
    def limit(self) -> float:
        """The largest admissible ``T / T_baseline`` (inf without a limit)."""
        return math.inf if self.max_slowdown_pct is None else 1.0 + self.max_slowdown_pct / 100.0

    def select(self, levels: Iterable[float], energy: Iterable[float], time_rel: Iterable[float]) -> float | None:
        """The level with the least ``energy`` (any positive scale) among those whose ``time_rel``
        (``T / T_baseline``) meets the limit; ties: the lower level; None when none meets it."""
        limit = self.limit
        ok = [(float(e), float(f)) for f, e, t in zip(levels, energy, time_rel, strict=True) if float(t) <= limit]
        return min(ok)[1] if ok else None

    def admit(self, level: float | None, workload: Mapping[str, Any], who: str) -> float | None:
        """``level`` if the time model predicts that it meets the limit, else the lowest level above
        it that does (None: none does). Without a limit, ``level`` itself."""
        if level is None or self.max_slowdown_pct is None:
            return level
        if self.time_model is None:
            raise GovernorError(f"{who}: a slowdown limit needs a time model (a curve model: models/curve.json "
                                "from notebook 05, or --time-model FILE)")
        curves = self.time_model.predict(workload)
        levels = [float(f) for f in curves["level"]]
        start = snap_mhz(level, levels)
        for f, t in sorted(zip(levels, (float(t) for t in curves["time_rel"]), strict=True)):
            if f >= start and t <= self.limit:
                return f
        return None


#: the unconstrained rule: least energy
LEAST_ENERGY = Objective()
