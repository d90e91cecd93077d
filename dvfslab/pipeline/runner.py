"""Run the notebook series 01 → 05 with papermill and collect its outputs.

``run_pipeline(data_dir, out_dir)`` executes each notebook in its own kernel, one after the
other, with the parameters ``DATA_DIR``, ``OUTPUT_DIR``, ``SEED`` and ``QUICK``, the
governor registry's lists to notebooks 04 and 05 (``GOVERNOR_NAMES``: every registered governor,
plugins included; ``RECOMMEND_CANDIDATES``: the recommendable ones; :func:`registry_parameters`)
and their ``OBJECTIVE``: the run's objective, which every governor optimises
(:func:`dvfslab.governors.objective.parse_objective`'s string; ``summary.json`` →
``pipeline.objective``); each kernel is
started, and imports what the notebooks import, while the notebook before it runs
(:class:`dvfslab.pipeline.kernels.KernelPool`), and each notebook's HTML is rendered while the
next one runs (``summary.json`` → ``pipeline.seconds``: each notebook's execution). The
notebooks chain through files in ``OUTPUT_DIR`` (``sweep.json``, ``tables/*.csv``, ``models/mlg.json``, ``models/curve.json``,
``summary.json``). The notebooks save their figures with
:func:`dvfslab.pipeline.figures.save_figure`. The output folder then holds:

* ``NN_name.ipynb`` — the executed notebooks (with the parameters they ran with), and
  ``NN_name.html`` — their HTML rendering;
* ``figures/*.png``, ``tables/*.csv``, ``models/*.json`` (the fitted governors);
* ``summary.json`` — the headline numbers (keys documented in docs/method.md;
  :mod:`dvfslab.pipeline.summary` reads and writes it), among them
  ``recommended: {policy, cv_regret_pct, ffg_cv_regret_pct, reason, ...}`` (notebook 04: the
  governor to use, FFG unless a learned one beats it beyond the CV noise; docs/governors.md),
  which the run also prints at its end, with what qualifies the figures (in-sample, nothing to
  learn, where the headline comes from: :func:`dvfslab.pipeline.summary.caveat_lines`).

Progress goes to ``stream`` (standard error): one bar per notebook on a terminal, one line per
notebook elsewhere (a log, CI). The first failing notebook stops the run with a
:class:`PipelineError` naming the notebook and the cell; its executed copy (with the traceback)
is kept in ``<out>.incomplete``. The run is written into a temporary sibling of the output
folder and renamed into place only when complete, so the output folder is never half-written;
Ctrl-C raises :class:`PipelineInterrupted`, whose one line names the notebook interrupted, the
notebooks complete (kept in ``<out>.incomplete``) and the command to rerun.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import (
    atomic_write_text,
    new_sibling,
    publish_folder,
    refuse_occupied,
    refuse_overlap,
    write_output_marker,
    written_by,
)
from dvfslab.data.contract import load_dataset
from dvfslab.pipeline.summary import caveat_lines, recommendation_line, update_summary

NOTEBOOKS: tuple[str, ...] = ("01_characterization", "02_feature_engineering", "03_model_selection_loocv",
                              "04_governor_evaluation", "05_beyond_the_paper")
# figures each notebook must leave under figures/ (checked after the run)
FIGURES: dict[str, tuple[str, ...]] = {
    "01_characterization": ("sweep_curves", "energy_u_curves", "optimal_level_heatmap"),
    "02_feature_engineering": ("feature_relations",),
    "03_model_selection_loocv": ("cv_comparison", "mlg_tree", "mlg_paper_tree"),
    "04_governor_evaluation": ("savings_slowdown", "saving_vs_slowdown", "whole_job"),
    "05_beyond_the_paper": ("governor_cv", "pareto_energy_time"),
}
#: the parameters each notebook takes from the governor registry (:func:`registry_parameters`)
REGISTRY_PARAMETERS: dict[str, tuple[str, ...]] = {
    "04_governor_evaluation": ("GOVERNOR_NAMES", "RECOMMEND_CANDIDATES"),
    "05_beyond_the_paper": ("GOVERNOR_NAMES",),
}
#: the notebooks that take the run's objective (``OBJECTIVE``)
OBJECTIVE_NOTEBOOKS: tuple[str, ...] = ("04_governor_evaluation", "05_beyond_the_paper")
KERNEL = "python3"
#: the command whose output marker (:data:`dvfslab.core.files.OUTPUT_MARKER`) a run leaves in its folder
COMMAND = "dvfslab pipeline"
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=ERROR",)  # no start-up chatter


class PipelineError(DvfsError):
    """A notebook of the series failed, or left out an output it must write."""


#: the bundled notebooks and dataset ship inside the package (links to the checkout's top-level
#: ``notebooks/`` and ``data/replay/`` in a source tree, copies in an installed wheel)
PACKAGE_DIR = Path(__file__).resolve().parent


def default_data_dir() -> Path:
    """The bundled (simulated) dataset: ``data/replay`` of the checkout, shipped with the package."""
    return PACKAGE_DIR / "replay"


def default_out_dir(now: datetime | None = None) -> Path:
    """``runs/<YYYYmmdd-HHMMSS>`` under the current directory."""
    return Path("runs") / (now or datetime.now()).strftime("%Y%m%d-%H%M%S")


def notebook_dir() -> Path:
    """Where the notebooks live; a clear error when this is not a source checkout."""
    path = PACKAGE_DIR / "notebooks"
    if not (path / f"{NOTEBOOKS[0]}.ipynb").exists():
        raise PipelineError(f"{path}: the notebooks are not there; reinstall dvfslab (pip install .), "
                            "or in a checkout restore the link dvfslab/pipeline/notebooks -> ../../notebooks")
    return path


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


class Progress:
    """A notebook's progress on ``stream``: on a terminal one bar (papermill's, left in place when
    done), elsewhere one line when it is done; ``total`` notebooks in the run."""

    def __init__(self, stream: TextIO, total: int):
        self.stream, self.total = stream, total
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def bar(self, i: int, name: str) -> dict | bool:
        """papermill's ``progress_bar`` argument for notebook ``i`` (1-based)."""
        if not self.tty:
            return False
        return {"desc": f"[{i}/{self.total}] {name}", "file": self.stream, "leave": True, "dynamic_ncols": True,
                "bar_format": "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} cells [{elapsed}]"}

    def done(self, i: int, name: str, cells: int, seconds: float) -> None:
        """Notebook ``i`` finished: its line (not on a terminal, where its bar says it)."""
        if not self.tty:
            self.stream.write(f"[{i}/{self.total}] {name}: {cells} cells in {seconds:.1f} s\n")
            self.stream.flush()


