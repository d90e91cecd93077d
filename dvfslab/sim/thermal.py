"""The twin's thermal model: one first-order RC node per board. Simulated.

The GPU temperature relaxes exponentially towards ``ambient + R·P`` with time constant ``tau``
while the CPU+GPU rails draw ``P`` watts. It feeds the telemetry (and so the sweep's cool-down)
only: there is no feedback on power or clocks. Parameters are the profile's ``ambient_c``,
``thermal_r_c_per_w`` and ``thermal_tau_s`` (docs/calibration.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dvfslab.sim.model import BoardProfile

__all__ = ["ThermalModel"]


@dataclass
class ThermalModel:
    """GPU temperature (°C) of a board held at ``power_w`` for ``dt_s`` at a time."""

    ambient_c: float
    r_c_per_w: float
    tau_s: float
    temp_c: float

    @classmethod
    def from_profile(cls, profile: BoardProfile) -> ThermalModel:
        """The profile's thermal parameters, starting at ambient temperature."""
        return cls(profile.ambient_c, profile.thermal_r_c_per_w, profile.thermal_tau_s, profile.ambient_c)

    def steady_c(self, power_w: float) -> float:
        """The temperature the board settles at under a constant ``power_w``."""
        return self.ambient_c + self.r_c_per_w * power_w

    def heat(self, dt_s: float, power_w: float) -> None:
        """Advance ``dt_s`` seconds at a constant ``power_w`` (exact for piecewise-constant power)."""
        target = self.steady_c(power_w)
        self.temp_c = target + (self.temp_c - target) * math.exp(-dt_s / self.tau_s)
