"""The physical probe model of a replay, built from the dataset: how long a probe of each level
lasts on the machine, and how noisy its reading is.

A :class:`~dvfslab.governors.probemodel.ProbeModel` per workload (:func:`physical_models`),
attached to the replay's :class:`~dvfslab.analysis.steps.StepSource` (:func:`with_physical`; the
replay does it by default), stated in ``summary.json`` under ``evaluation.probe``
(:func:`describe`).

**Window** (the units one reading of a level takes, warm-up included):

* a power-limit dataset imported from Zeus (``dvfslab import zeus-nsdi``): Zeus's live profiler
  (``zeus/optimizer/power_limit.py``, ``GlobalPowerLimitOptimizer``: ``warmup_steps=10``,
  ``profile_steps=40``) runs 10 warm-up + 40 profiled *iterations* per power limit; the
  dataset's unit is one epoch, so the window is ``50 / iterations per epoch`` epochs, the
  iterations per epoch being ``ceil(training samples / batch size)`` with the training-set
  sizes of :data:`ZEUS_TRAIN_SAMPLES` (their sources there); ``read_fraction`` 40 / 50;
* a GPU-clock dataset (a Jetson: LoudVA, the twin, a dvfslab sweep): the clock settles
  (:data:`SETTLE_S`), then the power sensor must give :data:`SENSOR_SAMPLES` samples, so a
  reading lasts ``SETTLE_S + SENSOR_SAMPLES x interval`` seconds, converted to units with the
  level's time per unit (``window(level) = seconds / (time_s per unit at level)``);
  ``read_fraction`` = the sampled share. The sensor's interval: LoudVA logged ``tegrastats``
  every 500 ms (its makefile, ``MEASUREMENT_INTERVAL2 = 500``); a dataset may say it in
  meta.json (``sensor_interval_s``, top level or under ``sweep``; the twin's ``sweep.energy``:
  "a reading every 0.05 s"); otherwise tegrastats' default, 1000 ms (a ``dvfslab sweep`` does
  not record its sampler's interval yet) (``tegrastats --interval``, L4T docs; INA3221 / tegrastats sample every
  100–1000 ms as configured);
* any other dataset: one unit per reading (its unit already is a measurement).

**Noise** (``sigma_ref`` over ``ref_units``, scaled as ``1/sqrt(units read)``;
:func:`noise_estimate`, printed by ``benchmarks/noise.py``):

* a dataset with repetitions: the median rep-to-rep CV of energy per unit
  (:func:`~dvfslab.analysis.steps.rep_cv`) over the units of one run;
* a power-limit dataset measured once per cell (Zeus): the spread across power limits of the
  workloads whose power never reaches the lowest limit (the limit never binds, so their energy
  should not move with it: what it moves is noise): per such workload the CV of energy per
  unit across the limits, the median over them. It is applied to a reading of Zeus's own
  40-iteration window (Zeus's recorded windows, ``benchmarks/noise.py --zeus-profile``, show
  1.6 % GPU to GPU and 3.1 % around a smooth curve at that length);
* a clock dataset of many loads measured once per cell (LoudVA): neighbouring loads at one clock
  — per clock, the workloads in order of ``batch_size`` (the concurrency), the middle one of
  three neighbours against their mean, ``r = e_c / ((e_{c-1} + e_{c+1}) / 2) - 1``; σ is
  ``1.4826 x MAD(r) / sqrt(1.5)`` (a robust standard deviation; the difference of one reading and
  the mean of two others has variance ``1.5 σ²``); applied to a reading of the default window;
* every once-per-cell estimate is floored by the **sensor prior** (:func:`sensor_prior`,
  :class:`SensorPrior`; docs/hardware.md, *Sensor priors*): NVML's energy counter on a
  data-centre GPU (1 mJ, updated every ~100 ms: each end of a window uncertain by one update),
  a Jetson's INA3221 through tegrastats (1 mW samples at its interval) — the larger of the two is
  used, both said; never 0. A data-centre GPU's clock dataset gets NVML's window, not tegrastats'.

**Epochs.** Where the dataset's unit is an epoch (the Zeus imports) the probe model says so
(``epoch_units = 1``): Zeus's profiler restarts a window cut by an epoch end
(:mod:`dvfslab.governors.zeus`). ``noise_scale`` (:func:`physical_models`) multiplies σ for a
sensitivity run.

A workload served from recorded steps (``steps.csv``: the twin, a dvfslab sweep) reads them as
they are: they are single measurements and carry their own step-to-step noise (16.5 % CV per step
on the twin, as the 1.2 % rep-to-rep CV of a 200-step run implies: 1.2 % x sqrt(200)), so no noise
is added there; σ is still stated (a governor plans with it).

**Idealised** (:data:`IDEALISED_REPLAY`): instant (a probe lasts what the governor asks),
exact probes — the old replay, kept for comparison only, labelled idealised.

The **noise floor** of a workload (:func:`noise_floor_pct`): the standard deviation of a
measured regret, the difference of two cells each measured with CV ``σ_cell``:
``100 σ_cell sqrt(E_a² + E_o²) / E_b`` (% of the baseline), ``σ_cell`` being the noise of one
cell's figure (the reading noise over the run's units; over ``sqrt(reps)`` where the cell is a
mean of repetitions). A regret below it cannot be told from none.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dvfslab.analysis.steps import StepSource, rep_cv, run_units
from dvfslab.analysis.training import TrainingData
from dvfslab.governors.probemodel import IDEALISED, ProbeModel
from dvfslab.measure.windows import SENSOR_SAMPLES, SETTLE_S

#: Zeus's live profiler, ``zeus/optimizer/power_limit.py`` (GlobalPowerLimitOptimizer defaults)
ZEUS_WARMUP_ITERS, ZEUS_PROFILE_ITERS = 10, 40
#: training samples per epoch of each Zeus NSDI'23 workload (workloads.csv ``task``)
ZEUS_TRAIN_SAMPLES: dict[str, tuple[int, str]] = {
    "cifar100": (50_000, "CIFAR-100 training set (Krizhevsky 2009)"),
    "imagenet": (1_281_167, "ILSVRC-2012 training set (Russakovsky et al. 2015)"),
    "librispeech": (281_241, "LibriSpeech 960 h training set, 28,539 + 104,014 + 148,688 utterances (Panayotov et al. "
                             "2015); which subset Zeus trained on is not stated in its traces: unverified"),
    "movielens-1m": (4_970_845, "MovieLens-1M, NCF's protocol (He et al. 2017): 1,000,209 ratings less one held out per "
                                "user (6,040) = 994,169 positives, each with 4 sampled negatives; unverified for Zeus"),
    "squad": (87_599, "SQuAD v1.1 training questions (Rajpurkar et al. 2016); BERT's doc-stride features are ~1 % "
                      "more: unverified"),
    "sentiment140": (425_000, "a Capriccio slice's training tweets (Zeus NSDI'23 artifact, "
                              "examples/research_reproducibility/zeus_nsdi23/capriccio/README.md)"),
}
# SENSOR_SAMPLES, SETTLE_S (measure.windows): the power-sensor samples a clock reading needs and
# the clock's settle time (s); one constant for the live runner and this replay
LOUDVA_INTERVAL_S, TEGRASTATS_DEFAULT_S = 0.5, 1.0
#: a robust standard deviation from the median absolute deviation (normal data)
MAD_TO_SD = 1.4826
#: instant, exact probes (the old replay): comparison only
IDEALISED_REPLAY = dataclasses.replace(IDEALISED, default_window=1e-9,
                                       window_source="none: a probe lasts what the governor asks (idealised)")


@dataclasses.dataclass(frozen=True)
class SensorPrior:
    """What a power sensor alone makes a reading uncertain by (docs/hardware.md, *Sensor priors*):
    its sampling (update) interval and its resolution. ``counter``: an energy counter read at the
    window's two ends (NVML), whose update interval leaves each end uncertain by up to one
    interval; else power samples averaged over the window (tegrastats), each quantised to
    ``resolution`` (W)."""

    name: str
    interval_s: float
    interval_source: str
    resolution: float
    resolution_source: str
    counter: bool

    def sigma(self, read_s: float, power_w: float) -> float:
        """The coefficient of variation of one reading over ``read_s`` seconds at ``power_w``:
        a counter: each end uniform over one update interval (variance ``interval^2 / 12`` each,
        two ends) plus each read's quantisation (``resolution^2 / 12`` J^2 each), over the window's
        energy ``power_w x read_s``; samples: one sample's quantisation ``resolution / sqrt(12)``
        over ``power_w``, averaged over ``read_s / interval_s`` samples (at least one)."""
        if not (read_s > 0 and power_w > 0):
            raise ValueError(f"a sensor prior needs a window > 0 s and a power > 0 W, got {read_s!r} s, {power_w!r} W")
        if self.counter:
            edge = self.interval_s / (read_s * math.sqrt(6.0))
            quant = self.resolution * math.sqrt(2.0 / 12.0) / (power_w * read_s)
            return math.hypot(edge, quant)
        n = max(read_s / self.interval_s, 1.0)
        return self.resolution / math.sqrt(12.0) / power_w / math.sqrt(n)


#: NVML's energy counter, what Zeus reads on Volta and newer (``ZeusMonitor``): in mJ
#: (``nvmlDeviceGetTotalEnergyConsumption``, NVML API reference); its update interval is not
#: documented by NVIDIA — 20-100 ms on newer GPUs (PETSc's ``PetscLogGpuEnergyMeter`` notes), the
#: upper end taken (unverified per GPU; on A100/H100 the sensor averages only 25 % of each period:
#: Yang, Adamek and Armour, SC'24, not modelled)
NVML_ENERGY = SensorPrior("NVML's total energy counter (nvmlDeviceGetTotalEnergyConsumption)", 0.1,
                          "20-100 ms update on newer GPUs (PETSc PetscLogGpuEnergyMeter notes; NVML does not state it: "
                          "unverified), 100 ms taken", 0.001, "1 mJ (NVML API reference)", counter=True)


def tegrastats_sensor(interval_s: float, interval_source: str) -> SensorPrior:
    """A Jetson's INA3221 read through tegrastats (or its sysfs hwmon files) every ``interval_s``."""
    return SensorPrior("INA3221 through tegrastats / sysfs", float(interval_s), interval_source, 0.001,
                       "1 mW (tegrastats and the hwmon power files print integer mW; the INA3221's own ADC: 13 bits, "
                       "shunt LSB 40 uV, bus LSB 8 mV, TI SBOS576)", counter=False)


