"""An ad-hoc check of ``voi`` against ``zeus`` and FFG on the real traces (issue 28 helper h28b).

Not the project's benchmark (``benchmarks/real_governors.py`` is; it uses the replay's probe
model). Here, per dataset: a grouped CV (Zeus: leave one network out; LoudVA: leave one
concurrency out), every governor on the least-energy objective, each probe of a level noisy
(log-normal, 3 % over the read part of the window, shrinking as 1/sqrt(units read)) and charged at
its true mean; the whole job charged (``job_steps``), planned with the training workloads' median.
Windows: Zeus traces, Zeus's 10 + 40 iterations at an APPROXIMATE iterations per epoch (dataset
size / batch size, sizes in ``SIZES``, rounded public figures); LoudVA, 2.5 s per level (0.5 s
settle + 2 s read) in inferences at that level. Prints the mean whole-job regret (% of the baseline
job's energy) and the share of FFG's regret closed; one seed (0), no interval: a sanity check.

    python benchmarks/voi_vs_zeus_adhoc.py zeus v100 a40 p100 rtx6000
    python benchmarks/voi_vs_zeus_adhoc.py loudva agx-xavier xavier-nx nano
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from dvfslab import analysis as F
from dvfslab.analysis.steps import StepSource
from dvfslab.governors import registry as G
from dvfslab.governors.objective import Objective
from dvfslab.governors.probemodel import ProbeModel

REPO = Path(__file__).resolve().parents[1]
SIZES = {"cifar100": 50000, "imagenet": 1281167, "librispeech": 281241, "movielens-1m": 994169,
         "squad": 87599, "sentiment140": 1600000}  # training samples per epoch, approximate


class NoisyProbe:
    """Per-unit means of the dataset, read with log-normal noise; ``true_j``: what the probes cost."""

    def __init__(self, src, w, levels, model, rng):
        self.src, self.w, self.levels, self.model, self.rng = src, w, list(levels), model, rng
        self.true_j = 0.0

    def measure(self, level, units=1.0):
        t, e = self.src.per_unit(self.w, level)
        self.true_j += e * units
        s = self.model.sigma(units * self.model.read_fraction)
        return t * units, e * units * math.exp(s * self.rng.standard_normal() - s * s / 2)


def run(kind: str, name: str) -> str:
    tmp = Path(tempfile.mkdtemp())
    if kind == "zeus":
        from dvfslab.data.zeus import import_zeus
        ds = import_zeus(REPO / "data" / "external" / "zeus_nsdi23", name, tmp / name)
    else:
        from dvfslab.data.loudva import import_loudva
        ds = import_loudva(REPO / "data" / "external" / "loudva", name, tmp / name)
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    src = StepSource.from_sweep(sweep)
    ids = [w for w in sweep.workload_ids() if src.job_known(w)]
    rows = table.set_index("workload_id").loc[ids]
    folds = ([[w for w in ids if rows.loc[w, "model"] == m] for m in sorted(set(rows["model"]))]
             if kind == "zeus" else [[w] for w in ids])
    regret = {"ffg": [], "zeus": [], "voi": []}
    share = {"zeus": [], "voi": []}
    rng = np.random.default_rng(0)
    for test in folds:
        train = [w for w in ids if w not in test]
        data = F.TrainingData(sweep, table, train)
        ffg = G.make("ffg").fit(data)
        govs = {"zeus": G.make("zeus", objective=Objective()).fit(data),
                "voi": G.make("voi", objective=Objective()).fit(data)}
        plan = float(np.median([src.job_units(w) for w in train]))
        for w in test:
            levels = [float(f) for f in sweep.curve(w)[0]]
            job = src.job_units(w)
            e_of = {f: src.per_unit(w, f)[1] for f in levels}
            base, best = job * e_of[max(e_of)], job * min(e_of.values())
            if kind == "zeus":
                window = 50.0 / (SIZES[str(rows.loc[w, "task"])] / float(rows.loc[w, "batch_size"]))
                model = ProbeModel(default_window=window, read_fraction=0.8, sigma_ref=0.03, ref_units=0.8 * window,
                                   unit="epoch")
            else:
                wins = {f: 2.5 / src.per_unit(w, f)[0] for f in levels}
                model = ProbeModel(windows=wins, default_window=max(wins.values()), read_fraction=0.8, sigma_ref=0.03,
                                   ref_units=2.0 / src.per_unit(w, max(levels))[0], unit="inference")
            regret["ffg"].append(100 * (job * e_of[ffg.decide(dict(rows.loc[w])).level] - best) / base)
            for key, gov in govs.items():
                probe = NoisyProbe(src, w, levels, model, rng)
                d = gov.decide({**dict(rows.loc[w]), "plan_job_units": plan}, probe)
                level = max(e_of) if d.level is None else d.level
                total = probe.true_j + max(job - d.probe_units, 0.0) * e_of[level]
                regret[key].append(100 * (total - best) / base)
                share[key].append(d.probe_units / job)
    ffg_mean = float(np.mean(regret["ffg"]))
    parts = [f"{name}: n={len(regret['ffg'])} ffg regret {ffg_mean:.2f} %"]
    for key in ("zeus", "voi"):
        m = float(np.mean(regret[key]))
        parts.append(f"{key} {m:.2f} % (gap closed {100 * (1 - m / ffg_mean):.0f} %, median probe share "
                     f"{100 * float(np.median(share[key])):.1f} %)")
    return "; ".join(parts)


if __name__ == "__main__":
    for dataset in sys.argv[2:]:
        print(run(sys.argv[1], dataset), flush=True)
