"""The dataset: its directory contract (``contract``) and the workload catalog (``catalog``).

Low level like :mod:`dvfslab.core`: every room reads and writes datasets through it.
"""

from dvfslab.data.catalog import get_model, get_task, workload_row, workload_table
from dvfslab.data.contract import Dataset, DatasetError, load_dataset, validate, write_dataset

__all__ = ["Dataset", "DatasetError", "get_model", "get_task", "load_dataset", "validate", "workload_row",
           "workload_table", "write_dataset"]
