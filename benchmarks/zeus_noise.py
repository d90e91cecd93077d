"""The size of the twin's noise: the spread of real measurement windows around a smooth curve.

Zeus (ml-energy/zeus, Apache-2.0) ships real profiling windows of its power-limit optimizer as
test fixtures (``tests/profile_data/<GPU>+<model>+gpu<ids>.csv``: one window of a fixed number of
training steps per GPU power limit, with its time and the GPUs' energy). Per file, this fits a
quadratic in the power limit to the window's energy and to its time and takes the relative
residual spread (standard deviation of measured / fitted − 1, 3 fitted coefficients); the median
over the files is an upper bound on run-to-run noise (each window also sees other batches).
docs/calibration.md (section 2, "Noise σ") quotes what this prints. The data is not in this
repository; pass the folder of a Zeus checkout:

    python benchmarks/zeus_noise.py --profile-data /path/to/zeus/tests/profile_data
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import pandas as pd


def spread(x: np.ndarray, y: np.ndarray) -> float:
    """Relative residual spread of ``y`` around a quadratic in ``x`` (3 coefficients)."""
    fitted = np.polyval(np.polyfit(x, y, 2), x)
    rel = y / fitted - 1.0
    return float(np.sqrt((rel**2).sum() / (len(y) - 3)))


def file_spreads(path: Path) -> tuple[float, float]:
    frame = pd.read_csv(path)
    limit_w = frame["window_name"].str.rsplit("_", n=1).str[-1].astype(float).to_numpy()
    energy_j = frame.filter(regex=r"^gpu\d+_energy$").sum(axis=1).to_numpy()
    return spread(limit_w, energy_j), spread(limit_w, frame["elapsed_time"].to_numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile-data", required=True, type=Path, help="Zeus's tests/profile_data folder")
    args = ap.parse_args()
    files = sorted(args.profile_data.glob("*.csv"))
    if not files:
        raise SystemExit(f"{args.profile_data}: no *.csv files (pass Zeus's tests/profile_data folder)")
    rows = [(p.name, *file_spreads(p)) for p in files]
    for name, e, t in rows:
        print(f"{name:<36} energy {100 * e:5.1f} %   time {100 * t:5.1f} %")
    print(f"median over {len(rows)} files: energy {100 * statistics.median(r[1] for r in rows):.1f} %, "
          f"time {100 * statistics.median(r[2] for r in rows):.1f} %")


if __name__ == "__main__":
    main()
