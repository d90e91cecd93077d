"""The live power panel: rails and CPU+GPU total, GPU clock and load, temperature.

:meth:`LivePowerPanel.refresh` redraws from the sampler's samples; the Start/Stop thread only
calls :meth:`LivePowerPanel.tick`. On the simulated board nothing moves by itself (virtual
clock): :class:`SimLoad` lets each refresh advance the twin by a background training load.
"""

from __future__ import annotations

import html
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import Backend, format_mhz
from dvfslab.lab.common import board_label, figure_png, ipywidgets, is_simulated, message_html
from dvfslab.measure.sampler import PowerSampler
from dvfslab.measure.trace import rail_column

#: preferred thermal zones for the one temperature the readout shows
TEMP_ZONES = ("gpu-thermal", "GPU-therm", "tj-thermal", "soc0-thermal")


@dataclass(frozen=True)
class Readout:
    """What the board says now, for the panel's text line (``None`` = not available)."""

    t_s: float
    gpu_freq_mhz: float | None
    gpu_load_pct: float | None
    temp_c: float | None
    temp_zone: str | None
    total_mw: float | None


def read_readout(backend: Backend, samples: pd.DataFrame) -> Readout:
    """Current GPU frequency, load and temperature from the backend, total power from samples."""
    freq = load = temp = zone = None
    if backend.clocks is not None:
        try:
            freq = backend.clocks.state().cur_freq_mhz
        except (OSError, DvfsError, ValueError):
            freq = None
    if backend.telemetry is not None:
        try:
            load = backend.telemetry.gpu_load_pct()
            temps = backend.telemetry.temperatures_c()
        except (OSError, DvfsError, ValueError):
            temps = {}
        zone = next((z for z in TEMP_ZONES if z in temps), max(temps, key=temps.get) if temps else None)
        temp = temps.get(zone) if zone else None
    # the latest sample is what the board did most recently (on the twin, the state the
    # telemetry reports between two chunks of work is idle): prefer it for clock and load
    if "gpu_freq_mhz" in samples and len(samples) and not math.isnan(samples["gpu_freq_mhz"].iloc[-1]):
        freq = float(samples["gpu_freq_mhz"].iloc[-1])
    if "gpu_util_pct" in samples and len(samples) and not math.isnan(samples["gpu_util_pct"].iloc[-1]):
        load = float(samples["gpu_util_pct"].iloc[-1])
    total = float(samples["total_mw"].iloc[-1]) if len(samples) else None
    t_s = float(samples["t_s"].iloc[-1]) if len(samples) else float(backend.clock())
    return Readout(t_s, freq, load, temp, zone, total)


def format_readout(r: Readout, simulated: bool) -> str:
    """One line: ``GPU 612 MHz · load 87 % · gpu-thermal 52.1 °C · CPU+GPU 14.20 W``."""
    def part(value, fmt: str, missing: str) -> str:
        return missing if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)

    parts = [
        "GPU " + (f"{format_mhz(r.gpu_freq_mhz)} MHz" if r.gpu_freq_mhz is not None else "? MHz"),
        part(r.gpu_load_pct, "load {:.0f} %", "load ?"),
        part(r.temp_c, f"{r.temp_zone} {{:.1f}} °C", "temperature ?"),
        part(None if r.total_mw is None else r.total_mw / 1000, "CPU+GPU {:.2f} W", "CPU+GPU ? W"),
    ]
    return ("[simulated] " if simulated else "") + " · ".join(parts)


def _series(samples: pd.DataFrame, history: pd.DataFrame, sample_col: str,
            history_col: str) -> tuple[np.ndarray, np.ndarray]:
    """(t_s, values) per sample when the power reader reports the column, else per refresh."""
    for frame, col in ((samples, sample_col), (history, history_col)):
        if col in frame and frame[col].notna().any():
            return frame["t_s"].to_numpy(float), frame[col].to_numpy(float)
    return np.array([]), np.array([])


