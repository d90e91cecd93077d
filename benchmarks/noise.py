"""How noisy is one measurement? The rep-to-rep spread of energy and time per unit, per dataset.

A governor that probes levels while the job runs (issue 23: ``zeus-sim``, ``online``,
``search``) reads one noisy measurement per probe; replaying it on a dataset of means should
add noise of the size the dataset's own repetitions show. For each ``DATASET`` (a directory of
the contract) this prints:

* **repetitions**: per (workload, level) cell of ok fixed-level runs with at least two
  repetitions, the coefficient of variation (sample standard deviation / mean) of the energy
  per unit (``energy_j / steps``; per run when ``steps`` is empty) and of the time per unit;
  the median over those cells, their 25th-75th percentiles, and how many cells it rests on.
  A dataset measured once per cell (the Zeus traces, LoudVA) has no figure: it says so, and
  prints the estimator the replay's probe model uses instead (:mod:`dvfslab.evaluation.probes`):
  on a power-limit dataset the CV across limits of the workloads whose power never reaches the
  lowest limit (the limit never binds: what moves is noise); on a dataset of many loads
  (LoudVA's concurrencies) the spread of each load against its two neighbours at one level
  (``1.4826 MAD / sqrt(1.5)``).
* for a ``dvfslab import zeus-nsdi`` dataset, the figures of Zeus's own repeated profiling
  windows (``--zeus-profile``, default ``data/external/zeus_nsdi23/profile_data``: the twelve
  ``tests/profile_data`` files of the Zeus repository, one window per power limit):

  - **GPU to GPU**: in the four data-parallel files (A40 ResNet-18/50 on 4 GPUs, V100 on 2),
    every GPU ran the same share of the same steps at the same limit in the same window — a
    repeated measurement of the energy. CV across the GPUs per window, median over the windows.
    It is an energy figure only: the window's time is one number for all GPUs.
  - **around a smooth curve**: per file, a least-squares quadratic in the power limit fitted to
    the window energy (GPU 0) and to the window time; the root mean square of the relative
    residuals; the median over the twelve files. Each window trains on other batches and the
    quadratic may not be the true curve, so it bounds the run-to-run noise from above (a cubic
    leaves less: ``--degree 3``).

    PYTHONPATH=. .venv/bin/python benchmarks/noise.py data/replay DIR... [--zeus-profile DIR]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.analysis.aggregate import sweep_from_dataset
from dvfslab.analysis.steps import StepSource
from dvfslab.analysis.steps import rep_cv as steps_rep_cv
from dvfslab.data.contract import Dataset, load_dataset
from dvfslab.evaluation.probes import neighbour_spread, noise_estimate, noncapped_spread

REPO = Path(__file__).resolve().parents[1]
ZEUS_PROFILE = REPO / "data" / "external" / "zeus_nsdi23" / "profile_data"
_LIMIT = re.compile(r"_(\d+(?:\.\d+)?)$")


def rep_cv(ds: Dataset) -> dict:
    """Coefficients of variation of energy and time per unit over the ok repetitions of each
    (workload, level) cell of fixed-level runs; ``None`` figures when no cell has two (the
    package's figure: :func:`dvfslab.analysis.steps.rep_cv`, the replay's probe noise)."""
    return steps_rep_cv(ds.runs, ds.knob.name)


def _limits(frame: pd.DataFrame) -> np.ndarray:
    return np.array([float(_LIMIT.search(str(w)).group(1)) for w in frame["window_name"]])


def gpu_to_gpu_cv(profile_dir: str | Path) -> dict:
    """CV of the window energy across the GPUs of the multi-GPU profile files, per window."""
    cvs = []
    for path in sorted(Path(profile_dir).glob("*.csv")):
        frame = pd.read_csv(path)
        gpus = [c for c in frame.columns if c.endswith("_energy")]
        if len(gpus) < 2:
            continue
        e = frame[gpus].to_numpy(float)
        cvs.extend(e.std(axis=1, ddof=1) / e.mean(axis=1))
    if not cvs:
        return {"windows": 0, "median": None}
    cvs = np.asarray(cvs)
    return {"windows": int(len(cvs)), "median": float(np.median(cvs)), "q25": float(np.quantile(cvs, 0.25)),
            "q75": float(np.quantile(cvs, 0.75))}


def curve_residuals(profile_dir: str | Path, degree: int = 2) -> dict:
    """Per file, the residual spread of the window energy (GPU 0) and time relative to a
    least-squares polynomial of ``degree`` in the power limit (sum of squared relative residuals
    over ``n - degree - 1`` degrees of freedom, so the fitted coefficients are not counted as
    noise); the median over the files."""
    energy, time = [], []
    for path in sorted(Path(profile_dir).glob("*.csv")):
        frame = pd.read_csv(path)
        limit = _limits(frame)
        dof = len(limit) - degree - 1
        if dof < 1:  # as many windows as coefficients: an exact fit says nothing of the noise
            continue
        for col, acc in (("gpu0_energy", energy), ("elapsed_time", time)):
            y = frame[col].to_numpy(float)
            fit = np.polyval(np.polyfit(limit, y, degree), limit)
            acc.append(float(np.sqrt((((y - fit) / fit) ** 2).sum() / dof)))
    return {"files": len(energy), "degree": degree, "energy": float(np.median(energy)) if energy else None,
            "time": float(np.median(time)) if time else None}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _is_zeus(ds: Dataset) -> bool:
    return "Zeus" in str(ds.meta.get("origin", {}).get("name", ""))


def report(path: str | Path, profile_dir: Path, degree: int) -> list[str]:
    ds = load_dataset(path)
    r = rep_cv(ds)
    lines = [f"{path}  ({ds.source}; {r['cells']} (workload, level) cells, {r['cells_with_reps']} with >= 2 ok "
             f"repetitions, at most {r['reps_max']})"]
    if r["energy"] is None:
        lines.append("  repetitions: none — one measurement per cell, no rep-to-rep figure")
    else:
        for col in ("energy", "time"):
            q = r[col]
            lines.append(f"  {col} per unit, CV across repetitions: median {_pct(q['median'])} "
                         f"(25-75 %: {_pct(q['q25'])} - {_pct(q['q75'])}) over {r['cells_with_reps']} cells")
    source = StepSource.from_sweep(sweep_from_dataset(ds))
    if r["energy"] is None and ds.knob.name == "power_limit_w":
        got = noncapped_spread(source)
        lines.append(f"  across power limits, workloads whose power never reaches the lowest limit "
                     f"({len(got['workloads'])}): median CV of energy per unit {_pct(got['sigma'] if got['workloads'] else None)}"
                     f" — e.g. {', '.join(f'{w} {_pct(v)}' for w, v in list(got['per_workload'].items())[:3])}")
    elif r["energy"] is None and "batch_size" in ds.workloads and ds.workloads["batch_size"].nunique() >= 3:
        got = neighbour_spread(source)
        lines.append(f"  neighbouring loads at one level (1.4826 MAD / sqrt(1.5) of the middle of three against the "
                     f"mean of the other two): {_pct(got['sigma'])} over {got['triples']} triples")
    est = noise_estimate(source)
    lines.append(f"  the replay's probe noise: {_pct(est['sigma'])} — {est['source']}")
    if _is_zeus(ds):
        g, c = gpu_to_gpu_cv(profile_dir), curve_residuals(profile_dir, degree)
        lines.append(f"  Zeus profiling windows ({profile_dir}):")
        lines.append(f"    energy, GPU to GPU in one window: median CV {_pct(g['median'])} "
                     f"(25-75 %: {_pct(g.get('q25'))} - {_pct(g.get('q75'))}) over {g['windows']} windows")
        lines.append(f"    around a degree-{degree} curve in the limit (upper bound): energy {_pct(c['energy'])}, "
                     f"time {_pct(c['time'])} (median residual spread over {c['files']} files)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset directories")
    parser.add_argument("--zeus-profile", type=Path, default=ZEUS_PROFILE, metavar="DIR",
                        help="Zeus's tests/profile_data files (default: the copy in data/external)")
    parser.add_argument("--degree", type=int, default=2, help="degree of the smooth curve (default 2)")
    args = parser.parse_args(argv)
    for path in args.datasets:
        print("\n".join(report(path, args.zeus_profile, args.degree)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
