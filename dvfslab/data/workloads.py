"""The ``workloads.csv`` table of a sweep: catalog rows, refined by what executors report.

Kept apart from :mod:`dvfslab.data.catalog` so that the catalog (model and task facts, the
encoder / decoder model types) imports no pandas: the board-side governors read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from dvfslab.data.catalog import UnknownWorkloadError, workload_record, workload_row
from dvfslab.data.contract import WORKLOAD_COLUMNS, WORKLOAD_EXTRA_COLUMNS


def workload_table(workload_ids: Sequence[str]) -> pd.DataFrame:
    """``workloads.csv`` rows: the catalog's row when it knows the id, else the minimum the id
    tells (model, task, and the split of its task: ``tiny/synthetic:sst2`` is characterization).
    A sweep executor may refine a row by returning a ``workload`` dict (the fine-tuning harness
    measures ``avg_seq_len``; see :func:`merge_workloads`)."""
    rows = []
    for wid in workload_ids:
        row = _catalog_row(wid)
        if row is None:
            model, _, task = wid.rpartition("/")
            row = workload_record(wid, model, task or model)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS])


def _catalog_row(wid: str) -> dict | None:
    model, _, task = wid.rpartition("/")
    try:
        row = workload_row(model, task)
    except UnknownWorkloadError:
        return None
    return row if row["workload_id"] == wid else None


def merge_workloads(table: pd.DataFrame, records: Mapping[str, dict]) -> pd.DataFrame:
    """The workloads table with the rows executors reported (``extras["workload"]`` of each run
    record) applied; a reported value replaces the table's, an empty one leaves it."""
    table = table.astype(object)  # a column that was all empty must accept text and numbers
    index = {w: i for i, w in enumerate(table["workload_id"])}
    for rec in records.values():
        reported = rec.get("extras", {}).get("workload")
        if isinstance(reported, Mapping) and reported.get("workload_id") in index:
            i = index[reported["workload_id"]]
            for col in (*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS):
                if reported.get(col) is not None:
                    table.loc[table.index[i], col] = reported[col]
    return table
