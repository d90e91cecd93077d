"""Governors that need no model at decide time: MAXN (the baseline), FFG (one fixed level) and
the oracle (a table of each swept workload's best level).

Fitting FFG and building the oracle from a sweep are in :mod:`dvfslab.governors.fit`; this
module is what a board loads (no pandas, no numpy). FFG files are
``{"format": "dvfslab-fixed", "version": 1, "name": ..., "freq_mhz": f[, "freq_table_mhz": [...]]}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from dvfslab.core.files import atomic_write_json
from dvfslab.core.levels import snap_mhz
from dvfslab.governors.errors import GovernorError, read_model_json

FIXED_FORMAT = "dvfslab-fixed"
FIXED_VERSION = 1


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
    """FFG: one fixed level for every workload (snapped onto ``levels_mhz`` when given)."""

    def __init__(self, freq_mhz: float, name: str = "ffg", levels_mhz: Sequence[float] = ()):
        self.levels_mhz = tuple(float(f) for f in levels_mhz)
        self.freq_mhz = snap_mhz(freq_mhz, self.levels_mhz) if self.levels_mhz else float(freq_mhz)
        self.name = name

    def decide(self, workload: Mapping[str, Any]) -> float:
        return self.freq_mhz


class OracleGovernor:
    """The least-energy measured level of each workload: the upper bound on saving."""

    def __init__(self, optimal_freq_mhz: Mapping[str, float], name: str = "oracle"):
        self.optimal_freq_mhz = {str(k): float(v) for k, v in optimal_freq_mhz.items()}
        self.name = name

    def decide(self, workload: Mapping[str, Any]) -> float:
        wid = workload.get("workload_id")
        if wid not in self.optimal_freq_mhz:
            raise GovernorError(f"oracle: workload {wid!r} was not swept; "
                                "the oracle knows only measured workloads")
        return self.optimal_freq_mhz[wid]


def save_fixed(governor: FixedGovernor, path: str | os.PathLike) -> None:
    """Write an FFG level as ``{"format": "dvfslab-fixed", "version": 1, "freq_mhz": f, ...}``."""
    spec = {"format": FIXED_FORMAT, "version": FIXED_VERSION, "name": governor.name,
            "freq_mhz": governor.freq_mhz}
    if governor.levels_mhz:
        spec["freq_table_mhz"] = list(governor.levels_mhz)
    atomic_write_json(path, spec)


def load_fixed(path: str | os.PathLike) -> FixedGovernor:
    """Read an FFG file written by :func:`save_fixed`; errors name the file."""
    spec = read_model_json(path, "FFG file (models/ffg.json from notebook 05)",
                           "`dvfslab pipeline` writes it under <out>/models/")
    if not isinstance(spec, Mapping) or spec.get("format") != FIXED_FORMAT or "freq_mhz" not in spec:
        raise GovernorError(f"{path}: not a dvfslab FFG file "
                            f"(expected \"format\": \"{FIXED_FORMAT}\" and freq_mhz)")
    return FixedGovernor(float(spec["freq_mhz"]), name=str(spec.get("name", "ffg")),
                         levels_mhz=spec.get("freq_table_mhz") or ())
