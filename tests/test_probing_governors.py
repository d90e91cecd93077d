"""The governors that measure the job: zeus-sim (the Zeus simulator's JIT profiling charge), search (prior-guided local
search), online on any knob and table; and the recommendation's grouping on a one-model dataset.

Curves are written by hand per unit on the Orin's 11 levels (index 0 = 306 MHz ... 10 = 1300.5
MHz); the search's probe sequences below are traced by hand through the rules of
:mod:`dvfslab.governors.search` (its module doc), step by step in the comments.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_dataset

from dvfslab import analysis as F
from dvfslab.data.contract import load_dataset
from dvfslab.data.zeus import import_zeus
from dvfslab.evaluation import replay as E
from dvfslab.evaluation.govcv import blocks, cv_replay, grouping
from dvfslab.evaluation.recommend import nested_recommended, recommend
from dvfslab.governors import registry as G
from dvfslab.governors.base import ProbeStep
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.objective import Objective
from dvfslab.governors.online import OnlineGovernor
from dvfslab.governors.search import SearchGovernor, local_search, not_unimodal
from dvfslab.governors.zeus_jit import ZeusSimGovernor


class CurveProbe:
    """A probe of a hand-written curve: ``units`` at a level cost ``units`` x its per-unit figures."""

    def __init__(self, energy, time=None, levels=ORIN_FREQS_MHZ):
        self.levels = list(levels)
        self.energy = dict(zip(self.levels, energy, strict=True))
        self.time = dict(zip(self.levels, time or [1000.0 / f for f in self.levels], strict=True))
        self.asked: list[tuple[float, float]] = []

    def measure(self, level, units=1.0):
        self.asked.append((level, units))
        return self.time[level] * units, self.energy[level] * units


def _search(start_level, **params):
    gov = SearchGovernor(prior="ffg", prior_params={"level": start_level}, **params)
    return gov.fit(None)  # FFG with a given level needs no data: the search starts there


# --------------------------------------------------------------------------------------------
# search
# --------------------------------------------------------------------------------------------

U = [9.0, 7.0, 5.0, 4.0, 3.0, 2.0, 2.5, 3.5, 5.0, 6.0, 8.0]  # one valley, at index 5 (816 MHz)


def test_search_walks_a_u_in_the_traced_sequence():
    # start at index 1 (408): measure 1 (7); 0 (9) is not cheaper; 2 (5) is: walk up. Jumps of 2, 4:
    # 4 (3) cheaper, 8 (5) not: bracket (2, 8) around 4. Longer side right: probe 4 + 6//2... = 6 (2.5),
    # cheaper: bracket (4, 8) around 6; sides 2 and 2, left first: 5 (2), cheaper: bracket (4, 6) around 5;
    # both neighbours measured: stop at 5 = 816 MHz. Indices 1, 0, 2, 4, 8, 6, 5.
    probe = CurveProbe(U)
    d = _search(408.0).decide({}, probe)
    seq = [ORIN_FREQS_MHZ[i] for i in (1, 0, 2, 4, 8, 6, 5)]
    assert [lvl for lvl, _ in probe.asked] == seq and [s.level for s in d.probed] == seq
    assert d.level == 816.0 and d.note == ""
    # each level runs 1/11 of a unit (the slice Zeus gives a level of an 11-level table): 7/11 units in all
    assert all(u == pytest.approx(1 / 11) for _, u in probe.asked) and d.probe_units == pytest.approx(7 / 11)
    walk = local_search(11, 5)  # the walk itself, driven with the costs of U
    got = [next(walk)]
    try:
        while True:
            got.append(walk.send(U[got[-1]]))
    except StopIteration as stop:
        assert stop.value == 5
    assert got == [5, 4, 6]  # started at the minimum: both neighbours cost more, 3 probes


def test_search_on_two_minima_stops_at_a_local_one_and_says_so():
    # valleys at index 2 (3) and 5 (1.5); start at 1: measure 1 (4), 0 (5) not cheaper, 2 (3) cheaper:
    # up; jump 2 -> 4 (2) cheaper; jump 4 -> 8 (7) not: bracket (2, 8) around 4; right longer: 6 (3),
    # not cheaper: hi = 6; sides 2, 2: 3 (6), not cheaper: lo = 3; right longer: 5 (1.5), cheaper:
    # bracket (4, 6) around 5: stop. Measured 306..1122 except 918: index 3 (612 MHz, 6) costs more than
    # a level on each side (408's 4 ... 714's 2): the measured curve has two valleys.
    two = [5.0, 4.0, 3.0, 6.0, 2.0, 1.5, 3.0, 5.0, 7.0, 8.0, 9.0]
    probe = CurveProbe(two)
    d = _search(408.0).decide({}, probe)
    assert [lvl for lvl, _ in probe.asked] == [ORIN_FREQS_MHZ[i] for i in (1, 0, 2, 4, 8, 6, 3, 5)]
    assert d.level == 816.0
    assert "stopped at a local minimum" in d.note and "not unimodal" in d.note and "612" in d.note
    assert not_unimodal([1, 2, 3], [3.0, 1.0, 2.0]) == [] and not_unimodal([1, 2, 3], [1.0, 3.0, 2.0]) == [2]


def test_search_budget_limit_and_prior():
    probe = CurveProbe(U)
    d = _search(408.0, max_probes=3).decide({}, probe)
    # 408 (7), 306 (9), 510 (5): the budget is spent; the least measured, 510, is held
    assert len(d.probed) == 3 and d.level == 510.0 and "probe budget reached (3 levels)" in d.note
    # a slowdown limit: the top level is measured first; time per unit 1000 / f: a 50 % limit admits
    # f >= 1300.5 / 1.5 = 867 MHz. From 408 (too slow) the walk climbs: 306 slower, 510 less slow: up;
    # jumps to 714 (still too slow, less), 1122 (admissible, 5): bracket (714, top) around 1122;
    # 918 (2.5) cheaper; 816 too slow, 1020 (3.5) dearer: 918, the cheapest admissible level
    probe = CurveProbe(U)
    d = _search(408.0, objective=Objective(50.0)).decide({}, probe)
    assert [lvl for lvl, _ in probe.asked] == [1300.5, 408.0, 306.0, 510.0, 714.0, 1122.0, 918.0, 816.0, 1020.0]
    assert d.level == 918.0 and d.note == ""
    assert SearchGovernor(prior=None).fit(None).decide({}, CurveProbe(U)).level == 816.0  # from the middle
    with pytest.raises(GovernorError, match="must decide before the run"):
        SearchGovernor(prior="zeus-sim").fit(None)


def test_search_live_one_step_at_a_time():
    """Live a unit is a step: a level's 1/11 unit is served by one whole step."""
    session = _search(408.0).start({}, ORIN_FREQS_MHZ)
    seen = []
    while not session.done:
        f = session.next_level()
        seen.append(f)
        session.observe(ProbeStep(f, 1000.0 / f, U[ORIN_FREQS_MHZ.index(f)]))  # one step, one unit
    assert seen == [ORIN_FREQS_MHZ[i] for i in (1, 0, 2, 4, 8, 6, 5)] and session.next_level() == 816.0


