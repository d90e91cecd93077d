"""What a sweep runs, and in which order: :class:`RunSpec`, :class:`SweepPlan`, :func:`make_plan`.

A plan is workloads × levels × repetitions (+ MAXN baseline runs). Run ids depend only on the
cell (workload, policy, level, repetition), never on the order or the seed, so a resumed sweep
finds exactly the runs it still has to do. The orders are described in :func:`order_cells`.

A plan also says what happens to the clocks besides the GPU's during its fixed runs
(``pins``: the memory clock and the CPU clusters, each ``"max"``, ``"none"`` or MHz; by default
both at the power mode's maximum, see docs/sweep.md); MAXN runs leave every clock to the board.

A **joint** plan (issue #32) sets several clocks per run: ``knob_tables`` gives each clock's
table (``{"gpu": [...], "emc": [...], "cpu": [...]}``, the GPU's required) and ``design`` which of
their product it runs (:func:`design_settings`: the full grid, or ``n_settings`` of it drawn at
random or by a Latin hypercube over the tables' indices, seeded by the plan's ``seed``). Its
settings are the conditions the orders permute, as the levels of a GPU-only plan are (``--knob
gpu=...`` alone is a GPU-only plan of the levels drawn: its dataset keeps MHz levels); a run sets
the GPU through its lock and the other clocks of its setting through its pins, so resume, the
fleet and import are unchanged (the plan's runs are just more runs).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dvfslab.core.errors import SweepError
from dvfslab.core.levels import format_mhz
from dvfslab.data.knobs import JOINT_KNOBS, format_setting

FIXED, MAXN = "fixed", "maxn"
#: which settings of a joint plan's product are run (:func:`design_settings`)
DESIGNS = ("full", "random", "lhs")
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
    #: a joint plan's fixed run: its setting as (runs.csv column, MHz) pairs; empty otherwise
    setting: tuple[tuple[str, float], ...] = ()

    @property
    def level_label(self) -> str:
        """``'612 MHz'``, ``'GPU 612 MHz × EMC 2133 MHz'`` or ``'MAXN'`` (for progress bars and logs)."""
        if self.policy == MAXN:
            return "MAXN"
        if self.setting:
            return format_setting([k for k, _ in self.setting], [v for _, v in self.setting])
        return f"{format_mhz(self.freq_mhz)} MHz"


def run_id_for(workload_id: str, policy: str, freq_mhz: float | None, rep: int) -> str:
    """Deterministic, file-name-safe run id: ``bert-base--sst2__f612__r0``, ``..__maxn__r1``."""
    slug = _slug(workload_id)
    cond = MAXN if policy == MAXN else f"f{format_mhz(freq_mhz)}"
    return f"{slug}__{cond}__r{int(rep)}"


def _slug(workload_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", workload_id.replace("/", "--"))


def joint_run_id(workload_id: str, setting: Sequence[tuple[str, float]], rep: int) -> str:
    """A joint run's id: ``bert-base--sst2__f612_emc2133_cpu1728__r0`` (the GPU first)."""
    short = {col: name for name, col in JOINT_KNOBS.items()}
    parts = [("f" if col == JOINT_KNOBS["gpu"] else short[col]) + format_mhz(v) for col, v in setting]
    return f"{_slug(workload_id)}__{'_'.join(parts)}__r{int(rep)}"


def normalize_tables(tables: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, ...]]:
    """``--knob`` tables by short name, in the canonical order gpu, emc, cpu, each sorted and
    distinct; the GPU's is required (it is the run's lock)."""
    unknown = sorted(set(tables) - set(JOINT_KNOBS))
    if unknown:
        raise SweepError(f"--knob {unknown[0]}: unknown clock; known: {', '.join(JOINT_KNOBS)}")
    out = {name: tuple(sorted(dict.fromkeys(float(v) for v in tables[name]))) for name in JOINT_KNOBS if name in tables}
    if "gpu" not in out:
        raise SweepError("a joint sweep needs --knob gpu=... (the GPU is locked every run; give one level to hold it)")
    empty = [n for n, t in out.items() if not t or any(v <= 0 for v in t)]
    if empty:
        raise SweepError(f"--knob {empty[0]}: give one or more positive MHz values")
    return out


