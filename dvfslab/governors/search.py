"""``search``: a prior-guided local search — start at a prior's level, walk downhill on measured
energy per unit, stop at a local minimum (or a probe budget).

Energy per unit is U-shaped in the level (docs/method.md), so the least of a table of ``n``
levels can be found by measuring O(log n) of them instead of all ``n`` (what Zeus's JIT
profiler does, :mod:`dvfslab.governors.zeus_jit`). On the table's indices, sorted by level:

1. **Start** at the prior's level ``p``: another governor's pick for this workload (``prior``:
   a registry name, default ``ffg``, fitted on the same training data with ``prior_params``),
   or the middle of the table (``prior=None``). Measure ``p``.
2. **Direction**: measure ``p - 1``; if it is cheaper, walk down. Else measure ``p + 1``; if it is
   cheaper, walk up. Else ``p`` is a local minimum: stop (3 probes).
3. **Exponential steps** downhill: from the last cheaper index ``c``, jump 2, 4, 8 ... indices
   (clipped at the table's end) while the energy keeps falling. The first rise brackets a
   minimum ``(a, c, b)``: ``c`` cheaper than both ends. A fall all the way to the table's end
   stops there (a minimum at the end of the table).
4. **Golden-section on indices**: probe the middle of the longer side of the bracket; keep the
   cheaper point as the new centre and shrink the bracket, until both neighbours of the centre
   are measured: the centre is a local minimum, and the least energy measured.

A level is probed for ``probe_units`` units (default ``1/L`` of a unit on a table of ``L``
levels: the slice Zeus's profiler gives each level, so the search spends ``k/L`` units where
Zeus spends one). With a slowdown limit the highest level is measured first (the baseline's
stand-in), and a level slower than the limit allows costs more than any admissible one, the
more the slower it is: from a prior below the admissible levels the walk climbs into them, then
walks downhill on energy among them. ``max_probes`` caps the levels measured; when it is
reached the least measured level is held.

**Not unimodal.** The walk only ever stops at a *local* minimum. When the measured points
themselves are not unimodal (a measured level costs more than a level on each side of it: two
valleys), the decision's ``note`` says that the search stopped at a local minimum of a curve
that is not unimodal, and which levels show it; a budget stop says so too.

**A joint setting** (a level is the index of a setting of several clocks, docs/method.md): the
search makes **coordinate moves** (:func:`coordinate_search`): from the prior's setting, the walk
above along the GPU clock with the other clocks held, then along the next clock from the best
found, and so on, round after round, until a round improves nothing. It needs the full grid of
the clocks' tables (each line through a setting along one clock is then measured data); a joint
dataset of a design of N settings is refused. Energy along each line is assumed U-shaped.

The search is a generator that yields the index to measure next and receives its energy per
unit; :class:`SearchSession` drives it in a replay (one probe of ``probe_units`` per level) and
live (one training step at a time, until the level has run its units).

**Complexity**: a decision is the walk's next index, O(1) on one knob; on a joint grid each
line through a setting is found by one scan of the ``L`` settings, O(L · dims) per line: linear
in the settings, with O(log n) probes per line.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import Governor, GovernorTags, ProbingGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Objective
from dvfslab.governors.session import WindowSession

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData

#: the search yields an index to measure and receives its cost (anything ordered: a number, a tuple)
Walk = Generator[int, Any, int]


def local_search(n: int, start: int) -> Walk:
    """The walk over indices ``0 .. n-1`` (module doc, steps 1-4); returns the index it stops at."""
    cost: dict[int, Any] = {}

    def measure(i: int) -> Generator[int, Any, Any]:
        if i not in cost:
            cost[i] = yield i
        return cost[i]

    c = min(max(int(start), 0), n - 1)
    best = yield from measure(c)
    step = 0
    for d in (-1, 1):
        if 0 <= c + d < n and (yield from measure(c + d)) < best:
            step = d
            break
    if step == 0:
        return c
    a, c = c, c + step  # a: the last point above, c: the cheapest so far
    best = cost[c]
    jump = 2
    while True:
        b = min(max(c + step * jump, 0), n - 1)
        if b == c:  # fell all the way to the table's end
            return c
        e = yield from measure(b)
        if e < best:
            a, c, best, jump = c, b, e, jump * 2
            continue
        break
    lo, hi = sorted((a, b))
    while hi - lo > 2:
        left, right = c - lo, hi - c
        x = c - left // 2 if left >= right else c + right // 2
        e = yield from measure(x)
        if e < best:
            lo, hi = (c, hi) if x > c else (lo, c)
            c, best = x, e
        elif x > c:
            hi = x
        else:
            lo = x
    return c  # lo = c - 1 and hi = c + 1 are measured and cost more: a local minimum


def coordinate_search(settings: Sequence[Sequence[float]], start: int) -> Walk:
    """Coordinate moves over a full grid of settings (module doc): yields setting indices to
    measure, receives their costs, returns the index it stops at (a minimum along every clock)."""
    cost: dict[int, Any] = {}
    dims = len(settings[0]) if settings else 0
    cur = min(max(int(start), 0), len(settings) - 1)
    improved = True
    while improved:
        improved = False
        for k in range(dims):
            here = settings[cur]
            line = sorted((i for i, s in enumerate(settings) if all(s[j] == here[j] for j in range(dims) if j != k)),
                          key=lambda i: settings[i][k])
            if len(line) < 2:
                continue
            walk = local_search(len(line), line.index(cur))
            try:
                pos = next(walk)
                while True:
                    i = line[pos]
                    if i not in cost:
                        cost[i] = yield i
                    pos = walk.send(cost[i])
            except StopIteration as stop:
                best = line[stop.value]
            if best != cur and cost[best] < cost[cur]:
                cur, improved = best, True
    if cur not in cost:  # a one-setting grid: measure it
        cost[cur] = yield cur
    return cur


def full_grid(settings: Sequence[Sequence[float]]) -> bool:
    """Whether ``settings`` are the whole product of each clock's values."""
    if not settings:
        return False
    values = [{s[k] for s in settings} for k in range(len(settings[0]))]
    return len({tuple(s) for s in settings}) == math.prod(len(v) for v in values) == len(settings)


