"""The knob of a dataset: what its fixed-policy runs set (the GPU clock, a GPU power limit).

``meta.json`` names it (``"knob"``; absent: ``gpu_freq_mhz``); the runs.csv column holding each
run's level is the knob's name and the meta.json key listing its levels is ``table_key``. No
pandas here: the board side may read it.
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


KNOBS: dict[str, Knob] = {
    "gpu_freq_mhz": Knob("gpu_freq_mhz", "freq_table_mhz", "MHz", "GPU level", "GPU frequency"),
    "power_limit_w": Knob("power_limit_w", "power_limit_table_w", "W", "GPU power limit", "GPU power limit"),
}
DEFAULT_KNOB = "gpu_freq_mhz"


def get_knob(name: str | None = None) -> Knob:
    """The :class:`Knob` called ``name`` (``None``: the default, ``gpu_freq_mhz``)."""
    try:
        return KNOBS[name or DEFAULT_KNOB]
    except KeyError:
        raise DvfsError(f"unknown knob {name!r}; known: {', '.join(KNOBS)}") from None
