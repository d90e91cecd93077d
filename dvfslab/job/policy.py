"""Which governor ``dvfslab govern`` runs: any in the registry, from a pipeline run's folder or none.

* a governor that learns nothing (``maxn``, ``mlg-paper``, ``online``, ``zeus-sim``, ...) is
  built and fitted on nothing;
* one that learns (``ffg``, ``mlg``, ``curve``, ``profiled``) is read from a saved file
  (``--model FILE``) or from ``RUN/models/<name>.json`` (``--model RUN/``, a ``dvfslab pipeline``
  output folder);
* ``search`` starts from its prior's level: with ``--model RUN/`` the prior saved there
  (``RUN/models/ffg.json``), with no folder the middle of the table (the U-shape alone);
* ``--policy recommended --model RUN/`` reads ``RUN/summary.json``'s ``recommended.policy``.

* ``voi`` with no saved file and no ``--model RUN/`` starts from its untrained prior (a family of
  U-shaped curves) and says so (the governor's ``source_``); with ``--model RUN/`` a learned
  governor (``voi`` included) is read from ``RUN/models/<name>.json`` or refused — never
  replaced silently by its untrained form. ``search`` reads its parameters there too
  (``models/search.json``) and its prior's saved file;
* ``source_`` on the governor returned says which it is: trained (the file, the board it was
  learned on), untrained, and for ``--policy recommended`` that it is the run's recommendation;
* **Board.** A learned governor saved with its board (``models/*.json`` ``board``:
  :func:`~dvfslab.governors.files.board_of`) is refused on a board of another knob or level
  table, in one line naming both (:func:`check_board`), unless ``map_levels="nearest"``
  (``--map-levels nearest``): its answers then go to this board's nearest level
  (:func:`~dvfslab.core.levels.snap_mhz`), and ``source_`` says so;
* **Features.** :func:`feature_needs` lists the features the governor reads that the user did
  not give: the GPU utilisation (``gpu_util_pct``) is *to be measured* (the runner measures it
  in its default-clock calibration windows and passes it), any other names its flag.
  :func:`check_features` raises :class:`FeatureRequired` rather than let a tree or the curve
  model fill in the training median silently.

The objective is built from ``--max-slowdown`` and ``--eta``: the least energy, or Zeus's cost
``eta x energy + (1 - eta) x max power x time`` (:class:`~dvfslab.governors.objective.ZeusCost`),
either within the slowdown limit when one is given — the selectors the pipeline uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.summaryfile import load_summary
from dvfslab.data.knobs import DEFAULT_KNOB, JOINT_LABELS, KNOBS, SETTING, get_knob
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
        doc = load_summary(path)
    except FileNotFoundError:
        raise GovernorError(f"{path} not found: --policy recommended needs --model RUN/, the output folder of "
                            "`dvfslab pipeline --out RUN`") from None
    except DvfsError as err:
        raise GovernorError(str(err)) from None
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


class FeatureRequired(GovernorError):
    """A governor reads features the user did not give: ``measure`` lists those the runner can
    measure (``gpu_util_pct``: in its calibration windows), ``missing`` ``(feature, flag)`` the
    others."""

    def __init__(self, message: str, measure: Sequence[str] = (), missing: Sequence[tuple[str, str]] = ()):
        super().__init__(message)
        self.measure = tuple(measure)
        self.missing = tuple(missing)


#: features a runner can measure while the job runs, and how
MEASURABLE = {"gpu_util_pct": "the GPU's load (%), measured in the calibration windows at the default clock"}


def _lacks(given: Mapping[str, Any], feature: str) -> bool:
    value = given.get(feature)
    return value is None or (isinstance(value, float) and value != value)


def features_read(governor: Governor, given: Mapping[str, Any] | None = None) -> list[str]:
    """The workload features a governor's decision reads (a tree: those its nodes split on — with
    ``given``, those on the path the given features take, down to the first node whose feature is
    not given; the curve model: its features; others: none)."""
    tree = getattr(governor, "tree_", None)
    if isinstance(tree, Mapping):
        nodes = [n for n in tree.get("nodes", ()) if isinstance(n, Mapping)]
        if given is None or not nodes:
            return sorted({n["feature"] for n in nodes if "feature" in n})
        node, seen = nodes[0], []
        while "feature" in node and len(seen) <= len(nodes):
            seen.append(node["feature"])
            if _lacks(given, node["feature"]):
                break
            node = nodes[node["left"] if float(given[node["feature"]]) <= node["threshold"] else node["right"]]
        return sorted(set(seen))
    curve = getattr(governor, "curve_", None)
    if isinstance(curve, Mapping):
        return list(curve.get("features", ()))
    return []


def feature_needs(governor: Governor, given: Mapping[str, Any]) -> FeatureRequired | None:
    """What the governor reads that ``given`` lacks (None: nothing): to measure, or to pass (a
    tree: on the path the given features take, :func:`features_read`)."""
    from dvfslab.governors.io import FEATURE_FLAGS

    lacking = [f for f in features_read(governor, given) if _lacks(given, f)]
    if not lacking:
        return None
    measure = [f for f in lacking if f in MEASURABLE]
    missing = [(f, FEATURE_FLAGS.get(f, f"a value for {f}")) for f in lacking if f not in MEASURABLE]
    parts = [f"{f}: not given, to be measured ({MEASURABLE[f]})" for f in measure]
    parts += [f"{f}: not given (pass {flag})" for f, flag in missing]
    return FeatureRequired(f"{governor.name} reads {', '.join(lacking)} — " + "; ".join(parts)
                           + "; a training median is never filled in", measure, missing)


def check_features(governor: Governor, given: Mapping[str, Any]) -> None:
    """Raise :class:`FeatureRequired` when the governor reads a feature ``given`` lacks."""
    need = feature_needs(governor, given)
    if need is not None:
        raise need


def _levels_text(levels: Sequence[float], unit: str) -> str:
    lv = sorted(float(f) for f in levels)
    return f"{len(lv)} levels {lv[0]:g}-{lv[-1]:g} {unit}" if lv else "no levels"


def check_board(governor: Governor, levels: Sequence[float], knob: str, board_name: str = "this board",
                map_levels: str | None = None, where: str = "") -> str:
    """``""`` when the governor was learned on this knob and level table (or learned nothing, or
    its file records no board: said in the returned note); else a :class:`GovernorError` in one
    line naming both boards — unless ``map_levels="nearest"``: then the note says its answers go
    to this board's nearest levels."""
    if map_levels not in (None, "nearest"):
        raise GovernorError(f"map_levels: 'nearest' or none, got {map_levels!r}")
    trained = getattr(governor, "board_", None)
    if not governor.tags.needs_training or not getattr(governor, "learned_", True):
        return ""
    if not trained:
        return "its file records no board (saved before boards were recorded): not checked"
    t_knob, t_levels = str(trained.get("knob")), [float(f) for f in trained.get("levels") or ()]
    mine = sorted(float(f) for f in levels)
    t_unit, unit = get_knob(t_knob).unit if t_knob in KNOBS else "?", get_knob(knob).unit
    same = t_knob == knob and len(t_levels) == len(mine) and all(
        abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(sorted(t_levels), mine, strict=True))
    if same:
        return ""
    theirs = f"{trained.get('name') or 'unnamed board'} ({t_knob}, {_levels_text(t_levels, t_unit)})"
    here = f"{board_name} ({knob}, {_levels_text(mine, unit)})"
    if t_knob != knob or map_levels is None:
        fix = "" if t_knob != knob else "; map_levels='nearest' (--map-levels nearest) maps to this board's nearest levels"
        raise GovernorError(f"{where or governor.name}: learned on {theirs}, this is {here}: refused{fix}")
    return f"learned on {theirs}: its levels mapped to the nearest of {here}"


