"""A synthetic job for ``dvfslab govern`` on a fake Jetson tree: its step time and its GPU rail's
power follow the locked level through a U-curve the test writes, on a virtual clock.

The test writes ``<root>/.fake_job/spec.json``: ``{"rail": "VDD_GPU_SOC", "step_time_s": {level:
s}, "gpu_mw": {level: mW}}`` (levels in MHz as keys, ``"default"`` for the unlocked clock, which
runs at the table's top). Then:

* :class:`FakeJobIO` is the injected sysfs I/O (``DVFSLAB_SYSFS_IO=dvfslab.testing.fake_job:FakeJobIO``):
  the fake kernel's devfreq rules (opening it starts a new handshake), and reads of the named rail's INA3221 files that give
  ``1000 mV`` and ``gpu_mw`` mA for the level ``cur_freq`` shows — the rail's power follows the
  clock, as on a board; its ``virtual_clock`` (:class:`FileJobClock`) is the time in
  ``clock`` (s), which only the job moves;
* the job, ``python -m dvfslab.testing.fake_job ROOT --steps N [--format steps|hf|file|count]``:
  for each step it waits until ``dvfslab govern`` has handled the previous one (``handled``,
  written by the clock's :meth:`FileJobClock.handled` before govern waits for progress: the lock
  for the next window is in place), reads ``cur_freq``, advances the clock by that level's step
  time and reports the step (``step k``, a tqdm-like ``k/N [...]`` line on stderr, a line
  appended to ``--progress-file``, or ``--counter`` rewritten). ``--silent-after K --silent-s S``:
  after step K the clock moves S s with no progress (an evaluation); ``--fail-at K`` exits 3 at
  step K; ``--ready PATH [--ready-at K] [--hang]``: writes its pid there once govern has handled step K
(default 1), then with ``--hang`` waits to be signalled.

So every probe window reads exactly its level's figures: the test's expected energies are the
U-curve's, by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dvfslab.testing.fake_kernel import FakeKernelIO

JOB_DIR = ".fake_job"
#: how long the job waits for govern to handle a step before giving up (a hung test fails, never hangs)
HANDSHAKE_TIMEOUT_S = 120.0


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _read_float(path: Path, default: float = 0.0) -> float:
    try:
        return float(path.read_text())
    except (FileNotFoundError, ValueError):
        return default


class FileJobClock:
    """The job's virtual time, in ``<root>/.fake_job/clock``; :meth:`handled` is govern's side of
    the handshake (module doc)."""

    def __init__(self, root):
        self.dir = Path(root) / JOB_DIR
        self.dir.mkdir(parents=True, exist_ok=True)

    def __call__(self) -> float:
        return _read_float(self.dir / "clock")

    def advance(self, dt_s: float) -> None:
        _write(self.dir / "clock", repr(self() + float(dt_s)))

    def handled(self, units: float) -> None:
        _write(self.dir / "handled", repr(float(units)))


def write_spec(root, step_time_s: dict, gpu_mw: dict, rail: str = "VDD_GPU_SOC") -> Path:
    """Write the job's U-curve (module doc); levels as numbers or ``"default"``."""
    d = Path(root) / JOB_DIR
    d.mkdir(parents=True, exist_ok=True)
    key = lambda k: k if k == "default" else format(float(k), "g")  # noqa: E731
    spec = {"rail": rail, "step_time_s": {key(k): v for k, v in step_time_s.items()},
            "gpu_mw": {key(k): v for k, v in gpu_mw.items()}}
    _write(d / "spec.json", json.dumps(spec))
    return d / "spec.json"


