"""Overhead of :class:`dvfslab.harness.callback.DvfsCallback` on the training step time.

The same fine-tuning run (a small random-init BERT on the synthetic SST-2 set, CPU or GPU,
whatever torch finds) is repeated with and without the callback, interleaved (A B A B ...) so
that drift of the machine hits both arms alike. "With" means the whole measurement path: the
clock locked on a fake JetPack 6 AGX Orin sysfs tree (with the fake kernel's rules), the
power sampler thread reading the INA3221 files at 100 Hz, the run and epoch windows, and the
per-step timing and telemetry polls. Both arms time every optimizer step with the same tiny
timer callback (``time.perf_counter`` at step begin/end); the first ``--skip`` steps of each
run are dropped. Reported: the median step time of each arm over all kept steps and their ratio;
the median of the per-pair ratios with a bootstrap 95 % interval (the headline: each pair runs
back to back, so load from other processes on the machine cancels within a pair); and the
process CPU time per step (all threads, the sampler's included), which neighbours disturb less.
Verdict: PASS when the whole interval is under +2 %, FAIL when it is all above, else
INCONCLUSIVE.

``--online`` instead runs the online governor's callback in real time on the fake board: each
"step" sleeps ``T(f) = 0.02 + 12 / f`` s while the fake rails draw ``P(f) = 4 + 0.004 f + 6e-6 f^2``
W, so the energies the threaded sampler measures carry real timer and sleep jitter; it prints the
level chosen next to the true minimum (408 MHz). The unit tests run the same loop on a virtual
clock, exactly.

    .venv/bin/python benchmarks/callback_overhead.py [--reps 16] [--steps 20] [--period-ms 10]
    .venv/bin/python benchmarks/callback_overhead.py --online [--period-ms 2]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_var, "1")

from transformers import TrainerCallback  # noqa: E402

from dvfslab.harness import glue  # noqa: E402
from dvfslab.harness.callback import DvfsCallback  # noqa: E402
from dvfslab.harness.hf import ModelSource, build_model, make_trainer  # noqa: E402
from dvfslab.hw.jetson.backend import open_backend  # noqa: E402
from dvfslab.testing.fake_sysfs import build_board  # noqa: E402


class StepTimer(TrainerCallback):
    """Wall time and process CPU time (all threads, the sampler's included) of every step."""

    def __init__(self):
        self.times_s: list[float] = []
        self.cpu_s: list[float] = []
        self._t0 = self._c0 = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0, self._c0 = time.perf_counter(), time.process_time()

    def on_step_end(self, args, state, control, **kwargs):
        self.cpu_s.append(time.process_time() - self._c0)
        self.times_s.append(time.perf_counter() - self._t0)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=40, help="runs per arm (interleaved pairs)")
    p.add_argument("--steps", type=int, default=12, help="optimizer steps per run")
    p.add_argument("--skip", type=int, default=2, help="first steps of each run left out")
    p.add_argument("--period-ms", type=float, default=10.0, help="sampling period (10 ms = 100 Hz)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-seq-len", type=int, default=64)
    p.add_argument("--freq", type=float, default=612.0, help="level locked on the fake board (MHz)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: the training's CPU side is one Python thread, as on a "
                        "Jetson where the GPU computes; 2 on a 2-core box is the worst case)")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--online", action="store_true", help="the online callback in real time (see above)")
    return p.parse_args(argv)


