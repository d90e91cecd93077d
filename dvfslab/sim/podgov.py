"""The load-driven GPU clock governor of the simulated board in MAXN (``nvhost_podgov``). Simulated.

A model of the driver's algorithm (public L4T kernel source, ``governor_pod_scaling.c``), used
by :class:`~dvfslab.sim.board.SimBoard` whenever its clock is not locked; see
docs/calibration.md for how it was checked.
"""

from __future__ import annotations

__all__ = ["PodGovernor"]


class PodGovernor:
    """A load-driven GPU clock governor following the published ``nvhost_podgov`` algorithm.

    Every ``poll_s`` it reads the busy fraction of the last window, keeps exponential averages
    of idle time and of its requests (``smooth``), and asks for ``f + bias·f·(load − target) /
    target`` (at most ``f_max/3`` up), or for a full ``f_max/3`` boost when the window was busier
    than ``load_max``; the request is damped (``damp``/10 of it, the rest from the average),
    clamped and rounded up to a level. Defaults are the driver's: target 70 %, max 90 %, bias
    80 %, smooth 10, damp 7, 50 ms block window.
    """

    def __init__(self, levels_mhz, cap_mhz: float, *, load_target: float = 0.70, load_max: float = 0.90,
                 bias: float = 0.80, smooth: int = 10, damp: int = 7, poll_s: float = 0.05):
        self.levels = [float(f) for f in levels_mhz if f <= cap_mhz + 0.5]
        self.fmin, self.cap = self.levels[0], self.levels[-1]
        self.load_target, self.load_max, self.bias = load_target, load_max, bias
        self.smooth, self.damp, self.poll_s = smooth, damp, poll_s
        self.reset_idle()

    def reset_idle(self) -> None:
        """State of a governor that has watched an idle GPU for a while."""
        self.idle_avg, self.freq_avg = 1.0, self.fmin

    def _round_up(self, freq_mhz: float) -> float:
        return next((f for f in self.levels if f >= freq_mhz - 1e-9), self.cap)

    def decide(self, load: float, freq_mhz: float) -> float:
        """One poll: the level to run at after a window with busy fraction ``load``."""
        r = self.smooth / (self.smooth + 1.0)
        self.idle_avg = r * self.idle_avg + (1.0 - load) / (self.smooth + 1.0)
        max_boost = self.cap / 3.0
        damp = self.damp
        if load > self.load_max:
            boost, damp = max_boost, 10
        else:
            avg_load = 1.0 - self.idle_avg
            boost = min(max_boost, self.bias * freq_mhz * (avg_load - self.load_target) / self.load_target)
        res = freq_mhz + boost
        self.freq_avg = r * self.freq_avg + res / (self.smooth + 1.0)
        out = (damp * res + (10 - damp) * self.freq_avg) / 10.0
        return self._round_up(min(max(out, self.fmin), self.cap))

    def skip_busy(self, n_polls: int, load: float, freq_mhz: float) -> None:
        """Advance ``n_polls`` polls of a window busier than ``load_max`` in closed form.

        In that branch the request is ``f + f_cap/3`` undamped, so at the cap the level does
        not change; only the two averages move (geometrically) towards their inputs.
        """
        rn = (self.smooth / (self.smooth + 1.0)) ** n_polls
        idle, res = 1.0 - load, freq_mhz + self.cap / 3.0
        self.idle_avg = idle + (self.idle_avg - idle) * rn
        self.freq_avg = res + (self.freq_avg - res) * rn
