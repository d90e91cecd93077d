"""The paper's published figures live in one module (dvfslab/core/reference.py): every comparison
(the paper table of notebook 04, the twin's findings, the ensemble's bands) reads them there."""

from __future__ import annotations

import re
from pathlib import Path

from dvfslab.core import reference as R
from dvfslab.evaluation.replay import paper_comparison

ROOT = Path(__file__).resolve().parents[1]
# the paper's numbers as printed in it (abstract and evaluation section)
PRINTED = ("13.11", "26.73", "510–816", "0.62")


def test_the_constants_are_the_papers_printed_figures():
    assert (R.MLG_MEAN_SAVING_PCT, R.MLG_MAX_SAVING_PCT) == (13.11, 26.73)
    assert R.OPTIMAL_LEVELS_MHZ == (510.0, 816.0) and R.optimal_range_text() == "510–816"
    assert R.in_optimal_range(714.0) and not R.in_optimal_range(918.0)


def test_no_module_keeps_its_own_copy_of_a_published_figure():
    copies = []
    for path in sorted((ROOT / "dvfslab").rglob("*.py")):
        if path.name == "reference.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(re.search(rf"[\"'][^\"']*{re.escape(p)}", code) for p in PRINTED):
                copies.append(f"{path.relative_to(ROOT)}:{n}")
    assert copies == []


def test_the_paper_table_quotes_the_reference():
    table = paper_comparison({}).set_index("figure")["paper"]
    assert table["MLG mean saving vs baseline (%)"] == "13.11"
    assert table["MLG max saving (%)"] == "26.73"
    assert table["energy-optimal level range (MHz)"] == "510–816"
