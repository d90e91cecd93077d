"""The interactive lab: a live power panel, a GPU frequency dial and a sweep panel (ipywidgets).

Each panel keeps its logic in plain methods that tests call directly
(:meth:`LivePowerPanel.refresh`, :meth:`FrequencyDial.lock`, :meth:`SweepPanel.add_run`);
the buttons and the refresh thread only call those methods. Plots are matplotlib figures
rendered to PNG into an ``ipywidgets.Image``, so a notebook executed headless (papermill,
``store_widget_state``) keeps the last frame in its saved widget state.

On the simulated board nothing moves by itself: the board lives on a virtual clock. The live
panel then takes an ``advance(seconds)`` function (see :func:`sim_advance`) and each refresh
advances the twin by the refresh interval of a background training load, sampling along the
way. On a Jetson the :class:`~dvfslab.power.PowerSampler` thread samples in real time and a
refresh only redraws. Every title and readout of the twin says "simulated".
"""

from __future__ import annotations

import html
import io
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from .backends.base import Backend, ClockControl, DvfsError, format_mhz, nearest_level
from .power import PowerSampler
from .power_trace import rail_column

SIM_LABEL = "SIMULATED board (digital twin)"
#: preferred thermal zones for the one temperature the readout shows
TEMP_ZONES = ("gpu-thermal", "GPU-therm", "tj-thermal", "soc0-thermal")


def is_simulated(backend: Backend) -> bool:
    """True for the digital twin (its data must be labelled simulated everywhere)."""
    return backend.name == "sim" or bool(backend.description.get("simulated"))


def board_label(backend: Backend) -> str:
    """``'SIMULATED board (digital twin)'`` on the twin, else the board's model or backend name."""
    if is_simulated(backend):
        return SIM_LABEL
    return str(backend.description.get("board") or backend.name)


def _widgets():
    """``ipywidgets``, imported lazily (the package works without the notebook extras)."""
    try:
        import ipywidgets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise DvfsError("the lab needs ipywidgets: pip install 'dvfslab[notebooks]'") from err
    return ipywidgets