# --------------------------------------------------------------------------------------------
# zeus-sim
# --------------------------------------------------------------------------------------------

# data/external/zeus_nsdi23/summary_power_v100.csv lines 410, 412, 414: BERT-base on SQuAD, batch 24
ZEUS_ROWS = ["squad,bert_base_uncased,24,adamw,150,2149.79,146.65184715482764",
             "squad,bert_base_uncased,24,adamw,200,1844.225,191.8274515444473",
             "squad,bert_base_uncased,24,adamw,250,1727.98,227.85675128318152"]


def test_zeus_jit_charges_the_first_epoch_as_zeus_does(tmp_path):
    """Zeus's _run_job with profile_power: epoch 1 costs the mean of every limit's epoch, the
    others the chosen limit's. By hand (bc, 12 decimals): epoch energy = time x power =
    150 W 315270.674495, 200 W 353772.981825, 250 W 393731.909082 J; mean 354258.521801 J, mean
    time 1907.331667 s; least 150 W. A 4-epoch job: 354258.521801 + 3 x 315270.674495 =
    1300070.545286 J, 1907.331667 + 3 x 2149.79 = 8356.701667 s; the baseline (250 W) 4 x
    393731.909082 = 1574927.636329 J: saving 17.452046 %."""
    src = tmp_path / "zeus"
    src.mkdir()
    (src / "summary_power_v100.csv").write_text(
        "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n" + "\n".join(ZEUS_ROWS) + "\n")
    ds = import_zeus(src, "v100", tmp_path / "out", eval_every=0)
    wl = pd.read_csv(ds.path / "workloads.csv")
    wl["job_steps"] = 4.0  # no summary_train.csv here: give the job by hand
    wl.to_csv(ds.path / "workloads.csv", index=False)
    sweep = F.sweep_from_dataset(load_dataset(ds.path))
    table = F.feature_table(sweep)
    # the trace simulator's own accounting, in process: idealised probes (no board; through the live
    # runner a measuring governor is checked by hand in tests/test_governed_eval.py)
    from dvfslab.analysis.steps import StepSource
    from dvfslab.evaluation import probes as P

    row = E.replay({"zeus-sim": ZeusSimGovernor().fit(None)}, sweep, table,
                   steps=P.idealised(StepSource.from_sweep(sweep))).iloc[0]
    assert row["level"] == 150.0 and row["profiling_steps"] == 3 and row["probe_units"] == pytest.approx(1.0)
    # the CSVs keep 6 significant digits (SOURCE.md): relative 1e-5
    assert row["job_energy_j"] == pytest.approx(1300070.545286, rel=1e-5)
    assert row["job_time_s"] == pytest.approx(8356.701667, rel=1e-5)
    assert row["job_saving_pct"] == pytest.approx(17.452046, abs=1e-3)
    assert row["probe_share_pct"] == pytest.approx(25.0)  # one of four epochs


