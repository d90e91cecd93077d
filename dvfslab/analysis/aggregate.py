"""The sweep as tables: level means, baselines and the energy-optimal level of every workload.

Everything downstream (features, model selection, governors, evaluation, plots) works on a
:class:`Sweep`:

* ``levels``: one row per (workload, level) with the means over the repetitions whose
  ``status`` is ``ok`` of time, energy and power (``policy == "fixed"`` runs only); a run's
  setting is put on its level by :func:`dvfslab.core.levels.snap_mhz` (nearest, ties: higher);
* ``baseline``: one row per workload with the mean of its baseline runs — the MAXN runs when
  the dataset has them, else (``baseline: "fmax"``, or a workload without an ok MAXN run) the
  highest level that workload was measured at;
* ``workloads``: the dataset's ``workloads.csv``.

The levels are those of the dataset's *knob* (:class:`dvfslab.data.knobs.Knob`: the GPU clock
in MHz by default, or a GPU power limit in W). Here, and in the governors and the evaluation, a
level is knob-neutral: the column ``level`` and the attribute ``level_table`` hold the knob's
value in the knob's unit, and ``Sweep.knob`` says which (figures label their axes from it). Only
the dataset contract's own columns keep their unit names (runs.csv ``gpu_freq_mhz`` /
``power_limit_w``, meta.json ``freq_table_mhz`` / ``power_limit_table_w``). A joint dataset's level
is the index of its setting (``Sweep.settings``, ``Sweep.setting_of``; docs/method.md, "A joint
setting").

The per-workload feature table built from a sweep lives in :mod:`dvfslab.analysis.features`.
Definitions follow docs/method.md ("Evaluation definitions"). A sweep is written to and read back from an
output folder (``tables/sweep_*.csv`` + ``sweep.json``) at full float precision, which is how
the notebooks chain.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.core.errors import SweepError  # one definition, shared with dvfslab.sweep
from dvfslab.core.files import atomic_write_json, atomic_write_text
from dvfslab.core.levels import snap_mhz
from dvfslab.data.contract import Dataset
from dvfslab.data.knobs import (
    DEFAULT_KNOB,
    JOINT_LABELS,
    Knob,
    format_setting,
    get_knob,
    setting_mhz,
)

MEASURES: tuple[str, ...] = ("time_s", "energy_j", "energy_gpu_j", "energy_cpu_j", "avg_power_w", "gpu_util_pct")


# pandas >= 3 parses floats exactly by default and deprecates the option that older ones need
_ROUND_TRIP = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


def snap_levels(settings: pd.Series, table: Sequence[float]) -> pd.Series:
    """Put each run's setting on its level of ``table`` (:func:`snap_mhz`: nearest, ties higher);
    a run that set none (NaN: MAXN) stays NaN."""
    levels = [float(f) for f in table]
    exact = set(levels)  # a setting on the table is its own level (the usual case): no search over it
    snapped = {f: (f if f in exact else snap_mhz(f, levels))
               for f in pd.unique(settings.astype(float)) if not np.isnan(f)}
    return settings.astype(float).map(snapped)


def level_means(runs: pd.DataFrame, level_table: Sequence[float], knob: str = DEFAULT_KNOB) -> pd.DataFrame:
    """Means over ok repetitions of every fixed-level run, one row per (workload, level).

    ``knob`` names the runs.csv column holding the setting; the output column is ``level``.
    """
    ok = runs[(runs["status"] == "ok") & (runs["policy"] == "fixed")].copy()
    if ok.empty:
        raise SweepError("runs.csv has no status=ok run with policy=fixed: nothing to characterize "
                         "— run a sweep over the GPU levels first")
    ok["level"] = snap_levels(ok[knob], level_table)
    grouped = ok.groupby(["workload_id", "level"], sort=True)
    out = grouped[list(MEASURES)].mean()
    out["n_ok"] = grouped.size()
    return out.reset_index()


def baseline_means(runs: pd.DataFrame, levels: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Mean baseline time/energy/util per workload; ``baseline`` says which runs were used."""
    rows = []
    if kind == "maxn":
        mx = runs[(runs["status"] == "ok") & (runs["policy"] == "maxn")]
        g = mx.groupby("workload_id")
        got = g[list(MEASURES)].mean()
        got["n_ok"] = g.size()
        got["baseline"] = "maxn"
        got["level"] = np.nan
        rows.append(got.reset_index())
    done = set(rows[0]["workload_id"]) if rows else set()
    top = levels[~levels["workload_id"].isin(done)].sort_values("level").groupby("workload_id").tail(1)
    top = top.assign(baseline="max_level" if kind == "max_level" else "fmax")
    rows.append(top)
    out = pd.concat(rows, ignore_index=True)
    cols = ["workload_id", "baseline", "level", "n_ok", *MEASURES]
    return out[cols].sort_values("workload_id").reset_index(drop=True)