class LivePlot:
    """The live figure, built once and updated in place (rebuilding it costs more than drawing).

    Above: every rail and the CPU+GPU total (W); below: GPU clock (MHz) and load (%), over the
    last ``window_s`` seconds with 0 = the newest sample.
    """

    def __init__(self, rails: Sequence[str], total_rails: Sequence[str], *, window_s: float,
                 title: str, time_label: str = "time (s, 0 = now)"):
        from matplotlib.figure import Figure

        self.rails, self.window_s = list(rails), float(window_s)
        self.fig = Figure(figsize=(9.0, 4.0), dpi=80)  # fixed margins: a layout engine is slow
        self.fig.subplots_adjust(left=0.08, right=0.92, top=0.9, bottom=0.12, hspace=0.08)
        self.ax_p, self.ax_f = self.fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
        self.ax_l = self.ax_f.twinx()
        self.rail_lines = {r: self.ax_p.plot([], [], lw=1.0, label=r)[0] for r in self.rails}
        self.total_line = self.ax_p.plot([], [], lw=2.2, color="black",
                                         label=" + ".join(total_rails) or "total")[0]
        self.freq_line = self.ax_f.step([], [], where="post", color="tab:purple")[0]
        self.load_line = self.ax_l.plot([], [], color="tab:green", lw=1.0)[0]
        self.ax_p.set_ylabel("power (W)")
        self.ax_p.grid(alpha=0.3)
        self.ax_p.legend(loc="upper left", fontsize=7, ncol=3)
        self.ax_f.set_ylabel("GPU clock (MHz)", color="tab:purple")
        self.ax_l.set_ylabel("GPU load (%)", color="tab:green")
        self.ax_l.set_ylim(0, 105)
        self.ax_f.set_xlim(-self.window_s, 0)
        self.ax_f.set_xlabel(time_label)
        self.ax_f.grid(alpha=0.3)
        self.fig.suptitle(title, fontsize=11)

    def update(self, samples: pd.DataFrame, history: pd.DataFrame):
        """Show the newest ``window_s`` of ``samples`` (and of the panel's readouts ``history``:
        ``t_s``, ``gpu_freq_mhz``, ``gpu_load_pct``); return the figure."""
        t_end = max([float(d["t_s"].iloc[-1]) for d in (samples, history) if len(d)] or [0.0])
        s = samples[samples["t_s"] >= t_end - self.window_s] if len(samples) else samples
        h = history[history["t_s"] >= t_end - self.window_s] if len(history) else history
        t = s["t_s"].to_numpy(float) - t_end
        top_w = 1.0
        for rail, line in self.rail_lines.items():
            col = rail_column(rail)
            y = s[col].to_numpy(float) / 1000 if col in s else np.array([])
            line.set_data(t[: len(y)], y)
            top_w = max(top_w, float(y.max(initial=0)))
        total = s["total_mw"].to_numpy(float) / 1000 if "total_mw" in s else np.array([])
        self.total_line.set_data(t[: len(total)], total)
        self.ax_p.set_ylim(0, 1.35 * max(top_w, float(total.max(initial=0))))  # legend room
        t_f, freq = _series(s, h, "gpu_freq_mhz", "gpu_freq_mhz")
        t_u, load = _series(s, h, "gpu_util_pct", "gpu_load_pct")
        self.freq_line.set_data(t_f - t_end, freq)
        self.load_line.set_data(t_u - t_end, load)
        if len(freq):
            lo, hi = float(np.nanmin(freq)), float(np.nanmax(freq))
            pad = max(50.0, 0.1 * (hi - lo))
            self.ax_f.set_ylim(lo - pad, hi + pad)
        return self.fig


def plot_live(samples: pd.DataFrame, history: pd.DataFrame, *, rails: Sequence[str],
              total_rails: Sequence[str], window_s: float, title: str):
    """One :class:`LivePlot` figure of ``samples`` and ``history`` (for static use)."""
    return LivePlot(rails, total_rails, window_s=window_s, title=title).update(samples, history)