def not_unimodal(levels: Sequence[float], energy: Sequence[float]) -> list[float]:
    """The measured levels (ascending) that show the measured curve is not unimodal: a level
    costing more than a measured level on each side of it (empty: the points are unimodal)."""
    pts = sorted(zip(levels, energy, strict=True))
    peaks = []
    for i in range(1, len(pts) - 1):
        left = min(e for _, e in pts[:i])
        right = min(e for _, e in pts[i + 1:])
        if pts[i][1] > left and pts[i][1] > right:
            peaks.append(pts[i][0])
    return peaks


class SearchGovernor(ProbingGovernor):
    """Prior-guided local search over the level table, O(log n) probes (module doc).

    ``prior``: a registry name whose pick starts the search (fitted on the same data with
    ``prior_params``), or None: the table's middle; ``probe_units``: the units each probed level
    runs (None: ``1/L``); ``max_probes``: the most levels it measures (None: no cap).
    """

    name = "search"
    summary = "prior-guided local search: from FFG's level, walk downhill on measured energy, O(log n) probes"
    tags = GovernorTags(probes=True, saves=("prior", "prior_params", "probe_units", "max_probes"),
                        not_on_command_line="search probes levels during training and needs each step's energy, "
                                            "which a plain command cannot report; add "
                                            "dvfslab.harness.online_callback.OnlineDvfsCallback(backend, "
                                            "governor=...) to your Trainer's callbacks (docs/governors.md)")

    def __init__(self, prior: str | None = "ffg", prior_params: Mapping[str, Any] | None = None,
                 probe_units: float | None = None, max_probes: int | None = None,
                 objective: Objective = LEAST_ENERGY):
        self.prior = prior
        self.prior_params = prior_params
        self.probe_units = probe_units
        self.max_probes = max_probes
        self.objective = objective

    def unusable_reason(self, data: TrainingData) -> str:
        settings = data.sweep.settings
        if settings and not full_grid(settings):
            return (f"its coordinate moves need the full grid of the clocks' tables, and this joint dataset ran "
                    f"{len(settings)} settings of a design")
        return super().unusable_reason(data)

    def _fit(self, data: TrainingData | None) -> None:
        from dvfslab.governors.registry import make

        why = self.unusable_reason(data) if data is not None else ""
        if why:
            raise GovernorError(f"search: {why}")
        #: a joint dataset's settings (the coordinate moves' grid); empty for one knob
        self.settings_ = [list(s) for s in data.sweep.settings] if data is not None else []
        if self.prior is None:
            self.prior_ = None
            return
        if self.prior == self.name:
            raise GovernorError("search: its prior must be another governor")
        self.prior_ = make(self.prior, **dict(self.prior_params or {})).fit(data)
        if self.prior_.probing:
            raise GovernorError(f"search: its prior must decide before the run, {self.prior!r} probes")

    def fallback_note(self) -> str:
        prior = getattr(self, "prior_", None)
        return prior.fallback_note() if isinstance(prior, Governor) else ""

    def start(self, workload: Mapping[str, Any], levels: Sequence[float], model=None) -> SearchSession:
        table = sorted(float(f) for f in levels)
        if not table:
            raise GovernorError("search: no level to probe")
        prior = self._fitted("prior_") if self.prior is not None else None
        pick = prior.decide(workload).level if prior is not None else None
        if prior is None:
            start = (len(table) - 1) // 2
        else:
            start = len(table) - 1 if pick is None else table.index(snap_mhz(float(pick), table))
        settings = getattr(self, "settings_", [])
        if settings and len(settings) != len(table):
            raise GovernorError(f"search: fitted on {len(settings)} joint settings, asked to search {len(table)} levels")
        return SearchSession(self, table, start, settings)


