"""Jetson board families: everything dvfslab knows about one family, in one record.

A :class:`BoardFamily` holds what tells the family apart and what dvfslab needs to run on it:
the device-tree model strings that select it, the L4T releases it runs (L4T major -> JetPack
major), its GPU's devfreq names, its power monitor chip and rails (and which rails make the
paper's "CPU + GPU"), the BPMP counter of its GPU clock, its GPU load files and its GPU levels.
The Jetson backend (:mod:`dvfslab.hw.jetson`), NVML's Jetson test (:mod:`dvfslab.hw.nvml`), the
fakes (:mod:`dvfslab.testing.fake_sysfs`), the governors' default table and the twin
(:mod:`dvfslab.sim.profiles`) read :data:`FAMILIES` through the functions below, when called,
so a new family is one record here (a test adds one with ``monkeypatch.setattr``). Sources of
every value: docs/hardware.md; *unverified* there means unverified here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvfslab.core.jetson_modules import (  # noqa: F401  (the tables live with the module records)
    BOARDS,
    ORIN_EMC_LEVELS_MHZ,
    ORIN_LEVELS_MHZ,
    XAVIER_LEVELS_MHZ,
    Board,
    BoardRecordError,
)

#: the BPMP's counter of the GPU (GPC) clock in debugfs, Hz (read by tegrastats and jetson-stats)
GPC_PTO_COUNTER = "sys/kernel/debug/bpmp/debug/clk/nafll_gpc0/pto_counter"
#: the BPMP's debugfs clock of the memory controller (EMC): ``rate``, ``min_rate``, ``max_rate``
#: (Hz) and ``mrq_rate_locked`` (1: the rate is held by debugfs, 0: the BPMP's DVFS chooses it);
#: root only, as jetson_clocks and jetson-stats use it (docs/hardware.md, "Other clocks")
EMC_CLK_DIR = "sys/kernel/debug/bpmp/debug/clk/emc"
#: the EMC rates the BPMP offers (kHz, space separated; *unverified* on every release)
EMC_POSSIBLE_RATES = "sys/kernel/debug/bpmp/debug/emc/possible_rates"
#: the EMC cap nvpmodel writes for a power mode (Hz; 0: no cap)
EMC_ISO_CAP = "sys/kernel/nvpmodel_emc_cap/emc_iso_cap"
#: a devfreq node named ``<address>.gpu`` is the GPU whatever the family (JetPack 6, Nano)
GENERIC_GPU_NAMES = ("gpu",)
#: words of an NVML device name that mark a Jetson's integrated GPU, whatever the family
GENERIC_TEGRA_WORDS = ("tegra", "nvgpu", "jetson")

#: GPU load files (per-mille) when the devfreq node's own ``device/load`` is missing
LOAD_JP45 = "sys/devices/gpu.0/load"  # JetPack 4 / 5
LOAD_JP6 = "sys/devices/platform/bus@0/17000000.gpu/load"  # older JetPack 6 notes
LOAD_PLATFORM = "sys/devices/platform/gpu.0/load"


@dataclass(frozen=True)
class BoardFamily:
    """One Jetson family. ``rail_layout``: the power monitors as (i2c address, channel labels;
    ``None`` = an unlabeled channel); ``total_rails`` empty: the rails' meanings are unknown, so
    "CPU + GPU" is the sum of all rails. ``l4t_jetpack``: (L4T major, JetPack major) of each
    release the family runs. ``verified``: dvfslab's layout for it comes from a real board's
    dumps (else from public documentation only, and ``dvfslab devices`` says untested)."""

    name: str
    model_words: tuple[str, ...]  # lower-case words of the device-tree model that select it
    total_rails: tuple[str, ...]
    l4t_jetpack: tuple[tuple[str, str], ...]
    models: tuple[str, ...] = ()  # full device-tree model strings (the fakes write the first)
    gpu_names: tuple[str, ...] = ()  # devfreq node / of_node names of its GPU
    gpu_node_prefixes: tuple[str, ...] = ()  # devfreq node names starting so are its GPU
    monitor: str = "INA3221"
    rail_layout: tuple[tuple[str, tuple[str | None, ...]], ...] = ()
    bpmp_counter: str = GPC_PTO_COUNTER  # root-relative, Hz
    gpu_load_paths: tuple[str, ...] = ()
    levels_mhz: tuple[float, ...] = ()
    nvml_words: tuple[str, ...] = ()  # lower-case words of NVML's name for its GPU
    verified: bool = False
    emc_levels_mhz: tuple[float, ...] = ()  # EMC levels when the board does not list them

    @property
    def rails(self) -> tuple[str, ...]:
        """Every labelled rail of its monitors, in channel order (empty when not known)."""
        return tuple(label for _, labels in self.rail_layout for label in labels if label)

    @property
    def l4t_majors(self) -> tuple[str, ...]:
        return tuple(major for major, _ in self.l4t_jetpack)


#: first match wins (the model decides; see :func:`family_for_model`)
FAMILIES: tuple[BoardFamily, ...] = (
    BoardFamily("AGX Thor", ("thor",), (), (("38", "7"), ("39", "7")),
                models=("NVIDIA Jetson AGX Thor Developer Kit",), gpu_names=("gb10b",),
                gpu_node_prefixes=("gpu-gpc",), monitor="INA238", nvml_words=("thor",)),
    BoardFamily("AGX Orin", ("agx orin",), ("VDD_CPU_CV", "VDD_GPU_SOC"),
                (("34", "5"), ("35", "5"), ("36", "6")),
                models=("NVIDIA Jetson AGX Orin Developer Kit",), gpu_names=("ga10b",),
                rail_layout=(("1-0040", ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")),
                             ("1-0041", (None, "VDDQ_VDD2_1V8AO", None))),
                gpu_load_paths=(LOAD_JP45, LOAD_JP6, LOAD_PLATFORM), levels_mhz=ORIN_LEVELS_MHZ,
                nvml_words=("orin",), verified=True, emc_levels_mhz=ORIN_EMC_LEVELS_MHZ),
    BoardFamily("Orin NX / Orin Nano", ("orin nx", "orin nano"), ("VDD_CPU_GPU_CV", "VDD_SOC"),
                (("35", "5"), ("36", "6")),
                models=("NVIDIA Jetson Orin NX Engineering Reference Developer Kit",),
                gpu_names=("ga10b",),
                rail_layout=(("1-0040", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC")),),
                gpu_load_paths=(LOAD_JP45, LOAD_JP6, LOAD_PLATFORM),
                levels_mhz=ORIN_LEVELS_MHZ[:7], nvml_words=("orin",)),  # Orin NX 16GB: 306 ... 918
    BoardFamily("Xavier NX", ("xavier nx", "xavier-nx", "p3668"), ("VDD_CPU_GPU_CV", "VDD_SOC"),
                (("32", "4"), ("35", "5")), gpu_names=("gv11b",),
                rail_layout=(("1-0040", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC")),),
                gpu_load_paths=(LOAD_JP45,), nvml_words=("xavier",)),
    BoardFamily("AGX Xavier", ("agx xavier", "jetson-agx", "p2888"), ("CPU", "GPU"),
                (("32", "4"), ("35", "5")), models=("Jetson-AGX",), gpu_names=("gv11b",),
                rail_layout=(("1-0040", ("GPU", "CPU", "SOC")), ("1-0041", ("CV", "VDDRQ", "SYS5V"))),
                gpu_load_paths=(LOAD_JP45,), levels_mhz=XAVIER_LEVELS_MHZ, nvml_words=("xavier",)),
    BoardFamily("TX2", ("tx2", "quill"), ("VDD_SYS_CPU", "VDD_SYS_GPU"), (("32", "4"),),
                gpu_names=("gp10b",), gpu_load_paths=(LOAD_JP45,)),
    BoardFamily("Nano", ("jetson nano", "jetson-nano", "p3450"), ("POM_5V_CPU", "POM_5V_GPU"),
                (("32", "4"),), gpu_load_paths=(LOAD_JP45,)),
)


def check_module_records(records=None) -> None:
    """Each module record against its family: the family exists, every rail of the module is one
    of the family's monitor channels, and its total is the family's; a family's GPU levels (when it
    states them) are one of its modules' tables. Refused in one line."""
    records = list(records if records is not None else BOARDS.values())
    for fam in FAMILIES:
        mine = [b for b in records if b.family == fam.name]
        if fam.levels_mhz and mine and not any(b.gpu_levels_mhz == fam.levels_mhz for b in mine):
            raise BoardRecordError(f"board family {fam.name!r}: its GPU levels are none of its modules' "
                                   f"({', '.join(b.key for b in mine)})")
    for b in records:
        try:
            fam = family_named(b.family)
        except KeyError as err:
            raise BoardRecordError(f"board record {b.key!r}: {err.args[0]}") from None
        if fam.rails and not set(b.rail_names) <= set(fam.rails):
            raise BoardRecordError(f"board record {b.key!r}: rails {b.rail_names} are not all channels of the "
                                   f"{fam.name} monitors {fam.rails}")
        if fam.total_rails and set(fam.total_rails) != set(b.total_rails):
            raise BoardRecordError(f"board record {b.key!r}: total {b.total_rails} is not the {fam.name} "
                                   f"family's {fam.total_rails}")


