"""Level policies: which GPU level a fine-tuning run runs at, asked by the one callback.

:class:`~dvfslab.harness.callback.DvfsCallback` owns the clocks and the power sampler; a policy
only answers questions, so each way of choosing a level is a few lines:

* :class:`LevelPolicy` (the base, ``default``): leave the clocks to the board's governor;
* :class:`FixedLevel`: lock one level for the whole run (an exact level: a typo must not run
  the experiment somewhere else);
* :class:`GovernorLevel`: ask a governor once, before training, from the workload's features;
  its answer is snapped to the board's levels by :func:`dvfslab.core.levels.snap_mhz`;
* :class:`OnlineLevel`: the online profiler of :mod:`dvfslab.governors.online`, asked before
  every step, fed each probing step's energy and time, then holding its chosen level.
"""

from __future__ import annotations

from collections.abc import Mapping

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

    def __init__(self, governor, features: Mapping | None = None):
        self.governor = governor
        self.features = dict(features or {})
        self.name = str(getattr(governor, "name", type(governor).__name__))

    def start_mhz(self) -> float | None:
        choice = self.governor.decide(self.features)
        return None if choice is None else float(choice)


class OnlineLevel(LevelPolicy):
    """Live probing with an :class:`~dvfslab.governors.online.OnlineProfiler`, step by step."""

    name = "online"
    per_step = True
    needs_energy = True

    def __init__(self, profiler):
        self.profiler = profiler

    def step_mhz(self) -> float | None:
        return self.profiler.next_level()

    @property
    def probing(self) -> bool:
        return not self.profiler.done

    def observe(self, freq_mhz: float | None, energy_j: float, time_s: float) -> None:
        self.profiler.observe(freq_mhz, energy_j, time_s)


def policy_for(freq_mhz: float | None = None, governor=None, features: Mapping | None = None) -> LevelPolicy:
    """The policy for the classic arguments: a fixed level, a governor, or neither."""
    if freq_mhz is not None and governor is not None:
        raise FinetuneError("give either freq_mhz or a governor, not both")
    if freq_mhz is not None:
        return FixedLevel(freq_mhz)
    if governor is not None:
        return GovernorLevel(governor, features)
    return LevelPolicy()
