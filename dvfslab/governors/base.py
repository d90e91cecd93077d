"""Frequency policies ("governors"): each is a small object with one ``decide`` method.

``decide(workload) -> freq_mhz | None`` takes a mapping with the workload's features (a row of
:func:`dvfslab.analysis.aggregate.feature_table`, or a dict a user builds: ``n_layers``, ``avg_seq_len``
...) and returns the GPU level to lock in MHz, or ``None`` for "leave the board's default
dynamic governor in charge" (MAXN). Governors are configured only through ``__init__``; the
ones that learn from a sweep have a ``fit``/``from_sweep`` class method that computes the
configuration and calls ``__init__``.

Trees (the paper's published one and the one learned here) share one JSON-able format, so a
learned governor can be saved and loaded without scikit-learn::

    {"format": "dvfslab-tree", "version": 1, "name": "mlg", "features": [...],
     "impute": {feature: value}, "nodes": [{"feature": f, "threshold": t, "left": i, "right": j}
     | {"freq_mhz": f}, ...], "freq_table_mhz": [...], "info": {...}}

Node 0 is the root; ``left`` is taken when ``value <= threshold``.

New governors register a builder in :data:`GOVERNORS` with :func:`register_governor`; the
builder receives a :class:`GovernorContext` (the sweep, the feature table, the training
workloads, options) and returns the governor. Evaluation is generic over this registry.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import Sweep
from dvfslab.data.contract import atomic_write_json
from dvfslab.hw.base import DvfsError

TREE_FORMAT = "dvfslab-tree"
TREE_VERSION = 1


class GovernorError(DvfsError):
    """A governor cannot decide (missing feature, unknown workload, bad tree file ...)."""


@runtime_checkable
class Governor(Protocol):
    """What every policy offers."""

    name: str

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        """The GPU level to lock (MHz), or ``None`` to leave the default dynamic governor."""


class MaxnGovernor:
    """MAXN (nvpmodel mode 0) with the board's dynamic GPU governor: the paper's baseline.

    Replaying it uses the dataset's baseline runs (MAXN, or the highest level when the
    dataset has no MAXN run).
    """

    def __init__(self, name: str = "maxn"):
        self.name = name

    def decide(self, workload: Mapping[str, Any]) -> None:
        return None


class FixedGovernor:
    """FFG: one fixed level for every workload."""

    def __init__(self, freq_mhz: float, name: str = "ffg"):
        self.freq_mhz = float(freq_mhz)
        self.name = name

    def decide(self, workload: Mapping[str, Any]) -> float:
        return self.freq_mhz

    @classmethod
    def fit(cls, sweep: Sweep, train_ids: Iterable[str], name: str = "ffg") -> FixedGovernor:
        """The level minimizing the mean over ``train_ids`` of E(w, f) / E_b(w), among the
        levels every training workload was measured at (docs/method.md)."""
        train_ids = list(train_ids)
        if not train_ids:
            raise GovernorError("FFG needs at least one training workload")
        common = set.intersection(*(set(sweep.curve(w)[0]) for w in train_ids))
        if not common:
            raise GovernorError("FFG: no GPU level was measured for every training workload")
        best, best_score = math.nan, math.inf
        for f in sorted(common):
            score = float(np.mean([sweep.at(w, f)[0] / sweep.baseline_of(w)[0] for w in train_ids]))
            if score < best_score:
                best, best_score = f, score
        return cls(best, name=name)


class OracleGovernor:
    """The least-energy measured level of each workload: the upper bound on saving."""

    def __init__(self, optimal_freq_mhz: Mapping[str, float], name: str = "oracle"):
        self.optimal_freq_mhz = {str(k): float(v) for k, v in optimal_freq_mhz.items()}
        self.name = name

    def decide(self, workload: Mapping[str, Any]) -> float:
        wid = workload.get("workload_id")
        if wid not in self.optimal_freq_mhz:
            raise GovernorError(f"oracle: workload {wid!r} was not swept; the oracle knows only measured workloads")
        return self.optimal_freq_mhz[wid]

    @classmethod
    def from_sweep(cls, sweep: Sweep, name: str = "oracle") -> OracleGovernor:
        return cls({w: sweep.oracle_freq(w) for w in sweep.workload_ids()}, name=name)


class TreeGovernor:
    """A decision tree in dvfslab's JSON tree format (see the module docstring)."""

    def __init__(self, tree: Mapping[str, Any], name: str | None = None, impute: Mapping[str, float] | None = None):
        check_tree(tree)
        self.tree = dict(tree)
        self.name = name or str(tree.get("name", "tree"))
        self.impute = {**tree.get("impute", {}), **(impute or {})}

    def _value(self, workload: Mapping[str, Any], feature: str) -> float:
        value = workload.get(feature)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if feature not in self.impute:
                raise GovernorError(f"{self.name}: feature {feature!r} is missing for workload "
                                    f"{workload.get('workload_id', '?')!r} and the tree has no fill-in value for it")
            return float(self.impute[feature])
        return float(value)

    def decide(self, workload: Mapping[str, Any]) -> float:
        nodes = self.tree["nodes"]
        node = nodes[0]
        while "freq_mhz" not in node:
            go_left = self._value(workload, node["feature"]) <= node["threshold"]
            node = nodes[node["left"] if go_left else node["right"]]
        return float(node["freq_mhz"])

    def describe(self) -> str:
        """The tree as indented if/else rules (like ``sklearn.tree.export_text``)."""
        lines: list[str] = []

        def walk(i: int, depth: int) -> None:
            node, pad = self.tree["nodes"][i], "|   " * depth
            if "freq_mhz" in node:
                lines.append(f"{pad}-> {node['freq_mhz']:g} MHz")
                return
            lines.append(f"{pad}if {node['feature']} <= {node['threshold']:g}:")
            walk(node["left"], depth + 1)
            lines.append(f"{pad}else ({node['feature']} > {node['threshold']:g}):")
            walk(node["right"], depth + 1)

        walk(0, 0)
        return "\n".join(lines)

    def save(self, path: str | os.PathLike) -> None:
        """Write the tree as JSON (atomically)."""
        atomic_write_json(path, {**self.tree, "name": self.name, "impute": self.impute})

    @classmethod
    def load(cls, path: str | os.PathLike, name: str | None = None) -> TreeGovernor:
        """Read a tree written by :meth:`save`; errors name the file and the problem."""
        tree = read_model_json(path, "tree file", "run notebook 03 (or `dvfslab pipeline`) to train one")
        try:
            return cls(tree, name=name)
        except GovernorError as err:
            raise GovernorError(f"{Path(path)}: {err}") from None