def execute(name: str, out_dir: Path, parameters: Mapping[str, Any], progress: dict | bool, km: Any) -> Path:
    """Execute one notebook with papermill into ``out_dir``, in the started kernel ``km`` (a
    jupyter_client kernel manager from :class:`~dvfslab.pipeline.kernels.KernelPool`);
    PipelineError names the cell."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    src = notebook_dir() / f"{name}.ipynb"
    dst = out_dir / f"{name}.ipynb"
    try:
        papermill.execute_notebook(str(src), str(dst), parameters=dict(parameters), kernel_name=KERNEL,
                                   progress_bar=progress, log_output=False, cwd=str(out_dir), km=km)
    except PapermillExecutionError as err:
        raise PipelineError(f"notebook {name}.ipynb failed in cell {err.cell_index + 1} (execution count "
                            f"{err.exec_count}): {err.ename}: {err.evalue.strip().splitlines()[0] if err.evalue else ''}"
                            f" — the executed copy with the traceback is {dst}") from None
    return dst


def render_html(notebook: Path) -> Path:
    """Write ``<notebook>.html`` next to an executed notebook (nbconvert, lab template)."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(notebook))
    html = notebook.with_suffix(".html")
    atomic_write_text(html, body)
    return html


def registry_parameters(name: str) -> dict[str, list[str]]:
    """The parameters notebook ``name`` takes from the governor registry (:data:`REGISTRY_PARAMETERS`):
    ``GOVERNOR_NAMES``, every registered governor, and ``RECOMMEND_CANDIDATES``, those that may
    replace FFG (:mod:`dvfslab.governors.registry`)."""
    from dvfslab.governors import registry

    lists = {"GOVERNOR_NAMES": registry.names, "RECOMMEND_CANDIDATES": registry.recommendable_names}
    return {param: lists[param]() for param in REGISTRY_PARAMETERS.get(name, ())}


def missing_figures(out_dir: Path, notebooks: Sequence[str] = NOTEBOOKS) -> list[str]:
    """Figures (``figures/<name>.png``) the notebooks should have written but did not."""
    names = [f for nb in notebooks for f in FIGURES.get(nb, ())]
    return [n for n in names if not (out_dir / "figures" / f"{n}.png").exists()]


