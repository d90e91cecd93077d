"""The bottom layer every other room builds on: errors, frequency levels, file helpers, boards.

Nothing here imports numpy or pandas, so a governor on a board starts fast.
"""

from dvfslab.core.errors import DvfsError, SweepError
from dvfslab.core.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    file_lock,
    jsonable,
    utc_now,
)
from dvfslab.core.levels import UnsupportedFrequencyError, check_level, format_mhz, snap_mhz
from dvfslab.core.summaryfile import load_summary

__all__ = [
    "DvfsError",
    "SweepError",
    "UnsupportedFrequencyError",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_level",
    "file_lock",
    "format_mhz",
    "jsonable",
    "load_summary",
    "snap_mhz",
    "utc_now",
]