def sensor_of(meta: Mapping[str, Any], knob: str) -> SensorPrior:
    """The power sensor a dataset was read with: NVML on a data-centre GPU (a Zeus import, a
    device whose power is read through NVML, the ``nvml`` backend), else a Jetson's INA3221."""
    device = meta.get("device") if isinstance(meta.get("device"), Mapping) else {}
    said = " ".join(str(device.get(k, "")) for k in ("power", "backend", "gpu")) + " " + str(meta.get("device", ""))
    if kind_of(meta, knob) == "zeus" or "nvml" in said.lower():
        return NVML_ENERGY
    return tegrastats_sensor(*sensor_interval_s(meta))


def kind_of(meta: Mapping[str, Any], knob: str) -> str:
    """``zeus`` (a Zeus power-limit import), ``jetson`` (a GPU-clock dataset) or ``other``."""
    if str(meta.get("generator", "")).startswith("dvfslab import zeus") or \
            "Zeus" in str((meta.get("origin") or {}).get("name", "")):
        return "zeus"
    return "jetson" if knob == "gpu_freq_mhz" else "other"


def sensor_interval_s(meta: Mapping[str, Any]) -> tuple[float, str]:
    """The power sensor's sampling interval of a clock dataset, and where it comes from (module doc)."""
    for where in (meta, meta.get("sweep") or {}):
        if isinstance(where.get("sensor_interval_s"), (int, float)) and where["sensor_interval_s"] > 0:
            return float(where["sensor_interval_s"]), "meta.json sensor_interval_s"
    if str(meta.get("generator", "")) == "dvfslab import loudva":
        return LOUDVA_INTERVAL_S, "LoudVA's tegrastats --interval 500 (its makefile, MEASUREMENT_INTERVAL2)"
    got = re.search(r"a reading every ([0-9.]+) s", str((meta.get("sweep") or {}).get("energy", "")))
    if got:
        return float(got.group(1)), "meta.json sweep.energy (the sweep's power sampler)"
    return TEGRASTATS_DEFAULT_S, "tegrastats' default interval, 1000 ms (not stated by the dataset)"


