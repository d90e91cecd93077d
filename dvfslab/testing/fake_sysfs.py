"""Fake Jetson sysfs trees, built in a temporary directory from board profiles.

``build_board(root, "agx-orin-jp6")`` writes the files a JetPack 6 AGX Orin exposes (layouts
from docs/hardware.md; model, levels, rails and BPMP counter from the family's record in
:mod:`dvfslab.core.boards`, so ``build_board(root, "<family name>")`` fakes any family): the GPU devfreq node and its ``sys/class/devfreq`` link, a distractor
devfreq node, INA3221 hwmon (or JetPack 4 iio) rails, the GPU load, thermal zones, the
device-tree model, ``etc/nv_tegra_release`` and an ``nvpmodel`` script answering ``-q``.

A file tree cannot react to writes, so the kernel's rules live in :class:`FakeKernelIO`, a
:class:`~dvfslab.hw.jetson.sysfs.SysfsIO` that performs the same file writes and then
applies the devfreq rules of L4T kernels 5.10 / 5.15: ``min_freq`` and ``max_freq`` writes are
PM-QoS *requests* (stored, never rejected for min > max; ``max_freq`` 0 means no limit), and
the files show the *effective* range the core computes from the requests, the table and a
cooling-device cap (min clamped to max). A power mode is only the ``max_freq`` request nvpmodel
wrote (:meth:`FakeBoard.set_power_mode` writes it like nvpmodel; a later write replaces it).
``cur_freq`` is the OPP the governor asked for; the BPMP ``nafll_gpc0/pto_counter`` (when the
profile has one) shows the clock *reached*, lower under a clamp below devfreq
(:meth:`FakeBoard.set_clock_ceiling`). A file without write bits refuses writes with EACCES
even for root. The rule state (requests, caps) is kept in ``<root>/.fake_kernel.json``; a tree
without that file gets plain file writes. The file does not select the fake: code under test
gets :class:`FakeKernelIO` by injection, ``io=board.io()`` in-process, or
``DVFSLAB_SYSFS_IO=dvfslab.testing.fake_sysfs:FakeKernelIO`` (``--sysfs-io``) for ``dvfslab``
commands and sub-processes (see docs/hardware.md).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from dvfslab.core import boards, jetson_modules
from dvfslab.testing.fake_kernel import (  # noqa: F401  (KERNEL_FILE, FakeKernelIO: public here too)
    CPU_REL,
    KERNEL_FILE,
    FakeKernelIO,
    apply_cpufreq_rules,
    apply_emc_rules,
    apply_online,
    apply_rules,
    load_kernel,
    nvpmodel_conf,
    save_kernel,
    write_attr,
    write_nvpmodel,
)
from dvfslab.testing.fake_tree import (  # noqa: F401  (public here too)
    CPU_GOVERNORS,
    GOVERNORS,
    _build_cpus,
    _build_devfreq,
    _build_emc,
    _build_rails,
    _link,
    record_mode_clocks,
    record_modes,
)

#: what ``$DVFSLAB_SYSFS_IO`` / ``--sysfs-io`` take to select :class:`FakeKernelIO`
FAKE_KERNEL_IO = "dvfslab.testing.fake_sysfs:FakeKernelIO"
ORIN_THERMAL = ("cpu-thermal", "gpu-thermal", "cv0-thermal", "cv1-thermal", "cv2-thermal",
                "soc0-thermal", "soc1-thermal", "soc2-thermal", "tj-thermal", "tboard-thermal",
                "tdiode-thermal")
XAVIER_THERMAL = ("CPU-therm", "GPU-therm", "AUX-therm", "AO-therm", "PMIC-Die", "Tboard_tegra",
                  "Tdiode_tegra", "thermal-fan-est")


_ORIN = jetson_modules.AGX_ORIN_64GB
#: id -> (name, GPU max request in Hz or None = no cap, TPC_PG_MASK): the AGX Orin 64GB record's modes
#: (the real ``nvpmodel -p --verbose`` dump, tests/data/nvpmodel/)
AGX_ORIN_MODES = record_modes(_ORIN)
MAXN_ONLY = {0: ("MAXN", None, 0)}
#: the AGX Orin's three CPU clusters (cpufreq policies 0, 4, 8), as nvpmodel's CPU_A78_0/1/2 name them
ORIN_CLUSTERS = _ORIN.cpu_clusters
#: the AGX Orin 64GB's CPU table (kHz), from its record
ORIN_CPU_KHZ = tuple(int(round(f * 1000)) for f in _ORIN.cpu_levels_mhz)
#: id -> the CPU cores online, the CPU clusters' cap (kHz) and the EMC cap (Hz) of each AGX Orin 64GB mode
AGX_ORIN_MODE_CLOCKS = record_mode_clocks(_ORIN)
#: the AGX Orin's EMC rates (Hz) and the one its own DVFS holds on an idle board (tegrastats)
ORIN_EMC_HZ = tuple(int(round(f * 1e6)) for f in _ORIN.emc_levels_mhz)
ORIN_EMC_IDLE_HZ = 2133000000
#: the rails every fake reads when a profile does not set them, mW
DEFAULT_RAIL_MW = 1000.0


def levels_hz(levels_mhz) -> tuple[int, ...]:
    """A family's GPU levels as devfreq writes them (Hz)."""
    return tuple(int(round(f * 1e6)) for f in levels_mhz)