class PipelineInterrupted(KeyboardInterrupt):
    """Ctrl-C during the run; ``str()`` is the one line to print (the notebook, what is complete,
    the command to rerun)."""


def run_pipeline(data_dir: str | os.PathLike | None = None, out_dir: str | os.PathLike | None = None,
                 quick: bool = False, seed: int = 0, notebooks: Sequence[str] = NOTEBOOKS, html: bool = True,
                 progress: bool = True, log: Callable[[str], None] = print, stream: TextIO | None = None,
                 objective: Any = None, force: bool = False, rerun: str | None = None) -> Path:
    """Run the notebook series on a dataset; return the output folder (see the module doc).

    ``log`` gets the first line and the last ones (the recommendation, the caveats); with
    ``progress``, each notebook's bar or line goes to ``stream`` (default: standard error).
    ``objective``: the run's objective (a :class:`~dvfslab.governors.objective.Selector` or its
    string; None: the least energy), passed to notebooks 04 and 05.
    The output folder is written as a temporary sibling and renamed into place when the run is
    complete (:func:`dvfslab.core.files.publish_folder`); an ``out_dir`` holding anything is
    refused unless ``force``. A run that fails or is interrupted leaves its partial output in
    ``<out_dir>.incomplete`` (the executed notebooks, with the traceback) and ``out_dir`` as it
    was; an interruption raises :class:`PipelineInterrupted` naming the notebook, what is
    complete and ``rerun`` (the command to run again).
    """
    from dvfslab.governors.objective import parse_objective
    from dvfslab.pipeline.kernels import KernelPool  # jupyter_client: the notebooks extra

    data = Path(data_dir) if data_dir is not None else default_data_dir()
    if data_dir is None and not data.exists():
        raise PipelineError(f"the bundled dataset {data} is missing: pass --data DIR, reinstall dvfslab, "
                            "or in a checkout restore the link dvfslab/pipeline/replay -> ../../data/replay")
    ds = load_dataset(data)  # fail fast, with the dataset's own one-line reason
    final = (Path(out_dir) if out_dir is not None else default_out_dir()).absolute()
    keep = _incomplete_path(final)
    for target in (final, keep):  # neither the output nor where a failed run is kept may touch the dataset
        refuse_overlap(target, {"--data": data}, COMMAND)
    refuse_occupied(final, COMMAND, force=force)
    if keep.exists() and written_by(keep) != COMMAND:
        raise PipelineError(f"{keep} holds a folder this pipeline did not write, where it keeps a failed run's "
                            "output: move it away, or pick another --out")
    out = new_sibling(final)
    write_output_marker(out, COMMAND)  # --force replaces it (and <out>.incomplete) later, nothing else
    params = {"DATA_DIR": str(data.resolve()), "OUTPUT_DIR": str(out), "SEED": int(seed), "QUICK": bool(quick)}
    selector = parse_objective(objective)  # fail fast on a wrong objective
    log(f"dvfslab pipeline: {ds.summary_line()} from {data}" + (" [quick]" if quick else ""))
    bars = Progress(stream or sys.stderr, len(notebooks)) if progress else None
    started, timings = time.perf_counter(), {}
    rendered = []  # each notebook's HTML is rendered while the next one runs
    try:
        with KernelPool(len(notebooks), out, KERNEL, KERNEL_ARGUMENTS) as kernels, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="dvfslab-html") as renders:
            import papermill  # noqa: F401  (1-2 s of imports: here, while the first kernel starts)

            for i, name in enumerate(notebooks, 1):
                t0 = time.perf_counter()
                km = kernels.take()
                try:
                    extra = {"OBJECTIVE": selector.spec} if name in OBJECTIVE_NOTEBOOKS else {}
                    executed = execute(name, out, {**params, **registry_parameters(name), **extra},
                                       bars.bar(i, name) if bars else False, km)
                except PipelineError:
                    if html and (out / f"{name}.ipynb").exists():
                        render_html(out / f"{name}.ipynb")  # the failure, readable in a browser
                    raise
                finally:
                    kernels.stop(km)
                timings[name] = round(time.perf_counter() - t0, 2)
                if html:
                    rendered.append(renders.submit(render_html, executed))
                if bars:
                    bars.done(i, name, _cells(executed), timings[name])
            for job in rendered:
                job.result()  # an error in a rendering stops the run here
        missing = missing_figures(out, notebooks)
        if missing:
            raise PipelineError(f"{final}/figures: the notebooks did not write "
                                f"{', '.join(m + '.png' for m in missing)}")
        summary = update_summary(out, {"pipeline": {"quick": bool(quick), "seed": int(seed),
                                                    "objective": selector.describe(), "seconds": timings,
                                                    "total_s": round(time.perf_counter() - started, 2)}})
        refuse_occupied(final, COMMAND, force=force)  # something appeared there meanwhile
        _retarget(out, final, notebooks)
        publish_folder(out, final)
        _remove_incomplete(final)  # an earlier failed run's output: this run replaces it
    except BaseException as err:
        keep = _keep_incomplete(out, final)
        if isinstance(err, KeyboardInterrupt) and not isinstance(err, PipelineInterrupted):
            _quiet_teardown()
            done = [n for n in notebooks if n in timings]
            # the first notebook not complete: the one running, or the one about to start
            left = next((n for n in notebooks if n not in timings), None)
            raise PipelineInterrupted(
                (f"interrupted during notebook {left}; " if left else "interrupted while finishing the run; ")
                + (f"complete: {', '.join(done)} (executed notebooks, figures and tables in {keep}); "
                   if done else "no notebook was complete; ")
                + f"nothing was written to {final}; rerun with: {rerun or 'the same command'}") from None
        if isinstance(err, PipelineError) and str(out) in str(err):
            raise PipelineError(str(err).replace(str(out), str(keep))) from None
        raise
    for line in (recommendation_line(summary), *caveat_lines(summary)):
        if line:
            log(line)
    return final


