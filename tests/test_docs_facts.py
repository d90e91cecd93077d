"""What the README and the docs state about the code comes from the code (issue 36, item 6): the
twin's version of the bundled data (``TWIN_VERSION``, and the data's own ``meta.json``), and the
governor lists (the registry), so a release that changes either fails here until the prose follows.
Historical figures ("measured on twin version 3") are left alone: only statements about the
bundled data and the current model are read."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dvfslab.governors.registry import registry
from dvfslab.sweep.simulate import TWIN_VERSION

ROOT = Path(__file__).resolve().parents[1]
VERSION = re.compile(r"twin version (\d+)")


def current_version_statements(path: Path) -> list[tuple[int, int]]:
    """``(line number, N)`` of each "twin version N" said of the bundled data or the current model:
    in the README every one; in a doc, those whose line or the line before names the bundled data
    (``bundled``, ``data/replay``) or that head the model's description."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        context = (lines[i - 1] if i else "") + " " + line
        about_now = path.name == "README.md" or any(w in context for w in ("bundled", "data/replay", "model in brief"))
        found += [(i + 1, int(m.group(1))) for m in VERSION.finditer(line) if about_now]
    return found


def test_the_bundled_data_is_of_the_twin_version_the_code_is():
    meta = json.loads((ROOT / "data" / "replay" / "meta.json").read_text())
    assert meta["generator"]["twin_version"] == TWIN_VERSION


def test_readme_and_docs_name_the_twin_version_of_the_code():
    statements = {p.name: current_version_statements(p) for p in (ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")))}
    assert len(statements["README.md"]) >= 2 and statements["calibration.md"]  # the check reads something
    wrong = [f"{name}:{n}: twin version {v}" for name, found in statements.items() for n, v in found
             if v != TWIN_VERSION]
    assert wrong == [], f"the code's twin is version {TWIN_VERSION}"


def test_the_check_catches_a_stale_version(tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("Measured on twin version 3 (history).\nThe bundled data:\nits dataset (twin version 4) ...\n")
    assert current_version_statements(doc) == [(3, 4)]


def test_readme_governor_lists_are_the_registrys():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    policy = re.search(r"`dvfslab govern --policy \{([^}]*)\}", text)
    assert policy, "the README's command table lists govern's --policy choices"
    assert policy.group(1).split(",") == [*registry(), "recommended"]
    measuring = re.search(r"The measuring governors \(([^)]*)\)", text)
    assert measuring, "the README names the measuring governors"
    named = re.findall(r"`([a-z-]+)`", measuring.group(1))
    assert named == [n for n, cls in registry().items() if cls.tags.probes]
