"""Run the signal tests again and again under a CPU hog on every core; print the pass counts.

    python tests/stress_signals.py [--rounds 20] [--no-hog] [TEST_ID ...]

Not collected by pytest (no ``test_`` prefix): it is the check that the signal tests wait on
what their child reports, not on timing. One busy-loop process per core
(``python -c 'while 1: pass'``, ``os.cpu_count()`` of them) runs for the whole time; each test
id runs ``--rounds`` times in a row, each in a fresh ``pytest`` process; a failed round's last
lines are printed. Exit status 1 when any round failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/test_jetson_clocks.py::test_sigint_inside_context_restores_then_chains",
    "tests/test_sweep_crash.py::test_ctrl_c_names_the_command_that_resumes_and_that_command_finishes_the_sweep",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests", nargs="*", default=TESTS, help="pytest node ids (default: the two signal tests)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-hog", action="store_true", help="run without the CPU hog")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    n_hog = 0 if args.no_hog else (os.cpu_count() or 1)
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n_hog)]
    print(f"{n_hog} busy-loop processes (os.cpu_count() = {os.cpu_count()}); {args.rounds} rounds per test",
          flush=True)
    failed = 0
    try:
        for test in args.tests:
            passed, took = 0, []
            for i in range(args.rounds):
                t0 = time.monotonic()
                r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                                   cwd=ROOT, env=env, capture_output=True, text=True)
                took.append(time.monotonic() - t0)
                if r.returncode == 0:
                    passed += 1
                else:
                    failed += 1
                    print(f"  round {i + 1} FAILED (exit {r.returncode}):", flush=True)
                    print("    " + "\n    ".join((r.stdout + r.stderr).strip().splitlines()[-25:]), flush=True)
            took.sort()
            print(f"{test}: {passed}/{args.rounds} passed (median {took[len(took) // 2]:.1f} s a round)", flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
