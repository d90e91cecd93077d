"""Measuring energy: a power sampler, named windows, trapezoid integration, saved traces.

The public face of the room (see docs/power.md): :class:`PowerSampler` collects samples from a
:class:`~dvfslab.hw.base.PowerReader` and measures windows; :class:`Measurement` is what a
window measured; the ``integrate_*`` functions are the pure integration it uses;
:func:`load_samples` and :class:`ReplayPowerReader` read and replay saved traces;
:func:`read_tegrastats` / :func:`import_tegrastats` turn a tegrastats log into such a trace.
"""

from dvfslab.measure.energy import (
    EnergyInputError,
    Measurement,
    integrate_energy,
    integrate_intervals,
    integrate_window,
)
from dvfslab.measure.sampler import PowerSampler, SamplerError, WindowError
from dvfslab.measure.tegrastats import import_tegrastats, read_tegrastats
from dvfslab.measure.trace import ReplayPowerReader, SampleFileError, load_samples

__all__ = [
    "EnergyInputError", "Measurement", "PowerSampler", "ReplayPowerReader", "SampleFileError",
    "SamplerError", "WindowError", "import_tegrastats", "integrate_energy", "integrate_intervals",
    "integrate_window", "load_samples", "read_tegrastats",
]
