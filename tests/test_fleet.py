"""Fleet sweeps on Dask distributed: LocalClusters of simulated boards (the twin, virtual time)."""

from __future__ import annotations

import json
import os
import signal

import pandas as pd
import pytest

pytest.importorskip("distributed")  # the fleet extra (make test installs it)

from distributed import Client, LocalCluster  # noqa: E402

from dvfslab.analysis.boards import board_spread, by_board, per_board  # noqa: E402
from dvfslab.cli import main  # noqa: E402
from dvfslab.core.errors import SweepError
from dvfslab.core.files import pid_alive  # noqa: E402
from dvfslab.data.contract import RUN_COLUMNS, Dataset, DatasetError, load_dataset, validate  # noqa: E402
from dvfslab.hw import get_backend  # noqa: E402
from dvfslab.sweep.board import board_kind, kind_id  # noqa: E402
from dvfslab.sweep.fleet import fleet_boards, run_fleet_sweep  # noqa: E402
from dvfslab.sweep.fleet_worker import BoardConfig, BoardKindError, run_on_board  # noqa: E402
from dvfslab.sweep.plan import make_plan  # noqa: E402
from dvfslab.sweep.runner import run_sweep  # noqa: E402
from dvfslab.sweep.twin import SimExecutor  # noqa: E402

WORKLOADS = ["bert-small/sst2", "pythia-70m/rte"]
LEVELS = [306.0, 816.0, 1300.5]
ORIN = kind_id(board_kind(get_backend("sim", seed=0)))
XAVIER = kind_id(board_kind(get_backend("sim", board="agx-xavier")))


def small_plan(**kw):
    return make_plan(WORKLOADS, LEVELS, steps=4, warmup_steps=1, **kw)


def local_cluster(n: int, **kw) -> LocalCluster:
    """``n`` one-thread workers holding ``board=1`` each, as `dask worker --nthreads 1 --resources board=1`."""
    return LocalCluster(n_workers=n, threads_per_worker=1, resources={"board": 1}, dashboard_address=":0", **kw)


@pytest.fixture(scope="module")
def threads3():
    """Three in-process workers (each opens its own simulated board)."""
    with local_cluster(3, processes=False, protocol="tcp://", host="127.0.0.1") as cluster, Client(cluster) as c:
        yield c


def test_fleet_dataset_is_the_single_board_sweep_shared_over_the_boards(tmp_path, threads3):
    plan = small_plan(reps=2)
    single = run_sweep(plan, get_backend("sim", seed=0), SimExecutor(), tmp_path / "one", progress=False)
    fleet = run_fleet_sweep(plan, threads3, tmp_path / "fleet", executor=SimExecutor(), progress=False)

    assert len(plan) == 2 * 4 * 2 and len(fleet.runs) == len(plan)
    assert not fleet.runs["run_id"].duplicated().any()
    assert set(fleet.runs["run_id"]) == set(single.runs["run_id"])
    assert (fleet.runs["status"] == "ok").all()
    per_board = fleet.runs["board_id"].value_counts()
    boards = {"sim-agx-orin-64gb-s0", "sim-agx-orin-64gb-s1", "sim-agx-orin-64gb-s2"}  # seeds 0, 1, 2
    assert set(per_board.index) == boards and (per_board >= 1).all()
    assert set(fleet.meta["boards"]) == boards and fleet.meta["device"].get("seed") is None
    assert fleet.meta["sweep"]["plan"]["board_kind"] == ORIN
    # each run ran on its worker's own board: on board s0 (seed 0, as the single-board sweep) a
    # fixed run's time is the single sweep's (the twin's noise depends on seed and run only) ...
    merged = fleet.runs.merge(single.runs, on="run_id", suffixes=("", "_one"))
    fixed = merged[merged["policy"] == "fixed"]
    on0 = fixed[fixed["board_id"] == "sim-agx-orin-64gb-s0"]
    other = fixed[fixed["board_id"] != "sim-agx-orin-64gb-s0"]
    assert len(on0) and len(other)
    assert on0["time_s"].to_numpy() == pytest.approx(on0["time_s_one"].to_numpy(), rel=1e-9)
    assert (other["time_s"] != other["time_s_one"]).all()  # ... and on the others it is not
    # one board runs one run at a time, each after the one before, on its own virtual clock
    for board in boards:
        ids = fleet.runs.loc[fleet.runs["board_id"] == board, "run_id"]
        spans = sorted(json.loads((tmp_path / "fleet" / "runs" / f"{r}.json").read_text())["extras"]["board_clock_s"]
                       for r in ids)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_a_board_of_another_kind_is_refused(tmp_path, threads3):
    mixed = {"2": {"board": "agx-xavier"}}
    with pytest.raises(SweepError, match="several board kinds.*run one sweep per kind"):
        run_fleet_sweep(small_plan(), threads3, tmp_path / "a", worker_options=mixed, progress=False)
    ds = run_fleet_sweep(small_plan(board_kind=ORIN), threads3, tmp_path / "b", worker_options=mixed,
                         progress=False)
    assert len(ds.runs) == 8 and set(ds.runs["board_id"]) == {"sim-agx-orin-64gb-s0", "sim-agx-orin-64gb-s1"}
    fleet = ds.meta["sweep"]["sessions"][-1]["fleet"]
    assert fleet["refused"] == {"2": f"board kind {XAVIER}, not {ORIN}"}
    # sent to it anyway, the Xavier board refuses the run with a clear error
    name, infos = fleet_boards(threads3, BoardConfig("sim", SimExecutor(), {"seed": 0}, worker_options=mixed))
    xavier = next(a for a, i in infos.items() if i["worker"] == "2")
    fut = threads3.submit(run_on_board, small_plan().runs[0], ORIN, name, workers=[xavier], pure=False)
    with pytest.raises(BoardKindError, match=f"planned for boards of kind {ORIN} but this board is of kind {XAVIER}"):
        fut.result()
    # a board that cannot be opened gets no run and is listed with the reason
    broken = run_fleet_sweep(small_plan(board_kind=ORIN), threads3, tmp_path / "c",
                             worker_options={"1": {"board": "no-such-board"}}, progress=False)
    refused = broken.meta["sweep"]["sessions"][-1]["fleet"]["refused"]
    assert list(refused) == ["1"] and "unknown simulated board 'no-such-board'" in refused["1"]
    assert "sim-agx-orin-64gb-s1" not in set(broken.runs["board_id"])


