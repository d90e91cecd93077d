"""The selection rule every governor applies: a family of selectors after Zeus's ``OptimumSelector``.

Zeus chooses a power limit from profiling results by a pluggable rule
(``zeus/optimizer/power_limit.py`` in github.com/ml-energy/zeus, Apache-2.0, at commit 75a8b93:
``OptimumSelector`` and its subclasses ``Energy``, ``Time``, ``ZeusCost``,
``MaxSlowdownConstraint``, lines 43-133). Here one :class:`Selector` is the ``objective``
parameter of every governor and of the recommendation:

* :class:`Objective` (alias :data:`LeastEnergy`) — the least energy; the default (the paper's);
* :class:`LeastTime` — the least time (Zeus's ``Time``);
* :class:`ZeusCost` — Zeus's time-energy cost ``eta * E + (1 - eta) * MAXPOWER * T``
  (``zeus/utils/metric.py``, ``zeus_cost``, line 29; ``ZeusCost.select``, power_limit.py lines
  94-106); ``eta = 1`` is the least energy, ``eta = 0`` the least time;
* :class:`SlowdownLimit` — the least energy within a slowdown limit (``Objective(max_slowdown_pct=...)``
  does the same). Zeus's ``MaxSlowdownConstraint`` takes the *lowest power limit* within the
  limit; here it is the least energy among the levels within it (the same level wherever
  energy falls with the level, and defined on any knob).

Every selector may carry a slowdown limit: ``max_slowdown_pct`` bounds ``T / T_baseline - 1`` in %
(docs/method.md); a level slower than that is inadmissible. A governor meets it in the way that is
coherent with what it knows:

* a governor that has a curve of energy and time per level (``curve``, ``profiled``, ``online``,
  ``voi`` predict one; ``oracle`` has the measured one; ``zeus``, ``zeus-sim``, ``search`` measured
  it) takes :meth:`Selector.select` (or :meth:`Selector.select_measured` on absolute figures);
* a governor that only names a level (``ffg``, ``mlg``, ``mlg-paper``) takes
  :meth:`Selector.admit`: keep its level when ``time_model`` (a curve model) predicts that it
  meets the limit, else step *up* to the lowest level that does;
* ``maxn`` is the baseline: slowdown 0, within any limit >= 0.

When no level meets the limit the answer is ``None``: the board's default (the baseline), which
meets it by definition.

**MAXPOWER.** Zeus's cost weighs time by the GPU's maximum power limit (``max_power``, power_limit.py
line 96), so that both terms are joules. :meth:`Selector.select` takes ``max_power`` as that power
times the baseline's time, in the unit of ``energy`` (with ``energy = E / E_baseline`` it is
``MAXPOWER / P_baseline``); absent, it is the highest average power among the candidates
(``max(energy / time_rel)``): on a clock knob the power at the top clock, on a power-limit knob
the highest power drawn (at most the highest limit, which :meth:`select_measured` takes when the
caller names it, as Zeus does).

:func:`parse_objective` reads the one-string form the pipeline passes to notebooks 04 / 05
(``energy``, ``time``, ``zeus-cost:eta=0.5``, ``energy:max_slowdown_pct=10``) and
:func:`objective_from` the command line's ``--eta`` / ``--max-slowdown``. Plain Python:
``dvfslab govern`` uses it on a board.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    from typing import Self

    from dvfslab.governors.curvemodel import CurveModel


class Selector(ABC):
    """Zeus's ``OptimumSelector``: the rule that picks a level from each level's energy and time
    (module doc). Subclasses are frozen dataclasses with the fields ``max_slowdown_pct`` and
    ``time_model`` (and their own), and define :meth:`cost`."""

    #: the name in :func:`parse_objective`'s strings and in ``summary.json``
    kind: ClassVar[str] = ""
    max_slowdown_pct: float | None = None
    time_model: CurveModel | None = None

    def _check_limit(self) -> None:
        if self.max_slowdown_pct is not None and not self.max_slowdown_pct >= 0:
            raise GovernorError(f"max_slowdown_pct must be >= 0, got {self.max_slowdown_pct:g}")

    def __post_init__(self) -> None:
        self._check_limit()

    @abstractmethod
    def cost(self, energy: float, time_rel: float, max_power: float) -> float:
        """The cost of a level (lower is better) from its ``energy`` (per unit of work, any scale
        shared by the candidates), ``time_rel`` (``T / T_baseline``) and ``max_power`` (module doc)."""

    @property
    def limit(self) -> float:
        """The largest admissible ``T / T_baseline`` (inf without a limit)."""
        return math.inf if self.max_slowdown_pct is None else 1.0 + self.max_slowdown_pct / 100.0

    def costs(self, energy: Sequence[float], time_rel: Sequence[float], max_power: float | None = None) -> list[float]:
        """Each candidate's :meth:`cost`, ``inf`` where its ``time_rel`` breaks the limit."""
        energy, time_rel = [float(e) for e in energy], [float(t) for t in time_rel]
        if len(energy) != len(time_rel):
            raise GovernorError(f"{len(energy)} energies for {len(time_rel)} times")
        if max_power is None:
            max_power = max((e / t for e, t in zip(energy, time_rel, strict=True) if t > 0), default=0.0)
        limit = self.limit
        return [self.cost(e, t, float(max_power)) if t <= limit else math.inf
                for e, t in zip(energy, time_rel, strict=True)]

    def select(self, levels: Iterable[float], energy: Iterable[float], time_rel: Iterable[float], *,
               max_power: float | None = None, ties_high: bool = False) -> float | None:
        """The level of the least :meth:`cost` among those whose ``time_rel`` meets the limit;
        ties: the lower level (``ties_high``: the higher, as Zeus's ``min`` over limits profiled
        from the highest down keeps the first); None when none meets the limit."""
        levels = [float(f) for f in levels]
        c = self.costs(list(energy), list(time_rel), max_power)
        if len(c) != len(levels):
            raise GovernorError(f"{len(levels)} levels for {len(c)} energies")
        ok = [(x, -f if ties_high else f) for f, x in zip(levels, c, strict=True) if x < math.inf]
        if not ok:
            return None
        best = min(ok)[1]
        return -best if ties_high else best

    def select_measured(self, levels: Sequence[float], energy_j: Sequence[float], time_s: Sequence[float], *,
                        max_power_w: float | None = None, ties_high: bool = False) -> float | None:
        """:meth:`select` on absolute figures per unit of work (J, s): the time is taken relative to
        the highest level's (the baseline's stand-in, as Zeus's ``MaxSlowdownConstraint`` does,
        power_limit.py lines 128-129); ``max_power_w``: MAXPOWER in W (None: the highest average
        power measured)."""
        levels = [float(f) for f in levels]
        if not levels:
            return None
        t_top = float(time_s[max(range(len(levels)), key=levels.__getitem__)])
        if not t_top > 0:
            raise GovernorError(f"the highest level's time must be > 0, got {t_top!r}")
        max_power = None if max_power_w is None else float(max_power_w) * t_top
        return self.select(levels, energy_j, [float(t) / t_top for t in time_s], max_power=max_power,
                           ties_high=ties_high)

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

    def with_time_model(self, model: CurveModel | None) -> Self:
        """The same selector with ``time_model`` (what the level-only governors need under a limit)."""
        return dataclasses.replace(self, time_model=model)

    def _extra(self) -> dict[str, Any]:
        """The selector's own settings (``eta``)."""
        return {}

    @property
    def spec(self) -> str:
        """The one-string form :func:`parse_objective` reads (``zeus-cost:eta=0.5,max_slowdown_pct=10``)."""
        args = {**self._extra(), **({} if self.max_slowdown_pct is None else {"max_slowdown_pct": self.max_slowdown_pct})}
        return self.kind + (":" + ",".join(f"{k}={v:g}" for k, v in args.items()) if args else "")

    def describe(self) -> dict[str, Any]:
        """What ``summary.json`` states: ``{"selector", "spec", "max_slowdown_pct", ...}``."""
        return {"selector": self.kind, "spec": self.spec, "max_slowdown_pct": self.max_slowdown_pct, **self._extra()}


