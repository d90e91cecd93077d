"""How a fake Jetson tree is written (:func:`dvfslab.testing.fake_sysfs.build_board` calls these): the
devfreq nodes, the CPU clusters' cpufreq policies, the EMC's BPMP clock files, the power monitors'
hwmon / iio channels, and a module record's power modes in the fake's own form."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dvfslab.core import boards, jetson_modules
from dvfslab.testing.fake_kernel import CPU_REL, write_attr

#: a :class:`dvfslab.testing.fake_sysfs.FakeBoardSpec` (not imported: fake_sysfs imports this module)
FakeBoardSpec = Any

GOVERNORS = "nvhost_podgov userspace performance simple_ondemand"
CPU_GOVERNORS = "userspace ondemand performance schedutil"


def record_modes(board: jetson_modules.Board) -> dict:
    """A module record's modes as the fake writes them: id -> (name, GPU max request in Hz or None =
    no cap, TPC_PG_MASK)."""
    return {m.id: (m.name, None if m.gpu_max_mhz is None else int(round(m.gpu_max_mhz * 1e6)), m.tpc_pg_mask)
            for m in board.modes}


def record_mode_clocks(board: jetson_modules.Board) -> dict:
    """id -> the CPU cores online, the CPU clusters' cap (kHz; None: none) and the EMC cap (Hz; None: none)
    of each mode of a module record."""
    return {m.id: {"cpu_online": m.cpu_online or board.n_cpu,
                   "cpu_max_khz": None if m.cpu_max_mhz is None else int(round(m.cpu_max_mhz * 1000)),
                   "emc_cap_hz": None if m.emc_max_mhz is None else int(round(m.emc_max_mhz * 1e6))}
            for m in board.modes}


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _build_devfreq(root: Path, device_dir: Path, node_name: str, levels_hz, governor: str) -> tuple[Path, Path]:
    d = device_dir / "devfreq" / node_name
    write_attr(d / "available_frequencies", " ".join(str(f) for f in levels_hz))
    write_attr(d / "available_governors", GOVERNORS)
    write_attr(d / "governor", governor)
    for name, value in (("min_freq", levels_hz[0]), ("max_freq", levels_hz[-1]),
                        ("cur_freq", levels_hz[0]), ("target_freq", levels_hz[0])):
        write_attr(d / name, value)
    _link(d / "device", device_dir)
    link = root / "sys/class/devfreq" / node_name
    _link(link, d)
    return d, link


def _build_cpus(root: Path, p: FakeBoardSpec) -> dict:
    """``cpu<N>/online`` for every core and one cpufreq policy per cluster (all online); the
    rules' state of each policy (its CPUs, table, QoS requests)."""
    cpu_dir = root / CPU_REL
    n_cpu = sum(len(c) for c in p.cpu_clusters)
    for c in range(n_cpu):
        write_attr(cpu_dir / f"cpu{c}" / "online", 1)
    write_attr(cpu_dir / "online", f"0-{n_cpu - 1}")
    policies = {}
    for cluster in p.cpu_clusters:
        d = cpu_dir / "cpufreq" / f"policy{cluster[0]}"
        cpus = " ".join(str(c) for c in cluster)
        for name, value in (("related_cpus", cpus), ("affected_cpus", cpus),
                            ("scaling_available_frequencies", " ".join(str(f) for f in p.cpu_khz)),
                            ("scaling_available_governors", CPU_GOVERNORS), ("scaling_governor", p.cpu_governor),
                            ("cpuinfo_min_freq", p.cpu_khz[0]), ("cpuinfo_max_freq", p.cpu_khz[-1]),
                            ("scaling_min_freq", p.cpu_khz[0]), ("scaling_max_freq", p.cpu_khz[-1]),
                            ("scaling_cur_freq", p.cpu_khz[0]), ("cpuinfo_cur_freq", p.cpu_khz[0])):
            write_attr(d / name, value)
        for c in cluster:
            _link(cpu_dir / f"cpu{c}" / "cpufreq", d)
        rel = os.path.relpath(d, root)
        policies[rel] = {"related": list(cluster), "table_khz": list(p.cpu_khz), "min_req_khz": None,
                         "max_req_khz": None, "active": True}
    return policies


def _build_emc(root: Path, p: FakeBoardSpec) -> dict:
    """The BPMP's EMC clock files (unlocked, at the DVFS's idle rate) and their rules' state."""
    d = root / boards.EMC_CLK_DIR
    for name, value in (("min_rate", p.emc_hz[0]), ("max_rate", p.emc_hz[-1]), ("rate", p.emc_idle_hz),
                        ("mrq_rate_locked", 0)):
        write_attr(d / name, value)
    if p.emc_possible_rates:
        write_attr(root / boards.EMC_POSSIBLE_RATES, " ".join(str(f // 1000) for f in p.emc_hz))
    write_attr(root / boards.EMC_ISO_CAP, 0)
    return {"dir": boards.EMC_CLK_DIR, "iso_cap": boards.EMC_ISO_CAP, "levels_hz": list(p.emc_hz),
            "max_rate_hz": p.emc_hz[-1], "locked": 0, "req_hz": None, "dvfs_hz": p.emc_idle_hz, "ceiling_hz": None}


def _build_rails(root: Path, p: FakeBoardSpec) -> tuple[dict, dict]:
    dirs, channels = {}, {}
    for i, (addr, labels) in enumerate(sorted(p.rails.items())):
        if p.rail_kind == "ina238":  # one rail per chip (mainline hwmon ABI)
            d = root / "sys/bus/i2c/drivers/ina238" / addr / "hwmon" / f"hwmon{p.hwmon_index + i}"
            write_attr(d / "name", "ina238")
            for label in labels:
                write_attr(d / "in1_label", label)
                for attr, value in (("in1_input", 5000), ("curr1_input", 0), ("power1_input", 0)):
                    write_attr(d / attr, value)
                channels[label] = (d, 1)
        elif p.rail_kind == "iio":
            d = root / "sys/bus/i2c/drivers/ina3221x" / addr / f"iio:device{i}"
            for c, label in enumerate(labels):
                if label:
                    write_attr(d / f"rail_name_{c}", label)
                    write_attr(d / f"in_voltage{c}_input", 5000)
                    write_attr(d / f"in_current{c}_input", 0)
                    write_attr(d / f"in_power{c}_input", 0)
                    channels[label] = (d, c)
        else:
            d = root / "sys/bus/i2c/drivers/ina3221" / addr / "hwmon" / f"hwmon{p.hwmon_index + i}"
            write_attr(d / "name", "ina3221")
            if p.update_interval_ms is not None:
                write_attr(d / "update_interval", p.update_interval_ms)
            for c, label in enumerate(labels, start=1):
                if label:
                    write_attr(d / f"in{c}_label", label)
                write_attr(d / f"in{c}_input", 1800 if label and "1V8" in label else 5000)
                write_attr(d / f"curr{c}_input", 0)
                write_attr(d / f"curr{c}_crit", 5000)
                channels[label or f"{addr}/in{c}"] = (d, c)
            write_attr(d / "in7_label", "sum of shunt voltages")
            write_attr(d / "in7_input", 12)
        dirs[addr] = d
    return dirs, channels
