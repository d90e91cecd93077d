"""tegrastats logs as power traces (issue 15, "Also"), on real tegrastats lines.

The lines below are copied by hand from public captures (a tegrastats line is data, quoted
here as test input):

* ``AGX_ORIN_JP5``: an AGX Orin 64GB in MAXN (L4T R35, 62795 MB RAM), printed by
  ``sudo tegrastats`` on 04-24-2023 in a public GitHub setup guide (a HuggingFace Optimum /
  PyTorch walkthrough for AGX Orin; found through a code index that did not keep the
  repository's name).
* ``AGX_ORIN_JP6``: an AGX Orin 64GB on L4T R36.4.4 (kernel 5.15.148), 05-09-2026, quoted as
  test input of a public Go tegrastats parser (same index).
* ``ORIN_NANO``: six consecutive-second lines of an Orin Nano 8GB (7620 MB RAM) on JetPack 6,
  idle, before and after ``sudo jetson_clocks``, from a public Orin Nano quick-start guide
  (04-27-2026). No Orin NX capture with a traceable source was found; the Orin Nano module
  uses the same INA3221 rails (``VDD_IN``, ``VDD_CPU_GPU_CV``, ``VDD_SOC``) and line format.
* ``TX2_JP4``: the line that jetson-stats' own tegrastats emulator (``tests/tegrastats`` in
  rbonghi/jetson_stats) prints: JetPack 4 format, no timestamp, mW implied.

Expected values are read off the lines by hand (the first number of each rail).
"""

from __future__ import annotations

import pytest

from dvfslab.cli import main
from dvfslab.measure.energy import integrate_energy
from dvfslab.measure.sampler import PowerSampler
from dvfslab.measure.tegrastats import (
    TegrastatsWarning,
    import_tegrastats,
    parse_line,
    read_tegrastats,
)
from dvfslab.measure.trace import ReplayPowerReader, SampleFileError, load_samples
from dvfslab.testing.fake_ina import VirtualClock

AGX_ORIN_JP5 = (
    "04-24-2023 00:01:24 RAM 1282/62795MB (lfb 15152x4MB) SWAP 0/31398MB (cached 0MB) CPU [0%@729,"
    "0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729,0%@729] EMC_FREQ 0%@2133 "
    "GR3D_FREQ 0%@0 GR3D2_FREQ 0%@0 VIC_FREQ 729 APE 174 CV0@-256C CPU@42.593C Tboard@32C SOC2@39.343C "
    "Tdiode@33.25C SOC0@39.375C CV1@-256C GPU@-256C tj@42.593C SOC1@40.468C CV2@-256C VDD_GPU_SOC "
    "2399mW/2399mW VDD_CPU_CV 400mW/400mW VIN_SYS_5V0 4032mW/4032mW NC 0mW/0mW VDDQ_VDD2_1V8AO "
    "301mW/301mW NC 0mW/0mW"
)
AGX_ORIN_JP6 = (
    "05-09-2026 18:42:06 RAM 18207/62841MB (lfb 466x4MB) SWAP 86/31420MB (cached 0MB) CPU [14%@2188,"
    "5%@2112,8%@2035,14%@2201,46%@1267,47%@1267,2%@1267,10%@1267,4%@1036,5%@1036,6%@1036,10%@1036] "
    "EMC_FREQ 3%@2133 GR3D_FREQ 0%@[0,0] NVENC 79%@166 NVDEC off NVJPG off NVJPG1 off VIC 36%@115 "
    "OFA off NVDLA0 off NVDLA1 off PVA0_FREQ off APE 174 cpu@52.562C soc2@48.437C soc0@49.093C "
    "tj@52.562C soc1@49.656C VDD_GPU_SOC 2412mW/2412mW VDD_CPU_CV 1607mW/1607mW VIN_SYS_5V0 "
    "4707mW/4707mW"
)
_NANO_IDLE = ("RAM 775/7620MB (lfb 3x4MB) SWAP 0/3810MB (cached 0MB) CPU [0%@729,0%@729,0%@729,0%@729,"
              "0%@729,0%@729] GR3D_FREQ 0% cpu@48.625C soc2@47.468C soc0@48C gpu@48.593C tj@49.218C "
              "soc1@49.218C VDD_IN 4761mW/4777mW VDD_CPU_GPU_CV 515mW/502mW VDD_SOC 1428mW/1428mW")