def zeus_iterations(task: str, batch_size: float) -> float:
    """Iterations per epoch of a Zeus workload: ``ceil(samples / batch size)`` (:data:`ZEUS_TRAIN_SAMPLES`)."""
    if task not in ZEUS_TRAIN_SAMPLES:
        raise ValueError(f"no training-set size for the Zeus dataset {task!r}: add it to "
                         "dvfslab.evaluation.probes.ZEUS_TRAIN_SAMPLES with its source")
    return float(math.ceil(ZEUS_TRAIN_SAMPLES[task][0] / float(batch_size)))


def noncapped_spread(steps: StepSource) -> dict:
    """Zeus: the CV across power limits of energy per unit of the workloads whose power never
    reaches the lowest limit (module doc): ``{"sigma", "workloads": [...], "per_workload": {...}}``."""
    sweep = steps.sweep
    runs = steps._ok[steps._ok["policy"] == "fixed"]
    low = min(sweep.level_table)
    per = {}
    for wid, g in runs.groupby("workload_id"):
        if g["avg_power_w"].notna().all() and float(g["avg_power_w"].max()) < low and len(g) >= 3:
            e = (g["energy_j"] / run_units(g)).to_numpy(float)
            per[str(wid)] = float(e.std(ddof=1) / e.mean())
    return {"sigma": float(np.median(list(per.values()))) if per else 0.0, "workloads": sorted(per),
            "per_workload": per}


