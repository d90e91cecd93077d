"""The governor contract: typed parameters, ``fit``, ``decide``, and the probe of a running job.

A governor chooses the level of a fine-tuning run: a GPU clock (MHz) or a GPU power limit (W),
whatever the dataset's knob is (``knob_``, recorded when it is fitted). It follows
scikit-learn's estimator contract without depending on scikit-learn:

* its options are its constructor's keyword parameters, stored as given (so
  ``sklearn.base.clone`` rebuilds it, and a misspelt option is a ``TypeError``, not a silent
  default); :class:`Params` gives ``get_params`` / ``set_params``;
* ``fit(data) -> self`` learns from a :class:`~dvfslab.analysis.training.TrainingData` (the sweep,
  the feature table, the training workloads, the steps); what it learns ends in ``_``;
* ``decide(workload, probe=None) -> Decision`` chooses a level for one workload (a mapping of
  its features), or ``None``: leave the board's default (the baseline, MAXN).

Governors that measure the job while it runs (:class:`ProbingGovernor`: ``online``,
``profiled``, ``zeus-sim``, ``search``) receive a :class:`Probe` — run the job's next ``units``
units (optimizer steps, or epochs / inferences in an imported trace; fractional allowed: Zeus's
profiler gives each power limit ``1/L`` of one epoch) at a level, get ``(time_s, energy_j)`` —
and return a :class:`Decision` that carries what they probed, which the replay charges over the
whole job (:mod:`dvfslab.evaluation.replay`). Live, the same :class:`ProbeSession` is fed one
optimizer step (one unit) at a time by the training callback
(:class:`dvfslab.harness.policy.OnlineLevel`): a session counts the units it has observed per
level, so a share smaller than one step is served by one whole step.

The selection rule (least energy; least energy within a slowdown limit) is one
:class:`~dvfslab.governors.objective.Objective`, the ``objective`` parameter of every governor.
What the registry and its users need to know of a governor is one record, its class's ``tags``
(:class:`GovernorTags`: what it needs to be fitted, what its file saves, whether it probes, ...).
The registry (:mod:`dvfslab.governors.registry`) names the governors; one JSON format saves any
of them (:mod:`dvfslab.governors.files`).

A governor never sees the answer: ``decide`` refuses a workload row that carries one of
:data:`ANSWER_COLUMNS` (the feature table's columns derived from the measured optimum, and the
measured run's totals), with a :class:`GovernorError` naming it; :func:`without_answers` drops
them. Every subclass's ``decide`` is checked so (wrapped when the class is defined).

Board side: this module imports neither pandas nor numpy nor the analysis room.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from dvfslab.core.answers import ANSWER_COLUMNS
from dvfslab.data.knobs import DEFAULT_KNOB, SETTING, get_knob
from dvfslab.governors.errors import GovernorError

if TYPE_CHECKING:
    from typing import Self

    from dvfslab.analysis.training import TrainingData
    from dvfslab.governors.probemodel import ProbeModel


class Params:
    """``get_params`` / ``set_params`` from the constructor's signature (scikit-learn's contract).

    Subclasses store every ``__init__`` parameter unchanged under its own name and validate
    values when they are used, so that ``sklearn.base.clone`` works.
    """

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (with ``deep``, nested ones as ``name__param``)."""
        out = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update({f"{name}__{k}": v for k, v in value.get_params().items()})
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Self:
        """Set parameters (``name`` or nested ``name__param``); an unknown name is an error."""
        names = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in names:
                raise GovernorError(f"{type(self).__name__}: unknown parameter {name!r}; "
                                    f"its parameters: {', '.join(names) or 'none'}")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub in nested.items():
            getattr(self, name).set_params(**sub)
        return self

    def with_params(self, **params: Any) -> Self:
        """A copy with other parameters and the same fitted state (``set_params`` on a copy).

        A nested estimator (a parameter with its own ``set_params``, e.g. ``mlg``'s scikit-learn
        pipeline) is copied too, so that ``estimator__max_depth=2`` changes the copy's, never the
        original's; the fitted state (read-only once fitted) is shared."""
        twin = copy.copy(self)
        for name in self._param_names():
            value = getattr(self, name)
            if hasattr(value, "set_params") and not isinstance(value, type):
                setattr(twin, name, copy.deepcopy(value))
        return twin.set_params(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"


class ProbeStep(NamedTuple):
    """What a governor ran to probe the job: ``units`` of it (one optimizer step live) at ``level``
    (None: the default clock), and the time and energy it measured."""

    level: float | None
    time_s: float
    energy_j: float
    units: float = 1.0


@dataclass(frozen=True)
class Decision:
    """A governor's answer: the level to hold (None: the board's default), what it probed to
    find it (charged to it), and ``note``: anything the replay should report with it (a search
    that stopped at a local minimum of a curve that is not unimodal, a learned governor that
    could not learn and fell back)."""

    level: float | None
    probed: tuple[ProbeStep, ...] = ()
    note: str = ""

    @property
    def probe_units(self) -> float:
        """The units of the job spent probing."""
        return float(sum(s.units for s in self.probed))


class Probe(Protocol):
    """Runs the job's next units at a level and measures them: what a probing governor is given.

    In a replay it reads the dataset's steps (:class:`dvfslab.analysis.steps.StepProbe`).
    """

    @property
    def levels(self) -> Sequence[float]:
        """The levels it can run."""

    def measure(self, level: float | None, units: float = 1.0) -> tuple[float, float]:
        """Run the next ``units`` units at ``level`` (None: the default clock); ``(time_s, energy_j)``."""

    # optional: ``model`` — a :class:`~dvfslab.governors.probemodel.ProbeModel` (each level's
    # window and the reading's noise); read with ``probe_model(probe)``, None when absent.


def probe_model(probe: Any) -> ProbeModel | None:
    """The :class:`~dvfslab.governors.probemodel.ProbeModel` a probe carries (None: none)."""
    return getattr(probe, "model", None)


def answer_columns_in(workload: Mapping[str, Any]) -> list[str]:
    """The :data:`ANSWER_COLUMNS` that ``workload`` carries (in that order)."""
    return [c for c in ANSWER_COLUMNS if c in workload]


def without_answers(workload: Mapping[str, Any]) -> dict[str, Any]:
    """``workload`` without its :data:`ANSWER_COLUMNS`: what a governor may be given."""
    return {k: v for k, v in workload.items() if k not in ANSWER_COLUMNS}


def _check_no_answers(decide: Callable[..., Decision]) -> Callable[..., Decision]:
    """``decide`` refusing a workload row that carries an answer column (module doc)."""

    @functools.wraps(decide)
    def checked(self: Governor, workload: Mapping[str, Any], *args: Any, **kwargs: Any) -> Decision:
        found = answer_columns_in(workload) if isinstance(workload, Mapping) else []
        if found:
            raise GovernorError(f"{self.name or type(self).__name__}: the workload row carries {', '.join(found)}: "
                                "the measured answer (or the run's measured totals), which a governor must not "
                                "see — give it the features only (dvfslab.governors.base.without_answers)")
        return decide(self, workload, *args, **kwargs)

    checked._checks_answers = True  # type: ignore[attr-defined]
    return checked


@dataclass(frozen=True)
class GovernorTags:
    """What the registry, the evaluation, the files and ``dvfslab govern`` know of a governor
    class: its ``tags``. A subclass states its own in full (``tags = GovernorTags(...)``)."""

    #: learns from the training workloads (a CV fold refits it); False: fitted once on all
    needs_training: bool = True
    #: what its file holds: parameters (``"name"``) and fitted state (``"name_"``); empty: nothing
    #: to save (it is built, not learned)
    saves: tuple[str, ...] = ()
    #: the knobs it can decide (empty: any)
    knobs: tuple[str, ...] = ()
    #: decides from a probe of the running job: a :class:`ProbingGovernor` (the registry checks it)
    probes: bool = False
    #: may be recommended in place of FFG (False: FFG itself is the default; the baseline and the
    #: oracle are yardsticks)
    recommendable: bool = True
    #: ``""`` when ``dvfslab govern`` can use it; else the one-line reason it cannot
    not_on_command_line: str = ""


#: the class attributes of dvfslab before ``tags``, each a read-only view of one field
LEGACY_TAGS: dict[str, str] = {"needs_training": "needs_training", "saves": "saves", "knobs": "knobs",
                               "probing": "probes", "recommendable": "recommendable",
                               "command_line": "not_on_command_line"}


class _TagView:
    """``cls.needs_training``, ``gov.probing`` ...: the class's ``tags`` field, read-only (code
    written before :class:`GovernorTags` reads them so)."""

    def __init__(self, field: str):
        self.field = field

    def __get__(self, obj: Any, owner: type) -> Any:
        return getattr(owner.tags, self.field)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"a governor's {self.field} is in its class's tags (GovernorTags)")