def job_governor(policy: str, model: str | os.PathLike | None = None, *, max_slowdown_pct: float | None = None,
                 eta: float | None = None, time_model: str | os.PathLike | None = None,
                 knob: str | None = None, levels: Sequence[float] | None = None, board_name: str = "this board",
                 map_levels: str | None = None) -> Governor:
    """The governor ``--policy`` names (module doc), with the objective the options build; ``knob``:
    what a level is (default: the GPU clock; ``power_limit_w`` on ``--knob power-limit``);
    ``levels``: this board's level table (a learned governor is checked against the one it was
    learned on, :func:`check_board`; None: not checked); ``map_levels``: ``"nearest"`` to accept
    another table. The governor's ``source_`` says what runs."""
    run = Path(model) if model is not None and Path(model).is_dir() else None
    recommended = policy == RECOMMENDED
    if recommended:
        if run is None:
            raise GovernorError("--policy recommended needs --model RUN/ (the output folder of `dvfslab pipeline`)")
        policy = recommended_policy(run)
    cls = governor_class(policy)
    gov = _saved(run, policy, model)
    where = (str(model) if model is not None and run is None else
             f"{run}/models/{policy}.json" if run is not None else "")
    if gov is not None and policy == "search" and getattr(gov, "prior", None) and run is not None:
        prior = _saved(run, gov.prior, None)
        if prior is None:
            raise GovernorError(f"{where}: search starts from {gov.prior}'s level; {run}/models/{gov.prior}.json "
                                "is missing — rerun `dvfslab pipeline`")
        gov.prior_ = prior
    # search's learned state is its prior's file (models/ffg.json): without models/search.json it
    # runs with its default parameters from that prior (below); any other learned governor is refused
    if gov is None and run is not None and cls.needs_training and policy != "search":
        raise GovernorError(f"--policy {policy}{' (recommended)' if recommended else ''}: {run}/models/{policy}.json "
                            "is missing — rerun `dvfslab pipeline` with this dvfslab (it saves every trained governor)"
                            + (f", or leave out --model to run {policy} untrained" if policy in UNTRAINED_OK else ""))
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
    if knob == DEFAULT_KNOB and gov.knob_ == SETTING and cls.needs_training:
        knob = SETTING  # a joint model learned on GPU x EMC x CPU settings (checked below and on the board)
    untrained = (policy == "search" and getattr(gov, "prior_", None) is None) or \
        (policy == "voi" and not getattr(gov, "curves_", None))
    learned = cls.needs_training and not untrained
    if gov.knob_ != knob and not learned and (not cls.knobs or knob in cls.knobs):
        gov.knob_ = knob  # learned nothing: it decides the knob it is given (online fits it accordingly)
    if gov.knob_ != knob:
        what = "the GPU clock" if knob == DEFAULT_KNOB else f"the {get_knob(knob).label} (--knob power-limit)"
        raise GovernorError(f"this {policy} governor decides {get_knob(gov.knob_).label} levels "
                            f"({get_knob(gov.knob_).unit}); dvfslab govern sets {what} here")
    gov.learned_ = learned
    joint = ""
    if knob == SETTING:  # a joint model: its levels are setting indices, set as clocks by dvfslab.job.joint
        from dvfslab.job.joint import joint_settings

        knobs, settings = joint_settings(gov)
        joint = f"{len(settings)} joint settings of {' × '.join(JOINT_LABELS.get(k, k) for k in knobs)}"
        if map_levels is not None:
            raise GovernorError(f"{where or policy}: a joint model's settings are set as they are (each checked on "
                                "this board before the job starts); --map-levels maps one knob's levels only")
    mapped = (check_board(gov, levels, knob, board_name, map_levels, where)
              if levels is not None and learned and not joint else "")
    times = load_governor(time_model, policy="curve").model if time_model is not None else None
    obj = objective(max_slowdown_pct, eta, times)
    out = gov if obj is None else gov.with_params(objective=obj)
    trained_on = (getattr(gov, "board_", None) or {}).get("name")
    what = (f"{policy}, trained ({where}" + (f", learned on {trained_on}" if trained_on else "") + ")" if learned else
            f"{policy}, untrained ({'the middle of the table as its start' if policy == 'search' else 'its U-shaped prior'})"
            if policy in UNTRAINED_OK else policy)
    out.source_ = ("the recommended governor of " + f"{run}/summary.json: " if recommended else "") + what + \
        (f"; {mapped}" if mapped else "") + (f"; {joint}" if joint else "")
    return out
