"""The real study's whole-job curves (esainulab/slmdvfs @ 9e14047), the podgov of L4T r36, precision.

Expected values are typed in from their cited places or worked by hand; none is recomputed the way
the code computes it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dvfslab.cli import main
from dvfslab.sim.jobs import TOLERANCES, job_table, level_rows, run_sigma
from dvfslab.sim.podgov import PodGovernor
from dvfslab.sim.profiles import AGX_ORIN_64GB as ORIN
from dvfslab.sim.readings import JOB_CURVES, LINES, job_curves
from dvfslab.sim.validation import allowed_outside

ROOT = Path(__file__).resolve().parents[1]


def _curve(key):
    return next(c for c in JOB_CURVES if c.key == key)


def test_each_reading_is_the_number_at_its_cited_place():
    deb = _curve("deberta-v2-xlarge/qnli")
    # src/plots/DeBERTa_Xlarge.py @ 9e14047, lines 13-14 and 17
    assert deb.energy_j[306.0] == 693591.48 and deb.energy_j[612.0] == 536503.90
    assert deb.energy_j[1300.5] == 737041.01 and deb.maxn_j == 552288.86
    sst = _curve("deberta-v2-xlarge/sst2")  # same file, lines 23-24 and 27
    assert sst.energy_j[714.0] == 40927.33 and sst.energy_j[1300.5] == 52475.58 and sst.maxn_j == 52317.17
    gem = _curve("gemma-2b/qnli")  # src/plots/gemma2b_qnli.py @ acf9cd7, lines 17-18 (Mode0 first)
    assert gem.maxn_j == 694858.59 and gem.energy_j[510.0] == 595930.38 and gem.energy_j[1224.0] == 712022.74
    # chapter3_methodology_answers.txt: batch 16 (line 159), max length 256 (line 162), FP32 (line 168), 6546 steps (145)
    assert (deb.batch_size, deb.max_seq_len, deb.precision, deb.steps) == (16, 256, "fp32", 6546)
    assert (sst.batch_size, sst.max_seq_len, sst.steps) == (16, 128, 4209)


def test_the_pythia_readings_are_the_plots_pixels_on_its_axis():
    """Pythia-14M_QNLI.png (db46d36): 2000 J at row 403, 2800 J at row 129 -> 800/274 = 2.9197 J per pixel.
    The 1300 MHz marker spans rows 104-111 (centre 107.5): 2000 + (403 - 107.5)·2.9197 = 2862.8 J, read 2863;
    the 408 MHz point: star tips at rows 379 and 406 (a 5-point star's lower tips sit at 0.809 R below its
    centre), R = 27/1.809 = 14.93, centre 393.93: 2000 + 9.07·2.9197 = 2026.5 J, read 2027;
    MAXN: the dashed line at row 372.5: 2000 + 30.5·2.9197 = 2089.1 J, read 2090 (within a pixel)."""
    py = _curve("pythia-14m/qnli")
    assert py.reading_j == pytest.approx(2.9197, abs=1e-4)
    assert py.energy_j[1300.5] == pytest.approx(2862.8, abs=py.reading_j)
    assert py.energy_j[408.0] == pytest.approx(2026.5, abs=py.reading_j)
    assert py.maxn_j == pytest.approx(2089.1, abs=py.reading_j)
    assert min(py.energy_j, key=py.energy_j.get) == 408.0  # the plot's star: "408 MHz"


def test_fit_and_validation_curves_are_disjoint_and_every_level_is_the_studys():
    fit_ids = {c.identity for c in job_curves("fit")}
    val_ids = {c.identity for c in job_curves("validation")}
    assert {c.key for c in job_curves("fit")} == {"deberta-v2-xlarge/qnli", "pythia-14m/qnli"}
    assert fit_ids and val_ids and not fit_ids & val_ids
    assert not fit_ids & {ln.identity for ln in LINES}
    for c in JOB_CURVES:
        assert set(c.energy_j) <= set(ORIN.levels_mhz)


def test_run_sigma_is_the_pooled_cubic_scatter_of_the_fit_curves():
    """A straight line through 4 points has residual 0 for a cubic: sigma 0 — the estimator does not
    invent scatter; and it is an honest few percent on the study's curves (one run per level)."""
    from dataclasses import replace

    deb = _curve("deberta-v2-xlarge/qnli")
    flat = replace(deb, energy_j={f: 1000.0 for f in deb.energy_j})
    assert run_sigma([flat]) == pytest.approx(0.0, abs=1e-9)
    assert 0.002 < run_sigma() < 0.05