class Governor(Params):
    """The base of every governor (module doc). Subclasses set ``name``, ``summary`` and ``tags``."""

    #: the registry name (``policy`` in the replay's tables and in saved files)
    name: ClassVar[str] = ""
    #: one line for ``dvfslab govern --help`` and the docs
    summary: ClassVar[str] = ""
    #: what the rest of dvfslab needs to know of it (:class:`GovernorTags`)
    tags: ClassVar[GovernorTags] = GovernorTags()
    #: the old flags this class set itself (folded into its tags; none in dvfslab's governors)
    _legacy_flags: ClassVar[tuple[str, ...]] = ()

    needs_training = _TagView("needs_training")
    saves = _TagView("saves")
    knobs = _TagView("knobs")
    probing = _TagView("probes")
    recommendable = _TagView("recommendable")
    command_line = _TagView("not_on_command_line")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a class written before tags (``needs_training = False`` ...): its flags become its tags
        legacy = {LEGACY_TAGS[k]: cls.__dict__[k] for k in LEGACY_TAGS
                  if k in cls.__dict__ and not isinstance(cls.__dict__[k], _TagView)}
        cls._legacy_flags = tuple(k for k in LEGACY_TAGS if LEGACY_TAGS[k] in legacy)  # the tests list them
        if legacy:
            cls.tags = replace(cls.tags, **legacy)
            for k in LEGACY_TAGS:
                if k in cls.__dict__:
                    delattr(cls, k)
        own = cls.__dict__.get("decide")
        if callable(own) and not getattr(own, "_checks_answers", False):
            cls.decide = _check_no_answers(own)  # type: ignore[method-assign]

    def fit(self, data: TrainingData | None = None) -> Self:
        """Learn from ``data`` (None: for a governor that needs none); records the knob."""
        wrong_knob = Governor.unusable_reason(self, data) if data is not None else ""  # the knob only: no steps read
        if wrong_knob:
            raise GovernorError(f"{self.name}: {wrong_knob}")
        self.knob_ = data.knob.name if data is not None else (self.tags.knobs or (DEFAULT_KNOB,))[0]
        self._fit(data)
        return self

    def _fit(self, data: TrainingData | None) -> None:
        """What ``fit`` learns (nothing by default)."""

    def _require(self, data: TrainingData | None) -> TrainingData:
        """``data``, or a :class:`GovernorError` saying this governor needs it."""
        if data is None:
            raise GovernorError(f"{self.name}: needs training data (a sweep) to fit")
        return data

    def check_state(self) -> None:
        """Raise :class:`GovernorError` unless the fitted state (e.g. read from a file) is well formed."""

    def own_levels(self) -> list[float]:
        """The level table it was fitted on, onto which its answers are snapped (empty: none)."""
        return []

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        raise NotImplementedError

    def unusable_reason(self, data: TrainingData) -> str:
        """Why this governor cannot be evaluated on ``data`` (``""``: it can)."""
        if self.tags.knobs and data.knob.name not in self.tags.knobs:
            knobs = " or ".join(f"the {get_knob(k).label} ({get_knob(k).unit})" for k in self.tags.knobs)
            why = f"it decides {knobs} and the knob here is the {data.knob.label} ({data.knob.unit})"
            if data.knob.name == SETTING:
                why += ("; a joint setting's level is the index of a setting of several clocks, which it neither "
                        "names nor can follow: use ffg, mlg, curve, profiled, zeus, voi or search (coordinate moves) there")
            return why
        return ""

    def fallback_note(self) -> str:
        """Why this fitted governor could not learn from its training data and fell back (to FFG's
        level): its fitted state's ``info`` says ``fallback`` and ``cannot_learn`` (no feature
        varies, one workload, one level: the tree's and the curve model's fits write them);
        ``""`` when it learned."""
        for attr in self.tags.saves:
            state = getattr(self, attr, None) if attr.endswith("_") else None
            info = state.get("info") if isinstance(state, Mapping) else None
            if isinstance(info, Mapping) and info.get("fallback"):
                return (f"could not learn ({info.get('cannot_learn') or 'nothing to learn'}): falls back to "
                        f"{str(info['fallback']).upper()}")
        return ""

    def _fitted(self, attr: str) -> Any:
        try:
            return getattr(self, attr)
        except AttributeError:
            raise GovernorError(f"{self.name}: not fitted — call fit(data) first, or load a saved one "
                                "(dvfslab.governors.files.load_governor)") from None


