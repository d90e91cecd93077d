"""Trained models travel with the board they were learned on, and only to where they belong.

Hand-written level tables: an AGX Xavier's 114.75 ... 1377 MHz (14 levels, LoudVA's table) and an
AGX Orin's 306 ... 1300.5 MHz; a hand-written voi prior of two curves; a probe of a hand-written
curve (exact, no noise) so that a decision can be compared field by field.
"""

from __future__ import annotations

import json

import pytest

from dvfslab.governors.errors import GovernorError
from dvfslab.governors.files import load_governor, save_governor
from dvfslab.governors.registry import make
from dvfslab.job.policy import FeatureRequired, check_features, feature_needs, job_governor

XAVIER = [114.75, 204.0, 318.75, 420.75, 522.75, 624.75, 675.75, 828.75, 905.25, 1032.75, 1198.5, 1236.75,
          1338.75, 1377.0]
ORIN = [306.0, 408.0, 510.0, 612.0, 714.0, 816.0, 918.0, 1020.0, 1122.0, 1224.0, 1300.5]


def _ffg_run(tmp_path, levels, name="Jetson AGX Xavier"):
    gov = make("ffg")
    gov.level_, gov.level_table_, gov.knob_ = 828.75, list(levels), "gpu_freq_mhz"
    run = tmp_path / "run"
    (run / "models").mkdir(parents=True)
    save_governor(gov, run / "models" / "ffg.json", {"name": name, "knob": "gpu_freq_mhz", "levels": list(levels)})
    return run


def test_a_model_from_another_board_is_refused_in_one_line(tmp_path):
    run = _ffg_run(tmp_path, XAVIER)
    with pytest.raises(GovernorError) as err:
        job_governor("ffg", run, levels=ORIN, board_name="Jetson AGX Orin")
    msg = str(err.value)
    assert "\n" not in msg and "refused" in msg
    assert "Jetson AGX Xavier (gpu_freq_mhz, 14 levels 114.75-1377 MHz)" in msg
    assert "Jetson AGX Orin (gpu_freq_mhz, 11 levels 306-1300.5 MHz)" in msg and "--map-levels nearest" in msg
    # the same board: no word; the stated mapping: accepted, and said
    assert "trained" in job_governor("ffg", run, levels=XAVIER).source_
    mapped = job_governor("ffg", run, levels=ORIN, board_name="Jetson AGX Orin", map_levels="nearest")
    assert "mapped to the nearest" in mapped.source_
    # another knob is refused even with a mapping (a clock is not a power limit)
    with pytest.raises(GovernorError, match="sets the GPU power limit"):
        job_governor("ffg", run, levels=[100.0, 250.0], knob="power_limit_w", map_levels="nearest")


def test_a_missing_trained_file_is_refused_never_replaced_by_the_untrained_one(tmp_path):
    run = _ffg_run(tmp_path, XAVIER)
    (run / "summary.json").write_text(json.dumps({"recommended": {"policy": "voi"}}))
    with pytest.raises(GovernorError, match="models/voi.json is missing"):
        job_governor("recommended", run)
    with pytest.raises(GovernorError, match="leave out --model to run voi untrained"):
        job_governor("voi", run)
    assert "untrained" in job_governor("voi").source_  # no run given: untrained, and said


CURVES = [{"level": [306.0, 612.0, 1300.5], "energy_rel": [0.95, 0.70, 1.0], "time_rel": [3.5, 1.8, 1.0]},
          {"level": [306.0, 612.0, 1300.5], "energy_rel": [0.80, 0.75, 1.0], "time_rel": [3.0, 1.7, 1.0]}]
# the job's true curve per unit (J, s): 612 MHz the least energy
TRUE = {306.0: (0.85, 3.2), 408.0: (0.80, 2.6), 510.0: (0.76, 2.1), 612.0: (0.72, 1.8), 714.0: (0.76, 1.6),
        816.0: (0.80, 1.45), 918.0: (0.84, 1.35), 1020.0: (0.88, 1.25), 1122.0: (0.92, 1.15), 1224.0: (0.96, 1.05),
        1300.5: (1.0, 1.0)}


class CurveProbe:
    levels = sorted(TRUE)
    model = None

    def measure(self, level, units=1.0):
        e, t = TRUE[1300.5 if level is None else level]
        return t * units, e * units


def test_a_saved_trained_voi_decides_as_the_one_in_memory(tmp_path):
    gov = make("voi", job_units=500.0, noise_cv=0.02)
    gov.curves_ = CURVES
    gov.info_ = {"prior": "training curves", "n_curves": 2, "shape_sigma": 0.05,
                 "shape_sigma_from": "leave-one-curve-out"}
    gov.knob_ = "gpu_freq_mhz"
    path = tmp_path / "voi.json"
    save_governor(gov, path, {"name": "Jetson AGX Orin", "knob": "gpu_freq_mhz", "levels": ORIN})
    back = load_governor(path, policy="voi")
    assert back.board_["name"] == "Jetson AGX Orin" and back.curves_ == CURVES
    here, there = gov.decide({}, CurveProbe()), back.decide({}, CurveProbe())
    assert here == there  # the same level, the same probes (level, time, energy, units), the same note
    assert here.probed  # it did probe: the comparison covers its session


def test_a_feature_the_user_did_not_give_is_to_be_measured_never_filled_in():
    gov = make("mlg")
    gov.tree_ = {"features": ["n_layers", "gpu_util_pct"], "impute": {"gpu_util_pct": 50.0, "n_layers": 12.0},
                 "nodes": [{"feature": "gpu_util_pct", "threshold": 60.0, "left": 1, "right": 2},
                           {"level": 510.0}, {"level": 612.0}], "level_table": [510.0, 612.0]}
    gov.knob_ = "gpu_freq_mhz"
    need = feature_needs(gov, {"n_layers": 12})
    assert need is not None and need.measure == ("gpu_util_pct",) and need.missing == ()
    assert "to be measured" in str(need) and "never filled in" in str(need)
    with pytest.raises(FeatureRequired):
        check_features(gov, {"n_layers": 12})
    assert feature_needs(gov, {"gpu_util_pct": 95.0}) is None  # n_layers: no node splits on it
    check_features(gov, {"gpu_util_pct": 95.0})
