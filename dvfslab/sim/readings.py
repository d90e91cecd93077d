"""Real AGX Orin rail readings: the lines the twin is fitted to and the lines it is checked against.

A reading is one rail on one line of one public source. The *line* is the unit: its identity is
``(source, line)`` with ``line`` the verbatim text (a tegrastats line, or one mode block of a
forum post), every rail on a line has the line's role (``fit`` or ``validation``), and no line
has both (``tests/test_twin_validation.py`` compares identities). :func:`predict_line` is how
the twin predicts a line's rails from the board state the line shows (:class:`State`).

Each reading's stated uncertainty is the quadrature sum of the components in
:data:`UNCERTAINTY` that apply to its line (docs/calibration.md, section 3.0, declared before
the twin's errors were computed); the sensor term is absolute (20 mW).

:data:`JOB_CURVES` are whole-job energies of a real fine-tuning study on an AGX Orin 64GB
(github esainulab/slmdvfs @ 9e14047, cited number by number), two curves to fit and two held out
(:mod:`dvfslab.sim.jobs` predicts them; docs/calibration.md, section 3.6).

The lines are quoted verbatim (machine output of ``tegrastats``, or figures from a forum post)
so that anyone can find them in their source and check the hash; where the search tool that
found a line did not record its repository, ``source`` says so.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dvfslab.core.errors import DvfsError
from dvfslab.sim.model import cpu_rail_w, gpu_rail_w, stress_test_gpu_rail_w
from dvfslab.sim.profiles import BoardProfile

#: relative one-sigma uncertainty components (docs/calibration.md, section 3.0)
UNCERTAINTY = {"snapshot": 0.05, "partial load": 0.25, "other module": 0.05, "forum figure": 0.10,
               "state inferred": 0.10}
SENSOR_W = 0.020  # absolute: the INA3221's 1 mA current step at the ≈20 V bus
CPU_IDLE_MHZ = 729.0  # the CPU clusters' lowest clock on AGX Orin: a cluster there counts as idle


@dataclass(frozen=True)
class State:
    """The board state a line shows. ``gpu_mhz=None``: the GPU is rail-gated (``GR3D_FREQ 0%@0``);
    ``gpu_busy``: GR3D busy fraction; ``cpu_loads`` (0–1) and ``cpu_mhz`` per core; ``stress``:
    a forum block (GPU stress on the GPU rail, CPU stress of every online core on the CPU rail)
    in that power mode."""

    gpu_mhz: float | None = None
    gpu_busy: float = 0.0
    emc_mhz: float = 2133.0
    cpu_loads: tuple[float, ...] = ()
    cpu_mhz: tuple[float, ...] = ()
    stress: str | None = None


@dataclass(frozen=True)
class Line:
    """One line of one source, with the rails it reads (watts) and its role."""

    key: str
    source: str
    line: str
    role: str  # "fit" or "validation"
    module: str
    state: State
    rails: Mapping[str, float]
    components: tuple[str, ...]
    note: str = ""
    unused: Mapping[str, str] = field(default_factory=dict)  # rail -> why the fit leaves it out

    @property
    def identity(self) -> tuple[str, str]:
        return (self.source, self.line)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.line.encode()).hexdigest()

    def sigma(self, rail: str) -> float:
        """Relative one-sigma uncertainty of the reading of ``rail`` on this line."""
        rel = sum(UNCERTAINTY[c] ** 2 for c in self.components)
        sensor = (SENSOR_W / self.rails[rail]) ** 2 if "forum figure" not in self.components else 0.0
        return math.sqrt(rel + sensor)

    def used_rails(self) -> list[str]:
        return [r for r in self.rails if r not in self.unused]


def cpu_rail_from_loads_w(profile: BoardProfile, loads: Sequence[float], clocks_mhz: Sequence[float]) -> float:
    """CPU rail of per-core loads (0–1) at per-core clocks (MHz), clusters of four cores: a cluster
    above the lowest CPU clock counts as clocked up, at its fastest core's clock."""
    p = profile
    clusters = [max(clocks_mhz[i:i + 4]) for i in range(0, len(clocks_mhz), 4)]
    total = p.cpu_idle_w
    for f in clusters:
        if f > CPU_IDLE_MHZ + 1:
            total += float(cpu_rail_w(p, 0.0, clusters=1.0, cpu_clock_ratio=f / p.cpu_fmax_mhz)) - p.cpu_idle_w
    for load, f in zip(loads, clocks_mhz, strict=True):
        total += float(cpu_rail_w(p, load, cpu_clock_ratio=f / p.cpu_fmax_mhz)) - p.cpu_idle_w
    return total


