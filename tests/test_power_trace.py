"""Saved traces: CSV/parquet + sidecar, load_samples, ReplayPowerReader, save -> replay."""

from __future__ import annotations

import json
import logging
import math

import pandas as pd
import pytest
from test_power import CPU, GPU, SYS, VirtualClock, drive, virtual_run

from dvfslab.hw.base import PowerReadError
from dvfslab.measure.sampler import PowerSampler
from dvfslab.measure.trace import (
    ReplayPowerReader,
    SampleFileError,
    load_samples,
    rail_column,
    sidecar_path,
)


def recorded_run(tmp_path, suffix=".csv"):
    """A virtual-time run with two windows, saved under a run's samples/ folder."""
    sampler, clock = virtual_run(gpu_w=lambda t: 6 + 4 * math.sin(3 * t) + (5 if 1 < t < 2 else 0),
                                 util=lambda t: 40 + 10 * t, fail=lambda n: n == 50)
    events = {0.25: lambda: sampler.begin_window("epoch-1"),
              1.5: lambda: sampler.end_window("epoch-1"),
              1.75: lambda: sampler.begin_window("epoch-2"),
              2.9: lambda: sampler.end_window("epoch-2")}
    drive(sampler, clock, 3.0, events=events)
    path = sampler.save(tmp_path / "run-1" / "samples" / f"trace{suffix}", meta={"source": "simulated"})
    return sampler, path


def test_save_writes_samples_and_sidecar(tmp_path):
    sampler, path = recorded_run(tmp_path)
    assert path == tmp_path / "run-1" / "samples" / "trace.csv"
    side = json.loads(sidecar_path(path).read_text())
    assert side["format"] == "dvfslab.measure.sampler-samples" and side["version"] == 1
    assert side["rails"] == [GPU, CPU, SYS] and side["total_rails"] == [GPU, CPU]
    assert side["n_samples"] == sampler.n_samples and side["n_lost"] == 1
    assert [w["name"] for w in side["windows"]] == ["epoch-1", "epoch-2"]
    assert side["meta"] == {"source": "simulated"} and side["period_s"] == 0.01
    assert sorted(p.name for p in path.parent.iterdir()) == ["trace.csv", "trace.meta.json"]  # no temp files


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_load_samples_round_trips_exactly(tmp_path, suffix):
    sampler, path = recorded_run(tmp_path, suffix)
    frame, meta = load_samples(path)
    pd.testing.assert_frame_equal(frame, sampler.samples(), check_exact=True)
    assert frame.attrs == {"rails": [GPU, CPU, SYS], "total_rails": [GPU, CPU]}
    assert meta["meta"]["source"] == "simulated"


def test_save_replay_round_trip_reproduces_the_windows(tmp_path):
    original, path = recorded_run(tmp_path)
    clock = VirtualClock(1000.0)  # replay on a different time base
    reader = ReplayPowerReader(path, clock=clock)
    assert (reader.rails, reader.total_rails) == ((GPU, CPU, SYS), (GPU, CPU))
    replay = PowerSampler(reader, clock=clock, threaded=False).start()
    first_t = original.samples()["t_s"].iloc[0]
    events = {1000.0 + m.t0_s - first_t: (lambda n=m.name: replay.begin_window(n)) for m in original.measurements}
    events.update({1000.0 + m.t1_s - first_t: (lambda n=m.name: replay.end_window(n)) for m in original.measurements})
    replay.sample_once()  # anchors the trace start at t=1000 s
    drive(replay, clock, 1000.0 + 2.95 - first_t, events=events)
    assert [m.name for m in replay.measurements] == ["epoch-1", "epoch-2"]
    for got, want in zip(replay.measurements, original.measurements, strict=True):
        assert got.energy_j == pytest.approx(want.energy_j, rel=1e-9)
        assert got.energy_by_rail_j == pytest.approx(want.energy_by_rail_j, rel=1e-9)
        assert got.peak_power_w == pytest.approx(want.peak_power_w, rel=1e-9)
        assert got.gpu_util_pct == pytest.approx(want.gpu_util_pct, rel=1e-9)
        assert got.time_s == pytest.approx(want.time_s, rel=1e-9)
        assert got.n_lost == 0  # the recorded gap is bridged, not re-lost


