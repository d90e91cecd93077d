"""The command-line modules share helpers through public names (dvfslab/cli/common.py), never
another module's private ones (``hardware._clocks``)."""

from __future__ import annotations

import re
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "dvfslab" / "cli"


def private_uses(text: str, modules: set[str]) -> list[str]:
    return [m.group(0) for m in re.finditer(r"\b(\w+)\.(_[a-z]\w*)", text) if m.group(1) in modules]


def test_no_cli_module_reaches_into_another_ones_private_names():
    modules = {p.stem for p in CLI.glob("*.py") if p.stem != "__init__"}
    found = {p.name: private_uses(p.read_text(encoding="utf-8"), modules) for p in sorted(CLI.glob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_sees_a_private_use():
    assert private_uses("io = hardware._io(args)\nx = common.sysfs_io(args)", {"hardware", "common"}) == ["hardware._io"]