def test_stopped_client_then_cli_resume_records_each_run_once(tmp_path, threads3, capsys):
    out = tmp_path / "stop"
    seen = []

    def stop_after_three(record):
        seen.append(record["row"]["run_id"])
        if len(seen) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the client

    with pytest.raises(KeyboardInterrupt):
        run_fleet_sweep(small_plan(), threads3, out, executor=SimExecutor(step_rows=50), progress=False,
                        on_run=stop_after_three)
    assert sorted(p.stem for p in (out / "runs").glob("*.json")) == sorted(seen)
    assert len(load_dataset(out).runs) == 3  # the committed runs form a valid dataset
    before = {r: (out / "runs" / f"{r}.json").read_bytes() for r in seen}
    address = threads3.scheduler.address
    assert main(["sweep", "--backend", "sim", "--cluster", address, "--out", str(out), "--resume",
                 "--no-progress"]) == 0
    assert "8 runs (0 failed), 2 workloads, simulated data, 3 boards" in capsys.readouterr().out
    ds = load_dataset(out)
    assert len(ds.runs) == 8 and not ds.runs["run_id"].duplicated().any()
    assert {r: (out / "runs" / f"{r}.json").read_bytes() for r in seen} == before  # not run again
    assert len(ds.meta["sweep"]["sessions"]) == 2 and ds.meta["sweep"]["sessions"][1]["runs_done_before"] == 3


class KillOnce(SimExecutor):
    """The twin, except that the first attempt of run ``victim`` SIGKILLs its own worker process."""

    def __init__(self, victim: str, marker: str):
        super().__init__()
        self.victim, self.marker = victim, marker

    def run(self, spec, backend, sampler):
        if spec.run_id == self.victim and not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)  # mid-run: the board is locked, the sampler running
        return super().run(spec, backend, sampler)


def test_a_worker_killed_mid_run_loses_nothing_and_records_nothing_twice(tmp_path):
    plan = small_plan()
    victim, marker = plan.runs[3].run_id, tmp_path / "killed.pid"
    with local_cluster(2, processes=True) as cluster, Client(cluster) as client:
        ds = run_fleet_sweep(plan, client, tmp_path / "out", executor=KillOnce(victim, str(marker)),
                             progress=False)
    killed_pid = int(marker.read_text())
    assert killed_pid != os.getpid() and not pid_alive(killed_pid)  # a worker process really died
    assert len(ds.runs) == len(plan) and set(ds.runs["run_id"]) == {r.run_id for r in plan.runs}
    assert not ds.runs["run_id"].duplicated().any() and (ds.runs["status"] == "ok").all()
    assert ds.meta["sweep"]["sessions"][-1]["fleet"]["lost"] == {}
    assert ds.runs.loc[ds.runs["run_id"] == victim, "status"].item() == "ok"  # retried, recorded once