def prepare(args):
    """Tokenized synthetic SST-2 and one initial model that every run starts from."""
    spec = glue.task_spec("sst2")
    data = glue.load_task("synthetic:sst2", n_train=args.batch_size * args.steps, n_eval=16, seed=0)
    tok = glue.build_local_tokenizer(glue.task_texts(data["train"], spec), vocab_size=4000)
    tokenized = glue.tokenize_task(data, tok, spec, args.max_seq_len)
    from transformers import AutoConfig

    cfg = AutoConfig.for_model("bert", vocab_size=4000, hidden_size=args.hidden, num_hidden_layers=args.layers,
                               num_attention_heads=max(args.hidden // 64, 1), intermediate_size=4 * args.hidden,
                               max_position_embeddings=max(args.max_seq_len, 64))
    model = build_model(ModelSource("bench-bert", cfg), spec, tok, 0, args.batch_size, args.max_seq_len)
    return tok, tokenized, model


def one_run(args, tok, tokenized, model0, backend, with_callback: bool) -> tuple[StepTimer, dict]:
    timer = StepTimer()
    callbacks: list = [timer]
    cb = None
    if with_callback:
        cb = DvfsCallback(backend, freq_mhz=args.freq, sample_period_s=args.period_ms / 1000.0)
        callbacks.insert(0, cb)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(copy.deepcopy(model0), tok, tokenized, tmp, callbacks, steps=args.steps,
                               epochs=None, batch_size=args.batch_size, seed=0, learning_rate=2e-5,
                               logging_steps=10_000, progress=False)
        try:
            trainer.train()
        finally:
            if cb is not None:
                cb.close()
    info = {}
    if cb is not None:
        m = cb.measurement
        stats = cb.sampler.stats()
        info = {"rate_hz": m.rate_hz, "n_samples": m.n_samples, "thread_cpu_fraction": stats["thread_cpu_fraction"]}
    timer.times_s, timer.cpu_s = timer.times_s[args.skip:], timer.cpu_s[args.skip:]
    return timer, info


def online_real_time(args) -> int:
    """The online callback on the fake board with sleeping steps; 0 when it picks the true minimum."""
    from types import SimpleNamespace

    from dvfslab.harness.online_callback import OnlineDvfsCallback

    def step_s(f):
        return 0.02 + 12.0 / f

    def power_w(f):
        return 4.0 + 0.004 * f + 6e-6 * f * f

    with tempfile.TemporaryDirectory() as tmp:
        board = build_board(Path(tmp) / "orin", "agx-orin-jp6")
        backend = open_backend(io=board.io(), state_dir=Path(tmp) / "state")
        cb, state = OnlineDvfsCallback(backend, sample_period_s=args.period_ms / 1000.0), SimpleNamespace(global_step=0)
        t0 = time.perf_counter()
        with cb:
            cb.on_train_begin(None, state, None)
            for _ in range(cb.profiler.profiling_steps):
                cb.on_step_begin(None, state, None)
                f = board.state()["cur_freq_hz"] / 1e6
                board.set_rail("VDD_GPU_SOC", 700.0 * power_w(f))
                board.set_rail("VDD_CPU_CV", 300.0 * power_w(f))
                time.sleep(step_s(f))
                state.global_step += 1
                cb.on_step_end(None, state, None)
        levels = backend.clocks.levels_mhz()
        truth = min(levels, key=lambda f: power_w(f) * step_s(f))
        chosen = cb.profiler.chosen_level
        print(f"online, real time: chose {chosen:g} MHz, true minimum {truth:g} MHz, "
              f"{cb.profiler.profiling_steps} probing steps in {time.perf_counter() - t0:.2f} s wall; "
              f"clocks restored: {board.state()['max_freq_hz'] == 1300500000}")
    return 0 if chosen == truth else 1


def bootstrap_ci(ratios: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of the median of the pair ratios."""
    import numpy as np

    rng = np.random.default_rng(seed)
    r = np.asarray(ratios)
    meds = np.median(r[rng.integers(0, len(r), size=(n, len(r)))], axis=1)
    return float(np.quantile(meds, 0.025)), float(np.quantile(meds, 0.975))


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.online:
        return online_real_time(args)
    import torch

    torch.set_num_threads(args.threads)
    tok, tokenized, model0 = prepare(args)
    with tempfile.TemporaryDirectory() as tmp:
        board = build_board(Path(tmp) / "orin", "agx-orin-jp6")
        backend = open_backend(io=board.io(), state_dir=Path(tmp) / "state")
        one_run(args, tok, tokenized, model0, backend, False)  # warm caches and allocators, not counted
        arms = {"without": [], "with": []}
        cpu = {"without": [], "with": []}
        pair_ratios, cpu_ratios, infos = [], [], []
        for rep in range(args.reps):
            order = ("without", "with") if rep % 2 == 0 else ("with", "without")
            medians, cpu_medians = {}, {}
            for arm in order:
                timer, info = one_run(args, tok, tokenized, model0, backend, arm == "with")
                arms[arm].extend(timer.times_s)
                cpu[arm].extend(timer.cpu_s)
                medians[arm] = statistics.median(timer.times_s)
                cpu_medians[arm] = statistics.median(timer.cpu_s)
                if info:
                    infos.append(info)
            pair_ratios.append(medians["with"] / medians["without"])
            cpu_ratios.append(cpu_medians["with"] / cpu_medians["without"])
            print(f"pair {rep + 1}/{args.reps}: median step without {medians['without'] * 1e3:7.2f} ms, "
                  f"with {medians['with'] * 1e3:7.2f} ms, ratio {pair_ratios[-1]:.4f}", flush=True)
        restored = board.state()
    med = {k: statistics.median(v) for k, v in arms.items()}
    ratio = med["with"] / med["without"]
    lo, hi = bootstrap_ci(pair_ratios)
    result = {
        "device": "cuda" if model0.device.type == "cuda" else "cpu", "cpus": os.cpu_count(),
        "torch_threads": args.threads,
        "load_avg_1min_at_end": os.getloadavg()[0], "reps": args.reps, "steps": args.steps,
        "skip": args.skip, "period_ms": args.period_ms, "model": f"bert L={args.layers} H={args.hidden}",
        "batch_size": args.batch_size, "max_seq_len": args.max_seq_len,
        "median_step_without_ms": med["without"] * 1e3, "median_step_with_ms": med["with"] * 1e3,
        "ratio_pooled_medians": ratio,
        "median_pair_ratio": statistics.median(pair_ratios), "median_pair_ratio_ci95": [lo, hi],
        "median_cpu_per_step_without_ms": statistics.median(cpu["without"]) * 1e3,
        "median_cpu_per_step_with_ms": statistics.median(cpu["with"]) * 1e3,
        "median_pair_ratio_cpu": statistics.median(cpu_ratios),
        "sampler_rate_hz_median": statistics.median(i["rate_hz"] for i in infos),
        "sampler_thread_cpu_fraction_median": statistics.median(i["thread_cpu_fraction"] for i in infos),
        "clocks_restored": restored["max_freq_hz"] == 1300500000 and restored["min_freq_hz"] == 306000000,
    }
    print(json.dumps(result, indent=2))
    pct = lambda r: (r - 1) * 100  # noqa: E731
    if hi < 1.02:
        verdict = "PASS"
    elif lo > 1.02:
        verdict = "FAIL"
    else:
        verdict = "INCONCLUSIVE (too noisy: rerun on a quieter machine or with more --reps)"
    print(f"{verdict}: callback overhead {pct(result['median_pair_ratio']):+.2f} % (median of pair ratios, "
          f"95 % CI {pct(lo):+.2f} … {pct(hi):+.2f} %; acceptance < 2 %); pooled medians "
          f"{pct(ratio):+.2f} %; CPU time per step {pct(result['median_pair_ratio_cpu']):+.2f} %; sampler at "
          f"{result['sampler_rate_hz_median']:.1f} Hz using {result['sampler_thread_cpu_fraction_median'] * 100:.2f} % "
          f"of a core; load average {result['load_avg_1min_at_end']:.1f} on {result['cpus']} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return {"PASS": 0, "FAIL": 1}.get(verdict, 3)


if __name__ == "__main__":
    sys.exit(main())
