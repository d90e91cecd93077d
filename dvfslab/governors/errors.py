"""The governors' error type and the reader of a JSON file (a saved governor, a model config).

Leaf module of :mod:`dvfslab.governors`: it imports nothing from the room, so every other
module (the board-side ones included) can use it without pulling anything else in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dvfslab.core.errors import DvfsError


class GovernorError(DvfsError):
    """A governor cannot decide (missing feature, unknown workload, bad model file ...)."""


def read_model_json(path: str | os.PathLike, what: str, fix: str) -> Any:
    """A saved governor's JSON; a missing file or bad JSON is a :class:`GovernorError` naming
    the file, ``what`` it should have been and the ``fix``."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise GovernorError(f"{p}: {what} is missing — {fix}") from None
    except json.JSONDecodeError as err:
        raise GovernorError(f"{p}: not JSON (line {err.lineno}: {err.msg})") from None
