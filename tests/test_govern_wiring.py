"""``dvfslab govern`` wired to the trained-model policy (issue 35): a model learned on another
level table refused in one line naming both boards (or mapped, and said); the recommended governor
named, trained; a dry run that prints the level (or says the level is picked while the job runs);
features the governor reads measured or asked for; the epoch ends the progress reports told to the
probe session; a job that printed no progress it reads says how many lines it read.

Hand-written level tables: an AGX Xavier's 114.75 ... 1377 MHz (14 levels) and the fake AGX Orin's
306 ... 1300.5 MHz (11 levels). An FFG learned at 828.75 MHz on the Xavier maps to the Orin's
nearest level 816 (|828.75 - 816| = 12.75 < |918 - 828.75| = 89.25).
"""

from __future__ import annotations

import json
import threading

import pytest
from test_cli_hardware import cli
from test_governed_run import LoopBoard

from dvfslab.governors.base import ProbingGovernor
from dvfslab.governors.files import save_governor
from dvfslab.governors.registry import make
from dvfslab.governors.session import WindowSession
from dvfslab.governors.static import FixedGovernor
from dvfslab.job.policy import FeatureRequired
from dvfslab.job.progress import LineProgress, ProgressFeed
from dvfslab.job.runner import GovernedRun

XAVIER = [114.75, 204.0, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25, 1032.75, 1198.5, 1236.75,
          1338.75, 1377.0]
ORIN = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


def _run(tmp_path, policy="ffg", level=828.75, levels=XAVIER, name="Jetson AGX Xavier", recommended=None):
    run = tmp_path / "run"
    (run / "models").mkdir(parents=True, exist_ok=True)
    if policy == "ffg":
        gov = make("ffg")
        gov.level_, gov.level_table_, gov.knob_ = level, list(levels), "gpu_freq_mhz"
    else:  # a trained voi: two hand-written prior curves
        gov = make("voi")
        gov.curves_ = [{"level": [306.0, 612.0, 1300.5], "energy_rel": [0.95, 0.70, 1.0], "time_rel": [3.5, 1.8, 1.0]},
                       {"level": [306.0, 612.0, 1300.5], "energy_rel": [0.80, 0.75, 1.0], "time_rel": [3.0, 1.7, 1.0]}]
        gov.info_ = {"prior": "training curves", "n_curves": 2, "shape_sigma": 0.05,
                     "shape_sigma_from": "leave-one-curve-out"}
        gov.knob_ = "gpu_freq_mhz"
    save_governor(gov, run / "models" / f"{policy}.json", {"name": name, "knob": "gpu_freq_mhz", "levels": levels})
    if recommended:
        (run / "summary.json").write_text(json.dumps({"recommended": {"policy": recommended}}))
    return run


@pytest.mark.parametrize("progress", [(), ("--progress", "steps")], ids=["static", "governed"])
def test_a_model_of_another_level_table_is_refused_naming_both_or_mapped_and_said(
        tmp_path, orin_jp6, capsys, fake_kernel_env, progress):
    run = _run(tmp_path)
    argv = ("govern", "--policy", "ffg", "--model", f"{run}/", *progress, "--sysfs-root", orin_jp6.root)
    rc, out, err = cli(capsys, *argv, "--dry-run")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "refused" in err
    # the refusal closed the board it opened: no power-sampler thread is left running
    assert not [t for t in threading.enumerate() if t.name == "dvfslab-power-sampler" and t.is_alive()]
    assert "Jetson AGX Xavier (gpu_freq_mhz, 14 levels 114.75-1377 MHz)" in err
    assert "jetson (gpu_freq_mhz, 11 levels 306-1300.5 MHz)" in err and "--map-levels nearest" in err
    rc, out, err = cli(capsys, *argv, "--map-levels", "nearest", "--dry-run")
    assert rc == 0, err
    assert "ffg, trained" in err and "learned on Jetson AGX Xavier" in err and "mapped to the nearest" in err
    assert out.strip() == "816"  # 828.75 -> the Orin's nearest level (module doc)
    # the same table: no word of a mapping, the level as learned
    run = _run(tmp_path, level=612.0, levels=ORIN, name="Jetson AGX Orin")
    rc, out, err = cli(capsys, "govern", "--policy", "ffg", "--model", f"{run}/", *progress,
                       "--sysfs-root", orin_jp6.root, "--dry-run")
    assert rc == 0 and out.strip() == "612" and "mapped" not in err


