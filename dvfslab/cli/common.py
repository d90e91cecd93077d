"""Helpers the command-line modules share: the board options (``--sysfs-root``, ``--sysfs-io``,
``--state-dir``), the sysfs I/O and Jetson clocks they name, one line of a clock's state, and
running a child command with SIGINT / SIGTERM forwarded (``dvfslab run``, ``dvfslab govern``:
:mod:`dvfslab.job.command`, re-exported here).
"""

from __future__ import annotations

import argparse

from dvfslab.hw.base import format_mhz
from dvfslab.job.command import Forwarder, Signalled, exit_code

__all__ = ["Forwarder", "Signalled", "board_options", "exit_code", "open_clocks", "state_line", "sysfs_io"]


def board_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sysfs-root", default="/", metavar="DIR",
                   help="root of the sysfs tree (default /; a fake tree in tests)")
    p.add_argument("--sysfs-io", default=None, metavar="MODULE:CLASS",
                   help="sysfs I/O class for a test tree, e.g. dvfslab.testing.fake_sysfs:FakeKernelIO "
                        "(default $DVFSLAB_SYSFS_IO; refused with the real root /)")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="where the original clocks are saved (default $DVFSLAB_STATE_DIR or ~/.local/state/dvfslab)")


def sysfs_io(args):
    """The sysfs I/O for ``--sysfs-root`` (``--sysfs-io`` / ``$DVFSLAB_SYSFS_IO`` injected)."""
    from dvfslab.hw.jetson.sysfs import default_io

    return default_io(args.sysfs_root, getattr(args, "sysfs_io", None))


def open_clocks(args, handle_signals: bool = False):
    from dvfslab.hw.jetson.clocks import JetsonClocks

    return JetsonClocks(io=sysfs_io(args), state_dir=args.state_dir, handle_signals=handle_signals)


def state_line(st) -> str:
    lock = "locked" if st.locked else "unlocked"
    return (f"cur {format_mhz(st.cur_freq_mhz)} MHz, min {format_mhz(st.min_freq_mhz)} MHz, "
            f"max {format_mhz(st.max_freq_mhz)} MHz, governor {st.governor} ({lock})")