class SimLoad:
    """``advance(seconds)`` for the twin's live panel: a background training load.

    Each call trains ``workload_id`` on the simulated board until its virtual clock has moved
    by ``seconds`` (whole steps, so it may overshoot by one step; the next call catches up),
    letting ``sampler`` read the rails every ``sampler.period_s`` of virtual time. With
    ``workload_id=None`` the board idles instead. Simulated, like everything on the twin.
    """

    def __init__(self, backend: Backend, sampler: PowerSampler, workload_id: str | None,
                 max_steps_per_call: int = 200):
        from dvfslab.sim.backend import sim_board

        self.board = board = sim_board(backend, "SimLoad", "on hardware time passes by itself; give "
                                       "the live panel advance=None")
        self.sampler = sampler
        self.workload_id = workload_id
        self.workload = None
        if workload_id is not None:
            from dvfslab.sim.board import SimWorkload

            model, _, task = workload_id.rpartition("/")
            self.workload = SimWorkload.from_catalog(model, task)
        self.max_steps_per_call = int(max_steps_per_call)
        self.step_s: float | None = None
        self.target_s = board.now()

    def _tick(self, _t_s: float) -> None:
        self.sampler.sample_once()

    def __call__(self, seconds: float) -> None:
        self.target_s = max(self.target_s, self.board.now()) + float(seconds)
        period = self.sampler.period_s
        if self.workload is None:
            self.board.idle(self.target_s - self.board.now(), on_tick=self._tick, tick_s=period)
            return
        while self.board.now() < self.target_s:
            left = self.target_s - self.board.now()
            n = 1 if self.step_s is None else math.ceil(left / self.step_s)
            result = self.board.train(self.workload, max(1, min(n, self.max_steps_per_call)),
                                      on_tick=self._tick, tick_s=period)
            self.step_s = result.time_s / result.steps


