"""The lab's widgets, driven through their state on a fake Jetson sysfs tree (no notebook)."""

from __future__ import annotations

import io
import threading

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

from PIL import Image  # noqa: E402

from dvfslab.hw.jetson.backend import open_backend  # noqa: E402
from dvfslab.lab import FrequencyDial, LivePowerPanel, SweepPanel  # noqa: E402
from dvfslab.measure.sampler import PowerSampler  # noqa: E402
from dvfslab.sweep.plan import make_plan  # noqa: E402
from dvfslab.sweep.session import Cooldown  # noqa: E402
from dvfslab.testing.executors import SleepExecutor  # noqa: E402
from dvfslab.testing.fake_sysfs import build_board  # noqa: E402

ORIN_LEVELS_MHZ = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


@pytest.fixture
def board(tmp_path):
    return build_board(tmp_path / "root", "agx-orin-jp6")


@pytest.fixture
def backend(board, tmp_path):
    b = open_backend(io=board.io(), state_dir=tmp_path / "state")
    yield b
    b.close()


def png_pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=float)


def test_dial_offers_the_board_levels_and_starts_on_the_current_clock(backend, board):
    dial = FrequencyDial(backend.clocks)
    assert [v for _label, v in dial.slider.options] == ORIN_LEVELS_MHZ
    assert dial.slider.options[-1][0] == "1300.5 MHz"
    assert dial.slider.value == board.state()["cur_freq_hz"] / 1e6 == 306.0
    assert "governor nvhost_podgov" in dial.message and "free" in dial.message
    assert board.state()["min_freq_hz"] == 306_000_000  # building the dial wrote nothing
    assert board.state()["max_freq_hz"] == 1_300_500_000


def test_dial_locks_and_restores_the_fake_clocks(backend, board):
    before = board.state()
    dial = FrequencyDial(backend.clocks)
    dial.slider.value = 612.0  # what the browser sends when the slider is released
    after = board.state()
    assert (after["min_freq_hz"], after["max_freq_hz"], after["cur_freq_hz"]) == (612_000_000,) * 3
    assert dial.locked_mhz == 612.0
    assert dial.message.startswith("locked: GPU at 612 MHz")

    dial.slider.value = 1224.0  # raising: max first, then min
    assert board.state()["min_freq_hz"] == board.state()["max_freq_hz"] == 1_224_000_000

    dial.restore_button.click()
    limits = ("governor", "min_freq_hz", "max_freq_hz")
    assert {k: board.state()[k] for k in limits} == {k: before[k] for k in limits}
    assert dial.locked_mhz is None
    # the fake kernel leaves cur_freq where it was until the governor moves it; the dial follows
    assert dial.slider.value == board.state()["cur_freq_hz"] / 1e6 == 1224.0
    assert dial.message.startswith("restored: GPU at 1224 MHz (min 306, max 1300.5")
    assert "free" in dial.message


def test_dial_on_a_read_only_tree_shows_the_permission_message(backend, board):
    board.make_read_only()
    before = board.state()
    dial = FrequencyDial(backend.clocks)
    dial.slider.value = 612.0
    assert board.state() == before
    assert dial.locked_mhz is None
    assert dial.slider.value == 306.0  # back on the level the board is really at
    assert "could not lock 612 MHz" in dial.message
    assert "permission denied" in dial.message and "udev" in dial.message
    assert "Traceback" not in dial.status.value
    assert "#b71c1c" in dial.status.value  # shown as an error


def test_dial_reports_a_power_mode_cap(backend, board):
    board.set_power_mode(2)  # MODE_30W caps the GPU at 612 MHz
    dial = FrequencyDial(backend.clocks)
    dial.slider.value = 816.0
    assert "could not lock 816 MHz" in dial.message and "MODE_30W" in dial.message
    assert board.state()["max_freq_hz"] == 612_000_000  # originals restored
    assert board.state()["min_freq_hz"] == 306_000_000


def test_dial_without_clock_control_is_disabled():
    dial = FrequencyDial(None)
    assert dial.slider.disabled and dial.restore_button.disabled
    assert dial.lock(612.0) is False
    assert "no clock control" in dial.message


