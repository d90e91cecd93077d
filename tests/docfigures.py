"""The figures README.md and docs/*.md quote from `dvfslab pipeline` on the bundled data, checked.

A quoted figure carries an invisible tag right after its number (or after the number's " %"):

    23.48 %<!-- summary: governors.mlg.mean_saving_pct -->
    24.09 %<!-- table: evaluation_by_size.csv[policy=mlg,size_group=> 70M].mean_saving_pct -->
    54<!-- count: optimal_levels.csv[opt_level=612] -->
    13.11 %<!-- source: paper -->

``summary:`` is a path into the run's summary.json, ``table:`` a cell of one of its tables
(``FILE[column=value,...].column``: exactly one row must match), ``count:`` the number of rows of
a table that match; each may be an expression of such references and numbers with ``+ - * /``
between spaces (``100 * evaluation.probe_noise_cv``), and ``-ref`` negates one. ``source:`` says
that a figure comes from elsewhere (the paper, a benchmark) and is not checked. The written number
must equal the value rounded to the decimals it is written with; a leading ``+``, ``-`` or ``−``
is part of it.

Tables and paragraphs that present the bundled run as a whole sit between
``<!-- pipeline figures -->`` and ``<!-- /pipeline figures -->``: there every decimal number
outside code spans must carry a tag, so none can be left unchecked.

    python tests/docfigures.py --check runs/<timestamp>     # every problem, one line each
    python tests/docfigures.py --update runs/<timestamp>    # rewrite every tagged figure

HTML comments do not render (CommonMark: an HTML comment is raw inline HTML), in table cells too;
README.md and docs/governors.md render with markdown-it-py and mistune exactly as without the tags.
A tag written inside a code span is an example, not a tag. Code spans that break across lines
are not recognized as code: keep tags and region figures out of them.
"""

from __future__ import annotations

import argparse
import csv
import json
import operator
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIGURE_KINDS = ("summary", "table", "count")
REGION_OPEN, REGION_CLOSE = "<!-- pipeline figures -->", "<!-- /pipeline figures -->"

