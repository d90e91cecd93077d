"""A power reader over jetson-stats (``jtop``), for boards where its service already runs.

jtop reads the same INA3221 rails through its ``jtop.service`` and refreshes them at the
service's interval (``update_interval_s``), so sampling faster than that repeats values;
:class:`~dvfslab.hw.jetson.power.JetsonPowerReader` reads sysfs directly and is the
default. What jetson-stats 7.x does, and what this module does about it (docs/hardware.md,
"jetson-stats"):

* the client refuses a service of another version ("Mismatch version jtop service: [S] and
  client: [C]") and tells you to restart the service, which does not help: the fix is to pin
  this environment's ``jetson-stats`` to the service's version S (:func:`jtop_fix`);
* connecting can raise plain ``OSError`` s (permission, refused, reset), not only
  ``JtopException``: both become one line with the fix;
* only the rails that make the CPU + GPU total are required on every read: the others jtop
  lists are passed on when present (``extra_rails``) and never cost a sample;
* the GPU frequency is kHz in jtop's devfreq entries but already MHz in the Thor entry
  (:func:`jtop_gpu_freq_mhz`).
"""

from __future__ import annotations

import errno
import importlib
import re
import time
from collections.abc import Callable, Mapping

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import (
    Backend,
    BackendUnavailableError,
    PowerReader,
    PowerReadError,
    PowerSample,
)
from dvfslab.hw.jetson.board import board_family

SERVICE_FIX = ("start it with `sudo systemctl start jtop.service` "
               "(install it first with `sudo jtop --install-service` if it is missing)")
GROUP_FIX = ("add your user to the jtop group (`sudo usermod -aG jtop $USER`), then log out and in "
             "again")
RESTART_FIX = ("jtop.service closed the connection (restarted or crashed?); "
               "`sudo systemctl restart jtop.service` and measure again")
MISMATCH = re.compile(r"service:\s*\[([^\]]*)\]\s*and client:\s*\[([^\]]*)\]")
#: above this a jtop frequency is kHz: no Jetson GPU runs below 100 MHz or above 100 GHz
KHZ_FLOOR = 100_000


def import_jtop():
    """The ``jtop`` package, or :class:`BackendUnavailableError` with the install command."""
    try:
        return importlib.import_module("jtop")
    except ImportError as err:
        raise BackendUnavailableError("jetson-stats is not installed (pip install 'dvfslab[jetson]')") from err


def jtop_fix(message: str) -> str:
    """The fix for a ``JtopException`` message (first line kept as the reason)."""
    m = MISMATCH.search(message)
    if m:
        service, client = m.group(1).strip(), m.group(2).strip()
        return (f"jetson-stats {client} here does not match jtop.service {service}: pin this "
                f"environment to the service's version (`pip install 'jetson-stats=={service}'`), "
                f"or upgrade the service to {client} (`sudo pip3 install 'jetson-stats=={client}'` "
                "then `sudo systemctl restart jtop.service`)")
    low = message.lower()
    if "can't access" in low or "permission" in low or "group" in low:
        return GROUP_FIX
    if "lost connection" in low or "error connection" in low:
        return RESTART_FIX
    return SERVICE_FIX


def os_error_fix(err: OSError) -> str:
    """The fix for an ``OSError`` met while talking to jtop.service."""
    if err.errno in (errno.EACCES, errno.EPERM) or isinstance(err, PermissionError):
        return GROUP_FIX
    if err.errno in (errno.ECONNRESET, errno.EPIPE) or isinstance(err, (ConnectionResetError, BrokenPipeError)):
        return RESTART_FIX
    return SERVICE_FIX


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def jtop_gpu_freq_mhz(gpu: Mapping) -> float | None:
    """The current GPU clock in MHz from one entry of ``jtop().gpu``.

    jtop's devfreq entries give ``freq['cur']`` in kHz; its Thor entry (``power_control ==
    "runtime_pm"``, the NVML-stack GPU) gives MHz. An entry whose ``max`` is below 100 000 is
    MHz too, whatever it is called.
    """
    try:
        freq = gpu["freq"]
        cur = float(freq["cur"])
    except (KeyError, TypeError, ValueError):
        return None
    top = freq.get("max") if isinstance(freq, Mapping) else None
    mhz = gpu.get("power_control") == "runtime_pm" or (
        isinstance(top, (int, float)) and 0 < top < KHZ_FLOOR)
    return cur if mhz else cur / 1000.0


