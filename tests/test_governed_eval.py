"""The evaluation replays a measuring governor through the live runner (issue 35: "what the
figures measure is what ``govern`` runs: one code path").

A hand-written dataset: one workload, three GPU clocks, a job of 100 units, the power sensor read
every 0.125 s (meta.json ``sensor_interval_s``), the clock's settle 0.2 s
(``dvfslab.measure.windows.SETTLE_S``). Per unit (runs of 20 units, two repetitions 0.1 % apart,
so the reading noise is the rep-to-rep CV, never 0):

    default (MAXN, the top clock): 0.125 s, 1.0 J;  400 MHz: 0.25 s, 0.8 J;
    600 MHz: 0.1875 s, 0.625 J (the least energy);  800 MHz: 0.125 s, 1.0 J.

Binary fractions: the hand sums below are exact in floating point.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dvfslab import analysis as F
from dvfslab.data.contract import load_dataset, write_dataset
from dvfslab.evaluation.recipe import evaluate_dataset
from dvfslab.measure.windows import SENSOR_SAMPLES, SETTLE_S

WID = "hand/one"
PER_UNIT = {400.0: (0.25, 0.8), 600.0: (0.1875, 0.625), 800.0: (0.125, 1.0), None: (0.125, 1.0)}
RUN_UNITS = 20


def _dataset(root):
    runs = []
    for level, (t, e) in PER_UNIT.items():
        for rep, wobble in enumerate((1.0, 1.001)):
            energy = RUN_UNITS * e * wobble
            runs.append({"workload_id": WID, "policy": "fixed" if level else "maxn", "gpu_freq_mhz": level, "rep": rep,
                         "time_s": RUN_UNITS * t, "energy_j": energy, "avg_power_w": energy / (RUN_UNITS * t),
                         "gpu_util_pct": 90.0, "mean_gpu_freq_mhz": level or 800.0, "steps": RUN_UNITS,
                         "status": "ok", "started_at": "2026-01-01T00:00:00Z"})
    runs = pd.DataFrame(runs)
    runs.insert(0, "run_id", [f"r{i:03d}" for i in range(len(runs))])
    workloads = pd.DataFrame([{"workload_id": WID, "model": "hand", "model_family": "hand", "model_type": "encoder",
                               "params_m": 10.0, "n_layers": 2, "hidden_size": 128, "task": "one", "avg_seq_len": 20.0,
                               "max_seq_len": 128, "batch_size": 8, "split": "characterization", "job_steps": 100}])
    meta = {"source": "simulated", "device": {"board": "hand-written 3-level board", "gpu": "none", "jetpack": "n/a",
                                              "power_mode": "MAXN"},
            "freq_table_mhz": [400.0, 600.0, 800.0], "baseline": "maxn", "created_at": "2026-01-01T00:00:00Z",
            "generator": "tests/test_governed_eval.py (hand-written)", "sensor_interval_s": 0.125}
    write_dataset(root, meta, workloads, runs)
    return root


def test_search_s_row_in_the_recipe_is_the_runner_s_energy_by_hand(tmp_path):
    """``search`` (trained: its prior is FFG's level, 600) replayed by the recipe runs through the
    live runner on the replay board. By hand (tau = 0.125 s at the default, interval 0.125 s,
    settle 0.2 s): unit 1 is start-up; the calibration reads 5 units (>= 2 units and >= 5 x 0.125
    = 0.625 s); two baseline windows of 5 units: 16 units at the default. Each probe: 600 settles
    2 units (0.1875 < 0.2 <= 0.375) and reads 4 (0.75 s >= 0.625 s; 3 = 0.5625 s is short): 6
    units; 400 settles 1 (0.25 >= 0.2) and reads 3 (0.75 s): 4 units; 800 settles 2 (0.125,
    0.25) and reads 5 (0.625 s): 7 units. 600 is the least of the three and held: 100 - 16 - 4 - 7
    = 73 units at 600 in all (its probe included, in whatever order the probes ran).
    Whole job: 23 x 1.0 + 4 x 0.8 + 73 x 0.625 = 71.825 J; 23 x 0.125 + 4 x 0.25 + 73 x 0.1875 =
    17.5625 s; the baseline job 100 x 1.0 = 100 J; the oracle 100 x 0.625 = 62.5 J: regret
    (71.825 - 62.5) / 100 = 9.325 %."""
    assert SENSOR_SAMPLES == 5 and SETTLE_S == 0.2  # the figures the hand sums use
    ds = load_dataset(_dataset(tmp_path / "ds"))
    sweep = F.sweep_from_dataset(ds)
    table = F.feature_table(sweep)
    ev = evaluate_dataset(sweep, table, [WID], [WID], names=["ffg", "search"], candidates=[], cv=False)
    row = ev.per.set_index("policy").loc["search"]
    assert row["error"] == "" and row["level"] == 600.0 and row["profiling_steps"] == 3
    # the baseline's whole job: its rep mean 20.01 J a run (1.0005 J a unit) x 100 units
    base = 100 * 1.0005
    assert row["job_baseline_energy_j"] == pytest.approx(base, abs=1e-9)
    # the board serves the rep means: each level's energy per unit is its figure x 1.0005
    assert row["job_energy_j"] == pytest.approx(71.825 * 1.0005, abs=1e-9)
    assert row["job_time_s"] == pytest.approx(17.5625, abs=1e-9)
    assert row["plan_job_units"] == 100.0 and row["probe_units"] > 0
    assert row["job_regret_pct"] == pytest.approx(100 * (71.825 - 62.5) * 1.0005 / base, abs=1e-9)
    # the per-run figures are the job's first 20 units: 16 at the default, then 4 of the first probe
    # (search starts at its prior, 600: its settle's 2 units and 2 of its read)
    assert row["energy_j"] == pytest.approx((16 * 1.0 + 4 * 0.625) * 1.0005, abs=1e-9)
    # FFG decides up front: the job at 600 from the first unit (the in-process charge, no probe)
    ffg = ev.per.set_index("policy").loc["ffg"]
    assert ffg["job_energy_j"] == pytest.approx(100 * 0.625 * 1.0005, abs=1e-9)


def test_the_fast_hold_keeps_the_job_s_true_account_to_the_joule():
    """The replay board's fast hold (the rest of the job in one event once the runner decided)
    leaves the job's true account as window by window: ``search`` on the hand cell of
    tests/test_governed_run.py (settle 0.25 s), 100 units: 16 at the default, 7 at 800, 4 at 400,
    73 at 600 = 71.825 J by hand (that file's derivation), both ways; the draws before the
    decision are the same, so the decision is too."""
    from dvfslab.job.policy import job_governor
    from dvfslab.job.replay import ReplayCell, govern_replay

    cell = ReplayCell({400.0: (0.25, 0.8), 600.0: (0.1875, 0.625), 800.0: (0.125, 1.0)}, (0.125, 1.0))
    runs = [govern_replay(job_governor("search"), cell, 100, seed=7, sigma_sample=0.02, interval_s=0.125,
                          settle_s=0.25, fast_hold=fast) for fast in (False, True)]
    for s in runs:
        assert s["chosen_level"] == 600.0 and s["probes"] == 3
        assert s["true_units_at"] == {"default": 16.0, "600": 73.0, "400": 4.0, "800": 7.0}
        assert s["true_energy_j"] == pytest.approx(71.825, abs=1e-9)
        assert s["true_time_s"] == pytest.approx(17.5625, abs=1e-9)
    assert runs[0]["probe_units"] == runs[1]["probe_units"]


def test_a_zeus_epoch_is_served_as_its_iterations(tmp_path):
    """A Zeus import's unit is an epoch; the replay board serves iterations: CIFAR-100 at batch 128
    has ceil(50000 / 128) = 391 iterations an epoch, so an epoch of 39.1 s and 3910 J is 391
    iterations of 0.1 s and 10 J, and the probe model's epoch is 391 units."""
    from dvfslab.evaluation import probes as P
    from dvfslab.evaluation.governed import board_units, cell_of

    class Sweep:  # the parts board_units and cell_of read
        knob = type("K", (), {"name": "power_limit_w"})()
        workloads = pd.DataFrame([{"workload_id": "w", "task": "cifar100", "batch_size": 128}])
        dataset, simulated = "zeus-like", False

        def curve(self, wid):
            return [200.0], None

    class Steps:
        meta = {"generator": "dvfslab import zeus-nsdi"}

        def per_unit(self, wid, level):
            return 39.1, 3910.0

        def probe_model(self, wid):
            return None

    assert P.zeus_iterations("cifar100", 128) == 391.0
    assert board_units(Sweep(), Steps(), "w") == (391.0, "iteration")
    cell = cell_of(Sweep(), Steps(), "w")
    assert cell.at(200.0) == pytest.approx((0.1, 10.0), abs=1e-12) and cell.meta["epoch_units"] == 391.0