_NUMBER = r"(?<![\w.])(?P<sign>[+\-−]?)(?P<digits>\d+(?:\.\d+)?)(?!\w|\.\d)"
_TAG = re.compile(_NUMBER + r"(?P<gap>\s*%?\s*)<!--\s*(?P<kind>[a-z]+):\s*(?P<expr>.*?)\s*-->")
_ANY_TAG = re.compile(r"<!--\s*(?P<kind>[a-z]+):\s*(?P<expr>.*?)\s*-->")
_DECIMAL = re.compile(r"(?<![\w.])[+\-−]?\d+\.\d+(?!\w|\.\d)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_COMMENT = re.compile(r"<!--.*?-->")
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


@dataclass
class Figure:
    """One tagged number: where it is written and what it claims."""

    file: str
    line: int           # 1-based
    start: int          # offsets of the number (sign included) in the file's text
    end: int
    written: str        # as written, sign included
    kind: str
    expr: str

    def where(self) -> str:
        return f"{self.file}:{self.line}"


class Source:
    """A pipeline output folder: summary.json and tables/*.csv, read on first use."""

    def __init__(self, out_dir: str | Path):
        self.out = Path(out_dir)
        self._summary = None
        self._tables: dict[str, list[dict]] = {}

    def summary(self) -> dict:
        if self._summary is None:
            self._summary = json.loads((self.out / "summary.json").read_text())
        return self._summary

    def rows(self, ref: str) -> tuple[list[dict], str]:
        """``FILE[col=value,...]`` → the matching rows, and what follows the closing bracket."""
        m = re.fullmatch(r"(?P<file>[\w.-]+\.csv)\[(?P<filters>[^\]]*)\](?P<rest>.*)", ref)
        if not m:
            raise LookupError(f"{ref!r} is not FILE.csv[column=value,...]")
        name = m["file"]
        if name not in self._tables:
            path = self.out / "tables" / name
            if not path.exists():
                raise LookupError(f"the run has no tables/{name}")
            with open(path, newline="") as fh:
                self._tables[name] = list(csv.DictReader(fh))
        rows = self._tables[name]
        for item in filter(None, (s.strip() for s in m["filters"].split(","))):
            col, _, want = item.partition("=")
            col = col.strip()
            if rows and col not in rows[0]:
                raise LookupError(f"tables/{name} has no column {col!r}")
            rows = [r for r in rows if _same(r[col], want.strip())]
        return rows, m["rest"]

    def value(self, kind: str, ref: str) -> float:
        """One reference of a tag, as a number."""
        if kind == "summary":
            node = self.summary()
            for key in ref.split("."):
                if not isinstance(node, dict) or key not in node:
                    raise LookupError(f"summary.json has no {ref}")
                node = node[key]
            return _number(node, f"summary.json {ref}")
        rows, rest = self.rows(ref)
        if kind == "count":
            if rest:
                raise LookupError(f"{ref!r}: a count takes no column (drop {rest!r})")
            return float(len(rows))
        if not rest.startswith(".") or len(rows) != 1:
            raise LookupError(f"{ref!r} must name one column of exactly one row ({len(rows)} rows match)")
        col = rest[1:]
        if col not in rows[0]:
            raise LookupError(f"{ref!r}: no column {col!r}")
        return _number(rows[0][col], ref)

    def evaluate(self, kind: str, expr: str) -> float:
        """A tag's expression: references and numbers joined by `` + - * / `` (spaces around)."""
        parts = re.split(r"\s+([+\-*/])\s+", expr.strip())
        values = [self._operand(kind, p) for p in parts[::2]]
        ops = parts[1::2]
        for group in ("*/", "+-"):
            i = 0
            while i < len(ops):
                if ops[i] in group:
                    values[i:i + 2] = [_OPS[ops[i]](values[i], values[i + 1])]
                    del ops[i]
                else:
                    i += 1
        return values[0]

    def _operand(self, kind: str, text: str) -> float:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text)
        if text.startswith("-"):
            return -self.value(kind, text[1:])
        return self.value(kind, text)


def _same(cell: str, want: str) -> bool:
    try:
        return float(cell) == float(want)
    except ValueError:
        return cell == want


def _number(value, what: str) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise LookupError(f"{what} is {value!r}, not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise LookupError(f"{what} is {value!r}, not a number") from None


def formatted(value: float, like: str) -> str:
    """``value`` written as ``like`` is: its decimals, its minus sign, a ``+`` if it has one."""
    decimals = len(like.split(".")[1]) if "." in like else 0
    text = f"{abs(value):.{decimals}f}"
    if value < 0 and float(text) != 0.0:
        return ("−" if like.startswith("−") else "-") + text
    return ("+" if like.startswith("+") else "") + text


def _plain(written: str) -> str:
    return written.replace("−", "-").lstrip("+")


def _masked(line: str) -> str:
    """The line with HTML comments blanked (offsets kept)."""
    return _COMMENT.sub(lambda m: " " * len(m.group(0)), line)


def scan(text: str, file: str) -> tuple[list[Figure], list[str]]:
    """Every tagged figure of a Markdown text, and the problems of its tags and regions."""
    figures, problems = [], []
    offset, fenced, region = 0, False, None
    for number, raw in enumerate(text.splitlines(keepends=True), 1):
        line, stripped = raw, raw.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            tagged, tags = set(), set()
            line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)  # `<!-- x: y -->` is an example
            for m in _TAG.finditer(line):
                figures.append(Figure(file, number, offset + m.start("sign"), offset + m.end("digits"),
                                      m["sign"] + m["digits"], m["kind"], m["expr"]))
                tagged.add(m.start("sign"))
                tags.add(m.end("gap"))
                if m["kind"] not in FIGURE_KINDS + ("source",):
                    problems.append(f"{file}:{number}: unknown tag kind {m['kind']!r} "
                                    f"(use {', '.join(FIGURE_KINDS)} or source)")
            for m in _ANY_TAG.finditer(line):
                if m.start() not in tags:
                    problems.append(f"{file}:{number}: the tag <!-- {m['kind']}: {m['expr']} --> follows no number")
            if stripped == REGION_OPEN:
                if region is not None:
                    problems.append(f"{file}:{number}: a region opens inside the region of line {region}")
                region = number
            elif stripped == REGION_CLOSE:
                if region is None:
                    problems.append(f"{file}:{number}: a region closes that was never opened")
                region = None
            elif region is not None:
                for m in _DECIMAL.finditer(_masked(line)):
                    if m.start() not in tagged:
                        problems.append(f"{file}:{number}: {m.group(0)} in a pipeline-figures region has no "
                                        "tag (<!-- summary: ... -->, <!-- table: ... --> or <!-- source: ... -->)")
        offset += len(raw)
    if region is not None:
        problems.append(f"{file}:{region}: the region opened here is never closed ({REGION_CLOSE})")
    return figures, problems


