"""The fake kernel's devfreq rules (L4T 5.10 / 5.15) and the fake nvpmodel, for fake_sysfs trees.

:class:`FakeKernelIO` is a :class:`~dvfslab.hw.jetson.sysfs.SysfsIO` that performs the same
file writes and then applies what the kernel does: ``min_freq`` / ``max_freq`` writes are
PM-QoS *requests* (stored with kHz granularity, never rejected for min > max; ``max_freq`` 0
lifts the limit), and the files show the *effective* range computed from the requests, the
frequency table and a cooling-device cap, the minimum clamped to the maximum (the devfreq
core's range rule). ``cur_freq`` is the OPP serving the governor's request inside that range;
the BPMP ``pto_counter`` shows the clock reached, lower under a clamp below devfreq. The rule
state lives in ``<root>/.fake_kernel.json`` (see :mod:`dvfslab.testing.fake_sysfs`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from dvfslab.core.boards import GPC_PTO_COUNTER
from dvfslab.hw.jetson.sysfs import SysfsIO

#: the fake kernel's rule state, at the root of every tree ``build_board`` writes
KERNEL_FILE = ".fake_kernel.json"


def _write_in_place(path: Path, data: bytes) -> None:
    """Overwrite from offset 0, then truncate: a SIGKILL at any point leaves the old value or
    the new one followed by a stale tail after its newline (still parsed right), never an
    empty file, as sysfs attributes are never seen half-written. The inode is kept, so
    readers holding the file open (the power reader) see the new value."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def write_attr(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_in_place(path, f"{text}\n".encode())


def load_kernel(root: Path) -> dict:
    """The rule state; a tree without it (not made by ``build_board``) has no devfreq rules."""
    try:
        return json.loads((root / KERNEL_FILE).read_text())
    except FileNotFoundError:
        return {"devfreq": {}}


def save_kernel(root: Path, kernel: dict) -> None:
    (root / KERNEL_FILE).write_text(json.dumps(kernel, indent=1))


def _einval(path: Path, why: str) -> OSError:
    return OSError(errno.EINVAL, f"{os.strerror(errno.EINVAL)} ({why})", str(path))


class FakeKernelIO(SysfsIO):
    """Real file I/O under ``root`` plus the kernel's devfreq rules (see the module doc)."""

    def _write_bytes(self, path: Path, data: bytes) -> None:
        _write_in_place(path, data)

    def writable(self, rel) -> bool:
        path = self.path(rel)
        return path.exists() and bool(path.stat().st_mode & 0o222) and super().writable(path)

    def write(self, rel, value) -> None:
        path = self.path(rel)
        if path.exists() and not path.stat().st_mode & 0o222:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        real = Path(os.path.realpath(path))
        kernel = load_kernel(self.root)
        dev_rel = os.path.relpath(real.parent, os.path.realpath(self.root))
        if dev_rel not in kernel["devfreq"] or real.name not in ("min_freq", "max_freq", "governor"):
            return super().write(path, value)
        rules = kernel["devfreq"][dev_rel]
        self._devfreq_write(real, str(value).strip(), rules)
        save_kernel(self.root, kernel)
        apply_rules(Path(os.path.realpath(self.root)), real.parent, rules)

    def _devfreq_write(self, path: Path, text: str, rules: dict) -> None:
        """Store a min/max request (kHz granularity, as the PM-QoS request); never reject min > max."""
        if path.name == "governor":
            if text not in (path.parent / "available_governors").read_text().split():
                raise _einval(path, f"unknown governor {text!r}")
            return super().write(path, text)
        try:
            hz = int(text)
        except ValueError:
            raise _einval(path, f"not an integer: {text!r}") from None
        if hz < 0:
            raise _einval(path, f"negative frequency {hz}")
        if path.name == "min_freq":
            rules["min_req_hz"] = -(-hz // 1000) * 1000  # rounded up to kHz
        else:
            rules["max_req_hz"] = hz // 1000 * 1000 or None  # 0: no limit


def _opp(levels: list[int], freq: int, hi: int) -> int:
    """The level serving ``freq``: the lowest level >= freq, but never above ``hi``."""
    up = [f for f in levels if f >= freq and f <= hi]
    return up[0] if up else max([f for f in levels if f <= hi] or levels[:1])


def apply_rules(root: Path, d: Path, rules: dict) -> None:
    """Write what the kernel shows: the effective range, ``cur_freq`` and the BPMP counter."""
    levels = sorted(int(v) for v in (d / "available_frequencies").read_text().split())
    hi = min(f for f in (levels[-1], rules.get("max_req_hz"), rules.get("thermal_cap_hz")) if f)
    lo = min(max(levels[0], rules.get("min_req_hz") or 0), hi)  # min is clamped to max on read
    write_attr(d / "min_freq", lo)
    write_attr(d / "max_freq", hi)
    cur = int((d / "cur_freq").read_text())
    gov = (d / "governor").read_text().strip() if (d / "governor").exists() else ""
    cur = hi if gov == "performance" else lo if gov == "powersave" else min(max(cur, lo), hi)
    cur = _opp(levels, cur, hi)
    write_attr(d / "cur_freq", cur)
    write_attr(d / "target_freq", cur)
    pto = root / rules.get("counter", GPC_PTO_COUNTER)
    if rules.get("gpu") and pto.exists():
        ceiling = rules.get("clock_ceiling_hz")
        write_attr(pto, min(cur, ceiling) if ceiling else cur)


def nvpmodel_conf(modes: dict) -> str:
    """An ``/etc/nvpmodel.conf`` (GPU lines only) in nvpmodel's own format; -1 = no cap."""
    lines = []
    for mode_id, (name, cap_hz, mask) in sorted(modes.items()):
        lines += [f"< POWER_MODEL ID={mode_id} NAME={name} >", f"TPC_POWER_GATING TPC_PG_MASK {mask}",
                  "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on", "GPU MIN_FREQ 0",
                  f"GPU MAX_FREQ {cap_hz if cap_hz else -1}", "GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto", ""]
    return "\n".join(lines)


def write_nvpmodel(path: Path, mode_id: int, name: str) -> None:
    write_attr(path, "#!/bin/sh\n# fake nvpmodel written by dvfslab.testing.fake_sysfs\n"
           'if [ "$1" = "-q" ]; then [ "$2" = "--verbose" ] && echo "NVPM VERB: Config file: /etc/nvpmodel.conf"; '
           f'printf "NV Fan Mode:quiet\\nNV Power Mode: {name}\\n{mode_id}\\n"; '
           'exit 0; fi\necho "fake nvpmodel: only -q is supported" >&2\nexit 1')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