#: the baseline row's name by meta.json ``baseline`` (:attr:`Sweep.baseline_name`)
BASELINE_NAMES = {"maxn": "maxn", "fmax": "max-clock", "max_level": "max-limit"}


class Sweep:
    """Level means, baselines and workloads of one dataset, with fast per-workload lookups."""

    def __init__(self, levels: pd.DataFrame, baseline: pd.DataFrame, workloads: pd.DataFrame,
                 level_table: Sequence[float], source: str, baseline_kind: str, dataset: str = "",
                 knob: str = DEFAULT_KNOB, joint_knobs: Sequence[str] = (),
                 settings: Sequence[Sequence[float]] = ()):
        self.levels = levels.sort_values(["workload_id", "level"]).reset_index(drop=True)
        self.baseline = baseline.set_index("workload_id", drop=False)
        measured = set(self.levels["workload_id"]) & set(self.baseline.index)
        self.workloads = workloads[workloads["workload_id"].isin(measured)].reset_index(drop=True)
        self.level_table = tuple(sorted(float(f) for f in level_table))
        self.source, self.baseline_kind, self.dataset = source, baseline_kind, dataset
        self.knob: Knob = get_knob(knob)
        #: a joint dataset's clocks and settings (level ``i`` is ``settings[i]``); empty otherwise
        self.joint_knobs: tuple[str, ...] = tuple(joint_knobs)
        self.settings: tuple[tuple[float, ...], ...] = tuple(tuple(float(v) for v in s) for s in settings)
        self._base = {w: (float(e), float(t)) for w, e, t in
                      zip(self.baseline["workload_id"], self.baseline["energy_j"], self.baseline["time_s"], strict=True)}
        self._curves = {w: (g["level"].to_numpy(float), g["energy_j"].to_numpy(float), g["time_s"].to_numpy(float))
                        for w, g in self.levels.sort_values("level", kind="stable").groupby("workload_id")}

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"

    @property
    def baseline_name(self) -> str:
        """What the baseline row is called: ``maxn`` only where the dataset says its baseline runs
        were nvpmodel MAXN (``baseline: maxn``); else the knob's highest level, ``max-clock``
        (``fmax``) or ``max-limit`` (``max_level``, a power limit)."""
        return BASELINE_NAMES.get(self.baseline_kind, "maxn")

    def workload_ids(self, split: str | None = None) -> list[str]:
        """Workloads with both level runs and a baseline, optionally of one split."""
        wl = self.workloads if split is None else self.workloads[self.workloads["split"] == split]
        return list(wl["workload_id"])

    def curve(self, workload_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(level, energy_j, time_s)`` arrays of the measured levels, ascending."""
        try:
            return self._curves[workload_id]
        except KeyError:
            raise SweepError(f"workload {workload_id!r} has no ok fixed-level runs in this sweep") from None

    def nearest_level(self, workload_id: str, level: float) -> float:
        """The measured level of ``workload_id`` closest to ``level`` (ties: the higher)."""
        return snap_mhz(level, self.curve(workload_id)[0].tolist())

    def at(self, workload_id: str, level: float) -> tuple[float, float]:
        """``(energy_j, time_s)`` at a measured level (exact match within 1e-6 of the knob's unit);
        O(log L): a binary search of the workload's levels (ascending), so a loop over the levels is
        not quadratic on a joint grid of thousands of settings."""
        levels, energy, time = self.curve(workload_id)
        i = int(np.searchsorted(levels, float(level) - 1e-6))
        if not (i < levels.size and abs(levels[i] - float(level)) <= 1e-6):
            raise SweepError(f"workload {workload_id!r} was not measured at {self.format_level(float(level))}")
        return float(energy[i]), float(time[i])

    def baseline_of(self, workload_id: str) -> tuple[float, float]:
        """``(energy_j, time_s)`` of the baseline (MAXN mean, or highest level)."""
        try:
            return self._base[workload_id]
        except KeyError:
            raise SweepError(f"workload {workload_id!r} has no baseline run in this sweep") from None

    def setting_of(self, level: float) -> dict[str, float]:
        """A joint dataset's level as its setting, ``{"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}``;
        a single-knob dataset's as ``{knob: level}``."""
        if not self.joint_knobs:
            return {self.knob.name: float(level)}
        return setting_mhz(self.joint_knobs, self.settings[int(round(float(level)))])

    def settings_mhz(self) -> list[dict[str, float]]:
        """A joint dataset's settings, each as :meth:`setting_of` names it, in the order of their
        index (level); empty for a single-knob dataset."""
        return [setting_mhz(self.joint_knobs, s) for s in self.settings] if self.joint_knobs else []

    def format_level(self, level: float) -> str:
        """A level in words for a label: ``"GPU 714 MHz × EMC 2133 MHz"`` (a joint setting), ``"714 MHz"``;
        a joint level that is no setting's index (``2.5``, ``-1``) keeps the knob's words (``"setting 2.5"``)."""
        index = round(float(level))
        if not self.joint_knobs or abs(float(level) - index) > 1e-9 or not 0 <= index < len(self.settings):
            return self.knob.format(float(level))
        return format_setting(self.joint_knobs, self.settings[index])

    def oracle_level(self, workload_id: str) -> float:
        """The measured level with the least mean energy (ties: the lowest level)."""
        levels, energy, _ = self.curve(workload_id)
        return float(levels[int(np.argmin(energy))])


def sweep_from_dataset(ds: Dataset) -> Sweep:
    """Build the :class:`Sweep` of a loaded dataset."""
    if ds.meta.get("energy_measured", True) is False:
        raise SweepError(f"{ds.path}/meta.json says energy_measured: false — the analysis needs energy_j; "
                         "record the runs with a power reader (a Jetson's INA3221 rails, NVML, or the simulated board)")
    levels = level_means(ds.runs, ds.levels, ds.knob.name)
    base = baseline_means(ds.runs, levels, ds.baseline)
    return Sweep(levels, base, ds.workloads, ds.levels, ds.source, ds.baseline, str(ds.path), ds.knob.name,
                 ds.joint_knobs, ds.settings)


def write_sweep(sweep: Sweep, out_dir: str | os.PathLike) -> None:
    """Write the sweep under ``out_dir`` (tables/sweep_*.csv, sweep.json), full precision."""
    out = Path(out_dir)
    write_table(out / "tables" / "sweep_levels.csv", sweep.levels)
    write_table(out / "tables" / "sweep_baseline.csv", sweep.baseline.reset_index(drop=True))
    write_table(out / "tables" / "workloads.csv", sweep.workloads)
    extra = {"knobs": list(sweep.joint_knobs), "settings": [list(s) for s in sweep.settings]} if sweep.joint_knobs else {}
    atomic_write_json(out / "sweep.json", {"dataset": sweep.dataset, "source": sweep.source,
                                          "baseline": sweep.baseline_kind, "knob": sweep.knob.name,
                                          "level_table": list(sweep.level_table), **extra})


def read_sweep(out_dir: str | os.PathLike) -> Sweep:
    """Read back what :func:`write_sweep` wrote (notebook 01 writes it)."""
    out = Path(out_dir)
    path = out / "sweep.json"
    if not path.exists():
        raise SweepError(f"{path} is missing — run notebook 01_characterization with this OUTPUT_DIR first")
    meta = json.loads(path.read_text())
    if "level_table" not in meta:  # written before levels were knob-neutral (it had freq_table_mhz)
        raise SweepError(f"{path} was written by an older dvfslab (no level_table) — rerun `dvfslab pipeline "
                         f"--out {out}` (or notebook 01 with this OUTPUT_DIR)")
    return Sweep(read_table(out / "tables" / "sweep_levels.csv"),
                 read_table(out / "tables" / "sweep_baseline.csv"),
                 read_table(out / "tables" / "workloads.csv"),
                 meta["level_table"], meta["source"], meta["baseline"], meta["dataset"],
                 meta.get("knob", DEFAULT_KNOB), meta.get("knobs", ()), meta.get("settings", ()))


def write_table(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    """Write a CSV atomically with every float at full (round-trip) precision."""
    atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n"))


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a CSV written by :func:`write_table` (floats round-trip exactly)."""
    if not Path(path).exists():
        raise SweepError(f"{path} is missing — run the earlier notebooks with this OUTPUT_DIR first")
    return pd.read_csv(path, **_ROUND_TRIP)


# --------------------------------------------------------------------------------------------
# Characterization
# --------------------------------------------------------------------------------------------


def optimal_levels(sweep: Sweep) -> pd.DataFrame:
    """Per workload: energy-optimal level, its index in the board table, U-shape and baselines.

    ``u_shaped`` is true when the least-energy level is interior: neither the lowest nor the
    highest level the workload was measured at (a workload measured at < 3 levels is not).
    ``opt_level`` is that level (in the knob's unit), ``opt_level_idx`` its 0-based position in
    ``level_table``; ``paper_label`` ranks the distinct optimal levels that occur (1 = lowest),
    like the paper's labels 1–6.
    """
    table = np.asarray(sweep.level_table)
    rows = []
    for wid in sweep.workload_ids():
        levels, energy, time = sweep.curve(wid)
        k = int(np.argmin(energy))
        e_b, t_b = sweep.baseline_of(wid)
        rows.append({"workload_id": wid, "opt_level": float(levels[k]),
                     "opt_level_idx": int(np.abs(table - levels[k]).argmin()),
                     "opt_energy_j": float(energy[k]), "opt_time_s": float(time[k]),
                     "baseline_energy_j": e_b, "baseline_time_s": t_b,
                     "oracle_saving_pct": 100.0 * (1.0 - energy[k] / e_b),
                     "n_levels": len(levels), "u_shaped": bool(0 < k < len(levels) - 1)})
    out = pd.DataFrame(rows)
    ranks = {f: i + 1 for i, f in enumerate(sorted(out["opt_level"].unique()))}
    out["paper_label"] = out["opt_level"].map(ranks)
    info = sweep.workloads[["workload_id", "model", "task", "split", "params_m"]]
    return info.merge(out, on="workload_id")


def characterization_summary(optima: pd.DataFrame, sweep: Sweep) -> dict:
    """The ``characterization`` section of summary.json, over every workload of the sweep:
    ``optimal_level_range`` (the lowest and highest least-energy level), ``level_table``, and
    ``knob`` / ``knob_unit`` saying what the levels are. A joint dataset's levels are indices, so
    it also names them in MHz: ``knobs`` (its clocks), ``settings_mhz`` (setting ``i`` is level
    ``i``, ``{"gpu_freq_mhz": 714.0, "emc_freq_mhz": 2133.0}``), ``optimal_settings_mhz`` (the
    distinct least-energy settings, in level order) and ``optimal_setting_range_mhz`` (each clock's
    lowest and highest value over them)."""
    out = {"optimal_level_range": {"min": float(optima["opt_level"].min()),
                                   "max": float(optima["opt_level"].max())},
           "level_table": list(sweep.level_table), "knob": sweep.knob.name, "knob_unit": sweep.knob.unit,
           "u_shaped_fraction": float(optima["u_shaped"].mean()),
           "n_workloads": int(len(optima))}
    if sweep.joint_knobs:
        optimal = [sweep.setting_of(level) for level in sorted(set(optima["opt_level"].astype(float)))]
        out.update({"knobs": list(sweep.joint_knobs), "settings_mhz": sweep.settings_mhz(),
                    "optimal_settings_mhz": optimal,
                    "optimal_setting_range_mhz": {k: {"min": min(s[k] for s in optimal), "max": max(s[k] for s in optimal)}
                                                  for k in sweep.joint_knobs}})
    return out


def optimal_range_words(char: dict, sweep: Sweep) -> str:
    """Where the least-energy levels lie, in words for notebook 01: ``"between 510 and 612 MHz"``;
    a joint dataset's by each clock's range (``char["optimal_setting_range_mhz"]``, from
    :func:`characterization_summary`): ``"at GPU 714 MHz × EMC 2133–3199 MHz"``."""
    if not sweep.joint_knobs:
        spot = char["optimal_level_range"]
        return f"between {spot['min']:g} and {spot['max']:g} {sweep.knob.unit}"
    ranges = char["optimal_setting_range_mhz"]
    parts = [f"{JOINT_LABELS.get(k, k)} " + (f"{r['min']:g}" if r["min"] == r["max"] else f"{r['min']:g}–{r['max']:g}")
             + " MHz" for k, r in ((k, ranges[k]) for k in sweep.joint_knobs)]
    return "at " + " × ".join(parts)


def relative_levels(sweep: Sweep) -> pd.DataFrame:
    """Level means joined with workload info, with time/power/energy relative to the baseline."""
    base = sweep.baseline[["time_s", "energy_j", "avg_power_w"]].add_prefix("baseline_")
    out = sweep.levels.merge(base, left_on="workload_id", right_index=True)
    out["time_rel"] = out["time_s"] / out["baseline_time_s"]
    out["power_rel"] = out["avg_power_w"] / out["baseline_avg_power_w"]
    out["energy_rel"] = out["energy_j"] / out["baseline_energy_j"]
    info = sweep.workloads[["workload_id", "model", "task", "split", "params_m"]]
    return info.merge(out, on="workload_id")


def joint_levels_frame(sweep: Sweep) -> pd.DataFrame:
    """:func:`relative_levels` of a joint sweep with each level's setting as columns (one per
    clock of ``sweep.joint_knobs``: ``gpu_freq_mhz``, ``emc_freq_mhz`` ...); a single-knob sweep
    is refused (its level is its one clock)."""
    if not sweep.joint_knobs:
        raise SweepError(f"{sweep.dataset}: not a joint sweep (meta.json lists no knobs): its levels are "
                         f"the {sweep.knob.label} itself")
    rel = relative_levels(sweep)
    cols = pd.DataFrame([sweep.setting_of(level) for level in rel["level"]], index=rel.index)
    return pd.concat([rel, cols], axis=1)


def joint_vs_gpu_only(sweep: Sweep) -> pd.DataFrame:
    """Per workload of a joint sweep: the joint oracle (the least-energy setting of all) against
    the GPU-only oracle (the least-energy setting among those whose other clocks are each at their
    highest value in ``settings``: a GPU sweep with the EMC and CPU pinned at max, the sweep's
    default), both relative to the workload's baseline. ``extra_saving_pct`` is what moving the
    other clocks too saves beyond the best GPU-only level, in % of the baseline energy; NaN where
    the design ran no setting with the other clocks at their top."""
    if not sweep.joint_knobs:
        raise SweepError(f"{sweep.dataset}: not a joint sweep (meta.json lists no knobs)")
    gpu = sweep.joint_knobs.index("gpu_freq_mhz") if "gpu_freq_mhz" in sweep.joint_knobs else None
    tops = [max(s[k] for s in sweep.settings) for k in range(len(sweep.joint_knobs))]
    gpu_only = {float(i) for i, s in enumerate(sweep.settings)
                if all(s[k] == tops[k] for k in range(len(s)) if k != gpu)}
    rows = []
    for wid in sweep.workload_ids():
        levels, energy, _ = sweep.curve(wid)
        e_b = sweep.baseline_of(wid)[0]
        k = int(np.argmin(energy))
        mask = np.array([float(lv) in gpu_only for lv in levels])
        g = int(np.flatnonzero(mask)[np.argmin(energy[mask])]) if mask.any() else None
        e_g = float(energy[g]) if g is not None else np.nan
        rows.append({"workload_id": wid, "joint_level": float(levels[k]), "joint_energy_j": float(energy[k]),
                     "joint_saving_pct": 100.0 * (1.0 - energy[k] / e_b),
                     "gpu_only_level": float(levels[g]) if g is not None else np.nan, "gpu_only_energy_j": e_g,
                     "gpu_only_saving_pct": 100.0 * (1.0 - e_g / e_b),
                     "extra_saving_pct": 100.0 * (e_g - energy[k]) / e_b})
    info = sweep.workloads[["workload_id", "model", "task", "split", "params_m"]]
    return info.merge(pd.DataFrame(rows), on="workload_id")


def long_form(frame: pd.DataFrame, value_cols: Iterable[str], id_cols: Iterable[str],
              var_name: str = "metric") -> pd.DataFrame:
    """Melt wide columns into a tidy (id..., metric, value) frame for faceted plots."""
    return frame.melt(id_vars=list(id_cols), value_vars=list(value_cols), var_name=var_name, value_name="value")