def read_model_json(path: str | os.PathLike, what: str, fix: str) -> Any:
    """A saved governor's JSON; a missing file or bad JSON is a :class:`GovernorError` naming
    the file, ``what`` it should have been and the ``fix``."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise GovernorError(f"{p}: {what} is missing — {fix}") from None
    except json.JSONDecodeError as err:
        raise GovernorError(f"{p}: not JSON (line {err.lineno}: {err.msg})") from None


def check_tree(tree: Mapping[str, Any]) -> None:
    """Raise :class:`GovernorError` unless ``tree`` is a well-formed dvfslab tree."""
    if not isinstance(tree, Mapping) or tree.get("format") != TREE_FORMAT:
        raise GovernorError(f"not a dvfslab tree (expected \"format\": \"{TREE_FORMAT}\")")
    if tree.get("version") != TREE_VERSION:
        raise GovernorError(f"unknown tree version {tree.get('version')!r}; this dvfslab reads {TREE_VERSION}")
    nodes = tree.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise GovernorError("tree has no nodes")
    for i, node in enumerate(nodes):
        if "freq_mhz" in node:
            continue
        if not {"feature", "threshold", "left", "right"} <= set(node):
            raise GovernorError(f"node {i} is neither a leaf (freq_mhz) nor a split (feature, threshold, left, right)")
        if not all(isinstance(node[k], int) and i < node[k] < len(nodes) for k in ("left", "right")):
            raise GovernorError(f"node {i}: children must be later node indices below {len(nodes)}")


def paper_tree(util_split: str = "long-seq") -> dict:
    """The tree published in the paper (MLG), as printed; thresholds in layers, tokens, %.

    The paper prints: layers <= 7 -> (avg seq <= 32.5 -> 510 MHz, else 612 MHz); layers > 7 ->
    (avg seq <= 53.0 -> 714 MHz, else 816 MHz), and "a secondary split on GPU utilization
    <= 22.0 % -> 1020 MHz" without saying where it sits. Our readings:

    * ``"long-seq"`` (default): it refines the deepest, largest-workload leaf — layers > 7 and
      avg seq > 53 -> (GPU util <= 22 % -> 1020 MHz, else 816 MHz). Every workload above 22 %
      follows the four printed paths unchanged, and the one leaf that gets a higher level is
      the branch that already holds the highest printed level (816 MHz).
    * ``"root"``: it is checked first — GPU util <= 22 % -> 1020 MHz, else the printed tree.
    """
    leaf = [{"freq_mhz": f} for f in (510.0, 612.0, 714.0, 816.0, 1020.0)]
    if util_split == "long-seq":
        nodes = [{"feature": "n_layers", "threshold": 7.0, "left": 1, "right": 4},
                 {"feature": "avg_seq_len", "threshold": 32.5, "left": 2, "right": 3}, leaf[0], leaf[1],
                 {"feature": "avg_seq_len", "threshold": 53.0, "left": 5, "right": 6}, leaf[2],
                 {"feature": "gpu_util_pct", "threshold": 22.0, "left": 7, "right": 8}, leaf[4], leaf[3]]
    elif util_split == "root":
        nodes = [{"feature": "gpu_util_pct", "threshold": 22.0, "left": 1, "right": 2}, leaf[4],
                 {"feature": "n_layers", "threshold": 7.0, "left": 3, "right": 6},
                 {"feature": "avg_seq_len", "threshold": 32.5, "left": 4, "right": 5}, leaf[0], leaf[1],
                 {"feature": "avg_seq_len", "threshold": 53.0, "left": 7, "right": 8}, leaf[2], leaf[3]]
    else:
        raise GovernorError(f"unknown reading {util_split!r} of the paper's utilization split; use 'long-seq' or 'root'")
    return {"format": TREE_FORMAT, "version": TREE_VERSION, "name": "mlg-paper",
            "features": ["n_layers", "avg_seq_len", "gpu_util_pct"], "impute": {}, "nodes": nodes,
            "freq_table_mhz": [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5],
            "info": {"source": "Park et al. 2026, published tree", "util_split": util_split}}


def tree_from_sklearn(estimator: Any, features: Sequence[str], freq_table_mhz: Sequence[float],
                      impute: Mapping[str, float] | None = None, name: str = "mlg",
                      info: Mapping[str, Any] | None = None) -> dict:
    """Convert a fitted ``DecisionTreeClassifier`` whose classes are level indices into a tree dict."""
    t = estimator.tree_
    table = sorted(float(f) for f in freq_table_mhz)
    nodes: list[dict] = []
    for i in range(t.node_count):
        if t.children_left[i] == -1:
            cls = estimator.classes_[int(np.argmax(t.value[i][0]))]
            nodes.append({"freq_mhz": table[int(cls)], "n": int(t.n_node_samples[i])})
        else:
            nodes.append({"feature": features[int(t.feature[i])], "threshold": float(t.threshold[i]),
                          "left": int(t.children_left[i]), "right": int(t.children_right[i])})
    return {"format": TREE_FORMAT, "version": TREE_VERSION, "name": name, "features": list(features),
            "impute": {k: float(v) for k, v in (impute or {}).items()}, "nodes": prune(nodes),
            "freq_table_mhz": table, "info": dict(info or {})}


def prune(nodes: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Collapse splits whose two sides decide the same level (sklearn keeps them); renumber.

    Decisions are unchanged; the tree reads (and draws) as the rule it really is.
    """
    out: list[dict] = []

    def build(i: int) -> dict:
        node = dict(nodes[i])
        if "freq_mhz" in node:
            return node
        left, right = build(node["left"]), build(node["right"])
        if "freq_mhz" in left and "freq_mhz" in right and left["freq_mhz"] == right["freq_mhz"]:
            return {"freq_mhz": left["freq_mhz"], "n": left.get("n", 0) + right.get("n", 0)}
        return {**node, "left": left, "right": right}

    def flatten(node: dict) -> int:
        idx = len(out)
        out.append(node)
        if "freq_mhz" not in node:
            left, right = node["left"], node["right"]
            node["left"] = flatten(left)
            node["right"] = flatten(right)
        return idx

    flatten(build(0))
    return out


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