class LivePowerPanel:
    """Rails and CPU+GPU power, GPU clock, load and temperature, redrawn a few times a second.

    ``advance(seconds)``: how board time passes between refreshes on a virtual-clock board
    (:class:`SimLoad`); ``None`` on hardware, where the sampler thread samples by itself.
    :meth:`refresh` redraws from the sampler's samples; :meth:`tick` advances then refreshes;
    :meth:`run` does a bounded number of ticks in the calling thread (notebooks executed
    headless); Start/Stop run :meth:`tick` from a background thread, which reads ``now`` and
    waits with ``wait(delay_s)`` (True: stop) between refreshes.
    """

    def __init__(self, backend: Backend, sampler: PowerSampler | None = None, *,
                 advance: Callable[[float], None] | None = None, refresh_s: float = 0.25,
                 window_s: float = 30.0, sample_period_s: float | None = None,
                 now: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], bool] | None = None):
        if backend.power is None:
            raise DvfsError(f"backend {backend.name!r} has no power reader "
                            f"({backend.description.get('power_error', 'no rails found')}); "
                            "the live panel needs one")
        if not refresh_s > 0:
            raise DvfsError(f"refresh_s must be > 0 s, got {refresh_s!r}")
        self.backend = backend
        self.advance = advance
        self.sampler = sampler or PowerSampler(backend.power, period_s=sample_period_s,
                                               clock=backend.clock, threaded=advance is None)
        self.refresh_s = float(refresh_s)
        self.window_s = float(window_s)
        self.simulated = is_simulated(backend)
        self.title = f"Live power: {board_label(backend)}"
        self.history: list[Readout] = []
        self.plot = LivePlot(self.sampler.rails, self.sampler.total_rails, window_s=self.window_s,
                             title=self.title, time_label="virtual time (s, 0 = now)"
                             if self.simulated else "time (s, 0 = now)")
        self.n_refreshes = 0
        self.board_lock = threading.RLock()
        self._stop = threading.Event()
        # the refresh thread's clock and wait (``wait(delay_s) -> True`` to stop); a test
        # injects virtual ones, the default waits on the stop event
        self._now = now
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self._build()

    def _build(self) -> None:
        w = ipywidgets()
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.readout = w.HTML(message_html("not started", "note"))
        self.start_button = w.Button(description="Start", icon="play", button_style="success")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.start_button.on_click(lambda _b: self.start())
        self.stop_button.on_click(lambda _b: self.stop())
        header = w.HTML(f"<b>{html.escape(self.title)}</b>")
        self.widget = w.VBox([header, w.HBox([self.start_button, self.stop_button]),
                              self.readout, self.image])

    # -- plain, testable logic -----------------------------------------------------------------
    def history_frame(self) -> pd.DataFrame:
        """The readouts taken at each refresh (``t_s``, ``gpu_freq_mhz``, ``gpu_load_pct``, ``temp_c``)."""
        cols = ["t_s", "gpu_freq_mhz", "gpu_load_pct", "temp_c"]
        return pd.DataFrame([[r.t_s, r.gpu_freq_mhz, r.gpu_load_pct, r.temp_c] for r in self.history],
                            columns=cols, dtype=float)

    def figure(self):
        """The current plot as a matplotlib Figure (also for a static copy in the notebook)."""
        return self.plot.update(self.sampler.samples(), self.history_frame())

    def refresh(self) -> Readout:
        """Read the board, append to the history, redraw the plot and the readout line."""
        with self.board_lock:
            samples = self.sampler.samples()
            r = read_readout(self.backend, samples)
            self.history.append(r)
            self.readout.value = message_html(format_readout(r, self.simulated))
            self.image.value = figure_png(self.figure())
            self.n_refreshes += 1
            return r

    def tick(self) -> Readout:
        """Let one refresh interval of board time pass (virtual boards), then refresh."""
        with self.board_lock:
            if self.advance is not None:
                self.advance(self.refresh_s)
            elif not (self.sampler.threaded and self.sampler.running):
                self.sampler.sample_once()
            return self.refresh()

    def run(self, seconds: float, *, pace: bool = True) -> None:
        """Tick ``ceil(seconds / refresh_s)`` times in this thread (bounded, for notebooks run
        headless); ``pace`` waits out the rest of each refresh interval, as the thread does."""
        n = max(1, math.ceil(seconds / self.refresh_s))
        self._ensure_sampler()
        for _ in range(n):
            t0 = self._now()
            self.tick()
            if pace:
                time.sleep(max(0.0, self.refresh_s - (self._now() - t0)))

    def exclusive_guard(self) -> threading.RLock | None:
        """What a sweep on the same board must hold while it runs: the panel's board lock on a
        virtual-clock board (the twin has one timeline; the panel then pauses), else None."""
        return self.board_lock if self.advance is not None else None

    def _ensure_sampler(self) -> None:
        if not self.sampler.running:
            self.sampler.start()

    # -- thread (thin) -------------------------------------------------------------------------
    def start(self, duration_s: float | None = None) -> None:
        """Refresh from a background thread until :meth:`stop` (or ``duration_s`` of wall time)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._ensure_sampler()
        self._stop.clear()
        self.start_button.disabled, self.stop_button.disabled = True, False
        self._thread = threading.Thread(target=self._loop, args=(duration_s,),
                                        name="dvfslab-live-panel", daemon=True)
        self._thread.start()

    def _loop(self, duration_s: float | None) -> None:
        now = self._now
        end = math.inf if duration_s is None else now() + duration_s
        try:
            while not self._stop.is_set() and now() < end:
                t0 = now()
                self.tick()
                if self._wait(max(0.0, self.refresh_s - (now() - t0))):
                    break
        except Exception as err:  # shown in the panel, not lost in a thread
            self.error = f"{type(err).__name__}: {err}"
            self.readout.value = message_html(f"live panel stopped: {self.error}", "error")
        finally:
            self.start_button.disabled, self.stop_button.disabled = False, True

    def stop(self) -> None:
        """Stop refreshing (and the sampler thread); the samples are kept."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5 * self.refresh_s + 5)
        self._thread = None
        if self.sampler.running:
            self.sampler.stop()
        self.start_button.disabled, self.stop_button.disabled = False, True

    def _ipython_display_(self) -> None:  # pragma: no cover - notebook display hook
        from IPython.display import display

        display(self.widget)


def live_panel(backend: Backend, *, workload_id: str | None = None, refresh_s: float = 0.25,
               window_s: float = 30.0, sample_period_s: float | None = None) -> LivePowerPanel:
    """The live panel for ``backend``: on the twin, driven by a :class:`SimLoad` of
    ``workload_id`` on a virtual-time sampler; on hardware, a real-time sampler thread."""
    from dvfslab.sim.backend import SimBackend

    if isinstance(backend, SimBackend):
        sampler = PowerSampler(backend.power, period_s=sample_period_s, clock=backend.clock,
                               threaded=False)
        return LivePowerPanel(backend, sampler, advance=SimLoad(backend, sampler, workload_id),
                              refresh_s=refresh_s, window_s=window_s)
    return LivePowerPanel(backend, refresh_s=refresh_s, window_s=window_s,
                          sample_period_s=sample_period_s)
