"""One import path for each error: ``DvfsError`` and ``SweepError`` are imported from
``dvfslab.core.errors`` (or the ``dvfslab.core`` face of that room), never through a module that
happens to import them (``dvfslab.hw.base``, ``dvfslab.sweep.plan``, ``dvfslab.analysis.aggregate``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ERRORS = {"DvfsError", "SweepError"}
HOME = {"dvfslab.core.errors", "dvfslab.core"}


def stray_imports(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dvfslab"):
            for alias in node.names:
                if alias.name in ERRORS and node.module not in HOME:
                    out.append(f"{alias.name} from {node.module} (line {node.lineno})")
    return out


def test_errors_come_from_one_module():
    found = {}
    for folder in ("dvfslab", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad = stray_imports(path.read_text(encoding="utf-8"))
            if bad:
                found[str(path.relative_to(ROOT))] = bad
    assert found == {}


def test_the_check_sees_a_stray_import():
    assert stray_imports("from dvfslab.hw.base import Backend, DvfsError\nfrom dvfslab.core.errors import SweepError\n") \
        == ["DvfsError from dvfslab.hw.base (line 1)"]
