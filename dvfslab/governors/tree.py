"""Decision-tree governors: the paper's published tree (``mlg-paper``) and learned ones (``mlg``).

Both hold one tree (``tree_``, saved in the governor's file)::

    {"features": [...], "impute": {feature: value}, "level_table": [...], "info": {...},
     "nodes": [{"feature": f, "threshold": t, "left": i, "right": j} | {"level": l, "n": k}, ...]}

Node 0 is the root; ``left`` is taken when ``value <= threshold``. A leaf's level is mapped onto
the tree's ``level_table`` with :func:`dvfslab.core.levels.snap_mhz` (ties go to the higher
level), the rule the clocks and the replay use, so a decision is run and evaluated at the same
level. Nothing here imports pandas, numpy or scikit-learn: this is what a board loads; the
fitting is in :mod:`dvfslab.governors.treefit`, imported by :meth:`TreeGovernor.fit`.

**Complexity**: a decision walks the tree, O(depth), whatever the number of levels ``L``; the
fit is scikit-learn's over the training workloads (O(L) classes at most).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvfslab.core.levels import snap_mhz
from dvfslab.governors.base import GovernorTags, LevelGovernor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import LEAST_ENERGY, Objective

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData

#: the Orin's GPU levels (MHz), the table the paper's tree was published for
from dvfslab.core.boards import ORIN_LEVELS_MHZ  # noqa: E402  (one board table: dvfslab.core.boards)


class TreeGovernor(LevelGovernor):
    """``mlg``: a decision tree learned on the training workloads (notebook 03 chooses it).

    ``estimator``: an unfitted scikit-learn classifier pipeline whose last step is a
    ``DecisionTreeClassifier`` (notebook 03's chosen one), fitted on ``features`` to predict the
    optimal level's index in the level table; its imputer's medians become the tree's fill-in
    values. ``info``: free-form notes saved with the tree (the chosen model, the dataset ...).

    When nothing can be learned from the training workloads (one of them, one level, one
    optimal level, or none of ``features`` varies: :func:`dvfslab.analysis.features.cannot_learn`)
    the tree is one leaf at FFG's level, and its ``info`` says ``fallback: "ffg"`` and
    ``cannot_learn``: why (:func:`dvfslab.governors.treefit.ffg_tree`).
    """

    name = "mlg"
    summary = "a decision tree on the workload features, learned on the training sweep (notebook 03)"
    tags = GovernorTags(saves=("tree_",))

    def __init__(self, estimator: Any = None, features: Sequence[str] = (), info: Mapping[str, Any] | None = None,
                 objective: Objective = LEAST_ENERGY):
        self.estimator = estimator
        self.features = features
        self.info = info
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        from dvfslab.governors.treefit import fit_tree

        data = self._require(data)
        if self.estimator is None:
            raise GovernorError(f"{self.name}: needs an estimator and the feature columns to fit "
                                "(notebook 03 chooses them; or load its models/mlg.json)")
        self.tree_ = fit_tree(self.estimator, data, self.features, self.info)

    def check_state(self) -> None:
        check_tree(self._fitted("tree_"))

    def own_levels(self) -> list[float]:
        return [float(f) for f in self._fitted("tree_").get("level_table") or ()]

    def _value(self, workload: Mapping[str, Any], feature: str) -> float:
        value = workload.get(feature)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            impute = self.tree_.get("impute", {})
            if feature not in impute:
                raise GovernorError(f"{self.name}: feature {feature!r} is missing for workload "
                                    f"{workload.get('workload_id', '?')!r} and the tree has no "
                                    "fill-in value for it")
            return float(impute[feature])
        return float(value)

    def level_for(self, workload: Mapping[str, Any]) -> float:
        nodes = self._fitted("tree_")["nodes"]
        node = nodes[0]
        while "level" not in node:
            go_left = self._value(workload, node["feature"]) <= node["threshold"]
            node = nodes[node["left"] if go_left else node["right"]]
        table = self.own_levels()
        return snap_mhz(float(node["level"]), table) if table else float(node["level"])

    def describe(self, unit: str = "") -> str:
        """The tree as indented if/else rules (like ``sklearn.tree.export_text``)."""
        lines: list[str] = []
        nodes = self._fitted("tree_")["nodes"]

        def walk(i: int, depth: int) -> None:
            node, pad = nodes[i], "|   " * depth
            if "level" in node:
                lines.append(f"{pad}-> {node['level']:g}{' ' + unit if unit else ''}")
                return
            lines.append(f"{pad}if {node['feature']} <= {node['threshold']:g}:")
            walk(node["left"], depth + 1)
            lines.append(f"{pad}else ({node['feature']} > {node['threshold']:g}):")
            walk(node["right"], depth + 1)

        walk(0, 0)
        return "\n".join(lines)


class PaperTreeGovernor(TreeGovernor):
    """``mlg-paper``: the tree published in the paper, as printed (:func:`paper_tree`); fitting
    only fills in missing features with the training medians. It answers GPU clocks (MHz)."""

    name = "mlg-paper"
    summary = "the paper's published tree, as printed (layers, avg seq len, GPU util -> MHz)"
    tags = GovernorTags(needs_training=False, knobs=("gpu_freq_mhz",), saves=("util_split", "tree_"))

    def __init__(self, util_split: str = "long-seq", objective: Objective = LEAST_ENERGY):
        self.util_split = util_split
        self.objective = objective

    def _fit(self, data: TrainingData | None) -> None:
        tree = paper_tree(self.util_split)
        tree["impute"] = data.train_medians(tree["features"]) if data is not None else {}
        self.tree_ = tree


def check_tree(tree: Mapping[str, Any]) -> None:
    """Raise :class:`GovernorError` unless ``tree`` is a well-formed tree (module doc)."""
    nodes = tree.get("nodes") if isinstance(tree, Mapping) else None
    if not isinstance(nodes, list) or not nodes:
        raise GovernorError("tree has no nodes")
    for i, node in enumerate(nodes):
        if "level" in node:
            continue
        if not {"feature", "threshold", "left", "right"} <= set(node):
            raise GovernorError(f"node {i} is neither a leaf (level) nor a split "
                                "(feature, threshold, left, right)")
        if not all(isinstance(node[k], int) and i < node[k] < len(nodes) for k in ("left", "right")):
            raise GovernorError(f"node {i}: children must be later node indices below {len(nodes)}")


def paper_tree(util_split: str = "long-seq") -> dict:
    """The tree published in the paper (MLG), as printed; thresholds in layers, tokens, %; levels in MHz.

    The paper prints: layers <= 7 -> (avg seq <= 32.5 -> 510 MHz, else 612 MHz); layers > 7 ->
    (avg seq <= 53.0 -> 714 MHz, else 816 MHz), and "a secondary split on GPU utilization
    <= 22.0 % -> 1020 MHz" without saying where it sits (docs/calibration.md). Readings:

    * ``"long-seq"`` (default): it refines the deepest, largest-workload leaf — layers > 7 and
      avg seq > 53 -> (GPU util <= 22 % -> 1020 MHz, else 816 MHz);
    * ``"root"``: it is checked first — GPU util <= 22 % -> 1020 MHz, else the printed tree.
    """
    leaf = [{"level": f} for f in (510.0, 612.0, 714.0, 816.0, 1020.0)]
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
    return {"features": ["n_layers", "avg_seq_len", "gpu_util_pct"], "impute": {}, "nodes": nodes,
            "level_table": list(ORIN_LEVELS_MHZ),
            "info": {"source": "Park et al. 2026, published tree", "util_split": util_split}}
