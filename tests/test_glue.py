"""GLUE task loading, the synthetic generator, local tokenizers and metrics (no training)."""

from __future__ import annotations

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

datasets = pytest.importorskip("datasets")
pytest.importorskip("transformers")

from dvfslab.core.errors import DvfsError  # noqa: E402
from dvfslab.harness import glue  # noqa: E402

ALL_TASKS = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli")


def test_task_spec_names_aliases_and_unknown():
    assert glue.task_spec("SST-2").name == "sst2"
    assert glue.task_spec("synthetic:sts-b").is_regression
    assert glue.task_spec("mnli").eval_split == "validation_matched"
    assert glue.task_spec("mrpc").text_columns == ("sentence1", "sentence2")
    with pytest.raises(DvfsError, match="unknown task 'sst3'.*synthetic:<task>"):
        glue.task_spec("sst3")


@pytest.mark.parametrize("task", ALL_TASKS)
def test_synthetic_has_the_task_shape(task):
    spec = glue.task_spec(task)
    data = glue.load_task(f"synthetic:{task}", n_train=60, n_eval=30, seed=3)
    assert (len(data["train"]), len(data["validation"])) == (60, 30)
    assert set(data["train"].column_names) == {*spec.text_columns, "label", "idx"}
    labels = np.asarray(data["train"]["label"])
    if spec.is_regression:
        assert labels.dtype.kind == "f" and labels.min() >= 0 and labels.max() <= 5
    else:
        counts = np.bincount(labels, minlength=spec.num_labels)
        assert len(counts) == spec.num_labels and counts.min() == 60 // spec.num_labels
    assert all(len(t.split()) >= 3 for f in spec.text_columns for t in data["train"][f])
    again = glue.load_task(f"synthetic:{task}", n_train=60, n_eval=30, seed=3)
    assert again["train"][:] == data["train"][:]
    assert glue.load_task(f"synthetic:{task}", n_train=60, seed=4)["train"][:] != data["train"][:]


def _overlap(a: str, b: str) -> float:
    wa, wb = set(a.split()), b.split()
    return sum(w in wa for w in wb) / len(wb)


def test_synthetic_labels_are_learnable_by_a_simple_rule():
    """The label is a function of the text: a one-line rule recovers it almost always."""
    sst = glue.synthetic_rows(glue.task_spec("sst2"), 400, seed=0)
    pos = set(glue._POSITIVE)
    rule = [int(sum(w in pos for w in s.split()) >= 2) for s in sst["sentence"]]
    assert np.mean(np.asarray(rule) == np.asarray(sst["label"])) > 0.95

    mrpc = glue.synthetic_rows(glue.task_spec("mrpc"), 400, seed=0)
    ov = np.array([_overlap(a, b) for a, b in zip(mrpc["sentence1"], mrpc["sentence2"], strict=True)])
    assert np.mean((ov > 0.75) == (np.asarray(mrpc["label"]) == 1)) > 0.95

    qnli = glue.synthetic_rows(glue.task_spec("qnli"), 400, seed=0)  # 0 = entailment in QNLI
    ov = np.array([_overlap(a, b) for a, b in zip(qnli["question"], qnli["sentence"], strict=True)])
    assert np.mean((ov > 0.75) == (np.asarray(qnli["label"]) == 0)) > 0.95

    sts = glue.synthetic_rows(glue.task_spec("stsb"), 400, seed=0)
    ov = np.array([_overlap(a, b) for a, b in zip(sts["sentence1"], sts["sentence2"], strict=True)])
    assert np.corrcoef(ov, sts["label"])[0, 1] > 0.8

    cola = glue.synthetic_rows(glue.task_spec("cola"), 400, seed=0)
    bad = [any(bg in s for bg in glue._BAD_BIGRAMS) for s in cola["sentence"]]
    assert np.mean(np.asarray(bad) == (np.asarray(cola["label"]) == 0)) > 0.9


def test_local_csv_tsv_and_save_to_disk(tmp_path):
    rows = glue.synthetic_rows(glue.task_spec("mrpc"), 20, seed=0)
    frame = pd.DataFrame(rows)
    csv_dir, tsv_dir = tmp_path / "csv", tmp_path / "tsv"
    csv_dir.mkdir()
    tsv_dir.mkdir()
    frame.to_csv(csv_dir / "train.csv", index=False)
    frame.head(8).to_csv(csv_dir / "validation.csv", index=False)
    frame.to_csv(tsv_dir / "train.tsv", sep="\t", index=False)
    frame.head(8).to_csv(tsv_dir / "dev.tsv", sep="\t", index=False)
    for d in (csv_dir, tsv_dir):
        data = glue.load_task("mrpc", data_dir=d, n_train=10, seed=0)
        assert (len(data["train"]), len(data["validation"])) == (10, 8)
        assert data["train"][0]["sentence1"] in rows["sentence1"]
    saved = tmp_path / "saved"
    glue.synthetic_task("mrpc", n_train=12, n_eval=4).save_to_disk(str(saved))
    assert len(glue.load_task("mrpc", data_dir=saved)["train"]) == 12


