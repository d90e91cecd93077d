"""The base of every error dvfslab raises on purpose."""

from __future__ import annotations


class DvfsError(Exception):
    """Base class of every error dvfslab raises on purpose.

    The CLI prints ``str(err)`` on one line and exits 2, without a traceback, so messages
    must name the file, path or value at fault and the fix.
    """