def test_the_recommended_governor_is_named_trained_and_its_dry_run_says_what_it_does(
        tmp_path, orin_jp6, capsys, fake_kernel_env):
    run = _run(tmp_path, level=612.0, levels=ORIN, name="Jetson AGX Orin", recommended="ffg")
    rc, out, err = cli(capsys, "govern", "--policy", "recommended", "--model", f"{run}/", "--sysfs-root", orin_jp6.root,
                       "--dry-run")
    assert rc == 0 and out.strip() == "612", err
    assert f"the governor: the recommended governor of {run}/summary.json: ffg, trained" in err
    # a probing recommendation: no level before the job, said, with the governor it resolved to
    run = _run(tmp_path, policy="voi", levels=ORIN, name="Jetson AGX Orin", recommended="voi")
    rc, out, err = cli(capsys, "govern", "--policy", "recommended", "--model", f"{run}/", "--sysfs-root", orin_jp6.root,
                       "--dry-run")
    assert rc == 0 and out == "", err
    assert "the recommended governor of" in err and "voi, trained" in err
    assert "voi probes the job and picks the level while the job runs" in err


def _tree(first: str) -> dict:
    """mlg's tree: ``first`` <= 60 -> 510 MHz, else 612 MHz."""
    return {"features": [first], "impute": {first: 50.0},
            "nodes": [{"feature": first, "threshold": 60.0, "left": 1, "right": 2}, {"level": 510.0}, {"level": 612.0}],
            "level_table": ORIN}


def test_a_feature_the_governor_reads_is_asked_for_in_one_line_never_filled_in(tmp_path, orin_jp6, capsys,
                                                                              fake_kernel_env):
    for first, flag in (("n_layers", "--layers"), ("gpu_util_pct", "--gpu-util")):
        gov = make("mlg")
        gov.tree_, gov.knob_ = _tree(first), "gpu_freq_mhz"
        save_governor(gov, tmp_path / "mlg.json", {"name": "Jetson AGX Orin", "knob": "gpu_freq_mhz", "levels": ORIN})
        rc, out, err = cli(capsys, "govern", "--policy", "mlg", "--model", tmp_path / "mlg.json",
                           "--sysfs-root", orin_jp6.root, "--", "true")
        assert rc == 2 and err.count("\n") == 1 and f"mlg reads {first}" in err and flag in err
        assert "never filled in" in err
        # given: decided by the hand threshold (<= 60: 510 MHz; 95 > 60: 612 MHz)
        for value, level in (("60", "510"), ("95", "612")):
            rc, out, err = cli(capsys, "govern", "--policy", "mlg", "--model", tmp_path / "mlg.json", flag, value,
                               "--sysfs-root", orin_jp6.root, "--dry-run")
            assert rc == 0 and out.strip() == level, err


def test_a_gpu_utilisation_the_tree_reads_is_measured_then_decides():
    """The board's GPU load after the three default-clock windows: 70, 80, 90 % -> 80 % measured
    (> 60: 612 MHz by the hand tree); with no load to read, the governor is refused rather than guess."""
    gov = make("mlg")
    gov.tree_, gov.knob_ = _tree("gpu_util_pct"), "gpu_freq_mhz"
    gov.tree_["level_table"] = [400.0, 600.0, 800.0]
    gov.tree_["nodes"][1]["level"], gov.tree_["nodes"][2]["level"] = 400.0, 600.0
    b = LoopBoard()
    board = b.job_board()
    board.gpu_load = iter([70.0, 80.0, 90.0]).__next__
    with GovernedRun(gov, board, job_units=40) as run:
        for k in range(1, 41):
            b.step(k)
            run.report(k)
    assert run.workload["gpu_util_pct"] == 80.0 and run.level == 600.0
    # a board with no GPU load to read: nothing measured, and the governor is refused before it decides
    run = GovernedRun(gov, LoopBoard().job_board(), job_units=40)
    run._features()
    with pytest.raises(FeatureRequired, match="mlg reads gpu_util_pct"):
        run._check_features()
    assert next(r for r in run.log.lines if r.get("event") == "feature")["gpu_util_pct"] is None


def test_no_progress_line_matched_says_how_many_lines_were_read():
    feed = ProgressFeed()
    parser = LineProgress(feed, preset="hf")
    parser.feed_text("loading the model\nmap: 100 examples\ndone\n")  # no bar, no {'loss': ..., 'epoch': E}
    assert (feed.lines_read, feed.lines_matched) == (3, 0)
    feed.end()
    b = LoopBoard()
    run = GovernedRun(FixedGovernor(level=600).fit(), b.job_board(), feed=feed)
    run.run()
    assert run.note == ("0 of 3 output lines matched --progress hf: the command printed no progress it reads; "
                        "check its output or give --progress-regex")
    assert "during the calibration" not in run.finish()["note"]


def test_the_hf_log_lines_report_epoch_ends():
    """'epoch' 0.5, 0.98, 1.0 (an eval line, the same epoch), 1.5, 2.04: whole numbers crossed at
    1.0 and 2.04 -> two epoch ends."""
    feed = ProgressFeed()
    parser = LineProgress(feed, preset="hf")
    for e in (0.5, 0.98):
        parser.line(f"{{'loss': 2.1, 'learning_rate': 5e-05, 'epoch': {e}}}")
    parser.line("{'eval_loss': 1.9, 'epoch': 1.0}")
    assert feed.epochs_ended == 1
    for e in (1.0, 1.5, 2.04):
        parser.line(f"{{'loss': 2.0, 'epoch': {e}}}")
    assert feed.epochs_ended == 2