def check_text(text: str, file: str, source: Source) -> list[str]:
    """One line per problem: wrong figures, unknown references, untagged figures in regions."""
    figures, problems = scan(text, file)
    for fig in figures:
        if fig.kind not in FIGURE_KINDS:
            continue
        try:
            value = source.evaluate(fig.kind, fig.expr)
        except (LookupError, ZeroDivisionError) as err:
            problems.append(f"{fig.where()}: {fig.written} is tagged {fig.kind}: {fig.expr}, but {err}")
            continue
        expected = formatted(value, fig.written)
        if _plain(expected) != _plain(fig.written):
            problems.append(f"{fig.where()}: {fig.written} should be {expected} "
                            f"({fig.kind}: {fig.expr} = {value!r})")
    return problems


def update_text(text: str, file: str, source: Source) -> tuple[str, list[str]]:
    """The text with every tagged figure rewritten from ``source``; one line per change."""
    figures, _ = scan(text, file)
    changes = []
    for fig in sorted(figures, key=lambda f: f.start, reverse=True):
        if fig.kind not in FIGURE_KINDS:
            continue
        new = formatted(source.evaluate(fig.kind, fig.expr), fig.written)
        if _plain(new) != _plain(fig.written):
            text = text[:fig.start] + new + text[fig.end:]
            changes.append(f"{fig.where()}: {fig.written} -> {new} ({fig.kind}: {fig.expr})")
    return text, changes[::-1]


def documents(repo: Path = REPO) -> list[Path]:
    """The Markdown files that quote the bundled run: README.md and docs/*.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="check or rewrite the pipeline figures of README.md "
                                                 "and docs/*.md from a `dvfslab pipeline` output folder")
    parser.add_argument("run", type=Path, help="the output folder of `dvfslab pipeline` on data/replay")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="print every problem; exit 1 if any")
    what.add_argument("--update", action="store_true", help="rewrite every tagged figure in place")
    args = parser.parse_args(argv)
    if not (args.run / "summary.json").exists():
        parser.error(f"{args.run} has no summary.json: pass the folder `dvfslab pipeline --out` wrote")
    source = Source(args.run)
    problems, changes = [], []
    for path in documents():
        name, text = str(path.relative_to(REPO)), path.read_text()
        if args.update:
            try:
                new, changed = update_text(text, name, source)
            except (LookupError, ZeroDivisionError) as err:
                print(f"{name}: not updated: {err}", file=sys.stderr)
                return 1
            if new != text:
                path.write_text(new)
            changes += changed
        problems += check_text(path.read_text(), name, source)
    if args.update:
        print("\n".join(changes + [f"{len(changes)} figures rewritten from {args.run}"]))
    if problems:
        print("\n".join(problems), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
