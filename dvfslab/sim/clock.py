"""The twin's virtual clock: time that moves only when the board is stepped. Simulated.

Nothing here sleeps: :class:`VirtualClock` is a number of seconds that
:class:`~dvfslab.sim.board.SimBoard` advances as it trains or idles, and ``now`` is what the
backend hands out as its ``clock``. :func:`next_multiple` and :func:`tick_times` place the
governor's polls and the sampler's ticks on fixed grids of that time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["VirtualClock", "next_multiple", "tick_times"]


@dataclass
class VirtualClock:
    """Virtual time in seconds; only :meth:`advance_to` / :meth:`advance_by` move it."""

    t_s: float = 0.0

    def now(self) -> float:
        """The current virtual time (s): the simulated backend's ``clock``."""
        return self.t_s

    def advance_to(self, t_s: float) -> None:
        """Jump to ``t_s`` (the board never moves time backwards)."""
        self.t_s = t_s

    def advance_by(self, dt_s: float) -> None:
        self.t_s += dt_s


def next_multiple(t_s: float, period_s: float) -> float:
    """The first multiple of ``period_s`` strictly after ``t_s``."""
    return (math.floor(t_s / period_s) + 1) * period_s


def tick_times(t_from_s: float, t_to_s: float, tick_s: float) -> np.ndarray:
    """The multiples of ``tick_s`` in ``(t_from_s, t_to_s]``."""
    k = np.arange(math.floor(t_from_s / tick_s) + 1, math.floor(t_to_s / tick_s) + 2, dtype=float) * tick_s
    return k[(k > t_from_s) & (k <= t_to_s)]
