"""``summary.json``: the headline numbers of a pipeline run, read and merged section by section.

Each notebook merges its sections (:func:`update_summary`); notebook 01 starts the file anew.
Keys are documented in docs/method.md. The file carries ``schema_version``; it is read by one
reader, :func:`dvfslab.core.summaryfile.load_summary` (re-exported here; it lives in ``core`` so
that ``job`` reads the file the same way): an unknown version, or a file written before levels
were knob-neutral (``characterization.sweet_spot_mhz``, ``evaluation.ffg_freq_mhz`` ...), is
refused in one line with how to regenerate it.

A joint dataset's level is the index of a setting of several clocks: given its sweep,
:func:`update_summary` names every level it writes in MHz (:func:`name_settings`: beside each
``<x>_level`` key, ``<x>_setting_mhz`` = ``{"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0, ...}``),
so ``evaluation.ffg_level: 2.0`` comes with ``evaluation.ffg_setting_mhz``; the dataset's settings
are listed by notebook 01 (``characterization.settings_mhz``). Keys are only added: the schema
version stays.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.files import atomic_write_json, jsonable
from dvfslab.core.summaryfile import MOVED, SCHEMA_KEY, SCHEMA_VERSION, check_summary, load_summary


def read_summary(out_dir: str | os.PathLike) -> dict:
    """The summary.json of an output folder ({} when there is none yet), read by the one reader
    (:func:`dvfslab.core.summaryfile.load_summary`: an unknown schema version or an older
    dvfslab's keys are a one-line :class:`DvfsError` saying how to regenerate it)."""
    try:
        return load_summary(Path(out_dir) / "summary.json")
    except FileNotFoundError:
        return {}


def update_summary(out_dir: str | os.PathLike, updates: Mapping[str, Any], fresh: bool = False,
                   sweep: Any = None) -> dict:
    """Merge ``updates`` (top-level keys) into summary.json, atomically, stamped with the schema
    version (:data:`~dvfslab.core.summaryfile.SCHEMA_VERSION`); ``fresh`` starts anew. With the
    run's ``sweep`` (a :class:`~dvfslab.analysis.aggregate.Sweep`), a joint dataset's levels are
    named in MHz too (:func:`name_settings`)."""
    summary = {} if fresh else read_summary(out_dir)
    if sweep is not None:
        updates = name_settings(updates, sweep)
    summary.update(jsonable(dict(updates)))
    summary[SCHEMA_KEY] = SCHEMA_VERSION
    atomic_write_json(Path(out_dir) / "summary.json", summary)
    return summary


#: the suffix of a key holding a level, and of the key naming that level's setting in MHz
LEVEL_SUFFIX, SETTING_SUFFIX = "_level", "_setting_mhz"


def name_settings(sections: Mapping[str, Any], sweep: Any) -> dict[str, Any]:
    """``sections`` with, on a joint sweep (``sweep.joint_knobs``), every number under a key
    ``<x>_level`` (at any depth of nested objects) named beside it as ``<x>_setting_mhz``, its
    setting by its clocks (``sweep.setting_of``: ``{"gpu_freq_mhz": 714.0, "emc_freq_mhz":
    2133.0}``); a level that is not one of the sweep's settings gets null. A single-knob sweep's
    levels are already in the knob's unit: ``sections`` is returned as it is."""
    if not getattr(sweep, "joint_knobs", ()):
        return dict(sections)

    def named(obj: Any) -> Any:
        if not isinstance(obj, Mapping):
            return obj
        out = {}
        for key, value in obj.items():
            out[key] = named(value)
            if (isinstance(key, str) and key.endswith(LEVEL_SUFFIX) and isinstance(value, (int, float))
                    and not isinstance(value, bool)):
                out[key.removesuffix(LEVEL_SUFFIX) + SETTING_SUFFIX] = _setting(sweep, float(value))
        return out

    return {key: named(value) for key, value in sections.items()}


def _setting(sweep: Any, level: float) -> dict[str, float] | None:
    index = round(level)
    if abs(level - index) > 1e-9 or not 0 <= index < len(sweep.settings):
        return None
    return sweep.setting_of(level)


__all__ = ["MOVED", "SCHEMA_VERSION", "caveat_lines", "check_summary", "governor_lines", "load_summary",
           "name_settings", "read_summary", "recommendation_line", "update_summary"]


def recommendation_line(summary: Mapping[str, Any]) -> str | None:
    """One line saying which governor the run recommends, from what (the grouped CV on the
    training split's workloads, when the summary names them) and why (None when not computed)."""
    rec = summary.get("recommended")
    if not rec:
        return None
    metric = "whole-job regret" if rec.get("metric") == "job_regret_pct" else "regret"
    feats = summary.get("features") or {}
    # the protocol: one grouped CV on the training split (benchmarks/real_governors.py's nested
    # CV over every workload with a job may pick another governor; README, "Real data")
    on = (f" on the {feats['n_train_workloads']} {feats['train_split']} workloads,"
          if feats.get("n_train_workloads") and feats.get("train_split") else "")
    return (f"recommended governor: {rec['policy']} ({rec.get('grouping') or 'leave-one-model-out'} CV{on} {metric} "
            f"{_pct(rec.get('cv_regret_pct'))}, FFG {_pct(rec.get('ffg_cv_regret_pct'))}): {rec.get('reason', '')}")


def governor_lines(summary: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    """One line per governor of ``order`` with figures: saving, slowdown and regret over whole jobs
    (``job_*``: probing charged, ``job_steps`` units) when the run has them, else per run."""
    gov = summary.get("governors") or {}
    rows = [(n, gov[n]) for n in order if gov.get(n) and gov[n].get("mean_saving_pct") is not None]
    job = any(g.get("job_saving_pct") is not None for _, g in rows)
    keys = ("job_saving_pct", "job_slowdown_pct", "job_regret_pct") if job else \
        ("mean_saving_pct", "mean_slowdown_pct", "mean_regret_pct")
    failing = (summary.get("evaluation") or {}).get("failing") or {}
    lines = ["governors over whole jobs (probing charged), mean over the evaluated workloads:" if job else
             "governors per run, mean over the evaluated workloads:"]
    for name, g in rows:
        saving, slowdown, regret = (g.get(k) for k in keys)
        probe = g.get("probe_share_pct") if job else g.get("profiling_steps")
        note = (f"  (probing {probe:.2f} % of the job)" if job else f"  ({probe:.3g} profiling steps)") if probe else ""
        fails = "  FAILS (see above)" if name in failing else ""
        lines.append(f"  {name:>9}: saving {_num(saving)}  slowdown {_num(slowdown)}  regret {_num(regret)}{note}{fails}")
    return lines if rows else []


def _num(x: float | None) -> str:
    return "   n/a  " if x is None else f"{round(x, 2) + 0.0:6.2f} %"  # + 0.0: no "-0.00" for a rounding residue


def caveat_lines(summary: Mapping[str, Any]) -> list[str]:
    """What qualifies the run's figures, one line each: ``IN-SAMPLE`` (notebook 02's
    ``features.in_sample``: trained and evaluated on the same workloads), ``NOTHING TO LEARN``
    (``features.cannot_learn``: the learned governors are FFG), and where the headline figures
    come from (notebook 04's ``evaluation.headline``, when it wrote one), and each governor that
    fails badly on the dataset, with why (``evaluation.failing``: ``<name> FAILS: ...``,
    :mod:`dvfslab.evaluation.failures`)."""
    features, evaluation = summary.get("features") or {}, summary.get("evaluation") or {}
    lines = []
    if features.get("in_sample"):
        n = features.get("n_train_workloads")
        lines.append(f"IN-SAMPLE: the learned governors were trained and evaluated on the same {n} "
                     f"{features.get('train_split', '')} workload{'' if n == 1 else 's'} (the dataset has no "
                     "evaluation split): their figures on them are optimistic")
    if features.get("cannot_learn"):
        lines.append(f"NOTHING TO LEARN: {features['cannot_learn']} — the learned governors fall back to FFG")
    if evaluation.get("headline"):
        lines.append(f"headline figures come from: {evaluation['headline']}")
    lines += list((evaluation.get("failing") or {}).values())
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} %"
