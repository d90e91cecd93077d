"""Import the LoudVA measurements: Inception v3 inference on three real Jetson boards, swept over
every GPU clock and the request concurrency (knob: GPU clock, MHz).

LoudVA (Ioannis Loudaros, MIT; github.com/iloudaros/LoudVA) served TensorFlow's Inception v3
(Triton model ``inception_graphdef``, dynamic batching on) on a Jetson AGX Xavier (14 GPU
clocks, concurrency 1–128), a Xavier NX (15 clocks, 1–18) and a Nano (11 clocks, 1–13), and
measured it with Triton's ``perf_analyzer`` at one concurrency at a time while ``tegrastats``
logged power every 500 ms. Per board and clock the archive holds two files, one row / line per
concurrency in the same order (``tests/ihelper.py`` ``profiling``; the files are joined by
position, as LoudVA joins them):

* ``performance/freqs/performance_measurements_freq_<Hz>.csv``: perf_analyzer's CSV —
  ``Concurrency``, ``Inferences/Second`` (throughput), and the server-side latency parts in µs;
* ``power/freqs/power_measurement_stats_freq_<Hz>.csv``: ``Mean: <mW>``, the mean power over the
  tegrastats samples of that concurrency's run.

**Power** is the whole module, as LoudVA's ``scripts/shell/clean_measurements.sh`` reads
tegrastats: the sum of the six rails GPU + CPU + SOC + CV + VDDRQ + SYS5V on the AGX Xavier,
``VDD_IN`` (the module's input) on the Xavier NX, ``POM_5V_IN`` (the module's input) on the
Nano. So ``energy_j`` here is the board's energy (``energy_board_j`` holds the same number), not
the CPU + GPU rails of the paper's Orin datasets; ``energy_gpu_j`` / ``energy_cpu_j`` are empty.

**Energy per inference** = mean power ÷ throughput (W ÷ inferences/s = J per inference), and
**time per inference** = 1 ÷ throughput; each run is one inference (``steps`` = 1). Why not
LoudVA's own ``Energy`` (``energy_calculated_*.csv``, ``Profiling.csv``: mean power × the mean
*server* latency, queue + compute of one request): over a measurement of T seconds the board
uses P̄·T joules and serves X·T inferences, so a job of N inferences costs N·P̄/X — the quantity
whose least value over the clocks is the energy-optimal clock. P̄ × latency instead charges each
request the board's whole power for its whole stay on the server: with c requests in flight
(Little's law: X ≈ c / client latency) it counts the same joules about c times, and it leaves
out the time a request spends outside the server (network, client; 6 of 33 ms at concurrency 1
on the AGX Xavier at 1377 MHz, while the board still draws power). The two orderings over the
clocks differ wherever latency and throughput do not move together. LoudVA's figure is kept as
``loudva_energy_j`` beside ours. (LoudVA's energy files also number the concurrencies by row, so
where a concurrency is missing they mislabel the rest; the importer reads the concurrency from
perf_analyzer's own column.)

**Workloads** are (board, concurrency): ``inception_v3`` at concurrency c. Triton's dynamic
batcher (LoudVA ``ansible/playbooks/configure_triton.yaml``: ``dynamic_batching``, max batch 128)
groups the c requests in flight into server batches of up to c, and LoudVA labels the
concurrency "Batch Size" (``Profiling.csv``); ``batch_size`` = c is that upper bound, and the one
feature that varies between workloads (``concurrency`` keeps it under its own name). Model
size, layers and GPU utilization are not in the data (empty). Splits: in ascending concurrency
every ``eval_every``-th goes to ``evaluation`` (:func:`dvfslab.data.imported.alternate_splits`).
A concurrency not measured at every clock is left out by default (meta.json
``incomplete_left_out``; ``keep_incomplete=True`` keeps it): on the AGX Xavier LoudVA's profiling
skipped some concurrencies at 318.75, 420.75, 624.75 and 675.75 MHz after its retries.

**Baseline**: the Xavier NX was also measured under nvpmodel mode 8 (``MODE_20W_6CORE``, the
board's 20 W six-core mode, GPU clock left to its governor up to 1109.25 MHz; the mode LoudVA
returns the board to before each clock run) at every concurrency: those runs are the dynamic
baseline (``policy`` ``maxn``, ``baseline: "maxn"``). The AGX Xavier has no mode runs and the
Nano's MAXN mode-0 runs cover concurrencies 1–4 of 13 only (not imported, meta.json says so):
their baseline is the highest clock (``fmax``).

**Repetitions**: one measurement per (clock, concurrency): perf_analyzer repeats its window until
three in a row agree within the stability threshold and reports those, and the retries of
unstable ones are not kept; ``rep`` is 0.

**Whole job**: a stated number of inferences, ``job_inferences`` (default 108,000: one hour of
30 frame/s video, one inference per frame; LoudVA serves video analytics).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dvfslab.core.errors import DvfsError
from dvfslab.data.contract import (
    WORKLOAD_COLUMNS,
    WORKLOAD_EXTRA_COLUMNS,
    Dataset,
    DatasetError,
    write_dataset,
)
from dvfslab.data.imported import alternate_splits, bad_rows, complete_sweeps, read_source_csv

UPSTREAM_COMMIT = "2b4b15efa5231d445b85d500ea5ef51d381a64c3"
#: where the board folders may sit under SRC (this repo's copy or a LoudVA checkout, or the
#: ``Representative`` folder itself)
ARCHIVE_SUBDIRS = (".", "measurements/archive/Representative")
PERF_COLUMNS = ("Concurrency", "Inferences/Second", "Server Queue", "Server Compute Input",
                "Server Compute Infer", "Server Compute Output")
MODEL = "inception_v3"
DEFAULT_JOB_INFERENCES = 108_000  # one hour of 30 frame/s video
_MEAN_LINE = re.compile(r"^Mean:\s*([0-9]+(?:\.[0-9]*)?)\s*$")
_FREQ_FILE = re.compile(r"^performance_measurements_freq_([0-9]+)\.csv$")


@dataclass(frozen=True)
class Board:
    """One LoudVA board: its archive folder, what tegrastats rails its power sums, and the
    nvpmodel mode whose runs (GPU clock left dynamic, every concurrency) are its baseline."""

    folder: str
    device: str
    rails: str
    baseline_mode: int | None
    note: str


BOARDS: dict[str, Board] = {
    "agx-xavier": Board("agx-xavier-00", "NVIDIA Jetson AGX Xavier",
                        "sum of the tegrastats rails GPU + CPU + SOC + CV + VDDRQ + SYS5V (the module)", None,
                        "no nvpmodel-mode runs in the data: baseline = the highest clock"),
    "xavier-nx": Board("xavier-nx-00", "NVIDIA Jetson Xavier NX", "tegrastats VDD_IN (the module's input)", 8,
                       "baseline = nvpmodel mode 8 (MODE_20W_6CORE, dynamic GPU clock up to 1109.25 MHz)"),
    "nano": Board("LoudJetson0", "NVIDIA Jetson Nano", "tegrastats POM_5V_IN (the module's input)", None,
                  "the MAXN (nvpmodel mode 0) runs cover concurrency 1-4 of 13: not imported; "
                  "baseline = the highest clock"),
}


class LoudVAImportError(DvfsError):
    """The LoudVA archive is missing or does not look as expected."""


def find_board(src: str | os.PathLike, board: str) -> Path:
    """The ``<board folder>/measurements`` directory under ``src``."""
    if board not in BOARDS:
        raise LoudVAImportError(f"unknown board {board!r}; LoudVA measured {', '.join(BOARDS)}")
    root, folder = Path(src), BOARDS[board].folder
    for sub in ARCHIVE_SUBDIRS:
        path = root / sub / folder / "measurements"
        if (path / "performance" / "freqs").is_dir():
            return path
    raise LoudVAImportError(f"{root}: no {folder}/measurements/performance/freqs there nor under "
                            f"{ARCHIVE_SUBDIRS[1]}/ — pass the LoudVA checkout or data/external/loudva")


def read_performance(path: str | os.PathLike) -> pd.DataFrame:
    """One perf_analyzer CSV; a missing column or a bad number names the file, the column and the row."""
    path = Path(path)
    raw = read_source_csv(path, PERF_COLUMNS, "a LoudVA performance file")
    out = pd.DataFrame(index=raw.index)
    for col in PERF_COLUMNS:
        values = pd.to_numeric(raw[col].str.strip(), errors="coerce")
        bad_rows(path, raw, col, values.isna() | (values < 0) | ((values == 0) & (col in PERF_COLUMNS[:2])))
        out[col] = values
    bad_rows(path, out, "Concurrency", out["Concurrency"].duplicated(), "the same concurrency appears twice")
    return out


def read_power(path: str | os.PathLike, n_rows: int) -> list[float]:
    """The ``Mean: <mW>`` lines of a power file, in W; their number must match the performance rows."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, "file is missing", fix="every performance file needs its power file")
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    watts = []
    for i, line in enumerate(lines, start=1):
        got = _MEAN_LINE.match(line.strip())
        if got is None:
            raise DatasetError(path, f"line {i}: {line.strip()!r} is not 'Mean: <mW>'")
        watts.append(float(got.group(1)) / 1000.0)
    if len(watts) != n_rows:
        raise DatasetError(path, f"holds {len(watts)} power means for {n_rows} concurrencies in its performance file",
                           fix="the two files are joined line by line: they must have as many rows")
    return watts


