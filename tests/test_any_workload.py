"""Any workload in the contract (issue #37, item 5): a CNN, an RNN or another model beside the
transformers. A CNN workload is recorded (its row assembled by ``workload_record``, as a sweep
or an importer does), validated (``dvfslab validate``) and replayed; the features that do not
apply to it (``is_decoder``: encoder or decoder; ``avg_seq_len``: tokens) are missing, never
invented, and the learned governors decide for it from what is there.

The CNN's runs are a closed form whose least energy is at a level chosen by hand:
``E(f) = 100 (1 + 2 ln(f / 714)^2)`` J, ``T(f) = 10 (0.3 + 0.7 · 1300.5 / f)`` s, so its oracle
level is 714 MHz (E = 100 J there, the only zero of ``ln(f / 714)``).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from analysis_fixtures import ORIN_FREQS_MHZ, make_dataset

from dvfslab import cli
from dvfslab.analysis.aggregate import sweep_from_dataset
from dvfslab.analysis.features import feature_table, governor_row
from dvfslab.analysis.training import TrainingData
from dvfslab.data.catalog import workload_record
from dvfslab.data.contract import DatasetError, load_dataset, write_dataset
from dvfslab.evaluation.replay import replay
from dvfslab.governors.registry import make as make_governor

CNN = "resnet18/cifar10"


def with_cnn(root, model_type="cnn"):
    ds = load_dataset(make_dataset(root / "base", models=["bert-tiny", "bert-small", "pythia-31m", "pythia-70m"],
                                   tasks=["sst2", "qnli"], reps=1))
    row = workload_record(CNN, "resnet18", "cifar10", model_family="resnet", model_type=model_type, params_m=11.7,
                          n_layers=18, batch_size=16, split="evaluation")
    wl = pd.concat([ds.workloads, pd.DataFrame([row]).drop(columns=["job_steps"])], ignore_index=True)
    runs = [{"run_id": f"cnn-{f:g}", "workload_id": CNN, "policy": "fixed", "gpu_freq_mhz": f, "rep": 0,
             "time_s": 10 * (0.3 + 0.7 * 1300.5 / f), "energy_j": 100 * (1 + 2 * math.log(f / 714) ** 2)}
            for f in ORIN_FREQS_MHZ]
    runs.append({"run_id": "cnn-maxn", "workload_id": CNN, "policy": "maxn", "gpu_freq_mhz": None, "rep": 0,
                 "time_s": 10.0, "energy_j": 100 * (1 + 2 * math.log(1300.5 / 714) ** 2)})
    runs = pd.concat([ds.runs, pd.DataFrame(runs)], ignore_index=True)
    for col in ("avg_power_w", "gpu_util_pct", "steps"):
        if col in runs:
            runs[col] = runs[col].fillna({"avg_power_w": 0, "gpu_util_pct": 50.0, "steps": 100}[col])
    runs["avg_power_w"] = runs["energy_j"] / runs["time_s"]
    runs["status"] = "ok"
    return write_dataset(root / "with_cnn", ds.meta, wl, runs)


@pytest.mark.parametrize("model_type", ["cnn", "rnn", "other"])
def test_the_contract_admits_cnn_rnn_and_other_model_types(tmp_path, model_type):
    ds = with_cnn(tmp_path, model_type)
    assert cli.main(["validate", str(ds.path)]) == 0
    assert ds.workloads.set_index("workload_id").loc[CNN, "model_type"] == model_type


def test_an_unknown_model_type_is_refused_naming_the_column(tmp_path):
    with pytest.raises(DatasetError, match="model_type"):
        with_cnn(tmp_path, "transformer-ish")


def test_a_cnn_is_recorded_validated_and_replayed_with_its_missing_features_missing(tmp_path):
    ds = with_cnn(tmp_path)
    assert cli.main(["validate", str(ds.path)]) == 0
    sweep = sweep_from_dataset(ds)
    table = feature_table(sweep)
    cnn = table.set_index("workload_id").loc[CNN]
    # not invented: a CNN is neither an encoder nor a decoder, and has no token length
    assert math.isnan(cnn["is_decoder"]) and math.isnan(cnn["avg_seq_len"]) and math.isnan(cnn["hidden_size"])
    assert cnn["n_layers"] == 18.0
    train = [w for w in table["workload_id"] if w != CNN]
    data = TrainingData(sweep, table, train)
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.tree import DecisionTreeClassifier

    tree = Pipeline([("impute", SimpleImputer(strategy="median")), ("model", DecisionTreeClassifier(random_state=0))])
    params = {"mlg": {"estimator": tree, "features": ["is_decoder", "n_layers", "avg_seq_len", "gpu_util_pct"]}}
    govs = {n: make_governor(n, **params.get(n, {})).fit(data) for n in ("ffg", "mlg", "curve", "voi", "oracle")}
    row = governor_row(table[table["workload_id"] == CNN].iloc[0].to_dict())
    for name in ("mlg", "curve"):  # decided before the run from the features there are
        level = govs[name].decide(row).level
        assert level in ORIN_FREQS_MHZ, (name, level)
    per = replay(govs, sweep, table, workload_ids=[CNN]).set_index("policy")  # voi probes the CNN's steps
    assert per.loc["oracle", "level"] == 714.0  # the closed form's least energy (module doc)
    assert per[["energy_j", "job_energy_j"]].notna().all().all(), per["error"].to_dict()
    # every level decided is a level of the table; through the live runner (issue #35) a governor
    # whose job ends before it decides (here the CNN's one-unit job, inside the runner's first
    # default-clock window) has no level, and says so
    assert set(per["level"].dropna()) <= set(ORIN_FREQS_MHZ)
    undecided = per.loc[per["level"].isna(), "note"]
    assert all("ended before the governor decided" in note for note in undecided), undecided.to_dict()
