"""Slowdown limits: any governor picks the least-energy level that keeps training fast enough.

``max_slowdown_pct`` bounds ``T_p / T_baseline - 1`` (in %, docs/method.md). Each kind of
governor meets it the way that is coherent with what it knows:

* governors that predict curves (``curve``; ``online`` after probing) choose the least
  predicted energy among the levels whose *predicted* slowdown meets the limit;
* ``oracle`` uses the *measured* times: the least-energy measured level meeting the limit
  (the constrained upper bound, against which constrained regret is measured);
* a governor that only names a level (``mlg``, ``mlg-paper``, ``ffg``) is wrapped in a
  :class:`SlowdownGuard`: keep its level if a time model (a :class:`CurveModel`) predicts
  it meets the limit, else step *up* to the lowest level that does;
* ``maxn`` is the baseline (slowdown 0) and always meets a limit >= 0.

When no level is predicted to meet the limit, every governor returns ``None``: the board's
default dynamic clock (the baseline), which meets it by definition. Plain Python: this is
loaded by ``dvfslab govern --max-slowdown`` on a board. The report over a replay is
:func:`dvfslab.governors.fit.constraint_report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import Governor
from dvfslab.governors.curve import CurveModel, pick_level
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.static import MaxnGovernor, OracleGovernor

if TYPE_CHECKING:
    from dvfslab.analysis.aggregate import Sweep


class SlowdownGuard:
    """Wrap a level-naming governor: step up from its pick until predicted slowdown <= limit."""

    def __init__(self, base: Governor, max_slowdown_pct: float, time_model: CurveModel,
                 name: str | None = None):
        self.base = base
        self.max_slowdown_pct = float(max_slowdown_pct)
        self.time_model = time_model
        self.name = name or base.name

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        f0 = self.base.decide(workload)
        if f0 is None:
            return None
        curves = self.time_model.predict(workload)
        limit = 1.0 + self.max_slowdown_pct / 100.0
        levels = [float(f) for f in curves["freq_mhz"]]
        start = snap_mhz(f0, levels)
        for f, t in sorted(zip(levels, (float(t) for t in curves["time_rel"]), strict=True)):
            if f >= start and t <= limit:
                return f
        return None


class ConstrainedOracle:
    """The least-energy measured level whose measured slowdown meets the limit (else None)."""

    def __init__(self, choice_mhz: Mapping[str, float | None], max_slowdown_pct: float, name: str = "oracle"):
        self.choice_mhz = dict(choice_mhz)
        self.max_slowdown_pct = float(max_slowdown_pct)
        self.name = name

    @classmethod
    def from_sweep(cls, sweep: Sweep, max_slowdown_pct: float, name: str = "oracle") -> ConstrainedOracle:
        return cls({w: constrained_oracle_freq(sweep, w, max_slowdown_pct) for w in sweep.workload_ids()},
                   max_slowdown_pct, name)

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        wid = workload.get("workload_id")
        if wid not in self.choice_mhz:
            raise GovernorError(f"oracle: workload {wid!r} was not swept; "
                                "the oracle knows only measured workloads")
        return self.choice_mhz[wid]


def constrained_oracle_freq(sweep: Sweep, workload_id: str, max_slowdown_pct: float) -> float | None:
    """Least-energy measured level with ``T / T_b - 1 <= limit`` (None: only the baseline does)."""
    freqs, energy, time = sweep.curve(workload_id)
    t_b = sweep.baseline_of(workload_id)[1]
    return pick_level({"freq_mhz": freqs, "energy_rel": energy, "time_rel": [t / t_b for t in time]},
                      max_slowdown_pct)


def constrain(governor: Governor, max_slowdown_pct: float, *, time_model: CurveModel | None = None,
              sweep: Sweep | None = None) -> Governor:
    """The constrained version of ``governor`` (see the module docstring for each kind)."""
    if max_slowdown_pct < 0:
        raise GovernorError(f"max_slowdown_pct must be >= 0, got {max_slowdown_pct:g}")
    if hasattr(governor, "with_max_slowdown"):  # curve, online
        return governor.with_max_slowdown(max_slowdown_pct)
    if isinstance(governor, MaxnGovernor):
        return governor
    if isinstance(governor, OracleGovernor):
        if sweep is None:
            raise GovernorError("oracle: a slowdown limit needs the sweep's measured times")
        return ConstrainedOracle.from_sweep(sweep, max_slowdown_pct, governor.name)
    if time_model is None:
        raise GovernorError(f"{governor.name}: a slowdown limit needs a time model (a curve model: "
                            "models/curve.json from notebook 05, or --time-model FILE)")
    return SlowdownGuard(governor, max_slowdown_pct, time_model)


def constrain_all(governors: Mapping[str, Governor], max_slowdown_pct: float, *,
                  time_model: CurveModel | None, sweep: Sweep) -> dict[str, Governor]:
    """:func:`constrain` each governor of a registry-built dict."""
    return {k: constrain(g, max_slowdown_pct, time_model=time_model, sweep=sweep) for k, g in governors.items()}
