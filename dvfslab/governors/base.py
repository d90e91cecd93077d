"""Frequency policies ("governors"): the protocol every policy offers, and the registry.

``decide(workload) -> freq_mhz | None`` takes a mapping with the workload's features (a row of
:func:`dvfslab.analysis.aggregate.feature_table`, or a dict a user builds: ``n_layers``,
``avg_seq_len`` ...) and returns the GPU level to lock in MHz, or ``None`` for "leave the
board's default dynamic governor in charge" (MAXN). Governors are configured only through
``__init__``; the ones that learn from a sweep are built by functions in
:mod:`dvfslab.governors.fit` / :mod:`dvfslab.governors.curvefit`.

New governors register a builder in :data:`GOVERNORS` with :func:`register_governor`; the
builder receives a :class:`GovernorContext` (the sweep, the feature table, the training
workloads, options) and returns the governor. Evaluation is generic over this registry.

This module imports neither pandas nor the analysis room: the context only *holds* a sweep
and a feature table. The builders live in the fitting modules, imported by
:func:`build_governors` on first use.

``TreeGovernor``, ``paper_tree`` and ``tree_from_sklearn`` are defined in
:mod:`dvfslab.governors.tree`; they are re-exported here for callers of the old path.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    import pandas as pd

    from dvfslab.analysis.aggregate import Sweep


@runtime_checkable
class Governor(Protocol):
    """What every policy offers."""

    name: str

    def decide(self, workload: Mapping[str, Any]) -> float | None:
        """The GPU level to lock (MHz), or ``None`` to leave the default dynamic governor."""


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

#: modules whose import registers the builders (they import this one); loaded on first use
BUILDER_MODULES: tuple[str, ...] = ("dvfslab.governors.fit", "dvfslab.governors.curvefit",
                                    "dvfslab.governors.online")


def register_governor(name: str) -> Callable[[Builder], Builder]:
    """Decorator: add a builder to :data:`GOVERNORS` under ``name``."""
    def deco(builder: Builder) -> Builder:
        GOVERNORS[name] = builder
        return builder
    return deco


def build_governors(names: Iterable[str], ctx: GovernorContext) -> dict[str, Governor]:
    """Build the named governors (in order) from the registry."""
    for module in BUILDER_MODULES:
        importlib.import_module(module)
    out = {}
    for name in names:
        if name not in GOVERNORS:
            raise GovernorError(f"unknown governor {name!r}; known: {', '.join(GOVERNORS)}")
        out[name] = GOVERNORS[name](ctx)
    return out
