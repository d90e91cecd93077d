"""Benchmark the power sampler thread on a fake JetPack 6 AGX Orin sysfs tree.

Two calibration rows come first, measured in the same run: a thread that only sleeps to 100 Hz
deadlines (what a timer wake-up costs on this machine, no sampler at all) and the sampler at
100 Hz on a reader that costs nothing (the sampler's own overhead). Then, for each requested
rate (the sensor's default, 100 Hz, 1 kHz, and 100 Hz while the main thread holds the GIL
running pure Python), a threaded
:class:`~dvfslab.measure.sampler.PowerSampler` reads the real :class:`JetsonPowerReader` code path
(INA3221 hwmon rails, GPU load and devfreq ``cur_freq``; files built by
``dvfslab.testing.fake_sysfs.build_board``) for ``--seconds`` of wall time and reports:

* achieved rate: (samples - 1) / (last - first timestamp);
* timestamp jitter: |interval between consecutive samples - requested period|, p50 / p99 / max;
* the sampler thread's CPU time per second of wall time (``time.thread_time`` measured inside
  the thread), as % of one core, and CPU per sample;
* the cost of one ``reader.read()`` called in a tight loop (the floor under the period).

A real-time window (idle baseline with ``time.sleep``, one window, stop) is printed first:
the unit tests drive the same code on a virtual clock.

Then the blocking fake INA3221 (``dvfslab.testing.fake_ina``: each value read waits for a
fresh conversion cycle, 6.6 ms for 3 channels at L4T's 1.1 ms per conversion, plus 0.2 ms of
I2C), driven on its virtual clock for ``--virtual-seconds``: for each requested period the
sampler's ``stats()`` gives the achieved rate and the mean / max cost of one sample's reads.
These figures are the model's, in virtual time (deterministic), not a board measurement.

Acceptance (issue 6): at 100 Hz requested, achieved >= 95 Hz and the thread < 2 % of one core,
judged on the median of ``--repeat`` runs (all runs are printed). The exit status is 1 when
that fails. Run: ``.venv/bin/python benchmarks/sampler.py``.
The fake tree lives on the local filesystem (tmpfs or disk), so a real board's I2C reads
(~0.5 ms per register) are not modelled: on hardware the per-read cost is higher.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import tempfile
import threading
import time

import numpy as np

from dvfslab.hw.base import PowerReader, PowerSample
from dvfslab.hw.jetson.backend import open_backend
from dvfslab.hw.jetson.power import JetsonPowerReader
from dvfslab.measure.loop import tick_loop
from dvfslab.measure.sampler import PowerSampler
from dvfslab.testing.fake_ina import install
from dvfslab.testing.fake_sysfs import build_board

ACCEPT_MIN_HZ = 95.0
ACCEPT_MAX_CPU_PCT = 2.0


def read_cost_us(reader, n: int = 2000) -> float:
    """Median wall time of one ``reader.read()`` in a tight loop, in microseconds."""
    costs = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        reader.read()
        costs[i] = time.perf_counter() - t0
    return float(np.median(costs) * 1e6)


class NullReader(PowerReader):
    """A reader that costs nothing: isolates the sampler's own overhead from the sysfs reads."""

    def __init__(self, reader):
        self.rails, self.total_rails, self.update_interval_s = reader.rails, reader.total_rails, None
        self._power = dict(reader.read().power_mw)

    def read(self) -> PowerSample:
        return PowerSample(t_s=time.monotonic(), power_mw=self._power)


