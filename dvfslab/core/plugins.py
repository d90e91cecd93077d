"""Objects named ``package.module:Name``: how the CLI and settings inject a class.

The sweep's ``--executor`` and the Jetson sysfs I/O class (``--sysfs-io`` /
``$DVFSLAB_SYSFS_IO``) name a class by its import path; this is the one place that resolves it.
"""

from __future__ import annotations

import importlib
from typing import Any

from dvfslab.core.errors import DvfsError


def load_object(target: str, *, label: str, what: str) -> Any:
    """Import ``package.module:Name`` and return ``Name``.

    Errors start with ``label`` (where the string came from: ``executor 'x:Y'``,
    ``DVFSLAB_SYSFS_IO='x:Y'``) and say what was being loaded (``what``).
    """
    module_name, _, attr = str(target).partition(":")
    if not module_name or not attr:
        raise DvfsError(f"{label} must look like 'package.module:ClassName'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise DvfsError(f"{label}: cannot load {what} ({err})") from None
