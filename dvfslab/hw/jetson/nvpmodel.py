"""The nvpmodel power mode and its GPU limits (``nvpmodel -q`` + ``/etc/nvpmodel.conf``).

nvpmodel applies a mode's GPU cap by writing the same devfreq ``max_freq`` file dvfslab
writes (the real ``nvpmodel -p --verbose`` dump lists ``GPU MAX_FREQ`` next to the devfreq
``max_freq`` path). The kernel keeps no memory of the mode: a later write above the cap simply
replaces nvpmodel's request. So the mode's limits are read from nvpmodel's own configuration and
checked here, before any write.

Both text forms nvpmodel uses are parsed by :func:`parse_power_modes`: the configuration file
(``< POWER_MODEL ID=2 NAME=MODE_30W >`` headers, then ``GPU MAX_FREQ 612000000`` lines) and
the verbose dump (``NVPM VERB: POWER_MODEL: ID=2 NAME=MODE_30W`` headers, the same lines with
a ``NVPM VERB:`` prefix). ``-1``, ``0`` (for a max) or a value above the board's top level
means "no cap". Besides the GPU limits a mode block gives the online CPU cores
(``CPU_ONLINE CORE_4 0``), the CPU clusters' top clock (``CPU_A78_0 MAX_FREQ 1728000``, kHz) and
the memory-clock cap (``EMC MAX_FREQ 2133000000``, Hz): the simulated board
(:mod:`dvfslab.sim.profiles`) takes its power modes from this parser too.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, replace

from dvfslab.hw.jetson.sysfs import SysfsIO

NVPMODEL_PATHS = ("usr/sbin/nvpmodel", "usr/bin/nvpmodel")
NVPMODEL_CONF = "etc/nvpmodel.conf"
#: the fix printed whenever a sweep or a lock needs the MAXN mode
MAXN_FIX = "switch to MAXN with `sudo nvpmodel -m 0`"

_HEADER = re.compile(r"POWER_MODEL:?\s+ID=(\d+)\s+NAME=([^\s>]+)")
_PREFIX = re.compile(r"^\s*NVPM\s+\w+:\s*")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class PowerMode:
    """One nvpmodel mode. ``gpu_max_mhz=None``: no GPU cap; ``tpc_pg_mask``: GPU TPCs gated off;
    ``cpu_online``: CPU cores online (None: not stated); ``cpu_max_mhz`` / ``emc_max_mhz``: the
    CPU clusters' and the memory clock's caps (None: no cap)."""

    id: int | None
    name: str
    gpu_max_mhz: float | None = None
    gpu_min_mhz: float | None = None
    tpc_pg_mask: int | None = None
    source: str | None = None  # the file the limits came from (None: limits unknown)
    cpu_online: int | None = None
    cpu_max_mhz: float | None = None
    emc_max_mhz: float | None = None

    def tpc_fraction(self, n_tpc: int) -> float:
        """Share of the GPU's ``n_tpc`` TPCs left powered by ``tpc_pg_mask`` (one bit per gated TPC)."""
        gated = bin((self.tpc_pg_mask or 0) & ((1 << n_tpc) - 1)).count("1")
        return (n_tpc - gated) / n_tpc

    @property
    def is_maxn(self) -> bool:
        """MAXN (also ``MAXN_SUPER`` on Orin Nano Super): the mode the paper's sweep needs."""
        return self.name.upper().startswith("MAXN")

    @property
    def limits_known(self) -> bool:
        return self.source is not None

    def describe(self) -> str:
        return f"{self.name} (id {self.id})" if self.id is not None else self.name

    def cap_text(self) -> str:
        """``GPU cap 612 MHz, TPC power-gating mask 240`` (or what is unknown)."""
        if not self.limits_known:
            return "GPU limits unknown (no nvpmodel.conf)"
        cap = "no GPU cap" if self.gpu_max_mhz is None else f"GPU cap {self.gpu_max_mhz:g} MHz"
        return cap + (f", TPC power-gating mask {self.tpc_pg_mask}" if self.tpc_pg_mask else "")