class LevelGovernor(Governor):
    """A governor that names a level from the workload's features (FFG, the trees).

    Under a slowdown limit it keeps its level when the objective's time model predicts that the
    level meets the limit, else steps up (:meth:`~dvfslab.governors.objective.Objective.admit`).
    """

    def level_for(self, workload: Mapping[str, Any]) -> float | None:
        """The level it names, before the objective's slowdown limit."""
        raise NotImplementedError

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        return Decision(self.objective.admit(self.level_for(workload), workload, self.name))


class ProbeSession:
    """One job being probed: ask :meth:`next_probe` (a replay: the level and how many units) or
    :meth:`next_level` (live: the level of the next step), run that, :meth:`observe` it; repeat
    until :attr:`done`; then :meth:`decision`. After the probing, :meth:`next_level` returns the
    decided level for the rest of the job. The default: ``profiling_steps`` probes of one unit."""

    profiling_steps: int
    observed: list[ProbeStep]

    @property
    def done(self) -> bool:
        return len(self.observed) >= self.profiling_steps

    def next_level(self) -> float | None:
        raise NotImplementedError

    def next_probe(self) -> tuple[float | None, float]:
        """``(level, units)`` of the next probe (one unit unless the session says otherwise)."""
        return self.next_level(), 1.0

    @property
    def note(self) -> str:
        """What the decision should report besides its level (``""``: nothing)."""
        return ""

    def stretch(self, level: float | None, units: float, model: ProbeModel | None) -> float:
        """The units a replay runs for a probe of ``units`` asked at ``level``: a reading takes at
        least the level's window on the machine (``model.window(level)``; no model: as asked)."""
        return float(units) if model is None else max(float(units), model.window(level))

    def observe(self, step: ProbeStep) -> None:
        raise NotImplementedError

    @property
    def level(self) -> float | None:
        """The decided level (once :attr:`done`)."""
        raise NotImplementedError

    def decision(self) -> Decision:
        if not self.done:
            raise GovernorError(f"the level is chosen during the run: {len(self.observed)} of "
                                f"{self.profiling_steps} probing steps so far")
        return Decision(self.level, tuple(self.observed), self.note)