def _retarget(work: Path, final: Path, notebooks) -> None:
    """The executed notebooks name the folder they wrote, the temporary sibling; before it is
    renamed into place, point their ``OUTPUT_DIR`` (papermill's record and the injected
    parameters cell) at ``final``, so a notebook rerun by hand writes where its outputs are."""
    import nbformat

    for name in notebooks:
        path = work / f"{name}.ipynb"
        if not path.exists():
            continue
        book = nbformat.read(path, as_version=4)
        params = book.metadata.get("papermill", {}).get("parameters", {})
        if params.get("OUTPUT_DIR") == str(work):
            params["OUTPUT_DIR"] = str(final)
        for cell in book.cells:
            if "injected-parameters" in cell.metadata.get("tags", []):
                cell.source = cell.source.replace(repr(str(work)), repr(str(final))).replace(
                    f'"{work}"', f'"{final}"')
        atomic_write_text(path, nbformat.writes(book))


def _incomplete_path(final: Path) -> Path:
    """Where a failed or interrupted run's partial output is kept: ``<final>.incomplete``."""
    return final.with_name(final.name + ".incomplete")


def _remove_incomplete(final: Path) -> None:
    """Remove ``<final>.incomplete`` when a pipeline wrote it (its marker), never anything else."""
    import shutil

    keep = _incomplete_path(final)
    if keep.is_dir() and not keep.is_symlink() and written_by(keep) == COMMAND:
        shutil.rmtree(keep, ignore_errors=True)


def _keep_incomplete(work: Path, final: Path) -> Path:
    """Move a failed or interrupted run's partial output to ``<final>.incomplete`` (replacing an
    older one a pipeline wrote), never to ``final``."""
    keep = _incomplete_path(final)
    _remove_incomplete(final)
    if keep.exists():
        return work  # not ours (checked before the run; appeared meanwhile): left alone
    try:
        os.rename(work, keep)
    except OSError:
        return work
    return keep


def _quiet_teardown() -> None:
    """After Ctrl-C, the notebook client's pending asyncio tasks end with a dead kernel; their
    "Task exception was never retrieved" reports say nothing the interruption line does not."""
    import logging

    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)


def _cells(notebook: Path) -> int:
    """How many cells an executed notebook has (papermill's bar counts the same)."""
    import nbformat

    return len(nbformat.read(notebook, as_version=4).cells)


def output_line(out: Path, simulated: bool, html: bool) -> str:
    """The run's last line: where its output is, and every file kind and folder in it."""
    folders = sorted(f"{p.name}/" for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))
    books = "executed notebooks and their HTML" if html else "executed notebooks"
    tag = " (SIMULATED data)" if simulated else ""
    return f"pipeline output{tag}: {out}  ({', '.join(['summary.json', *folders, books])})"
