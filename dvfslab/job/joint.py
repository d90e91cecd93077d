"""A joint model's settings live: the GPU, EMC and CPU clocks set together (issue 37).

A governor learned on a joint dataset decides a *setting*: its level is the index of a setting in
the dataset's meta.json ``settings`` (:data:`dvfslab.data.knobs.SETTING`). Its saved file
carries the settings in its ``board`` record (``"knobs": ["gpu_freq_mhz", "emc_freq_mhz",
"cpu_freq_mhz"], "settings": [[306, 2133, 729.6], ...]``, :func:`dvfslab.governors.files.board_of`),
so that the live runner maps an index to clocks:

* :func:`joint_settings`: the knobs and settings a governor's file carries (a joint model saved
  without them is refused: rerun the pipeline);
* :func:`check_joint`: **before the job starts**, every setting of the table is one this board can
  set and read back — the GPU level in its table and under the power mode's cap, each other clock
  offered by the backend, pinnable here (``support()``), read back (``read_mhz()``), the value one
  of its levels and under its cap; else a :class:`~dvfslab.core.errors.DvfsError` naming the
  setting, the clock and the fix, with nothing changed;
* :func:`joint_board`: a :class:`~dvfslab.job.board.JobBoard` whose levels are the setting
  indices; locking one locks the GPU (``ClockControl.lock``) and pins the other clocks
  (``PinnedClock.pin``: written, read back and verified; a clock that does not hold its level
  restores every clock and raises) — the same lock / verify / restore and state file as
  ``dvfslab clocks`` and a joint sweep; ``reset`` gives every clock back, and a run killed with
  SIGKILL leaves the state file the next start repairs from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.data.knobs import JOINT_KNOBS, JOINT_LABELS, SETTING, format_setting
from dvfslab.governors.base import Governor
from dvfslab.governors.errors import GovernorError
from dvfslab.hw.base import format_mhz
from dvfslab.job.board import JobBoard

#: runs.csv column -> the clock's short name (``gpu_freq_mhz`` -> ``gpu``)
SHORT = {col: name for name, col in JOINT_KNOBS.items()}
#: a setting's value is one of a clock's levels when within this (MHz; tables print rounded)
TOL_MHZ = 0.5


def is_joint(governor: Governor) -> bool:
    return getattr(governor, "knob_", None) == SETTING


def joint_settings(governor: Governor) -> tuple[tuple[str, ...], list[tuple[float, ...]]]:
    """``(knobs, settings)`` of a joint model, from its file's ``board`` record (module doc)."""
    board = getattr(governor, "board_", None) or getattr(getattr(governor, "prior_", None), "board_", None) or {}
    knobs, settings = board.get("knobs"), board.get("settings")
    if not knobs or not settings:
        raise GovernorError(f"{governor.name}: a joint model decides the index of a setting, and its file records no "
                            "settings (\"board\": {\"knobs\", \"settings\"}): rerun `dvfslab pipeline` with this dvfslab")
    unknown = [k for k in knobs if k not in SHORT]
    if unknown:
        raise GovernorError(f"{governor.name}: its settings name {', '.join(unknown)}; dvfslab govern sets "
                            + ", ".join(SHORT))
    rows = [tuple(float(v) for v in s) for s in settings]
    if any(len(s) != len(knobs) for s in rows):
        raise GovernorError(f"{governor.name}: each of its settings must hold {len(knobs)} values ({', '.join(knobs)})")
    return tuple(knobs), rows


def _tables(clocks) -> dict[str, tuple[str, list[float], float | None, Any]]:
    """Per clock: ``(label, levels, cap or None, PinnedClock or None for the GPU)``; a clock that
    cannot be set or read back here is a :class:`DvfsError`."""
    out: dict[str, tuple[str, list[float], float | None, Any]] = {}
    mode = clocks.power_mode() if hasattr(clocks, "power_mode") else None
    out["gpu"] = ("GPU", list(clocks.levels_mhz()), getattr(mode, "gpu_max_mhz", None), None)
    for name, clock in clocks.other_clocks().items():
        out[name] = (clock.label, list(clock.levels_mhz()), None, clock)
    return out


