"""The level-policy callback on a virtual clock, and the online governor inside a real Trainer.

A fake backend (clock control whose state the test reads, rails that draw ``P(f)`` at the locked
level ``f``, a virtual clock) stands in for the board; a fake training loop calls the hooks like
a ``Trainer`` and advances the clock by ``T(f) = 0.02 + 12 / f`` s per step. Nothing sleeps, so
every time and energy below is exact and computed by hand from ``P`` and ``T``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from test_cli_hardware import ORIGINAL, limits  # noqa: E402

from dvfslab.core.errors import DvfsError
from dvfslab.governors.base import Decision  # noqa: E402
from dvfslab.governors.online import OnlineGovernor  # noqa: E402
from dvfslab.harness.callback import DvfsCallback  # noqa: E402
from dvfslab.harness.online_callback import OnlineDvfsCallback  # noqa: E402
from dvfslab.harness.policy import LevelPolicy  # noqa: E402
from dvfslab.harness.types import FinetuneError  # noqa: E402
from dvfslab.hw.base import (  # noqa: E402
    Backend,
    ClockState,
    PowerReader,
    PowerSample,
    UnsupportedFrequencyError,
)
from dvfslab.measure.sampler import PowerSampler  # noqa: E402

LEVELS = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]
BOARD_MHZ = 1300.5  # what the fake board runs at when nobody holds the clocks


def step_time_s(f: float) -> float:
    return 0.02 + 12.0 / f


def power_w(f: float) -> float:
    return 4.0 + 0.004 * f + 6e-6 * f * f


class VirtualClock:
    def __init__(self):
        self.t_s = 0.0

    def __call__(self) -> float:
        return self.t_s


class FakeClocks:
    """Clock control that records every lock and reset."""

    def __init__(self, fail_lock: bool = False):
        self.locked_mhz: float | None = None
        self.locks: list[float] = []
        self.resets = 0
        self.fail_lock = fail_lock

    def levels_mhz(self) -> list[float]:
        return list(LEVELS)

    def state(self) -> ClockState:
        f = self.locked_mhz or BOARD_MHZ
        lo, hi = (f, f) if self.locked_mhz else (LEVELS[0], LEVELS[-1])
        return ClockState(f, lo, hi, levels_mhz=tuple(LEVELS))

    def lock(self, freq_mhz: float) -> ClockState:
        if freq_mhz not in LEVELS:
            raise UnsupportedFrequencyError(freq_mhz, LEVELS)
        self.locks.append(freq_mhz)
        if self.fail_lock:  # half-way: min written, max refused
            raise PermissionError("max_freq: permission denied")
        self.locked_mhz = freq_mhz
        return self.state()

    def reset(self) -> None:
        self.resets += 1
        self.locked_mhz = None


class FakeRails(PowerReader):
    """CPU + GPU rails drawing ``power_w(f)`` at the current level, 70 % of it on the GPU rail."""

    rails = total_rails = ("VDD_GPU_SOC", "VDD_CPU_CV")
    update_interval_s = None

    def __init__(self, clocks: FakeClocks, clock: VirtualClock):
        self.clocks, self.clock = clocks, clock

    def read(self) -> PowerSample:
        p_mw = 1000.0 * power_w(self.clocks.state().cur_freq_mhz)
        return PowerSample(self.clock(), {"VDD_GPU_SOC": 0.7 * p_mw, "VDD_CPU_CV": 0.3 * p_mw})


def fake_backend(fail_lock: bool = False) -> Backend:
    clock, clocks = VirtualClock(), FakeClocks(fail_lock)
    return Backend(name="fake", clocks=clocks, power=FakeRails(clocks, clock), clock=clock,
                   simulated=True, virtual_time=True)


class _State:
    global_step = 0


def fake_training(backend: Backend, cb: DvfsCallback, n_steps: int, fail_at: int | None = None,
                  sampler: PowerSampler | None = None) -> list[float]:
    """Drive the hooks like a Trainer inside ``with cb``; return the level of each step."""
    seen, state = [], _State()
    with cb:
        cb.on_train_begin(None, state, None)
        cb.on_epoch_begin(None, state, None)
        for i in range(n_steps):
            cb.on_step_begin(None, state, None)
            f = backend.clocks.state().cur_freq_mhz
            seen.append(f)
            if i == fail_at:
                raise RuntimeError("training blew up")
            backend.clock.t_s += step_time_s(f)
            if sampler is not None:
                sampler.sample_once()  # what a virtual-time driver does at each tick
            state.global_step += 1
            cb.on_step_end(None, state, None)
        cb.on_epoch_end(None, state, None)
        cb.on_train_end(None, state, None)
    return seen


def test_fixed_level_run_on_a_virtual_clock_measures_exact_windows():
    backend = fake_backend()
    sampler = PowerSampler(backend.power, 0.01, clock=backend.clock, threaded=False)
    cb = DvfsCallback(backend, freq_mhz=612, warmup_steps=2, sampler=sampler)
    seen = fake_training(backend, cb, 6, sampler=sampler)
    t_step = 0.02 + 12.0 / 612  # 0.0396078... s
    assert seen == [612.0] * 6 and backend.clocks.locks == [612.0] and backend.clocks.resets == 1
    assert backend.clocks.locked_mhz is None and not sampler.running  # given back, stopped
    row = cb.run_fields()
    # P(612) = 4 + 2.448 + 2.247264 = 8.695264 W over the 4 measured steps
    assert row["steps"] == 4 and row["gpu_freq_mhz"] == 612.0
    assert row["time_s"] == pytest.approx(4 * t_step, rel=1e-12)
    assert row["energy_j"] == pytest.approx(8.695264 * 4 * t_step, rel=1e-9)
    assert row["energy_gpu_j"] == pytest.approx(0.7 * 8.695264 * 4 * t_step, rel=1e-9)
    assert row["avg_power_w"] == pytest.approx(8.695264, rel=1e-9)
    assert row["mean_gpu_freq_mhz"] == 612.0 and row["gpu_util_pct"] is None  # polled; no telemetry
    steps = cb.step_rows("r")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert all(s["time_s"] == pytest.approx(t_step, rel=1e-9) for s in steps)
    assert all(s["energy_j"] == pytest.approx(8.695264 * t_step, rel=1e-9) for s in steps)
    assert len(cb.epochs) == 1 and cb.epochs[0].time_s == pytest.approx(4 * t_step, rel=1e-12)


def test_training_that_raises_resets_the_clocks_and_stops_the_sampler():
    backend = fake_backend()
    cb = DvfsCallback(backend, freq_mhz=510)
    with pytest.raises(RuntimeError, match="blew up"):
        fake_training(backend, cb, 5, fail_at=2)
    assert backend.clocks.locks == [510.0] and backend.clocks.resets == 1
    assert backend.clocks.locked_mhz is None and not cb.sampler.running
    assert cb.error == "RuntimeError: training blew up"
    # two whole steps at 510 MHz were measured before the failure: 2 x (0.02 + 12/510) s
    assert cb.time_s == pytest.approx(2 * (0.02 + 12.0 / 510), rel=1e-12)
    cb.close()  # idempotent: nothing is reset twice
    assert backend.clocks.resets == 1


def test_a_lock_that_fails_half_way_is_still_reset_and_nothing_keeps_running():
    backend = fake_backend(fail_lock=True)
    cb = DvfsCallback(backend, freq_mhz=408)
    with pytest.raises(PermissionError):
        fake_training(backend, cb, 3)
    assert backend.clocks.locks == [408.0] and backend.clocks.resets == 1
    assert cb.sampler is None or not cb.sampler.running


def test_a_sweeps_running_sampler_is_left_running():
    backend = fake_backend()
    sampler = PowerSampler(backend.power, 0.01, clock=backend.clock, threaded=False).start()
    fake_training(backend, DvfsCallback(backend, freq_mhz=306, sampler=sampler), 2, sampler=sampler)
    assert sampler.running and backend.clocks.resets == 1


class Fixed:
    def __init__(self, mhz):
        self.mhz, self.name = mhz, "stub"

    def decide(self, features, probe=None):
        return Decision(self.mhz)


def test_governor_choice_snaps_to_a_level_ties_going_up():
    backend = fake_backend()
    # 357 MHz is half-way between 306 and 408: the devfreq ceil rule takes 408
    seen = fake_training(backend, DvfsCallback(backend, governor=Fixed(357.0)), 1)
    assert seen == [408.0] and backend.clocks.locks == [408.0]
    backend = fake_backend()
    cb = DvfsCallback(backend, governor=Fixed(None))  # None: leave the clocks alone
    assert fake_training(backend, cb, 1) == [BOARD_MHZ] and backend.clocks.locks == [] and backend.clocks.resets == 0
    assert cb.policy.name == "stub"
    with pytest.raises(FinetuneError, match="either freq_mhz or a governor"):
        DvfsCallback(backend, freq_mhz=510, governor=Fixed(510.0))


class Script(LevelPolicy):
    """A per-step policy that plays a fixed list of levels (None: hand the clocks back)."""

    per_step = True

    def __init__(self, levels):
        self.levels = list(levels)

    def step_mhz(self):
        return self.levels.pop(0)


def test_per_step_policy_locks_only_on_change_and_hands_back_on_none():
    backend = fake_backend()
    cb = DvfsCallback(backend, policy=Script([612.0, 612.0, None, 816.0]))
    seen = fake_training(backend, cb, 4)
    assert seen == [612.0, 612.0, BOARD_MHZ, 816.0] and cb.levels_by_step == [612.0, 612.0, None, 816.0]
    assert backend.clocks.locks == [612.0, 816.0] and backend.clocks.resets == 2  # at the None, at the end


def test_online_probes_fits_and_locks_the_true_minimum():
    # E(f) = P(f) T(f) by hand: 306 -> 0.342611 J, 408 -> 0.327639 J, 510 -> 0.330850 J,
    # 612 -> 0.344401 J, ... 1300.5 -> 0.565541 J: the least is 408 MHz
    backend = fake_backend()
    cb = OnlineDvfsCallback(backend, sample_period_s=0.01)
    n = cb.profiler.profiling_steps
    seen = fake_training(backend, cb, n + 4)
    assert seen[:n] == cb.levels_by_step[:n] == cb.profiler.schedule
    assert cb.profiler.chosen_level == 408.0 and seen[n:] == [408.0] * 4
    for f, time_s, energy_j, units in cb.profiler.observed:  # each probing step (one unit), measured exactly
        assert units == 1.0
        assert time_s == pytest.approx(step_time_s(f), rel=1e-9)
        assert energy_j == pytest.approx(power_w(f) * step_time_s(f), rel=1e-9)
    assert backend.clocks.locked_mhz is None and not cb.sampler.running


def test_the_profiled_governor_runs_live_through_the_same_callback():
    """Any probing governor goes through the one interface: the profiled governor's probe runs at
    the board's default clock (nothing locked), then its level holds. Its model here has zero
    slopes: ln(E / E_b) = -0.1 at 408 MHz and -0.3 at 1020 MHz, so 1020 MHz whatever it measures."""
    from dvfslab.governors.profiled import ProfiledGovernor

    gov = ProfiledGovernor(probe_steps=3, warmup_steps=1)
    gov.knob_, gov.curve_ = "gpu_freq_mhz", {
        "features": ["probe_power_w"], "transforms": {"probe_power_w": "log"}, "impute": {"probe_power_w": 10.0},
        "mean": [0.0], "scale": [1.0], "levels": [408.0, 1020.0],
        "energy": {"intercept": [-0.1, -0.3], "coef": [[0.0, 0.0]]}, "time": {"intercept": [0.5, 0.2], "coef": [[0.0, 0.0]]}}
    backend = fake_backend()
    cb = OnlineDvfsCallback(backend, gov, workload={"gpu_util_pct": 60.0}, sample_period_s=0.01)
    seen = fake_training(backend, cb, 4 + 2)
    assert seen == [BOARD_MHZ] * 4 + [1020.0] * 2 and backend.clocks.locks == [1020.0]
    assert cb.profiler.decision().level == 1020.0 and len(cb.profiler.decision().probed) == 4
    for level, time_s, energy_j, _ in cb.profiler.observed:  # measured at the default clock
        assert level is None and time_s == pytest.approx(step_time_s(BOARD_MHZ), rel=1e-9)
        assert energy_j == pytest.approx(power_w(BOARD_MHZ) * step_time_s(BOARD_MHZ), rel=1e-9)


def test_zeus_jit_and_search_run_live_one_step_per_level():
    """Their probes are fractions of a unit (1/11 of one here); live a unit is a step, so each
    level they measure runs one whole step. E(f) = P(f) T(f) by hand: 306 -> 0.342611 J,
    408 -> 0.327639 J, 510 -> 0.330850 J, 714 -> 9.914776 x 0.0368067 = 0.364930 J,
    816 -> 11.259136 x 0.0347059 = 0.390761 J: the least is 408 MHz. zeus-sim runs every level,
    highest first; the search from the middle (816): 714 cheaper, walk down; jump 2 -> 510
    cheaper, jump 4 -> 306 dearer; bracket around 510: 408 cheaper; both its neighbours measured."""
    from dvfslab.governors.search import SearchGovernor
    from dvfslab.governors.zeus_jit import ZeusSimGovernor

    backend = fake_backend()
    cb = OnlineDvfsCallback(backend, ZeusSimGovernor(), sample_period_s=0.01)
    seen = fake_training(backend, cb, len(LEVELS) + 2)
    assert seen == LEVELS[::-1] + [408.0] * 2 and cb.profiler.decision().level == 408.0
    assert all(units == 1.0 for *_, units in cb.profiler.observed)  # a whole step each
    backend = fake_backend()
    cb = OnlineDvfsCallback(backend, SearchGovernor(prior=None), sample_period_s=0.01)
    seen = fake_training(backend, cb, 5 + 2)
    assert seen == [816.0, 714.0, 510.0, 306.0, 408.0, 408.0, 408.0] and backend.clocks.locked_mhz is None


def test_online_failing_step_still_restores_the_clocks():
    backend = fake_backend()
    cb = OnlineDvfsCallback(backend, OnlineGovernor(coarse_steps=1, fine_steps=1), sample_period_s=0.01)
    with pytest.raises(RuntimeError, match="blew up"):
        fake_training(backend, cb, 10, fail_at=3)
    assert backend.clocks.locked_mhz is None and backend.clocks.resets == 1 and not cb.sampler.running
    assert len(cb.profiler.observed) == 3  # the failing step was not fed to the profiler


def test_refuses_a_backend_without_clocks_or_power():
    with pytest.raises(DvfsError, match="no GPU clock control"):
        OnlineDvfsCallback(Backend(name="none"))
    with pytest.raises(DvfsError, match="no power reader"):
        OnlineDvfsCallback(Backend(name="clocks-only", clocks=FakeClocks()))


def test_inside_a_real_trainer_with_a_tiny_model(orin_jp6, tmp_path):
    pytest.importorskip("torch")
    from test_finetune import QUICK, TINY_BERT, ClockSpy

    from dvfslab.harness.finetune import finetune
    from dvfslab.hw.jetson.backend import open_backend

    orin_jp6.set_rail("VDD_GPU_SOC", 5000.0)
    orin_jp6.set_rail("VDD_CPU_CV", 2000.0)
    backend = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "state")
    cb = OnlineDvfsCallback(backend, OnlineGovernor(coarse_steps=1, fine_steps=1), sample_period_s=0.005)
    prof, spy = cb.profiler, ClockSpy(orin_jp6)  # 1 + 5 + 3 = 9 probing steps
    with cb:
        res = finetune(TINY_BERT, "synthetic:sst2", backend=backend, steps=prof.profiling_steps + 2,
                       callbacks=[cb, spy], **QUICK)
    at_step_end = [s["cur_freq_hz"] / 1e6 for s in spy.states]
    assert at_step_end[:9] == prof.schedule and at_step_end[9:] == [prof.chosen_level] * 2
    assert prof.done and res.run["status"] == "ok"
    assert limits(orin_jp6) == ORIGINAL
