"""Saving and loading any governor: one JSON format, one function pair.

A saved governor is::

    {"format": "dvfslab-governor", "version": 2, "policy": "mlg", "knob": "gpu_freq_mhz",
     "params": {...}, "state": {...}}

``policy`` is its registry name; ``knob`` what its levels are (``gpu_freq_mhz``: MHz,
``power_limit_w``: W); ``params`` and ``state`` are what the governor declares it saves
(``tags.saves``: constructor parameters, and fitted attributes without their trailing ``_``).
Loading imports only the policy's own module: ``dvfslab govern`` reads a tree, FFG or curve
model without pandas, numpy or scikit-learn.

Files of an older dvfslab (``dvfslab-tree``, ``-curve``, ``-fixed``, ``-profiled``, version 1:
their levels were called ``freq_mhz``) are refused with how to regenerate them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dvfslab.core.files import atomic_write_json, jsonable
from dvfslab.data.knobs import KNOBS
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError, read_model_json
from dvfslab.governors.registry import governor_class

FORMAT = "dvfslab-governor"
VERSION = 2
#: the per-governor formats of dvfslab before version 2 (read only to say how to regenerate them)
OLD_FORMATS = ("dvfslab-tree", "dvfslab-curve", "dvfslab-fixed", "dvfslab-profiled")
REGENERATE = "`dvfslab pipeline --data DATASET --out DIR` writes DIR/models/*.json in the current format"


def governor_spec(governor: Governor) -> dict[str, Any]:
    """The JSON-ready dict of a fitted governor (module doc)."""
    params, state = {}, {}
    for key in governor.tags.saves:
        if key.endswith("_"):
            state[key[:-1]] = governor._fitted(key)
        else:
            params[key] = getattr(governor, key)
    return {"format": FORMAT, "version": VERSION, "policy": governor.name, "knob": governor._fitted("knob_"),
            "params": jsonable(params), "state": jsonable(state)}


def save_governor(governor: Governor, path: str | os.PathLike) -> None:
    """Write a fitted governor (atomically)."""
    if not governor.tags.saves:
        raise GovernorError(f"{governor.name}: has nothing to save (it is built, not learned: "
                            f"registry name {governor.name!r})")
    atomic_write_json(path, governor_spec(governor))


def governor_from_spec(spec: Any, policy: str | None = None) -> Governor:
    """The governor a :func:`governor_spec` dict describes (``policy``: the one expected)."""
    if isinstance(spec, Mapping) and spec.get("format") in OLD_FORMATS:
        raise GovernorError(f"a {spec['format']} file of an older dvfslab (version {spec.get('version')!r}, levels "
                            f"named freq_mhz); regenerate it: {REGENERATE}")
    if not isinstance(spec, Mapping) or spec.get("format") != FORMAT:
        raise GovernorError(f"not a dvfslab governor (expected \"format\": \"{FORMAT}\")")
    if spec.get("version") != VERSION:
        raise GovernorError(f"unknown governor file version {spec.get('version')!r}; this dvfslab reads {VERSION}")
    name = spec.get("policy")
    if policy is not None and name != policy:
        raise GovernorError(f"holds a {name!r} governor, not {policy!r}")
    cls = governor_class(str(name))
    if spec.get("knob") not in KNOBS:
        raise GovernorError(f"unknown knob {spec.get('knob')!r}; known: {', '.join(KNOBS)}")
    saved = {k.rstrip("_") for k in cls.tags.saves}
    params, state = dict(spec.get("params") or {}), dict(spec.get("state") or {})
    if set(params) | set(state) != saved:
        raise GovernorError(f"a {name} governor saves {', '.join(sorted(saved))}; this file has "
                            f"{', '.join(sorted(set(params) | set(state))) or 'nothing'}")
    gov = cls(**params)
    for key, value in state.items():
        setattr(gov, key + "_", value)
    gov.knob_ = spec["knob"]
    gov.check_state()
    return gov


def load_governor(path: str | os.PathLike, policy: str | None = None) -> Governor:
    """Read a file written by :func:`save_governor`; errors name the file and the fix."""
    spec = read_model_json(path, "governor file", "`dvfslab pipeline` writes them under <out>/models/")
    try:
        return governor_from_spec(spec, policy)
    except GovernorError as err:
        raise GovernorError(f"{Path(path)}: {err}") from None
