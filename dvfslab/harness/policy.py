"""Level policies: which GPU level a fine-tuning run runs at, asked by the one callback.

:class:`~dvfslab.harness.callback.DvfsCallback` owns the clocks and the power sampler; a policy
only answers questions, so each way of choosing a level is a few lines:

* :class:`LevelPolicy` (the base, ``default``): leave the clocks to the board's governor;
* :class:`FixedLevel`: lock one level for the whole run (an exact level: a typo must not run
  the experiment somewhere else);
* :class:`GovernorLevel`: ask a governor once, before training, from the workload's features;
  its answer is snapped to the board's levels by :func:`dvfslab.core.levels.snap_mhz`;
* :class:`OnlineLevel`: a probing governor's session (:class:`dvfslab.governors.base.ProbeSession`:
  the online governor, the profiled one), asked before every step, fed each probing step's
  energy and time, then holding its chosen level.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvfslab.governors.base import Governor, ProbeSession, ProbeStep
from dvfslab.harness.types import FinetuneError


class LevelPolicy:
    """Leave the clocks alone (the board's own governor decides); the base of every policy.

    ``start_mhz()``: the level to lock when training begins (None: do not touch the clocks).
    ``per_step``: ask ``step_mhz()`` before every optimizer step (None: give the clocks back).
    ``probing``: measure the coming step's energy and pass it to ``observe``.
    ``nearest``: snap a request to the nearest level instead of demanding an exact one.
    """

    name = "default"
    nearest = False
    per_step = False
    needs_energy = False

    def start_mhz(self) -> float | None:
        return None

    def step_mhz(self) -> float | None:
        return None

    @property
    def probing(self) -> bool:
        return False

    def observe(self, freq_mhz: float | None, energy_j: float, time_s: float) -> None:
        """A probing step ran at ``freq_mhz`` and took ``energy_j`` (CPU + GPU) in ``time_s``."""


class FixedLevel(LevelPolicy):
    """One exact GPU level for the whole run."""

    name = "fixed"

    def __init__(self, freq_mhz: float):
        self.freq_mhz = float(freq_mhz)

    def start_mhz(self) -> float | None:
        return self.freq_mhz


class GovernorLevel(LevelPolicy):
    """A governor's ``decide(features)``, asked once before training; None leaves the clocks."""

    nearest = True

    def __init__(self, governor: Governor, features: Mapping | None = None):
        self.governor = governor
        self.features = dict(features or {})
        self.name = governor.name

    def start_mhz(self) -> float | None:
        choice = self.governor.decide(self.features).level
        return None if choice is None else float(choice)


class OnlineLevel(LevelPolicy):
    """Live probing with a probing governor's :class:`~dvfslab.governors.base.ProbeSession`, step by step."""

    per_step = True
    needs_energy = True
    nearest = True

    def __init__(self, session: ProbeSession, name: str = "online"):
        self.session = session
        self.name = name

    def step_mhz(self) -> float | None:
        return self.session.next_level()

    @property
    def probing(self) -> bool:
        return not self.session.done

    def observe(self, freq_mhz: float | None, energy_j: float, time_s: float) -> None:
        self.session.observe(ProbeStep(freq_mhz, time_s, energy_j))

    def epoch_end(self) -> None:
        """The training epoch ended: a session that restarts its window there (Zeus's) is told."""
        tell = getattr(self.session, "epoch_end", None)
        if tell is not None:
            tell()


def policy_for(freq_mhz: float | None = None, governor: Governor | None = None,
               features: Mapping | None = None) -> LevelPolicy:
    """The policy for the classic arguments: a fixed level, a governor, or neither."""
    if freq_mhz is not None and governor is not None:
        raise FinetuneError("give either freq_mhz or a governor, not both")
    if freq_mhz is not None:
        return FixedLevel(freq_mhz)
    if governor is not None:
        return GovernorLevel(governor, features)
    return LevelPolicy()