class FakeJobIO(FakeKernelIO):
    """The fake kernel with the job's rail following the clock and the job's virtual clock (module doc)."""

    def __init__(self, root):
        super().__init__(root)
        self.virtual_clock = FileJobClock(self.root)
        # a new governed run starts a new handshake (a killed run's count must not let the job run ahead)
        _write(self.virtual_clock.dir / "handled", "-1")
        spec = json.loads((self.root / JOB_DIR / "spec.json").read_text())
        self.spec = spec
        self._rail_files = self._find_rail(spec["rail"])

    def _find_rail(self, rail: str) -> dict[str, str]:
        for label in self.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label"):
            if label.read_text().strip() == rail:
                c = label.name[2]
                return {str(label.parent / f"in{c}_input"): "mv", str(label.parent / f"curr{c}_input"): "ma"}
        raise FileNotFoundError(f"no INA3221 rail {rail!r} in the fake tree {self.root}")

    def _level_key(self) -> str:
        node = next(iter(self.glob("sys/class/devfreq/*.gpu")), None) or next(iter(self.glob("sys/class/devfreq/*")))
        cur, top = int(FakeKernelIO.read_text(self, node / "cur_freq")), int(FakeKernelIO.read_text(self, node / "max_freq"))
        lo = int(FakeKernelIO.read_text(self, node / "min_freq"))
        if lo != top and "default" in self.spec["gpu_mw"]:
            return "default"
        return format(cur / 1e6, "g")

    def read_text(self, rel) -> str:
        path = str(os.path.realpath(self.path(rel)))
        kind = self._rail_files.get(path)
        if kind is None:
            return super().read_text(rel)
        if kind == "mv":
            return "1000\n"
        return f"{int(self.spec['gpu_mw'][self._level_key()])}\n"

    def read_int(self, rel) -> int:
        return int(self.read_text(rel).split()[0])


def level_of(root: Path, spec: dict) -> str:
    """What the job runs at now: the level's key in the spec (``default`` when unlocked)."""
    io = FakeKernelIO(root)
    io.spec = spec
    return FakeJobIO._level_key(io)


def _wait_handled(clock: FileJobClock, units: float) -> None:
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    while _read_float(clock.dir / "handled", -1.0) < units - 1e-9:
        if time.monotonic() > deadline:
            sys.exit(f"fake job: dvfslab govern never handled step {units:g}")
        time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dvfslab.testing.fake_job")
    p.add_argument("root")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--format", choices=("steps", "hf", "file", "count"), default="steps")
    p.add_argument("--progress-file")
    p.add_argument("--silent-after", type=int)
    p.add_argument("--silent-s", type=float, default=0.0)
    p.add_argument("--fail-at", type=int)
    p.add_argument("--ready")
    p.add_argument("--ready-at", type=int, default=1)
    p.add_argument("--hang", action="store_true", help="after --ready, wait to be signalled")
    p.add_argument("--no-handshake", action="store_true", help="do not wait for govern (a job run alone)")
    a = p.parse_args(argv)
    root = Path(a.root)
    spec = json.loads((root / JOB_DIR / "spec.json").read_text())
    clock = FileJobClock(root)
    print("fake job: loading", flush=True)
    for k in range(1, a.steps + 1):
        if not a.no_handshake:
            _wait_handled(clock, k - 1)
        if a.ready and k - 1 == a.ready_at:  # govern has handled step K: its level is in place
            _write(Path(a.ready), str(os.getpid()))
            while a.hang:
                time.sleep(0.05)
        if a.fail_at == k:
            print(f"fake job: failing at step {k}", file=sys.stderr, flush=True)
            return 3
        clock.advance(float(spec["step_time_s"][level_of(root, spec)]))
        if a.format == "steps":
            print(f"step {k} loss 0.5", flush=True)
        elif a.format == "hf":
            sys.stderr.write(f"\r {100 * k // a.steps:3d}%|####      | {k}/{a.steps} [00:01<00:02,  9.00it/s]")
            sys.stderr.flush()
        elif a.format == "file":
            with open(a.progress_file, "a") as fh:
                fh.write(f"step {k}\n")
        else:
            _write(Path(a.progress_file), f"{k}\n")
        if a.silent_after == k and a.silent_s:
            print("fake job: evaluating (no progress)", flush=True)
            clock.advance(a.silent_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
