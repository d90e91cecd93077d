"""The board a governed job runs on: its levels, how a level is locked and the default given
back, the meter of its windows, and how its clocks are restored.

A :class:`JobBoard` is what :class:`~dvfslab.job.runner.GovernedRun` needs of a machine. The
builders: :func:`sim_board` (the digital twin: each unit the job reports is one simulated step;
every figure simulated), :func:`nvml_board` (a discrete GPU: clocks or its power limit through
NVML), :func:`jetson_board` (a Jetson's sysfs, or an injected fake tree with its virtual clock),
and the replay board (:class:`dvfslab.job.replay.ReplayBoard`: a dataset's cell on a virtual
clock, which also makes the job's progress).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import BackendUnavailableError


@dataclass
class JobBoard:
    """One machine under a governed job (module doc).

    ``lock(level)`` / ``reset()``: lock a level, give the clock back to the board (the default,
    also the restore on exit); ``meter``: :class:`~dvfslab.job.live.SamplerMeter`,
    :class:`~dvfslab.job.live.SimMeter` or a replay meter; ``handled``: a virtual clock's
    handshake with its synthetic job (None on a board); ``settle_s``: the clock's settle time;
    ``feed``: the board's own progress (the replay board; None: the job's); ``default_level``:
    what the default clock runs at (None: the table's top); ``clock_knob``: a level is a clock
    (False: a power limit); ``restored``: the line saying the clocks are back; ``gpu_load``: the
    GPU's load now, % (its telemetry; None: none), read over the default-clock windows when the
    user gave no ``gpu_util_pct``; ``describe(level)``: a level in words where it is not a clock
    (a joint setting: :func:`dvfslab.job.joint.joint_board`)."""

    name: str
    levels: Sequence[float]
    lock: Callable[[float], Any]
    reset: Callable[[], Any]
    meter: Any
    settle_s: float
    simulated: bool = False
    handled: Callable[[float], None] | None = None
    feed: Any = None
    default_level: float | None = None
    clock_knob: bool = True
    restored: Callable[[], str] | None = None
    gpu_load: Callable[[], float | None] | None = None
    describe: Callable[[float], str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def set_level(self, level: float | None) -> None:
        if level is None:
            self.reset()
        else:
            self.lock(level)

    def close(self) -> None:
        self.meter.close()


def _restored_line(clocks) -> Callable[[], str] | None:
    if hasattr(clocks, "restored_line"):
        return clocks.restored_line
    if hasattr(clocks, "state"):
        def line() -> str:
            st = clocks.state()
            lock = "locked" if st.locked else "unlocked"
            return (f"clocks restored: cur {st.cur_freq_mhz:g} MHz, min {st.min_freq_mhz:g} MHz, "
                    f"max {st.max_freq_mhz:g} MHz, governor {st.governor} ({lock})")
        return line
    return None


def _load(backend) -> Callable[[], float | None] | None:
    tel = getattr(backend, "telemetry", None)
    return None if tel is None else tel.gpu_load_pct


def _locker(clocks) -> Callable[[float], Any]:
    return lambda level: clocks.lock(level, nearest=True)


def sim_workload(feats: Mapping[str, Any]):
    """The twin's workload for the simulated board: the features given, a BERT-base-like job otherwise."""
    from dvfslab.sim.model import SimWorkload

    row = {"workload_id": "govern (simulated)", "n_layers": 12, "hidden_size": 768, "avg_seq_len": 128,
           "max_seq_len": 128, "batch_size": 16, "params_m": 110}
    row.update({k: v for k, v in feats.items() if k in row})
    return SimWorkload.from_row(row)


def sim_board(features: Mapping[str, Any] | None = None, board: str | None = None) -> JobBoard:
    """The digital twin (``--backend sim``): each unit the job reports is one simulated step at the
    locked level; every figure simulated. ``board``: the simulated module (None: the AGX Orin)."""
    from dvfslab.hw import get_backend
    from dvfslab.job.live import SimMeter

    be = get_backend("sim", **({} if board is None else {"board": board}))
    meter = SimMeter(be.board, sim_workload(features or {}))
    return JobBoard("the SIMULATED board", be.clocks.levels_mhz(), _locker(be.clocks), be.clocks.reset, meter,
                    settle_s=meter.interval_s, simulated=True, restored=_restored_line(be.clocks),
                    gpu_load=lambda: meter.gpu_util_pct, extra={"clocks": be.clocks})


def nvml_board(knob: str = "clock", state_dir=None, say: Callable[[str], None] = lambda s: None) -> JobBoard:
    """A discrete GPU through NVML: its clocks, or (``knob="power-limit"``) its power limit."""
    from dvfslab.hw import get_backend
    from dvfslab.job.live import SamplerMeter

    be = get_backend("nvml")
    if knob == "power-limit":
        from dvfslab.job.nvml_limit import NvmlPowerLimit

        limit = NvmlPowerLimit(state_dir=state_dir)
        if limit.repaired:
            say(limit.repaired)
        if be.power is None:
            raise DvfsError("NVML gives no power reading on this GPU: dvfslab govern cannot measure it")
        meter = SamplerMeter(be.power, be.clock, virtual=False)
        return JobBoard("nvml (power limit)", limit.levels_mhz(), _locker(limit), limit.reset, meter,
                        settle_s=meter.interval_s, clock_knob=False, restored=_restored_line(limit),
                        extra={"clocks": limit})
    if be.clocks is None or be.power is None:
        raise DvfsError("NVML offers no clock control or no power reading on this GPU: dvfslab govern cannot "
                        "measure it (dvfslab devices says which)")
    meter = SamplerMeter(be.power, be.clock, virtual=False)
    return JobBoard("nvml", be.clocks.levels_mhz(), _locker(be.clocks), be.clocks.reset, meter,
                    settle_s=meter.interval_s, restored=_restored_line(be.clocks), gpu_load=_load(be),
                    extra={"clocks": be.clocks})


def jetson_board(io, state_dir=None, *, root: str = "/", auto: bool = False) -> JobBoard:
    """A Jetson through its sysfs (``io``: the sysfs I/O, an injected fake tree included, whose
    virtual clock then times the job)."""
    from dvfslab.hw.jetson.backend import open_backend
    from dvfslab.job.live import SamplerMeter

    try:
        be = open_backend(io=io, state_dir=state_dir)
    except BackendUnavailableError as err:
        hint = " (or --backend sim to try it on the simulated board)" if auto else ""
        raise DvfsError(f"no Jetson GPU clock control under {root}: {err}{hint}") from None
    if be.power is None:
        raise DvfsError(f"no power rails under {root}: {be.description.get('power_error')}")
    virtual = io.virtual_clock
    clock = virtual if virtual is not None else be.clock
    be.power.clock = clock  # the samples' time base is the job's clock
    meter = SamplerMeter(be.power, clock, virtual=virtual is not None)
    return JobBoard("jetson", be.clocks.levels_mhz(), _locker(be.clocks), be.clocks.reset, meter,
                    settle_s=meter.interval_s, handled=getattr(virtual, "handled", None),
                    restored=_restored_line(be.clocks), gpu_load=_load(be), extra={"clocks": be.clocks})