_NANO_CLOCKS = ("RAM 779/7620MB (lfb 2x4MB) SWAP 0/3810MB (cached 0MB) CPU [0%@1344,0%@1344,0%@1344,"
                "0%@1344,0%@1344,0%@1344] GR3D_FREQ 0% cpu@50.093C soc2@49.312C soc0@49.343C gpu@50.593C "
                "tj@50.593C soc1@50.406C VDD_IN 6626mW/6625mW VDD_CPU_GPU_CV 1228mW/1230mW "
                "VDD_SOC 2380mW/2380mW")
ORIN_NANO = [f"04-27-2026 14:59:4{s} {_NANO_IDLE}" for s in (1, 2, 3)] + [
    f"04-27-2026 15:00:5{s} {_NANO_CLOCKS}" for s in (4, 5, 6)]
TX2_JP4 = (
    "RAM 4722/7844MB (lfb 1x512kB) CPU [55%@2035,14%@2034,27%@2034,55%@2035,47%@2035,45%@2035] "
    "SWAP 149/1024MB (cached 7MB) EMC_FREQ 2%@1866 GR3D_FREQ 42%@1300 APE 150 MTS fg 0% bg 0% "
    "BCPU@-45C MCPU@-45C GPU@-51C PLL@45C AO@47.5C Tboard@37C Tdiode@46.75C PMIC@100C thermal@46.4C "
    "VDD_IN 14025/14416 VDD_CPU 2209/2538 VDD_GPU 6854/6903 VDD_SOC 1371/1370 VDD_WIFI 19/19 "
    "NVENC 716 NVDEC 716 VDD_DDR 2702/2702"
)


def test_agx_orin_lines_parse_to_rails_load_and_clock():
    jp5 = parse_line(AGX_ORIN_JP5)
    assert jp5.stamp == "04-24-2023 00:01:24"
    assert jp5.rails_mw == {"VDD_GPU_SOC": 2399.0, "VDD_CPU_CV": 400.0, "VIN_SYS_5V0": 4032.0,
                            "VDDQ_VDD2_1V8AO": 301.0}  # the two NC channels are not rails
    assert (jp5.gpu_util_pct, jp5.gpu_freq_mhz) == (0.0, None)  # @0: the GPU is rail-gated
    jp6 = parse_line(AGX_ORIN_JP6)
    assert jp6.rails_mw == {"VDD_GPU_SOC": 2412.0, "VDD_CPU_CV": 1607.0, "VIN_SYS_5V0": 4707.0}
    assert (jp6.gpu_util_pct, jp6.gpu_freq_mhz) == (0.0, None)  # @[0,0]: two GPCs, both gated
    assert parse_line("RAM 1282/62795MB (lfb 15152x4MB) SWAP 0/31398MB (cached 0MB)") is None


def test_jetpack4_line_without_timestamp_and_implied_milliwatts():
    line = parse_line(TX2_JP4)
    assert line.stamp is None and (line.gpu_util_pct, line.gpu_freq_mhz) == (42.0, 1300.0)
    assert line.rails_mw == {"VDD_IN": 14025.0, "VDD_CPU": 2209.0, "VDD_GPU": 6854.0, "VDD_SOC": 1371.0,
                             "VDD_WIFI": 19.0, "VDD_DDR": 2702.0}
    with pytest.raises(SampleFileError, match="--interval-ms"):
        read_tegrastats([TX2_JP4] * 3)
    frame, meta = read_tegrastats([TX2_JP4] * 3, interval_s=0.5, total_rails=("VDD_CPU", "VDD_GPU"))
    assert list(frame["t_s"]) == [0.0, 0.5, 1.0]
    assert list(frame["total_mw"]) == [2209.0 + 6854.0] * 3 and meta["update_interval_s"] == 0.5


