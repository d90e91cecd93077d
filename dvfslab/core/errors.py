"""The base of every error dvfslab raises on purpose, and the errors more than one room raises."""

from __future__ import annotations


class DvfsError(Exception):
    """Base class of every error dvfslab raises on purpose.

    The CLI prints ``str(err)`` on one line and exits 2, without a traceback, so messages
    must name the file, path or value at fault and the fix.
    """


class SweepError(DvfsError):
    """A sweep cannot be run or used: a bad plan, a foreign or mismatching sweep directory, a
    resume that does not fit (raised by the sweep), or a sweep that lacks what an analysis step
    needs, such as fixed-level runs or a table (raised by the analysis)."""
