"""Using a governor for real: load a saved policy, describe a workload, decide the level.

``dvfslab govern`` (:mod:`dvfslab.cli.govern`) is a thin layer over this module:

* :func:`load_policy` turns ``--policy`` / ``--model`` / ``--max-slowdown`` / ``--time-model``
  into a governor; a governor that cannot be used from a command line (``online`` and
  ``profiled`` need per-step energies from inside training) is refused with its declared
  reason (``tags.not_on_command_line``);
* :func:`features_from_hf_config` reads the features a Hugging Face ``config.json`` holds
  (layers, hidden size, decoder or encoder, an estimate of the parameter count);
* :func:`decide` runs the governor on those features and says why.

Saved governors are ``dvfslab-governor`` JSON files (:mod:`dvfslab.governors.files`): notebook 03
writes ``models/mlg.json``, notebook 04 ``models/profiled.json``, notebook 05 ``models/curve.json``
and ``models/ffg.json``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.levels import format_mhz, snap_mhz
from dvfslab.data.catalog import is_decoder_config
from dvfslab.data.knobs import DEFAULT_KNOB, get_knob
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError, read_model_json
from dvfslab.governors.files import load_governor
from dvfslab.governors.objective import Objective
from dvfslab.governors.registry import governor_class

#: where a saved governor comes from
PIPELINE_HINT = "`dvfslab pipeline` writes it under <out>/models/"
#: where a Hugging Face config comes from (the pipeline writes none)
HF_CONFIG_HINT = ("give the model's folder or its config.json (`save_pretrained` writes one; "
                  "on the Hub it is the model's config.json)")


def _read_json(path: str | os.PathLike, what: str, hint: str = PIPELINE_HINT) -> dict:
    return read_model_json(path, what, hint)


def load_policy(policy: str, model: str | os.PathLike | None = None, *, max_slowdown_pct: float | None = None,
                time_model: str | os.PathLike | None = None) -> Governor:
    """The governor ``dvfslab govern --policy ...`` uses (see the command's help).

    ``model``: its saved file (not needed by a governor that learns nothing, e.g. ``mlg-paper``);
    ``max_slowdown_pct``: the objective's slowdown limit; ``time_model``: a saved ``curve``
    governor whose time prediction a governor that only names a level needs under that limit.
    """
    cls = governor_class(policy)
    if cls.tags.not_on_command_line:
        raise GovernorError(cls.tags.not_on_command_line)
    if not cls.tags.needs_training:
        gov = cls().fit()
    elif model is None:
        raise GovernorError(f"--policy {policy} needs --model FILE (models/{policy}.json written by `dvfslab pipeline`)"
                            + ("; --policy mlg-paper needs none" if policy == "mlg" else ""))
    else:
        gov = load_governor(model, policy=policy)
    if gov.knob_ != DEFAULT_KNOB:
        raise GovernorError(f"{model}: this {policy} governor decides {get_knob(gov.knob_).label} levels "
                            f"({get_knob(gov.knob_).unit}); dvfslab govern sets the GPU clock")
    if max_slowdown_pct is None:
        return gov
    times = load_governor(time_model, policy="curve").model if time_model is not None else None
    return gov.with_params(objective=Objective(max_slowdown_pct, time_model=times))


def features_from_hf_config(path: str | os.PathLike) -> dict[str, float]:
    """``n_layers``, ``hidden_size``, ``is_decoder``, ``params_m`` from a Hugging Face config.json.

    ``params_m`` is an estimate (embeddings + ``L (4 H^2 + 2 H I)``, I the FFN size); a
    key the config does not have is left out (the governor fills it in or says it is needed).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    cfg = _read_json(p, "Hugging Face config", HF_CONFIG_HINT)
    out: dict[str, float] = {}
    layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
    if layers is not None:
        out["n_layers"] = float(layers)
    if hidden is not None:
        out["hidden_size"] = float(hidden)
    decoder = is_decoder_config(cfg.get("model_type"), cfg.get("architectures"))
    if decoder is not None:
        out["is_decoder"] = float(decoder)
    if layers is not None and hidden is not None:
        inter = _first(cfg, "intermediate_size", "n_inner") or 4 * hidden
        vocab = _first(cfg, "vocab_size") or 0
        out["params_m"] = (layers * (4 * hidden ** 2 + 2 * hidden * inter) + vocab * hidden) / 1e6
    return out


def _first(cfg: Mapping[str, Any], *keys: str) -> float | None:
    for k in keys:
        if isinstance(cfg.get(k), (int, float)):
            return float(cfg[k])
    return None


def decide(governor: Governor, features: Mapping[str, Any],
           level_table: Sequence[float] | None = None) -> tuple[float | None, str]:
    """``(level or None, one-line reason)``; a missing feature's error names the flag to pass.

    The governor's answer is mapped onto ``level_table`` (default: the governor's own table,
    :meth:`~dvfslab.governors.base.Governor.own_levels`) with :func:`dvfslab.core.levels.snap_mhz`
    — ties go to the higher level, as the clocks' ``lock(..., nearest=True)`` and the replay do.
    """
    try:
        level = governor.decide(features).level
    except GovernorError as err:
        msg = str(err)
        for feat, flag in FEATURE_FLAGS.items():
            if repr(feat) in msg:
                msg += f" (pass {flag})"
        raise GovernorError(msg) from None
    limit = governor.objective.max_slowdown_pct
    why = f"{governor.name}" + (f" with a {limit:g} % slowdown limit" if limit is not None else "")
    if level is None:
        return None, f"{why}: leave the clock to the board's default governor"
    table = level_table if level_table else governor.own_levels()
    snapped = snap_mhz(level, table) if table else float(level)
    if snapped != float(level):
        return snapped, f"{why}: {format_mhz(snapped)} MHz (nearest level to {float(level):g} MHz)"
    return snapped, f"{why}: {format_mhz(snapped)} MHz"


FEATURE_FLAGS = {"n_layers": "--layers", "hidden_size": "--hidden-size", "avg_seq_len": "--avg-seq-len",
                 "gpu_util_pct": "--gpu-util", "is_decoder": "--model-type", "params_m": "--params-m"}
