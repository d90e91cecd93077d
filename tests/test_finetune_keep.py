"""Refuse before the work, keep the work after it (issue 36, item 2).

``dvfslab finetune --out`` a dataset its run cannot join (an imported power-limit dataset, a
sweep's folder) is refused before the model loads, leaving every byte and no lock file; a run
whose record cannot be added once it has finished is kept in the dataset's ``finetune.journal``
and ``dvfslab finetune --recover`` adds it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")

from dvfslab import cli  # noqa: E402
from dvfslab.data.contract import load_dataset  # noqa: E402
from dvfslab.data.journal import read_journal  # noqa: E402
from dvfslab.harness import (  # noqa: E402
    FinetuneError,
    finetune,
    hf,
    records,
)

ROOT = Path(__file__).resolve().parents[1]
TINY_BERT = dict(model_type="bert", vocab_size=400, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64)
QUICK = dict(batch_size=8, max_seq_len=32, n_train=48, n_eval=16, progress=False)


def hashes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the test: a refusal must come before it."""
    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the refusal")
    monkeypatch.setattr(hf, "resolve_model", load)


def test_a_power_limit_dataset_is_refused_before_the_model_loads(tmp_path, capsys, no_model):
    zeus = tmp_path / "zeus"
    assert cli.main(["import", "zeus-nsdi", str(ROOT / "data" / "external" / "zeus_nsdi23"), "--gpu", "v100",
                     "--out", str(zeus)]) == 0
    capsys.readouterr()
    before = hashes(tmp_path)
    assert cli.main(["finetune", "--model", "bert-tiny", "--random-init", "--task", "synthetic:sst2", "--backend",
                     "none", "--out", str(zeus), "--steps", "3", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"dvfslab finetune: error: {zeus / 'meta.json'}: the dataset's knob is power_limit_w (levels "
                   "100 W, 125 W, 150 W, 175 W, 200 W, 225 W, 250 W), a fine-tuning run sets the GPU clock "
                   "(gpu_freq_mhz); write this run to another --out directory")
    assert hashes(tmp_path) == before  # no lock file, nothing else


def test_a_sweeps_folder_is_refused_before_the_model_loads(tmp_path, no_model):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "plan.json").write_text("{}\n")
    before = hashes(tmp_path)
    with warnings.catch_warnings(), pytest.raises(FinetuneError, match="is a sweep's folder"):
        warnings.simplefilter("ignore")
        finetune(TINY_BERT, "synthetic:sst2", backend="none", steps=2, out_dir=tmp_path / "sweep", **QUICK)
    assert hashes(tmp_path) == before


def test_a_failure_after_the_run_keeps_its_record_and_recover_adds_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "ds"
    real = records.append_record

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(records, "append_record", full_disk)
    with warnings.catch_warnings(), pytest.raises(FinetuneError) as caught:
        warnings.simplefilter("ignore")
        finetune(TINY_BERT, "synthetic:sst2", backend="none", steps=3, out_dir=out, **QUICK)
    message = str(caught.value)
    kept = read_journal(out, records.PENDING_JOURNAL)
    assert len(kept) == 1
    run_id = kept[0][1]["row"]["run_id"]
    assert message == (f"run {run_id} finished but could not be added to {out} (OSError: [Errno 28] No space "
                       f"left on device); its record (runs.csv row, workload, 3 steps) is kept in "
                       f"{out / 'finetune.journal'} and the dataset's files are unchanged: fix the cause, then "
                       f"add it with: dvfslab finetune --recover --out {out}")
    assert kept[0][1]["row"]["steps"] == 3 and len(kept[0][1]["steps"]) == 3
    assert sorted(p.name for p in out.iterdir()) == ["finetune.journal"]  # no dataset file, no lock
    monkeypatch.setattr(records, "append_record", real)  # the disk has room again
    assert cli.main(["finetune", "--recover", "--out", str(out)]) == 0
    assert f"recovered run {run_id} (" in capsys.readouterr().out
    ds = load_dataset(out)
    assert list(ds.runs["run_id"]) == [run_id] and len(ds.steps) == 3
    assert not (out / "finetune.journal").exists() and not (out / ".dvfslab.lock").exists()
    assert cli.main(["finetune", "--recover", "--out", str(out)]) == 2
    assert "no run is kept there: nothing to recover" in capsys.readouterr().err


def test_steps_are_measured_steps_with_warmup_on_top(tmp_path, capsys):
    """`--steps 3 --warmup-steps 2`: 5 optimizer steps, 3 measured (issue 36: it measured 1)."""
    out = tmp_path / "ds"
    assert cli.main(["finetune", "--model", "pythia-14m", "--random-init", "--task", "synthetic:wnli", "--steps", "3",
                     "--warmup-steps", "2", "--batch-size", "4", "--max-seq-len", "32", "--n-train", "32",
                     "--n-eval", "8", "--no-progress", "--backend", "none", "--out", str(out)]) == 0
    assert ": 3 steps in " in capsys.readouterr().out
    runs = load_dataset(out).runs
    assert list(runs["steps"]) == [3] and [int(w) for w in runs["warmup_steps"]] == [2]  # an extra column: text
    assert list(load_dataset(out).steps["step"]) == [1, 2, 3, 4, 5]  # every optimizer step, warm-up included


def test_a_run_added_to_an_imported_dataset_takes_away_the_importers_claim(tmp_path, monkeypatch):
    """An import's --force may replace the import, not a fine-tuning run added to it since."""
    from dvfslab.core.errors import DvfsError
    from dvfslab.core.files import OUTPUT_MARKER, refuse_occupied, write_output_marker

    out = tmp_path / "ds"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune(TINY_BERT, "synthetic:sst2", backend="none", steps=2, out_dir=out, **QUICK)
    write_output_marker(out, "dvfslab import loudva")  # as if an import had written the folder
    refuse_occupied(out, "dvfslab import loudva", force=True)  # its own output: --force may replace it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune(TINY_BERT, "synthetic:sst2", backend="none", steps=2, out_dir=out, **QUICK)
    assert not (out / OUTPUT_MARKER).exists()
    with pytest.raises(DvfsError, match="replaces only a folder it wrote itself"):
        refuse_occupied(out, "dvfslab import loudva", force=True)
