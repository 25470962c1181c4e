"""The A/A spread behind the gates' bands for the under-load tests: K runs of an unchanged
build (native and fastdp host to host, every under-load test), then per headline metric
fastdp's median ratio to native in each run and how far it moved between any two runs
(the largest |log| of one run's median ratio over another's, as a % change), beside how
far single repeats' ratios spread. A band (gates/verdict.py DEFAULT_TOLERANCES) must sit
above what moved between runs.

    .venv/bin/python benchmarks/load_bands.py --runs 3 [--repeats 3]   # measures (about 3.5 min a run)
    .venv/bin/python benchmarks/load_bands.py --report RUN RUN ...      # runs made before

Scheduler autogroups are turned off while it measures (restored after).
"""

from __future__ import annotations

import argparse
import itertools
import math
import pathlib
import statistics
import subprocess
import sys

from harness import results
from harness.analysis import stats
from harness.core.paths import PROJECT
from harness.gates.verdict import DEFAULT_TOLERANCES, HEADLINE

TESTS = ("load.irtt", "load.bounceback", "iperf.crr", "iperf3.udp_sweep64", "iperf3.udp_sweep1400", "irtt.udp")
AUTOGROUP = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")


def measure(runs: int, repeats: int, out: str) -> list[str]:
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    made = []
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for i in range(runs):
            p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "scenarios/load.toml", "--modes",
                                "native,fastdp", "--placements", "host-host", "--repeats", str(repeats),
                                "--duration", "2", "-q", "--results", out],
                               cwd=PROJECT, capture_output=True, text=True, check=True)
            made.append(p.stdout.splitlines()[0])
            print(f"run {i + 1}/{runs}: {made[-1]}", file=sys.stderr, flush=True)
    finally:
        if old is not None:
            AUTOGROUP.write_text(old)
    return made


def report(runs: list[str]) -> str:
    per_run: dict[str, list[float]] = {}
    singles: dict[str, list[float]] = {}
    for run in runs:
        rr = stats.repeat_ratios(results.load(run), metrics=sorted({HEADLINE[t] for t in TESTS}))
        rr = rr[rr["mode"] == "fastdp"]
        for test in TESTS:
            g = rr[(rr["test"] == test) & (rr["metric"] == HEADLINE[test])]
            if len(g):
                per_run.setdefault(test, []).append(float(g["ratio"].median()))
                singles.setdefault(test, []).extend(float(x) for x in g["ratio"])
    lines = [f"| test · metric | band | fastdp / native, median per run ({len(runs)} runs) | largest move between "
             "two runs | single repeats' ratios (min–max) |", "|---|---|---|---|---|"]
    for test in TESTS:
        meds = per_run.get(test, [])
        if not meds:
            continue
        move = max((abs(math.log(a / b)) for a, b in itertools.combinations(meds, 2)), default=0.0)
        metric = HEADLINE[test]
        lines.append(f"| `{test}` · `{metric}` | {DEFAULT_TOLERANCES[metric] * 100:.0f} % | "
                     f"{' · '.join(f'{m:.2f}' for m in meds)} | {100 * (math.exp(move) - 1):.0f} % | "
                     f"{min(singles[test]):.2f}–{max(singles[test]):.2f} (median {statistics.median(singles[test]):.2f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--results", default="results")
    p.add_argument("--report", nargs="+", metavar="RUN", help="report these runs instead of measuring")
    a = p.parse_args(argv)
    runs = a.report or measure(a.runs, a.repeats, a.results)
    print("runs: " + " ".join(runs))
    print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
