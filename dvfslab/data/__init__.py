"""The dataset: its directory contract (``contract``), the workload catalog (``catalog``) and
the ``workloads.csv`` table a sweep writes (``workloads``).

Low level like :mod:`dvfslab.core`: every room reads and writes datasets through it. The names
below load on first use, so ``import dvfslab.data.catalog`` (the board-side governors read the
model types there) does not pull in pandas.
"""

from __future__ import annotations

import importlib

_FACE = {
    "Dataset": "contract", "DatasetError": "contract", "load_dataset": "contract",
    "validate": "contract", "write_dataset": "contract",
    "get_model": "catalog", "get_task": "catalog", "workload_row": "catalog",
    "workload_table": "workloads",
}
__all__ = sorted(_FACE)


def __getattr__(name: str):
    if name not in _FACE:
        raise AttributeError(f"module 'dvfslab.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dvfslab.data.{_FACE[name]}"), name)
