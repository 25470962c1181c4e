"""What does `sleeve --calibrate-ns N` cost in throughput? For each N, one two-arm run against N=0.

Both arms are the same build of the sleeve (the working tree); the slowed arm adds
`--calibrate-ns N`. This is how benchmarks/gate_power.py injects a regression (and
`overlaybench compare --inject-ns N`): the two arms are deployed in turn within every
repeat, their order alternating. Each repeat's throughput of the slowed arm over the same
repeat's N=0 arm is one ratio; the table gives their median, quartiles and min–max.

    .venv/bin/python benchmarks/calibrate_ns.py --ns 2500,5000,10000,20000 --repeats 10 --duration 2
"""

from __future__ import annotations

import argparse
import signal
import sys

import numpy as np

from harness import results
from harness.analysis import stats
from harness.core.paths import PROJECT
from harness.modes import variants
from harness.run import ab


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="2500,5000,10000,20000", help="comma-separated N values")
    ap.add_argument("--mode", default="sleeve")
    ap.add_argument("--underlay-mtu", type=int, default=1500)
    ap.add_argument("--placement", default="container-container")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--duration", type=float, default=2)
    ap.add_argument("--results", default=str(PROJECT / "results"))
    a = ap.parse_args()
    ns = [int(x) for x in a.ns.split(",")]
    matrix = {"matrix": {"modes": [a.mode], "underlay_mtu": [a.underlay_mtu], "placements": [a.placement],
                         "tests": ["iperf3.tcp"], "repeats": a.repeats, "duration": a.duration}}
    rows = []
    for n in ns:
        with ab.prepare(PROJECT, None, head_flags=["--calibrate-ns", str(n)]) as arms:
            run = ab.measure(arms, overrides=matrix, results_dir=a.results, quiet=True)
        pairs = stats.arm_pairs(results.load(run), variants.BASE, variants.HEAD, ["throughput_bps"])
        r = np.exp(pairs["log_ratio"].to_numpy())
        rows.append((n, run.name, float(np.median(pairs["base"])), r))
    print(f"{a.mode}, underlay MTU {a.underlay_mtu}, {a.placement}, iperf3.tcp, {a.repeats} repeats of "
          f"{a.duration:g} s per run; ratio = slowed / N=0 in the same repeat")
    print("| --calibrate-ns | run | N=0 median Gbit/s | ratio: median (quartiles; min–max) | throughput lost |")
    print("|---|---|---|---|---|")
    for n, run, base, r in rows:
        q1, med, q3 = np.percentile(r, [25, 50, 75])
        print(f"| {n} | {run} | {base / 1e9:.2f} | {med:.3f} ({q1:.3f}–{q3:.3f}; {r.min():.3f}–{r.max():.3f}) "
              f"| {(1 - med) * 100:.1f} % |")
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt      # unwinds through the lab's cleanup, as the CLI does


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
