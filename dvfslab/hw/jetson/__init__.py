"""The Jetson backend (devfreq clocks, INA3221 rails, load, thermal) and its sysfs I/O seam.

``open_backend(sysfs_root="/", io=None)`` is what :func:`dvfslab.hw.get_backend` calls for
``"jetson"``; :class:`JetsonClocks` and :class:`JetsonPowerReader` are the two halves for
callers that want only one. :class:`SysfsIO` is the one object every sysfs read and write goes
through; :func:`default_io` gives the plain one, or the class injected by ``$DVFSLAB_SYSFS_IO``
(docs/hardware.md). :func:`sensor_update_period_s` and :func:`other_sensor_readers` describe the
power monitors (their conversion cycle; other processes reading them).
"""

from __future__ import annotations

from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.clocks import JetsonClocks, find_gpu_devfreq
from dvfslab.hw.jetson.ina import other_sensor_readers, sensor_update_period_s
from dvfslab.hw.jetson.power import JetsonPowerReader, JetsonTelemetry
from dvfslab.hw.jetson.sysfs import SYSFS_IO_ENV, SysfsIO, default_io

__all__ = [
    "JetsonClocks",
    "JetsonPowerReader",
    "JetsonTelemetry",
    "SYSFS_IO_ENV",
    "SysfsIO",
    "default_io",
    "find_gpu_devfreq",
    "open_backend",
    "other_sensor_readers",
    "sensor_update_period_s",
]
