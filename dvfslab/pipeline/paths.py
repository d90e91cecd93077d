"""Where a notebook run by hand reads and writes: its data paths resolved from the package, not
from the directory it happens to be run in.

The notebooks' ``DATA_DIR`` and ``OUTPUT_DIR`` default to ``""``: the bundled (simulated) dataset
shipped with the package (:func:`dvfslab.pipeline.runner.default_data_dir`), and ``runs/<name>``
of the checkout the notebooks sit in (the current directory's ``runs/<name>`` for an installed
package). So ``papermill notebooks/01_characterization.ipynb out.ipynb`` works from the
repository root, from ``notebooks/`` or from anywhere; a path given explicitly is taken as given
(relative to the current directory). ``dvfslab pipeline`` passes absolute paths.
"""

from __future__ import annotations

from pathlib import Path

from dvfslab.pipeline.runner import PACKAGE_DIR, default_data_dir


def checkout_root() -> Path | None:
    """The source checkout the package runs from (the folder of ``pyproject.toml`` and
    ``notebooks/``), None for an installed package."""
    root = PACKAGE_DIR.parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir() else None


def notebook_paths(data_dir: str = "", output_dir: str = "", name: str = "interactive") -> tuple[Path, Path]:
    """``(dataset folder, output folder)`` of a notebook from its ``DATA_DIR`` and ``OUTPUT_DIR``
    parameters (module doc); ``name``: the default output folder under ``runs/``."""
    data = Path(data_dir).expanduser() if data_dir else default_data_dir()
    out = Path(output_dir).expanduser() if output_dir else (checkout_root() or Path.cwd()) / "runs" / name
    return data, out