def _cpu_stress_w(profile: BoardProfile, mode: str) -> float:
    """Every online core of ``mode`` at 100 % at the mode's top CPU clock."""
    pm = profile.power_mode(mode)
    n = profile.cpu_online(pm)
    f = profile.cpu_max_mhz(pm)
    return cpu_rail_from_loads_w(profile, [1.0] * n, [f] * n)


def predict_line(profile: BoardProfile, line: Line) -> dict[str, float]:
    """The twin's watts for each rail of ``line`` in the state the line shows.

    A rail-gated GPU costs the SoC floor plus the memory clock above its idle level; a powered
    GPU adds leakage, clock tree and dynamic power at activity ``busy × activity_kernel_overhead``
    (an unknown light load: the twin's activity of short kernels). ``VIN_SYS_5V0`` and
    ``VDDQ_VDD2_1V8AO`` are their idle values (the twin has no load model for them).
    """
    s, p = line.state, profile
    out: dict[str, float] = {}
    for rail in line.rails:
        if s.stress is not None:
            w = stress_test_gpu_rail_w(p, s.stress) if rail == p.gpu_rail else _cpu_stress_w(p, s.stress)
        elif rail == p.gpu_rail:
            if s.gpu_mhz is None:
                w = float(gpu_rail_w(p, p.fmin_mhz, 0.0, emc=s.emc_mhz, powered=False))
            else:
                w = float(gpu_rail_w(p, s.gpu_mhz, s.gpu_busy * p.activity_kernel_overhead, emc=s.emc_mhz))
        elif rail == p.cpu_rail:
            w = cpu_rail_from_loads_w(p, s.cpu_loads, s.cpu_mhz)
        else:
            w = p.other_rails_w[rail]
        out[rail] = float(w)
    return out


