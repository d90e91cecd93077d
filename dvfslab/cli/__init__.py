"""The ``dvfslab`` command.

Sub-commands live one per module in this package; each module defines
``register(subparsers)`` which adds its parser(s) and sets ``func=<callable(args) -> int>``.
Errors dvfslab raises on purpose (:class:`DvfsError`) are printed as one line, exit code 2;
warnings of dvfslab's own categories as one line ``dvfslab COMMAND: warning: ...``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings

from dvfslab import __version__
from dvfslab.hw.base import DvfsError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dvfslab",
        description="GPU DVFS for energy-efficient fine-tuning on NVIDIA Jetson.",
    )
    parser.add_argument("--version", action="version", version=f"dvfslab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):  # a sub-command group (common: the helpers they share)
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
            return int(args.func(args) or 0)
    except DvfsError as err:
        print(f"dvfslab {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dvfslab {args.command}: interrupted", file=sys.stderr)
        return 130


def _one_line_warnings(command: str, default):
    """``warnings.showwarning`` for the command: dvfslab's warnings on one line, others as usual."""
    def show(message, category, filename, lineno, file=None, line=None):
        if category.__module__.startswith("dvfslab."):
            print(f"dvfslab {command}: warning: {message}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)
    return show


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
