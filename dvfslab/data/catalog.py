"""Catalog of the paper's workloads: models with their real configurations, and the GLUE tasks.

Models
------
* BERT (encoder): Google's BERT miniatures (Turc et al. 2019, ``google/bert_uncased_L-*``) for
  ``bert-tiny`` / ``bert-mini`` / ``bert-small`` / ``bert-medium``; ``bert-base`` and
  ``bert-large`` (Devlin et al. 2019, uncased). **"xLarge"** is the BERT-xlarge configuration of
  the ALBERT paper (Lan et al. 2019, Table 1: L=24, H=2048, 1.27 B parameters), with FFN = 4H
  and 16 heads as in ALBERT's public ``albert-xlarge`` config. No pretrained BERT-xlarge
  checkpoint is public: fine-tuning it means training from a random initialisation.
* Pythia (decoder, GPT-NeoX): EleutherAI's configs for 14M … 1B (Biderman et al. 2023):
  vocabulary 50304, rotary on 25 % of each head, parallel residual, untied output embedding.

The paper's nine models (27 = 9 × 3 characterization configurations) are :data:`PAPER_MODELS`:
BERT small, base, large, xLarge and Pythia 31M, 70M, 160M, 410M, 1B. ``bert-tiny``,
``bert-mini``, ``bert-medium`` and ``pythia-14m`` are extra, for fast tests.

``params_m`` of a workload is the parameter count of the model that is actually fine-tuned
(``AutoModelForSequenceClassification``: BERT with pooler and classifier; GPT-NeoX *without*
its 50304 × H LM head, plus a ``score`` layer), computed exactly from the config. It is smaller
than the name suggests for Pythia (pythia-70m fine-tunes 44.7 M parameters); ``nominal_params_m``
keeps the published size the paper's "> 70M" grouping refers to.

Tasks
-----
GLUE train/validation sizes are those of the ``nyu-mll/glue`` dataset card (Hugging Face,
``README.md`` ``dataset_info``, ``splits: num_examples``; the tasks are those of Wang et al.,
"GLUE", ICLR 2019, table 1): train CoLA 8,551, SST-2 67,349, MRPC 3,668, STS-B 5,749,
QQP 363,846, MNLI 392,702, QNLI 104,743, RTE 2,490, WNLI 635. A workload's whole job
(``job_steps``, :func:`job_steps`) is the usual GLUE recipe: :data:`GLUE_EPOCHS` = 3 epochs over
the train split (Devlin et al., "BERT", NAACL 2019, sec. 4.1: batch size 32, 3 epochs for all GLUE
tasks; also the default ``num_train_epochs`` of ``transformers.TrainingArguments``), in
optimizer steps: ``3 × ceil(train_size / batch_size)`` (the last, partial batch is a step).
Average sequence lengths
(tokens per example, special tokens included) are **estimates** (``avg_seq_len_source ==
"estimate"``): WordPiece counts typical of the literature for BERT-uncased, and for GPT-NeoX the
same minus the special tokens BERT adds (the two tokenizers give similar counts on English
text). The spread of example lengths (``seq_len_cv``, which sets how much dynamic padding adds)
is an estimate too. :func:`dvfslab.data.seqlen.measure_avg_seq_len` computes the real average from the data when it
is available.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from dvfslab.core.errors import DvfsError


class UnknownWorkloadError(DvfsError, KeyError):
    """A model or task name that is not in the catalog."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class ModelSpec:
    """One catalog model: the configuration of its transformer (all sizes in units, not M)."""

    name: str
    family: str  # "bert" | "pythia" | "deberta" | "gemma"
    model_type: str  # "encoder" | "decoder" (the catalog's transformers; a dataset may also say cnn, rnn, other)
    hub_id: str | None  # pretrained checkpoint on the Hugging Face hub, None when none exists
    n_layers: int
    hidden_size: int
    n_heads: int
    ffn_size: int
    vocab_size: int
    max_position: int
    nominal_params_m: float
    in_paper: bool
    source: str
    kv_heads: int | None = None  # key/value heads (multi-query attention: 1); None = n_heads
    ffn_matrices: int = 2  # 2: up and down; 3: gated (GeGLU: gate, up, down)
    rel_positions: int = 0  # relative-position rows each query also attends to (DeBERTa-v2: 2 x 256 buckets)

    @property
    def tokenizer_family(self) -> str:
        """``wordpiece`` (BERT; also the length estimate for DeBERTa's and Gemma's SentencePiece) or ``gpt-neox``."""
        return "gpt-neox" if self.family == "pythia" else "wordpiece"

    def _kv_dim(self) -> int:
        heads = self.n_heads if self.kv_heads is None else self.kv_heads
        return heads * (self.hidden_size // self.n_heads)

    def layer_params(self) -> int:
        """Parameters of one transformer layer (attention, FFN, two norms; biases except in Gemma)."""
        d, ff, kv = self.hidden_size, self.ffn_size, self._kv_dim()
        if self.family == "gemma":  # no biases, RMSNorm weights only
            return 2 * d * d + 2 * d * kv + self.ffn_matrices * d * ff + 2 * d
        return 4 * d * d + 4 * d + 2 * d * ff + ff + d + 4 * d

    def non_embedding_params(self) -> int:
        """Layers plus final LayerNorm (Pythia) or pooler (BERT): the Kaplan et al. N."""
        d = self.hidden_size
        tail = {"pythia": 2 * d, "gemma": d,  # final norm
                # pooler + the relative-position embeddings with their LayerNorm + the conv layer (kernel 3) with its LayerNorm
                "deberta": d * d + d + self.rel_positions * d + 2 * d + 3 * d * d + d + 2 * d}.get(self.family, d * d + d)
        return self.n_layers * self.layer_params() + tail

    def embedding_params(self) -> int:
        d = self.hidden_size
        if self.family == "bert":  # word + position + token type + LayerNorm
            return (self.vocab_size + self.max_position + 2) * d + 2 * d
        if self.family == "deberta":  # word + LayerNorm (position_biased_input false: no absolute positions)
            return self.vocab_size * d + 2 * d
        return self.vocab_size * d  # embed_in; embed_out (LM head) is not part of the classifier

    def classifier_params(self, num_labels: int = 2) -> int:
        d = self.hidden_size
        return d * num_labels + (num_labels if self.family in ("bert", "deberta") else 0)

    def params(self, num_labels: int = 2) -> int:
        """Exact parameter count of the sequence-classification model that is fine-tuned."""
        return self.embedding_params() + self.non_embedding_params() + self.classifier_params(num_labels)

    def matmul_params(self) -> int:
        """Weights that take part in a matmul for every token (attention and FFN projections)."""
        d, ff, kv = self.hidden_size, self.ffn_size, self._kv_dim()
        return self.n_layers * (2 * d * d + 2 * d * kv + self.ffn_matrices * d * ff)

    def param_tensors(self) -> int:
        """Number of parameter tensors (what the optimizer and grad clipping iterate over)."""
        if self.family == "bert":
            return 5 + 16 * self.n_layers + 2 + 2
        if self.family == "deberta":  # word + LN; layers; rel embeddings + LN; conv + LN; pooler; classifier
            return 3 + 16 * self.n_layers + 3 + 4 + 2 + 2
        if self.family == "gemma":  # embed; q, k, v, o, gate, up, down, 2 norms per layer; final norm; score
            return 1 + 9 * self.n_layers + 1 + 1
        return 1 + 12 * self.n_layers + 2 + 1


def _bert(name: str, hub: str | None, layers: int, hidden: int, heads: int, nominal: float,
          in_paper: bool, source: str) -> ModelSpec:
    return ModelSpec(name, "bert", "encoder", hub, layers, hidden, heads, 4 * hidden, 30522, 512,
                     nominal, in_paper, source)


def _pythia(size: str, layers: int, hidden: int, heads: int, nominal: float, in_paper: bool) -> ModelSpec:
    return ModelSpec(f"pythia-{size}", "pythia", "decoder", f"EleutherAI/pythia-{size}", layers, hidden,
                     heads, 4 * hidden, 50304, 2048, nominal, in_paper,
                     f"EleutherAI/pythia-{size} config.json (Biderman et al. 2023)")


_MINI = "Google BERT miniatures (Turc et al. 2019), google/bert_uncased_L-{}_H-{}_A-{}"
MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    _bert("bert-tiny", "google/bert_uncased_L-2_H-128_A-2", 2, 128, 2, 4.4, False, _MINI.format(2, 128, 2)),
    _bert("bert-mini", "google/bert_uncased_L-4_H-256_A-4", 4, 256, 4, 11.3, False, _MINI.format(4, 256, 4)),
    _bert("bert-small", "google/bert_uncased_L-4_H-512_A-8", 4, 512, 8, 29.1, True, _MINI.format(4, 512, 8)),
    _bert("bert-medium", "google/bert_uncased_L-8_H-512_A-8", 8, 512, 8, 41.7, False, _MINI.format(8, 512, 8)),
    _bert("bert-base", "google-bert/bert-base-uncased", 12, 768, 12, 110.0, True, "google-bert/bert-base-uncased (Devlin et al. 2019)"),
    _bert("bert-large", "google-bert/bert-large-uncased", 24, 1024, 16, 340.0, True, "google-bert/bert-large-uncased (Devlin et al. 2019)"),
    _bert("bert-xlarge", None, 24, 2048, 16, 1270.0, True,
          "BERT-xlarge of the ALBERT paper (Lan et al. 2019, Table 1); heads/FFN as albert-xlarge; no public checkpoint"),
    _pythia("14m", 6, 128, 4, 14.0, False),
    _pythia("31m", 6, 256, 8, 31.0, True),
    _pythia("70m", 6, 512, 8, 70.0, True),
    _pythia("160m", 12, 768, 12, 160.0, True),
    _pythia("410m", 24, 1024, 16, 410.0, True),
    _pythia("1b", 16, 2048, 8, 1000.0, True),
    # the real study's larger models (esainulab/slmdvfs; docs/calibration.md, section 3.5)
    ModelSpec("deberta-v2-xlarge", "deberta", "encoder", "microsoft/deberta-v2-xlarge", 24, 1536, 24, 6144, 128100, 512,
              900.0, False, "microsoft/deberta-v2-xlarge model card and config.json (24 layers, hidden 1536, 24 heads, "
              "intermediate 6144, vocab 128100, position_buckets 256, conv_kernel_size 3; '900M' parameters)",
              rel_positions=512),
    ModelSpec("gemma-2b", "gemma", "decoder", "google/gemma-2b", 18, 2048, 8, 16384, 256000, 8192, 2500.0, False,
              "google/gemma-2b model card and config.json (18 layers, hidden 2048, 8 heads of 256, 1 key/value head, "
              "intermediate 16384 GeGLU, vocab 256000; 2.5B parameters)", kv_heads=1, ffn_matrices=3),
)}
PAPER_MODELS: tuple[str, ...] = tuple(n for n, m in MODELS.items() if m.in_paper)