def test_podgov_on_a_hand_written_load_trace_visits_the_prescribed_levels():
    """L4T r36 governor_pod_scaling.c, polls every 25 ms (nvgpu scale.c), block window 50 ms:
    poll 1 (load 1.0 > 0.9): 306 + 1300.5/3 = 739.5 -> 816; poll 2: 25 ms after the change, inside
    the block window: stays 816; poll 3 (50 ms): 816 + 433.5 = 1249.5 -> 1300.5; poll 4: blocked."""
    gov = PodGovernor(ORIN.levels_mhz, 1300.5)
    f, seen = 306.0, []
    for _ in range(4):
        f = gov.decide(1.0, f)
        seen.append(f)
    assert seen == [816.0, 816.0, 1300.5, 1300.5]
    # down: busyness 0.35 at 1300.5, freq_avg 1300.5: boost 0.8·1300.5·(0.35 − 0.7)/0.7 = −520.2 -> 780.3;
    # freq_avg (10·1300.5 + 780.3)/11 = 1253.209; damped (7·780.3 + 3·1253.209)/10 = 922.17 -> 1020
    gov.cycles_avg, gov.freq_avg, gov.since_change_s = 0.35 * 1300.5, 1300.5, 1.0
    assert gov.decide(0.35, 1300.5) == 1020.0


