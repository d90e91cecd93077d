"""Saving and loading any governor: one JSON format, one function pair.

A saved governor is::

    {"format": "dvfslab-governor", "version": 2, "policy": "mlg", "knob": "gpu_freq_mhz",
     "params": {...}, "state": {...}}

``policy`` is its registry name; ``knob`` what its levels are (``gpu_freq_mhz``: MHz,
``power_limit_w``: W); ``params`` and ``state`` are what the governor declares it saves
(``tags.saves``: constructor parameters, and fitted attributes without their trailing ``_``);
``board`` (optional): the board and level table it was learned on, ``{"name", "knob",
"levels"}`` (:func:`board_of`), read back as the governor's ``board_`` — ``dvfslab govern``
refuses a learned governor on a board of another table (:func:`dvfslab.job.policy.check_board`);
a joint model's record adds ``"knobs"`` and ``"settings"`` (its level ``i`` is ``settings[i]``),
which ``dvfslab govern`` sets as clocks (:mod:`dvfslab.job.joint`).
:func:`save_trained` writes every trained governor of a pipeline run under ``models/``.
Loading imports only the policy's own module: ``dvfslab govern`` reads a tree, FFG or curve
model without pandas, numpy or scikit-learn.

Files of an older dvfslab (``dvfslab-tree``, ``-curve``, ``-fixed``, ``-profiled``, version 1:
their levels were called ``freq_mhz``) are refused with how to regenerate them.
"""

from __future__ import annotations

import json
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


def board_of(sweep: Any) -> dict[str, Any]:
    """The board record of a sweep (an :class:`~dvfslab.analysis.aggregate.Sweep`, read by its
    attributes): its knob, level table and the board's name from its dataset's meta.json."""
    name = ""
    meta_path = Path(str(getattr(sweep, "dataset", "") or "")) / "meta.json"
    if meta_path.is_file():
        try:
            device = json.loads(meta_path.read_text()).get("device") or {}
        except (OSError, ValueError):
            device = {}
        if isinstance(device, Mapping):
            name = str(device.get("board") or device.get("gpu") or "")
    joint = getattr(sweep, "joint_knobs", ())
    extra = {"knobs": list(joint), "settings": [[float(v) for v in s] for s in sweep.settings]} if joint else {}
    return {"name": name or "unnamed board", "knob": sweep.knob.name, "levels": [float(f) for f in sweep.level_table],
            **extra}


def save_governor(governor: Governor, path: str | os.PathLike, board: Mapping[str, Any] | None = None) -> None:
    """Write a fitted governor (atomically); ``board``: what it was learned on (:func:`board_of`)."""
    if not governor.tags.saves:
        raise GovernorError(f"{governor.name}: has nothing to save (it is built, not learned: "
                            f"registry name {governor.name!r})")
    spec = governor_spec(governor)
    if board is not None:
        spec["board"] = jsonable(dict(board))
    atomic_write_json(path, spec)


def save_trained(governors: Mapping[str, Governor], folder: str | os.PathLike, sweep: Any) -> dict[str, str]:
    """Write every governor of ``governors`` that saves something to ``folder/<name>.json``, with
    the board and level table of ``sweep`` (:func:`board_of`): voi's prior curves, curve, mlg,
    ffg, the parameters of search and zeus ... Returns ``{name: what happened}`` (saved, or why
    not: nothing to save, not fitted)."""
    board = board_of(sweep)
    out = {}
    for name, gov in governors.items():
        if not gov.tags.saves:
            out[name] = "nothing to save (built, not learned)"
            continue
        try:
            save_governor(gov, Path(folder) / f"{name}.json", board)
        except GovernorError as err:
            out[name] = f"not saved: {err}"
            continue
        out[name] = f"saved {Path(folder) / f'{name}.json'}"
    return out


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
    board = spec.get("board")
    if board is not None and not (isinstance(board, Mapping) and isinstance(board.get("levels"), list)):
        raise GovernorError("its \"board\" must be {\"name\", \"knob\", \"levels\": [...]}")
    gov.board_ = dict(board) if board is not None else None
    gov.check_state()
    return gov


def load_governor(path: str | os.PathLike, policy: str | None = None) -> Governor:
    """Read a file written by :func:`save_governor`; errors name the file and the fix."""
    spec = read_model_json(path, "governor file", "`dvfslab pipeline` writes them under <out>/models/")
    try:
        return governor_from_spec(spec, policy)
    except GovernorError as err:
        raise GovernorError(f"{Path(path)}: {err}") from None
