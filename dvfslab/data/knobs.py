"""The knob of a dataset: what its fixed-policy runs set (the GPU clock, a GPU power limit, or
a joint setting of several clocks).

``meta.json`` names it (``"knob"``; absent: ``gpu_freq_mhz``); the runs.csv column holding each
run's level is the knob's name and the meta.json key listing its levels is ``table_key``.

A **joint** dataset sets several clocks at once (issue #32): ``meta.json`` lists them
(``"knobs": ["gpu_freq_mhz", "emc_freq_mhz"]``) and the table of settings that were run
(``"settings": [[306, 2133], [306, 3199], ...]``, each a tuple in the order of ``knobs``). Its
knob is :data:`SETTING` and a run's level is the 0-based *index* of its setting in that table:
the level-indexed machinery (the Sweep, FFG, the oracle, the tree, voi, the replay) then works
unchanged, one level per setting. A single-knob dataset is the one-knob case and loads as before.
No pandas here: the board side may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvfslab.core.errors import DvfsError


@dataclass(frozen=True)
class Knob:
    """What a fixed-policy run sets: its runs.csv column (``name``), the meta.json key listing
    its levels (``table_key``), its unit, the label of an axis of its levels and the quantity
    it sets (for titles)."""

    name: str
    table_key: str
    unit: str
    label: str
    quantity: str

    @property
    def axis_label(self) -> str:
        """``"GPU level (MHz)"``, ``"GPU power limit (W)"``: the label of an axis of levels."""
        return f"{self.label} ({self.unit})"

    @property
    def suffix(self) -> str:
        """The unit suffix of ``name``: ``"mhz"``, ``"w"`` (for summary keys such as ``sweet_spot_mhz``)."""
        return self.name.rsplit("_", 1)[1]

    def format(self, level: float) -> str:
        """``"714 MHz"``, ``"150 W"``."""
        return f"{level:g} {self.unit}"


class SettingKnob(Knob):
    """The knob of a joint dataset: a level is the index of a setting in meta.json ``settings``."""

    def format(self, level: float) -> str:
        """``"setting 3"``."""
        return f"setting {level:g}"

    @property
    def suffix(self) -> str:
        return "setting"


#: the joint knob's name: the runs.csv column the loader derives (a run's setting index)
SETTING = "setting"
KNOBS: dict[str, Knob] = {
    "gpu_freq_mhz": Knob("gpu_freq_mhz", "freq_table_mhz", "MHz", "GPU level", "GPU frequency"),
    "power_limit_w": Knob("power_limit_w", "power_limit_table_w", "W", "GPU power limit", "GPU power limit"),
    SETTING: SettingKnob(SETTING, "settings", "index", "joint setting", "joint clock setting"),
}
DEFAULT_KNOB = "gpu_freq_mhz"
#: the clocks a joint setting may combine: short name (``--knob gpu=...``) -> runs.csv column
JOINT_KNOBS: dict[str, str] = {"gpu": "gpu_freq_mhz", "emc": "emc_freq_mhz", "cpu": "cpu_freq_mhz"}
#: the joint clocks' labels, by runs.csv column
JOINT_LABELS: dict[str, str] = {"gpu_freq_mhz": "GPU", "emc_freq_mhz": "EMC", "cpu_freq_mhz": "CPU"}


def format_setting(knobs: tuple[str, ...] | list[str], setting) -> str:
    """``"GPU 714 MHz × EMC 2133 MHz"``: one joint setting in words."""
    return " × ".join(f"{JOINT_LABELS.get(k, k)} {float(v):g} MHz" for k, v in zip(knobs, setting, strict=True))


def setting_mhz(knobs: tuple[str, ...] | list[str], setting) -> dict[str, float]:
    """``{"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}``: one joint setting by its clocks' names,
    in MHz (what figures and ``summary.json`` name a joint level by, not its index)."""
    if len(knobs) != len(setting):
        raise DvfsError(f"a setting of {len(knobs)} clocks ({', '.join(knobs)}) needs {len(knobs)} values, "
                        f"got {list(setting)!r}")
    return {k: float(v) for k, v in zip(knobs, setting, strict=True)}


def get_knob(name: str | None = None) -> Knob:
    """The :class:`Knob` called ``name`` (``None``: the default, ``gpu_freq_mhz``)."""
    try:
        return KNOBS[name or DEFAULT_KNOB]
    except KeyError:
        raise DvfsError(f"unknown knob {name!r}; known: {', '.join(KNOBS)}") from None