@dataclass(frozen=True)
class FakeBoardSpec:
    """What one fake board looks like. ``rails``: i2c address -> channel labels (``None`` =
    unlabeled); ``rail_kind``: ``hwmon`` (INA3221, JetPack 5/6), ``iio`` (JetPack 4) or
    ``ina238`` (one rail per chip, Thor). Model, levels, rails and the BPMP counter come from the
    board family's record (:mod:`dvfslab.core.boards`) unless overridden."""

    name: str
    family: str
    model: str
    l4t: str  # first line of etc/nv_tegra_release
    device_dir: str  # GPU platform device, root-relative
    node_name: str  # devfreq node name, e.g. 17000000.gpu
    of_node_name: str
    levels_hz: tuple[int, ...]
    load_rel: str  # GPU load file
    rails: dict = field(default_factory=dict)
    rail_kind: str = "hwmon"  # "iio" (JetPack 4), "ina238" (Thor)
    hwmon_index: int = 1
    update_interval_ms: int | None = None
    thermal: tuple[str, ...] = ORIN_THERMAL
    power_modes: dict = field(default_factory=dict)  # id -> (name, gpu cap Hz | None, tpc mask)
    power_mode: int | None = 0
    nvpmodel: bool = True
    governor: str = "nvhost_podgov"
    rail_power_mw: dict = field(default_factory=dict)
    bpmp: bool = True  # a readable BPMP counter (debugfs, root)
    bpmp_counter: str = boards.GPC_PTO_COUNTER
    # the other clocks: CPU clusters (one cpufreq policy each) and their table (kHz), the EMC's
    # debugfs clock and its rates (Hz), whether the BPMP lists them (emc/possible_rates), the rate
    # its DVFS holds when unlocked, and per power mode the cores online and the CPU / EMC caps
    # (modelled for the AGX Orin profiles only, from its real nvpmodel dump; elsewhere absent)
    cpu_clusters: tuple[tuple[int, ...], ...] = ()
    cpu_khz: tuple[int, ...] = ORIN_CPU_KHZ
    cpu_governor: str = "schedutil"
    emc: bool = False
    emc_hz: tuple[int, ...] = ORIN_EMC_HZ
    emc_possible_rates: bool = True
    emc_idle_hz: int = ORIN_EMC_IDLE_HZ
    mode_clocks: dict = field(default_factory=dict)
    compatible: str = ""  # proc/device-tree/compatible, NUL separated (names the module's part number)


