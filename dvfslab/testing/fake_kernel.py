"""The fake kernel's devfreq rules (L4T 5.10 / 5.15) and the fake nvpmodel, for fake_sysfs trees.

:class:`FakeKernelIO` is a :class:`~dvfslab.hw.jetson.sysfs.SysfsIO` that performs the same
file writes and then applies what the kernel does: ``min_freq`` / ``max_freq`` writes are
PM-QoS *requests* (stored with kHz granularity, never rejected for min > max; ``max_freq`` 0
lifts the limit), and the files show the *effective* range computed from the requests, the
frequency table and a cooling-device cap, the minimum clamped to the maximum (the devfreq
core's range rule). ``cur_freq`` is the OPP serving the governor's request inside that range;
the BPMP ``pto_counter`` shows the clock reached, lower under a clamp below devfreq. The rule
state lives in ``<root>/.fake_kernel.json`` (see :mod:`dvfslab.testing.fake_sysfs`).

The other clocks (docs/hardware.md, "Other clocks: EMC and CPU"):

* **EMC** (the BPMP's debugfs clock ``clk/emc``): ``mrq_rate_locked`` takes 0 or 1 (anything
  else EINVAL, as bpmp-debugfs answers a write the firmware refuses); while it is 1, ``rate``
  shows the rate written, rounded up to the next rate of the EMC's table (*unverified*: the
  firmware's rounding is not public), never above ``max_rate`` nor above nvpmodel's
  ``emc_iso_cap`` when that is set (*unverified*), nor above a firmware clamp the test sets;
  while it is 0 the BPMP's own DVFS chooses (``FakeBoard.set_emc_dvfs``) and a written rate
  waits for the lock.
* **cpufreq**: ``scaling_min_freq`` / ``scaling_max_freq`` writes are frequency-QoS requests;
  the files show the effective limits (clamped to ``cpuinfo_min/max_freq`` and a cooling cap,
  min lowered to max, max raised to the next table frequency when none lies between them, as
  ``cpufreq_frequency_table_verify`` does); ``scaling_cur_freq`` / ``cpuinfo_cur_freq`` are the
  governor's choice in that range. ``cpu<N>/online`` takes cores on and off line; a policy whose
  CPUs are all offline answers every read and write with EBUSY.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
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
        kernel = json.loads((root / KERNEL_FILE).read_text())
    except FileNotFoundError:
        kernel = {"devfreq": {}}
    kernel.setdefault("cpufreq", {})
    return kernel


def save_kernel(root: Path, kernel: dict) -> None:
    """Replace the rule state atomically: a real kernel's own state is never half-updated, so a
    process killed (SIGKILL) while changing it, or one reading it meanwhile, sees the old state
    or the new one, never an empty or cut-short file (no fsync: a power loss is not a fake's)."""
    tmp = root / f"{KERNEL_FILE}.{os.getpid()}-{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(kernel, indent=1))
    os.replace(tmp, root / KERNEL_FILE)


def _einval(path: Path, why: str) -> OSError:
    return OSError(errno.EINVAL, f"{os.strerror(errno.EINVAL)} ({why})", str(path))


def _ebusy(path: Path) -> OSError:
    return OSError(errno.EBUSY, f"{os.strerror(errno.EBUSY)} (the cpufreq policy's CPUs are all offline)", str(path))


CPU_REL = "sys/devices/system/cpu"
POLICY_MARK = "/cpufreq/policy"


class FakeKernelIO(SysfsIO):
    """Real file I/O under ``root`` plus the kernel's devfreq rules (see the module doc)."""

    def _write_bytes(self, path: Path, data: bytes) -> None:
        _write_in_place(path, data)

    def _inactive_policy(self, path: Path) -> bool:
        """Whether ``path`` lies in a cpufreq policy directory whose CPUs are all offline."""
        text = str(path)
        if POLICY_MARK not in text:
            return False
        real = Path(os.path.realpath(path))
        rel = os.path.relpath(real.parent, os.path.realpath(self.root))
        rules = load_kernel(self.root)["cpufreq"].get(rel)
        return rules is not None and not rules.get("active", True)

    def read_text(self, rel) -> str:
        if self._inactive_policy(self.path(rel)):
            raise _ebusy(self.path(rel))
        return super().read_text(rel)

    def writable(self, rel) -> bool:
        path = self.path(rel)
        return path.exists() and bool(path.stat().st_mode & 0o222) and super().writable(path)

    def write(self, rel, value) -> None:
        path = self.path(rel)
        if path.exists() and not path.stat().st_mode & 0o222:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        real = Path(os.path.realpath(path))
        kernel = load_kernel(self.root)
        root = Path(os.path.realpath(self.root))
        dev_rel = os.path.relpath(real.parent, root)
        text = str(value).strip()
        if dev_rel in kernel["cpufreq"]:
            return self._cpufreq_write(root, kernel, dev_rel, real, text, value)
        if kernel.get("emc") and dev_rel == kernel["emc"]["dir"] and real.name in ("mrq_rate_locked", "rate"):
            return self._emc_write(root, kernel, real, text)
        if real.name == "online" and os.path.relpath(real.parent.parent, root) == CPU_REL and kernel["cpufreq"]:
            return self._online_write(root, kernel, real, text)
        if dev_rel not in kernel["devfreq"] or real.name not in ("min_freq", "max_freq", "governor"):
            return super().write(path, value)
        rules = kernel["devfreq"][dev_rel]
        self._devfreq_write(real, text, rules)
        save_kernel(self.root, kernel)
        apply_rules(root, real.parent, rules)

    def _cpufreq_write(self, root: Path, kernel: dict, rel: str, path: Path, text: str, value) -> None:
        """A policy attribute: EBUSY while inactive; min / max are QoS requests (kHz)."""
        rules = kernel["cpufreq"][rel]
        if not rules.get("active", True):
            raise _ebusy(path)
        if path.name in ("scaling_min_freq", "scaling_max_freq"):
            try:
                khz = int(text)
            except ValueError:
                raise _einval(path, f"not an integer: {text!r}") from None
            rules["min_req_khz" if path.name == "scaling_min_freq" else "max_req_khz"] = khz
        elif path.name == "scaling_governor":
            if text not in (path.parent / "scaling_available_governors").read_text().split():
                raise _einval(path, f"unknown governor {text!r}")
            super().write(path, text)
        else:
            return super().write(path, value)
        save_kernel(self.root, kernel)
        apply_cpufreq_rules(root, root / rel, rules)

    def _online_write(self, root: Path, kernel: dict, path: Path, text: str) -> None:
        if text not in ("0", "1"):
            raise _einval(path, f"online takes 0 or 1, not {text!r}")
        super().write(path, text)
        apply_online(root, kernel)
        save_kernel(self.root, kernel)

    def _emc_write(self, root: Path, kernel: dict, path: Path, text: str) -> None:
        emc = kernel["emc"]
        try:
            v = int(text)
        except ValueError:
            raise _einval(path, f"not an integer: {text!r}") from None
        if path.name == "mrq_rate_locked":
            if v not in (0, 1):
                raise _einval(path, f"mrq_rate_locked takes 0 or 1, not {v}")
            emc["locked"] = v
        else:
            if v < 0:
                raise _einval(path, f"negative rate {v}")
            emc["req_hz"] = v
        save_kernel(self.root, kernel)
        apply_emc_rules(root, emc)

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


def _table_at_or_above(levels: list[int], freq: int) -> int | None:
    return next((f for f in sorted(levels) if f >= freq), None)


def apply_emc_rules(root: Path, emc: dict) -> None:
    """What the BPMP shows for the EMC: the locked rate (rounded up to the table, held under
    ``max_rate``, nvpmodel's ISO cap and a firmware clamp) or, unlocked, its own DVFS rate."""
    d = root / emc["dir"]
    levels = sorted(emc["levels_hz"])
    caps = [emc["max_rate_hz"], emc.get("ceiling_hz")]
    iso = root / emc["iso_cap"]
    if iso.exists():
        caps.append(int(iso.read_text().split()[0]) or None)
    top = min(c for c in caps if c)
    if emc.get("locked") and emc.get("req_hz"):
        rate = _table_at_or_above(levels, emc["req_hz"]) or levels[-1]
    else:
        rate = emc["dvfs_hz"]
    rate = min(rate, top)
    rate = max([f for f in levels if f <= rate] or levels[:1])
    write_attr(d / "rate", rate)
    write_attr(d / "mrq_rate_locked", int(emc.get("locked") or 0))


def apply_cpufreq_rules(root: Path, d: Path, rules: dict) -> None:
    """The effective limits and the frequency of one active policy (kHz), cpufreq's rules."""
    if not rules.get("active", True):
        return
    table = sorted(rules["table_khz"])
    lo_hw, hi_hw = table[0], table[-1]
    lo = max(lo_hw, rules.get("min_req_khz") or 0)
    hi = min(f for f in (hi_hw, rules.get("max_req_khz"), rules.get("thermal_cap_khz")) if f)
    lo, hi = min(max(lo, lo_hw), hi_hw), min(max(hi, lo_hw), hi_hw)  # within cpuinfo limits
    lo = min(lo, hi)  # the minimum lowered to the maximum
    if not any(lo <= f <= hi for f in table):  # no frequency in range: max -> the next larger one
        hi = _table_at_or_above(table, hi) or hi_hw
    write_attr(d / "scaling_min_freq", lo)
    write_attr(d / "scaling_max_freq", hi)
    cur = int((d / "scaling_cur_freq").read_text())
    gov = (d / "scaling_governor").read_text().strip()
    cur = hi if gov == "performance" else lo if gov == "powersave" else min(max(cur, lo), hi)
    cur = _table_at_or_above([f for f in table if f <= hi], cur) or hi
    write_attr(d / "scaling_cur_freq", cur)
    hw = d / "cpuinfo_cur_freq"
    if hw.exists():
        write_attr(hw, cur)


def apply_online(root: Path, kernel: dict) -> None:
    """After a core went on or off line: ``cpu/online``, each policy's ``affected_cpus`` and
    whether it is active (an inactive policy keeps its files, which then answer EBUSY)."""
    cpu_dir = root / CPU_REL
    online = []
    for d in sorted(cpu_dir.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        f = d / "online"
        if not f.exists() or f.read_text().strip() == "1":
            online.append(int(d.name[3:]))
    write_attr(cpu_dir / "online", ",".join(str(c) for c in online))
    for rel, rules in kernel["cpufreq"].items():
        d = root / rel
        affected = [c for c in rules["related"] if c in online]
        was_active = rules.get("active", True)
        rules["active"] = bool(affected)
        if affected:
            write_attr(d / "affected_cpus", " ".join(str(c) for c in affected))
            if not was_active:
                apply_cpufreq_rules(root, d, rules)


def nvpmodel_conf(modes: dict, mode_clocks: dict | None = None) -> str:
    """An ``/etc/nvpmodel.conf`` in nvpmodel's own format (-1 = no cap): the GPU lines, and with
    ``mode_clocks`` (id -> ``{"cpu_online", "cpu_max_khz", "emc_cap_hz", "clusters"}``) the CPU
    cores online, one ``CPU_A78_<k>`` min/max line pair per cluster with a core online, and the EMC cap,
    as in the real AGX Orin dump."""
    lines = []
    for mode_id, (name, cap_hz, mask) in sorted(modes.items()):
        lines += [f"< POWER_MODEL ID={mode_id} NAME={name} >"]
        clk = (mode_clocks or {}).get(mode_id)
        if clk:
            n_cpu = sum(len(c) for c in clk["clusters"])
            online = clk.get("cpu_online") or n_cpu
            lines += [f"CPU_ONLINE CORE_{c} {int(c < online)}" for c in range(n_cpu)]
        lines += [f"TPC_POWER_GATING TPC_PG_MASK {mask}", "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on"]
        if clk:
            for k, cluster in enumerate(clk["clusters"]):
                if cluster[0] < online:
                    lines += [f"CPU_A78_{k} MIN_FREQ {clk.get('cpu_min_khz', 729600)}",
                              f"CPU_A78_{k} MAX_FREQ {clk.get('cpu_max_khz') or 9223372036854775807}"]
        lines += ["GPU MIN_FREQ 0", f"GPU MAX_FREQ {cap_hz if cap_hz else -1}",
                  "GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto"]
        if clk:
            lines += [f"EMC MAX_FREQ {clk.get('emc_cap_hz') or 0}"]
        lines += [""]
    return "\n".join(lines)


def write_nvpmodel(path: Path, mode_id: int, name: str) -> None:
    write_attr(path, "#!/bin/sh\n# fake nvpmodel written by dvfslab.testing.fake_sysfs\n"
           'if [ "$1" = "-q" ]; then [ "$2" = "--verbose" ] && echo "NVPM VERB: Config file: /etc/nvpmodel.conf"; '
           f'printf "NV Fan Mode:quiet\\nNV Power Mode: {name}\\n{mode_id}\\n"; '
           'exit 0; fi\necho "fake nvpmodel: only -q is supported" >&2\nexit 1')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
