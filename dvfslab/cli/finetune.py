"""``dvfslab finetune``: fine-tune one model on one GLUE task at a locked GPU clock, record it."""

from __future__ import annotations

BACKENDS = ("auto", "jetson", "nvml", "sim", "none")


def register(sub) -> None:
    p = sub.add_parser(
        "finetune", help="fine-tune a model on a GLUE task at a locked GPU clock; append the run to a dataset",
        description="Fine-tune a sequence classifier with the Hugging Face Trainer while dvfslab locks the "
                    "GPU clock, samples the power rails and times every step; the run is appended to the "
                    "dataset directory --out (runs.csv, workloads.csv, steps.csv, samples/).")
    p.add_argument("--model", metavar="M",
                   help="catalog name (bert-base, pythia-70m ...), hub id, or local model directory")
    p.add_argument("--task", metavar="T",
                   help="GLUE task (sst2, mrpc, qnli, ...) or synthetic:<task> for the offline generator")
    p.add_argument("--freq", type=float, metavar="MHZ", help="GPU level to lock (default: leave the clocks alone)")
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="clock control and power rails (none: time only, energy not measured)")
    p.add_argument("--sysfs-root", metavar="DIR", help="root of the Jetson sysfs tree (default /)")
    p.add_argument("--out", required=True, metavar="DIR", help="dataset directory to create or append to")
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, metavar="N",
                   help="measured optimizer steps (wins over --epochs); --warmup-steps more run before them, as in "
                        "dvfslab sweep")
    g.add_argument("--epochs", type=float, metavar="E", help="epochs (default 1 when --steps is not given)")
    g.add_argument("--batch-size", type=int, default=32, metavar="B")
    g.add_argument("--max-seq-len", type=int, default=128, metavar="L", help="truncation length in tokens")
    g.add_argument("--lr", type=float, default=2e-5, help="learning rate (default 2e-5)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--random-init", action="store_true",
                   help="random weights of the model's architecture (no download; time and energy are "
                        "representative, accuracy is not)")
    g.add_argument("--tokenizer", metavar="DIR", help="tokenizer directory or hub id (default: the model's)")
    g.add_argument("--data-dir", metavar="DIR", help="local task files (train.* and validation.* with GLUE columns)")
    g.add_argument("--n-train", type=int, metavar="N", help="cap on training examples (synthetic: the size, 512)")
    g.add_argument("--n-eval", type=int, metavar="N", help="cap on evaluation examples (synthetic: 128)")
    m = p.add_argument_group("measurement")
    m.add_argument("--warmup-steps", type=int, default=0, metavar="N",
                   help="steps run before the measured window opens, on top of --steps (not learning-rate warm-up)")
    m.add_argument("--sample-period-ms", type=float, metavar="MS",
                   help="power sampling period (default: the sensor's update interval, else 10 ms)")
    m.add_argument("--label", metavar="NAME", help="model name recorded in workloads.csv (default from --model)")
    m.add_argument("--policy", help="policy name recorded for the run (default fixed with --freq, else default)")
    m.add_argument("--no-samples", action="store_true", help="do not save the power trace under samples/")
    m.add_argument("--no-steps", action="store_true", help="do not write per-step rows to steps.csv")
    m.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--recover", action="store_true",
                   help="add the finished runs kept in --out's finetune.journal (a run whose record could not "
                        "join the dataset when it ended) to the dataset, and nothing else")
    p.set_defaults(func=run, finetune_parser=p)


def _total_steps(args) -> int | None:
    """The optimizer steps to train: ``--steps`` measured after ``--warmup-steps`` (as a sweep's runs)."""
    if args.steps is None or args.steps < 1 or args.warmup_steps < 0:
        return args.steps  # None: --epochs; a bad value: the harness's one-line refusal names it
    return args.steps + args.warmup_steps


def _summary(result) -> str:
    run, metrics = result.run, result.metrics
    level = f"{run['gpu_freq_mhz']:g} MHz" if run["gpu_freq_mhz"] is not None else "clocks untouched"
    energy = (f"{run['energy_j']:.1f} J CPU+GPU, {run['avg_power_w']:.2f} W avg"
              if run["energy_j"] is not None else "energy not measured")
    where = f" -> {result.dataset_dir}" if result.dataset_dir else ""
    return (f"run {run['run_id']} ({run['workload_id']}, {level}): {run['steps']} steps in {run['time_s']:.2f} s, "
            f"{energy}; {run['eval_metric_name']} {metrics['metric']:.4f}{where}")


def run(args) -> int:
    from dvfslab.core.levels import UnsupportedFrequencyError

    if args.recover:
        from dvfslab.harness.records import recover_runs

        for row in recover_runs(args.out):
            print(f"recovered run {row['run_id']} ({row['workload_id']}, rep {row['rep']}) -> {args.out}")
        return 0
    missing = [flag for flag, value in (("--model", args.model), ("--task", args.task)) if not value]
    if missing:
        args.finetune_parser.error(f"the following arguments are required: {', '.join(missing)}")
    from dvfslab.harness.finetune import finetune

    period = args.sample_period_ms / 1000.0 if args.sample_period_ms else None
    try:
        result = finetune(
            args.model, args.task, backend=args.backend, freq_mhz=args.freq, steps=_total_steps(args),
            epochs=args.epochs, batch_size=args.batch_size, max_seq_len=args.max_seq_len, seed=args.seed,
            out_dir=args.out, warmup_steps=args.warmup_steps, learning_rate=args.lr,
            sample_period_s=period, sysfs_root=args.sysfs_root, data_dir=args.data_dir,
            n_train=args.n_train, n_eval=args.n_eval, random_init=args.random_init,
            tokenizer=args.tokenizer, model_label=args.label, policy=args.policy,
            record_steps=not args.no_steps, save_samples=not args.no_samples,
            progress=not args.no_progress)
    except UnsupportedFrequencyError as err:  # the hint of this command (it has no --nearest)
        raise UnsupportedFrequencyError(err.freq_mhz, err.levels_mhz, "Pick --freq from these.") from None
    print(_summary(result))
    return 0