def family_profile(family: str, name: str | None = None, **kw) -> FakeBoardSpec:
    """A fake of ``family`` (a :mod:`dvfslab.core.boards` record) on its newest L4T release: its
    model, levels, rails and monitor, GPU node ``17000000.<gpu name>`` under
    ``sys/devices/platform``, its first GPU load path. ``kw`` replaces profile fields."""
    fam = boards.family_named(family)
    gpu = fam.gpu_names[0] if fam.gpu_names else "gpu"
    major = fam.l4t_majors[-1] if fam.l4t_jetpack else "36"
    device_dir = f"sys/devices/platform/17000000.{gpu}"
    rails = dict(fam.rail_layout)
    base = dict(
        name=name or fam.name, family=fam.name, model=fam.models[0] if fam.models else f"NVIDIA Jetson {fam.name}",
        l4t=f"# R{major} (release), REVISION: 0.0, GCID: 0, BOARD: generic, EABI: aarch64",
        device_dir=device_dir, node_name=f"17000000.{gpu}", of_node_name=gpu, levels_hz=levels_hz(fam.levels_mhz),
        load_rel=fam.gpu_load_paths[0] if fam.gpu_load_paths else f"{device_dir}/load", rails=rails,
        rail_kind="ina238" if fam.monitor == "INA238" else "hwmon", power_modes=MAXN_ONLY,
        rail_power_mw={r: DEFAULT_RAIL_MW for r in fam.rails}, bpmp_counter=fam.bpmp_counter,
    )
    base.update(kw)
    return FakeBoardSpec(**base)


def _orin(name: str, jp: int, family: str = "AGX Orin", **kw) -> FakeBoardSpec:
    jp6 = jp == 6
    base = dict(
        l4t="# R36 (release), REVISION: 3.0, GCID: 36191598, BOARD: generic, EABI: aarch64" if jp6
        else "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64",
        device_dir="sys/devices/platform/bus@0/17000000.gpu" if jp6 else "sys/devices/17000000.ga10b",
        node_name="17000000.gpu" if jp6 else "17000000.ga10b", of_node_name="gpu" if jp6 else "ga10b",
        load_rel=boards.LOAD_JP6 if jp6 else boards.LOAD_JP45,
        hwmon_index=1 if jp6 else 3, update_interval_ms=7 if jp6 else None,
        power_modes=AGX_ORIN_MODES, mode_clocks=AGX_ORIN_MODE_CLOCKS, cpu_clusters=ORIN_CLUSTERS, emc=True,
        rail_power_mw={"VDD_GPU_SOC": 3200.0, "VDD_CPU_CV": 800.0, "VIN_SYS_5V0": 3600.0, "VDDQ_VDD2_1V8AO": 450.0},
    )
    base.update(kw)
    return family_profile(family, name, **base)


XAVIER_BASE = dict(
    device_dir="sys/devices/17000000.gv11b", node_name="17000000.gv11b", of_node_name="gv11b",
    load_rel=boards.LOAD_JP45, thermal=XAVIER_THERMAL, power_modes=MAXN_ONLY, bpmp=False,
    rail_power_mw={"GPU": 1500.0, "CPU": 700.0, "SOC": 1200.0, "CV": 0.0, "VDDRQ": 300.0, "SYS5V": 2100.0},
)
PROFILES: dict[str, FakeBoardSpec] = {
    "agx-orin-jp5": _orin("agx-orin-jp5", 5),
    "agx-orin-jp6": _orin("agx-orin-jp6", 6),
    "orin-nx-jp6": _orin(  # an Orin NX 16GB (p3767-0000), from its module record
        "orin-nx-jp6", 6, family="Orin NX / Orin Nano", update_interval_ms=None, emc=False,
        levels_hz=levels_hz(jetson_modules.ORIN_NX_16GB.gpu_levels_mhz),
        power_modes=record_modes(jetson_modules.ORIN_NX_16GB),
        mode_clocks=record_mode_clocks(jetson_modules.ORIN_NX_16GB), cpu_clusters=jetson_modules.ORIN_NX_16GB.cpu_clusters,
        cpu_khz=tuple(int(round(f * 1000)) for f in jetson_modules.ORIN_NX_16GB.cpu_levels_mhz),
        compatible="nvidia,p3768-0000+p3767-0000\0nvidia,p3767-0000\0nvidia,tegra234\0",
        rail_power_mw={"VDD_IN": 4761.0, "VDD_CPU_GPU_CV": 515.0, "VDD_SOC": 1428.0}),
    "agx-xavier-jp5": family_profile(
        "AGX Xavier", "agx-xavier-jp5", l4t="# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref",
        hwmon_index=2, **XAVIER_BASE),
    "jp4-iio": family_profile(
        "AGX Xavier", "jp4-iio", l4t="# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t186ref",
        rail_kind="iio", nvpmodel=True, **XAVIER_BASE),
}