def read_sweep(measurements: Path, kind: str = "freqs", name: str | None = None) -> pd.DataFrame:
    """Every (level, concurrency) row of a board: ``kind="freqs"`` all clock files, or
    ``kind="modes"`` one ``name`` (``mode_8``). Columns: ``freq_hz`` (None for a mode), the
    performance columns, ``power_w``, ``file`` and ``power_file`` (relative to the archive folder
    holding the board folders)."""
    perf_dir = measurements / "performance" / kind
    files = sorted(perf_dir.glob("performance_measurements_*.csv"))
    if name is not None:
        files = [f for f in files if f.stem == f"performance_measurements_{name}"]
    if not files:
        raise LoudVAImportError(f"{perf_dir}: no performance_measurements_{name or 'freq_<Hz>'}.csv")
    frames = []
    for perf in files:
        rows = read_performance(perf)
        power = measurements / "power" / kind / perf.name.replace("performance_measurements", "power_measurement_stats")
        rows["power_w"] = read_power(power, len(rows))
        hz = _FREQ_FILE.match(perf.name)
        rows["freq_hz"] = float(hz.group(1)) if hz else None
        rows["file"] = str(perf.relative_to(measurements.parent.parent))
        rows["power_file"] = str(power.relative_to(measurements.parent.parent))
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def workload_id(board: str, concurrency: int) -> str:
    return f"{board}/{MODEL}/c{int(concurrency):03d}"


