"""The notebook pipeline: notebooks 01-05 run by papermill on a dataset (``dvfslab pipeline``).

:mod:`~dvfslab.pipeline.runner` executes the notebooks, each in a kernel that
:mod:`~dvfslab.pipeline.kernels` started ahead; :mod:`~dvfslab.pipeline.summary` reads and merges
``summary.json``; :mod:`~dvfslab.pipeline.figures` saves their figures. The notebooks
and the bundled simulated dataset ship inside this package (``notebooks/`` and ``replay/``:
links into the checkout, copies in an installed wheel).
"""

from dvfslab.pipeline.figures import save_figure
from dvfslab.pipeline.paths import notebook_paths
from dvfslab.pipeline.runner import NOTEBOOKS, PipelineError, default_data_dir, run_pipeline
from dvfslab.pipeline.summary import read_summary, update_summary

__all__ = ["NOTEBOOKS", "PipelineError", "default_data_dir", "notebook_paths", "read_summary", "run_pipeline",
           "save_figure", "update_summary"]
