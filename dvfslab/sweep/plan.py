"""What a sweep runs, and in which order: :class:`RunSpec`, :class:`SweepPlan`, :func:`make_plan`.

A plan is workloads × levels × repetitions (+ MAXN baseline runs). Run ids depend only on the
cell (workload, policy, level, repetition), never on the order or the seed, so a resumed sweep
finds exactly the runs it still has to do. The orders are described in :func:`order_cells`.

A plan also says what happens to the clocks besides the GPU's during its fixed runs
(``pins``: the memory clock and the CPU clusters, each ``"max"``, ``"none"`` or MHz; by default
both at the power mode's maximum, see docs/sweep.md); MAXN runs leave every clock to the board.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dvfslab.core.errors import SweepError
from dvfslab.core.levels import format_mhz

FIXED, MAXN = "fixed", "maxn"
ORDERS = ("sequential", "shuffled", "interleaved")
PLAN_VERSION = 1
#: what a sweep's fixed runs do with the other clocks unless told otherwise: pin each at the
#: power mode's highest level (docs/sweep.md, "The other clocks")
DEFAULT_PINS = (("emc", "max"), ("cpu", "max"))
#: what a plan.json written before pins existed did: left them to the board
LEGACY_PINS = (("emc", "none"), ("cpu", "none"))


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a workload under one policy (a fixed level or MAXN), one repetition."""

    run_id: str
    workload_id: str
    policy: str
    freq_mhz: float | None
    rep: int
    steps: int
    warmup_steps: int
    #: the other clocks to pin for this run: (name, "max" | MHz) pairs; empty: left to the board
    pins: tuple[tuple[str, float | str], ...] = ()

    @property
    def level_label(self) -> str:
        """``'612 MHz'`` or ``'MAXN'`` (for progress bars and logs)."""
        return "MAXN" if self.policy == MAXN else f"{format_mhz(self.freq_mhz)} MHz"


