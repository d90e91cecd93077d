"""dvfslab: energy-efficient GPU DVFS for fine-tuning small language models on NVIDIA Jetson.

dvfslab reproduces, and goes beyond, "Energy-Efficient GPU DVFS for Fine-Tuning of SLMs on
Resource-constrained Embedded Devices" (2026): sweep the Jetson AGX Orin GPU clock over its
levels while fine-tuning BERT / Pythia models on GLUE; measure time, CPU+GPU power and energy
per level; learn the energy-optimal level from workload features (a decision tree chosen by
leave-one-out CV); apply it as a governor and measure the savings against MAXN and a
fixed-frequency governor. Without a board, a digital twin of the AGX Orin (the ``sim``
backend) stands in; its data is always labelled simulated.

Quick start (from a checkout; see README.md)::

    make demo                                # the whole method on the bundled (simulated) dataset
    dvfslab sweep --backend sim --workloads characterization --out runs/twin
    dvfslab pipeline --data runs/twin        # notebooks 01-05 with papermill
    dvfslab doctor                           # on a Jetson, before a real sweep

or in Python::

    import dvfslab
    ds = dvfslab.load_dataset("data/replay")
    print(ds.summary_line())
    out_dir = dvfslab.run_pipeline("data/replay", quick=True)   # needs the analysis, notebooks extras

Rooms (subpackages), in layers; each imports only rooms of the layers above it in this
list (docs/layout.md; tests/test_layout.py keeps it so)::

    core        errors, the one level-snapping rule, atomic files, the Jetson board families
    data        the dataset contract (meta.json, workloads.csv, runs.csv, steps.csv, the run
                journal), the knob, the workload catalog, importers (Zeus, LoudVA)
    hw          backends: Jetson sysfs clocks and INA3221 rails, NVML, jtop; `dvfslab doctor`
    measure     the power sampler, energy windows, saved traces, tegrastats logs
    analysis    the facts of a sweep: level means, baselines, optimal levels, features, figures
    governors   FFG, trees, curve, online and profiled governors: one registry; load and decide
    sim         the digital twin: board model, physics, calibration, simulated backend
    harness     fine-tuning: the Hugging Face Trainer with the DVFS callback (the finetune extra)
    job         a running command governed from outside: its progress read from what it prints, a
                file or a Prometheus counter, probed and held by any governor (`dvfslab govern`)
    sweep       plans, crash-safe resumable sweeps, their store and journal, the twin as an
                executor and `dvfslab simulate`, fleets on Dask
    evaluation  governors replayed over a sweep, cross-validation, model selection, the
                recommended governor
    pipeline    the numbered notebooks run by papermill, summary.json, the twin's bands
    lab         ipywidgets panels of the live lab (notebook 00)
    cli         the `dvfslab` command
    testing     faithful fakes (sysfs trees, INA3221, pynvml) for tests, never imported above

The command line (``dvfslab COMMAND --help``)::

    dvfslab pipeline     the notebook series (characterization -> governors) on a dataset
    dvfslab validate     check a dataset directory against the contract
    dvfslab sweep        a characterization sweep (workloads x levels x repetitions + MAXN)
    dvfslab simulate     a simulated dataset from the digital twin (--workload, --ensemble)
    dvfslab calibrate    refit the twin's parameters from its real readings (--check)
    dvfslab finetune     one fine-tuning run at a locked GPU clock, appended to a dataset
    dvfslab govern       a governor picks the level; lock it, run a command, restore
    dvfslab doctor       check the board before a long sweep
    dvfslab devices      clock control, power rails, permissions, board, power mode
    dvfslab clocks       list, set or restore the GPU clock
    dvfslab run          run a command with the GPU pinned, then restore the clocks
    dvfslab sensors      import a tegrastats log as a power trace
    dvfslab import       published measurements (Zeus, NSDI'23) as a dataset

The names in ``__all__`` load on first use, so ``import dvfslab`` stays light; they need only
the base install. Fine-tuning (``dvfslab.harness.finetune``) needs ``pip install
'dvfslab[finetune]'``, the analysis and notebooks ``'dvfslab[analysis,notebooks]'``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_FACE = {
    "DvfsError": "dvfslab.core.errors",
    "Dataset": "dvfslab.data.contract", "load_dataset": "dvfslab.data.contract",
    "get_backend": "dvfslab.hw",
    "PowerSampler": "dvfslab.measure.sampler",
    "make_plan": "dvfslab.sweep.plan", "run_sweep": "dvfslab.sweep.runner",
    "simulate_dataset": "dvfslab.sweep.simulate",
    "load_policy": "dvfslab.governors.io",
    "run_pipeline": "dvfslab.pipeline.runner",
}
__all__ = ["__version__", *sorted(_FACE)]


def __getattr__(name: str):
    if name not in _FACE:
        raise AttributeError(f"module 'dvfslab' has no attribute {name!r}")
    return getattr(importlib.import_module(_FACE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACE})