@dataclass
class FakeBoard:
    """A built fake board: its paths, and knobs to change what the sensors read."""

    root: Path
    profile: FakeBoardSpec
    devfreq_dir: Path  # the real devfreq directory
    devfreq_link: Path  # sys/class/devfreq/<node>
    device_dir: Path
    load_path: Path
    hwmon_dirs: dict[str, Path]  # i2c address -> hwmon (or iio) directory
    rail_channels: dict[str, tuple[Path, int]]  # rail -> (directory, channel)
    thermal_dirs: dict[str, Path]
    nvpmodel_path: Path | None

    @property
    def devfreq_rel(self) -> str:
        return os.path.relpath(self.devfreq_dir, self.root)

    @property
    def emc_dir(self) -> Path:
        return self.root / boards.EMC_CLK_DIR

    def policy_dir(self, first_cpu: int) -> Path:
        return self.root / CPU_REL / "cpufreq" / f"policy{first_cpu}"

    def io(self) -> FakeKernelIO:
        return FakeKernelIO(self.root)

    def state(self) -> dict:
        """governor and min/max/cur in Hz, as the files say now."""
        d = self.devfreq_dir
        out = {k: int((d / k).read_text()) for k in ("min_freq", "max_freq", "cur_freq")}
        out["governor"] = (d / "governor").read_text().strip()
        return {"governor": out["governor"], "min_freq_hz": out["min_freq"],
                "max_freq_hz": out["max_freq"], "cur_freq_hz": out["cur_freq"]}

    def set_rail(self, name: str, power_mw: float | None = None, *, mv: int | None = None,
                 ma: int | None = None) -> float:
        """Set one rail by power (at its voltage) or by (mV, mA); return the mW a reader sees."""
        d, c = self.rail_channels[name]
        if self.profile.rail_kind == "ina238":  # power1_input in uW
            mv = int(mv if mv is not None else int((d / "in1_input").read_text()))
            ma = int(ma if ma is not None else round(power_mw * 1000 / mv))
            for attr, value in (("in1_input", mv), ("curr1_input", ma), ("power1_input", mv * ma)):
                write_attr(d / attr, value)
            return mv * ma / 1000.0
        if self.profile.rail_kind == "iio":
            mw = int(round(power_mw if power_mw is not None else mv * ma / 1000))
            write_attr(d / f"in_power{c}_input", mw)
            return float(mw)
        mv = int(mv if mv is not None else int((d / f"in{c}_input").read_text()))
        ma = int(ma if ma is not None else round(power_mw * 1000 / mv))
        write_attr(d / f"in{c}_input", mv)
        write_attr(d / f"curr{c}_input", ma)
        return mv * ma / 1000.0

    def set_load(self, pct: float) -> None:
        write_attr(self.load_path, int(round(pct * 10)))

    def set_temp(self, zone_type: str, temp_c: float) -> None:
        write_attr(self.thermal_dirs[zone_type] / "temp", int(round(temp_c * 1000)))

    def set_trip_point(self, zone_type: str, temp_c: float, kind: str = "passive", index: int = 0) -> None:
        """A thermal zone's trip point (the kernel's ``trip_point_<i>_temp`` in m°C and ``_type``)."""
        z = self.thermal_dirs[zone_type]
        write_attr(z / f"trip_point_{index}_temp", int(round(temp_c * 1000)))
        write_attr(z / f"trip_point_{index}_type", kind)

    def _update_rules(self, **changes) -> dict:
        kernel = load_kernel(self.root)
        rules = kernel["devfreq"][self.devfreq_rel]
        rules.update(changes)
        save_kernel(self.root, kernel)
        apply_rules(self.root, self.devfreq_dir, rules)
        return rules

    def set_power_mode(self, mode_id: int, *, name: str | None = None, gpu_cap_mhz: float | None = None) -> None:
        """Switch like ``nvpmodel -m``: write the mode's GPU min/max *requests* (max: its cap, or no
        limit in MAXN) and its TPC mask; ``nvpmodel -q`` then answers the new mode. Nothing keeps
        a later ``max_freq`` write under the cap, as on a real board."""
        modes = self.profile.power_modes
        if gpu_cap_mhz is None and mode_id not in modes:
            raise ValueError(f"profile {self.profile.name} has no power mode {mode_id}: {sorted(modes)}")
        mode_name, cap_hz, mask = modes.get(mode_id, (name or f"MODE_{mode_id}", None, 0))
        cap_hz = int(round(gpu_cap_mhz * 1e6)) if gpu_cap_mhz is not None else cap_hz
        self._update_rules(min_req_hz=0, max_req_hz=cap_hz)
        write_attr(self.device_dir / "tpc_pg_mask", mask)
        mode_clocks = {i: {**c, "clusters": self.profile.cpu_clusters} for i, c in self.profile.mode_clocks.items()}
        if mode_id in mode_clocks:
            self._apply_mode_clocks(mode_clocks[mode_id])
        if self.nvpmodel_path is not None:
            modes = {**modes, mode_id: (name or mode_name, cap_hz, mask)}
            write_attr(self.root / "etc/nvpmodel.conf", nvpmodel_conf(modes, mode_clocks))
            write_nvpmodel(self.nvpmodel_path, mode_id, name or mode_name)

    # -- the other clocks ----------------------------------------------------------------------
    def emc_state(self) -> dict:
        """The EMC as its files say now: ``rate_hz``, ``locked``."""
        return {"rate_hz": int((self.emc_dir / "rate").read_text()),
                "locked": int((self.emc_dir / "mrq_rate_locked").read_text())}

    def cpu_state(self) -> dict:
        """Each active policy's governor, min / max / cur (kHz), by name; inactive ones: None."""
        kernel, out = load_kernel(self.root), {}
        for rel, rules in sorted(kernel["cpufreq"].items()):
            d = self.root / rel
            out[d.name] = None if not rules.get("active", True) else {
                "governor": (d / "scaling_governor").read_text().strip(),
                **{k: int((d / f"scaling_{k}_freq").read_text()) for k in ("min", "max", "cur")}}
        return out

    def _update_emc(self, **changes) -> None:
        kernel = load_kernel(self.root)
        kernel["emc"].update(changes)
        save_kernel(self.root, kernel)
        apply_emc_rules(self.root, kernel["emc"])

    def set_emc_dvfs(self, freq_mhz: float) -> None:
        """The rate the BPMP's own DVFS holds while the EMC is unlocked (the EMC "wanders")."""
        self._update_emc(dvfs_hz=int(round(freq_mhz * 1e6)))

    def set_emc_ceiling(self, freq_mhz: float | None) -> None:
        """A firmware clamp on the EMC (thermal / power): the locked rate reads lower."""
        self._update_emc(ceiling_hz=None if freq_mhz is None else int(round(freq_mhz * 1e6)))

    def set_emc_access(self, readable: bool) -> None:
        """Give or take the BPMP's EMC clock files (debugfs needs root: hidden = not root)."""
        hidden = self.emc_dir.with_name(".emc-hidden")
        if readable and hidden.exists():
            hidden.rename(self.emc_dir)
        elif not readable and self.emc_dir.exists():
            self.emc_dir.rename(hidden)

    def set_cpu_online(self, cpu: int, online: bool) -> None:
        """Take a core on or off line, as nvpmodel does through ``cpu<N>/online``."""
        self.io().write(self.root / CPU_REL / f"cpu{cpu}" / "online", int(online))

    def set_cpu_throttle(self, freq_mhz: float | None) -> None:
        """A cooling-device cap on every CPU policy (a lower effective ``scaling_max_freq``)."""
        kernel = load_kernel(self.root)
        for rel, rules in kernel["cpufreq"].items():
            rules["thermal_cap_khz"] = None if freq_mhz is None else int(round(freq_mhz * 1000))
            apply_cpufreq_rules(self.root, self.root / rel, rules)
        save_kernel(self.root, kernel)

    def make_cpu_read_only(self, read_only: bool = True) -> None:
        """Drop (or give back) the write bits of every policy's min / max / governor files."""
        for d in (self.root / CPU_REL / "cpufreq").glob("policy*"):
            for name in ("scaling_min_freq", "scaling_max_freq", "scaling_governor"):
                (d / name).chmod(0o444 if read_only else 0o644)

    def _apply_mode_clocks(self, clk: dict) -> None:
        """What nvpmodel writes for a mode's CPUs and EMC: cores on / off line (through the fake
        kernel, so policies go inactive), each active policy's min / max requests, the EMC cap."""
        n_cpu = sum(len(c) for c in self.profile.cpu_clusters)
        online = clk.get("cpu_online") or n_cpu
        io = self.io()
        for c in range(1, n_cpu):
            f = self.root / CPU_REL / f"cpu{c}" / "online"
            if f.read_text().strip() != str(int(c < online)):
                io.write(f, int(c < online))
        top = self.profile.cpu_khz[-1]
        for cluster in self.profile.cpu_clusters:
            if cluster[0] < online:
                d = self.policy_dir(cluster[0])
                io.write(d / "scaling_max_freq", clk.get("cpu_max_khz") or top)
                io.write(d / "scaling_min_freq", clk.get("cpu_min_khz", 729600))
        if self.profile.emc:
            write_attr(self.root / boards.EMC_ISO_CAP, clk.get("emc_cap_hz") or 0)
            kernel = load_kernel(self.root)
            apply_emc_rules(self.root, kernel["emc"])

    def set_throttle(self, freq_mhz: float | None) -> None:
        """A thermal cooling-device cap: a lower *effective* ``max_freq`` (``None`` lifts it)."""
        self._update_rules(thermal_cap_hz=None if freq_mhz is None else int(round(freq_mhz * 1e6)))

    def set_clock_ceiling(self, freq_mhz: float | None) -> None:
        """A clamp below devfreq (BPMP thermal / power): only the ``pto_counter`` shows it."""
        self._update_rules(clock_ceiling_hz=None if freq_mhz is None else int(round(freq_mhz * 1e6)))

    def set_bpmp_readable(self, readable: bool) -> None:
        """Give or take the BPMP clock counter (debugfs needs root: absent = not root)."""
        pto = self.root / self.profile.bpmp_counter
        if readable:
            write_attr(pto, 0)
            self._update_rules()
        elif pto.exists():
            pto.unlink()

    def run_jetson_clocks(self) -> None:
        """What ``sudo jetson_clocks`` does to the GPU: min = max = the mode's max, rail held on."""
        io = self.io()
        io.write(self.devfreq_dir / "min_freq", int((self.devfreq_dir / "max_freq").read_text()))
        write_attr(self.railgate_path, "on")

    @property
    def railgate_path(self) -> Path:
        return self.device_dir / "power" / "control"

    def make_read_only(self, read_only: bool = True) -> None:
        """Drop (or give back) the write bits of the GPU clock files."""
        for name in ("min_freq", "max_freq", "governor"):
            p = self.devfreq_dir / name
            p.chmod(0o444 if read_only else 0o644)