def test_live_panel_refresh_draws_rails_total_clock_load_and_temperature(backend, board):
    backend.power.load_period_s = 0.0  # the two refreshes fall within the reader's 1 s load hold
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False)
    panel = LivePowerPanel(backend, sampler=sampler, refresh_s=0.1, window_s=10)
    assert panel.start_button.description == "Start" and panel.stop_button.disabled
    panel.tick()
    board.set_rail("VDD_GPU_SOC", 9000.0)
    board.set_rail("VDD_CPU_CV", 2500.0)
    board.set_load(87.0)
    board.set_temp("gpu-thermal", 55.5)
    backend.clocks.lock(816.0)
    r = panel.tick()
    assert (r.gpu_freq_mhz, r.gpu_load_pct, r.temp_c, r.temp_zone) == (816.0, 87.0, 55.5, "gpu-thermal")
    assert r.total_mw == pytest.approx(9000.0 + 2500.0, rel=1e-3)
    assert "GPU 816 MHz · load 87 % · gpu-thermal 55.5 °C · CPU+GPU 11.50 W" in panel.readout.value
    assert "simulated" not in panel.readout.value and "SIMULATED" not in panel.title

    frame = sampler.samples()
    assert len(frame) == 2 and list(frame["total_mw"]) == pytest.approx([4000.0, 11500.0], rel=1e-3)
    hist = panel.history_frame()
    assert list(hist["gpu_freq_mhz"]) == [306.0, 816.0] and list(hist["gpu_load_pct"]) == [0.0, 87.0]
    assert panel.n_refreshes == 2

    px = png_pixels(panel.image.value)
    assert px.shape == (320, 720, 3)  # 9 x 4 in at 80 dpi
    assert px.std() > 20  # a drawn figure, not a blank canvas


def test_live_panel_thread_refreshes_until_its_wait_says_stop(backend):
    """The real refresh thread on a frozen clock: each wait is the full refresh interval, and
    the third says stop, so exactly 3 refreshes and 3 samples (a virtual-time sampler is read
    once per tick)."""
    sampler = PowerSampler(backend.power, clock=backend.clock, threaded=False)
    waits, stop_disabled, done = [], [], threading.Event()

    def wait(delay_s):
        waits.append(delay_s)
        stop_disabled.append(panel.stop_button.disabled)
        if len(waits) == 3:
            done.set()
            return True
        return False

    panel = LivePowerPanel(backend, sampler=sampler, refresh_s=0.05, now=lambda: 0.0, wait=wait)
    panel.start()
    assert done.wait(timeout=60), "the live panel thread never refreshed 3 times"
    panel.stop()
    assert panel.n_refreshes == 3 and panel.error is None and sampler.n_samples == 3
    assert waits == [0.05] * 3 and stop_disabled == [False] * 3  # Stop was live while running
    assert not sampler.running and panel._thread is None
    assert panel.start_button.disabled is False and panel.stop_button.disabled is True


def test_live_panel_needs_a_power_reader(backend):
    backend.power = None
    with pytest.raises(Exception, match="no power reader"):
        LivePowerPanel(backend)


WORKLOADS = pd.read_csv("tests/data/example/workloads.csv").iloc[:1]


def test_sweep_panel_draws_points_as_runs_finish_and_writes_a_dataset(backend, board, tmp_path):
    plan = make_plan([WORKLOADS.workload_id[0]], [306.0, 612.0, 1300.5], maxn=True, order="sequential",
                     steps=5, warmup_steps=0)
    seen = []
    executor = SleepExecutor(seconds=0.03)
    out = tmp_path / "sweep"
    panel = SweepPanel(backend, executor, out, plan, workloads=WORKLOADS,
                       cooldown=Cooldown(max_temp_c=None, idle_measure_s=0.02, poll_s=0.02,
                                         idle_power_tol=100.0, timeout_s=0.1))
    assert panel.progress.max == 4 and panel.progress.value == 0
    original_add = panel.add_run

    def spy(spec, result, error=None):
        original_add(spec, result, error)
        seen.append((panel.progress.value, len(panel.points), len(panel.image.value)))

    panel.add_run = spy
    dataset = panel.run()
    assert [s[:2] for s in seen] == [(1, 1), (2, 2), (3, 3), (4, 4)]  # one point per finished run
    assert all(size > 1000 for _, _, size in seen)  # the curve was redrawn each time
    assert panel.progress.value == 4 and panel.progress.bar_style == "success"
    assert "dvfslab pipeline --data" in panel.status.value
    assert list(dataset.runs["status"]) == ["ok"] * 4
    pts = panel.points_frame()
    assert sorted(pts["gpu_freq_mhz"].dropna()) == [306.0, 612.0, 1300.5]
    assert (pts["energy_j"] > 0).all()
    assert (out / "runs.csv").exists() and (out / "meta.json").exists()
    assert dataset.meta["source"] == "measured"  # fake sysfs = the real Jetson code path
    assert dataset.meta["sweep"]["executor"]["class"].endswith("SleepExecutor")
    assert board.state()["min_freq_hz"] == 306_000_000  # clocks given back after the sweep
    assert board.state()["max_freq_hz"] == 1_300_500_000


