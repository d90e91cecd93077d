"""The Jetson backend (devfreq clocks, INA3221 rails, load, thermal) and its sysfs I/O seam.

``open_backend(sysfs_root="/", io=None)`` is what :func:`dvfslab.hw.get_backend` calls for
``"jetson"``; :class:`JetsonClocks` and :class:`JetsonPowerReader` are the two halves for
callers that want only one. :class:`SysfsIO` is the one object every sysfs read and write goes
through; :func:`default_io` gives the plain one, or the class injected by ``$DVFSLAB_SYSFS_IO``
(docs/hardware.md).

The board's rules (docs/hardware.md): :func:`read_power_mode` (nvpmodel mode and its GPU
limits), :func:`effective_range` / :func:`baseline_check` (devfreq QoS range, MAXN baseline),
:func:`verify_lock` (BPMP clock counter), :func:`railgate_state` (``gpu.0/power/control``);
the other clocks :class:`EmcClock` (the BPMP's debugfs EMC) and :class:`CpuClusters` (cpufreq),
pinned through :meth:`JetsonClocks.other_clocks`.
:func:`sensor_update_period_s` and :func:`other_sensor_readers` describe the
power monitors (their conversion cycle; other processes reading them).
"""

from __future__ import annotations

from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.baseline import (
    BaselineCheck,
    EffectiveRange,
    baseline_check,
    effective_range,
)
from dvfslab.hw.jetson.bpmp import verify_lock
from dvfslab.hw.jetson.clocks import JetsonClocks, JetsonPinnedClock, find_gpu_devfreq
from dvfslab.hw.jetson.cpufreq import CpuClusters
from dvfslab.hw.jetson.emc import EmcClock
from dvfslab.hw.jetson.ina import other_sensor_readers, sensor_update_period_s
from dvfslab.hw.jetson.nvpmodel import PowerMode, read_power_mode
from dvfslab.hw.jetson.power import JetsonPowerReader, JetsonTelemetry
from dvfslab.hw.jetson.railgate import railgate_state
from dvfslab.hw.jetson.sysfs import SYSFS_IO_ENV, SysfsIO, default_io

__all__ = [
    "BaselineCheck",
    "CpuClusters",
    "EffectiveRange",
    "EmcClock",
    "JetsonPinnedClock",
    "JetsonClocks",
    "JetsonPowerReader",
    "JetsonTelemetry",
    "PowerMode",
    "SYSFS_IO_ENV",
    "SysfsIO",
    "baseline_check",
    "default_io",
    "effective_range",
    "find_gpu_devfreq",
    "open_backend",
    "railgate_state",
    "read_power_mode",
    "verify_lock",
    "other_sensor_readers",
    "sensor_update_period_s",
]
