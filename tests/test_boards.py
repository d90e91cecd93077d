"""Board families are one record each (dvfslab.core.boards): a new family added by a fixture is
recognised by the Jetson backend, built by the fakes and gives its level table, with no other
code touched; the known families keep the facts docs/hardware.md cites."""

from __future__ import annotations

import pytest

from dvfslab.core import boards
from dvfslab.core.boards import BoardFamily
from dvfslab.hw.base import BackendUnavailableError, FrequencyCappedError
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.board import board_family, support_note
from dvfslab.hw.nvml import is_tegra
from dvfslab.testing.fake_sysfs import PROFILES, build_board

#: a made-up family: every value below is written by hand, nothing is taken from another record
XENON = BoardFamily(
    "Jetson Xenon", ("xenon",), ("VDD_GPU_X", "VDD_CPU_X"), (("40", "8"),),
    models=("NVIDIA Jetson Xenon Developer Kit",), gpu_names=("gx10b",),
    rail_layout=(("1-0040", ("VDD_GPU_X", "VDD_CPU_X", "VIN_X")),),
    bpmp_counter="sys/kernel/debug/bpmp/debug/clk/nafll_gpx0/pto_counter",
    levels_mhz=(200.0, 400.0, 800.0), nvml_words=("xenon",))


@pytest.fixture
def xenon(monkeypatch) -> BoardFamily:
    monkeypatch.setattr(boards, "FAMILIES", (*boards.FAMILIES, XENON))
    return XENON


def test_a_new_family_is_one_record(xenon, tmp_path):
    board = build_board(tmp_path / "x", "Jetson Xenon")  # the fake, from the record alone
    be = open_backend(io=board.io(), state_dir=tmp_path / "state")
    d = be.description
    assert (d["board"], d["gpu"], d["jetpack"]) == ("NVIDIA Jetson Xenon Developer Kit", "gx10b",
                                                    "L4T R40.0.0 (JetPack 8)")
    assert be.clocks.levels_mhz() == [200.0, 400.0, 800.0]
    assert (be.power.board_family, be.power.rails, be.power.total_rails) == (
        "Jetson Xenon", ("VDD_GPU_X", "VDD_CPU_X", "VIN_X"), ("VDD_GPU_X", "VDD_CPU_X"))
    # the fake's rails read 1000 mW each: CPU + GPU = 2000 mW
    assert be.power.read().total_mw(be.power.total_rails) == pytest.approx(2000.0)
    assert be.power.support_note.startswith("untested")  # not a verified family
    # the lock is checked on the family's own BPMP counter
    be.clocks.lock(400)
    assert be.clocks.last_lock_check.verified and be.clocks.last_lock_check.measured_mhz == 400.0
    board.set_clock_ceiling(200)
    with pytest.raises(FrequencyCappedError, match="nafll_gpx0/pto_counter"):
        be.clocks.lock(800)
    be.close()
    assert is_tegra("Xenon GPU")  # NVML's Jetson test knows it by its word alone


def test_without_the_record_the_board_is_not_recognised(tmp_path, monkeypatch):
    monkeypatch.setattr(boards, "FAMILIES", (*boards.FAMILIES, XENON))
    board = build_board(tmp_path / "x", "Jetson Xenon")
    monkeypatch.setattr(boards, "FAMILIES", tuple(f for f in boards.FAMILIES if f is not XENON))
    with pytest.raises(BackendUnavailableError, match="gx10b"):
        open_backend(io=board.io())
    assert not is_tegra("Xenon GPU")
    assert board_family(("VDD_GPU_X", "VDD_CPU_X", "VIN_X"), "NVIDIA Jetson Xenon Developer Kit")[0] \
        == "unknown board (sum of all rails)"


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_fake_profile_is_its_familys_board(profile, tmp_path):
    """The fakes take model, levels and rails from the family record; the backend finds the
    same family and levels back from the files."""
    fake = PROFILES[profile]
    fam = boards.family_named(fake.family)
    be = open_backend(io=build_board(tmp_path / profile, profile).io(), state_dir=tmp_path / "s")
    assert be.description["rail_family"] == fam.name
    assert tuple(be.clocks.levels_mhz()) == fam.levels_mhz


def test_cited_family_facts():
    """docs/hardware.md: AGX Orin's CPU+GPU rails and 11 levels (306 ... 1300.5 MHz); L4T R36 is
    JetPack 6 and R38 / R39 JetPack 7 (Thor, unverified); the GPC counter path tegrastats reads."""
    orin = boards.family_named("AGX Orin")
    assert orin.total_rails == ("VDD_CPU_CV", "VDD_GPU_SOC") and orin.verified
    assert len(orin.levels_mhz) == 11 and (orin.levels_mhz[0], orin.levels_mhz[-1]) == (306.0, 1300.5)
    assert {k: boards.l4t_to_jetpack()[k] for k in ("32", "35", "36", "38", "39")} == {
        "32": "4", "35": "5", "36": "6", "38": "7", "39": "7"}
    assert boards.GPC_PTO_COUNTER == "sys/kernel/debug/bpmp/debug/clk/nafll_gpc0/pto_counter"
    assert support_note("AGX Orin", "L4T R36.3.0 (JetPack 6)") is None
    assert support_note("AGX Orin", "L4T R38.2.0 (JetPack 7)").startswith("untested: dvfslab has not been run")
    assert boards.family_for_model("NVIDIA Jetson Orin Nano Developer Kit").name == "Orin NX / Orin Nano"


def test_a_family_with_ina238_monitors_is_faked_one_chip_per_rail(tmp_path):
    """AGX Thor's record says INA238 (one rail per chip, power1_input in uW) and lists no rail
    layout (unverified), so the fake takes one given here; the reader finds both rails and, with
    no known CPU+GPU rails, sums all of them."""
    board = build_board(tmp_path / "thor", "AGX Thor", levels_hz=(500_000_000, 1_000_000_000),
                        rails={"2-0040": ("VDD_GPU",), "2-0041": ("VDD_CPU_SOC_MSS",)},
                        rail_power_mw={"VDD_GPU": 19000.0, "VDD_CPU_SOC_MSS": 3000.0})
    be = open_backend(io=board.io(), state_dir=tmp_path / "s")
    assert (be.description["gpu"], be.description["jetpack"]) == ("gb10b", "L4T R39.0.0 (JetPack 7)")
    assert be.power.rails == ("VDD_GPU", "VDD_CPU_SOC_MSS") and be.power.total_rails == be.power.rails
    assert (board.root / "sys/bus/i2c/drivers/ina238/2-0040/hwmon/hwmon1/power1_input").exists()
    # the fake writes 5000 mV x 3800 mA = 19 000 000 uW and 5000 mV x 600 mA = 3 000 000 uW
    assert be.power.read().power_mw == {"VDD_GPU": 19000.0, "VDD_CPU_SOC_MSS": 3000.0}
