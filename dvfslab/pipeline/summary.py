"""``summary.json``: the headline numbers of a pipeline run, read and merged section by section.

Each notebook merges its sections (:func:`update_summary`); notebook 01 starts the file anew.
Keys are documented in docs/method.md. A summary.json written before levels were knob-neutral
(``characterization.sweet_spot_mhz``, ``evaluation.ffg_freq_mhz`` ...) is refused by
:func:`read_summary` with how to regenerate it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dvfslab.core.errors import DvfsError
from dvfslab.core.files import atomic_write_json, jsonable

#: keys of older summary.json files -> where they moved (section, old key, new key)
MOVED = (("characterization", "sweet_spot_mhz", "optimal_level_range"),
         ("characterization", "sweet_spot_w", "optimal_level_range"),
         ("characterization", "freq_table_mhz", "level_table"),
         ("characterization", "power_limit_table_w", "level_table"),
         ("evaluation", "ffg_freq_mhz", "ffg_level"))


def read_summary(out_dir: str | os.PathLike) -> dict:
    """The summary.json of an output folder ({} when there is none yet); one written by an older
    dvfslab (a key of :data:`MOVED`) is a :class:`DvfsError` saying how to regenerate it."""
    path = Path(out_dir) / "summary.json"
    if not path.exists():
        return {}
    summary = json.loads(path.read_text())
    for section, old, new in MOVED:
        if old in (summary.get(section) or {}):
            raise DvfsError(f"{path} was written by an older dvfslab ({section}.{old} is now {section}.{new}): "
                            f"regenerate it with `dvfslab pipeline --data DATASET --out {Path(out_dir)}`")
    return summary


def update_summary(out_dir: str | os.PathLike, updates: Mapping[str, Any], fresh: bool = False) -> dict:
    """Merge ``updates`` (top-level keys) into summary.json, atomically; ``fresh`` starts anew."""
    summary = {} if fresh else read_summary(out_dir)
    summary.update(jsonable(dict(updates)))
    atomic_write_json(Path(out_dir) / "summary.json", summary)
    return summary


def recommendation_line(summary: Mapping[str, Any]) -> str | None:
    """One line saying which governor the run recommends and why (None when not computed)."""
    rec = summary.get("recommended")
    if not rec:
        return None
    metric = "whole-job regret" if rec.get("metric") == "job_regret_pct" else "regret"
    return (f"recommended governor: {rec['policy']} ({rec.get('grouping') or 'leave-one-model-out'} CV {metric} "
            f"{_pct(rec.get('cv_regret_pct'))}, FFG {_pct(rec.get('ffg_cv_regret_pct'))}): {rec.get('reason', '')}")


def governor_lines(summary: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    """One line per governor of ``order`` with figures: saving, slowdown and regret over whole jobs
    (``job_*``: probing charged, ``job_steps`` units) when the run has them, else per run."""
    gov = summary.get("governors") or {}
    rows = [(n, gov[n]) for n in order if gov.get(n) and gov[n].get("mean_saving_pct") is not None]
    job = any(g.get("job_saving_pct") is not None for _, g in rows)
    keys = ("job_saving_pct", "job_slowdown_pct", "job_regret_pct") if job else \
        ("mean_saving_pct", "mean_slowdown_pct", "mean_regret_pct")
    lines = ["governors over whole jobs (probing charged), mean over the evaluated workloads:" if job else
             "governors per run, mean over the evaluated workloads:"]
    for name, g in rows:
        saving, slowdown, regret = (g.get(k) for k in keys)
        probe = g.get("probe_share_pct") if job else g.get("profiling_steps")
        note = (f"  (probing {probe:.2f} % of the job)" if job else f"  ({probe:.3g} profiling steps)") if probe else ""
        lines.append(f"  {name:>9}: saving {_num(saving)}  slowdown {_num(slowdown)}  regret {_num(regret)}{note}")
    return lines if rows else []


def _num(x: float | None) -> str:
    return "   n/a  " if x is None else f"{round(x, 2) + 0.0:6.2f} %"  # + 0.0: no "-0.00" for a rounding residue


def caveat_lines(summary: Mapping[str, Any]) -> list[str]:
    """What qualifies the run's figures, one line each: ``IN-SAMPLE`` (notebook 02's
    ``features.in_sample``: trained and evaluated on the same workloads), ``NOTHING TO LEARN``
    (``features.cannot_learn``: the learned governors are FFG), and where the headline figures
    come from (notebook 04's ``evaluation.headline``, when it wrote one)."""
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
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} %"