def test_cli_local_cluster_of_simulated_boards(tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["sweep", "--backend", "sim", "--cluster", "local:2", "--workloads", "bert-small/sst2",
            "--freqs", "306", "1300.5", "--steps", "3", "--warmup-steps", "0", "--out", str(out)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "3 runs (0 failed), 1 workloads, simulated data" in captured.out
    assert "Dask dashboard: http://" in captured.err
    assert main(["sweep", "--backend", "jetson", "--cluster", "local:2", "--workloads", "bert-small/sst2",
                 "--out", str(tmp_path / "j")]) == 2
    assert "use --backend sim" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The dataset contract and the analysis (no cluster)
# --------------------------------------------------------------------------------------------


def _two_board_dataset(tmp_path) -> Dataset:
    """A hand-made two-board dataset: energy 10 and 12 J (board a, two reps: 9 and 11), 13 J (b)."""
    example = load_dataset("tests/data/example")
    wid = example.workloads["workload_id"].iloc[0]
    level = example.freq_table_mhz[0]
    rows = [("r0", "a", 9.0, 0), ("r1", "a", 11.0, 1), ("r2", "b", 13.0, 0)]
    runs = pd.DataFrame([{"run_id": r, "workload_id": wid, "policy": "fixed", "gpu_freq_mhz": level, "rep": rep,
                          "time_s": 1.0, "energy_j": e, "status": "ok", "board_id": b} for r, b, e, rep in rows],
                        columns=[*RUN_COLUMNS, "board_id"])
    meta = {**example.meta, "baseline": "fmax", "boards": {"a": {"board_id": "a"}, "b": {"board_id": "b"}}}
    return Dataset(tmp_path, meta, example.workloads, runs)


def test_board_spread_and_per_board_datasets(tmp_path):
    ds = _two_board_dataset(tmp_path)
    spread = board_spread(ds)
    assert len(spread) == 1
    row = spread.iloc[0]
    # board means 10 (a) and 13 (b): mean 11.5, spread 3 / 11.5, sd of (10, 13) = 3 / sqrt(2)
    assert (row["n_boards"], row["mean"], row["min"], row["max"]) == (2, 11.5, 10.0, 13.0)
    assert row["spread_pct"] == pytest.approx(100 * 3 / 11.5)
    assert row["cv_pct"] == pytest.approx(100 * (3 / 2 ** 0.5) / 11.5)
    parts = by_board(ds)
    assert sorted(parts) == ["a", "b"] and parts["a"].runs["run_id"].tolist() == ["r0", "r1"]
    assert parts["b"].meta["boards"] == {"b": {"board_id": "b"}}
    energy = per_board(ds, lambda d: d.runs.groupby("workload_id", as_index=False)["energy_j"].mean())
    assert energy["board_id"].tolist() == ["a", "b"] and energy["energy_j"].tolist() == [10.0, 13.0]
    assert board_spread(load_dataset("tests/data/example")).empty  # a dataset without boards


def test_contract_checks_board_ids_and_old_datasets_still_load(tmp_path):
    assert "board_id" not in load_dataset("tests/data/example").runs.columns
    ds = _two_board_dataset(tmp_path)
    validate(ds)
    ds.runs.loc[2, "board_id"] = "c"
    with pytest.raises(DatasetError, match="column 'board_id', row 3 .* 'c' is not described in meta.json boards"):
        validate(ds)
    ds.runs.loc[2, "board_id"] = "board c"
    with pytest.raises(DatasetError, match="holds whitespace"):
        validate(ds)


def test_single_board_plans_are_written_as_before():
    assert "board_kind" not in make_plan(WORKLOADS, LEVELS).to_json()
    assert make_plan(WORKLOADS, LEVELS, board_kind=ORIN).to_json()["board_kind"] == ORIN


def test_a_local_sweep_continued_on_a_fleet(tmp_path, threads3, capsys):
    out = tmp_path / "local"
    args = ["sweep", "--backend", "sim", "--workloads", ",".join(WORKLOADS), "--freqs", "306", "1300.5",
            "--steps", "3", "--warmup-steps", "0", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    assert "board_kind" not in json.loads((out / "plan.json").read_text())
    redo = sorted((out / "runs").glob("*.json"))[:3]
    for path in redo:
        path.unlink()  # as if the local sweep had been stopped before these runs
    assert main([*args, "--resume", "--cluster", threads3.scheduler.address]) == 0
    capsys.readouterr()
    ds = load_dataset(out)
    assert len(ds.runs) == 6 and not ds.runs["run_id"].duplicated().any()
    assert ds.meta["sweep"]["sessions"][-1]["fleet"]["kind"] == ORIN
    assert ds.meta["sweep"]["sessions"][-1]["runs_done_before"] == 3
