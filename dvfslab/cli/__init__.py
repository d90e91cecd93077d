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
from dvfslab.core.errors import DvfsError


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
    """Run one command; no traceback for Ctrl-C or a closed standard output, wherever they come."""
    try:
        try:
            return _main(argv)
        except SystemExit:  # argparse's --help / usage errors: their text may meet a closed pipe too
            sys.stdout.flush()
            raise
    except KeyboardInterrupt:  # while the commands load, before one runs
        print("dvfslab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, not at exit as a traceback
            return code
    except DvfsError as err:
        print(f"dvfslab {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"dvfslab {args.command}: {err or 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()


def _closed_pipe() -> int:
    """The reader of standard output went away (``| head``): stop quietly, as Unix tools do.

    Standard output is pointed at /dev/null so that Python's flush at exit finds nothing to
    complain about; the exit status is 141 (128 + SIGPIPE), what a shell shows for ``cat`` there.
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture): nothing to do
        pass
    return 141


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
