"""Which governor ``dvfslab govern`` runs: any in the registry, from a pipeline run's folder or none.

* a governor that learns nothing (``maxn``, ``mlg-paper``, ``online``, ``zeus-sim``, ...) is
  built and fitted on nothing;
* one that learns (``ffg``, ``mlg``, ``curve``, ``profiled``) is read from a saved file
  (``--model FILE``) or from ``RUN/models/<name>.json`` (``--model RUN/``, a ``dvfslab pipeline``
  output folder);
* ``search`` starts from its prior's level: with ``--model RUN/`` the prior saved there
  (``RUN/models/ffg.json``), with no folder the middle of the table (the U-shape alone);
* ``--policy recommended --model RUN/`` reads ``RUN/summary.json``'s ``recommended.policy``.

* ``voi`` with no saved file starts from its untrained prior (a family of U-shaped curves);

The objective is built from ``--max-slowdown`` and ``--eta``: the least energy, or Zeus's cost
``eta x energy + (1 - eta) x max power x time`` (:class:`~dvfslab.governors.objective.ZeusCost`),
either within the slowdown limit when one is given — the selectors the pipeline uses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dvfslab.data.knobs import DEFAULT_KNOB, get_knob
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor
from dvfslab.governors.objective import Objective, Selector, ZeusCost
from dvfslab.governors.registry import governor_class, make

RECOMMENDED = "recommended"
#: learned governors that also run with nothing learned: search (its prior: mid-table), voi (its
#: prior: a family of U-shaped curves)
UNTRAINED_OK = ("search", "voi")


def objective(max_slowdown_pct: float | None = None, eta: float | None = None, time_model=None) -> Selector | None:
    """The objective the options ask for (None: the governor's own default)."""
    if eta is None and max_slowdown_pct is None and time_model is None:
        return None
    kw: dict[str, Any] = {"max_slowdown_pct": max_slowdown_pct, "time_model": time_model}
    return Objective(**kw) if eta is None else ZeusCost(eta=eta, **kw)


def recommended_policy(run: str | os.PathLike) -> str:
    """``recommended.policy`` of ``RUN/summary.json``."""
    path = Path(run) / "summary.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise GovernorError(f"{path} not found: --policy recommended needs --model RUN/, the output folder of "
                            "`dvfslab pipeline --out RUN`") from None
    except (OSError, json.JSONDecodeError) as err:
        raise GovernorError(f"{path}: not readable as JSON ({err}); rerun `dvfslab pipeline`") from None
    policy = (doc.get("recommended") or {}).get("policy") if isinstance(doc, dict) else None
    if not isinstance(policy, str):
        raise GovernorError(f"{path} has no recommended.policy; rerun `dvfslab pipeline` with this dvfslab")
    return policy


def _saved(run: Path | None, name: str, model: str | os.PathLike | None) -> Governor | None:
    if model is not None and not Path(model).is_dir():
        return load_governor(model, policy=name)
    if run is not None and (run / "models" / f"{name}.json").exists():
        return load_governor(run / "models" / f"{name}.json", policy=name)
    return None


def job_governor(policy: str, model: str | os.PathLike | None = None, *, max_slowdown_pct: float | None = None,
                 eta: float | None = None, time_model: str | os.PathLike | None = None,
                 knob: str | None = None) -> Governor:
    """The governor ``--policy`` names (module doc), with the objective the options build; ``knob``:
    what a level is (default: the GPU clock; ``power_limit_w`` on ``--knob power-limit``)."""
    run = Path(model) if model is not None and Path(model).is_dir() else None
    if policy == RECOMMENDED:
        if run is None:
            raise GovernorError("--policy recommended needs --model RUN/ (the output folder of `dvfslab pipeline`)")
        policy = recommended_policy(run)
    cls = governor_class(policy)
    gov = _saved(run, policy, model)
    if gov is None:
        if cls.needs_training and policy not in UNTRAINED_OK:
            where = f"{run}/models/{policy}.json" if run is not None else f"--model FILE (models/{policy}.json)"
            raise GovernorError(f"--policy {policy} learns from a sweep: it needs {where}, written by `dvfslab pipeline`")
        gov = make(policy, prior=None) if policy == "search" and run is None else make(policy)
        if policy == "search" and run is not None:
            prior = _saved(run, gov.prior, None) if gov.prior else None
            if prior is None:
                gov = make(policy, prior=None)
                gov.fit()
            else:
                gov.prior_, gov.knob_ = prior, prior.knob_
        else:
            try:
                gov.fit()
            except GovernorError:  # a yardstick that reads a sweep's answers (oracle)
                raise GovernorError(f"--policy {policy} cannot govern a new job: "
                                    f"{cls.command_line or 'it needs a sweep to fit'}") from None
    knob = knob or DEFAULT_KNOB
    untrained = (policy == "search" and getattr(gov, "prior_", None) is None) or \
        (policy == "voi" and not getattr(gov, "curves_", None))
    learned = cls.needs_training and not untrained
    if gov.knob_ != knob and not learned and (not cls.knobs or knob in cls.knobs):
        gov.knob_ = knob  # learned nothing: it decides the knob it is given (online fits it accordingly)
    if gov.knob_ != knob:
        what = "the GPU clock" if knob == DEFAULT_KNOB else f"the {get_knob(knob).label} (--knob power-limit)"
        raise GovernorError(f"this {policy} governor decides {get_knob(gov.knob_).label} levels "
                            f"({get_knob(gov.knob_).unit}); dvfslab govern sets {what} here")
    times = load_governor(time_model, policy="curve").model if time_model is not None else None
    obj = objective(max_slowdown_pct, eta, times)
    return gov if obj is None else gov.with_params(objective=obj)
