"""The simulated board as a backend: the :mod:`dvfslab.hw.base` protocols over a :class:`SimBoard`.

``open_backend(board="agx-orin-64gb", seed=0)`` (the ``"sim"`` entry of
:func:`dvfslab.hw.get_backend`) returns a :class:`SimBackend` whose ``clocks``, ``power`` and
``telemetry`` implement the protocols, whose ``clock`` is the board's virtual time and which
says ``simulated=True, virtual_time=True``. Every reading is simulated, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import (
    Backend,
    ClockControl,
    ClockState,
    LockCheck,
    PinnedClock,
    PowerReader,
    PowerSample,
    Telemetry,
    check_level,
)
from dvfslab.sim.board import SimBoard, TickStates

__all__ = ["SimBackend", "SimClocks", "SimPowerReader", "SimTelemetry", "open_backend", "sim_board"]


class SimPinnedClock(PinnedClock):
    """The EMC or the CPU clusters' clock of the simulated board.

    By default (``physical=False``) a pin is checked against the power mode's cap, held as
    requested and reported *unverified*; it does not reach the physics, so sweeps on the twin keep
    the EMC following the GPU clock (the pre-#32 numbers). With ``physical=True`` (``open_backend(...,
    physical_pins=True)``) a pin must be one of the profile's levels and the twin runs at it
    (:meth:`~dvfslab.sim.board.SimBoard.set_other_clocks`, issue #32): it reads back as pinned,
    *verified* (simulated)."""

    def __init__(self, board: SimBoard, name: str, physical: bool = False):
        self.board, self.name, self.physical = board, name, bool(physical)
        self.label = {"emc": "EMC (memory clock, simulated)", "cpu": "CPU clusters (simulated)"}[name]
        self.pinned_mhz: float | None = None

    def levels_mhz(self) -> list[float]:
        p = self.board.profile
        return list(p.emc_levels_mhz if self.name == "emc" else p.cpu_levels_mhz)

    def max_allowed_mhz(self) -> float:
        p, mode = self.board.profile, self.board.mode
        cap = p.emc_cap_mhz(mode) if self.name == "emc" else (mode.cpu_max_mhz or p.cpu_fmax_mhz)
        return max([f for f in self.levels_mhz() if f <= cap + 1e-6] or [cap])

    def read_mhz(self) -> float | None:
        """The clock the twin runs at: the pin, or unpinned its own rule (the EMC level that follows
        the GPU clock, the CPU at the mode's top); None when pins do not reach the physics."""
        if not self.physical:
            return None
        if self.pinned_mhz is not None:
            return self.pinned_mhz
        if self.name == "emc":
            from dvfslab.sim.model import emc_mhz

            return float(emc_mhz(self.board.profile, self.board.freq_mhz, mode=self.board.mode))
        return self.max_allowed_mhz()

    def pin(self, freq_mhz: float) -> LockCheck:
        top = self.max_allowed_mhz()
        if freq_mhz > top + 0.5:
            raise DvfsError(f"{self.label}: {freq_mhz:g} MHz is above {top:g} MHz, the power mode's cap")
        if not self.physical:
            self.pinned_mhz = float(freq_mhz)
            return LockCheck(float(freq_mhz), None, "unverified",
                             f"the simulated board does not model a pinned {self.name} clock in a sweep (its backend "
                             "does not pass pins to the physics)")
        level = check_level(freq_mhz, self.levels_mhz())
        clocks = {"emc_mhz": self.board.emc_mhz, "cpu_mhz": self.board.cpu_mhz, f"{self.name}_mhz": level}
        self.board.set_other_clocks(**clocks)
        self.pinned_mhz = level
        return LockCheck(level, level, "verified", f"the twin runs at the pinned {self.name} clock (simulated)",
                         source="twin")

    def release(self) -> None:
        """Back to the twin's own rule (the EMC follows the GPU clock; the CPU at the mode's top)."""
        self.pinned_mhz = None
        if self.physical:
            clocks = {"emc_mhz": self.board.emc_mhz, "cpu_mhz": self.board.cpu_mhz, f"{self.name}_mhz": None}
            self.board.set_other_clocks(**clocks)


class SimClocks(ClockControl):
    """:class:`~dvfslab.hw.base.ClockControl` of a :class:`SimBoard`."""

    def __init__(self, board: SimBoard, physical_pins: bool = False):
        self.board = board
        self._others = {name: SimPinnedClock(board, name, physical_pins) for name in ("emc", "cpu")}

    def other_clocks(self) -> dict[str, SimPinnedClock]:
        return dict(self._others)

    def levels_mhz(self) -> list[float]:
        return list(self.board.profile.levels_mhz)

    def state(self) -> ClockState:
        b = self.board
        lo = b.locked_mhz if b.locked_mhz is not None else b.governor.fmin
        hi = b.locked_mhz if b.locked_mhz is not None else b.governor.cap
        return ClockState(b.freq_mhz, lo, hi, "nvhost_podgov", tuple(self.levels_mhz()))

    def lock(self, freq_mhz: float, nearest: bool = False) -> ClockState:
        self.board.lock(check_level(freq_mhz, self.levels_mhz(), nearest=nearest))
        return self.state()

    def reset(self) -> None:
        self.board.unlock()
        for clock in self._others.values():
            clock.release()


class SimPowerReader(PowerReader):
    """:class:`~dvfslab.hw.base.PowerReader` of a :class:`SimBoard` (INA3221-like rails).

    Readings carry seeded sensor noise (the board's ``sensor_rng``) and are rounded to whole
    mW, like the hwmon files.
    """

    def __init__(self, board: SimBoard):
        self.board = board
        self.rails = board.profile.rails
        self.total_rails = board.profile.total_rails

    def read_ticks(self, ticks: TickStates) -> dict:
        """Readings at every tick of ``ticks`` at once, with the same noise model and rounding
        as :meth:`read`: keyword arguments for :meth:`~dvfslab.measure.sampler.PowerSampler.extend`."""
        b, n = self.board, ticks.t_s.size
        p = b.profile
        watts = {r: np.broadcast_to(w, (n,)) for r, w in ticks.rails(p).items()}
        noise = b.sensor_rng.normal(0.0, p.sensor_sigma, size=(n, len(self.rails)))
        rails_mw = {r: np.round(watts[r] * 1000.0 * (1.0 + noise[:, j])) for j, r in enumerate(self.rails)}
        return {"t_s": ticks.t_s, "rails_mw": rails_mw, "gpu_util_pct": 100.0 * ticks.util,
                "gpu_freq_mhz": ticks.freq_mhz}

    def read(self) -> PowerSample:
        b = self.board
        sigma = b.profile.sensor_sigma
        noise = b.sensor_rng.normal(0.0, sigma, size=len(self.rails))
        watts = b.power_w()
        power_mw = {r: float(round(watts[r] * 1000.0 * (1.0 + e))) for r, e in zip(self.rails, noise, strict=True)}
        return PowerSample(b.now(), power_mw, gpu_util_pct=100.0 * b.gpu_util(), gpu_freq_mhz=b.freq_mhz)


class SimTelemetry(Telemetry):
    """:class:`~dvfslab.hw.base.Telemetry` of a :class:`SimBoard`."""

    def __init__(self, board: SimBoard):
        self.board = board

    def gpu_load_pct(self) -> float | None:
        return round(100.0 * self.board.gpu_util(), 1)

    def temperatures_c(self) -> dict[str, float]:
        t, amb = self.board.temperature_c(), self.board.profile.ambient_c
        return {"gpu-thermal": round(t, 2), "cpu-thermal": round(amb + 0.8 * (t - amb), 2),
                "tj-thermal": round(t + 1.0, 2)}


@dataclass
class SimBackend(Backend):
    """A :class:`Backend` that also exposes the :class:`SimBoard` it drives."""

    board: SimBoard | None = None


def sim_board(backend: Backend, who: str, fix: str) -> SimBoard:
    """The simulated board behind ``backend``, for code that drives the twin's virtual time
    (``who`` needs it); :class:`DvfsError` naming ``fix`` on any other backend."""
    if isinstance(backend, SimBackend) and backend.board is not None:
        return backend.board
    raise DvfsError(f"{who} needs the simulated board (the sim backend), not {backend.name!r}: {fix}")


def open_backend(board: str = "agx-orin-64gb", seed: int = 0, *, power_mode: int | str = 0,
                 board_id: str | None = None, physical_pins: bool = False, **_ignored) -> SimBackend:
    """Open the simulated board ``board`` (see :data:`dvfslab.sim.model.PROFILES`) with noise seed ``seed``.

    ``board_id`` names this board in a fleet's records (default ``sim-<profile>-s<seed>``).
    ``physical_pins``: EMC / CPU pins reach the twin's physics (:class:`SimPinnedClock`; default
    off: the twin's numbers before issue #32 whatever is pinned).

    Keyword arguments meant for hardware backends (``sysfs_root`` …) are ignored.
    """
    b = SimBoard(board, seed, power_mode=power_mode)
    p = b.profile
    description = {
        "board": p.display_name, "profile": p.name, "board_id": board_id or f"sim-{p.name}-s{b.seed}", "gpu": p.gpu, "simulated": True, "seed": b.seed,
        "calibrated": p.calibrated, "power_mode": f"{b.mode.id} ({b.mode.name})",
        "governor": "nvhost_podgov (emulated)", "levels_mhz": list(p.levels_mhz), "rails": list(p.rails),
        "total_rails": list(p.total_rails),
        "other_clocks": "EMC / CPU pins reach the physics" if physical_pins else "EMC / CPU pins accepted, not modelled",
        "note": "digital twin: every reading is simulated, not measured (see docs/calibration.md)",
    }
    return SimBackend(name="sim", clocks=SimClocks(b, physical_pins), power=SimPowerReader(b), telemetry=SimTelemetry(b),
                      clock=b.now, description=description, board=b, simulated=True, virtual_time=True)