def test_zeus_jit_session_order_ties_and_live_steps():
    levels = [100.0, 125.0, 150.0]
    probe = CurveProbe([3.0, 2.0, 2.0], [3.0, 2.0, 1.0], levels)
    d = ZeusSimGovernor().decide({}, probe)
    assert [lvl for lvl, _ in probe.asked] == [150.0, 125.0, 100.0]  # highest first, as Zeus profiles
    assert d.level == 150.0  # a tie goes to the higher level (Zeus's min keeps the first profiled)
    session = ZeusSimGovernor(units=1.0).start({}, levels)
    for f in (150.0, 125.0, 100.0):  # live: 1/3 unit per level, served by one whole step each
        assert session.next_level() == f
        session.observe(ProbeStep(f, 1.0, {150.0: 5.0, 125.0: 4.0, 100.0: 6.0}[f]))
    assert session.done and session.next_level() == 125.0


# --------------------------------------------------------------------------------------------
# online: any knob, any table
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [6, 7, 15])
def test_online_on_power_limit_tables_takes_the_measured_minimum(n):
    # 6-15 levels: the 5 spread levels put one within a level of index n // 3 (6: 0 1 2 4 5; 7: 0 2 3 4 6;
    # 15: 0 4 7 10 14), the fine phase measures it and its neighbours: exact measurements find it
    levels = [100.0 + 25.0 * i for i in range(n)]
    best = levels[n // 3]
    energy = [1.0 + ((f - best) / levels[-1]) ** 2 for f in levels]
    d = OnlineGovernor(model="measured").decide({}, CurveProbe(energy, [100.0 / f for f in levels], levels))
    assert d.level == best and len(d.probed) == 1 + 5 * 2 + 3 * 5


@pytest.mark.parametrize("n", [11, 15, 60])
def test_online_on_clock_tables_of_any_size_finds_an_exact_u(n):
    # a curve of the fit's own family: T = 0.25 + 0.75 f_max / f (phi = 0.25, on its grid), P = 2 +
    # 0.004 f + 3e-6 f^2: the fit is exact, so the least of E = P T over the table is found
    levels = [210.0 + 30.0 * i * 60 / n for i in range(n)]
    time = [0.25 + 0.75 * levels[-1] / f for f in levels]
    energy = [(2 + 0.004 * f + 3e-6 * f * f) * t for f, t in zip(levels, time, strict=True)]
    best = levels[energy.index(min(energy))]
    d = OnlineGovernor().decide({}, CurveProbe(energy, time, levels))
    assert d.level == best and 0 < levels.index(best) < n - 1 and len(d.probed) == 26


def test_online_on_a_power_limit_dataset_takes_measured_means(tmp_path):
    src = tmp_path / "zeus"
    src.mkdir()
    (src / "summary_power_v100.csv").write_text(
        "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n" + "\n".join(ZEUS_ROWS) + "\n")
    ds = import_zeus(src, "v100", tmp_path / "out", eval_every=0)
    sweep = F.sweep_from_dataset(ds)
    data = F.TrainingData(sweep, F.feature_table(sweep), sweep.workload_ids())
    gov = OnlineGovernor().fit(data)
    assert not gov.fits_u_curve()  # watts: no T = a + b / l
    # a run is one epoch (no steps count): the probing steps share one unit; on 3 levels they are
    # 1 warm-up + 3 x 2 coarse + 3 x 5 fine = 22
    assert gov.units_per_step() == pytest.approx(1 / 22)
    assert OnlineGovernor().fits_u_curve() and OnlineGovernor().units_per_step() == 1.0  # live: a clock, a step
    _, left = G.usable({"online": OnlineGovernor()}, data)
    assert left == {}  # three levels: enough for a U


# --------------------------------------------------------------------------------------------
# the recommendation's grouping
# --------------------------------------------------------------------------------------------


def test_blocks_are_contiguous_by_batch_size():
    rows = pd.DataFrame({"workload_id": [f"c{i:02d}" for i in range(12, 0, -1)], "batch_size": list(range(12, 0, -1)),
                         "model": "m"})
    got = blocks(rows)
    # ordered c01 ... c12; block of the i-th = i * 5 // 12: 0 0 0 1 1 2 2 2 3 3 4 4
    assert got.tolist()[::-1] == ["c01 .. c03"] * 3 + ["c04 .. c05"] * 2 + ["c06 .. c08"] * 3 + \
        ["c09 .. c10"] * 2 + ["c11 .. c12"] * 2
    assert grouping(rows) == "lobo" and grouping(rows.assign(model=["a", "b"] * 6)) == "lomo"


def test_recommendation_with_one_model_holds_out_blocks(tmp_path):
    root = make_dataset(Path(tmp_path) / "one", models=["bert-base"], tasks=["sst2", "qnli", "mrpc", "rte", "cola"])
    sweep = F.sweep_from_dataset(load_dataset(root))
    table = F.feature_table(sweep)
    data = F.TrainingData(sweep, table, sweep.workload_ids())
    protos = G.make_all(["ffg", "curve", "search"])
    assert grouping(data.rows()) == "lobo"
    cv = cv_replay(protos, data, schemes=["lobo"])
    rec = recommend(cv, ["curve", "search"])
    assert rec.scheme == "lobo" and rec.n_folds == 5  # five workloads, same batch size: one per block
    assert rec.as_dict()["grouping"] == "leave-one-block-out"
    nested = nested_recommended(protos, data, ["curve", "search"])
    assert set(nested["scheme"]) == {"lobo"} and nested["held_out"].nunique() == 5