def design_settings(tables: Mapping[str, Sequence[float]], design: str = "full", n_settings: int | None = None,
                    seed: int = 0) -> list[tuple[float, ...]]:
    """The settings of a joint plan, sorted (lexicographically, in the tables' order).

    * ``full``: the product of the tables (``n_settings`` must be None or its size).
    * ``random``: ``n_settings`` distinct settings of the product, drawn uniformly without
      replacement (``random.Random`` seeded by ``seed``).
    * ``lhs``: a Latin hypercube of ``n_settings`` rows over the tables' *indices*: for a table of
      ``L`` levels the column holds the indices ``floor(i L / N)``, ``i = 0..N-1`` (each index
      ``floor(N/L)`` or ``ceil(N/L)`` times; ``N/L`` each when ``L`` divides ``N``; ``N`` indices
      spread over the table when ``N < L``), permuted at random per knob; permutations that would
      repeat a setting are drawn again (at most 1000 times, then refused).
    """
    names = list(tables)
    levels = [list(tables[n]) for n in names]
    total = math.prod(len(t) for t in levels)
    if design not in DESIGNS:
        raise SweepError(f"unknown design {design!r}; choose one of: {', '.join(DESIGNS)}")
    if design == "full":
        if n_settings is not None and n_settings != total:
            raise SweepError(f"--settings {n_settings} with the full design: the grid has {total} settings; "
                             "pass --design random or lhs to run fewer")
        return sorted(itertools.product(*levels))
    if n_settings is None or not 1 <= n_settings <= total:
        raise SweepError(f"--design {design} needs --settings N with 1 <= N <= {total} (the grid's size)")
    rng = random.Random(f"design-{design}-{seed}")
    if design == "random":
        picks = rng.sample(range(total), n_settings)
        return sorted(tuple(levels[k][i] for k, i in enumerate(_unravel(p, [len(t) for t in levels]))) for p in picks)
    columns = [[(i * len(t)) // n_settings for i in range(n_settings)] for t in levels]
    for _ in range(1000):
        for col in columns:
            rng.shuffle(col)
        rows = {tuple(levels[k][columns[k][i]] for k in range(len(levels))) for i in range(n_settings)}
        if len(rows) == n_settings:
            return sorted(rows)
    raise SweepError(f"--design lhs --settings {n_settings}: no Latin hypercube of distinct settings found in "
                     "1000 draws; pick another N or --design random")


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    out = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        out.append(i)
    return out[::-1]


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
    #: a joint plan's clock tables by short name (gpu, emc, cpu); empty for a GPU-only plan
    knob_tables: tuple[tuple[str, tuple[float, ...]], ...] = ()
    design: str = "full"
    #: a joint plan's settings (tuples in the order of ``knob_tables``), sorted
    joint_settings: tuple[tuple[float, ...], ...] = ()

    @property
    def joint(self) -> bool:
        return bool(self.knob_tables)

    def joint_meta(self) -> dict:
        """What a joint plan's dataset lists in meta.json (``knobs``: runs.csv columns, ``settings``);
        empty for a GPU-only plan."""
        if not self.joint:
            return {}
        return {"knobs": [JOINT_KNOBS[n] for n, _ in self.knob_tables],
                "settings": [list(s) for s in self.joint_settings]}

    def __len__(self) -> int:
        return len(self.runs)

    def settings(self) -> dict:
        """The plan without its run list (what ``plan.json`` and ``meta.json`` record)."""
        d = asdict(self)
        d.pop("runs")
        if d["board_kind"] is None:  # single-board sweeps: plan.json as before fleets existed
            d.pop("board_kind")
        d["workloads"], d["levels_mhz"] = list(self.workloads), list(self.levels_mhz)
        d["pins"] = {n: v for n, v in self.pins if n not in dict(self.knob_tables)}  # a knob is set per run
        d.pop("knob_tables"), d.pop("design"), d.pop("joint_settings")
        if self.joint:  # a GPU-only plan.json is as before joint sweeps existed
            d["knobs"] = {n: list(t) for n, t in self.knob_tables}
            d["design"], d["n_settings"] = self.design, len(self.joint_settings)
            d["settings"] = [list(s) for s in self.joint_settings]
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
        joint = {"knob_tables": obj["knobs"], "design": obj.get("design", "full"),
                 "n_settings": obj.get("n_settings")} if obj.get("knobs") else {}
        plan = make_plan(obj["workloads"], obj["levels_mhz"], **{k: obj[k] for k in keys},
                         board_kind=obj.get("board_kind"), pins=obj.get("pins", dict(LEGACY_PINS)), **joint)
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
              pins: Mapping[str, float | str | None] | None = None,
              knob_tables: Mapping[str, Sequence[float]] | None = None, design: str = "full",
              n_settings: int | None = None) -> SweepPlan:
    """Plan a sweep; run ids depend only on (workload, policy, level, rep), so resume is exact.

    ``board_kind``: for a fleet sweep, the kind of board it runs on (:func:`dvfslab.sweep.board.kind_id`).
    ``pins``: the other clocks of the fixed runs (:func:`normalize_pins`; default: both at the
    power mode's maximum); every fixed run carries them, MAXN runs none.
    ``knob_tables`` (a joint plan: module doc): each clock's table by short name; then
    ``levels_mhz`` is ignored (the GPU's levels are those of the settings drawn), ``design`` and
    ``n_settings`` say which settings run (:func:`design_settings`, seeded by ``seed``), and a
    clock that is a knob is set by each run's setting, not by ``pins``.
    """
    plan_pins = normalize_pins(pins)
    tables = normalize_tables(knob_tables) if knob_tables else {}
    clash = [n for n in tables if n != "gpu" and dict(pins or {}).get(n) is not None]
    if clash:
        raise SweepError(f"--{clash[0]} and --knob {clash[0]}=... both set the {clash[0]} clock: the knob sets it per "
                         f"run; drop --{clash[0]}")
    run_pins = tuple((n, v) for n, v in plan_pins if v != "none" and n not in tables)
    workloads = tuple(dict.fromkeys(str(w) for w in workloads))
    settings = tuple(design_settings(tables, design, n_settings, seed)) if tables else ()
    if tables:
        levels_mhz = [s[0] for s in settings]
    if list(tables) == ["gpu"]:  # one knob: the GPU-only plan of the drawn levels (its levels in MHz)
        tables, settings = {}, ()
    levels = tuple(sorted(dict.fromkeys(float(f) for f in levels_mhz)))
    if not workloads:
        raise SweepError("the plan has no workloads; pass --workloads")
    if not levels and not maxn:
        raise SweepError("the plan has no levels and no MAXN runs; pass --freqs or keep MAXN")
    if reps < 1 or steps < 1 or warmup_steps < 0:
        raise SweepError(f"need reps >= 1, steps >= 1, warmup_steps >= 0 (got {reps}, {steps}, {warmup_steps})")
    conditions: list = list(settings or levels) + ([None] if maxn else [])
    cols = [JOINT_KNOBS[n] for n in tables]
    runs = []
    for wid, cond, rep in order_cells(workloads, conditions, reps, order, seed):
        if tables and cond is not None:  # a joint setting: the GPU locked, the other knobs pinned
            setting = tuple(zip(cols, cond, strict=True))
            pins_here = run_pins + tuple((n, v) for n, v in zip(tables, cond, strict=True) if n != "gpu")
            runs.append(RunSpec(joint_run_id(wid, setting, rep), wid, FIXED, cond[0], rep, steps, warmup_steps,
                                pins_here, setting))
            continue
        policy = MAXN if cond is None else FIXED
        runs.append(RunSpec(run_id_for(wid, policy, cond, rep), wid, policy, cond, rep, steps, warmup_steps,
                            run_pins if policy == FIXED else ()))
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SweepError(f"two workloads map to the same run id {dup!r}; rename one of them")
    return SweepPlan(workloads, levels, reps, maxn, order, seed, steps, warmup_steps, board_kind, tuple(runs),
                     plan_pins, tuple((n, t) for n, t in tables.items()), design if tables else "full", settings)