GLUE_EPOCHS = 3  # epochs of the whole fine-tuning job (the module docstring says why)


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: sizes, text columns, labels and (estimated) average length in tokens.

    ``metric`` is the task's headline figure: ``accuracy``, ``f1`` (MRPC, QQP),
    ``matthews_correlation`` (CoLA) or ``pearson`` (STS-B). ``eval_split`` is the split a
    fine-tuning run evaluates on (MNLI: ``validation_matched``). ``mean_words`` is a rough
    number of words per text column, used only to shape the synthetic generator of
    :mod:`dvfslab.harness.glue` (real token lengths are measured on the tokenized data).
    """

    name: str
    display: str
    text_columns: tuple[str, ...]
    num_labels: int  # 1 = regression (STS-B)
    train_size: int
    validation_size: int
    metric: str
    avg_seq_len_wordpiece: float
    seq_len_cv: float  # coefficient of variation of example lengths (estimate)
    mean_words: tuple[int, ...]
    eval_split: str = "validation"
    avg_seq_len_source: str = "estimate"

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def job_steps(self, batch_size: int, epochs: int = GLUE_EPOCHS) -> int:
        """Optimizer steps of ``epochs`` passes over the train split (the last batch may be partial)."""
        return epochs * math.ceil(self.train_size / int(batch_size))

    def avg_seq_len(self, tokenizer_family: str = "wordpiece") -> float:
        """Estimated tokens per example for a tokenizer family (``wordpiece`` or ``gpt-neox``)."""
        if tokenizer_family == "wordpiece":
            return self.avg_seq_len_wordpiece
        special = 3 if self.is_pair else 2  # [CLS] a [SEP] (b [SEP]); GPT-NeoX adds none
        return round(self.avg_seq_len_wordpiece - special, 1)


# train / validation sizes: the nyu-mll/glue dataset card (see the module docstring)
TASKS: dict[str, GlueTask] = {t.name: t for t in (
    GlueTask("cola", "CoLA", ("sentence",), 2, 8551, 1043, "matthews_correlation", 11.3, 0.45, (9,)),
    GlueTask("sst2", "SST-2", ("sentence",), 2, 67349, 872, "accuracy", 13.3, 0.7, (10,)),
    GlueTask("mrpc", "MRPC", ("sentence1", "sentence2"), 2, 3668, 408, "f1", 53.2, 0.25, (22, 22)),
    GlueTask("stsb", "STS-B", ("sentence1", "sentence2"), 1, 5749, 1500, "pearson", 31.3, 0.4, (10, 10)),
    GlueTask("qqp", "QQP", ("question1", "question2"), 2, 363846, 40430, "f1", 30.6, 0.45, (11, 11)),
    GlueTask("mnli", "MNLI", ("premise", "hypothesis"), 3, 392702, 9815, "accuracy", 39.9, 0.45, (22, 11),
             eval_split="validation_matched"),
    GlueTask("qnli", "QNLI", ("question", "sentence"), 2, 104743, 5463, "accuracy", 51.0, 0.4, (10, 30)),
    GlueTask("rte", "RTE", ("sentence1", "sentence2"), 2, 2490, 277, "accuracy", 71.1, 0.5, (43, 9)),
    GlueTask("wnli", "WNLI", ("sentence1", "sentence2"), 2, 635, 71, "accuracy", 37.5, 0.3, (14, 8)),
)}

CHARACTERIZATION_TASKS: tuple[str, ...] = ("sst2", "qnli", "mrpc")
EVALUATION_TASKS: tuple[str, ...] = ("qqp", "rte", "cola", "stsb", "mnli", "wnli")

# The one list of Hugging Face ``model_type`` values by architecture (the paper's "model type"
# feature: encoder-only vs decoder-only). A config whose type is in neither list is classified
# by its ``architectures`` (``*CausalLM`` = decoder) by :func:`is_decoder_config`.
ENCODER_TYPES = frozenset({
    "albert", "bert", "camembert", "deberta", "deberta-v2", "distilbert", "electra", "ernie",
    "megatron-bert", "mobilebert", "modernbert", "mpnet", "roberta", "xlm-roberta"})
DECODER_TYPES = frozenset({
    "bloom", "falcon", "gemma", "gemma2", "gpt2", "gpt_neo", "gpt_neox", "gptj", "llama", "mistral",
    "olmo", "opt", "phi", "phi3", "qwen2", "qwen3", "smollm", "smollm3", "stablelm"})


def is_decoder_config(model_type: str | None, architectures=()) -> bool | None:
    """True for a decoder-only config, False for an encoder, None when it cannot be told."""
    mt = str(model_type or "").lower()
    if mt in DECODER_TYPES:
        return True
    if mt in ENCODER_TYPES:
        return False
    return True if any(str(a).endswith("CausalLM") for a in architectures or ()) else None


DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_SEQ_LEN = 128


def _lookup(kind: str, name: str, table: Mapping) -> object:
    key = name.strip().lower().replace("_", "-")
    if kind == "task":
        key = key.replace("-", "")
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownWorkloadError(f"unknown {kind} {name!r}; the catalog has: {', '.join(table)}.{hint}")


def get_model(name: str) -> ModelSpec:
    """The catalog model ``name`` (e.g. ``bert-base``, ``pythia-70m``); :class:`DvfsError` if unknown."""
    return _lookup("model", name, MODELS)  # type: ignore[return-value]


def get_task(name: str) -> GlueTask:
    """The GLUE task ``name`` (``sst2``, ``SST-2``, ``sts-b`` …); :class:`DvfsError` if unknown."""
    return _lookup("task", name, TASKS)  # type: ignore[return-value]


def workload_id(model: str, task: str) -> str:
    """``bert-base/sst2``: the dataset contract's workload id."""
    return f"{get_model(model).name}/{get_task(task).name}"


