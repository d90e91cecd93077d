"""Every `dvfslab SUB --option` a message, a docstring, the README, the docs or a notebook tells a
user to run names a sub-command and options that exist (read from the real parser), so a hint
never sends anyone to a command that refuses it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dvfslab.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
# "dvfslab WORD rest-of-the-command": WORD counts only when it is a sub-command (prose such as
# "dvfslab reads ..." is not); the rest runs to the end of the backticks, quotes or line
HINT = re.compile(r"dvfslab ([a-z][a-z-]*)((?: +[^\s`'\"]+)*)")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _texts():
    for pattern in ("dvfslab/**/*.py", "docs/*.md", "notebooks/*.ipynb", "benchmarks/*.py"):
        yield from sorted(ROOT.glob(pattern))
    yield ROOT / "README.md"


def bad_hints(paths) -> list[str]:
    top = _subcommands(build_parser())
    bad = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in HINT.finditer(line):
                sub, rest = m.group(1), m.group(2)
                if sub not in top:
                    continue
                parser = top[sub]
                words = rest.split()
                nested = _subcommands(parser)
                if words and words[0] in nested:  # dvfslab import zeus-nsdi ...
                    parser = nested[words[0]]
                known = {o for a in parser._actions for o in a.option_strings}
                bad += [f"{path.name}:{n}: `dvfslab {sub}` has no {o}" for o in OPTION.findall(rest) if o not in known]
    return bad


def test_every_hint_names_options_its_command_has():
    assert bad_hints(_texts()) == []


def test_the_check_catches_a_wrong_option(tmp_path):
    # a hand-written hint with one option that exists (--resume) and two that do not
    f = tmp_path / "msg.py"
    f.write_text("raise X('rerun `dvfslab sweep --resume DIR --bogus`')\n"
                 "# dvfslab import zeus-nsdi SRC --nope\n")
    assert bad_hints([f]) == ["msg.py:1: `dvfslab sweep` has no --bogus", "msg.py:2: `dvfslab import` has no --nope"]
