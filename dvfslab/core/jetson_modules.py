"""One record per Jetson module: what the hardware code, the fakes and the twin are built from.

A :class:`Board` is one module (the part number jetson-stats identifies it by, e.g.
``p3767-0000`` = Orin NX 16GB): its GPU, EMC and CPU tables, its power-monitor rails and which
loads each one feeds (a shared rail such as the Orin NX's ``VDD_CPU_GPU_CV`` feeds the CPU *and*
the GPU), the rails that make its "CPU + GPU" total, its nvpmodel modes (GPU cap and TPC mask,
CPU cores online and their cap, EMC cap; the first mode is the module's top mode) and its
always-on loads. The family record (:mod:`dvfslab.core.boards`) keeps what detection and the
monitors' channel layout need; a module names its family and its rails must be the family's.

A record is checked when it is built (:meth:`Board.__post_init__`): a load fed by two monitored
rails, a rail listed twice, a total without the GPU or CPU, a mode cap that is not a level of its
table (GPU, EMC) or outside the CPU table's span (cpufreq resolves a cap to the highest level at
or below it), an unknown part number format: each is refused in one line naming the record.
Sources of every value: docs/hardware.md, "Module records"; *unverified* there means unverified here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dvfslab.core.errors import DvfsError

#: what a rail can feed: the GPU (its TPCs and clock tree), the rest of the SoC (memory controller,
#: fabric), the CPU clusters, the vision accelerators, the DRAM, the board's 5 V system supply, and
#: ``module``: an input rail that reads every load of the module (``VDD_IN``)
LOADS = ("gpu", "soc", "cpu", "cv", "dram", "sys", "module")
_PART = re.compile(r"^p\d{4}-\d{4}$")


class BoardRecordError(DvfsError):
    """A module record that contradicts itself (refused when built)."""


@dataclass(frozen=True)
class Rail:
    """One power-monitor channel: its label and the loads it feeds (``("module",)``: an input rail)."""

    name: str
    feeds: tuple[str, ...]

    @property
    def is_input(self) -> bool:
        return "module" in self.feeds


@dataclass(frozen=True)
class ModeCaps:
    """One nvpmodel mode as its configuration states it (None: no cap / every core)."""

    id: int
    name: str
    gpu_max_mhz: float | None = None
    tpc_pg_mask: int = 0  # one bit per power-gated TPC (bits above the GPU's TPCs mean nothing)
    cpu_online: int | None = None
    cpu_max_mhz: float | None = None
    emc_max_mhz: float | None = None

    def tpcs_on(self, n_tpc: int) -> int:
        return n_tpc - bin(self.tpc_pg_mask & ((1 << n_tpc) - 1)).count("1")


@dataclass(frozen=True)
class Board:
    """One Jetson module. ``key`` names it on the command line (``--board orin-nx-16gb``)."""

    key: str
    part_numbers: tuple[str, ...]  # as jetson-stats reads them (EEPROM / device-tree boardids)
    display_name: str
    family: str  # the :class:`~dvfslab.core.boards.BoardFamily` it belongs to
    gpu: str
    gpu_levels_mhz: tuple[float, ...]
    n_tpc: int
    emc_levels_mhz: tuple[float, ...]
    cpu_clusters: tuple[tuple[int, ...], ...]  # the cores of each cluster (one cpufreq policy each)
    cpu_max_mhz: float  # the clusters' top clock
    rails: tuple[Rail, ...]
    total_rails: tuple[str, ...]  # the rails of "CPU + GPU" (each summed once)
    modes: tuple[ModeCaps, ...]  # the module's top mode first
    cpu_levels_mhz: tuple[float, ...] = ()  # the cpufreq table (empty: not known)
    always_on: tuple[str, ...] = ()  # loads powered whatever the board does (held at their idle watts)
    unverified: str = ""  # what of this record comes from no primary source
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        def refuse(why: str) -> None:
            raise BoardRecordError(f"board record {self.key!r}: {why}")

        for part in self.part_numbers:
            if not _PART.match(part):
                refuse(f"part number {part!r} is not of the form p3767-0000")
        for name, table in (("GPU", self.gpu_levels_mhz), ("EMC", self.emc_levels_mhz), ("CPU", self.cpu_levels_mhz)):
            if list(table) != sorted(set(table)):
                refuse(f"its {name} table {table} is not strictly ascending")
        if not self.gpu_levels_mhz or not self.emc_levels_mhz:
            refuse("it needs its GPU and EMC tables")
        if self.cpu_levels_mhz and abs(self.cpu_levels_mhz[-1] - self.cpu_max_mhz) > 0.05:
            refuse(f"its CPU table tops at {self.cpu_levels_mhz[-1]:g} MHz, not its top clock {self.cpu_max_mhz:g}")
        names = [r.name for r in self.rails]
        if len(set(names)) != len(names):
            refuse(f"a rail is listed twice: {names}")
        fed: dict[str, str] = {}
        for rail in self.rails:
            for load in rail.feeds:
                if load not in LOADS:
                    refuse(f"rail {rail.name} feeds {load!r}, not one of {', '.join(LOADS)}")
                if load != "module" and load in fed:
                    refuse(f"load {load!r} is fed by two rails, {fed[load]} and {rail.name}: it would be summed twice")
                fed.setdefault(load, rail.name)
        if len(set(self.total_rails)) != len(self.total_rails) or not set(self.total_rails) <= set(names):
            refuse(f"its total {self.total_rails} must name each of its rails {names} at most once")
        in_total = {load for r in self.rails if r.name in self.total_rails for load in r.feeds}
        if "module" in in_total or not {"gpu", "cpu"} <= in_total:
            refuse(f"its total {self.total_rails} must feed the GPU and the CPU and hold no input rail")
        if not self.modes:
            refuse("it has no power mode")
        if len({m.id for m in self.modes}) != len(self.modes):
            refuse(f"two modes share an id: {[m.id for m in self.modes]}")
        for m in self.modes:
            self._check_mode(m, refuse)

    def _check_mode(self, m: ModeCaps, refuse) -> None:
        where = f"mode {m.id} ({m.name})"
        if m.gpu_max_mhz is not None and not _on(m.gpu_max_mhz, self.gpu_levels_mhz, 0.5):
            refuse(f"{where} caps the GPU at {m.gpu_max_mhz:g} MHz, not one of its GPU levels {_fmt(self.gpu_levels_mhz)}")
        if m.emc_max_mhz is not None and not _on(m.emc_max_mhz, self.emc_levels_mhz, 0.5):
            refuse(f"{where} caps the EMC at {m.emc_max_mhz:g} MHz, not one of its EMC levels {_fmt(self.emc_levels_mhz)}")
        low = self.cpu_levels_mhz[0] if self.cpu_levels_mhz else 0.0
        if m.cpu_max_mhz is not None and not low - 0.05 <= m.cpu_max_mhz <= self.cpu_max_mhz + 0.05:
            refuse(f"{where} caps the CPU at {m.cpu_max_mhz:g} MHz, outside its CPU table {low:g}-{self.cpu_max_mhz:g} MHz")
        if m.cpu_online is not None and not 1 <= m.cpu_online <= self.n_cpu:
            refuse(f"{where} puts {m.cpu_online} CPU cores online; the module has {self.n_cpu}")
        if m.tpcs_on(self.n_tpc) < 1:
            refuse(f"{where} gates every one of its {self.n_tpc} TPCs (TPC_PG_MASK {m.tpc_pg_mask})")

    # -- what the record answers ----------------------------------------------------------------
    @property
    def n_cpu(self) -> int:
        return sum(len(c) for c in self.cpu_clusters)

    @property
    def part_number(self) -> str:
        return self.part_numbers[0]

    @property
    def rail_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rails)

    def rail_of(self, load: str) -> str | None:
        """The monitored rail that feeds ``load`` (not the input rail; None: only the input rail reads it)."""
        return next((r.name for r in self.rails if load in r.feeds and not r.is_input), None)

    @property
    def total_loads(self) -> tuple[str, ...]:
        """The loads the "CPU + GPU" total reads, each once."""
        return tuple(load for r in self.rails if r.name in self.total_rails for load in r.feeds)

    @property
    def board_rails(self) -> tuple[str, ...]:
        """The rails whose sum is the whole module: its input rail alone when it has one (``VDD_IN``
        already reads every other rail's load), else every rail."""
        inputs = tuple(r.name for r in self.rails if r.is_input)
        return inputs or self.rail_names

    def total_w(self, rail_w: Mapping[str, float]) -> float:
        """The "CPU + GPU" total of one reading of every rail: each total rail summed once."""
        return float(sum(rail_w[r] for r in self.total_rails))


def _on(value: float, table, tol: float) -> bool:
    return any(abs(value - t) <= tol for t in table)


def _fmt(table) -> str:
    return ", ".join(f"{t:g}" for t in table)


# ------------------------------------------------------------------------------------------------
# The records (sources: docs/hardware.md, "Module records")
# ------------------------------------------------------------------------------------------------

#: the AGX Orin's GPU levels (MHz): its devfreq ``available_frequencies``; the paper's table
ORIN_LEVELS_MHZ = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
#: the AGX Xavier's GPU levels (MHz)
XAVIER_LEVELS_MHZ = (114.75, 216.75, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25,
                     1032.75, 1198.5, 1236.75, 1338.75, 1377.0)
#: the Orin EMC levels (MHz): tegrastats ``EMC_FREQ`` readings of AGX Orin boards (*unverified* as complete)
ORIN_EMC_LEVELS_MHZ = (204.0, 665.6, 2133.0, 3199.0)
#: the Orin CPU clusters' cpufreq grid: 115.2 MHz in steps of 76.8 MHz (public Orin DVFS studies' tables)
_ORIN_CPU_GRID = tuple(round(115.2 + 76.8 * k, 1) for k in range(28))
ORIN_CPU_LEVELS_MHZ = _ORIN_CPU_GRID + (2201.6,)  # AGX Orin: the grid to 2188.8, then 2201.6
ORIN_NX_CPU_LEVELS_MHZ = _ORIN_CPU_GRID[:25] + (1984.0,)  # to 1958.4, then 1984 (*unverified*)

_AGX_ORIN_RAILS = (Rail("VDD_GPU_SOC", ("gpu", "soc")), Rail("VDD_CPU_CV", ("cpu", "cv")),
                   Rail("VIN_SYS_5V0", ("sys",)), Rail("VDDQ_VDD2_1V8AO", ("dram",)))
_ORIN_NX_RAILS = (Rail("VDD_IN", ("module",)), Rail("VDD_CPU_GPU_CV", ("cpu", "gpu", "cv")),
                  Rail("VDD_SOC", ("soc",)))
_JETSON_STATS = ("rbonghi/jetson_stats, jtop/core/jetson_variables.py, MODULE_NAME_TABLE "
                 "(part number -> module name)")

AGX_ORIN_64GB = Board(
    key="agx-orin-64gb", part_numbers=("p3701-0005", "p3701-0000"), display_name="Jetson AGX Orin 64GB",
    family="AGX Orin", gpu="ga10b", gpu_levels_mhz=ORIN_LEVELS_MHZ, n_tpc=8, emc_levels_mhz=ORIN_EMC_LEVELS_MHZ,
    cpu_clusters=((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)), cpu_max_mhz=2201.6, cpu_levels_mhz=ORIN_CPU_LEVELS_MHZ,
    rails=_AGX_ORIN_RAILS, total_rails=("VDD_GPU_SOC", "VDD_CPU_CV"),
    modes=(ModeCaps(0, "MAXN", None, 0, 12, None, None),
           ModeCaps(1, "MODE_15W", 408.0, 248, 4, 1113.6, 2133.0),
           ModeCaps(2, "MODE_30W", 612.0, 240, 8, 1728.0, None),
           ModeCaps(3, "MODE_50W", 816.0, 0, 12, 1497.6, None)),
    always_on=("sys", "dram"),
    sources={"part_numbers": _JETSON_STATS + "; p3701-0000 (the developer kit's module) gets the same "
                             "nvpmodel table from NVIDIA's nvpower.sh",
             "modes": "the real `nvpmodel -p --verbose` dump of a p3701-0005 (dvfslab/sim/data/, branes-ai/graphs)"},
)

ORIN_NX_16GB = Board(
    key="orin-nx-16gb", part_numbers=("p3767-0000",), display_name="Jetson Orin NX 16GB", family="Orin NX / Orin Nano",
    gpu="ga10b", gpu_levels_mhz=ORIN_LEVELS_MHZ[:7], n_tpc=4, emc_levels_mhz=ORIN_EMC_LEVELS_MHZ,
    cpu_clusters=((0, 1, 2, 3), (4, 5, 6, 7)), cpu_max_mhz=1984.0, cpu_levels_mhz=ORIN_NX_CPU_LEVELS_MHZ,
    rails=_ORIN_NX_RAILS, total_rails=("VDD_CPU_GPU_CV", "VDD_SOC"),
    modes=(ModeCaps(0, "MAXN", None, 240, 8, None, None),
           ModeCaps(2, "15W", 612.0, 252, 4, 1420.8, None),
           ModeCaps(3, "25W", 408.0, 240, 8, 1497.6, None)),
    always_on=("sys", "dram"),
    unverified="the modes (a user's `nvpmodel` notes of a p3767-0000 on L4T 36.5, not the conf file; the "
               "10W mode and every EMC cap unknown), the EMC levels (the AGX Orin's) and the CPU table below 1984 MHz",
    sources={"part_numbers": _JETSON_STATS, "rails": "tegrastats of Orin NX / Nano: VDD_IN, VDD_CPU_GPU_CV, VDD_SOC"},
)

ORIN_NX_8GB = Board(
    key="orin-nx-8gb", part_numbers=("p3767-0001",), display_name="Jetson Orin NX 8GB", family="Orin NX / Orin Nano",
    gpu="ga10b", gpu_levels_mhz=ORIN_LEVELS_MHZ[:5] + (765.0,), n_tpc=4, emc_levels_mhz=ORIN_EMC_LEVELS_MHZ,
    cpu_clusters=((0, 1, 2, 3), (4, 5)), cpu_max_mhz=1984.0, cpu_levels_mhz=ORIN_NX_CPU_LEVELS_MHZ,
    rails=_ORIN_NX_RAILS, total_rails=("VDD_CPU_GPU_CV", "VDD_SOC"),
    modes=(ModeCaps(0, "MAXN", None, 0, 6, None, None),),
    always_on=("sys", "dram"),
    unverified="everything but the part number and the rails: the datasheet's top clocks (GPU 765 MHz, 6 cores "
               "at 1984 MHz), the GPU levels below the top assumed on the AGX Orin's 102 MHz grid, MAXN only",
    sources={"part_numbers": _JETSON_STATS},
)

ORIN_NANO_8GB = Board(
    key="orin-nano-8gb", part_numbers=("p3767-0003", "p3767-0005"), display_name="Jetson Orin Nano 8GB",
    family="Orin NX / Orin Nano", gpu="ga10b", gpu_levels_mhz=ORIN_LEVELS_MHZ[:4] + (624.75,), n_tpc=4,
    emc_levels_mhz=(204.0, 665.6, 2133.0), cpu_clusters=((0, 1, 2, 3), (4, 5)), cpu_max_mhz=1510.4,
    rails=_ORIN_NX_RAILS, total_rails=("VDD_CPU_GPU_CV", "VDD_SOC"),
    modes=(ModeCaps(0, "15W", None, 0, 6, None, None),),
    always_on=("sys", "dram"),
    unverified="everything but the part numbers and the rails: the datasheet's top clocks (GPU 625 MHz, 6 cores "
               "at 1510.4 MHz, LPDDR5 at 2133 MHz), the GPU levels below the top, the top (15W) mode only",
    sources={"part_numbers": _JETSON_STATS + " (p3767-0005: the developer kit's module)"},
)

AGX_XAVIER = Board(
    key="agx-xavier", part_numbers=("p2888-0001", "p2888-0004", "p2888-0005"), display_name="Jetson AGX Xavier",
    family="AGX Xavier", gpu="gv11b", gpu_levels_mhz=XAVIER_LEVELS_MHZ, n_tpc=4,
    emc_levels_mhz=(204.0, 665.6, 1600.0, 2133.0), cpu_clusters=((0, 1), (2, 3), (4, 5), (6, 7)), cpu_max_mhz=2265.6,
    rails=(Rail("GPU", ("gpu",)), Rail("CPU", ("cpu",)), Rail("SOC", ("soc",)), Rail("CV", ("cv",)),
           Rail("VDDRQ", ("dram",)), Rail("SYS5V", ("sys",))),
    total_rails=("GPU", "CPU"),
    modes=(ModeCaps(0, "MAXN", None, 0, 8, None, None), ModeCaps(3, "MODE_30W_ALL", 1032.75, 0, 8, 1200.0, None)),
    always_on=("soc", "cv", "sys", "dram"),
    unverified="the EMC levels, the CPU table (only its top known) and MODE_30W_ALL's caps (from the twin's "
               "earlier profile, not a conf file)",
    sources={"part_numbers": _JETSON_STATS, "rails": "tegrastats of an AGX Xavier (GPU CPU SOC CV VDDRQ SYS5V)"},
)

#: every module record, by key
BOARDS: dict[str, Board] = {b.key: b for b in (AGX_ORIN_64GB, ORIN_NX_16GB, ORIN_NX_8GB, ORIN_NANO_8GB, AGX_XAVIER)}


def board_named(key: str) -> Board:
    """The module record ``key`` (``orin-nx-16gb``); :class:`DvfsError` listing the known ones."""
    if key not in BOARDS:
        raise DvfsError(f"unknown board {key!r}; choose one of: {', '.join(BOARDS)}")
    return BOARDS[key]


def board_for_part(part_number: str | None) -> Board | None:
    """The module whose part number is ``part_number`` (``p3767-0000``; case and a ``-A0`` style
    revision suffix ignored); None when no record has it."""
    want = (part_number or "").strip().lower()[:10]
    return next((b for b in BOARDS.values() if want in b.part_numbers), None) if want else None


def part_numbers_in(text: str | None) -> tuple[str, ...]:
    """Module part numbers named in a device-tree ``compatible`` or ``nvidia,boardids`` text
    (``nvidia,p3768-0000+p3767-0000``, ``3767:0000``), in order, carrier boards included."""
    found = re.findall(r"p?(\d{4})[-:](\d{4})", text or "")
    return tuple(dict.fromkeys(f"p{a}-{b}" for a, b in found))


def board_for_compatible(text: str | None) -> Board | None:
    """The first module record a device-tree ``compatible`` text names (None: none)."""
    return next((b for b in map(board_for_part, part_numbers_in(text)) if b is not None), None)


__all__ = ["AGX_ORIN_64GB", "AGX_XAVIER", "BOARDS", "LOADS", "ORIN_CPU_LEVELS_MHZ", "ORIN_EMC_LEVELS_MHZ",
           "ORIN_LEVELS_MHZ", "ORIN_NANO_8GB", "ORIN_NX_16GB", "ORIN_NX_8GB", "XAVIER_LEVELS_MHZ", "Board",
           "BoardRecordError", "ModeCaps", "Rail", "board_for_compatible", "board_for_part", "board_named",
           "part_numbers_in"]