def default_split(task: str) -> str:
    """``characterization`` for SST-2, QNLI, MRPC (the paper's training tasks), else ``evaluation``.

    ``synthetic:<task>`` and any other ``<prefix>:<task>`` go with ``<task>``; a task outside the
    catalog is ``evaluation``.
    """
    key = task.rpartition(":")[2].strip().lower().replace("-", "").replace("_", "")
    return "characterization" if key in CHARACTERIZATION_TASKS else "evaluation"


def job_steps(task: str, batch_size: int | None, epochs: int = GLUE_EPOCHS) -> int | None:
    """Optimizer steps of the whole fine-tuning job of a GLUE task (:meth:`GlueTask.job_steps`);
    ``None`` for a task outside the catalog, a ``synthetic:<task>`` (generated data has no
    GLUE length) or an unknown batch size."""
    if batch_size is None or ":" in task:
        return None
    try:
        return get_task(task).job_steps(batch_size, epochs)
    except UnknownWorkloadError:
        return None


def workload_record(workload_id: str, model: str, task: str, *, model_family: str | None = None,
                    model_type: str | None = None, params_m: float | None = None, n_layers: int | None = None,
                    hidden_size: int | None = None, avg_seq_len: float | None = None,
                    max_seq_len: int | None = None, batch_size: int | None = None,
                    split: str | None = None) -> dict:
    """One ``workloads.csv`` row (the dataset contract's columns, then ``job_steps``): the one place
    a row is assembled, whether its features come from the catalog (:func:`workload_row`), from a
    loaded model (:func:`dvfslab.harness.records.measured_workload_row`) or only from its id
    (:func:`dvfslab.data.workloads.workload_table`). ``split`` defaults to the task's
    (:func:`default_split`); ``job_steps`` is the GLUE task's whole job (:func:`job_steps`)."""
    return {
        "workload_id": workload_id, "model": model, "model_family": model_family, "model_type": model_type,
        "params_m": params_m, "n_layers": n_layers, "hidden_size": hidden_size, "task": task,
        "avg_seq_len": avg_seq_len, "max_seq_len": max_seq_len, "batch_size": batch_size,
        "split": split or default_split(task), "job_steps": job_steps(task, batch_size),
    }


