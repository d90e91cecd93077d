"""The governed job's log: one JSON line per window, one summary line at the end.

Each window line (:class:`~dvfslab.job.live.Window`): ``phase`` (``calibration``, ``baseline``
— the default clock —, ``probe``, ``hold``, ``no-progress``, ``epoch-end``: a probe read cut by an
epoch end, its units charged to the window read again), ``level`` (null: the default
clock), ``units`` / ``read_units``, ``time_s``, ``energy_j`` (CPU + GPU over the read units),
``energy_per_unit_j``, ``time_per_unit_s``, ``measurement`` (false: no progress, with ``why``),
``t_end_s`` and the decision state (``probes_so_far``). The summary line (``"summary": true``)
holds ``chosen_level``, ``probes`` (probe windows the governor ran) and ``probe_units``, the
**whole job** against the default clock (:func:`whole_job`: ``job_saving_pct`` and
``job_slowdown_pct``, each with its ``_ci``, over every window — calibration, baseline, probe and
hold, settle units included, at each window's read figures; a window read again for being
impossible at its level's mean), the job length planned with (``job_units``,
``plan_job_units``, ``job_units_source``, ``job_units_learnt``: the last length and when it was learnt), the reading noise of repeated windows
(``noise_cv`` over ``noise_ref_units``), the held level's own ``saving_pct`` (``100 (1 - e_hold / e_base)``, the mean energy per unit of the windows held at the
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


#: repeated windows' residuals needed to redraw the baseline's noise from them (else the groups are resampled)
MIN_RESIDUALS = 8
N_RESAMPLES, BATCH = 2000, 100
#: the phases of windows that ran the job (a no-progress stretch is none)
JOB_PHASES = ("calibration", "baseline", "probe", "hold")


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
    if _same(held) and _same(base):
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


def _same(xs: Sequence[float]) -> bool:
    """Every value the same but for rounding (1e-12 relative): a bootstrap has nothing to resample."""
    return max(xs) - min(xs) <= 1e-12 * max(abs(x) for x in xs)


def job_windows(lines: Sequence[Mapping[str, Any]]) -> list[tuple[float, float, float]]:
    """``(units, energy_per_unit_j, time_per_unit_s)`` of every stretch of the job the log saw:
    each measured window (calibration, baseline, probe, hold: its units, settle included, at its
    read figures), and each stretch that was not read — a window found impossible (read again),
    units that ran at the level before a lock (queued while the governor decided), a settle the
    job ended in — at the mean measured figures of its level (module doc)."""
    measured = [r for r in lines if r.get("phase") in JOB_PHASES and r.get("measurement")
                and r.get("energy_per_unit_j") is not None and r.get("time_per_unit_s") is not None]
    out = [(float(r["units"]), float(r["energy_per_unit_j"]), float(r["time_per_unit_s"])) for r in measured]
    by_level: dict[Any, list[Mapping[str, Any]]] = {}
    for r in measured:
        by_level.setdefault(r.get("level"), []).append(r)
    for r in lines:
        if r.get("phase") in JOB_PHASES and r.get("measurement") is False and r.get("units") and by_level.get(r.get("level")):
            same = by_level[r.get("level")]
            out.append((float(r["units"]), _mean([float(x["energy_per_unit_j"]) for x in same]),
                        _mean([float(x["time_per_unit_s"]) for x in same])))
    return out


def whole_job(lines: Sequence[Mapping[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """The whole job against the default clock (module doc): ``job_saving_pct`` =
    ``100 (1 - sum(u e) / (sum(u) e_base))``, ``job_slowdown_pct`` = ``100 (sum(u t) / (sum(u)
    t_base) - 1)``, ``e_base`` / ``t_base`` the mean per-unit figures of the default-clock windows;
    each with a 95 % percentile bootstrap interval: the job's windows resampled, the default
    windows' mean redrawn with the job's own reading noise (:func:`residuals`, when there are
    :data:`MIN_RESIDUALS`; else ``scipy.stats.bootstrap`` resampling both groups)."""
    job = job_windows(lines)
    base = [r for r in lines if r.get("phase") in ("calibration", "baseline") and r.get("measurement")
            and r.get("energy_per_unit_j") is not None and r.get("time_per_unit_s") is not None]
    out: dict[str, Any] = {"job_units_seen": sum(u for u, _, _ in job), "job_windows": len(job),
                           "job_saving_pct": None, "job_saving_pct_ci": None, "job_slowdown_pct": None,
                           "job_slowdown_pct_ci": None}
    if not job or not base:
        out["job_ci_note"] = "no window at the default clock: no whole-job figure" if job else "no window measured"
        return out
    u = [x[0] for x in job]
    ue = [x[0] * x[1] for x in job]
    ut = [x[0] * x[2] for x in job]
    eb = [float(r["energy_per_unit_j"]) for r in base]
    tb = [float(r["time_per_unit_s"]) for r in base]
    out["job_energy_j"], out["job_time_s"] = sum(ue), sum(ut)
    out["base_energy_per_unit_j"], out["base_time_per_unit_s"] = _mean(eb), _mean(tb)
    out["job_saving_pct"] = 100.0 * (1.0 - sum(ue) / (sum(u) * _mean(eb)))
    out["job_slowdown_pct"] = 100.0 * (sum(ut) / (sum(u) * _mean(tb)) - 1.0)
    if len(job) < 2 or len(base) < 2:
        out["job_ci_note"] = f"{len(job)} job and {len(base)} default-clock window(s): an interval needs two of each"
        return out
    try:
        import numpy as np
        from scipy.stats import bootstrap
    except ImportError:
        out["job_ci_note"] = "no interval: scipy is not installed (pip install 'dvfslab[govern]')"
        return out
    U, UE, UT = np.asarray(u), np.asarray(ue), np.asarray(ut)
    EB, TB = np.asarray(eb), np.asarray(tb)

    bt = np.asarray([float(r["time_s"]) for r in base])
    rng = np.random.default_rng(seed)

    def interval(per_unit, base_vals, sign, key):
        resid = residuals(lines, key)
        if len(resid) < MIN_RESIDUALS:  # too few repeated windows to read the noise: resample the groups
            def stat(i, j, axis=-1):
                i, j = i.astype(int), j.astype(int)
                ratio = per_unit[i].sum(axis=axis) / (U[i].sum(axis=axis) * base_vals[j].mean(axis=axis))
                return 100.0 * sign * (1.0 - ratio)

            idx = (np.arange(len(U), dtype=float), np.arange(len(base_vals), dtype=float))
            res = bootstrap(idx, stat, vectorized=True, paired=False, confidence_level=0.95, n_resamples=2000,
                            method="percentile", random_state=seed, batch=BATCH)
            return [float(res.confidence_interval.low), float(res.confidence_interval.high)], "groups"
        stat = np.empty(N_RESAMPLES)
        for b in range(0, N_RESAMPLES, BATCH):  # a long job has thousands of windows: resample in batches
            i = rng.integers(0, len(U), (min(BATCH, N_RESAMPLES - b), len(U)))
            ratio_job = per_unit[i].sum(axis=1) / U[i].sum(axis=1)
            d = rng.choice(np.asarray(resid), (len(i), len(base_vals))) / np.sqrt(bt)
            base_mean = base_vals.mean() * (1.0 + d).mean(axis=1)
            stat[b:b + len(i)] = 100.0 * sign * (1.0 - ratio_job / base_mean)
        return [float(np.percentile(stat, 2.5)), float(np.percentile(stat, 97.5))], "residuals"

    how = set()
    if _same([x[1] for x in job]) and _same(eb):
        out["job_saving_pct_ci"] = [out["job_saving_pct"]] * 2
    else:
        out["job_saving_pct_ci"], h = interval(UE, EB, 1.0, "energy_per_unit_j")
        how.add(h)
    if _same([x[2] for x in job]) and _same(tb):
        out["job_slowdown_pct_ci"] = [out["job_slowdown_pct"]] * 2
    else:
        out["job_slowdown_pct_ci"], h = interval(UT, TB, -1.0, "time_per_unit_s")
        how.add(h)
    if "residuals" in how:
        out["job_ci_note"] = ("95 % percentile bootstrap: the job's windows resampled, the default-clock windows' mean "
                              "redrawn with the reading noise of every repeated window of this job (its relative "
                              "residuals, scaled as 1/sqrt(time read))")
    else:
        out["job_ci_note"] = ("95 % percentile bootstrap over windows (scipy.stats.bootstrap; the job's windows and "
                              "the default-clock windows resampled independently)")
    return out


def residuals(lines: Sequence[Mapping[str, Any]], key: str = "energy_per_unit_j") -> list[float]:
    """The reading noise of a job's repeated windows as residuals over one second read: each
    measured window's relative deviation from its level's mean (levels with two windows or more),
    times ``sqrt(n / (n - 1))`` (a group's mean takes a share of its own scatter) and
    ``sqrt(time_s)`` (a reading's noise shrinks as 1/sqrt(the time it reads: its sensor samples))."""
    by_level: dict[Any, list[tuple[float, float]]] = {}
    for r in lines:
        if (r.get("phase") in JOB_PHASES and r.get("measurement") and r.get(key) is not None
                and r.get("time_s")):
            lv = "default" if r.get("phase") in ("calibration", "baseline") else r.get("level")
            by_level.setdefault(lv, []).append((float(r[key]), float(r["time_s"])))
    out = []
    for g in by_level.values():
        if len(g) < 2:
            continue
        m = _mean([v for v, _ in g])
        k = math.sqrt(len(g) / (len(g) - 1))
        out.extend((v / m - 1.0) * k * math.sqrt(t) for v, t in g)
    return out


def summary(lines: Sequence[Mapping[str, Any]], *, policy: str, chosen_level: float | None, decided: bool,
            probes: int, probe_units: float, unit: str, simulated: bool, note: str = "",
            model: Mapping[str, Any] | None = None, exit_code: int | None = None,
            plan: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary line (module doc)."""
    held = per_unit(lines, "hold")
    base = per_unit(lines, "baseline") + per_unit(lines, "calibration")
    pct, ci, ci_note = saving(held, base)
    skipped = sum(1 for r in lines if r.get("measurement") is False and r.get("phase") != "epoch-end")
    impossible = sum(1 for r in lines if r.get("measurement") is False and r.get("phase") in JOB_PHASES
                     and not r.get("late") and "ended" not in str(r.get("why", "")))
    from dvfslab.job.checks import window_noise

    sigma, ref_units, n_noise = window_noise([r for r in lines if r.get("phase") in JOB_PHASES])
    plan = dict(plan or {})
    return {"summary": True, "policy": policy, "chosen_level": chosen_level, "decided": decided, "probes": probes,
            "probe_units": probe_units, "unit": unit, **whole_job(lines),
            "job_units": plan.get("job_units"), "plan_job_units": plan.get("plan_job_units"),
            "job_units_source": plan.get("source"), "job_units_learnt": plan.get("learnt"),
            "saving_pct": pct, "saving_pct_ci": ci,
            "saving_ci_note": ci_note, "baseline": "the default clock (the board's own governor)",
            "held_windows": len(held), "baseline_windows": len(base), "no_progress_windows": skipped - impossible,
            "impossible_windows": impossible, "noise_cv": sigma, "noise_ref_units": ref_units,
            "noise_windows": n_noise, "simulated": simulated, "probe_model": model, "exit_code": exit_code,
            "note": note}


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


def _ci(ci) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def format_summary(s: Mapping[str, Any]) -> str:
    """The summary as the lines ``dvfslab govern`` prints at the end (and ``--replay`` again)."""
    level = "the default clock" if s.get("chosen_level") is None else f"{s['chosen_level']:g}"
    label = " (SIMULATED board)" if s.get("simulated") else ""
    unit = s.get("unit", "unit")
    learnt = f", {s['job_units_learnt']}" if s.get("job_units_learnt") else ""
    length = (f"job length {s['job_units']:g} {unit}s ({s.get('job_units_source')}{learnt})" if s.get("job_units")
              else "job length unknown")
    out = [f"dvfslab govern: {s.get('policy')}{label}: held {level}"
           + ("" if s.get("decided", True) else " (no decision: the job ended " + (
               "while probing)" if s.get("probes") else "before the decision)" if s.get("probe_model")
               else "during the calibration: see the note)"))
           + f"; {s.get('probes', 0)} probe window(s), {s.get('probe_units', 0):g} {unit}(s) probing; {length}"]
    jp = s.get("job_saving_pct")
    if jp is None:
        out.append(f"  whole job vs the default clock: unknown ({s.get('job_ci_note', '')})")
    else:
        out.append(f"  whole job vs the default clock: saving {jp:.2f} %{_ci(s.get('job_saving_pct_ci'))}, slowdown "
                   f"{s['job_slowdown_pct']:.2f} %{_ci(s.get('job_slowdown_pct_ci'))} over "
                   f"{s.get('job_units_seen', 0):g} {unit}s in {s.get('job_windows', 0)} windows, every calibration "
                   f"and probe window counted ({s.get('job_ci_note', '')})")
    pct, ci = s.get("saving_pct"), s.get("saving_pct_ci")
    if pct is None:
        out.append(f"  held level vs the default clock: unknown ({s.get('saving_ci_note', '')})")
    else:
        out.append(f"  held level vs the default clock: {pct:.2f} %{_ci(ci)} ({s.get('saving_ci_note', '')}; "
                   f"{s.get('held_windows', 0)} held, {s.get('baseline_windows', 0)} baseline windows)")
    if s.get("noise_cv") is not None:
        out.append(f"  reading noise {100 * s['noise_cv']:.2g} % over {s['noise_ref_units']:.3g} {unit}s "
                   f"({s.get('noise_windows')} repeated windows)")
    if s.get("impossible_windows"):
        out.append(f"  {s['impossible_windows']} impossible window(s) were read again (the log says why)")
    if s.get("no_progress_windows"):
        out.append(f"  {s['no_progress_windows']} stretch(es) with no progress were not measurements")
    if s.get("note"):
        out.append(f"  note: {s['note']}")
    return "\n".join(out)


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