class ProbingGovernor(Governor):
    """A governor that decides from steps of the job it measures (module doc)."""

    tags: ClassVar[GovernorTags] = GovernorTags(probes=True)

    def start(self, workload: Mapping[str, Any], levels: Sequence[float],
              model: ProbeModel | None = None) -> ProbeSession:
        """A session probing one job that can run ``levels``; ``model``: the probe's
        :class:`~dvfslab.governors.probemodel.ProbeModel` (None: none), for a session that plans
        its windows (``zeus``, ``voi``)."""
        raise NotImplementedError

    def decide(self, workload: Mapping[str, Any], probe: Probe | None = None) -> Decision:
        if probe is None:
            raise GovernorError(f"{self.name}: the level is chosen during the run, from steps it measures — give it "
                                "a probe (a replay does), or run it live with "
                                "dvfslab.harness.online_callback.OnlineDvfsCallback")
        model = probe_model(probe)
        session = self.start(workload, probe.levels, model)
        hand_over = getattr(probe, "on_session", None)  # a live probe tells the session of epoch ends
        if hand_over is not None:
            hand_over(session)
        while not session.done:
            level, units = session.next_probe()
            stretch = getattr(session, "stretch", None)  # a session not derived from ProbeSession: the default
            units = (stretch(level, units, model) if stretch is not None else
                     ProbeSession.stretch(session, level, units, model))  # at least the level's window
            time_s, energy_j = probe.measure(level, units)
            session.observe(ProbeStep(level, time_s, energy_j, units))
        return session.decision()

    def unusable_reason(self, data: TrainingData) -> str:
        return super().unusable_reason(data) or self.steps_reason(data)

    def steps_reason(self, data: TrainingData) -> str:
        """Why the dataset's steps cannot feed its probe (``""``: they can)."""
        return ""