def build_board(root: str | os.PathLike, profile: str = "agx-orin-jp6", **overrides) -> FakeBoard:
    """Write a fake Jetson tree for ``profile`` under ``root``: a key of :data:`PROFILES`, or the
    name of a board family (:func:`family_profile`, e.g. ``"AGX Orin"``).

    ``overrides`` replace profile fields (``levels_hz``, ``power_mode``, ``nvpmodel``,
    ``rail_power_mw`` ...). The GPU starts at governor ``nvhost_podgov``, min = lowest level,
    max = highest level allowed by the power mode.
    """
    families = [f.name for f in boards.families()]
    if profile in PROFILES:
        p = dataclasses.replace(PROFILES[profile], **overrides)
    elif profile in families:
        p = family_profile(profile, **overrides)
    else:
        raise ValueError(f"unknown board profile {profile!r}; choose one of {', '.join(PROFILES)} "
                         f"or a board family: {', '.join(families)}")
    if not p.levels_hz or not p.rails:
        raise ValueError(f"board {p.name!r}: its family record has no GPU levels or rail layout; "
                         "pass levels_hz= and rails= to build_board")
    root = Path(os.path.realpath(root))
    device_dir = root / p.device_dir
    write_attr(device_dir / "of_node" / "name", p.of_node_name + "\0")
    devfreq_dir, link = _build_devfreq(root, device_dir, p.node_name, p.levels_hz, p.governor)
    vic = root / "sys/devices/platform/bus@0/15340000.vic"
    vic_dir, _ = _build_devfreq(root, vic, "15340000.vic", (115200000, 729600000), "nvhost_podgov")
    write_attr(vic / "of_node" / "name", "vic\0")
    write_attr(device_dir / "power" / "control", "auto")
    if p.bpmp:
        write_attr(root / p.bpmp_counter, p.levels_hz[0])
    kernel = {"profile": p.name, "devfreq": {
        os.path.relpath(devfreq_dir, root): {"gpu": True, "min_req_hz": 0, "max_req_hz": None,
                                             "counter": p.bpmp_counter},
        os.path.relpath(vic_dir, root): {"min_req_hz": 0, "max_req_hz": None}},
        "cpufreq": _build_cpus(root, p) if p.cpu_clusters else {}}
    if p.emc:
        kernel["emc"] = _build_emc(root, p)
    save_kernel(root, kernel)
    load_path = root / p.load_rel
    write_attr(load_path, 0)
    hwmon_dirs, channels = _build_rails(root, p)
    thermal = {}
    for i, kind in enumerate(p.thermal):
        z = root / f"sys/devices/virtual/thermal/thermal_zone{i}"
        write_attr(z / "type", kind)
        write_attr(z / "temp", -256000 if kind.startswith("cv") else 40000 + 500 * i)
        _link(root / f"sys/class/thermal/thermal_zone{i}", z)
        thermal[kind] = z
    write_attr(root / "proc/device-tree/model", p.model + "\0")
    if p.compatible:
        write_attr(root / "proc/device-tree/compatible", p.compatible)
    write_attr(root / "etc/nv_tegra_release", p.l4t)
    nvp = root / "usr/sbin/nvpmodel" if p.nvpmodel else None
    board = FakeBoard(root, p, devfreq_dir, link, device_dir, load_path, hwmon_dirs, channels, thermal, nvp)
    for rail, mw in p.rail_power_mw.items():
        if rail in channels:
            board.set_rail(rail, mw)
    if p.power_mode is not None and p.power_mode in p.power_modes:
        board.set_power_mode(p.power_mode)
    return board