def test_orin_nano_log_becomes_a_trace_with_hand_computed_energy(tmp_path):
    """Totals: idle 515 + 1428 = 1943 mW at t = 0, 1, 2 s; after jetson_clocks
    1228 + 2380 = 3608 mW at t = 73, 74, 75 s. Trapezoid: 1.943 x 2 + 71 x (1.943 + 3.608) / 2
    + 3.608 x 2 = 208.1625 J."""
    log = tmp_path / "tegrastats.log"
    log.write_text("\n".join(ORIN_NANO) + "\n")
    path, _, meta = import_tegrastats(log, tmp_path / "trace.csv")
    frame, side = load_samples(path)
    assert list(frame["t_s"]) == [0.0, 1.0, 2.0, 73.0, 74.0, 75.0]
    assert frame.attrs["total_rails"] == ["VDD_CPU_GPU_CV", "VDD_SOC"]
    assert list(frame["VDD_IN_mw"]) == [4761.0] * 3 + [6626.0] * 3
    assert integrate_energy(frame["t_s"], frame["total_mw"] / 1000) == pytest.approx(208.1625)
    assert side["source"] == "tegrastats" and side["simulated"] is False and side["n_skipped"] == 0


def test_a_replayed_tegrastats_trace_gives_energy_windows(tmp_path):
    """The idle stretch (1943 mW CPU+GPU, 4761 mW VDD_IN) replayed on a virtual clock: a window
    over [0.25, 1.75] s measures 1.943 x 1.5 = 2.9145 J and VDD_IN 4.761 x 1.5 = 7.1415 J."""
    log = tmp_path / "idle.log"
    log.write_text("\n".join(ORIN_NANO[:3]) + "\n")
    path, _, _ = import_tegrastats(log, tmp_path / "idle.csv")
    clock = VirtualClock()
    reader = ReplayPowerReader(path, clock=clock)
    sampler = PowerSampler(reader, clock=clock, threaded=False).start()
    assert sampler.period_s == 0.5  # half the log's 1 s interval
    sampler.sample_once()
    clock.advance(0.25)
    sampler.begin_window("idle")
    while clock.t_s < 1.75 - 1e-9:
        clock.advance(0.25)
        sampler.sample_once()
    m = sampler.end_window("idle")
    assert m.energy_j == pytest.approx(2.9145)
    assert m.energy_by_rail_j["VDD_IN"] == pytest.approx(7.1415)


def test_sub_second_interval_needs_the_interval(tmp_path):
    lines = [AGX_ORIN_JP5, AGX_ORIN_JP5.replace("2399mW/2399mW", "2500mW/2449mW")]
    with pytest.raises(SampleFileError, match="repeat or go back at line 2.*--interval-ms"):
        read_tegrastats(lines)
    frame, _ = read_tegrastats(lines, interval_s=0.1)
    assert list(frame["t_s"]) == [0.0, 0.1]
    assert list(frame["total_mw"]) == [400.0 + 2399.0, 400.0 + 2500.0]


