"""The jetson-stats power reader against a fake ``jtop`` module in sys.modules.

The fake is shaped like jetson-stats 7.x: ``jtop(interval)`` with ``start()``, ``ok(spin)``,
``.power`` (``{"rail": {name: {"online", "volt", "curr", "power", "avg"}}, "tot": ...}``),
``.gpu`` and ``close()``. Its messages are the real client's wording (jtop/jtop.py).
"""

from __future__ import annotations

import errno
import sys
import types

import pytest

from dvfslab.hw.base import BackendUnavailableError, PowerReader, PowerReadError
from dvfslab.hw.jtop import JtopPowerReader, open_backend

ORIN_GPU = {"gpu": {"type": "integrated", "status": {"load": 63.5},
                    "freq": {"governor": "nvhost_podgov", "cur": 816000, "min": 306000, "max": 1300500}}}
#: jetson-stats' Thor GPU entry: devfreq values already divided down to MHz, runtime-PM control
THOR_GPU = {"thor": {"type": "integrated", "status": {"load": 12.0, "railgate": True},
                     "freq": {"governor": "nvhost_podgov", "cur": 1575, "min": 0, "max": 1575},
                     "power_control": "runtime_pm"}}
MISMATCH = "Mismatch version jtop service: [7.1.0] and client: [7.2.2]. Please run:\n\nsudo systemctl restart jtop.service"


class FakeJtopException(Exception):
    pass


def orin_rails() -> dict:
    return {
        "VDD_GPU_SOC": {"online": True, "volt": 4984, "curr": 1203, "power": 5995, "avg": 5900},
        "VDD_CPU_CV": {"online": True, "volt": 4984, "curr": 321, "power": 1599, "avg": 1600},
        "VIN_SYS_5V0": {"online": True, "volt": 5000, "curr": 700, "power": 3500, "avg": 3500},
    }


def make_jtop(active: bool = True, rails: dict | None = None, *, start_error: BaseException | None = None,
              gpu: dict | None = None) -> types.ModuleType:
    """A module shaped like jetson-stats; ``mod.state`` holds what a test may change later
    (``rails``, ``running``, ``power_error``)."""
    state = types.SimpleNamespace(rails=orin_rails() if rails is None else rails, running=True, power_error=None)

    class jtop:  # noqa: N801 - the real class name
        def __init__(self, interval=1.0):
            self.interval = interval
            self.closed = False

        def start(self):
            if start_error is not None:
                raise start_error
            if not active:
                raise FakeJtopException("The jtop.service is not active. Please run:\nsudo systemctl restart jtop.service")

        def ok(self, spin=False):
            return state.running

        @property
        def power(self):
            if state.power_error is not None:
                raise state.power_error
            return {"rail": state.rails, "tot": {"power": sum(r["power"] for r in state.rails.values())}}

        @property
        def gpu(self):
            return ORIN_GPU if gpu is None else gpu

        def close(self):
            self.closed = True

    mod = types.ModuleType("jtop")
    mod.jtop, mod.JtopException, mod.state = jtop, FakeJtopException, state
    return mod


def test_service_not_active_becomes_one_line_with_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(active=False))
    with pytest.raises(BackendUnavailableError) as info:
        JtopPowerReader()
    msg = str(info.value)
    assert "\n" not in msg
    assert "jtop.service is not active" in msg and "sudo systemctl start jtop.service" in msg


def test_version_mismatch_says_to_pin_the_client_to_the_service(monkeypatch):
    """Rule: restarting the service does not cure a client/service version mismatch; pinning
    this environment's jetson-stats to the service's version (7.1.0) does."""
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(start_error=FakeJtopException(MISMATCH)))
    with pytest.raises(BackendUnavailableError) as info:
        JtopPowerReader()
    msg = str(info.value)
    assert "\n" not in msg
    assert "pip install 'jetson-stats==7.1.0'" in msg
    assert "systemctl start" not in msg


