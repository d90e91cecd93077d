"""The Jetson backend: devfreq GPU clocks, INA3221 rails, load, temperatures, nvpmodel.

Every path is under an injectable ``sysfs_root`` (``/`` on a board) read through one
:class:`~dvfslab.hw.jetson.sysfs.SysfsIO`, which a caller may inject (``io=``; tests pass a
fake kernel). The pieces live in :mod:`.clocks` (clock control), :mod:`.power` (rails, load,
thermal), :mod:`.board` (model, release, family), :mod:`.safety` (state file, signal guard) and
:mod:`.sysfs` (the I/O seam); this
module puts them together in :func:`open_backend`.
"""

from __future__ import annotations

import time

from dvfslab.hw.base import Backend, BackendUnavailableError, PowerReadError
from dvfslab.hw.jetson.board import board_model, board_module, jetpack_release
from dvfslab.hw.jetson.clocks import JetsonClocks, find_gpu_devfreq
from dvfslab.hw.jetson.nvpmodel import read_power_mode
from dvfslab.hw.jetson.power import JetsonPowerReader, JetsonTelemetry
from dvfslab.hw.jetson.sysfs import SysfsIO, default_io

__all__ = ["open_backend"]


def open_backend(sysfs_root="/", state_dir=None, io: SysfsIO | None = None, power_mode_ok: bool = False,
                 **kw) -> Backend:
    """Open the Jetson backend under ``sysfs_root`` (through ``io`` when given).

    Raises :class:`BackendUnavailableError` when no GPU devfreq node is found. Rails that
    cannot be found leave ``power=None`` (the reason is in ``description["power_error"]``).
    ``power_mode_ok`` lets a sweep's baseline check accept a mode other than MAXN. Unknown
    keyword arguments (meant for other backends) are ignored.
    """
    io = io if io is not None else default_io(sysfs_root)
    if not io.exists("sys/class/devfreq"):
        raise BackendUnavailableError(f"{io.path('sys/class/devfreq')} does not exist (not a Jetson)")
    node = find_gpu_devfreq(io)
    clocks = JetsonClocks(io=io, node=node, state_dir=state_dir, power_mode_ok=power_mode_ok)
    telemetry = JetsonTelemetry(io=io, devfreq_rel=node.rel)
    description = {
        "board": board_model(io),
        # the module by the part number the device tree names (None: no known one); the model string
        # cannot tell an Orin NX 16GB from an 8GB (docs/hardware.md, "Module records")
        "part_number": (module := board_module(io)) and module.part_number,
        "module": module and module.key,
        "jetpack": jetpack_release(io),
        "power_mode": None,
        "gpu": node.gpu,
        "devfreq": str(io.path(node.rel)),
        "levels_mhz": clocks.levels_mhz(),
        "clock_writable": clocks.writable(),
        "rails": [],
        "total_rails": [],
        "simulated": False,
    }
    mode = read_power_mode(io)
    description["power_mode"] = mode.describe() if mode else None
    description["power_mode_gpu_max_mhz"] = mode.gpu_max_mhz if mode else None
    description["railgate_control"] = clocks.railgate_state()
    power = None
    try:
        power = JetsonPowerReader(io=io, devfreq_rel=node.rel, clock=time.monotonic)
        description.update(rails=list(power.rails), total_rails=list(power.total_rails),
                           rail_family=power.board_family, update_interval_s=power.update_interval_s)
    except PowerReadError as err:
        description["power_error"] = str(err)
    return Backend(name="jetson", clocks=clocks, power=power, telemetry=telemetry,
                   clock=time.monotonic, description=description, simulated=False, virtual_time=False)
