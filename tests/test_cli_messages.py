"""Messages that point at options the command has (issue 25, item 4).

Each expected line is written out by hand from the command's options: `sweep` and `finetune`
have no `--nearest` (only `dvfslab clocks --set` and `dvfslab run` do); a resumed sweep keeps
its stored plan; `finetune` refuses a level its backend cannot lock before anything runs.
"""

from __future__ import annotations

import json

import pytest

from dvfslab.cli import main
from dvfslab.data.contract import load_dataset

AGX_ORIN_LEVELS = "306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5"


def test_sweep_freqs_not_a_level_names_sweeps_own_options(tmp_path, capsys):
    assert main(["sweep", "--backend", "sim", "--workloads", "bert-small/sst2", "--freqs", "999",
                 "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == (f"dvfslab sweep: error: 999 MHz is not a GPU level of this board; levels "
                                       f"(MHz): {AGX_ORIN_LEVELS}. Pick --freqs from these, or 'all'.\n")
    assert not (tmp_path / "x").exists()


def test_clocks_set_keeps_its_nearest_hint(orin_jp6, fake_kernel_env, capsys):
    assert main(["clocks", "--set", "999", "--sysfs-root", str(orin_jp6.root)]) == 2
    assert capsys.readouterr().err.rstrip().endswith("Pick one of these (or use --nearest).")


def test_resume_refuses_a_changed_plan_option_and_keeps_the_dataset(tmp_path, capsys):
    """The sweep was planned with 5 steps; `--resume --steps 100` would add 100-step runs to a
    dataset of 5-step ones, whose times and energies then compare unfairly across levels."""
    out = tmp_path / "s"
    start = ["sweep", "--backend", "sim", "--workloads", "bert-small/sst2", "--freqs", "612", "--steps", "5",
             "--warmup-steps", "1", "--out", str(out), "--no-progress"]
    assert main(start) == 0
    capsys.readouterr()
    before = (out / "runs.csv").read_bytes()
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--resume", "--steps", "100"]) == 2
    assert capsys.readouterr().err == (
        f"dvfslab sweep: error: {out / 'plan.json'}: --steps 100 (the sweep has 5): a resumed sweep keeps its "
        "plan, so that every run of the dataset is measured the same way; resume with only --backend, --out "
        "and --resume, or start a new sweep in another --out\n")
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--resume", "--reps", "2", "--freqs", "306",
                 "--no-maxn"]) == 2
    err = capsys.readouterr().err
    assert ("--reps 2 (the sweep has 1); --freqs 306 (the sweep has 612); --no-maxn (the sweep has MAXN runs): "
            "a resumed sweep keeps its plan") in err
    assert (out / "runs.csv").read_bytes() == before
    # the same values, or none: the stored plan goes on
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--resume", "--steps", "5", "--no-progress"]) == 0
    assert (out / "runs.csv").read_bytes() == before
    assert json.loads((out / "plan.json").read_text())["steps"] == 5


def test_resume_on_the_twin_takes_the_seed_of_the_sweep(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["sweep", "--backend", "sim", "--workloads", "bert-small/sst2", "--freqs", "612", "--steps", "5",
                 "--seed", "5", "--out", str(out), "--no-progress"]) == 0
    assert main(["sweep", "--backend", "sim", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert load_dataset(out).meta["device"]["seed"] == 5
    assert len(load_dataset(out).meta["sweep"]["sessions"]) == 2


def test_finetune_freq_refusals_are_the_one_real_line(tmp_path, capsys, orin_jp6, fake_kernel_env):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    base = ["finetune", "--model", "bert-tiny", "--random-init", "--task", "synthetic:sst2", "--steps", "2",
            "--freq", "999", "--no-progress", "--out", str(tmp_path / "ds")]
    assert main(base + ["--backend", "none"]) == 2
    assert capsys.readouterr().err == ("dvfslab finetune: error: backend 'none' has no GPU clock control, so 999 "
                                       "MHz cannot be locked; use --backend jetson or nvml, or drop --freq\n")
    assert main(base + ["--backend", "jetson", "--sysfs-root", str(orin_jp6.root)]) == 2
    assert capsys.readouterr().err == (f"dvfslab finetune: error: 999 MHz is not a GPU level of this board; "
                                       f"levels (MHz): {AGX_ORIN_LEVELS}. Pick --freq from these.\n")
    assert not (tmp_path / "ds").exists()  # nothing ran, nothing recorded
