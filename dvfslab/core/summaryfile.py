"""The one reader of a pipeline run's ``summary.json``: its schema version and its old keys.

``dvfslab pipeline`` writes ``summary.json`` with ``schema_version`` (:data:`SCHEMA_VERSION`);
everything that reads one — the notebooks and :mod:`dvfslab.pipeline.summary`, ``dvfslab govern
--policy recommended`` (:mod:`dvfslab.job.policy`), the shims of old files — reads it with
:func:`load_summary`, which refuses, in one line naming the file and the fix:

* a file that is not a JSON object;
* a ``schema_version`` this dvfslab does not know (a newer dvfslab wrote it, or it is not a
  summary.json);
* a file written before levels were knob-neutral (a key of :data:`MOVED`).

A file without ``schema_version`` was written before the versions were numbered: it is read as
version 0 when it holds none of the old keys (its keys are version 1's). New optional keys of a
known version are kept as they are: a reader takes what it needs and leaves the rest.

It lives in ``core`` (layer 1) so that the rooms below the pipeline (``job``) read the file the
same way; :mod:`dvfslab.pipeline.summary` re-exports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dvfslab.core.errors import DvfsError

#: the schema version ``dvfslab pipeline`` writes
SCHEMA_VERSION = 1
#: the versions this dvfslab reads (0: written before the versions were numbered)
KNOWN_VERSIONS = (0, 1)
SCHEMA_KEY = "schema_version"
#: keys of older summary.json files -> where they moved (section, old key, new key)
MOVED = (("characterization", "sweet_spot_mhz", "optimal_level_range"),
         ("characterization", "sweet_spot_w", "optimal_level_range"),
         ("characterization", "freq_table_mhz", "level_table"),
         ("characterization", "power_limit_table_w", "level_table"),
         ("evaluation", "ffg_freq_mhz", "ffg_level"))


def _regenerate(path: Path) -> str:
    return f"regenerate it with `dvfslab pipeline --data DATASET --out {path.parent}`"


def check_summary(doc: Any, path: str | os.PathLike = "summary.json") -> dict[str, Any]:
    """``doc`` (a parsed summary.json) when this dvfslab reads it; else a one-line :class:`DvfsError`."""
    path = Path(path)
    if not isinstance(doc, dict):
        raise DvfsError(f"{path}: not a summary.json (a JSON object is expected, got {type(doc).__name__}); "
                        + _regenerate(path))
    version = doc.get(SCHEMA_KEY, 0)
    if isinstance(version, bool) or not isinstance(version, int) or version not in KNOWN_VERSIONS:
        raise DvfsError(f"{path}: summary.json schema version {version!r} is not one this dvfslab reads "
                        f"({', '.join(map(str, KNOWN_VERSIONS[1:]))}): upgrade dvfslab, or " + _regenerate(path))
    for section, old, new in MOVED:
        if old in (doc.get(section) or {}):
            raise DvfsError(f"{path} was written by an older dvfslab ({section}.{old} is now {section}.{new}): "
                            + _regenerate(path))
    return doc


def load_summary(path: str | os.PathLike) -> dict[str, Any]:
    """The summary.json at ``path`` (a file, or a run folder holding one), checked
    (:func:`check_summary`); a missing file raises :class:`FileNotFoundError` (the caller says
    what to run), an unreadable one a one-line :class:`DvfsError`."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DvfsError(f"{path}: cannot be read ({err.strerror or err})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise DvfsError(f"{path}: not readable as JSON (line {err.lineno}: {err.msg}); " + _regenerate(path)) from None
    return check_summary(doc, path)
