"""docs/layout.md's order of rooms is the order of the imports: a room imports only rooms of an
earlier layer (imports under ``if TYPE_CHECKING:`` left out, imports inside functions counted),
``testing`` imports anything but ``cli`` and no room imports ``testing``. The order is read from
the layered table of docs/layout.md, so the document and the code cannot drift apart.

Plugin tables name modules by string and load them with importlib on demand (a backend by name,
a governor by registry line): a string naming a later room's module is allowed only in the
tables listed in docs/layout.md ("Rules the layout keeps"), checked here too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dvfslab"
SIDE_ROOM = "testing"
#: (file, room it names by string): the plugin tables docs/layout.md lists
PLUGIN_TABLES = {("dvfslab/hw/__init__.py", "sim")}


def layer_order(layout_md: Path) -> list[str]:
    """The rooms of the layered table (``| 1 | `core` | ...``), in layer order."""
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", layout_md.read_text(), flags=re.M)
    return [room for _, room in sorted(rows, key=lambda r: int(r[0]))]


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip.update(id(n) for sub in node.body for n in ast.walk(sub))
    return [n for n in ast.walk(tree) if id(n) not in skip]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def room_imports(package: Path) -> list[tuple[str, str, str, str]]:
    """``(file, room, room it uses, how)`` for every import (``how`` = "import") and every string
    constant naming a module of another room (``how`` = "string"), docstrings left out."""
    name = package.name
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).parts
        if len(rel) < 2:
            continue  # the package's own facade (dvfslab/__init__.py, __main__.py)
        src, file = rel[0], str(path.relative_to(package.parent))
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in _runtime_nodes(tree):
            mods: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                mods = [(a.name, "import") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = list(path.relative_to(package.parent).parent.parts)[: len(rel) - node.level + 1]
                    mod = ".".join([*base, mod] if mod else base)
                mods = [(mod, "import")]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                m = re.fullmatch(rf"{name}\.(\w+)\.[\w.]+(?::\w+)?", node.value)
                mods = [(node.value, "string")] if m else []
            for mod, how in mods:
                parts = mod.split(":")[0].split(".")
                if parts[0] == name and len(parts) > 1 and (package / parts[1]).is_dir() and parts[1] != src:
                    out.append((file, src, parts[1], how))
    return out


def violations(package: Path, order: list[str]) -> list[str]:
    rank = {room: i for i, room in enumerate(order)}
    bad = []
    for file, src, dst, how in room_imports(package):
        if dst == SIDE_ROOM:
            bad.append(f"{file}: {src} imports {SIDE_ROOM} (the fakes are injected, never imported)")
        elif src == SIDE_ROOM:
            if dst == "cli":
                bad.append(f"{file}: {SIDE_ROOM} imports cli")
        elif src not in rank or dst not in rank:
            bad.append(f"{file}: room {src if src not in rank else dst} is not in docs/layout.md's layers")
        elif rank[dst] > rank[src] and not (how == "string" and (file, dst) in PLUGIN_TABLES):
            bad.append(f"{file}: {src} (layer {rank[src] + 1}) {'names' if how == 'string' else 'imports'} "
                       f"{dst} (layer {rank[dst] + 1})")
    return bad


def test_the_layers_of_docs_layout_are_every_room_once():
    order = layer_order(REPO / "docs" / "layout.md")
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert len(order) == len(set(order))
    assert sorted([*order, SIDE_ROOM]) == rooms


def test_every_import_follows_the_layers_of_docs_layout():
    assert violations(PACKAGE, layer_order(REPO / "docs" / "layout.md")) == []


def test_the_plugin_tables_are_the_ones_docs_layout_names():
    text = (REPO / "docs" / "layout.md").read_text()
    for file, room in PLUGIN_TABLES:
        assert f"`{file}`" in text and f"`{room}`" in text
    used = {(f, dst) for f, _, dst, how in room_imports(PACKAGE) if how == "string"}
    assert PLUGIN_TABLES <= used  # a table that no longer names the room is dropped from the list


@pytest.mark.parametrize("source, expected", [
    ("from pkg.b import x\n", "pkg/a/m.py: a (layer 1) imports b (layer 2)"),
    ("def f():\n    import pkg.b.m\n", "pkg/a/m.py: a (layer 1) imports b (layer 2)"),
    ("T = 'pkg.b.m:Cls'\n", "pkg/a/m.py: a (layer 1) names b (layer 2)"),
    ("import pkg.testing\n", "pkg/a/m.py: a imports testing (the fakes are injected, never imported)"),
])
def test_the_check_finds_an_import_against_the_order(tmp_path, source, expected):
    pkg = tmp_path / "pkg"
    for room in ("a", "b", "testing"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "a" / "m.py").write_text(source)
    (pkg / "b" / "m.py").write_text("import pkg.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n")
    assert violations(pkg, ["a", "b"]) == [expected]


def test_type_checking_imports_and_docstrings_do_not_count(tmp_path):
    pkg = tmp_path / "pkg"
    for room in ("a", "b"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "a" / "m.py").write_text('"""Uses pkg.b.m:Cls."""\nfrom typing import TYPE_CHECKING\n'
                                   "if TYPE_CHECKING:\n    from pkg.b import m\n")
    assert violations(pkg, ["a", "b"]) == []