class JtopPowerReader(PowerReader):
    """:class:`~dvfslab.hw.base.PowerReader` over ``jtop().power`` (mW per rail).

    ``rails`` (what the sampler stores, required on every read) are the rails of the CPU + GPU
    total; ``extra_rails`` are the other rails jtop listed at start, added to a sample's
    ``power_mw`` when jtop has them online.
    """

    def __init__(self, interval_s: float = 0.5, *, jtop_module=None,
                 clock: Callable[[], float] = time.monotonic):
        mod = jtop_module or import_jtop()
        self.clock = clock
        self._jetson = mod.jtop(interval=interval_s)
        try:
            self._jetson.start()
        except mod.JtopException as err:
            raise BackendUnavailableError(
                f"jetson-stats service not usable ({_first_line(err)}); {jtop_fix(str(err))}") from err
        except OSError as err:
            raise BackendUnavailableError(
                f"cannot reach jtop.service ({type(err).__name__}: {err}); {os_error_fix(err)}") from err
        all_rails = tuple(self._jetson.power.get("rail", {}))
        if not all_rails:
            self._jetson.close()
            raise BackendUnavailableError("jtop reports no power rails on this board")
        self.board_family, self.total_rails = board_family(all_rails)
        self.rails = tuple(self.total_rails)
        self.extra_rails = tuple(r for r in all_rails if r not in self.rails)
        self.update_interval_s = float(getattr(self._jetson, "interval", interval_s))
        self._module = mod

    def _gpu(self) -> tuple[float | None, float | None]:
        """(load %, cur MHz) of the first GPU jtop knows, when it says."""
        try:
            gpu = next(iter(dict(self._jetson.gpu).values()))
            return float(gpu["status"]["load"]), jtop_gpu_freq_mhz(gpu)
        except (StopIteration, KeyError, TypeError, ValueError, AttributeError):
            return None, None

    def _check_alive(self) -> None:
        """jtop's reader thread keeps its error and stops refreshing: surface it."""
        ok = getattr(self._jetson, "ok", None)
        if ok is not None and not ok(spin=True):
            raise PowerReadError(f"the jtop client stopped refreshing; {RESTART_FIX}")

    def _rails(self) -> dict:
        try:
            self._check_alive()
            return dict(self._jetson.power["rail"])
        except self._module.JtopException as err:
            raise PowerReadError(f"jtop: {_first_line(err)}; {jtop_fix(str(err))}") from err
        except (OSError, EOFError) as err:
            fix = os_error_fix(err) if isinstance(err, OSError) else RESTART_FIX
            raise PowerReadError(f"jtop: {type(err).__name__}: {err}; {fix}") from err
        except (KeyError, TypeError) as err:
            raise PowerReadError(f"jtop power data lacks {err}; {RESTART_FIX}") from err

    def read(self) -> PowerSample:
        """The rails as jtop last refreshed them, stamped with ``clock()``."""
        t_s = self.clock()
        rails = self._rails()
        power: dict[str, float] = {}
        for name in self.rails + self.extra_rails:
            r = rails.get(name)
            usable = isinstance(r, Mapping) and r.get("online", True) and "power" in r
            if usable:
                power[name] = float(r["power"])
            elif name in self.rails:
                raise PowerReadError(
                    f"jtop has no reading of {name}, one of the CPU + GPU rails {list(self.rails)} "
                    f"(jtop lists {sorted(rails)}); check `jtop` shows it, or read the rails "
                    "directly with --backend jetson")
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
                   "extra_rails": list(power.extra_rails),
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
