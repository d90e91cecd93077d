"""The governors by name: the one registry.

One line per governor (``package.module:Class``); the name is the class's ``name``. Third-party
packages add theirs through the entry-point group ``dvfslab.governors`` (:data:`ENTRY_POINT_GROUP`),
one entry point per governor, named as the class::

    [project.entry-points."dvfslab.governors"]
    lowest = "mypkg.lowest:LowestGovernor"

The registry is the one list of governors. It feeds building and fitting (:func:`make`,
:func:`build`), loading a saved file (:mod:`dvfslab.governors.files`), ``dvfslab govern`` (its
``--policy`` choices and help: :func:`command_line_names`), the recommendation's candidates
(:func:`recommendable_names`), the cross-validation's split between governors refitted per
fold and fitted once (each class's ``tags``, :class:`~dvfslab.governors.base.GovernorTags`), and
notebooks 04 and 05, whose ``GOVERNOR_NAMES`` / ``RECOMMEND_CANDIDATES`` the pipeline fills from
:func:`names` and :func:`recommendable_names` (:func:`check_names`, :func:`usable`). Adding a
governor is its module, one line here (or one entry point), and its tests.

A plugin that cannot be loaded (an import error, not a governor class, a name taken) is left out
with one line on standard error naming the entry point and the error (:func:`broken_plugins`);
asking for it by name says the same.

Every governor module is light (no pandas, numpy or scikit-learn at import), so listing them
costs nothing; fitting imports what it needs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.plugins import load_object
from dvfslab.governors.base import Governor, ProbingGovernor
from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    from dvfslab.analysis.training import TrainingData

GOVERNORS: tuple[str, ...] = (
    "dvfslab.governors.static:MaxnGovernor",
    "dvfslab.governors.static:FixedGovernor",
    "dvfslab.governors.tree:PaperTreeGovernor",
    "dvfslab.governors.tree:TreeGovernor",
    "dvfslab.governors.curve:CurveGovernor",
    "dvfslab.governors.online:OnlineGovernor",
    "dvfslab.governors.profiled:ProfiledGovernor",
    "dvfslab.governors.zeus_jit:ZeusSimGovernor",
    "dvfslab.governors.zeus:ZeusGovernor",
    "dvfslab.governors.search:SearchGovernor",
    "dvfslab.governors.voi:VoiGovernor",
    "dvfslab.governors.jointbo:BoGovernor",
    "dvfslab.governors.static:OracleGovernor",
)


#: the entry-point group of third-party governors (module doc)
ENTRY_POINT_GROUP = "dvfslab.governors"


def _problem(cls: object, taken: Mapping[str, type[Governor]]) -> str:
    """Why ``cls`` cannot be registered (``""``: it can)."""
    if not (isinstance(cls, type) and issubclass(cls, Governor) and cls.name):
        return "not a dvfslab.governors.base.Governor subclass with a name"
    if cls.name in taken:
        return f"the name {cls.name!r} is taken by {taken[cls.name].__module__}.{taken[cls.name].__name__}"
    if cls.tags.probes != issubclass(cls, ProbingGovernor):
        return (f"its tags say probes={cls.tags.probes} but it is {'' if issubclass(cls, ProbingGovernor) else 'not '}"
                "a ProbingGovernor")
    return ""


@cache
def registry() -> dict[str, type[Governor]]:
    """Name -> class: :data:`GOVERNORS` in order, then the plugins (module doc)."""
    out: dict[str, type[Governor]] = {}
    for target in GOVERNORS:
        cls = load_object(target, label=f"governor {target!r}", what="a governor class")
        problem = _problem(cls, out)
        if problem:
            raise DvfsError(f"governor {target!r}: {problem}")
        out[cls.name] = cls
    _BROKEN.clear()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            cls = ep.load()
        except Exception as err:  # a third party's import: any error is theirs, reported in one line
            problem = f"cannot load it ({type(err).__name__}: {' '.join(str(err).split())})"  # one line
        else:
            problem = _problem(cls, out)
            if not problem and cls.name != ep.name:
                problem = f"the entry point is named {ep.name!r} but the class's name is {cls.name!r}"
        if problem:
            _BROKEN[ep.name] = (f"dvfslab: governor plugin {ep.name} = {ep.value!r} (entry point group "
                                f"{ENTRY_POINT_GROUP}) is left out: {problem}")
            print(_BROKEN[ep.name], file=sys.stderr)
        else:
            out[cls.name] = cls
    return out


#: entry-point name -> the line saying why it was left out (filled by :func:`registry`)
_BROKEN: dict[str, str] = {}


def broken_plugins() -> dict[str, str]:
    """The plugins left out: entry-point name -> the one line that says why."""
    registry()
    return dict(_BROKEN)


def names() -> list[str]:
    """Every governor's name."""
    return list(registry())


def command_line_names() -> list[str]:
    """The governors ``dvfslab govern`` can use."""
    return [n for n, cls in registry().items() if not cls.tags.not_on_command_line]


def recommendable_names() -> list[str]:
    """The governors that may be recommended in place of FFG (notebook 04's candidates)."""
    return [n for n, cls in registry().items() if cls.tags.recommendable]


def governor_class(name: str) -> type[Governor]:
    """The class registered as ``name``; an unknown name is a :class:`GovernorError` listing the known ones."""
    try:
        return registry()[name]
    except KeyError:
        if name in _BROKEN:
            raise GovernorError(_BROKEN[name].removeprefix("dvfslab: ")) from None
        raise GovernorError(f"unknown governor {name!r}; known: {', '.join(registry())}") from None


def check_names(names_: Iterable[str]) -> list[str]:
    """``names_`` as a list, each checked against the registry (notebook parameters)."""
    out = list(names_)
    for name in out:
        governor_class(name)
    return out


def make(name: str, **params: Any) -> Governor:
    """An unfitted governor ``name`` with ``params``; a parameter it does not have is an error."""
    cls = governor_class(name)
    try:
        return cls(**params)
    except TypeError as err:
        known = ", ".join(cls._param_names()) or "none"
        raise GovernorError(f"{name}: {err} — its parameters: {known}") from None


def make_all(names_: Iterable[str], params: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Governor]:
    """Unfitted governors by name, ``params[name]`` passed to each (a name in ``params`` that is
    not among ``names_`` is an error: a misspelt governor must not be ignored)."""
    names_ = check_names(names_)
    params = dict(params or {})
    for extra in set(params) - set(names_):
        governor_class(extra)  # unknown: an error naming the known ones
    return {n: make(n, **params.get(n, {})) for n in names_}


def build(names_: Iterable[str], data: TrainingData, params: Mapping[str, Mapping[str, Any]] | None = None
          ) -> dict[str, Governor]:
    """The named governors, each fitted on ``data`` (in order)."""
    return {n: g.fit(data) for n, g in make_all(names_, params).items()}


def usable(governors: Mapping[str, Governor], data: TrainingData) -> tuple[dict[str, Governor], dict[str, str]]:
    """``(the governors that can be evaluated on data, {name: why not} for the others)``: a
    governor may decide only some knobs (``mlg-paper``: clocks) or need the dataset's steps."""
    ok, left_out = {}, {}
    for name, gov in governors.items():
        why = gov.unusable_reason(data)
        if why:
            left_out[name] = why
        else:
            ok[name] = gov
    return ok, left_out