def runs_of(rows: pd.DataFrame, board: str, policy: str) -> pd.DataFrame:
    """One run per row: per inference, ``time_s`` = 1 / throughput, ``energy_j`` = power / throughput."""
    x = rows["Inferences/Second"].to_numpy(float)
    latency_s = (rows["Server Queue"] + rows["Server Compute Input"] + rows["Server Compute Infer"]
                 + rows["Server Compute Output"]).to_numpy(float) * 1e-6
    power = rows["power_w"].to_numpy(float)
    mhz = rows["freq_hz"].astype(float) / 1e6
    wids = [workload_id(board, c) for c in rows["Concurrency"]]
    energy = power / x
    return pd.DataFrame({
        "run_id": [f"{w}@{f:g}MHz" if pd.notna(f) else f"{w}@{policy}" for w, f in zip(wids, mhz, strict=True)],
        "workload_id": wids, "policy": policy, "gpu_freq_mhz": mhz.to_numpy(),
        "rep": 0, "time_s": 1.0 / x, "energy_j": energy, "energy_board_j": energy, "avg_power_w": power,
        "steps": 1, "status": "ok", "throughput_per_s": x, "loudva_energy_j": power * latency_s,
    })


def workloads_of(concurrencies: list[int], board: str, eval_every: int, job_inferences: float) -> pd.DataFrame:
    conc = sorted(int(c) for c in concurrencies)
    rows = [{"workload_id": workload_id(board, c), "model": MODEL, "model_family": "inception", "task": "inference",
             "batch_size": c, "split": split, "job_steps": float(job_inferences), "concurrency": c}
            for c, split in zip(conc, alternate_splits(range(len(conc)), eval_every), strict=True)]
    return pd.DataFrame(rows).reindex(columns=[*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS, "concurrency"])


