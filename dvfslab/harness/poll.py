"""GPU load and clock read at step ends, for what the power samples do not carry.

The Jetson reader's samples carry both (time-weighted means come from the samples then); a
reader without them, or no power reader at all, leaves these polls as the only source.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from dvfslab.hw.base import Backend

log = logging.getLogger(__name__)


def mean_or_none(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


class TelemetryPoll:
    """Reads GPU load and clock at most every ``period_s`` (on the caller's clock)."""

    def __init__(self, backend: Backend, period_s: float = 0.1):
        self.backend = backend
        self.period_s = period_s
        self.util_pct: list[float] = []
        self.freq_mhz: list[float] = []
        self.last_t_s = -math.inf
        self.want_util = backend.telemetry is not None
        self.want_freq = backend.clocks is not None

    def skip_what(self, sampler) -> None:
        """Poll only what ``sampler``'s samples lack (probed with one read)."""
        if sampler is None:
            return
        try:
            probe = sampler.reader.read()
        except Exception as err:  # the sampler counts read failures itself
            log.debug("probe read failed: %s", err)
            return
        self.want_util &= probe.gpu_util_pct is None
        self.want_freq &= probe.gpu_freq_mhz is None

    def maybe_poll(self, t_s: float) -> None:
        """Read load and clock when ``period_s`` has passed since the last poll."""
        if not (self.want_util or self.want_freq) or t_s - self.last_t_s < self.period_s:
            return
        self.last_t_s = t_s
        try:
            load = self.backend.telemetry.gpu_load_pct() if self.want_util else None
            if load is not None:
                self.util_pct.append(float(load))
            if self.want_freq:
                self.freq_mhz.append(float(self.backend.clocks.state().cur_freq_mhz))
        except Exception as err:  # telemetry must never stop training
            log.debug("telemetry poll failed: %s", err)