def test_local_files_missing_or_wrong_columns(tmp_path):
    with pytest.raises(DvfsError, match="need train.<ext> and validation.<ext>"):
        glue.load_task("sst2", data_dir=tmp_path)
    pd.DataFrame({"text": ["a b c"], "label": [1]}).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"text": ["a b c"], "label": [1]}).to_csv(tmp_path / "validation.csv", index=False)
    with pytest.raises(DvfsError, match="columns sentence are missing"):
        glue.load_task("sst2", data_dir=tmp_path)
    with pytest.raises(DvfsError, match="is not a directory"):
        glue.load_task("sst2", data_dir=tmp_path / "nope")


def test_hub_task_offline_names_the_fix(monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(DvfsError) as err:
        glue.load_task("rte")
    msg = str(err.value)
    assert "'rte' cannot be loaded" in msg and "--data-dir" in msg and "synthetic:rte" in msg
    assert "\n" not in msg


def test_local_tokenizers_encoder_and_decoder():
    spec = glue.task_spec("mrpc")
    data = glue.load_task("synthetic:mrpc", n_train=40, n_eval=10)
    enc = glue.build_local_tokenizer(glue.task_texts(data["train"], spec), vocab_size=50)
    out = enc("the film", "a river")
    assert out["input_ids"][0] == enc.cls_token_id and out["input_ids"].count(enc.sep_token_id) == 2
    assert max(enc("zzz unknown words")["input_ids"]) < 50 and enc.unk_token_id in enc("zzz")["input_ids"]
    assert out["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]
    dec = glue.build_local_tokenizer(glue.task_texts(data["train"], spec), vocab_size=50, decoder=True)
    assert dec.pad_token == dec.eos_token == "<|endoftext|>"
    assert "token_type_ids" not in dec("the film", "a river")


def test_tokenize_truncates_and_measures_avg_len():
    spec = glue.task_spec("rte")
    data = glue.load_task("synthetic:rte", n_train=30, n_eval=10)
    tok = glue.build_local_tokenizer(glue.task_texts(data["train"], spec), vocab_size=500)
    for max_len in (16, 512):
        out = glue.tokenize_task(data, tok, spec, max_len)
        lengths = [len(x) for x in out["train"]["input_ids"]]
        assert max(lengths) <= max_len and "labels" in out["train"].column_names
    assert max(lengths) > 16  # RTE premises are long: truncation did something above
    three = datasets.Dataset.from_dict({"input_ids": [[5, 6, 7], [5, 6], [5, 6, 7, 8, 9, 10, 11]]})
    assert glue.avg_seq_len(three) == 4.0  # (3 + 2 + 7) / 3 tokens
    stsb = glue.tokenize_task(glue.load_task("synthetic:stsb", n_train=8, n_eval=4), tok, glue.task_spec("stsb"), 32)
    assert stsb["train"].features["labels"].dtype == "float32"


def test_metrics_match_sklearn_and_scipy():
    sk = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 2, 200)
    logits = rng.normal(size=(200, 2)) + np.eye(2)[ref] * 0.8
    pred = logits.argmax(1)
    m = glue.compute_metrics(glue.task_spec("cola"), logits, ref)
    assert m["accuracy"] == pytest.approx(sk.accuracy_score(ref, pred))
    assert m["f1"] == pytest.approx(sk.f1_score(ref, pred))
    assert m["matthews_correlation"] == pytest.approx(sk.matthews_corrcoef(ref, pred))
    assert m["metric"] == m["matthews_correlation"]
    assert glue.compute_metrics(glue.task_spec("mrpc"), logits, ref)["metric"] == m["f1"]
    score = np.round(rng.uniform(0, 5, 100), 1)  # rounding makes ties
    noisy = np.round(score + rng.normal(0, 1, 100), 0)
    s = glue.compute_metrics(glue.task_spec("stsb"), noisy.reshape(-1, 1), score)
    assert s["pearson"] == pytest.approx(stats.pearsonr(noisy, score)[0])
    assert s["spearman"] == pytest.approx(stats.spearmanr(noisy, score)[0])
    assert s["metric"] == s["pearson"]
    three = glue.compute_metrics(glue.task_spec("mnli"), np.eye(3)[[0, 1, 2, 2]], np.array([0, 1, 2, 1]))
    assert three == {"accuracy": 0.75, "metric": 0.75}
