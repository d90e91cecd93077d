"""Rehearse ``dvfslab doctor`` without a board: ``python -m dvfslab.testing.rehearse``.

Builds the fake AGX Orin tree (JetPack 6, MAXN; :func:`~dvfslab.testing.fake_sysfs.build_board`)
in a temporary folder and runs ``dvfslab doctor`` on it with the blocking fake INA3221
(:mod:`dvfslab.testing.fake_ina`: reads wait for a conversion on a virtual clock, as the driver's
do), so a laptop user sees every check the board will be asked — the lock test included, on the
fake kernel's rules. Nothing outside the temporary folder is read or written; the folder is
removed at the end (``--keep`` keeps it and prints where). The doctor's exit code is returned.

It is what `dvfslab doctor --help` points to for a rehearsal without a board (a `--rehearse`
flag would make the CLI select a fake itself, which it never does: docs/layout.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dvfslab.testing.fake_ina import install
from dvfslab.testing.fake_sysfs import build_board

BLOCKING_INA_IO = "dvfslab.testing.fake_ina:BlockingInaIO"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dvfslab.testing.rehearse",
                                description="run dvfslab doctor on a fake AGX Orin tree in a temporary folder")
    p.add_argument("--profile", default="agx-orin-jp6", help="fake board profile (default agx-orin-jp6)")
    p.add_argument("--keep", action="store_true", help="keep the fake tree and print where it is")
    p.add_argument("doctor_args", nargs=argparse.REMAINDER, help="more options for dvfslab doctor (after --)")
    a = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="dvfslab-rehearse-")
    try:
        try:
            board = build_board(Path(tmp) / "board", a.profile)
        except ValueError as err:  # an unknown profile, a family without levels: one usage line, exit 2
            p.error(f"--profile: {err}")
        install(board)  # the driver's update_interval for the blocking fake chip
        extra = a.doctor_args[1:] if a.doctor_args[:1] == ["--"] else a.doctor_args
        print(f"REHEARSAL: dvfslab doctor on a fake {a.profile} tree in {board.root} (nothing real is touched)",
              flush=True)
        env = {**os.environ, "DVFSLAB_STATE_DIR": str(Path(tmp) / "state")}
        return subprocess.call([sys.executable, "-m", "dvfslab", "doctor", "--backend", "jetson", "--sysfs-root",
                                str(board.root), "--sysfs-io", BLOCKING_INA_IO, *extra], env=env)
    finally:
        if a.keep:
            print(f"fake tree kept in {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
