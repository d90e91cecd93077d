"""The governors by name: the one registry.

One line per governor (``package.module:Class``); the name is the class's ``name``. It feeds
building and fitting (:func:`make`, :func:`build`), loading a saved file
(:mod:`dvfslab.governors.files`), ``dvfslab govern`` (its ``--policy`` choices and help), the
recommendation's candidates, the cross-validation's list of governors that need no training
workloads, and the notebooks' lists (:func:`check_names`, :func:`usable`). Adding a governor is
its module, one line here, and its tests.

Every governor module is light (no pandas, numpy or scikit-learn at import), so listing them
costs nothing; fitting imports what it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.plugins import load_object
from dvfslab.governors.base import Governor
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
    "dvfslab.governors.static:OracleGovernor",
)


@cache
def registry() -> dict[str, type[Governor]]:
    """Name -> class, in :data:`GOVERNORS` order."""
    out: dict[str, type[Governor]] = {}
    for target in GOVERNORS:
        cls = load_object(target, label=f"governor {target!r}", what="a governor class")
        if not (isinstance(cls, type) and issubclass(cls, Governor) and cls.name):
            raise DvfsError(f"governor {target!r} is not a dvfslab.governors.base.Governor subclass with a name")
        if cls.name in out:
            raise DvfsError(f"governor {target!r}: the name {cls.name!r} is taken by {out[cls.name].__name__}")
        out[cls.name] = cls
    return out


def names() -> list[str]:
    """Every governor's name."""
    return list(registry())


def command_line_names() -> list[str]:
    """The governors ``dvfslab govern`` can use."""
    return [n for n, cls in registry().items() if not cls.command_line]


def governor_class(name: str) -> type[Governor]:
    """The class registered as ``name``; an unknown name is a :class:`GovernorError` listing the known ones."""
    try:
        return registry()[name]
    except KeyError:
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