def neighbour_spread(steps: StepSource) -> dict:
    """Neighbouring loads at one level (module doc): ``{"sigma", "triples"}``."""
    sweep = steps.sweep
    order = sweep.workloads.assign(_b=pd.to_numeric(sweep.workloads["batch_size"], errors="coerce"))
    ids = [str(w) for w in order.sort_values(["_b", "workload_id"])["workload_id"]]
    r = []
    for level in sweep.level_table:
        e = []
        for w in ids:
            try:
                e.append(sweep.at(w, level)[0] / steps.units(w))
            except Exception:  # not measured at this level: breaks the run of neighbours
                e.append(math.nan)
        for a, b, c in zip(e, e[1:], e[2:], strict=False):
            if all(math.isfinite(x) for x in (a, b, c)):
                r.append(b / ((a + c) / 2) - 1)
    if not r:
        return {"sigma": 0.0, "triples": 0}
    r = np.asarray(r)
    return {"sigma": float(MAD_TO_SD * np.median(np.abs(r - np.median(r))) / math.sqrt(1.5)), "triples": int(len(r))}


def sensor_prior(steps: StepSource) -> dict:
    """The sensor's own noise over one default window's read seconds (:class:`SensorPrior`), at
    the median over the workloads of the baseline's power and of that window's read seconds:
    ``{"sigma", "sensor", "read_s", "power_w", "source"}``."""
    sweep, meta = steps.sweep, steps.meta
    knob = sweep.knob.name
    sensor = sensor_of(meta, knob)
    kind = kind_of(meta, knob)
    read, power = [], []
    for wid in sweep.workload_ids():
        try:
            t, e = steps.per_unit(wid, None)
        except Exception:  # no baseline: not in the median
            continue
        if not (t > 0 and e > 0):
            continue
        power.append(e / t)
        if kind == "zeus":
            row = sweep.workloads.set_index("workload_id").loc[wid]
            read.append(ZEUS_PROFILE_ITERS / zeus_iterations(str(row["task"]), float(row["batch_size"])) * t)
        elif kind == "jetson":
            read.append(SENSOR_SAMPLES * sensor.interval_s)
        else:
            read.append(t)
    if not read:
        return {"sigma": 0.0, "sensor": sensor.name, "read_s": None, "power_w": None,
                "source": f"{sensor.name}: no workload with a baseline to size a window"}
    read_s, power_w = float(np.median(read)), float(np.median(power))
    sigma = sensor.sigma(read_s, power_w)
    how = ("each end of the window uncertain by one update interval: interval / (window x sqrt 6)" if sensor.counter
           else "one sample's quantisation / sqrt(12) over the power, averaged over the window's samples")
    return {"sigma": sigma, "sensor": sensor.name, "read_s": read_s, "power_w": power_w,
            "source": (f"the sensor prior of {sensor.name}: interval {sensor.interval_s:g} s ({sensor.interval_source}), "
                       f"resolution {sensor.resolution_source}; {how}; over the median window read, {read_s:.3g} s, "
                       f"at the median baseline power, {power_w:.3g} W: {100 * sigma:.3g} %")}


def _at_least_prior(est: dict, prior: dict) -> dict:
    """A once-per-cell estimate, floored by the sensor's own noise (never 0): the larger, both said."""
    if prior["sigma"] > est["sigma"]:
        return {**est, "sigma": prior["sigma"], "prior": prior,
                "source": f"{prior['source']} (larger than the data's estimate, {100 * est['sigma']:.3g} %: "
                          f"{est['source']})"}
    return {**est, "prior": prior,
            "source": f"{est['source']}; the sensor prior is {100 * prior['sigma']:.3g} % ({prior['sensor']})"}