def figure_png(fig) -> bytes:
    """Render a matplotlib Figure (Agg, no pyplot state) to PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    return buf.getvalue()


def _message_html(text: str, kind: str = "info") -> str:
    colour = {"info": "#1b5e20", "error": "#b71c1c", "note": "#37474f"}[kind]
    return f'<div style="color:{colour};white-space:pre-wrap">{html.escape(text)}</div>'


# --------------------------------------------------------------------------------------------
# Live power panel
# --------------------------------------------------------------------------------------------


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
    if freq is None and "gpu_freq_mhz" in samples and len(samples):
        freq = float(samples["gpu_freq_mhz"].iloc[-1])
    if load is None and "gpu_util_pct" in samples and len(samples):
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


def plot_live(samples: pd.DataFrame, history: pd.DataFrame, *, rails: Sequence[str],
              total_rails: Sequence[str], window_s: float, title: str):
    """Figure of the last ``window_s`` seconds: rails and CPU+GPU total (W) above, GPU
    frequency (MHz) and load (%) below. ``history`` holds the panel's readouts
    (``t_s``, ``gpu_freq_mhz``, ``gpu_load_pct``)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.6), dpi=80, layout="constrained")
    ax_p, ax_f = fig.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    t_end = max([float(d["t_s"].iloc[-1]) for d in (samples, history) if len(d)] or [0.0])
    t_start = t_end - window_s
    s = samples[samples["t_s"] >= t_start] if len(samples) else samples
    h = history[history["t_s"] >= t_start] if len(history) else history
    for rail in rails:
        col = rail_column(rail)
        if col in s:
            ax_p.plot(s["t_s"] - t_end, s[col] / 1000, lw=1.0, label=rail)
    if "total_mw" in s and len(s):
        ax_p.plot(s["t_s"] - t_end, s["total_mw"] / 1000, lw=2.2, color="black",
                  label=" + ".join(total_rails) or "total")
    ax_p.set_ylabel("power (W)")
    ax_p.grid(alpha=0.3)
    if len(s):
        ax_p.legend(loc="upper left", fontsize=7, ncol=2)
    if "gpu_freq_mhz" in h and h["gpu_freq_mhz"].notna().any():
        ax_f.step(h["t_s"] - t_end, h["gpu_freq_mhz"], where="post", color="tab:purple")
    ax_f.set_ylabel("GPU clock (MHz)", color="tab:purple")
    ax_l = ax_f.twinx()
    if "gpu_load_pct" in h and h["gpu_load_pct"].notna().any():
        ax_l.plot(h["t_s"] - t_end, h["gpu_load_pct"], color="tab:green", lw=1.0)
    ax_l.set_ylim(0, 105)
    ax_l.set_ylabel("GPU load (%)", color="tab:green")
    ax_f.set_xlim(-window_s, 0)
    ax_f.set_xlabel("time (s, 0 = now)")
    ax_f.grid(alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return fig


class LivePowerPanel:
    """Rails and CPU+GPU power, GPU clock, load and temperature, redrawn a few times a second.

    ``advance(seconds)``: how board time passes between refreshes on a virtual-clock board
    (:func:`sim_advance`); ``None`` on hardware, where the sampler thread samples by itself.
    :meth:`refresh` redraws from the sampler's samples; :meth:`tick` advances then refreshes;
    :meth:`run` does a bounded number of ticks in the calling thread (notebooks executed
    headless); Start/Stop run :meth:`tick` from a background thread.
    """

    def __init__(self, backend: Backend, sampler: PowerSampler | None = None, *,
                 advance: Callable[[float], None] | None = None, refresh_s: float = 0.25,
                 window_s: float = 30.0, sample_period_s: float | None = None):
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
        self.n_refreshes = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self._build()

    def _build(self) -> None:
        w = _widgets()
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.readout = w.HTML(_message_html("not started", "note"))
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
        return pd.DataFrame([[getattr(r, c) for c in cols] for r in self.history],
                            columns=cols, dtype=float)

    def figure(self):
        """The current plot as a matplotlib Figure (for a static copy in the notebook)."""
        return plot_live(self.sampler.samples(), self.history_frame(), rails=self.sampler.rails,
                         total_rails=self.sampler.total_rails, window_s=self.window_s,
                         title=self.title)

    def refresh(self) -> Readout:
        """Read the board, append to the history, redraw the plot and the readout line."""
        with self._lock:
            samples = self.sampler.samples()
            r = read_readout(self.backend, samples)
            self.history.append(r)
            self.readout.value = _message_html(format_readout(r, self.simulated))
            self.image.value = figure_png(self.figure())
            self.n_refreshes += 1
            return r

    def tick(self) -> Readout:
        """Let one refresh interval of board time pass (virtual boards), then refresh."""
        with self._lock:
            if self.advance is not None:
                self.advance(self.refresh_s)
            elif not (self.sampler.threaded and self.sampler.running):
                self.sampler.sample_once()
            return self.refresh()

    def run(self, seconds: float, *, pace: bool = True) -> int:
        """Tick for ``seconds`` of board time in this thread; ``pace`` sleeps between ticks.

        Bounded by construction (``ceil(seconds / refresh_s)`` ticks); returns the tick count.
        """
        n = max(1, math.ceil(seconds / self.refresh_s))
        self._ensure_sampler()
        for _ in range(n):
            t0 = time.monotonic()
            self.tick()
            if pace:
                time.sleep(max(0.0, self.refresh_s - (time.monotonic() - t0)))
        return n

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
        end = math.inf if duration_s is None else time.monotonic() + duration_s
        try:
            while not self._stop.is_set() and time.monotonic() < end:
                t0 = time.monotonic()
                self.tick()
                self._stop.wait(max(0.0, self.refresh_s - (time.monotonic() - t0)))
        except Exception as err:  # shown in the panel, not lost in a thread
            self.error = f"{type(err).__name__}: {err}"
            self.readout.value = _message_html(f"live panel stopped: {self.error}", "error")
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


# --------------------------------------------------------------------------------------------
# Frequency dial
# --------------------------------------------------------------------------------------------


class FrequencyDial:
    """A slider over the board's GPU levels that locks the clock, and a Restore button.

    Errors a user can hit (no permission, a level capped by the power mode) are shown in the
    widget as the backend's one-line message, not as a traceback; the slider then goes back to
    the level the board is really at.
    """

    def __init__(self, clocks: ClockControl | None, *, simulated: bool = False,
                 on_change: Callable[[float | None], None] | None = None):
        self.clocks = clocks
        self.simulated = simulated
        self.on_change = on_change
        self.levels_mhz: list[float] = list(clocks.levels_mhz()) if clocks is not None else []
        self.locked_mhz: float | None = None
        self.message = ""
        self._quiet = False
        self._build()

    def _build(self) -> None:
        w = _widgets()
        options = [(f"{format_mhz(f)} MHz", f) for f in self.levels_mhz] or ["no clock control"]
        self.slider = w.SelectionSlider(options=options, description="GPU clock",
                                        continuous_update=False,
                                        layout=w.Layout(width="640px"),
                                        style={"description_width": "80px"})
        self.restore_button = w.Button(description="Restore", icon="undo",
                                       tooltip="give the clocks back to the board's governor")
        self.status = w.HTML()
        self.restore_button.on_click(lambda _b: self.restore())
        self.slider.observe(self._on_slider, names="value")
        self.widget = w.VBox([w.HBox([self.slider, self.restore_button]), self.status])
        if self.clocks is None:
            self.slider.disabled = self.restore_button.disabled = True
            self._show("this backend has no clock control", "note")
        else:
            self._sync_slider()
            self._show(self.describe_state(), "note")

    def _show(self, text: str, kind: str = "info") -> None:
        self.message = ("[simulated] " if self.simulated else "") + text
        self.status.value = _message_html(self.message, kind)

    def _on_slider(self, change: Mapping) -> None:
        if not self._quiet and self.clocks is not None:
            self.lock(change["new"])

    def _sync_slider(self) -> None:
        """Put the slider on the level the board runs at, without locking anything."""
        try:
            cur = self.clocks.state().cur_freq_mhz
        except (OSError, DvfsError) as err:
            self._show(f"cannot read the clock state: {err}", "error")
            return
        self._quiet = True
        try:
            self.slider.value = nearest_level(cur, self.levels_mhz)
        finally:
            self._quiet = False

    def describe_state(self) -> str:
        """``'GPU at 612 MHz (min 612, max 612, governor nvhost_podgov): locked'``."""
        st = self.clocks.state()
        how = "locked" if st.locked else "free (the governor picks the clock)"
        return (f"GPU at {format_mhz(st.cur_freq_mhz)} MHz (min {format_mhz(st.min_freq_mhz)}, "
                f"max {format_mhz(st.max_freq_mhz)}, governor {st.governor or '?'}): {how}")

    def lock(self, freq_mhz: float) -> bool:
        """Lock the GPU at ``freq_mhz``; True on success, else the reason is shown in the widget."""
        if self.clocks is None:
            self._show("this backend has no clock control", "error")
            return False
        try:
            st = self.clocks.lock(freq_mhz)
        except DvfsError as err:
            self._show(f"could not lock {format_mhz(freq_mhz)} MHz: {err}", "error")
            self._sync_slider()
            return False
        self.locked_mhz = float(freq_mhz)
        self._show(f"locked: GPU at {format_mhz(st.cur_freq_mhz)} MHz "
                   f"(min {format_mhz(st.min_freq_mhz)}, max {format_mhz(st.max_freq_mhz)})")
        if self.slider.value != float(freq_mhz):
            self._quiet = True
            try:
                self.slider.value = float(freq_mhz)
            finally:
                self._quiet = False
        if self.on_change:
            self.on_change(self.locked_mhz)
        return True

    def restore(self) -> bool:
        """Give the clocks back (what the board had before the first lock)."""
        if self.clocks is None:
            return False
        try:
            self.clocks.reset()
        except DvfsError as err:
            self._show(f"could not restore the clocks: {err}", "error")
            return False
        self.locked_mhz = None
        self._sync_slider()
        self._show("restored: " + self.describe_state())
        if self.on_change:
            self.on_change(None)
        return True

    def _ipython_display_(self) -> None:  # pragma: no cover - notebook display hook
        from IPython.display import display

        display(self.widget)


def widget_state(widget) -> dict:
    """The values that matter of a widget tree, by description (for tests and logs)."""
    out = {}
    for child in getattr(widget, "children", ()):
        out.update(widget_state(child))
    keys = ("value", "options", "disabled", "max", "description")
    name = getattr(widget, "description", "") or type(widget).__name__
    out[name] = {k: getattr(widget, k) for k in keys if hasattr(widget, k) and k != "description"}
    return out



# --------------------------------------------------------------------------------------------
# Sweep panel
# --------------------------------------------------------------------------------------------


class NotifyingExecutor:
    """Wrap a sweep executor and report every finished run: ``on_done(spec, result, error)``.

    Everything else (``threaded_sampler``, ``wait``, ``describe``) is the wrapped executor's,
    so the sweep and its ``meta.json`` see the same executor as without the panel.
    """

    def __init__(self, inner, on_done: Callable):
        self.inner = inner
        self.on_done = on_done

    @property
    def threaded_sampler(self) -> bool:
        return getattr(self.inner, "threaded_sampler", True)

    def wait(self, backend: Backend, sampler, seconds: float) -> None:
        from .executors import wait

        wait(self.inner, backend, sampler, seconds)

    def describe(self) -> dict:
        from .executors import describe_executor

        return describe_executor(self.inner)

    def run(self, spec, backend: Backend, sampler) -> Mapping:
        try:
            result = self.inner.run(spec, backend, sampler)
        except Exception as err:
            self.on_done(spec, None, err)
            raise
        self.on_done(spec, result, None)
        return result


POINT_COLUMNS = ["run_id", "workload_id", "policy", "gpu_freq_mhz", "rep", "time_s", "energy_j", "status"]


def plot_energy_curve(points: pd.DataFrame, *, title: str, levels_mhz: Sequence[float] = ()):
    """Energy per run (J) against the locked GPU clock, one line per workload (means over
    repetitions of ``ok`` runs); MAXN runs as a dashed level; the least-energy level starred."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.0), dpi=80, layout="constrained")
    ax = fig.subplots()
    ok = points[points["status"] == "ok"] if len(points) else points
    for i, (wid, g) in enumerate(ok.groupby("workload_id", sort=True)):
        colour = f"C{i % 10}"
        fixed = g[g["policy"] == "fixed"].groupby("gpu_freq_mhz")["energy_j"].mean().sort_index()
        if len(fixed):
            ax.plot(fixed.index, fixed.values, "o-", color=colour, label=wid)
            best = fixed.idxmin()
            ax.plot([best], [fixed[best]], "*", ms=16, color=colour, mec="black")
        maxn = g.loc[g["policy"] == "maxn", "energy_j"]
        if len(maxn):
            ax.axhline(maxn.mean(), ls="--", color=colour, lw=1, label=f"{wid} MAXN")
    failed = int((points["status"] != "ok").sum()) if len(points) else 0
    if levels_mhz:
        ax.set_xlim(min(levels_mhz) - 50, max(levels_mhz) + 50)
    ax.set_xlabel("GPU clock (MHz)")
    ax.set_ylabel("energy per run (J, CPU + GPU)")
    ax.grid(alpha=0.3)
    if len(ok):
        ax.legend(fontsize=8, loc="upper center")
    ax.set_title(title + (f"  ({failed} failed)" if failed else ""), fontsize=11)
    return fig


class SweepPanel:
    """Run a small sweep from the notebook: a progress bar and the energy curve drawn point by
    point as runs finish. Results go to ``out_dir``, a dataset directory that
    ``dvfslab pipeline --data OUT_DIR`` takes (see :func:`dvfslab.sweep.run_sweep`)."""

    def __init__(self, backend: Backend, executor, out_dir, plan, *, cooldown=None,
                 workloads: pd.DataFrame | None = None, resume: bool = False):
        self.backend = backend
        self.executor = executor
        self.out_dir = out_dir
        self.plan = plan
        self.cooldown = cooldown
        self.workloads = workloads
        self.resume = resume
        self.simulated = is_simulated(backend)
        self.title = f"Energy per run vs GPU clock: {board_label(backend)}"
        self.levels_mhz = list(backend.clocks.levels_mhz()) if backend.clocks is not None else []
        self.points: list[dict] = []
        self.dataset = None
        self._thread: threading.Thread | None = None
        self._build()

    def _build(self) -> None:
        w = _widgets()
        self.progress = w.IntProgress(value=0, min=0, max=len(self.plan), description="runs",
                                      bar_style="info")
        self.status = w.HTML(_message_html(f"{len(self.plan)} runs planned into {self.out_dir}", "note"))
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.run_button = w.Button(description="Run sweep", icon="play", button_style="primary")
        self.run_button.on_click(lambda _b: self.start())
        self.widget = w.VBox([w.HTML(f"<b>{html.escape(self.title)}</b>"),
                              w.HBox([self.run_button, self.progress]), self.status, self.image])

    def points_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.points, columns=POINT_COLUMNS)

    def figure(self):
        return plot_energy_curve(self.points_frame(), title=self.title, levels_mhz=self.levels_mhz)

    def add_run(self, spec, result: Mapping | None, error: BaseException | None = None) -> None:
        """One run finished: record its point, advance the bar, redraw the curve."""
        energy = None if result is None else result.get("energy_j")
        self.points.append({
            "run_id": spec.run_id, "workload_id": spec.workload_id, "policy": spec.policy,
            "gpu_freq_mhz": spec.freq_mhz, "rep": spec.rep,
            "time_s": None if result is None else result.get("time_s"),
            "energy_j": energy, "status": "ok" if error is None and energy is not None else "failed"})
        self.progress.value = min(self.progress.max, self.progress.value + 1)
        what = f"{spec.workload_id} @ {spec.level_label} rep {spec.rep}"
        msg = (f"{what}: failed ({type(error).__name__}: {error})" if error is not None else
               f"{what}: {energy:.1f} J in {result.get('time_s', math.nan):.1f} s" if energy is not None
               else f"{what}: no energy measured")
        prefix = "[simulated] " if self.simulated else ""
        self.status.value = _message_html(f"{prefix}{self.progress.value}/{self.progress.max} runs; "
                                          f"last: {msg}", "error" if error else "info")
        self.image.value = figure_png(self.figure())

    def _load_existing(self) -> None:
        """On resume, draw the runs a previous session already finished."""
        from pathlib import Path

        runs_csv = Path(self.out_dir) / "runs.csv"
        if not (self.resume and runs_csv.exists()):
            return
        done = pd.read_csv(runs_csv)
        for row in done.to_dict("records"):
            self.points.append({c: row.get(c) for c in POINT_COLUMNS})
        self.progress.value = min(self.progress.max, len(done))

    def run(self):
        """Run the sweep in this thread; return the dataset (:class:`dvfslab.dataset.Dataset`)."""
        from .sweep import run_sweep

        self._load_existing()
        self.run_button.disabled = True
        self.progress.bar_style = "info"
        try:
            self.dataset = run_sweep(self.plan, self.backend, NotifyingExecutor(self.executor, self.add_run),
                                     self.out_dir, resume=self.resume, cooldown=self.cooldown,
                                     workloads=self.workloads, progress=False)
        except DvfsError as err:
            self.progress.bar_style = "danger"
            self.status.value = _message_html(f"sweep stopped: {err}", "error")
            raise
        finally:
            self.run_button.disabled = False
        self.progress.bar_style = "success"
        n_ok = int((self.dataset.runs["status"] == "ok").sum())
        self.status.value = _message_html(
            ("[simulated] " if self.simulated else "") + f"done: {n_ok}/{len(self.dataset.runs)} runs ok, "
            f"dataset in {self.out_dir}; analyse it with: dvfslab pipeline --data {self.out_dir}")
        return self.dataset

    def start(self) -> None:
        """Run the sweep in a background thread (the Run button); errors show in the panel."""
        if self._thread is not None and self._thread.is_alive():
            return

        def body():
            try:
                self.run()
            except DvfsError:
                pass  # already shown by run()
            except Exception as err:  # shown, not lost in the thread
                self.status.value = _message_html(f"sweep failed: {type(err).__name__}: {err}", "error")

        self._thread = threading.Thread(target=body, name="dvfslab-sweep-panel", daemon=True)
        self._thread.start()

    def _ipython_display_(self) -> None:  # pragma: no cover - notebook display hook
        from IPython.display import display

        display(self.widget)