def test_precision_fp16_divides_the_gemm_time_by_the_orin_tensor_core_ratio(capsys):
    """Orin technical brief: 5.3 FP32 TFLOPS, 170 sparse INT8 TOPS -> FP16 dense 170/2/2 = 42.5 TFLOPS;
    42.5 / 5.3 = 8.0189."""
    got = {}
    for p in ("fp32", "fp16", "bf16"):
        assert main(["simulate", "--workload", "bert-base/qnli", "--batch-size", "16", "--seq-len", "256",
                     "--precision", p, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["workload"]["precision"] == p and doc["workload"]["batch_size"] == 16
        got[p] = [r["gemm_time_per_step_s"] for r in doc["levels"]]
    for a, b, c in zip(got["fp32"], got["fp16"], got["bf16"], strict=True):
        assert a / b == pytest.approx(42.5 / 5.3, rel=1e-9) and b == c


def test_seq_len_and_batch_size_override_the_catalog(capsys):
    assert main(["simulate", "--workload", "deberta-v2-xlarge/sst2", "--print-spec"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--workload", "deberta-v2-xlarge/sst2", "--batch-size", "16", "--seq-len", "64",
                 "--print-spec"]) == 0
    small = json.loads(capsys.readouterr().out)
    assert (default["batch_size"], default["seq_len"]) == (32, 128) and (small["batch_size"], small["seq_len"]) == (16, 64)
    assert small["flops_per_step"] < default["flops_per_step"]
    with pytest.raises(SystemExit):  # argparse refuses a precision outside fp32/fp16/bf16
        main(["simulate", "--workload", "bert-base/rte", "--precision", "fp8"])


def test_catalog_configs_are_the_model_cards():
    from dvfslab.data.catalog import MODELS

    deb, gem = MODELS["deberta-v2-xlarge"], MODELS["gemma-2b"]
    assert (deb.n_layers, deb.hidden_size, deb.n_heads, deb.ffn_size) == (24, 1536, 24, 6144)
    assert (gem.n_layers, gem.hidden_size, gem.n_heads, gem.ffn_size, gem.kv_heads) == (18, 2048, 8, 16384, 1)
    # Gemma-2B by hand: embeddings 256000·2048 = 524,288,000; a layer 2·2048² + 2·2048·256 + 3·2048·16384
    # + 2·2048 = 110,104,576, ×18 = 1,981,882,368; final norm 2048; score 2·2048 -> 2,506,176,512 (card: 2.5B)
    assert gem.params() == 2_506_176_512
    assert deb.params() == pytest.approx(900e6, rel=0.02)  # the card's "900M"


def _first_commit(path):
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", path], cwd=ROOT,
                         capture_output=True, text=True)
    shas = out.stdout.split()
    return shas[-1] if out.returncode == 0 and shas else None


@pytest.mark.parametrize(("tolerances", "code"), [
    ("dvfslab/sim/data/job_validation_tolerances.json", "dvfslab/sim/jobs.py"),  # issue 31 (twin v5)
    ("dvfslab/sim/data/job_validation_tolerances_v6.json", "dvfslab/sim/shapes.py"),  # issue 38: shapes in the fit
])
def test_the_tolerances_were_committed_before_the_code_that_computes_the_errors(tolerances, code):
    tol, first = _first_commit(tolerances), _first_commit(code)
    if tol is None or first is None:
        pytest.skip("not a git checkout with history")
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", tol, first], cwd=ROOT)
    assert tol != first and ancestor.returncode == 0
    assert json.loads((ROOT / tolerances).read_text())["curves"] == [c.key for c in job_curves("validation")]


def test_validation_rows_are_computed_against_the_declared_tolerances():
    """Whatever they show: every held-out curve gets its three figures and a verdict on each."""
    rules = json.loads(TOLERANCES.read_text())["rules"]
    rows = job_table(ORIN, "validation")
    assert [r["curve"] for r in rows] == ["deberta-v2-xlarge/sst2", "gemma-2b/qnli"]
    for r in rows:
        assert r["within"]["shape_rms_pct"] == (r["shape_rms_pct"] <= rules["shape_rms_pct"]["max"])
        assert r["within"]["optimum_steps"] == (r["optimum_steps"] <= 1)
        assert r["within"]["maxn_over_optimum_pct"] == (abs(r["maxn_over_optimum_pct"]) <= 10.0)  # both ran MAXN
        assert r["real_optimum_mhz"] == {"deberta-v2-xlarge/sst2": 714.0, "gemma-2b/qnli": 510.0}[r["curve"]]
    levels = level_rows(ORIN)
    assert len(levels) == 11 + 5 and allowed_outside(len(levels)) >= 0


def test_the_covariance_is_never_scaled_below_the_stated_uncertainties():
    """The rails fit: χ²/dof = 0.250101 / 6 = 0.0417 < 1, so the scale is 1 (issue 38: never shrink).
    soc_idle_w and cpu_idle_w are set by the two idle lines alone (every other reading of those rails has
    a free parameter of its own), so their variance is 1 / Σ 1/σᵢ² by hand.
    GPU rail: σ = sqrt(0.05² + (0.02/2.399)²)·2.399 = 0.121607 W and sqrt(0.05² + (0.02/2.340)²)·2.340
    = 0.118699 W; Σ 1/σ² = 67.62 + 70.97 = 138.59; sd = sqrt(1 / 138.59) = 0.084945 W.
    CPU rail: σ = 0.028284 W (0.400 W) and 0.027933 W (0.390 W); Σ 1/σ² = 1250.0 + 1281.6 = 2531.6;
    sd = sqrt(1 / 2531.6) = 0.019875 W."""
    import numpy as np

    from dvfslab.sim.calibration import birge_ratio, fit, fit_covariance

    res = fit()
    cov = fit_covariance(res)
    names = list(res.params)
    assert birge_ratio(res) == pytest.approx(0.250101 / 6, rel=1e-5)
    assert np.sqrt(cov[names.index("soc_idle_w")][names.index("soc_idle_w")]) == pytest.approx(0.084945, rel=2e-3)
    assert np.sqrt(cov[names.index("cpu_idle_w")][names.index("cpu_idle_w")]) == pytest.approx(0.019875, rel=2e-3)


def test_the_covariance_scale_is_max_of_one_and_chi2_per_dof():
    from dvfslab.sim.calibration import covariance_scale

    assert covariance_scale(0.24, 6) == 1.0  # χ²/dof = 0.04 -> 1
    assert covariance_scale(15.0, 6) == pytest.approx(2.5, rel=1e-12)  # χ²/dof = 2.5 -> 2.5
    assert covariance_scale(6.0, 6) == 1.0


def test_likelihood_weights_on_a_hand_two_member_case():
    """χ² 10 and 12, scale 1: w ∝ exp(−5), exp(−6) -> 1/(1 + e⁻¹) = 0.731059, e⁻¹/(1 + e⁻¹) = 0.268941;
    scale 2: exp(−2.5), exp(−3) -> 1/(1 + e^−0.5) = 0.622459. Kish's n_eff of (0.731059, 0.268941):
    1 / (0.534447 + 0.072329) = 1.64806. A scale below 1 is refused."""
    from dvfslab.sim.shapes import effective_members, likelihood_weights

    w = likelihood_weights([10.0, 12.0])
    assert w == pytest.approx([0.731059, 0.268941], abs=1e-6)
    assert likelihood_weights([10.0, 12.0], scale=2.0)[0] == pytest.approx(0.622459, abs=1e-6)
    assert effective_members(w) == pytest.approx(1.64806, abs=1e-5)
    assert effective_members([0.25] * 4) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="shrink"):
        likelihood_weights([1.0, 2.0], scale=0.5)
    # importance sampling: equal likelihoods, the second drawn from twice the density -> half the weight
    assert likelihood_weights([10.0, 10.0], log_proposal=[0.0, 0.693147180560]) == pytest.approx([2 / 3, 1 / 3])