def module_for(compatible: str | None) -> Board | None:
    """The module record of a board by the part number its device-tree ``compatible`` (or
    ``nvidia,boardids``) text names, as jetson-stats identifies modules; None when no record has
    it. The model string is not used: ``NVIDIA Jetson Orin NX ... Developer Kit`` cannot tell an
    Orin NX 16GB (p3767-0000) from an 8GB (p3767-0001) — :func:`family_for_model` gives the family."""
    from dvfslab.core.jetson_modules import board_for_compatible

    return board_for_compatible(compatible)


def families() -> tuple[BoardFamily, ...]:
    """Every known family, in matching order (read when called, so a test may add one)."""
    return FAMILIES


def family_named(name: str) -> BoardFamily:
    """The family called ``name`` (``"AGX Orin"``); ``KeyError`` listing the known ones."""
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise KeyError(f"no board family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


def family_for_model(model: str | None) -> BoardFamily | None:
    """The first family whose model words appear in the device-tree ``model`` (None: unknown)."""
    low = (model or "").lower()
    return next((fam for fam in FAMILIES if any(w in low for w in fam.model_words)), None) if low else None


def _union(values) -> tuple:
    return tuple(dict.fromkeys(values))


def l4t_to_jetpack() -> dict[str, str]:
    """L4T major release -> JetPack major version, over every family's releases."""
    return {major: jp for fam in FAMILIES for major, jp in fam.l4t_jetpack}


def gpu_devfreq_names() -> tuple[str, ...]:
    """Devfreq node / ``of_node`` names of Jetson GPUs (every family's, then the generic one)."""
    return _union([n for fam in FAMILIES for n in fam.gpu_names] + list(GENERIC_GPU_NAMES))


def gpu_node_prefixes() -> tuple[tuple[str, str], ...]:
    """(devfreq node name prefix, GPU name) for families whose GPU node has no known suffix."""
    return tuple((p, fam.gpu_names[0] if fam.gpu_names else "gpu")
                 for fam in FAMILIES for p in fam.gpu_node_prefixes)


def gpu_load_paths() -> tuple[str, ...]:
    """Fixed GPU load files, tried in order when the devfreq node's own ``device/load`` is missing."""
    return _union(p for fam in FAMILIES for p in fam.gpu_load_paths)


def tegra_words() -> tuple[str, ...]:
    """Words of an NVML device name that mark a Jetson GPU (``Orin (nvgpu)``, ``... Thor``)."""
    return _union(list(GENERIC_TEGRA_WORDS) + [w for fam in FAMILIES for w in fam.nvml_words])


def emc_levels_mhz(model: str | None) -> tuple[float, ...]:
    """The EMC levels of the family ``model`` names (empty when unknown)."""
    fam = family_for_model(model)
    return fam.emc_levels_mhz if fam is not None else ()


def bpmp_counter(model: str | None) -> str:
    """The GPU clock counter of the family ``model`` names (the GPC counter when unknown)."""
    fam = family_for_model(model)
    return fam.bpmp_counter if fam is not None else GPC_PTO_COUNTER


__all__ = ["BOARDS", "Board", "BoardRecordError", "check_module_records", "module_for", "EMC_CLK_DIR", "EMC_ISO_CAP", "EMC_POSSIBLE_RATES", "FAMILIES", "GPC_PTO_COUNTER",
           "ORIN_EMC_LEVELS_MHZ", "ORIN_LEVELS_MHZ", "XAVIER_LEVELS_MHZ", "BoardFamily", "bpmp_counter",
           "emc_levels_mhz", "families", "family_for_model", "family_named", "gpu_devfreq_names",
           "gpu_load_paths", "gpu_node_prefixes", "l4t_to_jetpack", "tegra_words"]

check_module_records()