def _cores(spec: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``CPU [14%@2188,5%@2112,...]`` -> (loads 0–1, clocks MHz)."""
    pairs = [c.split("%@") for c in spec.split(",")]
    return tuple(float(a) / 100 for a, _ in pairs), tuple(float(b) for _, b in pairs)


_IDLE_12 = ",".join(["0%@729"] * 12)
_DD = ("DataDog/datadog-agent, pkg/collector/corechecks/nvidia/jetson/jetson_test.go "
       "(commit 020f92f4a5f629e0838d2f460c371f3e455628cf), constant {}")
_FORUM = ("NVIDIA developer forum, 'Maximum power consumption bounds for Orin AGX' "
          "(https://forums.developer.nvidia.com/t/maximum-power-consumption-bounds-for-orin-agx/323456): "
          "GPU and CPU stress tests run separately on a 32GB developer kit with a 50W mode")
_DEVKIT = "P3701-0000 (developer kit, 32 GB; 12 cores, 8 TPCs like the 64GB module)"
_M64 = "P3701-0005 (64GB)"

LINES: tuple[Line, ...] = (
    # ------------------------------------------------------------------ fit
    Line("idle-64gb-jp5",
         "a public setup guide for an AGX Orin 64GB on JetPack 5 (shell prompt catid@orin), found by a code "
         "search that did not record the repository",
         "04-24-2023 00:01:24 RAM 1282/62795MB (lfb 15152x4MB) SWAP 0/31398MB (cached 0MB) CPU [" + _IDLE_12
         + "] EMC_FREQ 0%@2133 GR3D_FREQ 0%@0 GR3D2_FREQ 0%@0 VIC_FREQ 729 APE 174 CV0@-256C CPU@42.593C "
         "Tboard@32C SOC2@39.343C Tdiode@33.25C SOC0@39.375C CV1@-256C GPU@-256C tj@42.593C SOC1@40.468C "
         "CV2@-256C VDD_GPU_SOC 2399mW/2399mW VDD_CPU_CV 400mW/400mW VIN_SYS_5V0 4032mW/4032mW NC 0mW/0mW "
         "VDDQ_VDD2_1V8AO 301mW/301mW NC 0mW/0mW",
         "fit", _M64, State(None, 0.0, 2133.0, *_cores(_IDLE_12)),
         {"VDD_GPU_SOC": 2.399, "VDD_CPU_CV": 0.400, "VIN_SYS_5V0": 4.032, "VDDQ_VDD2_1V8AO": 0.301},
         ("snapshot",)),
    Line("idle-64gb-go",
         "test data of a public Go tegrastats parser (an AGX Orin 64GB, JetPack 5), found by a code search that "
         "did not record the repository",
         "04-11-2025 10:36:27 RAM 4321/62801MB (lfb 1759x4MB) SWAP 19/31400MB (cached 0MB) CPU [" + _IDLE_12
         + "] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[0,0] VIC_FREQ 729 APE 174 CV0@-256C CPU@44.562C Tboard@32C "
         "SOC2@40.093C Tdiode@33C SOC0@41.093C CV1@-256C GPU@-256C tj@44.343C SOC1@41.25C CV2@-256C "
         "VDD_GPU_SOC 2340mW/2340mW VDD_CPU_CV 390mW/390mW VIN_SYS_5V0 4025mW/4025mW NC 0mW/0mW "
         "VDDQ_VDD2_1V8AO 301mW/301mW NC 0mW/0mW",
         "fit", _M64, State(None, 0.0, 2133.0, *_cores(_IDLE_12)),
         {"VDD_GPU_SOC": 2.340, "VDD_CPU_CV": 0.390, "VIN_SYS_5V0": 4.025, "VDDQ_VDD2_1V8AO": 0.301},
         ("snapshot",)),
    Line("clocks-max-64gb", _DD.format("orinSample"),
         "RAM 2448/62840MB (lfb 2x4MB) SWAP 0/31420MB (cached 0MB) CPU [" + ",".join(["0%@2201"] * 12)
         + "] GR3D_FREQ 0% cpu@42C soc2@37.843C soc0@39.187C gpu@37.75C tj@42C soc1@37.937C "
         "VDD_GPU_SOC 4940mW/4940mW VDD_CPU_CV 988mW/988mW VIN_SYS_5V0 4442mW/4442mW",
         "fit", _M64, State(1300.5, 0.0, 3199.0, (0.0,) * 12, (2201.0,) * 12),
         {"VDD_GPU_SOC": 4.940, "VDD_CPU_CV": 0.988, "VIN_SYS_5V0": 4.442},
         ("snapshot", "state inferred"),
         note="every core at 2201 MHz and 0 % load: the state jetson_clocks leaves (GPU held at 1300.5 MHz, "
              "EMC at 3199 MHz; the line prints neither clock)",
         unused={"VIN_SYS_5V0": "jetson_clocks also runs the fan at full speed, which the twin does not model"}),
    Line("forum-maxn", _FORUM, "MAXN MODE (mode 0): GPU: 40.4 W CPU: 15.2 W", "fit", _DEVKIT,
         State(stress="MAXN"), {"VDD_GPU_SOC": 40.4, "VDD_CPU_CV": 15.2}, ("forum figure", "other module")),
    Line("forum-50w", _FORUM, "50W MODE: mode 3 GPU: 18.4 W CPU: 6.0 W", "fit", _DEVKIT,
         State(stress="MODE_50W"), {"VDD_GPU_SOC": 18.4, "VDD_CPU_CV": 6.0}, ("forum figure", "other module")),
    Line("forum-30w", _FORUM, "30W MODE (it disables 4 cpu cores):  mode 2 GPU: 7.6W CPU: 5.6W", "fit", _DEVKIT,
         State(stress="MODE_30W"), {"VDD_GPU_SOC": 7.6, "VDD_CPU_CV": 5.6}, ("forum figure", "other module")),
    # ------------------------------------------------------------------ validation
    Line("nvenc-64gb-jp6",
         "test data of a public Go tegrastats parser (an AGX Orin 64GB on JetPack 6, L4T 36.4.4, encoding video), "
         "found by a code search that did not record the repository",
         "RAM 18207/62841MB (lfb 466x4MB) SWAP 86/31420MB (cached 0MB) CPU [14%@2188,5%@2112,8%@2035,14%@2201,"
         "46%@1267,47%@1267,2%@1267,10%@1267,4%@1036,5%@1036,6%@1036,10%@1036] EMC_FREQ 3%@2133 GR3D_FREQ "
         "0%@[0,0] NVENC 79%@166 NVDEC off NVJPG off NVJPG1 off VIC 36%@115 OFA off NVDLA0 off NVDLA1 off "
         "PVA0_FREQ off APE 174 cpu@52.562C soc2@48.437C soc0@49.093C tj@52.562C soc1@49.656C "
         "VDD_GPU_SOC 2412mW/2412mW VDD_CPU_CV 1607mW/1607mW VIN_SYS_5V0 4707mW/4707mW",
         "validation", _M64,
         State(None, 0.0, 2133.0, *_cores("14%@2188,5%@2112,8%@2035,14%@2201,46%@1267,47%@1267,2%@1267,10%@1267,"
                                          "4%@1036,5%@1036,6%@1036,10%@1036")),
         {"VDD_GPU_SOC": 2.412, "VDD_CPU_CV": 1.607, "VIN_SYS_5V0": 4.707}, ("snapshot", "partial load"),
         note="GPU rail-gated, the video encoder busy (79 %), per-core loads 2-47 %"),
    Line("jp7-12pct",
         "rbonghi/jetson_stats, jtop/tests/test_06_tegra_parse.py (commit 0db437a32f137cd836d71f9c0ba3f422d96cdd01), "
         "constant TEGRASTATS_ORIN_JP7 ('Real tegrastats line from a Jetson AGX Orin Developer Kit running JetPack 7.2')",
         "07-25-2026 09:08:28 RAM 20642/62817MB (lfb 1x2MB) CPU [23%@2201,10%@2201,4%@2201,14%@2201,30%@2201,"
         "18%@2201,10%@2201,10%@2201,33%@2201,7%@2201,5%@2201,27%@2201] EMC_FREQ 3%@3199 GR3D_FREQ "
         "12%@[1300,1300] NVENC0 off NVDEC0 off NVJPG0 off NVJPG1 off VIC off OFA off NVDLA0 off NVDLA1 off "
         "PVA0_FREQ off APE 174 cpu@52.968C/52.968C soc2@48.406C/48.406C soc0@49.531C/49.531C "
         "gpu@47.625C/47.625C VDD_GPU_SOC 5139mW/5139mW/5139mW VDD_CPU_CV 3268mW/3268mW/3268mW "
         "VIN_SYS_5V0 5500mW/5500mW/5500mW",
         "validation", _M64,
         State(1300.5, 0.12, 3199.0, *_cores("23%@2201,10%@2201,4%@2201,14%@2201,30%@2201,18%@2201,10%@2201,"
                                             "10%@2201,33%@2201,7%@2201,5%@2201,27%@2201")),
         {"VDD_GPU_SOC": 5.139, "VDD_CPU_CV": 3.268, "VIN_SYS_5V0": 5.500}, ("snapshot", "partial load"),
         note="GPU 12 % busy at 1300 MHz, EMC at 3199 MHz, per-core loads 4-33 % at 2201 MHz"),
    Line("r36-305mhz", _DD.format("r36Sample"),
         "RAM 29114/30697MB (lfb 3x4MB)    SWAP 4915/15348MB (cached 1MB) CPU [3%@729,4%@729,0%@729,1%@729,"
         "0%@2201,100%@2201,1%@2201,0%@2201,100%@2201,0%@2201,0%@2201,0%@2201] EMC_FREQ 1%@2133 GR3D_FREQ "
         "0%@[305,305] NVENC      off  NVDEC    off NVJPG off NVJPG1    off         VIC        off          "
         "OFA           off          NVDLA0    off       NVDLA1     off          PVA0_FREQ off         APE   "
         "        174        cpu@53.062C soc2@48.25C soc0@48.843C  gpu@47.812C tj@53.062C soc1@48.968C    "
         "VDD_GPU_SOC 3205mW/3205mW VDD_CPU_CV 4405mW/4405mW VIN_SYS_5V0 4767mW/4767mW",
         "validation", _DEVKIT,
         State(305.0, 0.0, 2133.0, *_cores("3%@729,4%@729,0%@729,1%@729,0%@2201,100%@2201,1%@2201,0%@2201,"
                                           "100%@2201,0%@2201,0%@2201,0%@2201")),
         {"VDD_GPU_SOC": 3.205, "VDD_CPU_CV": 4.405, "VIN_SYS_5V0": 4.767}, ("snapshot", "other module"),
         note="GPU powered at 305 MHz with 0 % load, two cores at 100 % in two clusters at 2201 MHz"),
    Line("forum-15w", _FORUM, "15W MODE (it disables 8 cpu cores): mode 1 GPU: 5.2W CPU: 1.6W", "validation",
         _DEVKIT, State(stress="MODE_15W"), {"VDD_GPU_SOC": 5.2, "VDD_CPU_CV": 1.6}, ("forum figure", "other module")),
)


def lines(role: str | None = None) -> list[Line]:
    """The lines with ``role`` (``fit`` / ``validation``), or all."""
    return [ln for ln in LINES if role is None or ln.role == role]


# ---------------------------------------------------------------------------------- whole jobs
#: the real study: an MSc thesis (Nazarbayev University, 2026) whose code and plots are public at
#: github esainulab/slmdvfs (no licence: its numbers are cited as readings, none of its code is used)
STUDY = "github esainulab/slmdvfs"
#: the GPU levels of the study (chapter3_methodology_answers.txt @ 9e14047, lines 47 and 320-332)
STUDY_LEVELS_MHZ = (306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5)
#: one pixel of the Pythia-14M plot's y axis, in J: gridlines 2000 J at row 403 and 2800 J at row 129
PYTHIA_PLOT_J_PER_PX = 800.0 / (403 - 129)


@dataclass(frozen=True)
class JobCurve:
    """The whole-job energy (``VDD_GPU_SOC + VDD_CPU_CV``, mean power × train wall time) of one
    fine-tuning job of the real study at each GPU level it was locked at (userspace governor, CPU
    and EMC left to their governors) and under MAXN with ``nvhost_podgov``. One run per level
    (the study: "Each configuration run ONCE (no repeated trials) / Variance not characterized").

    ``where`` cites the place each number is read; ``assumed`` lists what the study does not say
    about the job and this reading assumes; ``reading_j`` is the reading's own resolution (a number
    typed in a script: 0; a point read off a plot: its pixel)."""

    key: str
    where: str
    role: str  # "fit" or "validation"
    model: str
    task: str
    batch_size: int
    max_seq_len: int
    precision: str
    steps: int
    energy_j: Mapping[float, float]  # GPU level (MHz) -> whole-job energy (J)
    maxn_j: float
    assumed: tuple[str, ...] = ()
    reading_j: float = 0.0
    #: what the study's "MAXN" run was: ``"maxn"`` (nvhost_podgov over the whole table), a level in
    #: MHz (the governor confined to that one level by devfreq limits left pinned), or ``None`` (unknown)
    maxn_run: str | float | None = "maxn"
    maxn_evidence: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        return (STUDY, self.key)

    @property
    def workload_id(self) -> str:
        return f"{self.model}/{self.task}"

    @property
    def ran_maxn(self) -> bool:
        """Whether the study's "MAXN" run of this job really ran MAXN (``nvhost_podgov``, uncapped)."""
        return self.maxn_run == "maxn"