def test_not_a_tegrastats_log(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    with pytest.raises(SampleFileError, match="no tegrastats line"):
        read_tegrastats(log)


def test_cli_import_tegrastats(tmp_path, capsys):
    log = tmp_path / "t.log"
    log.write_text("\n".join(ORIN_NANO) + "\n")
    out = tmp_path / "t.csv"
    assert main(["sensors", "import-tegrastats", str(log), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "6 samples over 75 s" in text and "VDD_CPU_GPU_CV + VDD_SOC" in text
    assert out.exists() and out.with_suffix(".meta.json").exists()
    assert main(["sensors", "import-tegrastats", str(log), "--out", str(out), "--total-rails", "VDD_X"]) == 2
    assert "VDD_X" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Bad lines (issue 25, item 3): each is named by its line number in the file
# --------------------------------------------------------------------------------------------

def corrupted_nano_log(tmp_path):
    """The Orin Nano capture as a file with a blank line 2, a zero-filled block before line 4
    (what a power loss leaves in a log being written) and the last line cut short inside its
    last rail (tegrastats killed mid-write): 7 lines, 2 of them bad."""
    lines = [ORIN_NANO[0], "", ORIN_NANO[1], "\0\0\0\0" + ORIN_NANO[2], ORIN_NANO[3], ORIN_NANO[4],
             ORIN_NANO[5][:-len("/2380mW")]]
    log = tmp_path / "tegrastats.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_bad_lines_are_skipped_with_a_warning_naming_each(tmp_path):
    """Kept: idle at t = 0, 1 s (1943 mW), after jetson_clocks at t = 73, 74 s (3608 mW).
    Trapezoid: 1.943 x 1 + 72 x (1.943 + 3.608) / 2 + 3.608 x 1 = 205.387 J."""
    log = corrupted_nano_log(tmp_path)
    with pytest.warns(TegrastatsWarning) as caught:
        frame, meta = read_tegrastats(log)
    (w,) = caught
    assert str(w.message) == (f"{log}: skipped 2 bad line(s): line 4: no timestamp; line 7: rail VDD_SOC "
                              "missing (strict=True / --strict refuses the log instead)")
    assert list(frame["t_s"]) == [0.0, 1.0, 73.0, 74.0]
    assert integrate_energy(frame["t_s"], frame["total_mw"] / 1000) == pytest.approx(205.387)
    assert meta["n_skipped"] == 2
    assert meta["skipped"] == [{"line": 4, "why": "no timestamp"}, {"line": 7, "why": "rail VDD_SOC missing"}]
    with pytest.raises(SampleFileError, match=r"tegrastats.log: line 4: no timestamp; .*without --strict"):
        read_tegrastats(log, strict=True)


def test_a_cut_short_first_line_does_not_decide_the_rails():
    """The first line lost its last rail: the rails are the ones the other lines carry."""
    lines = [ORIN_NANO[0][:-len(" VDD_SOC 1428mW/1428mW")], ORIN_NANO[1], ORIN_NANO[2]]
    with pytest.warns(TegrastatsWarning, match="line 1: rail VDD_SOC missing"):
        frame, meta = read_tegrastats(lines)
    assert meta["rails"] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert list(frame["t_s"]) == [0.0, 1.0] and list(frame["total_mw"]) == [515.0 + 1428.0] * 2


def test_a_broken_timestamp_is_a_bad_line_not_a_crash():
    lines = [ORIN_NANO[0], ORIN_NANO[1].replace("04-27-2026", "04-47-2026"), ORIN_NANO[2]]
    with pytest.warns(TegrastatsWarning, match="line 2: not a date: '04-47-2026 14:59:42'"):
        frame, _ = read_tegrastats(lines)
    assert list(frame["t_s"]) == [0.0, 2.0]


def test_with_an_interval_a_skipped_line_keeps_its_place_in_time():
    """JetPack 4 lines every 0.5 s, the third one garbage: samples at 0, 0.5 and 1.5 s."""
    with pytest.warns(TegrastatsWarning, match="line 3: no power rail"):
        frame, meta = read_tegrastats([TX2_JP4, TX2_JP4, "RAM 4722/7844MB (lfb 1x5", TX2_JP4], interval_s=0.5)
    assert list(frame["t_s"]) == [0.0, 0.5, 1.5] and meta["n_skipped"] == 1


def test_repeated_timestamps_name_the_line_of_the_file():
    lines = ["", AGX_ORIN_JP5, AGX_ORIN_JP5]  # a blank line 1: the repeat is on line 3
    with pytest.raises(SampleFileError, match="repeat or go back at line 3 "):
        read_tegrastats(lines)


def test_cli_skips_bad_lines_with_warnings_and_a_count(tmp_path, capsys):
    log = corrupted_nano_log(tmp_path)
    out = tmp_path / "t.csv"
    assert main(["sensors", "import-tegrastats", str(log), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"dvfslab sensors: warning: {log}: skipped 2 bad line(s): line 4: no timestamp; line 7: rail "
        "VDD_SOC missing (strict=True / --strict refuses the log instead)"]
    assert "4 samples over 74 s" in captured.out and "2 lines skipped" in captured.out
    assert main(["sensors", "import-tegrastats", str(log), "--out", str(tmp_path / "s.csv"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dvfslab sensors: error: {log}: line 4: no timestamp;") and err.count("\n") == 1
    assert not (tmp_path / "s.csv").exists()


def test_cli_missing_log_is_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert main(["sensors", "import-tegrastats", str(missing), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err == f"dvfslab sensors: error: {missing}: no such file; give the path of a tegrastats log " \
                  "(tegrastats --logfile FILE)\n"
