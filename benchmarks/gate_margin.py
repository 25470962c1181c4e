"""The margin behind the stored-baseline gate's lab test (tests/lab/test_gate_lab.py): per
repeat, the ratio to native of iperf3 TCP container to container for the sleeve as built
and for the sleeve slowed by 5 ms a frame (the test's regression), measured in one run
beside one busy loop per CPU, as the soak runs the test. The test needs every slowed
repeat below every good one (two inversions of 4 against 4 would pass the gate).

    .venv/bin/python benchmarks/gate_margin.py [--repeats 20] [--hogs 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys

from harness import results
from harness.modes.sleeve import Sleeve
from harness.run import session


class SlowedSleeve(Sleeve):
    name = "sleeve-slowed"
    flags = ("--calibrate-ns", "5000000")


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--hogs", type=int, default=2, help="busy loops beside the run (default 2)")
    p.add_argument("--results", default="results")
    a = p.parse_args(argv)
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(a.hogs)]
    for h in hogs:
        h.start()
    try:
        store = session.run(overrides={"matrix": {
            "modes": ["native", "sleeve", "sleeve-slowed"], "tests": ["iperf3.tcp"],
            "placements": ["container-container"], "repeats": a.repeats, "duration": 1}},
            results_dir=a.results, quiet=True, extra_modes=(SlowedSleeve(),))
    finally:
        for h in hogs:
            h.kill()
    df = results.load(store.path)
    tput = df[(df["metric"] == "throughput_bps") & (df["ok"] == True)]  # noqa: E712
    native = {int(x.repeat): x.value for x in tput[tput["mode"] == "native"].itertuples()}
    print(f"run: {store.path}")
    for mode in ("sleeve", "sleeve-slowed"):
        rows = tput[tput["mode"] == mode]
        ratios = sorted(x.value / native[int(x.repeat)] for x in rows.itertuples() if int(x.repeat) in native)
        gbit = sorted(x.value / 1e9 for x in rows.itertuples())
        print(f"{mode:14} n={len(ratios)} ratio to native: min {ratios[0]:.4f} median {statistics.median(ratios):.4f} "
              f"max {ratios[-1]:.4f}; Gbit/s min {gbit[0]:.3f} max {gbit[-1]:.3f}")
    nat = sorted(v / 1e9 for v in native.values())
    print(f"native         Gbit/s min {nat[0]:.2f} median {statistics.median(nat):.2f} max {nat[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