# --------------------------------------------------------------------------------------------
# On the simulated board (virtual clock)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def twin():
    from dvfslab.hw import get_backend

    return get_backend("sim", seed=3)


def test_sim_load_moves_virtual_time_and_samples_it(twin):
    from dvfslab.lab import SimLoad, live_panel

    panel = live_panel(twin, workload_id="bert-base/sst2", refresh_s=0.25, sample_period_s=0.05)
    assert isinstance(panel.advance, SimLoad) and panel.sampler.threaded is False
    assert panel.title == "Live power: SIMULATED board (digital twin)"
    t0 = twin.clock()
    panel.run(1.0, pace=False)
    assert panel.n_refreshes == 4
    assert twin.clock() - t0 >= 1.0  # at least the asked time, in whole training steps
    frame = panel.sampler.samples()
    assert np.allclose(np.diff(frame["t_s"]), 0.05)  # one reading per sampler period
    assert (frame["gpu_util_pct"] > 20).all()  # the board was training, not idle
    assert panel.readout.value.count("[simulated] GPU") == 1
    busy_w = frame["total_mw"].mean() / 1000

    dial = FrequencyDial(twin.clocks, simulated=True, guard=panel.board_lock)
    assert dial.lock(306.0) and dial.message.startswith("[simulated] locked: GPU at 306 MHz")
    panel.run(1.0, pace=False)
    low = panel.sampler.samples().iloc[len(frame):]
    assert (low["gpu_freq_mhz"] == 306.0).all()
    assert low["total_mw"].mean() / 1000 < busy_w  # lower clock, lower CPU+GPU power
    assert dial.restore() and twin.board.locked_mhz is None


def test_sim_load_idles_without_a_workload(twin):
    from dvfslab.lab import live_panel

    panel = live_panel(twin, workload_id=None, refresh_s=0.5, sample_period_s=0.1)
    panel.run(1.0, pace=False)
    frame = panel.sampler.samples()
    assert twin.clock() == pytest.approx(1.0) and len(frame) == 10
    assert (frame["gpu_util_pct"] == 0).all()


def test_sweep_panel_on_the_twin_resumes_and_redraws_finished_runs(twin, tmp_path):
    from dvfslab.lab import default_executor, lab_summary, live_panel

    panel = live_panel(twin, workload_id="bert-small/sst2", refresh_s=0.25)
    plan = make_plan(["bert-small/sst2"], [306.0, 816.0], maxn=False, steps=4, warmup_steps=1)
    first = SweepPanel(twin, default_executor(twin), tmp_path / "sweep", plan, resume=True,
                       guard=panel.exclusive_guard())
    assert panel.exclusive_guard() is panel.board_lock  # one virtual timeline: the panel pauses
    assert first.title.endswith("SIMULATED board (digital twin)")
    ds = first.run()
    assert ds.meta["source"] == "simulated" and first.progress.value == 2
    assert "[simulated] done: 2/2 runs ok" in first.status.value

    again = SweepPanel(twin, default_executor(twin), tmp_path / "sweep", plan, resume=True)
    again.run()  # nothing left to run: the finished runs are drawn from runs.csv
    assert again.progress.value == 2 and len(again.points) == 2
    assert sorted(again.points_frame()["gpu_freq_mhz"]) == [306.0, 816.0]
    summary = lab_summary(panel, FrequencyDial(twin.clocks, simulated=True), again)
    assert summary["simulated"] is True and summary["sweep"]["runs_ok"] == 2
    assert summary["sweep"]["least_energy_mhz"]["bert-small/sst2"] in (306.0, 816.0)