def test_the_mixture_density_of_the_two_stages_by_hand():
    """One assumed-parameter set at the proposal's mean, covariance 0.1²·I in d = 20 dimensions, all of
    it inside the ranges: the normal's ln density is −(d/2)·ln(2π·0.01) = −10·ln(0.0628319) = 27.6729;
    the mixture q = ½·1 + ½·e^27.6729 -> ln q = 27.6729 − ln 2 + ln(1 + e^−27.6729) = 26.9798."""
    import numpy as np

    from dvfslab.pipeline.ensemble import _unit, log_mixture_density
    from dvfslab.sim.calibration import ASSUMED_RANGES

    params = {k: (lo + hi) / 2 for k, (lo, hi, _why) in ASSUMED_RANGES.items()}
    assert len(params) == 20
    mu = _unit(params)
    assert mu == pytest.approx([0.5] * 20)
    assert log_mixture_density(params, mu, 0.01 * np.eye(20), 1.0) == pytest.approx(26.9798, abs=1e-4)
    # half of the normal outside the ranges: its truncated density doubles (+ ln 2)
    assert log_mixture_density(params, mu, 0.01 * np.eye(20), 0.5) == pytest.approx(26.9798 + 0.693147, abs=1e-4)


def test_weighted_percentiles_by_hand():
    """Values 1, 2, 3 with weights 0.7, 0.2, 0.1: cumulative 0.7, 0.9, 1.0, so p5 and p50 are 1
    (0.05 and 0.5 ≤ 0.7), p95 is 3 (0.95 > 0.9); equal weights on 1..4: p50 = 2 (cumulative 0.5)."""
    from dvfslab.sim.shapes import weighted_percentiles

    assert weighted_percentiles([2.0, 1.0, 3.0], [0.2, 0.7, 0.1], (5, 50, 95)) == [1.0, 1.0, 3.0]
    assert weighted_percentiles([1.0, 2.0, 3.0, 4.0], None, (50,)) == [2.0]


def test_a_shape_is_blind_to_the_scale_and_a_confined_maxn_run_is_a_reading_of_its_level():
    """The shape residuals of a curve whose every energy is the twin's times 3 are zero (ln 3 is the
    free scale); DeBERTa-QNLI's points are its 11 levels and its "MAXN" run read at 816 MHz; Pythia's
    unknown-clock run is no point: 11 + 1 + 11 = 23 points, 23 − 2 = 21 degrees of freedom."""
    from dataclasses import replace

    from dvfslab.sim.jobs import predict_job
    from dvfslab.sim.shapes import shape_chi2, shape_points, shape_residuals

    deb = _curve("deberta-v2-xlarge/qnli")
    pj = predict_job(ORIN, deb)
    twin_made = replace(deb, energy_j={f: 3.0 * e for f, e in pj["levels"].items()}, maxn_j=3.0 * pj["levels"][816.0])
    rows = shape_residuals(ORIN, [twin_made])
    assert all(abs(r["residual_sigma"]) < 1e-9 for r in rows) and rows[0]["scale"] == pytest.approx(1 / 3)
    assert shape_points(deb)[-1] == (816.0, 552288.86)
    assert len(shape_points(_curve("pythia-14m/qnli"))) == 11
    assert shape_chi2(ORIN)[1] == 21


