"""The package's face (issue 25, item 7): ``help(dvfslab)`` says what it is, its rooms, its
command line and the quick start; ``__all__`` names what ``import dvfslab`` offers; the
fine-tuning harness says which extra to install when it is missing."""

from __future__ import annotations

import argparse
import pkgutil
import pydoc
import subprocess
import sys
from pathlib import Path

import dvfslab
from dvfslab.cli import build_parser

REPO = Path(__file__).resolve().parents[1]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_help_names_every_room_and_every_command_and_the_quick_start():
    text = pydoc.render_doc(dvfslab, renderer=pydoc.plaintext)
    rooms = [m.name for m in pkgutil.iter_modules(dvfslab.__path__) if m.ispkg]
    assert len(rooms) == 15  # docs/layout.md's 14 rooms in 13 layers (core ... cli; job beside harness) and testing
    for room in rooms:
        assert f"\n    {room} " in dvfslab.__doc__, room
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in sub.choices:
        assert f"dvfslab {command} " in dvfslab.__doc__, command
    assert "make demo" in text and "dvfslab pipeline --data" in text
    assert "__all__ = ['__version__', 'Dataset', 'DvfsError'" in text  # help lists __all__ ...
    assert "load_dataset(path" in text and "Load and validate a dataset directory" in text  # ... and its entries


def test_all_names_load_on_first_use_with_the_base_install_only():
    assert dvfslab.__all__[0] == "__version__" and "load_dataset" in dvfslab.__all__
    assert all(getattr(dvfslab, name) is not None for name in dvfslab.__all__)
    done = run_python("import sys, dvfslab; light = 'pandas' not in sys.modules; from dvfslab import *; "
                      "print(light, sorted(m for m in ('transformers', 'sklearn', 'matplotlib', 'papermill') "
                      "if m in sys.modules), load_dataset.__module__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "[]", "dvfslab.data.contract"]


def test_harness_without_the_finetune_extra_says_what_to_install():
    blocked = "import sys; sys.modules['transformers'] = None; "  # as if transformers were not installed
    done = run_python(blocked + "import dvfslab.harness")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "dvfslab.harness.FinetuneExtraMissing: dvfslab.harness (fine-tuning) needs the finetune extra; "
        "missing: transformers. Install it: pip install 'dvfslab[finetune]'")
    done = run_python(blocked + "\ntry:\n    import dvfslab.harness\nexcept ImportError as err:\n"
                                "    print(type(err).__mro__[1].__name__, err.name)")
    assert done.stdout.split() == ["DvfsError", "transformers"]  # an ImportError, and one line in the CLI
    done = run_python(blocked + "from dvfslab.cli import main; sys.exit(main(['finetune', '--model', 'bert-tiny', "
                                "'--task', 'synthetic:sst2', '--out', 'unused']))")
    assert done.returncode == 2 and done.stderr == (
        "dvfslab finetune: error: dvfslab.harness (fine-tuning) needs the finetune extra; missing: transformers. "
        "Install it: pip install 'dvfslab[finetune]'\n")
