"""The governed job's log: one JSON line per window, one summary line at the end.

Each window line (:class:`~dvfslab.job.live.Window`): ``phase`` (``calibration``, ``baseline``
— the default clock —, ``probe``, ``hold``, ``no-progress``), ``level`` (null: the default
clock), ``units`` / ``read_units``, ``time_s``, ``energy_j`` (CPU + GPU over the read units),
``energy_per_unit_j``, ``time_per_unit_s``, ``measurement`` (false: no progress, with ``why``),
``t_end_s`` and the decision state (``probes_so_far``). The summary line (``"summary": true``)
holds ``chosen_level``, ``probes`` (probe windows the governor ran) and ``probe_units``,
``saving_pct`` (``100 (1 - e_hold / e_base)``, the mean energy per unit of the windows held at the
chosen level against those at the default clock) and ``saving_pct_ci`` (95 % percentile
bootstrap over windows, ``scipy.stats.bootstrap``, the two groups resampled independently;
null with ``saving_ci_note`` under two windows in a group), ``simulated`` and ``note``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from dvfslab.core.errors import DvfsError


class JobLog:
    """Writes the lines (append, flushed each line) when given a path; keeps them in memory."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = None if path is None else os.fspath(path)
        self.lines: list[dict[str, Any]] = []
        self._fh = open(self.path, "w", encoding="utf-8") if self.path else None  # noqa: SIM115

    def write(self, record: Mapping[str, Any]) -> None:
        rec = dict(record)
        self.lines.append(rec)
        if self._fh is not None:
            self._fh.write(json.dumps(rec, allow_nan=False, default=_plain) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _plain(x: Any) -> Any:
    return float(x) if hasattr(x, "__float__") else str(x)


def per_unit(lines: Sequence[Mapping[str, Any]], phase: str, level: float | None | str = "any") -> list[float]:
    """Energy per unit of the measured windows of ``phase`` (at ``level`` unless ``"any"``)."""
    return [float(r["energy_per_unit_j"]) for r in lines
            if r.get("phase") == phase and r.get("measurement") and r.get("energy_per_unit_j") is not None
            and (level == "any" or r.get("level") == level)]


def saving(held: Sequence[float], base: Sequence[float], *, seed: int = 0
           ) -> tuple[float | None, list[float] | None, str]:
    """``(saving_pct, [lo, hi] or None, note)`` of the held windows against the baseline ones."""
    if not held or not base:
        missing = "no window held at the chosen level" if not held else "no window at the default clock"
        return None, None, f"{missing}: no saving can be estimated"
    point = 100.0 * (1.0 - _mean(held) / _mean(base))
    if len(held) < 2 or len(base) < 2:
        return point, None, f"{len(held)} held and {len(base)} baseline window(s): an interval needs two of each"
    if len(set(held)) == 1 and len(set(base)) == 1:
        return point, [point, point], "every window of each group read the same energy per unit"
    import numpy as np

    try:
        from scipy.stats import bootstrap
    except ImportError:
        return point, None, "no interval: scipy is not installed (pip install 'dvfslab[govern]')"

    def stat(h, b, axis=-1):
        return 100.0 * (1.0 - np.mean(h, axis=axis) / np.mean(b, axis=axis))

    res = bootstrap((np.asarray(held, float), np.asarray(base, float)), stat, vectorized=True, paired=False,
                    confidence_level=0.95, n_resamples=2000, method="percentile", random_state=seed)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return point, [lo, hi], "95 % percentile bootstrap over windows (scipy.stats.bootstrap)"


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def summary(lines: Sequence[Mapping[str, Any]], *, policy: str, chosen_level: float | None, decided: bool,
            probes: int, probe_units: float, unit: str, simulated: bool, note: str = "",
            model: Mapping[str, Any] | None = None, exit_code: int | None = None) -> dict[str, Any]:
    """The summary line (module doc)."""
    held = per_unit(lines, "hold")
    base = per_unit(lines, "baseline") + per_unit(lines, "calibration")
    pct, ci, ci_note = saving(held, base)
    skipped = sum(1 for r in lines if r.get("measurement") is False)
    return {"summary": True, "policy": policy, "chosen_level": chosen_level, "decided": decided, "probes": probes,
            "probe_units": probe_units, "unit": unit, "saving_pct": pct, "saving_pct_ci": ci,
            "saving_ci_note": ci_note, "baseline": "the default clock (the board's own governor)",
            "held_windows": len(held), "baseline_windows": len(base), "no_progress_windows": skipped,
            "simulated": simulated, "probe_model": model, "exit_code": exit_code, "note": note}


def read_summary(path: str | os.PathLike) -> dict[str, Any]:
    """The summary line of a log written by ``dvfslab govern --log``; errors name the file and the fix."""
    try:
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(x) for x in fh if x.strip()]
    except FileNotFoundError:
        raise DvfsError(f"{path}: no such log; write one with dvfslab govern --log FILE.jsonl ... -- CMD") from None
    except (OSError, json.JSONDecodeError) as err:
        raise DvfsError(f"{path}: not a dvfslab govern log (one JSON object a line): {err}") from None
    found = [r for r in rows if isinstance(r, dict) and r.get("summary") is True]
    if not found:
        raise DvfsError(f"{path}: no summary line (the run was killed before it ended?); its {len(rows)} window "
                        "line(s) are still readable")
    return found[-1]


def format_summary(s: Mapping[str, Any]) -> str:
    """The summary as the lines ``dvfslab govern`` prints at the end (and ``--replay`` again)."""
    level = "the default clock" if s.get("chosen_level") is None else f"{s['chosen_level']:g}"
    label = " (SIMULATED board)" if s.get("simulated") else ""
    out = [f"dvfslab govern: {s.get('policy')}{label}: held {level}"
           + ("" if s.get("decided", True) else " (no decision: the job ended while probing)")
           + f"; {s.get('probes', 0)} probe window(s), {s.get('probe_units', 0):g} {s.get('unit', 'unit')}(s) probing"]
    pct, ci = s.get("saving_pct"), s.get("saving_pct_ci")
    if pct is None:
        out.append(f"  saving vs the default clock: unknown ({s.get('saving_ci_note', '')})")
    else:
        interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        out.append(f"  saving vs the default clock: {pct:.2f} %{interval} ({s.get('saving_ci_note', '')}; "
                   f"{s.get('held_windows', 0)} held, {s.get('baseline_windows', 0)} baseline windows)")
    if s.get("no_progress_windows"):
        out.append(f"  {s['no_progress_windows']} stretch(es) with no progress were not measurements")
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    return "\n".join(out)


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