def noise_estimate(steps: StepSource) -> dict:
    """σ of a reading and where it comes from (module doc): ``{"sigma", "over": "run" | "window",
    "source", "cell_reps"}`` — ``over``: σ applies to one run's units (repetitions) or to one
    default window's read units (the estimators)."""
    knob = steps.sweep.knob.name
    reps = rep_cv(steps._ok, knob)
    if reps["energy"] is not None:
        n = steps._ok[steps._ok["policy"] == "fixed"].groupby(["workload_id", knob]).size()
        return {"sigma": reps["energy"]["median"], "over": "run", "cell_reps": float(n.median()),
                "source": f"the median rep-to-rep CV of energy per unit over {reps['cells_with_reps']} (workload, level) "
                          "cells, over one run's units"}
    return _at_least_prior(_once_per_cell(steps), sensor_prior(steps))


def _once_per_cell(steps: StepSource) -> dict:
    """σ of a dataset measured once per cell, from the data's estimators (module doc); 0: none applies."""
    knob = steps.sweep.knob.name
    kind = kind_of(steps.meta, knob)
    if kind == "zeus" or knob == "power_limit_w":
        got = noncapped_spread(steps)
        return {"sigma": got["sigma"], "over": "window", "cell_reps": 1.0,
                "source": f"measured once per cell: the median CV across power limits of energy per unit of the "
                          f"{len(got['workloads'])} workloads whose power never reaches the lowest limit "
                          "(benchmarks/noise.py), over one Zeus profiling window (40 iterations)"}
    if "batch_size" in steps.sweep.workloads and steps.sweep.workloads["batch_size"].nunique() >= 3:
        got = neighbour_spread(steps)
        return {"sigma": got["sigma"], "over": "window", "cell_reps": 1.0,
                "source": f"measured once per cell: neighbouring loads at one level, 1.4826 MAD / sqrt(1.5) of the "
                          f"middle one against its two neighbours over {got['triples']} triples (benchmarks/noise.py), "
                          "over one default window"}
    return {"sigma": 0.0, "over": "window", "cell_reps": 1.0, "source": "no estimator of the data applies"}


def physical_models(steps: StepSource, noise_scale: float = 1.0) -> dict[str, ProbeModel]:
    """The physical probe model of every workload of the source (module doc); ``noise_scale``
    multiplies its σ (a sensitivity run: 0.5, 2, ...)."""
    if not (math.isfinite(noise_scale) and noise_scale >= 0):
        raise ValueError(f"noise_scale multiplies the reading noise: a number >= 0, got {noise_scale!r}")
    sweep, meta = steps.sweep, steps.meta
    kind = kind_of(meta, sweep.knob.name)
    noise = noise_estimate(steps)
    models = {}
    if kind == "jetson":
        sensor = sensor_of(meta, sweep.knob.name)
        interval, where = sensor.interval_s, sensor.interval_source
        read_s = SENSOR_SAMPLES * interval
        total_s = read_s + SETTLE_S
    for wid in sweep.workload_ids():
        levels = [float(x) for x in sweep.curve(wid)[0]]
        if kind == "zeus":
            row = sweep.workloads.set_index("workload_id").loc[wid]
            iters = zeus_iterations(str(row["task"]), float(row["batch_size"]))
            w = (ZEUS_WARMUP_ITERS + ZEUS_PROFILE_ITERS) / iters
            windows, default, frac = {lv: w for lv in levels}, w, ZEUS_PROFILE_ITERS / (ZEUS_WARMUP_ITERS + ZEUS_PROFILE_ITERS)
            unit, source = "epoch", (f"Zeus's profiler: {ZEUS_WARMUP_ITERS} warm-up + {ZEUS_PROFILE_ITERS} profiled "
                                     f"iterations per power limit, {iters:g} iterations per epoch ({row['task']}: "
                                     f"{ZEUS_TRAIN_SAMPLES[str(row['task'])][0]:,} samples / batch {row['batch_size']:g})")
        elif kind == "jetson":
            windows = {lv: total_s / steps.per_unit(wid, lv)[0] for lv in levels}
            default, frac = total_s / steps.per_unit(wid, None)[0], read_s / total_s
            unit = "inference" if str(meta.get("generator", "")) == "dvfslab import loudva" else "step"
            source = (f"{SENSOR_SAMPLES} power-sensor samples of {interval:g} s ({where}) + {SETTLE_S:g} s clock settle "
                      f"= {total_s:g} s per level, over the level's time per unit")
        else:
            windows, default, frac, unit, source = {}, 1.0, 1.0, "step", "one unit (the dataset's unit is a measurement)"
        ref = steps.units(wid) if noise["over"] == "run" else default * frac
        where = noise["source"] + ("; the probes read recorded steps (steps.csv), which carry their own step-to-step "
                                   "noise: none is added" if steps.is_recorded(wid) else "")
        if noise_scale != 1.0:
            where = f"{where}; scaled by {noise_scale:g} (a sensitivity run)"
        models[wid] = ProbeModel(windows=windows, default_window=default, read_fraction=frac,
                                 sigma_ref=noise["sigma"] * noise_scale, ref_units=ref, sigma_source=where, unit=unit,
                                 window_source=source, epoch_units=1.0 if unit == "epoch" else None)
    return models