def _hz_to_mhz(value: int, *, is_max: bool) -> float | None:
    if value < 0 or value >= _INT64_MAX or (is_max and value == 0):
        return None
    return value / 1e6


def parse_power_modes(text: str, source: str | None = None) -> dict[int, PowerMode]:
    """Every ``POWER_MODEL`` block of a ``nvpmodel.conf`` or a ``nvpmodel -p --verbose`` dump."""
    modes: dict[int, PowerMode] = {}
    current: PowerMode | None = None
    online: dict[str, int] = {}
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        header = _HEADER.search(line)
        if header:
            current = PowerMode(int(header.group(1)), header.group(2), source=source or "nvpmodel")
            modes[current.id] = current
            online = {}
            continue
        parts = line.split()
        if current is None or len(parts) != 3 or not re.fullmatch(r"-?\d+", parts[2]):
            continue
        value = int(parts[2])
        if parts[:2] == ["GPU", "MAX_FREQ"]:
            current = replace(current, gpu_max_mhz=_hz_to_mhz(value, is_max=True))
        elif parts[:2] == ["GPU", "MIN_FREQ"]:
            current = replace(current, gpu_min_mhz=_hz_to_mhz(value, is_max=False) or None)
        elif parts[:2] == ["TPC_POWER_GATING", "TPC_PG_MASK"]:
            current = replace(current, tpc_pg_mask=value)
        elif parts[0] == "CPU_ONLINE":
            online[parts[1]] = value
            current = replace(current, cpu_online=sum(1 for v in online.values() if v))
        elif parts[0].startswith("CPU_") and parts[1] == "MAX_FREQ":  # kHz, one line per cluster
            cap = _hz_to_mhz(value * 1000, is_max=True) if value < _INT64_MAX else None
            if cap is not None:
                current = replace(current, cpu_max_mhz=min(cap, current.cpu_max_mhz or cap))
        elif parts[:2] == ["EMC", "MAX_FREQ"]:
            current = replace(current, emc_max_mhz=_hz_to_mhz(value, is_max=True))
        else:
            continue
        modes[current.id] = current
    return modes


def _run_query(io: SysfsIO, timeout_s: float) -> str | None:
    """The output of ``nvpmodel -q --verbose`` (the binary under the root), or ``None``."""
    for rel in NVPMODEL_PATHS:
        exe = io.path(rel)
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            continue
        try:
            out = subprocess.run([str(exe), "-q", "--verbose"], capture_output=True, text=True,
                                 timeout=timeout_s)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout
    return None


def _conf_modes(io: SysfsIO, query_out: str) -> dict[int, PowerMode]:
    """The modes of the configuration nvpmodel names (``Config file: ...``), else the default."""
    m = re.search(r"Config file:\s*(\S+)", query_out)
    rel = m.group(1).lstrip("/") if m else NVPMODEL_CONF
    for cand in dict.fromkeys((rel, NVPMODEL_CONF)):
        if io.exists(cand):
            try:
                return parse_power_modes(io.read_text(cand), source=str(io.path(cand)))
            except OSError:
                continue
    return {}


def read_power_mode(io: SysfsIO, timeout_s: float = 5.0) -> PowerMode | None:
    """The current mode with its GPU limits; ``None`` when nvpmodel is not there.

    ``nvpmodel -q --verbose`` gives the id and name; the limits come from the blocks in its
    output when it prints them, else from the configuration file it names. A mode whose limits
    cannot be found is returned with ``limits_known`` false.
    """
    out = _run_query(io, timeout_s)
    if out is None:
        return None
    m = re.search(r"NV Power Mode:\s*(\S+)\s*\n\s*(\d+)", out)
    if not m:
        m1 = re.search(r"NV Power Mode:\s*(\S+)", out)
        return PowerMode(None, m1.group(1)) if m1 else None
    mode_id, name = int(m.group(2)), m.group(1)
    modes = parse_power_modes(out, source="nvpmodel -q --verbose")
    if mode_id not in modes:
        modes = _conf_modes(io, out)
    found = modes.get(mode_id)
    return replace(found, name=name) if found else PowerMode(mode_id, name)


__all__ = ["MAXN_FIX", "PowerMode", "parse_power_modes", "read_power_mode"]
