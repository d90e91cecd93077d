"""Import the Zeus NSDI'23 power traces into a dataset of the contract (knob: GPU power limit).

Zeus (You, Chung and Chowdhury, NSDI 2023; Apache-2.0) publishes, for four datacenter GPUs, one
row per (dataset, network, batch size, optimizer, power limit) with the time of one training
epoch and the average GPU power over it (``summary_power_<gpu>.csv``). The importer turns each
row into one fixed-policy run at that power limit:

* ``time_s`` = ``time_per_epoch`` (s); ``avg_power_w`` = ``average_power`` (W);
* ``energy_j`` = ``energy_gpu_j`` = ``time_per_epoch`` x ``average_power`` (J per epoch, GPU only:
  the authors read the card's power through NVML);
* ``rep`` 0 (the authors measured each configuration once: the numbers are deterministic);
* the baseline is the highest power limit (``baseline: "max_level"``, the GPU's default limit);
* a configuration not measured at every limit of the file is left out by default (meta.json
  ``incomplete_left_out`` lists it with the limits it has): the fixed-level governor (FFG) picks
  among the levels every training workload was measured at, so a two-level sweep would confine it
  to those two. ``keep_incomplete=True`` keeps them.

**Whole job** (``job_steps``, in epochs, the unit of these runs): the epochs the configuration
needs to reach Zeus's target metric, from the train trace ``summary_train.csv`` (same folder;
one row per (configuration, seed ``run``, ``target_metric``) with the ``target_epoch`` at which
that run first reached it, empty when it never did). The target per dataset is the one Zeus's
own trace-driven experiments use (:data:`TARGETS`: ``get_job_with_defaults`` in the artifact's
``run_alibaba.py``). ``job_steps`` is the median over the runs (seeds) of that epoch, a run that
never reached the target counting as longer than every run that did; when at least half of
the runs never reached it (the median is then not finite), or the train trace has no row for
the configuration (e.g. ShuffleNet with Adam, ImageNet below batch 64), the workload gets no
``job_steps`` and meta.json ``job_steps.without`` lists it with the reason. Zeus's simulator
stops a run at a per-dataset ``max_epochs`` (CIFAR-100: 100); the epochs here are not capped
(CIFAR-100 at batch 2048 reaches 0.60 after 151-276 epochs). Without the train trace under
SRC_DIR no workload gets ``job_steps`` (meta.json says so).

A workload is (network, dataset, optimizer, batch size): ``model`` is the network, ``task`` the
dataset. Its features come from :data:`NETWORKS` (a hand table, sources there) and the batch
size. Splits: within each (network, dataset, optimizer) the batch sizes in ascending order go
alternately to ``characterization`` and ``evaluation`` (``eval_every=2``: the 2nd, 4th, ...);
``eval_every=0`` keeps them all in ``characterization``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.data.contract import (
    WORKLOAD_COLUMNS,
    WORKLOAD_EXTRA_COLUMNS,
    Dataset,
    write_dataset,
)
from dvfslab.data.imported import alternate_splits, bad_rows, complete_sweeps, read_source_csv

GPUS: dict[str, str] = {"v100": "NVIDIA V100", "a40": "NVIDIA A40", "p100": "NVIDIA P100",
                        "rtx6000": "NVIDIA Quadro RTX 6000"}
TRACE_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power")
#: where ``summary_power_<gpu>.csv`` may sit under SRC_DIR (this repo's copy, the Zeus checkout)
TRACE_SUBDIRS = (".", "trace", "examples/research_reproducibility/zeus_nsdi23/trace")

TRAIN_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch")
TRAIN_FILE = "summary_train.csv"
#: the target validation metric Zeus's trace-driven experiments train each dataset to:
#: ``get_job_with_defaults`` in examples/research_reproducibility/zeus_nsdi23/run_alibaba.py
#: (ml-energy/zeus; accuracy for CIFAR-100, ImageNet, sentiment140; F1 for SQuAD; WER, lower is
#: better, for LibriSpeech; NDCG for MovieLens-1M)
TARGETS: dict[str, float] = {"cifar100": 0.6, "imagenet": 0.65, "squad": 84.0, "librispeech": 40.0,
                             "movielens-1m": 0.41, "sentiment140": 0.84}

# network -> workload features; None = not published for the variant Zeus trained (left empty,
# the models impute it). Sources and derivations: data/external/zeus_nsdi23/SOURCE.md.
NETWORKS: dict[str, dict] = {
    # torchvision's shufflenet_v2_x1_0 has 2,278,604 parameters with a 1000-class head; the
    # CIFAR-100 head (1024 -> 100) has 1024 * 900 + 900 = 922,500 fewer: 1.356 M (derived)
    "shufflenetv2": {"model_family": "shufflenet", "model_type": None, "params_m": 1.356, "n_layers": None,
                     "hidden_size": None},
    # He et al. 2016, table 1 (50 weighted layers); torchvision resnet50: 25,557,032 parameters
    "resnet50": {"model_family": "resnet", "model_type": None, "params_m": 25.557, "n_layers": 50,
                 "hidden_size": None},
    # Devlin et al. 2019: BERT-base, L = 12, H = 768, 110 M parameters; an encoder
    "bert_base_uncased": {"model_family": "bert", "model_type": "encoder", "params_m": 110.0, "n_layers": 12,
                          "hidden_size": 768},
    # the trace does not say which DeepSpeech2 / NCF configuration was trained: no size given
    "deepspeech2": {"model_family": "deepspeech", "model_type": None, "params_m": None, "n_layers": None,
                    "hidden_size": None},
    "ncf": {"model_family": "ncf", "model_type": None, "params_m": None, "n_layers": None, "hidden_size": None},
}


class ZeusImportError(DvfsError):
    """The Zeus trace is missing or does not look as expected."""


def find_trace(src_dir: str | os.PathLike, gpu: str) -> Path:
    """``summary_power_<gpu>.csv`` under ``src_dir`` (or its ``trace/`` or the Zeus checkout path)."""
    if gpu not in GPUS:
        raise ZeusImportError(f"unknown GPU {gpu!r}; the Zeus NSDI'23 traces cover {', '.join(GPUS)}")
    root = Path(src_dir)
    for sub in TRACE_SUBDIRS:
        path = root / sub / f"summary_power_{gpu}.csv"
        if path.is_file():
            return path
    raise ZeusImportError(f"{root}: no summary_power_{gpu}.csv there nor under "
                          f"{', '.join(TRACE_SUBDIRS[1:])}/ — pass the folder holding the Zeus power traces")


def read_trace(path: str | os.PathLike) -> pd.DataFrame:
    """Read one power trace; errors name the file, the column and the CSV line."""
    path = Path(path)
    out = read_source_csv(path, TRACE_COLUMNS, "a Zeus power trace")[list(TRACE_COLUMNS)].copy()
    for col in ("batch_size", "power_limit", "time_per_epoch", "average_power"):
        values = pd.to_numeric(out[col], errors="coerce")
        bad_rows(path, out, col, values.isna() | (values <= 0))
        out[col] = values
    key = ["dataset", "network", "batch_size", "optimizer", "power_limit"]
    bad_rows(path, out, "power_limit", out.duplicated(key), "the same configuration and power limit appear twice")
    unknown = sorted(set(out["network"]) - set(NETWORKS))
    if unknown:
        raise ZeusImportError(f"{path}: network(s) {', '.join(unknown)} are not in dvfslab.data.zeus.NETWORKS "
                              "— add their features there")
    return out


def find_train_trace(src_dir: str | os.PathLike) -> Path | None:
    """``summary_train.csv`` under ``src_dir`` (the same places as the power traces), else None."""
    root = Path(src_dir)
    return next((root / sub / TRAIN_FILE for sub in TRACE_SUBDIRS if (root / sub / TRAIN_FILE).is_file()), None)


def read_train_trace(path: str | os.PathLike) -> pd.DataFrame:
    """Read the train trace; a missing column or a bad number names the file, the column and the row."""
    path = Path(path)
    out = read_source_csv(path, TRAIN_COLUMNS, "a Zeus train trace")[list(TRAIN_COLUMNS)].copy()
    for col in ("batch_size", "target_metric", "target_epoch"):
        blank = out[col].str.strip().str.lower().isin(("", "nan"))  # target_epoch: never reached
        values = pd.to_numeric(out[col].where(~blank, None), errors="coerce")
        bad_rows(path, out, col, (values.isna() & ~blank) | (values <= 0) | (blank & (col != "target_epoch")))
        out[col] = values
    return out


def job_epochs(train: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """``({workload_id: epochs to reach the target}, {workload_id: why none})`` from the train
    trace: the median over runs of the epoch at which :data:`TARGETS` is first reached, a run that
    never reached it counting as longer than any (module docstring)."""
    target = train["dataset"].map(TARGETS)
    at_target = train[np.isclose(train["target_metric"], target.astype(float)) & target.notna()]
    epochs, without = {}, {}
    for (n, d, o, b), g in at_target.groupby(["network", "dataset", "optimizer", "batch_size"]):
        wid = workload_id(n, d, o, b)
        median = float(np.median(g["target_epoch"].fillna(np.inf).to_numpy(float)))
        if np.isfinite(median):
            epochs[wid] = median
        else:
            reached = int(g["target_epoch"].notna().sum())
            without[wid] = f"{TARGETS[d]:g} reached by {reached} of {len(g)} runs"
    return epochs, without


def workload_id(network: str, dataset: str, optimizer: str, batch_size: int) -> str:
    return f"{network}/{dataset}/{optimizer}/b{int(batch_size)}"


def split_incomplete(trace: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    """The rows of configurations measured at every limit of the trace, and the others as
    ``{workload_id: [limits measured]}``."""
    config = ["network", "dataset", "optimizer", "batch_size"]
    kept, gaps = complete_sweeps(trace, config, "power_limit")
    left_out = {workload_id(n, d, o, b): sorted(float(x) for x in g["power_limit"])
                for (n, d, o, b), g in trace[gaps].groupby(config)}
    return kept, left_out


def workloads_of(trace: pd.DataFrame, eval_every: int = 2, job: dict[str, float] | None = None) -> pd.DataFrame:
    """One ``workloads.csv`` row per (network, dataset, optimizer, batch size); ``job_steps`` from
    ``job`` (:func:`job_epochs`), empty where it has none."""
    configs = trace[["network", "dataset", "optimizer", "batch_size"]].drop_duplicates()
    configs = configs.sort_values(["network", "dataset", "optimizer", "batch_size"])
    splits = alternate_splits(configs.groupby(["network", "dataset", "optimizer"]).cumcount(), eval_every)
    rows = []
    for (_, c), split in zip(configs.iterrows(), splits, strict=True):
        wid = workload_id(c["network"], c["dataset"], c["optimizer"], c["batch_size"])
        rows.append({"workload_id": wid, "model": c["network"], **NETWORKS[c["network"]], "task": c["dataset"],
                     "batch_size": int(c["batch_size"]), "split": split, "job_steps": (job or {}).get(wid)})
    return pd.DataFrame(rows).reindex(columns=[*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS])


def runs_of(trace: pd.DataFrame) -> pd.DataFrame:
    """One fixed-policy run per trace row; energy per epoch = time x average power."""
    wids = [workload_id(n, d, o, b) for n, d, o, b in
            zip(trace["network"], trace["dataset"], trace["optimizer"], trace["batch_size"], strict=True)]
    energy = trace["time_per_epoch"] * trace["average_power"]
    return pd.DataFrame({
        "run_id": [f"{w}@{p:g}W" for w, p in zip(wids, trace["power_limit"], strict=True)],
        "workload_id": wids, "policy": "fixed", "power_limit_w": trace["power_limit"].astype(float), "rep": 0,
        "time_s": trace["time_per_epoch"].to_numpy(), "energy_j": energy.to_numpy(),
        "energy_gpu_j": energy.to_numpy(), "avg_power_w": trace["average_power"].to_numpy(), "status": "ok",
    }).sort_values(["workload_id", "power_limit_w"]).reset_index(drop=True)


def meta_of(trace: pd.DataFrame, gpu: str, path: Path, left_out: dict[str, list[float]]) -> dict:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "incomplete_left_out": left_out,
        "source": "measured", "knob": "power_limit_w",
        "power_limit_table_w": sorted(float(p) for p in trace["power_limit"].unique()),
        "baseline": "max_level",
        "device": {"gpu": GPUS[gpu], "simulated": False, "power": "GPU card power read through NVML"},
        "energy": "per epoch: energy_j = time_s (time_per_epoch, s) x avg_power_w (average_power, W), GPU only",
        "time": "time_s is the duration of one training epoch",
        "origin": {"name": "Zeus NSDI'23 power trace", "file": path.name, "sha256": digest,
                   "url": "https://github.com/ml-energy/zeus", "licence": "Apache-2.0",
                   "paper": "You, Chung, Chowdhury: Zeus, USENIX NSDI 2023"},
        "features": "params_m / n_layers / hidden_size / model_type: hand table dvfslab.data.zeus.NETWORKS; "
                    "batch_size from the trace; gpu_util_pct and avg_seq_len not recorded",
        "generator": "dvfslab import zeus-nsdi",
    }


def job_meta(trace: pd.DataFrame, train_path: Path | None) -> tuple[dict[str, float], dict]:
    """``job_steps`` per workload of ``trace`` and the meta.json ``job_steps`` entry saying how."""
    wids = {workload_id(n, d, o, b) for n, d, o, b in
            zip(trace["network"], trace["dataset"], trace["optimizer"], trace["batch_size"], strict=True)}
    if train_path is None:
        return {}, {"unit": "epochs", "rule": f"none: no {TRAIN_FILE} under SRC_DIR"}
    epochs, why = job_epochs(read_train_trace(train_path))
    job = {w: e for w, e in epochs.items() if w in wids}
    without = {w: why.get(w, "no row in the train trace") for w in sorted(wids - set(job))}
    return job, {
        "unit": "epochs",
        "rule": "median over the runs (seeds) of the first epoch that reaches the dataset's target metric; a run "
                "that never reaches it counts as longer than any; no job_steps when that median is not finite",
        "target_metric": TARGETS,
        "target_source": "ml-energy/zeus examples/research_reproducibility/zeus_nsdi23/run_alibaba.py, "
                         "get_job_with_defaults",
        "file": train_path.name, "sha256": hashlib.sha256(train_path.read_bytes()).hexdigest(),
        "without": without,
    }


def import_zeus(src_dir: str | os.PathLike, gpu: str, out_dir: str | os.PathLike, eval_every: int = 2,
                keep_incomplete: bool = False) -> Dataset:
    """Convert ``summary_power_<gpu>.csv`` (and ``summary_train.csv`` when present) under
    ``src_dir`` into a dataset at ``out_dir``."""
    path = find_trace(src_dir, gpu)
    full = read_trace(path)
    trace, left_out = (full, {}) if keep_incomplete else split_incomplete(full)
    job, job_info = job_meta(trace, find_train_trace(src_dir))
    meta = {**meta_of(full, gpu, path, left_out), "job_steps": job_info}
    return write_dataset(out_dir, meta, workloads_of(trace, eval_every, job), runs_of(trace))
