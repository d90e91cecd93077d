"""The sweep panel: a small sweep run from the notebook, its energy curve drawn run by run."""

from __future__ import annotations

import contextlib
import html
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.data.contract import read_runs
from dvfslab.hw.base import Backend
from dvfslab.lab.common import board_label, figure_png, ipywidgets, is_simulated, message_html

POINT_COLUMNS = ["run_id", "workload_id", "policy", "gpu_freq_mhz", "rep", "time_s", "energy_j", "status"]


def plot_energy_curve(points: pd.DataFrame, *, title: str, levels_mhz: Sequence[float] = ()):
    """Energy per run (J) against the locked GPU clock, one line per workload (means over
    repetitions of ``ok`` runs); MAXN runs as a dashed level; the least-energy level starred."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.0), dpi=80)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.9, bottom=0.13)
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
    ``dvfslab pipeline --data OUT_DIR`` takes (see :func:`dvfslab.sweep.runner.run_sweep`)."""

    def __init__(self, backend: Backend, executor, out_dir, plan, *, cooldown=None,
                 workloads: pd.DataFrame | None = None, resume: bool = False, guard=None):
        self.backend = backend
        self.executor = executor
        self.out_dir = out_dir
        self.plan = plan
        self.cooldown = cooldown
        self.workloads = workloads
        self.resume = resume
        self.guard = guard if guard is not None else contextlib.nullcontext()
        self.simulated = is_simulated(backend)
        self.title = f"Energy per run vs GPU clock: {board_label(backend)}"
        self.levels_mhz = list(backend.clocks.levels_mhz()) if backend.clocks is not None else []
        self.points: list[dict] = []
        self.dataset = None
        self._thread: threading.Thread | None = None
        self._build()

    def _build(self) -> None:
        w = ipywidgets()
        self.progress = w.IntProgress(value=0, min=0, max=len(self.plan), description="runs",
                                      bar_style="info")
        self.status = w.HTML(message_html(f"{len(self.plan)} runs planned into {self.out_dir}", "note"))
        self.image = w.Image(format="png", layout=w.Layout(width="720px"))
        self.run_button = w.Button(description="Run sweep", icon="play", button_style="primary")
        self.run_button.on_click(lambda _b: self.start())
        self.widget = w.VBox([w.HTML(f"<b>{html.escape(self.title)}</b>"),
                              w.HBox([self.run_button, self.progress]), self.status, self.image])

    def points_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.points, columns=POINT_COLUMNS)

    def figure(self):
        return plot_energy_curve(self.points_frame(), title=self.title, levels_mhz=self.levels_mhz)

    def add_run(self, spec, result: Mapping | None, error: BaseException | str | None = None) -> None:
        """One run finished: record its point, advance the bar, redraw the curve."""
        energy = None if result is None else result.get("energy_j")
        self.points.append({
            "run_id": spec.run_id, "workload_id": spec.workload_id, "policy": spec.policy,
            "gpu_freq_mhz": spec.freq_mhz, "rep": spec.rep,
            "time_s": None if result is None else result.get("time_s"),
            "energy_j": energy, "status": "ok" if error is None and energy is not None else "failed"})
        self.progress.value = min(self.progress.max, self.progress.value + 1)
        what = f"{spec.workload_id} @ {spec.level_label} rep {spec.rep}"
        why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        msg = (f"{what}: failed ({why})" if error is not None else
               f"{what}: {energy:.1f} J in {result.get('time_s', math.nan):.1f} s" if energy is not None
               else f"{what}: no energy measured")
        prefix = "[simulated] " if self.simulated else ""
        self.status.value = message_html(f"{prefix}{self.progress.value}/{self.progress.max} runs; "
                                          f"last: {msg}", "error" if error else "info")
        self.image.value = figure_png(self.figure())

    def _on_record(self, record: Mapping) -> None:
        """``run_sweep``'s ``on_run`` hook: each committed run (ok or failed) becomes a point."""
        row = record["row"]
        spec = next((r for r in self.plan.runs if r.run_id == row["run_id"]), None)
        if spec is None:
            return
        if row["status"] == "ok":
            self.add_run(spec, row)
        else:
            self.add_run(spec, None, row.get("error") or "failed")

    def _load_existing(self) -> None:
        """On resume, draw the runs a previous session already committed (``runs.csv`` and the
        journal of a session that was killed before it compacted it)."""
        if not (self.resume and (Path(self.out_dir) / "runs.csv").exists()):
            return
        done = read_runs(self.out_dir)
        for row in done.to_dict("records"):
            self.points.append({c: row.get(c) for c in POINT_COLUMNS})
        self.progress.value = min(self.progress.max, len(done))

    def run(self):
        """Run the sweep in this thread; return the dataset (:class:`dvfslab.data.contract.Dataset`)."""
        from dvfslab.sweep.runner import run_sweep

        self._load_existing()
        self.run_button.disabled = True
        self.progress.bar_style = "info"
        try:
            with self.guard:
                self.dataset = run_sweep(self.plan, self.backend, self.executor, self.out_dir,
                                         resume=self.resume, cooldown=self.cooldown,
                                         workloads=self.workloads, progress=False, on_run=self._on_record)
        except DvfsError as err:
            self.progress.bar_style = "danger"
            self.status.value = message_html(f"sweep stopped: {err}", "error")
            raise
        finally:
            self.run_button.disabled = False
        self.progress.bar_style = "success"
        n_ok = int((self.dataset.runs["status"] == "ok").sum())
        self.status.value = message_html(
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
                self.status.value = message_html(f"sweep failed: {type(err).__name__}: {err}", "error")

        self._thread = threading.Thread(target=body, name="dvfslab-sweep-panel", daemon=True)
        self._thread.start()

    def _ipython_display_(self) -> None:  # pragma: no cover - notebook display hook
        from IPython.display import display

        display(self.widget)


def default_executor(backend: Backend):
    """How a sweep run executes on ``backend``: simulated training on the twin
    (:class:`~dvfslab.sweep.twin.SimExecutor`), real fine-tuning elsewhere
    (:class:`~dvfslab.sweep.executors.FinetuneExecutor`, needs the ``finetune`` extra)."""
    from dvfslab.sim.backend import SimBackend
    from dvfslab.sweep.executors import FinetuneExecutor
    from dvfslab.sweep.twin import SimExecutor

    return SimExecutor() if isinstance(backend, SimBackend) else FinetuneExecutor()


def lab_summary(panel, dial, sweep: SweepPanel) -> dict:
    """What the lab did, for ``summary.json``: board, live samples, dial, sweep results."""
    samples = panel.sampler.samples()
    points = sweep.points_frame()
    ok = points[(points["status"] == "ok") & (points["policy"] == "fixed")]
    best = ok.groupby(["workload_id", "gpu_freq_mhz"])["energy_j"].mean().reset_index()
    best = best.loc[best.groupby("workload_id")["energy_j"].idxmin()] if len(best) else best
    return {
        "backend": panel.backend.name,
        "simulated": panel.simulated,
        "board": board_label(panel.backend),
        "live": {"n_samples": int(len(samples)), "n_refreshes": panel.n_refreshes,
                 "span_s": float(samples["t_s"].iloc[-1] - samples["t_s"].iloc[0]) if len(samples) else 0.0,
                 "mean_total_w": float(samples["total_mw"].mean() / 1000) if len(samples) else None,
                 "max_total_w": float(samples["total_mw"].max() / 1000) if len(samples) else None,
                 "rails": list(panel.sampler.rails), "total_rails": list(panel.sampler.total_rails)},
        "dial": {"levels_mhz": list(dial.levels_mhz), "message": dial.message},
        "sweep": {"dir": str(sweep.out_dir), "runs": int(len(points)),
                  "runs_ok": int((points["status"] == "ok").sum()),
                  "least_energy_mhz": {r.workload_id: float(r.gpu_freq_mhz) for r in best.itertuples()}},
    }