_PLOTS = "src/plots/DeBERTa_Xlarge.py @ 9e14047"
_QNLI_SH = "scripts/experiments/run_gpu_freq_experiment_qnli.sh @ 9e14047"
_DEBERTA_QNLI_MAXN = (
    f"confined at 816 MHz, not MAXN: {_QNLI_SH} pins the GPU in its preflight (preflight_checks, lines 199-200: "
    "setup_gpu_governor, then set_gpu_freq 816, which writes 816 MHz to max_freq and then min_freq, lines 92-99); "
    "its BASELINE branch (lines 258-263) only writes nvhost_podgov to the governor and leaves min_freq = max_freq = "
    "816 MHz; the runs are BERT_FREQS=(BASELINE) (line 16), then DEBERTA_FREQS=(BASELINE 816 714 612) (line 20), so "
    "DeBERTa's BASELINE follows two runs that never reset the limits (study_run_labels reads this from the script). "
    "Its energy is the 816 MHz run's + 0.48 % (552288.86 vs 549624.25 J), inside the 1.2 % run-to-run scatter")
_METHOD = "chapter3_methodology_answers.txt @ 9e14047"
JOB_CURVES: tuple[JobCurve, ...] = (
    JobCurve("deberta-v2-xlarge/qnli",
             f"{_PLOTS}, lines 11-17 ('qnli_data' levels line 11, 'energy_j' lines 13-14, 'qnli_mode0_energy' "
             f"line 17); batch 16, max length 256, FP32: {_METHOD}, lines 159, 162, 168; 6546 steps: line 145",
             "fit", "deberta-v2-xlarge", "qnli", 16, 256, "fp32", 6546,
             dict(zip(STUDY_LEVELS_MHZ, (693591.48, 596669.90, 545930.79, 536503.90, 539312.18, 549624.25,
                                         572217.63, 610475.85, 641276.34, 698390.84, 737041.01), strict=True)),
             552288.86, maxn_run=816.0, maxn_evidence=_DEBERTA_QNLI_MAXN),
    JobCurve("pythia-14m/qnli",
             "src/plots/Pythia-14M_QNLI.png, added in db46d36 (deleted in 950a8f2), read off the image: each "
             "marker's centre (pixel rows of its disc) on the y axis set by the gridlines (2000 J at row 403, "
             "2800 J at row 129: 2.92 J per pixel), the 408 MHz point under the optimum star from the star's "
             "tips (top row 379, lower tips row 406: centre row 393.9), MAXN the dashed line (row 372.5); "
             "max length 256: the study's QNLI length (" + _METHOD + ", line 162)",
             "fit", "pythia-14m", "qnli", 256, 256, "fp16", 410,
             dict(zip(STUDY_LEVELS_MHZ, (2108.0, 2027.0, 2033.0, 2071.0, 2104.0, 2255.0, 2363.0, 2532.0, 2662.0,
                                         2705.0, 2863.0), strict=True)),
             2090.0,
             assumed=("batch 256: not stated for Pythia-14M; the study's batch for its other 14M-parameter model on "
                      "QNLI (BERT-tiny, " + _METHOD + ", line 155)",
                      "FP16: the training script's default (src/training/fullft/BERT_sst2_FullFT.py @ 9e14047, "
                      "line 65, '--fp16' default True; only DeBERTa passes --no-fp16)",
                      "1 epoch of 104,743 examples: ceil(104743 / 256) = 410 steps (" + _METHOD + ", lines 117, 147)"),
             reading_j=PYTHIA_PLOT_J_PER_PX, maxn_run=None,
             maxn_evidence="no script of the study at 9e14047 runs Pythia-14M (none of scripts/experiments/*.sh names "
                           "it), so how its MAXN run set the devfreq limits is not recorded; its 2090 J lies within "
                           "3.1 % of every level from 306 to 714 MHz (2108, 2027, 2033, 2071, 2104 J: -0.9, +3.1, "
                           "+2.8, +0.9, -0.7 %) and 7.3 % below 816 MHz: its clock cannot be read from it"),
    JobCurve("deberta-v2-xlarge/sst2",
             f"{_PLOTS}, lines 20-27 ('sst2_data' levels line 21, 'energy_j' lines 23-24, 'sst2_mode0_energy' "
             f"line 27); batch 16, max length 128, FP32: {_METHOD}, lines 158, 162, 168; 4209 steps: line 146",
             "validation", "deberta-v2-xlarge", "sst2", 16, 128, "fp32", 4209,
             dict(zip(STUDY_LEVELS_MHZ, (55292.41, 47512.24, 43025.92, 41044.05, 40927.33, 40981.54, 42053.11,
                                         44378.81, 46298.01, 49986.88, 52475.58), strict=True)),
             52317.17,
             maxn_evidence="ran MAXN: its energy is the 1300 MHz run's - 0.30 % (52317.17 vs 52475.58 J), as a run "
                           "that the governor holds at about 1300 MHz is (the study: 'observed ~1300 MHz during "
                           "training' under MAXN, " + _METHOD + ", line 203); the script that ran it is not in the "
                           "repository"),
    JobCurve("gemma-2b/qnli",
             "src/plots/gemma2b_qnli.py @ acf9cd7 (unchanged @ 9e14047), lines 12-19 ('config' lines 12-14, "
             "'energy_j' lines 17-18: Mode0 first, then 306, 408, 510, 1224, 1300 MHz)",
             "validation", "gemma-2b", "qnli", 16, 256, "fp16", 6547,
             {306.0: 721533.29, 408.0: 615101.16, 510.0: 595930.38, 1224.0: 712022.74, 1300.5: 748437.96},
             694858.59,
             maxn_evidence="ran MAXN: the Mode0 row logs a mean GPU clock of 1293 MHz (src/plots/gemma2b_qnli.py @ "
                           "acf9cd7, line 15, 'gpu_freq_mhz' first entry; the 1300 MHz run logs 1295)",
             assumed=("batch 16: not stated for Gemma-2B; the study's batch for its other large model (DeBERTa, "
                      + _METHOD + ", line 159)",
                      "FP16: the training script's default (src/training/fullft/BERT_sst2_FullFT.py @ 9e14047, line 65)",
                      "max length 256 and 1 epoch: the study's QNLI settings (" + _METHOD + ", lines 147, 162): "
                      "ceil(104743 / 16) = 6547 steps")),
)


