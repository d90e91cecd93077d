"""Which Jetson this is: the device-tree model, the L4T / JetPack release, the board family.

The facts about each family live in one record per family (:mod:`dvfslab.core.boards`); this
module reads the board's own files and matches them against those records. The same rail
names mean different things on different boards (Xavier NX and Orin NX both call their rails
``VDD_IN`` / ``VDD_CPU_GPU_CV`` / ``VDD_SOC``), so the family comes from the device-tree model
first (:func:`board_family`); only a family whose layout comes from a real board's dumps is
``verified``, and :func:`support_note` says "untested" for the others and for a release the
verified family does not run.
"""

from __future__ import annotations

import re

from dvfslab.core import boards
from dvfslab.hw.jetson.sysfs import SysfsIO

UNKNOWN_FAMILY = "unknown board (sum of all rails)"
MODEL_FILES = ("proc/device-tree/model", "sys/firmware/devicetree/base/model")
#: device-tree files that name the module's part number (``nvidia,p3768-0000+p3767-0000``, ``3767:0000``)
PART_FILES = ("proc/device-tree/compatible", "proc/device-tree/nvidia,boardids")
RELEASE_FILE = "etc/nv_tegra_release"


def board_model(io: SysfsIO) -> str | None:
    """The device-tree model string (``NVIDIA Jetson AGX Orin Developer Kit``), if present."""
    for rel in MODEL_FILES:
        if io.exists(rel):
            return io.read_text(rel) or None
    return None


def board_module(io: SysfsIO) -> boards.Board | None:
    """The module record (:mod:`dvfslab.core.jetson_modules`) of the part number the device tree
    names, as jetson-stats identifies modules; None when no file names a known one."""
    for rel in PART_FILES:
        if io.exists(rel):
            module = boards.module_for(io.read_text(rel))
            if module is not None:
                return module
    return None


def jetpack_release(io: SysfsIO) -> str | None:
    """``L4T R36.3.0 (JetPack 6)`` from ``etc/nv_tegra_release``, if present."""
    if not io.exists(RELEASE_FILE):
        return None
    text = io.read_text(RELEASE_FILE)
    m = re.search(r"R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    if not m:
        return text.splitlines()[0] if text else None
    major, rev = m.group(1), m.group(2)
    jp = boards.l4t_to_jetpack().get(major)
    return f"L4T R{major}.{rev}" + (f" (JetPack {jp})" if jp else "")


def board_family(rails, model: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(family, rails summed as "CPU + GPU"): by the model when it names a known family whose
    total rails are present, else by the rail names; all rails when neither matches (and on a
    family whose rail meanings are unknown, such as Thor)."""
    present = set(rails)
    low = (model or "").lower()
    for fam in boards.families():
        if any(w in low for w in fam.model_words) and set(fam.total_rails) <= present:
            return fam.name, fam.total_rails or tuple(rails)
    matches = [fam for fam in boards.families() if fam.total_rails and set(fam.total_rails) <= present]
    if not matches:
        return UNKNOWN_FAMILY, tuple(rails)
    same = [f.name for f in matches if f.total_rails == matches[0].total_rails]
    if len(same) > 1:  # Orin NX / Nano and Xavier NX rails look alike without the model
        return f"{' or '.join(same)} (same rail names; model unknown)", matches[0].total_rails
    return matches[0].name, matches[0].total_rails


def support_note(family: str, jetpack: str | None = None) -> str | None:
    """One line for ``dvfslab devices`` / ``doctor`` when the family, or its release (the
    ``L4T R..`` of :func:`jetpack_release`), is untested; else None."""
    known = {fam.name: fam for fam in boards.families()}
    fam = known.get(family)
    if fam is None or not fam.verified:
        return (f"untested: dvfslab is written against {_verified_names()}; the {family} rail layout "
                "comes from public documentation only (check which rails make CPU+GPU)")
    m = re.search(r"\bR(\d+)", jetpack or "")
    if m and m.group(1) not in fam.l4t_majors:
        return f"untested: dvfslab has not been run on {jetpack}"
    return None


def _verified_names() -> str:
    return " and ".join(f.name for f in boards.families() if f.verified) or "no board"


__all__ = ["UNKNOWN_FAMILY", "board_family", "board_model", "jetpack_release", "support_note"]