@dataclass(frozen=True)
class Objective(Selector):
    """The least energy; with ``max_slowdown_pct``, the least energy among the levels at most that
    much slower than the baseline (Zeus's ``Energy``, power_limit.py lines 51-56). ``time_model``
    predicts the time of the governors that only name a level (module doc)."""

    kind: ClassVar[str] = "energy"
    max_slowdown_pct: float | None = None
    time_model: CurveModel | None = None

    def cost(self, energy: float, time_rel: float, max_power: float) -> float:
        return energy


#: the least energy (the default objective)
LeastEnergy = Objective


@dataclass(frozen=True)
class SlowdownLimit(Objective):
    """The least energy within a slowdown limit: :class:`Objective` whose limit is required."""

    def __post_init__(self) -> None:
        if self.max_slowdown_pct is None:
            raise GovernorError("SlowdownLimit needs max_slowdown_pct (a slowdown limit in %)")
        super().__post_init__()


@dataclass(frozen=True)
class LeastTime(Selector):
    """The least time (Zeus's ``Time``, power_limit.py lines 59-70)."""

    kind: ClassVar[str] = "time"
    max_slowdown_pct: float | None = None
    time_model: CurveModel | None = None

    def cost(self, energy: float, time_rel: float, max_power: float) -> float:
        return time_rel