def wakeup_floor(period_s: float, seconds: float) -> dict:
    """A thread that only sleeps to absolute deadlines: this machine's cost of a timer wake-up."""
    out = {}

    def body():
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        deadline, n = time.monotonic(), 0
        while time.perf_counter() - wall0 < seconds:
            deadline += period_s
            time.sleep(max(deadline - time.monotonic(), 0.0))
            n += 1
        out.update(cpu=time.thread_time() - cpu0, wall=time.perf_counter() - wall0, n=n)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    nan = float("nan")
    return {"requested_hz": 1 / period_s, "achieved_hz": out["n"] / out["wall"], "n_samples": out["n"],
            "n_lost": 0, "jitter_p50_ms": nan, "jitter_p99_ms": nan, "jitter_max_ms": nan,
            "cpu_pct": 100 * out["cpu"] / out["wall"], "cpu_us_per_sample": 1e6 * out["cpu"] / out["n"]}


def busy_python(seconds: float) -> None:
    """Hold the GIL with pure-Python work (the worst case for a sampler thread)."""
    end, x = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        for i in range(1000):
            x += i


def run_case(reader, period_s: float | None, seconds: float, busy: bool = False) -> dict:
    """Sample for ``seconds`` at ``period_s`` (None: the sampler's default) and summarize.

    The main thread sleeps, or with ``busy`` runs pure-Python code that holds the GIL.
    """
    sampler = PowerSampler(reader, period_s=period_s)
    with sampler:
        (busy_python if busy else time.sleep)(seconds)
    t = sampler.samples()["t_s"].to_numpy()
    period = sampler.period_s
    jitter_ms = np.abs(np.diff(t) - period) * 1e3
    stats = sampler.stats()
    return {
        "requested_hz": 1.0 / period,
        "achieved_hz": (t.size - 1) / (t[-1] - t[0]) if t.size > 1 else float("nan"),
        "n_samples": t.size,
        "n_lost": stats["n_lost"],
        "jitter_p50_ms": float(np.percentile(jitter_ms, 50)),
        "jitter_p99_ms": float(np.percentile(jitter_ms, 99)),
        "jitter_max_ms": float(jitter_ms.max()),
        "cpu_pct": 100.0 * stats["thread_cpu_fraction"],
        "cpu_us_per_sample": 1e6 * stats["thread_cpu_s"] / max(t.size, 1),
    }


def real_time_windows(reader, period_s: float = 0.005, seconds: float = 0.25) -> str:
    """The real-time path the unit tests drive on a virtual clock: ``measure_idle`` waiting
    with ``time.sleep``, then one window of ``seconds`` of wall time, then stop."""
    with PowerSampler(reader, period_s=period_s) as sampler:
        idle_w = sampler.measure_idle(0.05)
        with sampler.window("w") as w:
            time.sleep(seconds)
    n = sampler.n_samples
    time.sleep(0.03)
    stopped = "stopped" if sampler.n_samples == n else f"NOT stopped ({sampler.n_samples - n} more)"
    m = w.measurement
    return (f"real-time window of {m.time_s:.3f} s at {1 / period_s:g} Hz: {m.n_samples} samples, "
            f"{m.n_lost} lost, {m.avg_power_w:.2f} W (idle {idle_w:.2f} W); after stop(): {stopped}")