@dataclass
class GovernorContext:
    """What a builder may use: the sweep, features, training workloads and options."""

    sweep: Sweep
    features: pd.DataFrame
    train_ids: list[str]
    trees: dict[str, dict] = field(default_factory=dict)   # name -> tree dict (e.g. "mlg")
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"paper_util_split": "root"}

    def train_medians(self, columns: Iterable[str]) -> dict[str, float]:
        """Median of each column over the training workloads (fill-in for missing features)."""
        rows = self.features[self.features["workload_id"].isin(self.train_ids)]
        return {c: float(rows[c].median()) for c in columns if c in rows and rows[c].notna().any()}


Builder = Callable[[GovernorContext], Governor]
GOVERNORS: dict[str, Builder] = {}


def register_governor(name: str) -> Callable[[Builder], Builder]:
    """Decorator: add a builder to :data:`GOVERNORS` under ``name``."""
    def deco(builder: Builder) -> Builder:
        GOVERNORS[name] = builder
        return builder
    return deco


# modules that register more governors (curve, online); imported on first use (they import this one)
EXTENSIONS: tuple[str, ...] = ("dvfslab.governors.curve", "dvfslab.governors.online")


def build_governors(names: Iterable[str], ctx: GovernorContext) -> dict[str, Governor]:
    """Build the named governors (in order) from the registry."""
    import importlib

    for module in EXTENSIONS:
        importlib.import_module(module)
    out = {}
    for name in names:
        if name not in GOVERNORS:
            raise GovernorError(f"unknown governor {name!r}; known: {', '.join(GOVERNORS)}")
        out[name] = GOVERNORS[name](ctx)
    return out


@register_governor("maxn")
def _build_maxn(ctx: GovernorContext) -> Governor:
    return MaxnGovernor()


@register_governor("ffg")
def _build_ffg(ctx: GovernorContext) -> Governor:
    return FixedGovernor.fit(ctx.sweep, ctx.train_ids)


@register_governor("mlg-paper")
def _build_paper(ctx: GovernorContext) -> Governor:
    tree = paper_tree(ctx.options.get("paper_util_split", "long-seq"))
    return TreeGovernor(tree, name="mlg-paper", impute=ctx.train_medians(tree["features"]))


@register_governor("mlg")
def _build_mlg(ctx: GovernorContext) -> Governor:
    if "mlg" not in ctx.trees:
        raise GovernorError("mlg: no learned tree in the context — run notebook 03 (models/mlg.json) first")
    return TreeGovernor(ctx.trees["mlg"], name="mlg")


@register_governor("oracle")
def _build_oracle(ctx: GovernorContext) -> Governor:
    return OracleGovernor.from_sweep(ctx.sweep)