@dataclass(frozen=True)
class ZeusCost(Selector):
    """Zeus's cost ``eta * E + (1 - eta) * MAXPOWER * T`` (module doc), ``0 <= eta <= 1``; Zeus's
    default ``eta = 0.5`` (``GlobalPowerLimitOptimizer``, power_limit.py lines 257-260)."""

    kind: ClassVar[str] = "zeus-cost"
    eta: float = 0.5
    max_slowdown_pct: float | None = None
    time_model: CurveModel | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.eta) <= 1.0:
            raise GovernorError(f"eta must be between 0 and 1 (Zeus's eta_knob), got {self.eta!r}")
        super().__post_init__()

    def cost(self, energy: float, time_rel: float, max_power: float) -> float:
        return self.eta * energy + (1.0 - self.eta) * max_power * time_rel

    def _extra(self) -> dict[str, Any]:
        return {"eta": float(self.eta)}


#: the unconstrained rule: least energy
LEAST_ENERGY = Objective()
#: the selectors by :attr:`Selector.kind`
SELECTORS: dict[str, type[Selector]] = {"energy": Objective, "time": LeastTime, "zeus-cost": ZeusCost}


def parse_objective(spec: str | Selector | None) -> Selector:
    """A selector from its one-string form (:attr:`Selector.spec`): ``KIND[:key=value,...]`` with
    ``KIND`` one of ``energy``, ``time``, ``zeus-cost`` and keys ``eta``, ``max_slowdown_pct``;
    ``None`` or ``""``: the least energy. A selector is returned as it is."""
    if isinstance(spec, Selector):
        return spec
    text = (spec or "energy").strip()
    kind, _, rest = text.partition(":")
    cls = SELECTORS.get(kind.strip())
    if cls is None:
        raise GovernorError(f"unknown objective {kind.strip()!r} in {text!r}; known: {', '.join(SELECTORS)} "
                            "(e.g. zeus-cost:eta=0.5 or energy:max_slowdown_pct=10)")
    known = {f.name for f in dataclasses.fields(cls)} - {"time_model"}
    args: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in known:
            raise GovernorError(f"objective {text!r}: {item!r} is not one of {', '.join(f'{k}=NUMBER' for k in sorted(known))}")
        try:
            args[key] = float(value)
        except ValueError:
            raise GovernorError(f"objective {text!r}: {key} must be a number, got {value!r}") from None
    return cls(**args)


def objective_from(eta: float | None = None, max_slowdown_pct: float | None = None) -> Selector:
    """The command line's objective: ``--eta`` makes it Zeus's cost with that eta, else the least
    energy; ``--max-slowdown`` adds a slowdown limit."""
    if eta is not None:
        return ZeusCost(eta=float(eta), max_slowdown_pct=max_slowdown_pct)
    return Objective(max_slowdown_pct)


def with_objective(params: Mapping[str, Mapping[str, Any]] | None, names: Iterable[str],
                   objective: Selector) -> dict[str, dict[str, Any]]:
    """``params`` (registry name -> parameters) with ``objective`` for every governor of ``names``:
    a pipeline run's objective, which every governor optimises so that their regrets compare."""
    params = dict(params or {})
    return {n: {**dict(params.get(n, {})), "objective": objective} for n in dict.fromkeys([*params, *names])}