def blocking_fake(root: str, virtual_s: float) -> list[str]:
    """Achieved rate and per-sample read cost on the blocking fake INA3221, in virtual time."""
    board = build_board(root, "agx-orin-jp6")
    lines = []
    for period_s in (None, 0.010, 0.050, 0.100):
        io = install(board)
        reader = JetsonPowerReader(io=io, clock=io.clock, devfreq_rel=board.devfreq_rel)
        sampler = PowerSampler(reader, period_s=period_s, clock=io.clock, threaded=False).start()
        end = io.clock.t_s + virtual_s

        def wait(delay_s: float, clock=io.clock, end=end) -> bool:
            clock.advance(delay_s)
            return clock.t_s >= end

        tick_loop(sampler.period_s, io.clock, sampler.sample_once, wait)
        st = sampler.stats()
        name = f"default ({sampler.period_s * 1e3:g} ms)" if period_s is None else f"{period_s * 1e3:g} ms"
        lines.append(f"{name:>17} {st['requested_hz']:10.1f} {st['achieved_hz']:11.2f} {st['n_samples']:7d} "
                     f"{st['read_cost_mean_s'] * 1e3:14.2f} {st['read_cost_max_s'] * 1e3:13.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="wall time per case (s)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of the 100 Hz case; acceptance uses their median (min/max shown)")
    ap.add_argument("--virtual-seconds", type=float, default=10.0,
                    help="virtual time per case on the blocking fake INA3221 (s)")
    args = ap.parse_args(argv)
    # asking for rates the sensor cannot deliver is deliberate here: silence that warning
    logging.getLogger("dvfslab.measure").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="dvfslab-bench-") as root:
        board = build_board(root, "agx-orin-jp6")
        board.set_load(55.0)
        reader = open_backend(sysfs_root=root).power
        print(f"fake board: {board.profile.model} ({board.profile.name}); rails {list(reader.rails)}; "
              f"total = {' + '.join(reader.total_rails)}; sensor update_interval "
              f"{reader.update_interval_s} s")
        print(f"python {platform.python_version()} on {platform.machine()}, {args.seconds:g} s per case")
        print(f"one reader.read() (tight loop, median): {read_cost_us(reader):.1f} us")
        print(real_time_windows(reader) + "\n")
        rows = [("sleep-only thread", wakeup_floor(0.010, args.seconds)),
                ("null reader", run_case(NullReader(reader), 0.010, args.seconds)),
                ("default", run_case(reader, None, args.seconds)),
                *[(f"100 Hz #{k + 1}", run_case(reader, 0.010, args.seconds)) for k in range(args.repeat)],
                ("1 kHz", run_case(reader, 0.001, args.seconds)),
                ("100 Hz, busy main", run_case(reader, 0.010, args.seconds, busy=True))]
    header = (f"{'case':>17} {'request Hz':>10} {'achieved Hz':>11} {'samples':>7} {'lost':>4} "
              f"{'jitter p50 ms':>13} {'p99 ms':>7} {'max ms':>7} {'thread CPU %':>12} {'CPU us/sample':>13}")
    print(header)
    print("-" * len(header))
    for name, r in rows:
        print(f"{name:>17} {r['requested_hz']:10.1f} {r['achieved_hz']:11.2f} {r['n_samples']:7d} "
              f"{r['n_lost']:4d} {r['jitter_p50_ms']:13.3f} {r['jitter_p99_ms']:7.3f} "
              f"{r['jitter_max_ms']:7.3f} {r['cpu_pct']:12.3f} {r['cpu_us_per_sample']:13.1f}")
    with tempfile.TemporaryDirectory(prefix="dvfslab-bench-ina-") as root:
        blocking = blocking_fake(root, args.virtual_seconds)
    header = (f"{'period':>17} {'request Hz':>10} {'achieved Hz':>11} {'samples':>7} "
              f"{'read ms (mean)':>14} {'read ms (max)':>13}")
    print(f"\nblocking fake INA3221 (AGX Orin, 4 rails = 8 value reads a sample; "
          f"{args.virtual_seconds:g} virtual s per case)")
    print(header)
    print("-" * len(header))
    print("\n".join(blocking))
    runs = [r for name, r in rows if name.startswith("100 Hz #")]
    hz = sorted(r["achieved_hz"] for r in runs)
    cpu = sorted(r["cpu_pct"] for r in runs)
    med_hz, med_cpu = float(np.median(hz)), float(np.median(cpu))
    ok = med_hz >= ACCEPT_MIN_HZ and med_cpu < ACCEPT_MAX_CPU_PCT
    print(f"\nacceptance at 100 Hz over {len(runs)} runs (median [min, max]): achieved "
          f"{med_hz:.2f} [{hz[0]:.2f}, {hz[-1]:.2f}] Hz (>= {ACCEPT_MIN_HZ:g}); thread "
          f"{med_cpu:.2f} [{cpu[0]:.2f}, {cpu[-1]:.2f}] % of one core (< {ACCEPT_MAX_CPU_PCT:g}): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