def test_replay_modes_and_end_of_trace():
    frame = pd.DataFrame({"t_s": [10.0, 11.0, 12.0], rail_column("A"): [100.0, 300.0, 200.0],
                          "gpu_freq_mhz": [306.0, 612.0, 612.0]})
    clock = VirtualClock(0.0)
    linear = ReplayPowerReader(frame, clock=clock)
    hold = ReplayPowerReader(frame, clock=clock, mode="hold")
    looped = ReplayPowerReader(frame, clock=clock, loop=True)
    for reader in (linear, hold, looped):
        assert reader.read().power_mw == {"A": 100.0}  # anchors at t=0
    assert (linear.rails, linear.total_rails, linear.update_interval_s) == (("A",), ("A",), 1.0)
    clock.t_s = 0.5
    s = linear.read()
    assert s.t_s == 0.5 and s.power_mw["A"] == pytest.approx(200.0) and s.gpu_freq_mhz == 306.0
    assert hold.read().power_mw["A"] == 100.0
    clock.t_s = 2.5
    with pytest.raises(PowerReadError, match="ended.*loop=True"):
        linear.read()
    assert looped.read().power_mw["A"] == pytest.approx(200.0)  # 2.5 s wraps to 0.5 s
    linear.rewind(start_s=2.0)
    assert linear.read().power_mw["A"] == pytest.approx(200.0)
    with pytest.raises(SampleFileError, match="'linear' or 'hold'"):
        ReplayPowerReader(frame, mode="nearest")


def test_sampler_counts_the_end_of_a_replay_as_lost(tmp_path):
    _, path = recorded_run(tmp_path)
    clock = VirtualClock()
    sampler = PowerSampler(ReplayPowerReader(path, clock=clock), period_s=0.01, clock=clock,
                           threaded=False).start()
    drive(sampler, clock, 3.5)
    assert sampler.n_lost == pytest.approx(50, abs=2) and sampler.n_samples == pytest.approx(300, abs=2)


def test_missing_sidecar_warns_and_totals_every_rail(tmp_path, caplog):
    _, path = recorded_run(tmp_path)
    sidecar_path(path).unlink()
    with caplog.at_level(logging.WARNING):
        frame, meta = load_samples(path)
    assert meta == {} and "no sidecar" in caplog.text
    assert frame.attrs["total_rails"] == [GPU, CPU, SYS]
    assert ReplayPowerReader(path, total_rails=(GPU,)).total_rails == (GPU,)


def test_bad_trace_files_are_clear_errors(tmp_path):
    with pytest.raises(SampleFileError, match="no such sample file"):
        load_samples(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("time,A_mw\n0,1\n")
    with pytest.raises(SampleFileError, match="'t_s' is missing"):
        load_samples(bad)
    _, path = recorded_run(tmp_path)
    sidecar_path(path).write_text("{not json")
    with pytest.raises(SampleFileError, match="unreadable sidecar"):
        load_samples(path)
    with pytest.raises(SampleFileError, match="t_s column"):
        ReplayPowerReader(pd.DataFrame({"t_s": [0.0, 1.0]}))


def test_save_rejects_unknown_suffix_and_parquet_without_pyarrow(tmp_path, monkeypatch):
    sampler, _ = virtual_run()
    with pytest.raises(SampleFileError, match="use .csv or .parquet"):
        sampler.save(tmp_path / "trace.txt")
    monkeypatch.setattr("dvfslab.measure.trace._has_pyarrow", lambda: False)
    with pytest.raises(SampleFileError, match="pip install pyarrow"):
        sampler.save(tmp_path / "trace.parquet")
    assert not (tmp_path / "trace.parquet").exists()