def run_id_for(workload_id: str, policy: str, freq_mhz: float | None, rep: int) -> str:
    """Deterministic, file-name-safe run id: ``bert-base--sst2__f612__r0``, ``..__maxn__r1``."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", workload_id.replace("/", "--"))
    cond = MAXN if policy == MAXN else f"f{format_mhz(freq_mhz)}"
    return f"{slug}__{cond}__r{int(rep)}"


def williams_rows(n: int) -> list[list[int]]:
    """Rows of a Williams Latin square on ``n`` conditions (``2n`` rows when ``n`` is odd).

    Over a full cycle of rows every condition takes every position equally often and follows
    every other condition equally often (first-order carry-over balance).
    """
    if n <= 0:
        return []
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(c + r) % n for c in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def order_cells(workloads: Sequence[str], conditions: Sequence[float | None], reps: int,
                order: str, seed: int) -> list[tuple[str, float | None, int]]:
    """Order the (workload, condition, rep) cells; a condition is a level in MHz or ``None`` (MAXN).

    * ``sequential``: workload by workload, levels ascending then MAXN, repetitions back to back.
    * ``shuffled``: a seeded random permutation of the sequential order.
    * ``interleaved``: repetitions outermost; inside each (rep, workload) block the conditions
      follow successive rows of a Williams Latin square, so slow drift (room temperature, board
      ageing) spreads evenly over the levels and so does the thermal carry-over of the run before.
    """
    if order not in ORDERS:
        raise SweepError(f"unknown order {order!r}; choose one of: {', '.join(ORDERS)}")
    if order == "interleaved":
        rows = williams_rows(len(conditions))
        cells = []
        for rep in range(reps):
            for w_idx, wid in enumerate(workloads):
                row = rows[(rep * len(workloads) + w_idx) % len(rows)]
                cells += [(wid, conditions[c], rep) for c in row]
        return cells
    cells = [(w, c, r) for w in workloads for c in conditions for r in range(reps)]
    if order == "shuffled":
        random.Random(seed).shuffle(cells)
    return cells


@dataclass(frozen=True)
class SweepPlan:
    """Workloads × levels × repetitions (+ MAXN baseline runs), in execution order."""

    workloads: tuple[str, ...]
    levels_mhz: tuple[float, ...]
    reps: int = 1
    maxn: bool = True
    order: str = "interleaved"
    seed: int = 0
    steps: int = 100
    warmup_steps: int = 10
    board_kind: str | None = None  # a fleet sweep's board kind (dvfslab.sweep.board.kind_id)
    runs: tuple[RunSpec, ...] = field(default=(), compare=False)
    pins: tuple[tuple[str, float | str], ...] = DEFAULT_PINS  # the fixed runs' other clocks

    def __len__(self) -> int:
        return len(self.runs)

    def settings(self) -> dict:
        """The plan without its run list (what ``plan.json`` and ``meta.json`` record)."""
        d = asdict(self)
        d.pop("runs")
        if d["board_kind"] is None:  # single-board sweeps: plan.json as before fleets existed
            d.pop("board_kind")
        d["workloads"], d["levels_mhz"] = list(self.workloads), list(self.levels_mhz)
        d["pins"] = dict(self.pins)
        return d

    def to_json(self) -> dict:
        return {"plan_version": PLAN_VERSION, **self.settings(), "run_ids": [r.run_id for r in self.runs]}

    @classmethod
    def from_json(cls, obj: Mapping, path: str | Path = "plan.json") -> SweepPlan:
        """Rebuild a plan from ``plan.json`` and check that it reproduces the stored run order."""
        if obj.get("plan_version") != PLAN_VERSION:
            raise SweepError(f"{path}: unknown plan_version {obj.get('plan_version')!r} "
                             f"(this dvfslab writes {PLAN_VERSION})")
        keys = ("reps", "maxn", "order", "seed", "steps", "warmup_steps")
        plan = make_plan(obj["workloads"], obj["levels_mhz"], **{k: obj[k] for k in keys},
                         board_kind=obj.get("board_kind"), pins=obj.get("pins", dict(LEGACY_PINS)))
        if [r.run_id for r in plan.runs] != list(obj.get("run_ids", [])):
            raise SweepError(f"{path}: stored run order differs from the one this dvfslab plans; "
                             "finish the sweep with the dvfslab version that started it, or start a new --out")
        return plan

    def diff(self, stored: SweepPlan) -> str:
        """The settings that differ from ``stored`` (for the resume error), else ``'run order'``."""
        mine, theirs = self.settings(), stored.settings()
        diffs = [f"{k}: {mine.get(k)!r} vs stored {theirs.get(k)!r}" for k in {**mine, **theirs}
                 if mine.get(k) != theirs.get(k)]
        return "; ".join(diffs) or "run order"


def normalize_pins(pins: Mapping[str, float | str | None] | Sequence | None) -> tuple[tuple[str, float | str], ...]:
    """``{"emc": "max", "cpu": 1728}`` -> the plan's pins in :data:`DEFAULT_PINS` order (a clock
    not named keeps its default; ``"none"`` is kept, so the plan says it was left alone)."""
    given = dict(pins or {})
    unknown = sorted(set(given) - {n for n, _ in DEFAULT_PINS})
    if unknown:
        raise SweepError(f"unknown clock(s) to pin: {', '.join(unknown)}; known: "
                         f"{', '.join(n for n, _ in DEFAULT_PINS)}")
    out = []
    for name, default in DEFAULT_PINS:
        value = given.get(name, default)
        value = default if value is None else value
        if isinstance(value, str) and value not in ("max", "none"):
            try:
                value = float(value)
            except ValueError:
                raise SweepError(f"pin {name}={value!r}: give 'max', 'none' or MHz") from None
        out.append((name, float(value) if not isinstance(value, str) else value))
    return tuple(out)


def make_plan(workloads: Sequence[str], levels_mhz: Sequence[float], *, reps: int = 1,
              maxn: bool = True, order: str = "interleaved", seed: int = 0, steps: int = 100,
              warmup_steps: int = 10, board_kind: str | None = None,
              pins: Mapping[str, float | str | None] | None = None) -> SweepPlan:
    """Plan a sweep; run ids depend only on (workload, policy, level, rep), so resume is exact.

    ``board_kind``: for a fleet sweep, the kind of board it runs on (:func:`dvfslab.sweep.board.kind_id`).
    ``pins``: the other clocks of the fixed runs (:func:`normalize_pins`; default: both at the
    power mode's maximum); every fixed run carries them, MAXN runs none.
    """
    plan_pins = normalize_pins(pins)
    run_pins = tuple((n, v) for n, v in plan_pins if v != "none")
    workloads = tuple(dict.fromkeys(str(w) for w in workloads))
    levels = tuple(sorted(dict.fromkeys(float(f) for f in levels_mhz)))
    if not workloads:
        raise SweepError("the plan has no workloads; pass --workloads")
    if not levels and not maxn:
        raise SweepError("the plan has no levels and no MAXN runs; pass --freqs or keep MAXN")
    if reps < 1 or steps < 1 or warmup_steps < 0:
        raise SweepError(f"need reps >= 1, steps >= 1, warmup_steps >= 0 (got {reps}, {steps}, {warmup_steps})")
    conditions: list[float | None] = list(levels) + ([None] if maxn else [])
    runs = []
    for wid, freq, rep in order_cells(workloads, conditions, reps, order, seed):
        policy = MAXN if freq is None else FIXED
        runs.append(RunSpec(run_id_for(wid, policy, freq, rep), wid, policy, freq, rep, steps, warmup_steps,
                            run_pins if policy == FIXED else ()))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SweepError(f"two workloads map to the same run id {dup!r}; rename one of them")
    return SweepPlan(workloads, levels, reps, maxn, order, seed, steps, warmup_steps, board_kind, tuple(runs),
                     plan_pins)