class SearchSession(WindowSession):
    """One job under the search: the walk's next index is probed for ``probe_units`` units (live:
    until it has run them, one step at a time); the walk decides what comes next."""

    def __init__(self, governor: SearchGovernor, table: list[float], start: int,
                 settings: Sequence[Sequence[float]] = ()):
        self.table, self.objective = table, governor.objective
        self.units = float(governor.probe_units) if governor.probe_units is not None else 1.0 / len(table)
        if not (self.units > 0 and math.isfinite(self.units)):
            raise GovernorError(f"search: probe_units must be > 0, got {governor.probe_units!r}")
        if governor.max_probes is not None and int(governor.max_probes) < 1:
            raise GovernorError(f"search: max_probes must be >= 1, got {governor.max_probes!r}")
        self.budget = int(governor.max_probes) if governor.max_probes is not None else len(table) + 1
        self._begin()
        self.measured: dict[int, tuple[float, float]] = {}  # index -> (energy, time) per unit
        self._limited = self.objective.max_slowdown_pct is not None
        self._joint = bool(settings)
        self._walk = coordinate_search(settings, start) if settings else local_search(len(table), start)
        self._top_first = self._limited
        self._stop = ""
        self._probe(len(table) - 1 if self._limited else next(self._walk))

    def _probe(self, i: int) -> None:
        self._pending = i
        self._read(self.table[i], self.units)

    def _window_read(self, units: float, energy_j: float, time_s: float) -> None:
        i = self._pending
        self.measured[i] = (energy_j / units, time_s / units)
        self._advance(i)

    def _cost(self, i: int) -> tuple[float, float]:
        """What the walk minimizes: ``(how much slower than the limit allows, energy)`` — a level
        too slow is worse the slower it is (the walk climbs out of it), an admissible one is
        ranked by its energy."""
        energy, time = self.measured[i]
        excess = time / self.measured[len(self.table) - 1][1] - self.objective.limit if self._limited else 0.0
        return max(excess, 0.0), energy

    def _advance(self, i: int) -> None:
        try:
            if self._top_first:
                self._top_first = False
                nxt = next(self._walk)
            else:
                nxt = self._walk.send(self._cost(i))
            while nxt in self.measured:  # the top level, measured first under a limit
                nxt = self._walk.send(self._cost(nxt))
        except StopIteration:
            return self._finish()
        if len(self.measured) >= self.budget:
            self._stop = f"probe budget reached ({self.budget} levels): the least measured is held"
            return self._finish()
        self._probe(nxt)

    def _finish(self) -> None:
        """Hold the least measured energy among the admissible levels (ties: the lower level)."""
        self._pending = None
        idx = sorted(self.measured)
        ok = [(self.measured[i][0], self.table[i]) for i in idx if self._cost(i)[0] == 0.0]
        peaks = [] if self._joint else not_unimodal([self.table[i] for i in idx], [self._cost(i) for i in idx])
        notes = [self._stop] if self._stop else []
        if peaks:
            notes.append("stopped at a local minimum: the measured energies are not unimodal (higher than a level on "
                         f"each side at {', '.join(f'{p:g}' for p in peaks)})")
        self._hold(min(ok)[1] if ok else None, "; ".join(notes))
