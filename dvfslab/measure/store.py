"""The sampler's sample store: append-only rows of numbers behind one lock.

:class:`SampleStore` keeps what a :class:`~dvfslab.measure.sampler.PowerSampler` has read, 8
bytes a value, and hands out copies as :class:`~dvfslab.measure.energy.SampleArrays` (all of
them, or those covering a window) for the pure integration in :mod:`dvfslab.measure.energy`.
Storing a sample is one ``extend`` of a flat array: it runs in the sampler thread at every tick.
"""

from __future__ import annotations

import bisect
import math
import operator
import threading
from array import array
from collections.abc import Mapping

import numpy as np

from dvfslab.hw.base import PowerSample
from dvfslab.measure.energy import SampleArrays


class SampleStore:
    """Append-only samples guarded by ``lock``.

    ``t`` holds the timestamps (bisected to cut windows); ``rows`` holds one interleaved row
    per sample: ``t_s, rail_1 … rail_n, gpu_util_pct, gpu_freq_mhz`` (NaN when absent);
    ``lost`` holds the times of failed reads.
    """

    def __init__(self, rails: tuple[str, ...]):
        self.rails = rails
        self.width = len(rails) + 3
        pick = operator.itemgetter(*rails)  # one C call per sample instead of a comprehension
        self._rail_values = (lambda p: (pick(p),)) if len(rails) == 1 else pick
        self.lock = threading.Lock()
        self.t = array("d")
        self.rows = array("d")
        self.lost = array("d")
        self.has_util = self.has_freq = False

    def __len__(self) -> int:
        return len(self.t)

    def append(self, s: PowerSample) -> None:
        """Store one sample (caller holds ``lock``); KeyError for a missing rail, ValueError
        when time runs backwards. Nothing is stored unless the whole row is valid."""
        util, freq = s.gpu_util_pct, s.gpu_freq_mhz
        row = array("d", (s.t_s, *self._rail_values(s.power_mw),
                          math.nan if util is None else util, math.nan if freq is None else freq))
        if self.t and row[0] < self.t[-1]:
            raise ValueError(f"sample time {row[0]!r} s is before the previous sample {self.t[-1]!r} s")
        self.t.append(row[0])
        self.rows.extend(row)
        self.has_util = self.has_util or util is not None
        self.has_freq = self.has_freq or freq is not None

    def extend(self, t_s: np.ndarray, rails_mw: Mapping[str, np.ndarray], util: np.ndarray | None,
               freq: np.ndarray | None) -> None:
        """Store many samples at once (caller holds ``lock``); same checks as :meth:`append`."""
        t = np.asarray(t_s, dtype=float)
        if t.size == 0:
            return
        cols = [t, *(np.broadcast_to(np.asarray(rails_mw[r], dtype=float), t.shape) for r in self.rails)]
        cols += [np.full(t.shape, math.nan) if v is None else np.broadcast_to(np.asarray(v, dtype=float), t.shape)
                 for v in (util, freq)]
        if np.any(np.diff(t) < 0) or (self.t and t[0] < self.t[-1]):
            raise ValueError("sample times must not decrease (within the block and after the stored samples)")
        self.t.frombytes(t.tobytes())
        self.rows.frombytes(np.column_stack(cols).tobytes())
        self.has_util = self.has_util or util is not None
        self.has_freq = self.has_freq or freq is not None

    def arrays(self, t0_s: float | None = None, t1_s: float | None = None) -> SampleArrays:
        """Copy of the samples covering ``[t0_s, t1_s]`` plus one neighbour on each side."""
        with self.lock:
            lo = 0 if t0_s is None else max(bisect.bisect_left(self.t, t0_s) - 1, 0)
            hi = len(self.t) if t1_s is None else bisect.bisect_right(self.t, t1_s) + 1
            block = self.rows[lo * self.width:hi * self.width]  # an array copy, not a view
            lost = np.array(self.lost)
            has_util, has_freq = self.has_util, self.has_freq
        table = np.frombuffer(block, dtype=float).reshape(-1, self.width) if block else np.empty((0, self.width))
        return SampleArrays(
            t_s=table[:, 0],
            rails_mw={r: table[:, 1 + i] for i, r in enumerate(self.rails)},
            gpu_util_pct=table[:, -2] if has_util else None,
            gpu_freq_mhz=table[:, -1] if has_freq else None,
            lost_t_s=lost,
        )