def with_physical(steps: StepSource, noise_scale: float = 1.0) -> StepSource:
    """``steps`` whose probes carry the physical probe model (:func:`physical_models`)."""
    return steps.with_probe_models(physical_models(steps, noise_scale))


def idealised(steps: StepSource) -> StepSource:
    """``steps`` whose probes are instant and exact (:data:`IDEALISED_REPLAY`): comparison only."""
    return steps.with_noise(0.0, steps.seed).with_probe_models({w: IDEALISED_REPLAY for w in steps.sweep.workload_ids()})


def physical_data(data: TrainingData, idealise: bool = False, noise_scale: float = 1.0) -> TrainingData:
    """``data`` whose steps carry the physical probe model (or the idealised one); ``noise_scale``
    multiplies the model's σ."""
    s = data.steps()
    return data.with_steps(idealised(s) if idealise else with_physical(s, noise_scale))


def ensure_models(steps: StepSource) -> StepSource:
    """``steps`` as given when it carries probe models, else with the physical ones (the default)."""
    if steps.probe_models is not None:
        return steps
    cache = steps.__dict__.setdefault("_physical_cache", {})  # shared by copies of the same source
    if "models" not in cache:
        cache["models"] = physical_models(steps)
    return steps.with_probe_models(cache["models"])


def noise_floor_pct(steps: StepSource, workload_id: str, energy_a: float, energy_o: float, energy_b: float) -> float:
    """The noise floor of a regret between cells of energy ``energy_a`` and ``energy_o`` (% of
    ``energy_b``; module doc)."""
    sigma = cell_sigma(steps, workload_id)
    return 100.0 * sigma * math.hypot(energy_a, energy_o) / energy_b


def cell_sigma(steps: StepSource, workload_id: str) -> float:
    """The noise of one cell's figure: σ as estimated on the cells (:func:`noise_estimate`: one
    run's, or one cell's where there are no repetitions), over ``sqrt(reps)`` for a mean of
    repetitions; the fixed figure of ``with_noise`` when set."""
    model = steps.probe_model(workload_id)
    if steps.noise is not None or model is None or model.idealised:
        return float(steps.noise or 0.0)
    reps = getattr(steps, "_cell_reps", None)
    if reps is None:
        reps = noise_estimate(steps)["cell_reps"]
        steps._cell_reps = reps
    return float(model.sigma_ref) / math.sqrt(max(reps, 1.0))


def describe(steps: StepSource) -> dict[str, Any]:
    """``evaluation.probe`` of summary.json: the model (:meth:`ProbeModel.describe`) with each
    level's window the median over the workloads, the range of windows, and the noise."""
    models = steps.probe_models or {}
    if not models:
        return {"idealised": True, "note": "no probe model: probes as the governor asks, exact"}
    first = next(iter(models.values()))
    per_level: dict[float, list[float]] = {}
    for m in models.values():
        for lv, w in m.windows.items():
            per_level.setdefault(float(lv), []).append(float(w))
    med = {lv: float(np.median(v)) for lv, v in per_level.items()}
    defaults = [m.default_window for m in models.values()]
    out = dataclasses.replace(first, windows=med, default_window=float(np.median(defaults)),
                              ref_units=float(np.median([m.ref_units for m in models.values()]))).describe()
    out["window_per_level_is"] = f"the median over {len(models)} workloads"
    all_w = [w for v in per_level.values() for w in v] or defaults
    out["window_range"] = [float(min(all_w)), float(max(all_w))]
    if steps.noise is not None:
        out["sigma_fixed"] = steps.noise
        out["sigma_source"] = f"fixed at {steps.noise:g} for every probe (a sensitivity run)"
    return out