class _Session(WindowSession):
    """Reads 600 over 30 units, then 400 over 15 units, then holds 600; restarts at epoch ends (as Zeus)."""

    restarts_at_epoch_end = True

    def __init__(self, model):
        self._begin(model)
        self.told: list[float] = []
        self._read(600.0, 30.0)

    def _window_read(self, units, energy_j, time_s):
        if self._reading[0] == 600.0:
            self._read(400.0, 15.0)
        else:
            self._hold(600.0, "hand session")

    def epoch_end(self):
        self.told.append(self.units_run)
        super().epoch_end()


class _Prober(ProbingGovernor):
    name = "hand-prober"

    def start(self, workload, levels, model=None):
        self.session = _Session(model)
        return self.session


def test_an_epoch_end_restarts_the_open_probe_window_of_a_restarting_session():
    """120 units on the loop board (CELL: default 0.125 s a unit, 600: 0.1875 s, 400: 0.25 s; settle
    0.25 s; 5 sensor samples of 0.125 s a read), an epoch every 40 units. By hand: calibration
    units 2-6, baselines 7-11 and 12-16 (t = 2.0 s). 600 locked at 2.0: settle units 17-18 (18 ends
    at 2.375 >= 2.25), read 30 - 2 = 28 units from 19; the epoch ends after unit 40, 22 units into
    the read: cancelled (22 + unit 41 = 23 units, t = 2.0 + 25 x 0.1875 = 6.6875 s), read again over
    units 42-69 (5.25 s; the window: 2 + 23 + 28 = 53 units, t = 11.9375 s). 400: settle unit 70,
    read 14 from 71; the epoch ends after 80, 10 units in: cancelled (11 units, t = 11.9375 + 12 x
    0.25 = 14.9375 s), read 82-95 (3.5 s). Then 600 is held; the end at 120 finds the session done
    (not told)."""
    gov = _Prober()
    b = LoopBoard()
    with GovernedRun(gov, b.job_board(), job_units=120) as run:
        for k in range(1, 121):
            b.step(k)
            run.report(k)
            if k % 40 == 0:
                run.epoch_end()
    ends = [r for r in run.log.lines if r.get("event") == "epoch-end"]
    assert [(r["units_done"], r["session_told"]) for r in ends] == [(40.0, True), (80.0, True), (120.0, False)]
    # told with the units the session had observed: none at 40 (its 600 window open), 30 at 80 (the
    # 600 window's 30 units asked, then its 400 window open)
    assert gov.session.told == [0.0, 30.0]
    cut = [r for r in run.log.lines if r.get("phase") == "epoch-end"]
    assert [(r["level"], r["units"], r["measurement"]) for r in cut] == [(600.0, 23.0, False), (400.0, 11.0, False)]
    assert [r["t_end_s"] for r in cut] == pytest.approx([6.6875, 14.9375], abs=1e-12)
    probes = [r for r in run.log.lines if r.get("phase") == "probe" and r.get("measurement")]
    assert [(r["level"], r["units"], r["read_units"]) for r in probes] == [(600.0, 53.0, 28.0), (400.0, 26.0, 14.0)]
    assert [r["time_s"] for r in probes] == pytest.approx([5.25, 3.5], abs=1e-12)
    assert run.level == 600.0 and run.result["job_units"] == 120 and run.result["no_progress_windows"] == 0


def test_govern_says_no_line_matched_on_the_console(capsys):
    """A command that prints two lines, neither a bar nor a Trainer log line: 0 of 2 matched."""
    import sys

    rc, _, err = cli(capsys, "govern", "--policy", "maxn", "--backend", "sim", "--progress", "hf", "--",
                     sys.executable, "-c", "print('loading'); print('done')")
    assert rc == 0, err
    assert "0 of 2 output lines matched --progress hf: the command printed no progress it reads" in err
    assert "no decision: the job ended during the calibration: see the note" in err


def test_govern_offers_the_contracts_model_types_and_invents_no_transformer_feature():
    """`--model-type` offers what a dataset may record; a CNN job gets no `is_decoder` (the
    feature does not apply to it), an encoder 0 and a decoder 1."""
    import argparse

    from dvfslab.cli.govern import GOVERN_MODEL_TYPES, workload_features
    from dvfslab.data.contract import MODEL_TYPES

    assert tuple(GOVERN_MODEL_TYPES) == tuple(MODEL_TYPES)
    base = dict(hf_config=None, n_layers=None, hidden_size=None, avg_seq_len=None, gpu_util_pct=None, params_m=None)
    cnn = workload_features(argparse.Namespace(**base, model_type="cnn"))
    assert "is_decoder" not in cnn and cnn["model_type"] == "cnn"
    assert workload_features(argparse.Namespace(**base, model_type="encoder"))["is_decoder"] == 0.0
    assert workload_features(argparse.Namespace(**base, model_type="decoder"))["is_decoder"] == 1.0
