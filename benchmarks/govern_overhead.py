"""Probing overhead of ``dvfslab govern`` live on the fake AGX Orin tree against the replay's
figure for the same curve and window.

The synthetic job of the tests (:mod:`dvfslab.testing.fake_job`: step time ``0.02 + 6 / l`` s,
GPU rail ``2000 + 0.004 l^2`` mW rounded, CPU rail 1000 mW; least energy per step at 408 MHz)
runs under ``dvfslab govern --policy P --progress steps --log``. From the log:

* **live overhead** (J) = the energy of the probe windows (each window's measured energy per
  step x its steps, the settle steps included: the job ran them at the probed level) minus what
  those steps cost at the level held afterwards (its measured energy per step);
* **replay overhead** (J): the same governor decides through a probe that reads the same curve
  exactly, with the same probe model (the log's ``probe-model`` line: window and read fraction) —
  the replay's charge, ``sum_i e(probe_i) - U e(l*)``.

The ratio live / replay is printed per governor (<= 1 is the goal: live probing costs no more
than the replay charges). Also printed: the windows at the default clock before the governor
starts (calibration + baseline; the replay has no such windows, they are the saving's reference)
and the wall time of each governed run. The clock is virtual: the figures do not depend on the
machine's speed, the wall times do.

    .venv/bin/python benchmarks/govern_overhead.py [--policies search,online,zeus-sim] [--steps 240]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dvfslab.governors.probemodel import ProbeModel
from dvfslab.governors.registry import make
from dvfslab.testing.fake_job import write_spec
from dvfslab.testing.fake_sysfs import build_board

LEVELS = [306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5]
CPU_MW = 1000


def curve():
    t = {lv: 0.02 + 6 / lv for lv in LEVELS}
    p = {lv: int(round(2000 + 0.004 * lv * lv)) for lv in LEVELS}
    return t, p


class CurveProbe:
    """The replay's view of the same job: ``units`` at ``level`` cost exactly the curve's figures."""

    def __init__(self, model: ProbeModel):
        self.levels, self.model = [float(x) for x in LEVELS], model
        t, p = curve()
        self.t = {float(k): v for k, v in t.items()}
        self.e = {float(k): (p[k] + CPU_MW) / 1000 * t[k] for k in LEVELS}

    def measure(self, level, units=1.0):
        lv = float(LEVELS[-1] if level is None else level)
        return units * self.t[lv], units * self.e[lv]


def live(policy: str, steps: int) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        board = build_board(Path(tmp) / "orin", "agx-orin-jp6")
        board.set_rail("VDD_CPU_CV", CPU_MW, mv=1000, ma=CPU_MW)
        t, p = curve()
        write_spec(board.root, {**t, "default": t[1300.5]}, {**p, "default": p[1300.5]})
        log = Path(tmp) / "log.jsonl"
        env = {**os.environ, "DVFSLAB_SYSFS_IO": "dvfslab.testing.fake_job:FakeJobIO",
               "DVFSLAB_STATE_DIR": str(Path(tmp) / "state")}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dvfslab", "govern", "--policy", policy, "--progress", "steps",
                        "--log", str(log), "--sysfs-root", str(board.root), "--", sys.executable, "-m",
                        "dvfslab.testing.fake_job", str(board.root), "--steps", str(steps)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        rows = [json.loads(x) for x in log.read_text().splitlines()]
    return {"rows": rows}, wall


def overheads(policy: str, rows: list[dict]) -> dict:
    model_line = next(r for r in rows if r.get("event") == "probe-model")
    model = ProbeModel(default_window=model_line["default_window"], read_fraction=model_line["read_fraction"])
    s = rows[-1]
    held = [r["energy_per_unit_j"] for r in rows if r.get("phase") == "hold" and r.get("measurement")]
    e_held = sum(held) / len(held)
    probes = [r for r in rows if r.get("phase") == "probe" and r.get("measurement")]
    probe_e = sum(r["energy_per_unit_j"] * r["units"] for r in probes)
    probe_u = sum(r["units"] for r in probes)
    live_oh = probe_e - probe_u * e_held
    pre = [r for r in rows if r.get("phase") in ("calibration", "baseline") and r.get("measurement")]
    pre_oh = sum((r["energy_per_unit_j"] - e_held) * r["units"] for r in pre)
    gov = make(policy, prior=None) if policy == "search" else make(policy)
    gov.fit()
    probe = CurveProbe(model)
    d = gov.decide({}, probe)
    e_star = probe.e[float(d.level)]
    replay_oh = sum(st.energy_j for st in d.probed) - d.probe_units * e_star
    return {"policy": policy, "live_level": s["chosen_level"], "replay_level": d.level, "live_probes": len(probes),
            "replay_probes": len(d.probed), "live_units": probe_u, "replay_units": d.probe_units,
            "live_j": live_oh, "replay_j": replay_oh, "pre_j": pre_oh}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", default="search,online,zeus-sim")
    ap.add_argument("--steps", type=int, default=240)
    a = ap.parse_args(argv)
    print(f"{'policy':9} {'level live/replay':>18} {'probes':>9} {'probe steps':>13} {'live J':>9} {'replay J':>9} "
          f"{'ratio':>7} {'default-clock J':>16} {'wall s':>7}")
    worst = 0.0
    for policy in a.policies.split(","):
        out, wall = live(policy, a.steps)
        r = overheads(policy, out["rows"])
        ratio = r["live_j"] / r["replay_j"] if r["replay_j"] else float("nan")
        worst = max(worst, ratio)
        print(f"{policy:9} {r['live_level']:>8g}/{r['replay_level']:<9g} {r['live_probes']:>4}/{r['replay_probes']:<4} "
              f"{r['live_units']:>6g}/{r['replay_units']:<6g} {r['live_j']:>9.4f} {r['replay_j']:>9.4f} {ratio:>7.3f} "
              f"{r['pre_j']:>16.4f} {wall:>7.1f}")
    print(f"largest live/replay ratio: {worst:.3f} -> {'PASS (<= 1)' if worst <= 1 + 1e-9 else 'FAIL (> 1)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