# a hand-written excerpt with the structure of the study's run_gpu_freq_experiment_qnli.sh @ 9e14047
# (its function and branch shapes; the commands are the ones that matter, the rest left out)
_SCRIPT = """
BERT_FREQS=(BASELINE)
DEBERTA_FREQS=(BASELINE 816 714 612)
GPU_DEVFREQ_PATH="/sys/class/devfreq/17000000.gpu"

set_gpu_freq() {
    local freq_hz=$(($1 * 1000000))
    sudo bash -c "echo $freq_hz > ${GPU_DEVFREQ_PATH}/max_freq"
    sudo bash -c "echo $freq_hz > ${GPU_DEVFREQ_PATH}/min_freq"
}

restore_gpu_freq() {
    sudo bash -c "echo $max_hz > ${GPU_DEVFREQ_PATH}/max_freq"
    sudo bash -c "echo $max_hz > ${GPU_DEVFREQ_PATH}/min_freq"
}

preflight_checks() {
    setup_gpu_governor
    set_gpu_freq 816
}

run_single() {
    if [ "$freq" = "BASELINE" ]; then
        sudo bash -c "echo nvhost_podgov > ${GPU_DEVFREQ_PATH}/governor"
    else
        set_gpu_freq $freq
    fi
}

run_experiments() {
    for freq in "${BERT_FREQS[@]}"; do
        run_single "$freq"
    done
    for freq in "${DEBERTA_FREQS[@]}"; do
        run_single "$freq"
    done
}
"""


def _ran(runs):
    return [(r["array"], r["label"], r["ran"], r["min_mhz"], r["max_mhz"]) for r in runs]


def test_the_study_run_labels_from_a_hand_written_script_excerpt():
    """By hand: the preflight leaves min = max = 816 MHz; BERT's BASELINE writes only the governor, so it
    runs podgov confined to 816-816; DeBERTa's BASELINE, next, the same; then 816, 714, 612 locked."""
    from dvfslab.sim.readings import study_run_labels

    assert _ran(study_run_labels(_SCRIPT)) == [
        ("BERT_FREQS", "BASELINE", "confined", 816.0, 816.0), ("DEBERTA_FREQS", "BASELINE", "confined", 816.0, 816.0),
        ("DEBERTA_FREQS", "816", "locked", 816.0, 816.0), ("DEBERTA_FREQS", "714", "locked", 714.0, 714.0),
        ("DEBERTA_FREQS", "612", "locked", 612.0, 612.0)]
    # the BASELINE branch resetting the limits (restore_gpu_freq writes both): uncapped MAXN
    fixed = _SCRIPT.replace('        sudo bash -c "echo nvhost_podgov', '        restore_gpu_freq\n        sudo bash -c "echo nvhost_podgov')
    assert [r["ran"] for r in study_run_labels(fixed)][:2] == ["maxn", "maxn"]
    # no preflight pin: the first BASELINE is uncapped; one after a locked level is confined at that level
    later = _SCRIPT.replace("    set_gpu_freq 816\n", "").replace("DEBERTA_FREQS=(BASELINE 816 714 612)",
                                                                      "DEBERTA_FREQS=(714 BASELINE)")
    assert _ran(study_run_labels(later)) == [
        ("BERT_FREQS", "BASELINE", "maxn", None, None), ("DEBERTA_FREQS", "714", "locked", 714.0, 714.0),
        ("DEBERTA_FREQS", "BASELINE", "confined", 714.0, 714.0)]


def test_a_script_without_a_pinning_setter_is_refused():
    from dvfslab.core.errors import DvfsError
    from dvfslab.sim.readings import study_run_labels

    with pytest.raises(DvfsError, match="set_gpu_freq"):
        study_run_labels(_SCRIPT.replace("/min_freq", "/cur_freq"))


def test_each_curve_records_what_its_maxn_run_was():
    """DeBERTa-QNLI's "MAXN" ran confined at 816 MHz (the script, above); Pythia-14M's clock is unknown;
    SST-2's and Gemma-2B's ran MAXN. 552288.86 / 549624.25 = 1.00485: +0.48 % over the 816 run."""
    deb, py = _curve("deberta-v2-xlarge/qnli"), _curve("pythia-14m/qnli")
    assert deb.maxn_run == 816.0 and not deb.ran_maxn and "lines 199-200" in deb.maxn_evidence
    assert "lines 258-263" in deb.maxn_evidence and "+ 0.48 %" in deb.maxn_evidence
    assert deb.maxn_j / deb.energy_j[816.0] == pytest.approx(1.00485, abs=1e-5)
    assert py.maxn_run is None and not py.ran_maxn and py.maxn_evidence
    assert _curve("deberta-v2-xlarge/sst2").ran_maxn and _curve("gemma-2b/qnli").ran_maxn
    assert "1293 MHz" in _curve("gemma-2b/qnli").maxn_evidence