def job_curves(role: str | None = None) -> list[JobCurve]:
    """The whole-job curves with ``role`` (``fit`` / ``validation``), or all."""
    return [c for c in JOB_CURVES if role is None or c.role == role]


# ------------------------------------------------------------------- the study's run labels
_FUNC = r"^{name}\(\)\s*\{{(?P<body>.*?)^\}}"


def _function_body(script: str, name: str) -> str:
    m = re.search(_FUNC.format(name=re.escape(name)), script, re.S | re.M)
    return m.group("body") if m else ""


def _writes(text: str, node: str) -> bool:
    """Whether ``text`` writes the devfreq file ``node`` (``echo ... > .../node``)."""
    return re.search(r">\s*\S*/" + node + r"\b", text) is not None


def _pins_of(text: str, setter: str) -> list[float]:
    return [float(m) for m in re.findall(rf"^\s*{re.escape(setter)}\s+(\d+(?:\.\d+)?)\s*$", text, re.M)]


def study_run_labels(script: str) -> list[dict]:
    """What each run of one of the study's sweep scripts really ran, read from the script's text.

    The script pins the GPU with a ``set_gpu_freq N`` function that writes N to both ``max_freq``
    and ``min_freq``; its ``preflight_checks`` may call it once before any run; a run of the level
    ``BASELINE`` takes the branch ``if [ "$freq" = "BASELINE" ]``. devfreq keeps ``min_freq`` and
    ``max_freq`` across a change of governor (they are the user's QoS limits, not the governor's),
    so a BASELINE branch that writes neither leaves the governor confined to the range the runs
    before it left (the preflight pin, or the previous run's level); one that writes the table's
    ends (or calls a function that does) is uncapped MAXN. The runs are the ``for freq in
    "${ARRAY[@]}"`` loops in the order they appear, each over its ``ARRAY=(...)`` line.

    Returns one dict per run: ``array``, ``label`` (as the script names the run), ``governor``,
    ``min_mhz`` / ``max_mhz`` (None: the table's end) and ``ran``: ``"locked"``, ``"maxn"`` or
    ``"confined"`` (a BASELINE run whose limits were left pinned at one level).
    """
    setter = _function_body(script, "set_gpu_freq")
    pins_both = _writes(setter, "max_freq") and _writes(setter, "min_freq")
    if not pins_both:
        raise DvfsError("study_run_labels: the script has no set_gpu_freq() that writes both max_freq and min_freq")
    branch = re.search(r'if \[ "\$freq" = "BASELINE" \]; then(?P<body>.*?)^\s*else', script, re.S | re.M)
    if branch is None:
        raise DvfsError("study_run_labels: the script has no BASELINE branch (if [ \"$freq\" = \"BASELINE\" ]; then)")
    body = branch.group("body")
    resetters = [name for name in re.findall(r"^(\w+)\(\)\s*\{", script, re.M)
                 if name != "set_gpu_freq" and _writes(_function_body(script, name), "max_freq")
                 and _writes(_function_body(script, name), "min_freq")]
    resets = (_writes(body, "max_freq") and _writes(body, "min_freq")) or any(
        re.search(rf"^\s*{n}\b", body, re.M) for n in resetters)
    pinned: list[float | None] = [None, None]  # min, max left by what ran before
    pre = _pins_of(_function_body(script, "preflight_checks"), "set_gpu_freq")
    if pre:
        pinned = [pre[-1], pre[-1]]
    arrays = {m.group(1): m.group(2).split() for m in re.finditer(r"^(\w+)=\((.*?)\)", script, re.M)}
    runs = []
    for name in re.findall(r'^\s*for freq in "\$\{(\w+)\[@\]\}"', script, re.M):
        for label in arrays.get(name, []):
            if label == "BASELINE":
                if resets:
                    pinned = [None, None]
                lo, hi = pinned
                ran = "maxn" if (lo, hi) == (None, None) else ("confined" if lo == hi else "limited")
                runs.append({"array": name, "label": label, "governor": "nvhost_podgov", "min_mhz": lo,
                             "max_mhz": hi, "ran": ran})
            else:
                f = float(label)
                pinned = [f, f]
                runs.append({"array": name, "label": label, "governor": "userspace", "min_mhz": f, "max_mhz": f,
                             "ran": "locked"})
    return runs
