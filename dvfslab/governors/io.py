"""Using a governor for real: load a saved policy, describe a workload, decide the level.

``dvfslab govern`` (:mod:`dvfslab.cli.govern`) is a thin layer over this module:

* :func:`load_policy` turns ``--policy`` / ``--model`` / ``--max-slowdown`` into a governor
  (``online`` and ``profiled`` are refused with how to use them: both need per-step energies
  from inside training);
* :func:`features_from_hf_config` reads the features a Hugging Face ``config.json`` holds
  (layers, hidden size, decoder or encoder, an estimate of the parameter count);
* :func:`decide` runs the governor on those features and says why.

File formats: trees are ``dvfslab-tree`` JSON (:mod:`dvfslab.governors.tree`), curve models
``dvfslab-curve`` JSON (:mod:`dvfslab.governors.curve`), FFG ``{"format": "dvfslab-fixed", "version": 1,
"freq_mhz": ...}``. Notebook 05 writes ``models/ffg.json`` and ``models/curve.json`` next to
notebook 03's ``models/mlg.json``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.levels import format_mhz, snap_mhz
from dvfslab.data.catalog import is_decoder_config
from dvfslab.governors.curve import CurveGovernor, CurveModel
from dvfslab.governors.errors import GovernorError, read_model_json
from dvfslab.governors.limits import constrain
from dvfslab.governors.static import load_fixed
from dvfslab.governors.tree import TreeGovernor, paper_tree

POLICIES = ("mlg", "mlg-paper", "curve", "ffg", "online", "profiled")


def _read_json(path: str | os.PathLike, what: str) -> dict:
    return read_model_json(path, what, "`dvfslab pipeline` writes it under <out>/models/")


def load_policy(policy: str, model: str | os.PathLike | None = None, *, max_slowdown_pct: float | None = None,
                time_model: str | os.PathLike | None = None) -> Any:
    """The governor ``dvfslab govern --policy ...`` uses (see the command's help)."""
    if policy not in POLICIES:
        raise GovernorError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if policy == "online":
        raise GovernorError("the online governor probes levels during training and needs each step's energy, which a "
                            "plain command cannot report; add dvfslab.harness.online_callback.OnlineDvfsCallback to your Trainer's "
                            "callbacks (or drive dvfslab.governors.online.OnlineProfiler in your own loop; docs/governors.md), or "
                            "use --policy mlg, curve or ffg here")
    if policy == "profiled":
        raise GovernorError("the profiled governor decides from its first warm-up + probe steps measured at the default "
                            "clock inside training, which a plain command cannot report; in your training script run "
                            "those steps under dvfslab.harness.callback.DvfsCallback(backend) (its step_rows() give each "
                            "step's energy_j and time_s), then lock ProfiledGovernor.load(FILE).decide_from_steps(steps, "
                            "gpu_util_pct) (docs/governors.md), or use --policy mlg, curve or ffg here")
    if policy == "mlg-paper":
        gov = TreeGovernor(paper_tree(), name="mlg-paper")
    elif model is None:
        raise GovernorError(f"--policy {policy} needs --model FILE (models/{policy}.json written by `dvfslab pipeline`)"
                            + ("; --policy mlg-paper needs none" if policy == "mlg" else ""))
    elif policy == "mlg":
        gov = TreeGovernor.load(model, name="mlg")
    elif policy == "curve":
        gov = CurveGovernor(CurveModel.load(model))
    else:
        gov = load_fixed(model)
    if max_slowdown_pct is None:
        return gov
    if isinstance(gov, CurveGovernor):
        return constrain(gov, max_slowdown_pct)
    if time_model is None:
        raise GovernorError(f"--max-slowdown with --policy {policy} needs --time-model FILE (a curve model, "
                            "models/curve.json) to predict the slowdown of its level")
    return constrain(gov, max_slowdown_pct, time_model=CurveModel.load(time_model))


def features_from_hf_config(path: str | os.PathLike) -> dict[str, float]:
    """``n_layers``, ``hidden_size``, ``is_decoder``, ``params_m`` from a Hugging Face config.json.

    ``params_m`` is an estimate (embeddings + ``L (4 H^2 + 2 H I)``, I the FFN size); a
    key the config does not have is left out (the governor fills it in or says it is needed).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    cfg = _read_json(p, "Hugging Face config")
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


def decide(governor: Any, features: Mapping[str, Any],
           levels_mhz: Sequence[float] | None = None) -> tuple[float | None, str]:
    """``(level or None, one-line reason)``; a missing feature's error names the flag to pass.

    The governor's answer is mapped onto ``levels_mhz`` (default: the governor's own table,
    ``levels_mhz`` of a tree or FFG file) with :func:`dvfslab.core.levels.snap_mhz` — ties go
    to the higher level, as the clocks' ``lock(..., nearest=True)`` and the replay do.
    """
    try:
        level = governor.decide(features)
    except GovernorError as err:
        msg = str(err)
        for feat, flag in FEATURE_FLAGS.items():
            if repr(feat) in msg:
                msg += f" (pass {flag})"
        raise GovernorError(msg) from None
    limit = getattr(governor, "max_slowdown_pct", None)
    why = f"{governor.name}" + (f" with a {limit:g} % slowdown limit" if limit is not None else "")
    if level is None:
        return None, f"{why}: leave the clock to the board's default governor"
    table = levels_mhz if levels_mhz else getattr(governor, "levels_mhz", ())
    snapped = snap_mhz(level, table) if table else float(level)
    if snapped != float(level):
        return snapped, f"{why}: {format_mhz(snapped)} MHz (nearest level to {float(level):g} MHz)"
    return snapped, f"{why}: {format_mhz(snapped)} MHz"


FEATURE_FLAGS = {"n_layers": "--layers", "hidden_size": "--hidden-size", "avg_seq_len": "--avg-seq-len",
                 "gpu_util_pct": "--gpu-util", "is_decoder": "--model-type", "params_m": "--params-m"}
