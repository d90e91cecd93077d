"""The load-driven GPU clock governor of the simulated board in MAXN (``nvhost_podgov``). Simulated.

A model of the driver of L4T r36 (JetPack 6, the study's L4T 36.4.7): NVIDIA's out-of-tree module
``drivers/devfreq/governor_pod_scaling.c`` (linux-nv-oot, copyright 2012-2023; read in the public
mirror sradcliffe-nottinghamspirk/linux-nv-oot @ 85c4d41d99e58e421cd8f5eb97e63d2290e1377b), driven
by the GPU driver's devfreq profile (nvgpu ``os/linux/scale.c``, ``gk20a_scale_init``). Every
parameter, with where it is set:

* load sampling: devfreq polls every 25 ms (``scale.c``: ``devfreq_profile.polling_ms = 25``);
  the first level is the table's lowest (``initial_freq = freq_table[0]``);
* each poll: ``norm_load = f·busy/total``; ``cycles_avg = (cycles_avg·smooth + norm_load) /
  (smooth + 1)``; ``rt_load = busy/total`` (``nvhost_pod_estimate_freq``); no history buffer
  (``MAX_HISTORY_BUF_SIZE`` is 0 unless ``CONFIG_DEVFREQ_GOV_POD_SCALING_HISTORY_BUFFER_SIZE_MAX``
  is set; L4T's defconfig was not checked: unverified);
* a new level is computed only when at least ``block_window`` = 50 ms have passed since the last
  change (``scaling_state_check``: ``dt < p_block_window`` returns 0, ``last_scale`` is set when
  the level changes);
* ``busyness = cycles_avg / f``; if ``rt_load > load_max`` (900 ‰): ``boost = f_max/3``,
  ``damp = 10``; else ``boost = bias·f·(busyness − load_target)/load_target`` (bias 80 %,
  target 700 ‰), at most ``f_max/3``; ``res = f + boost``; ``freq_avg = (freq_avg·smooth + res) /
  (smooth + 1)`` (``freq_avg`` starts at 0); ``res = (damp·res + (10 − damp)·freq_avg)/10``
  (damp 7); clamped to the allowed range and rounded up to a level (``freqlist_up(…, 0)``);
* defaults (``nvhost_pod_init``): ``p_load_max = 900``, ``p_load_target = 700``, ``p_bias = 80``,
  ``p_smooth = 10``, ``p_damp = 7``, ``p_block_window = 50000`` µs.

The driver computes in whole MHz and ‰ with integer division; the model uses real numbers (a
difference below one MHz before the round-up to a level). Used by
:class:`~dvfslab.sim.board.SimBoard` whenever its clock is not locked and by
:func:`dvfslab.sim.spec.evaluate` for the default governor.
"""

from __future__ import annotations

__all__ = ["PodGovernor"]


class PodGovernor:
    """``nvhost_podgov`` of L4T r36 (see the module doc for each rule and its source)."""

    #: what changes as it runs: a snapshot of these (a resumed twin sweep) continues it exactly
    STATE = ("cycles_avg", "freq_avg", "since_change_s")

    def __init__(self, levels_mhz, cap_mhz: float, *, load_target: float = 0.70, load_max: float = 0.90,
                 bias: float = 0.80, smooth: int = 10, damp: int = 7, poll_s: float = 0.025,
                 block_window_s: float = 0.050):
        self.levels = [float(f) for f in levels_mhz if f <= cap_mhz + 0.5]
        self.fmin, self.cap = self.levels[0], self.levels[-1]
        self.load_target, self.load_max, self.bias = load_target, load_max, bias
        self.smooth, self.damp, self.poll_s, self.block_window_s = smooth, damp, poll_s, block_window_s
        self.reset_idle()

    def reset_idle(self) -> None:
        """State of a governor that has watched an idle GPU for a while (no cycles, no requests)."""
        self.cycles_avg, self.freq_avg = 0.0, 0.0
        self.since_change_s = self.block_window_s

    def _round_up(self, freq_mhz: float) -> float:
        return next((f for f in self.levels if f >= freq_mhz - 1e-9), self.cap)

    def decide(self, load: float, freq_mhz: float) -> float:
        """One poll after a window with busy fraction ``load`` at ``freq_mhz``: the level to run at."""
        n = float(self.smooth)
        self.cycles_avg = (self.cycles_avg * n + freq_mhz * load) / (n + 1.0)
        self.since_change_s += self.poll_s
        if self.since_change_s < self.block_window_s - 1e-12:
            return freq_mhz
        max_boost = self.cap / 3.0
        damp = self.damp
        if load > self.load_max:
            boost, damp = max_boost, 10
        else:
            busyness = self.cycles_avg / freq_mhz
            boost = min(max_boost, self.bias * freq_mhz * (busyness - self.load_target) / self.load_target)
        res = freq_mhz + boost
        self.freq_avg = (self.freq_avg * n + res) / (n + 1.0)
        out = (damp * res + (10 - damp) * self.freq_avg) / 10.0
        new = self._round_up(min(max(out, self.fmin), self.cap))
        if new != freq_mhz:
            self.since_change_s = 0.0
        return new

    def skip_busy(self, n_polls: int, load: float, freq_mhz: float) -> None:
        """Advance ``n_polls`` polls of windows busier than ``load_max`` at the cap in closed form.

        In that branch the request is ``f + f_cap/3`` undamped, so at the cap the level does not
        change; only the two averages move (geometrically) towards their inputs.
        """
        rn = (self.smooth / (self.smooth + 1.0)) ** n_polls
        cyc, res = freq_mhz * load, freq_mhz + self.cap / 3.0
        self.cycles_avg = cyc + (self.cycles_avg - cyc) * rn
        self.freq_avg = res + (self.freq_avg - res) * rn
        self.since_change_s += n_polls * self.poll_s