def check_joint(clocks, knobs: Sequence[str], settings: Sequence[Sequence[float]], board_name: str = "this board"
                ) -> None:
    """Every setting can be set and read back on ``clocks`` (module doc); raises before anything
    is changed."""
    tables = _tables(clocks)
    for knob in knobs:
        name = SHORT[knob]
        if name not in tables:
            raise DvfsError(f"the joint model sets the {JOINT_LABELS[knob]} clock; {board_name} cannot set it "
                            "(pinning the EMC and the CPU clusters is Jetson-only): refused before the job starts")
        clock = tables[name][3]
        if clock is None:
            continue
        why = clock.support()
        if why is not None:
            raise DvfsError(f"the joint model sets the {clock.label}, which cannot be pinned here: {why}")
        if clock.read_mhz() is None:
            raise DvfsError(f"the joint model sets the {clock.label}, which cannot be read back here: a setting "
                            "not read back is not applied (refused before the job starts)")
        tables[name] = (*tables[name][:2], clock.max_allowed_mhz(), clock)
    for i, setting in enumerate(settings):
        for knob, value in zip(knobs, setting, strict=True):
            label, levels, cap, _ = tables[SHORT[knob]]
            where = f"joint setting {i} ({format_setting(knobs, setting)})"
            if not any(abs(value - f) <= TOL_MHZ for f in levels):
                raise DvfsError(f"{where}: {format_mhz(value)} MHz is not a level of the {label} on {board_name} "
                                f"(levels {' '.join(format_mhz(f) for f in levels)} MHz): refused before the job "
                                "starts; the model was learned on another board — rerun the pipeline on this "
                                "board's dataset")
            if cap is not None and value > cap + TOL_MHZ:
                raise DvfsError(f"{where}: {format_mhz(value)} MHz is above the {label}'s {format_mhz(cap)} MHz the "
                                "power mode allows: refused before the job starts (switch to MAXN: sudo nvpmodel "
                                "-m 0)")


def _nearest(value: float, levels: Sequence[float]) -> float:
    return min(levels, key=lambda f: abs(f - value))


def joint_lock(clocks, knobs: Sequence[str], settings: Sequence[Sequence[float]]) -> Callable[[float], list]:
    """``lock(index)``: the GPU locked, then each other clock pinned and verified (module doc);
    returns the other clocks' :class:`~dvfslab.hw.base.LockCheck` s."""
    others = clocks.other_clocks()

    def lock(index: float) -> list:
        setting = dict(zip(knobs, settings[int(round(float(index)))], strict=True))
        gpu = setting.get(JOINT_KNOBS["gpu"])
        if gpu is not None:
            clocks.lock(_nearest(gpu, clocks.levels_mhz()))  # a level of the table (check_joint)
        checks = []
        for knob, value in setting.items():
            name = SHORT[knob]
            if name == "gpu":
                continue
            clock = others[name]
            check = clock.pin(_nearest(value, clock.levels_mhz()))
            if not check.verified:
                clocks.reset()
                raise DvfsError(f"the {clock.label} was not read back at {format_mhz(value)} MHz ({check.why}): "
                                "every clock restored")
            checks.append(check)
        return checks

    return lock


def joint_board(board: JobBoard, governor: Governor) -> JobBoard:
    """``board`` with the joint model's settings as its levels (module doc); checked first."""
    knobs, settings = joint_settings(governor)
    clocks = board.extra.get("clocks")
    if clocks is None or not hasattr(clocks, "other_clocks"):
        raise DvfsError(f"the joint model sets {' × '.join(JOINT_LABELS[k] for k in knobs)} together; {board.name} has "
                        "no clock control for them (a Jetson: --backend jetson)")
    check_joint(clocks, knobs, settings, board.name)
    labels = " × ".join(JOINT_LABELS[k] for k in knobs)
    return replace(board, name=f"{board.name} ({len(settings)} joint settings of {labels})",
                   levels=[float(i) for i in range(len(settings))], lock=joint_lock(clocks, knobs, settings),
                   clock_knob=False, default_level=None,
                   describe=lambda level: f"setting {int(round(float(level)))}: "
                                          + format_setting(knobs, settings[int(round(float(level)))]),
                   extra={**board.extra, "joint": {"knobs": list(knobs), "settings": [list(s) for s in settings]}})


def setting_pins(governor: Governor, index: float) -> dict[str, float]:
    """The clocks of setting ``index`` by short name (``{"gpu": 612.0, "emc": 2133.0, ...}``)."""
    knobs, settings = joint_settings(governor)
    return {SHORT[k]: v for k, v in zip(knobs, settings[int(round(float(index)))], strict=True)}
