"""What a missing column of a dataset table may really be: a renamed column, another delimiter.

:func:`missing_column` words the error :mod:`dvfslab.data.contract` raises when a table lacks
a required column, naming the file's own columns that could be it (a close name the contract
does not know: ``energy`` for ``energy_j``) or the delimiter the file seems to use (a whole
header read as one column holding ``;`` or a tab).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

#: delimiters a spreadsheet writes instead of a comma (a European locale's ``;``, a TSV's tab)
OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "bars"}


def missing_column(col: str, header: Sequence[str], required: Sequence[str],
                   known: Collection[str] = ()) -> tuple[str, str]:
    """(the problem, the fix) for ``col`` missing from a table whose header is ``header``;
    ``required``: the contract's columns, ``known``: the other columns it accepts."""
    expected = f"expected columns: {', '.join(required)}"
    if len(header) == 1:
        found = [(d, name) for d, name in OTHER_DELIMITERS.items() if d in header[0]]
        if found:
            d, name = found[0]
            return (f"column is missing: the header is one column separated by {name} ({d!r}), not commas",
                    f"save the file as comma-separated CSV (the contract's delimiter is ','); {expected}")
    strangers = [c for c in header if c not in required and c not in known]
    close = difflib.get_close_matches(col, strangers, n=1, cutoff=0.6)
    if close:
        return (f"column is missing; the file has a column {close[0]!r} the contract does not know",
                f"rename {close[0]!r} to {col!r} if it holds that; {expected}")
    if strangers:
        shown = ", ".join(repr(c) for c in strangers[:5]) + (", ..." if len(strangers) > 5 else "")
        return f"column is missing; columns the contract does not know: {shown}", expected
    return "column is missing", expected
