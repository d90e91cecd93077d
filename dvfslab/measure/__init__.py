"""Measuring energy: a power sampler, named windows, trapezoid integration, saved traces.

The public face of the room (see docs/power.md): :class:`PowerSampler` collects samples from a
:class:`~dvfslab.hw.base.PowerReader` and measures windows; :class:`Measurement` is what a
window measured; the ``integrate_*`` functions are the pure integration it uses;
:func:`load_samples` and :class:`ReplayPowerReader` read and replay saved traces.
"""

from dvfslab.measure.energy import (
    EnergyInputError,
    Measurement,
    integrate_energy,
    integrate_intervals,
    integrate_window,
)
from dvfslab.measure.sampler import PowerSampler, SamplerError, WindowError
from dvfslab.measure.trace import ReplayPowerReader, SampleFileError, load_samples

__all__ = [
    "EnergyInputError", "Measurement", "PowerSampler", "ReplayPowerReader", "SampleFileError",
    "SamplerError", "WindowError", "integrate_energy", "integrate_intervals", "integrate_window",
    "load_samples",
]
