"""A discrete GPU's power limit as the level ``dvfslab govern`` sets (``--knob power-limit``).

NVML's ``nvmlDeviceSetPowerManagementLimit`` (mW, root, within
``nvmlDeviceGetPowerManagementLimitConstraints``; NVML API reference) caps the board's power.
:class:`NvmlPowerLimit` offers the same face as a clock control to the governed job: the levels
(W, from the constraints' maximum down to the minimum in ``step_w`` steps — Zeus's
``GlobalPowerLimitOptimizer`` steps by 25 W by default), ``lock(w)`` and ``reset()`` (back to the
limit found at the start). Before its first change it writes the original limit to a state file
(``nvml-power-limit-<index>.json`` in the state directory); a run killed by SIGKILL leaves it,
and the next one restores that limit first (unless the pid that wrote it still runs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import atomic_write_json, pid_alive
from dvfslab.core.levels import check_level

#: Zeus's default power-limit step (W)
STEP_W = 25.0


def default_state_dir() -> Path:
    env = os.environ.get("DVFSLAB_STATE_DIR")
    return Path(env) if env else Path.home() / ".local" / "state" / "dvfslab"


class NvmlPowerLimit:
    """The power limit of NVML GPU ``index`` as levels in W (module doc)."""

    knob = "power_limit_w"

    def __init__(self, index: int = 0, *, step_w: float = STEP_W, state_dir=None, nvml=None):
        from dvfslab.hw.nvml import import_pynvml

        self.nvml = nvml or import_pynvml()
        self.index, self.step_w = index, float(step_w)
        n = self.nvml
        try:
            n.nvmlInit()
            self.handle = n.nvmlDeviceGetHandleByIndex(index)
            lo, hi = n.nvmlDeviceGetPowerManagementLimitConstraints(self.handle)
        except n.NVMLError as err:
            raise DvfsError(f"NVML GPU {index}: its power limit cannot be read ({err}); use --knob clock") from None
        self.min_w, self.max_w = lo / 1000.0, hi / 1000.0
        self.state_file = Path(state_dir or default_state_dir()) / f"nvml-power-limit-{index}.json"
        self.repaired = self._repair()
        self._original_mw: int | None = None

    def _repair(self) -> str:
        """Restore the limit a killed run left (its state file), unless its pid still runs."""
        try:
            held = json.loads(self.state_file.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return ""
        if pid_alive(int(held.get("pid", -1))) and int(held["pid"]) != os.getpid():
            raise DvfsError(f"{self.state_file}: pid {held['pid']} is changing GPU {self.index}'s power limit; "
                            "wait for it or stop it")
        self._set_mw(int(held["original_mw"]))
        self.state_file.unlink(missing_ok=True)
        return f"restored the power limit a killed run left: {held['original_mw'] / 1000:g} W"

    def levels_mhz(self) -> list[float]:
        """The limits, W (named as a clock control's levels), ascending."""
        out, w = [], self.max_w
        while w >= self.min_w - 1e-9:
            out.append(round(w, 3))
            w -= self.step_w
        return sorted(out)

    def _set_mw(self, mw: int) -> None:
        try:
            self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, int(mw))
        except self.nvml.NVMLError as err:
            raise DvfsError(f"NVML GPU {self.index}: cannot set the power limit to {mw / 1000:g} W ({err}); it needs "
                            "root (sudo)") from None

    def lock(self, level_w: float, nearest: bool = False) -> None:
        w = check_level(level_w, self.levels_mhz(), nearest=nearest)
        if self._original_mw is None:
            self._original_mw = int(self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle))
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.state_file, {"pid": os.getpid(), "index": self.index,
                                                "original_mw": self._original_mw})
        self._set_mw(int(round(w * 1000)))

    def reset(self) -> None:
        if self._original_mw is not None:
            self._set_mw(self._original_mw)
            self._original_mw = None
            self.state_file.unlink(missing_ok=True)

    def other_clocks(self) -> dict:
        return {}

    def restored_line(self) -> str:
        now = self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle) / 1000.0
        return f"power limit restored: {now:g} W"