def _digests(measurements: Path, files) -> dict[str, str]:
    return {f: hashlib.sha256((measurements.parent.parent / f).read_bytes()).hexdigest() for f in sorted(set(files))}


def import_loudva(src: str | os.PathLike, board: str, out_dir: str | os.PathLike, *, eval_every: int = 2,
                  keep_incomplete: bool = False, job_inferences: float = DEFAULT_JOB_INFERENCES) -> Dataset:
    """Convert one board of the LoudVA archive under ``src`` into a dataset at ``out_dir``."""
    if not job_inferences > 0:
        raise LoudVAImportError(f"--job-inferences must be a positive number, got {job_inferences}")
    measurements = find_board(src, board)
    spec = BOARDS[board]
    sweep = read_sweep(measurements)
    sweep["freq_mhz"] = sweep["freq_hz"] / 1e6
    if keep_incomplete:
        kept, gaps = sweep, pd.Series(False, index=sweep.index)
    else:
        kept, gaps = complete_sweeps(sweep, ["Concurrency"], "freq_hz")
    left_out = {workload_id(board, c): sorted(float(f) for f in g["freq_mhz"])
                for c, g in sweep[gaps].groupby("Concurrency")}
    runs = [runs_of(kept, board, "fixed")]
    baseline, files = "fmax", [*sweep["file"], *sweep["power_file"]]
    if spec.baseline_mode is not None:
        mode = read_sweep(measurements, "modes", f"mode_{spec.baseline_mode}")
        mode = mode[mode["Concurrency"].isin(set(kept["Concurrency"]))]
        runs.append(runs_of(mode, board, "maxn"))
        baseline, files = "maxn", [*files, *mode["file"], *mode["power_file"]]
    levels = sorted(float(f) for f in sweep["freq_mhz"].unique())
    meta = {
        "source": "measured", "knob": "gpu_freq_mhz", "freq_table_mhz": levels, "baseline": baseline,
        "device": {"board": spec.device, "host": spec.folder, "simulated": False, "power": spec.rails,
                   "baseline": spec.note},
        "unit": "inference",
        "energy": "per inference: energy_j = mean module power (W) / throughput (inferences/s); energy_board_j the "
                  "same; loudva_energy_j = LoudVA's own mean power x mean server latency (kept for comparison)",
        "time": "time_s = 1 / throughput (s per inference at that concurrency); steps = 1",
        "job_steps": {"unit": "inferences", "value": float(job_inferences),
                      "rule": "a stated job: --job-inferences (default 108000 = one hour of 30 frame/s video)"},
        "incomplete_left_out": left_out,
        "features": "batch_size = concurrency (the most requests Triton's dynamic batcher can group); "
                    "model size, layers, GPU utilization not in the data",
        "origin": {"name": "LoudVA measurements (Representative profiling)", "licence": "MIT",
                   "url": "https://github.com/iloudaros/LoudVA", "commit": UPSTREAM_COMMIT,
                   "author": "Ioannis Loudaros", "files": _digests(measurements, files)},
        "generator": "dvfslab import loudva",
    }
    workloads = workloads_of(list(kept["Concurrency"].unique()), board, eval_every, job_inferences)
    all_runs = pd.concat(runs, ignore_index=True).sort_values(["workload_id", "policy", "gpu_freq_mhz"])
    return write_dataset(out_dir, meta, workloads, all_runs.reset_index(drop=True))