@pytest.mark.parametrize("err, fix", [
    (PermissionError(errno.EACCES, "Permission denied"), "usermod -aG jtop"),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "systemctl start jtop.service"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/run/jtop.sock"), "systemctl start jtop.service"),
])
def test_os_errors_at_start_become_one_line_with_the_fix(monkeypatch, err, fix):
    """Rule: jtop's start() re-raises OSErrors it does not recognise; they are caught."""
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(start_error=err))
    with pytest.raises(BackendUnavailableError) as info:
        JtopPowerReader()
    assert fix in str(info.value) and "\n" not in str(info.value)


def test_os_errors_and_a_stopped_client_while_reading_are_power_read_errors(monkeypatch):
    mod = make_jtop()
    monkeypatch.setitem(sys.modules, "jtop", mod)
    reader = JtopPowerReader()
    mod.state.power_error = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    with pytest.raises(PowerReadError, match="restart jtop.service"):
        reader.read()
    mod.state.power_error, mod.state.running = None, False  # jtop's thread died: values are stale
    with pytest.raises(PowerReadError, match="stopped refreshing"):
        reader.read()


def test_only_the_cpu_gpu_rails_are_required_on_every_read(monkeypatch):
    """Rule: a missing non-total rail (VIN_SYS_5V0) does not cost the sample; a missing total
    rail (VDD_GPU_SOC) is an error naming it."""
    mod = make_jtop()
    monkeypatch.setitem(sys.modules, "jtop", mod)
    reader = JtopPowerReader()
    assert reader.read().power_mw["VIN_SYS_5V0"] == 3500.0
    del mod.state.rails["VIN_SYS_5V0"]
    assert reader.read().power_mw == {"VDD_CPU_CV": 1599.0, "VDD_GPU_SOC": 5995.0}
    mod.state.rails["VDD_GPU_SOC"]["online"] = False
    with pytest.raises(PowerReadError, match="VDD_GPU_SOC"):
        reader.read()


def test_reads_rails_load_and_frequency(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop())
    reader = JtopPowerReader(interval_s=0.5)
    assert isinstance(reader, PowerReader)
    assert reader.rails == reader.total_rails == ("VDD_CPU_CV", "VDD_GPU_SOC")
    assert reader.extra_rails == ("VIN_SYS_5V0",) and reader.update_interval_s == 0.5
    s = reader.read()
    assert s.power_mw == {"VDD_GPU_SOC": 5995.0, "VDD_CPU_CV": 1599.0, "VIN_SYS_5V0": 3500.0}
    assert s.gpu_util_pct == 63.5 and s.gpu_freq_mhz == 816.0  # jtop reports kHz here
    reader.close()
    assert reader._jetson.closed


def test_thor_frequency_is_already_mhz(monkeypatch):
    """Rule: jtop's Thor GPU entry gives freq['cur'] in MHz (1575), not kHz."""
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(gpu=THOR_GPU))
    s = JtopPowerReader().read()
    assert s.gpu_freq_mhz == 1575.0 and s.gpu_util_pct == 12.0


def test_no_rails_or_no_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(rails={}))
    with pytest.raises(BackendUnavailableError, match="no power rails"):
        JtopPowerReader()
    monkeypatch.setitem(sys.modules, "jtop", None)
    with pytest.raises(BackendUnavailableError, match="pip install"):
        JtopPowerReader()


def test_backend_combines_sysfs_clocks_with_jtop_power(monkeypatch, orin_jp6):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop())
    be = open_backend(sysfs_root=orin_jp6.root)
    assert be.name == "jtop" and be.clocks.levels_mhz()[-1] == 1300.5
    assert be.simulated is False and be.virtual_time is False
    assert be.power.read().power_mw["VDD_CPU_CV"] == 1599.0


def test_backend_uses_the_injected_sysfs_io(monkeypatch, orin_jp6):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop())
    io = orin_jp6.io()
    be = open_backend(io=io)  # no sysfs_root: the injected io's root is the tree
    assert be.clocks.io is io and be.clocks.lock(816).cur_freq_mhz == 816.0  # the fake kernel moved cur_freq
    be.close()
    assert orin_jp6.state()["max_freq_hz"] == 1300500000
