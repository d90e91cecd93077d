"""Decision-tree governors: the paper's published tree (``mlg-paper``) and learned ones (``mlg``).

Both share one JSON format, so a learned tree is saved and loaded without scikit-learn::

    {"format": "dvfslab-tree", "version": 1, "name": "mlg", "features": [...],
     "impute": {feature: value}, "nodes": [{"feature": f, "threshold": t, "left": i, "right": j}
     | {"freq_mhz": f}, ...], "freq_table_mhz": [...], "info": {...}}

Node 0 is the root; ``left`` is taken when ``value <= threshold``. A leaf's level is mapped
onto the tree's ``freq_table_mhz`` with :func:`dvfslab.core.levels.snap_mhz` (ties go to the
higher level), the rule the clocks and the replay use, so a decision is run and evaluated at
the same level. Nothing here imports pandas or numpy: this is what a board loads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.files import atomic_write_json
from dvfslab.core.levels import snap_mhz
from dvfslab.governors.errors import GovernorError, check_format, read_model_json

TREE_FORMAT = "dvfslab-tree"
TREE_VERSION = 1
#: the Orin's GPU levels (MHz), the table the paper's tree was published for
from dvfslab.core.boards import ORIN_LEVELS_MHZ  # noqa: E402  (one board table: dvfslab.core.boards)


class TreeGovernor:
    """A decision tree in dvfslab's JSON tree format (see the module docstring)."""

    def __init__(self, tree: Mapping[str, Any], name: str | None = None,
                 impute: Mapping[str, float] | None = None):
        check_tree(tree)
        self.tree = dict(tree)
        self.name = name or str(tree.get("name", "tree"))
        self.impute = {**tree.get("impute", {}), **(impute or {})}
        self.levels_mhz = tuple(float(f) for f in tree.get("freq_table_mhz") or ())

    def _value(self, workload: Mapping[str, Any], feature: str) -> float:
        value = workload.get(feature)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if feature not in self.impute:
                raise GovernorError(f"{self.name}: feature {feature!r} is missing for workload "
                                    f"{workload.get('workload_id', '?')!r} and the tree has no "
                                    "fill-in value for it")
            return float(self.impute[feature])
        return float(value)

    def decide(self, workload: Mapping[str, Any]) -> float:
        nodes = self.tree["nodes"]
        node = nodes[0]
        while "freq_mhz" not in node:
            go_left = self._value(workload, node["feature"]) <= node["threshold"]
            node = nodes[node["left"] if go_left else node["right"]]
        leaf_mhz = float(node["freq_mhz"])
        return snap_mhz(leaf_mhz, self.levels_mhz) if self.levels_mhz else leaf_mhz

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
        tree = read_model_json(path, "tree file",
                               "run notebook 03 (or `dvfslab pipeline`) to train one")
        try:
            return cls(tree, name=name)
        except GovernorError as err:
            raise GovernorError(f"{Path(path)}: {err}") from None


def check_tree(tree: Mapping[str, Any]) -> None:
    """Raise :class:`GovernorError` unless ``tree`` is a well-formed dvfslab tree."""
    check_format(tree, TREE_FORMAT, TREE_VERSION, "tree")
    nodes = tree.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise GovernorError("tree has no nodes")
    for i, node in enumerate(nodes):
        if "freq_mhz" in node:
            continue
        if not {"feature", "threshold", "left", "right"} <= set(node):
            raise GovernorError(f"node {i} is neither a leaf (freq_mhz) nor a split "
                                "(feature, threshold, left, right)")
        if not all(isinstance(node[k], int) and i < node[k] < len(nodes) for k in ("left", "right")):
            raise GovernorError(f"node {i}: children must be later node indices below {len(nodes)}")


def paper_tree(util_split: str = "long-seq") -> dict:
    """The tree published in the paper (MLG), as printed; thresholds in layers, tokens, %.

    The paper prints: layers <= 7 -> (avg seq <= 32.5 -> 510 MHz, else 612 MHz); layers > 7 ->
    (avg seq <= 53.0 -> 714 MHz, else 816 MHz), and "a secondary split on GPU utilization
    <= 22.0 % -> 1020 MHz" without saying where it sits (docs/calibration.md). Readings:

    * ``"long-seq"`` (default): it refines the deepest, largest-workload leaf — layers > 7 and
      avg seq > 53 -> (GPU util <= 22 % -> 1020 MHz, else 816 MHz);
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
        raise GovernorError(f"unknown reading {util_split!r} of the paper's utilization split; "
                            "use 'long-seq' or 'root'")
    return {"format": TREE_FORMAT, "version": TREE_VERSION, "name": "mlg-paper",
            "features": ["n_layers", "avg_seq_len", "gpu_util_pct"], "impute": {}, "nodes": nodes,
            "freq_table_mhz": list(ORIN_LEVELS_MHZ),
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
            cls = estimator.classes_[int(t.value[i][0].argmax())]
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
