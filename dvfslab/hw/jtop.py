"""A power reader over jetson-stats (``jtop``), for boards where its service already runs.

jtop reads the same INA3221 rails through its ``jtop.service`` and refreshes them at the
service's interval (``update_interval_s``), so sampling faster than that repeats values;
:class:`~dvfslab.hw.jetson.power.JetsonPowerReader` reads sysfs directly and is the
default. jtop raises ``JtopException`` when its service is not running: that becomes a
:class:`BackendUnavailableError` naming the fix.
"""

from __future__ import annotations

import importlib
import time

from dvfslab.hw.base import Backend, BackendUnavailableError, DvfsError, PowerReadError, PowerSample
from dvfslab.hw.jetson.power import total_rails_for

SERVICE_FIX = ("start it with `sudo systemctl start jtop.service` "
               "(install it first with `sudo jtop --install-service` if it is missing)")


def import_jtop():
    """The ``jtop`` package, or :class:`BackendUnavailableError` with the install command."""
    try:
        return importlib.import_module("jtop")
    except ImportError as err:
        raise BackendUnavailableError("jetson-stats is not installed (pip install 'dvfslab[jetson]')") from err


class JtopPowerReader:
    """:class:`~dvfslab.hw.base.PowerReader` over ``jtop().power`` (mW per rail)."""

    def __init__(self, interval_s: float = 0.5, *, jtop_module=None):
        mod = jtop_module or import_jtop()
        self._jetson = mod.jtop(interval=interval_s)
        try:
            self._jetson.start()
        except mod.JtopException as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise BackendUnavailableError(f"jetson-stats service not reachable ({first}); {SERVICE_FIX}") from err
        rails = self._jetson.power.get("rail", {})
        if not rails:
            self._jetson.close()
            raise BackendUnavailableError("jtop reports no power rails on this board")
        self.rails = tuple(rails)
        self.board_family, self.total_rails = total_rails_for(self.rails)
        self.update_interval_s = float(getattr(self._jetson, "interval", interval_s))

    def _gpu(self) -> tuple[float | None, float | None]:
        """(load %, cur MHz) of the first GPU jtop knows, when it says."""
        try:
            gpu = next(iter(dict(self._jetson.gpu).values()))
            return float(gpu["status"]["load"]), float(gpu["freq"]["cur"]) / 1000.0  # kHz -> MHz
        except (StopIteration, KeyError, TypeError, ValueError, AttributeError):
            return None, None

    def read(self) -> PowerSample:
        """The rails as jtop last refreshed them, stamped with ``time.monotonic()``."""
        t_s = time.monotonic()
        try:
            rails = self._jetson.power["rail"]
            power = {name: float(rails[name]["power"]) for name in self.rails}
        except (KeyError, TypeError) as err:
            raise PowerReadError(f"jtop power data lacks {err}: {SERVICE_FIX}") from err
        util, freq = self._gpu()
        return PowerSample(t_s=t_s, power_mw=power, gpu_util_pct=util, gpu_freq_mhz=freq)

    def close(self) -> None:
        self._jetson.close()

    def __enter__(self) -> JtopPowerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_backend(sysfs_root="/", interval_s: float = 0.5, state_dir=None, io=None, **kw) -> Backend:
    """Jetson clocks (sysfs, through ``io`` when given) with power from jtop.

    Clocks are ``None`` when sysfs has no GPU (the reason is in ``description["clocks_error"]``).
    """
    from dvfslab.hw.jetson.clocks import JetsonClocks, find_gpu_devfreq
    from dvfslab.hw.jetson.power import JetsonTelemetry
    from dvfslab.hw.jetson.sysfs import default_io

    io = io if io is not None else default_io(sysfs_root)
    power = JtopPowerReader(interval_s)
    clocks = telemetry = None
    description = {"power_source": "jtop", "rails": list(power.rails), "total_rails": list(power.total_rails),
                   "update_interval_s": power.update_interval_s, "simulated": False}
    try:
        node = find_gpu_devfreq(io)
        clocks = JetsonClocks(io=io, node=node, state_dir=state_dir)
        telemetry = JetsonTelemetry(io=io, devfreq_rel=node.rel)
        description["levels_mhz"] = clocks.levels_mhz()
    except DvfsError as err:
        description["clocks_error"] = str(err)
    return Backend(name="jtop", clocks=clocks, power=power, telemetry=telemetry, clock=time.monotonic,
                   description=description, simulated=False, virtual_time=False)