def workload_row(model: str, task: str, *, split: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 max_seq_len: int = DEFAULT_MAX_SEQ_LEN, avg_seq_len: float | None = None) -> dict:
    """The ``workloads.csv`` row (:func:`workload_record`) of a catalog model and task.

    ``avg_seq_len`` defaults to the catalog estimate for the model's tokenizer; pass a measured
    value (:func:`dvfslab.data.seqlen.measure_avg_seq_len`) when you have one.
    """
    m, t = get_model(model), get_task(task)
    seq = t.avg_seq_len(m.tokenizer_family) if avg_seq_len is None else float(avg_seq_len)
    return workload_record(f"{m.name}/{t.name}", m.name, t.name, model_family=m.family, model_type=m.model_type,
                           params_m=round(m.params(t.num_labels) / 1e6, 2), n_layers=m.n_layers,
                           hidden_size=m.hidden_size, avg_seq_len=round(min(seq, max_seq_len), 1),
                           max_seq_len=int(max_seq_len), batch_size=int(batch_size), split=split)


def model_config(name: str, num_labels: int = 2) -> dict:
    """Keyword arguments of the Hugging Face config of a catalog model (``model_type`` included).

    ``transformers.AutoConfig.for_model(**model_config("pythia-70m"))`` builds it; see
    :func:`hf_config`. Values are those of the public config files (see the module docstring).
    """
    m = get_model(name)
    common = {"vocab_size": m.vocab_size, "hidden_size": m.hidden_size, "num_hidden_layers": m.n_layers,
              "num_attention_heads": m.n_heads, "intermediate_size": m.ffn_size,
              "max_position_embeddings": m.max_position, "hidden_act": "gelu", "num_labels": num_labels}
    if m.family == "deberta":
        return {"model_type": "deberta-v2", **common, "type_vocab_size": 0, "relative_attention": True,
                "position_buckets": m.rel_positions // 2, "max_relative_positions": -1, "pos_att_type": ["p2c", "c2p"],
                "share_att_key": True, "norm_rel_ebd": "layer_norm", "conv_kernel_size": 3, "conv_act": "gelu",
                "position_biased_input": False, "layer_norm_eps": 1e-7, "pad_token_id": 0}
    if m.family == "gemma":
        return {"model_type": "gemma", **common, "num_key_value_heads": m.kv_heads,
                "head_dim": m.hidden_size // m.n_heads, "hidden_act": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
                "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1}
    if m.family == "bert":
        return {"model_type": "bert", **common, "type_vocab_size": 2, "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1, "layer_norm_eps": 1e-12, "initializer_range": 0.02,
                "pad_token_id": 0}
    return {"model_type": "gpt_neox", **common, "rotary_pct": 0.25, "rotary_emb_base": 10000,
            "use_parallel_residual": True, "tie_word_embeddings": False, "layer_norm_eps": 1e-5,
            "initializer_range": 0.02, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def hf_config(name: str, num_labels: int = 2):
    """A ``transformers`` config object for a catalog model (needs the ``finetune`` extra)."""
    try:
        from transformers import AutoConfig
    except ImportError as err:
        raise DvfsError("building a model config needs transformers: pip install 'dvfslab[finetune]'") from err
    kwargs = model_config(name, num_labels)
    return AutoConfig.for_model(kwargs.pop("model_type"), **kwargs)
