"""The jetson-stats power reader against a fake ``jtop`` module in sys.modules."""

from __future__ import annotations

import sys
import types

import pytest

from dvfslab.hw.base import BackendUnavailableError, PowerReader
from dvfslab.hw.jtop import JtopPowerReader, open_backend


class FakeJtopException(Exception):
    pass


def make_jtop(active: bool = True, rails: dict | None = None) -> types.ModuleType:
    """A module shaped like jetson-stats 4.x+: ``jtop(interval)``, ``.power``, ``.gpu``."""
    rails = rails if rails is not None else {
        "VDD_GPU_SOC": {"online": True, "volt": 4984, "curr": 1203, "power": 5995, "avg": 5900},
        "VDD_CPU_CV": {"online": True, "volt": 4984, "curr": 321, "power": 1599, "avg": 1600},
        "VIN_SYS_5V0": {"online": True, "volt": 5000, "curr": 700, "power": 3500, "avg": 3500},
    }

    class jtop:  # noqa: N801 - the real class name
        def __init__(self, interval=1.0):
            self.interval = interval
            self.closed = False

        def start(self):
            if not active:
                raise FakeJtopException("The jtop.service is not active. Please run:\nsudo jtop --install-service")

        @property
        def power(self):
            return {"rail": rails, "tot": {"power": sum(r["power"] for r in rails.values())}}

        @property
        def gpu(self):
            return {"gpu": {"type": "integrated", "status": {"load": 63.5},
                            "freq": {"governor": "nvhost_podgov", "cur": 816000, "min": 306000, "max": 1300500}}}

        def close(self):
            self.closed = True

    mod = types.ModuleType("jtop")
    mod.jtop, mod.JtopException = jtop, FakeJtopException
    return mod


def test_service_not_active_becomes_one_line_with_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop(active=False))
    with pytest.raises(BackendUnavailableError) as info:
        JtopPowerReader()
    msg = str(info.value)
    assert "\n" not in msg
    assert "jtop.service is not active" in msg and "sudo systemctl start jtop.service" in msg


def test_reads_rails_load_and_frequency(monkeypatch):
    monkeypatch.setitem(sys.modules, "jtop", make_jtop())
    reader = JtopPowerReader(interval_s=0.5)
    assert isinstance(reader, PowerReader)
    assert reader.rails == ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")
    assert reader.total_rails == ("VDD_CPU_CV", "VDD_GPU_SOC") and reader.update_interval_s == 0.5
    s = reader.read()
    assert s.power_mw == {"VDD_GPU_SOC": 5995.0, "VDD_CPU_CV": 1599.0, "VIN_SYS_5V0": 3500.0}
    assert s.gpu_util_pct == 63.5 and s.gpu_freq_mhz == 816.0  # jtop reports kHz
    reader.close()
    assert reader._jetson.closed


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
