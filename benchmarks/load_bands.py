"""The A/A spread behind the gates' bands for the under-load tests: K runs of an unchanged
build (native and fastdp host to host, every under-load test), then per headline metric
each mode's median ratio to native in each run and how far it moved between any two runs
(the largest |log| of one run's median ratio over another's, as a % change), beside how
far single repeats' ratios spread. A band (gates/verdict.py DEFAULT_TOLERANCES) must sit
above what moved between runs.

    .venv/bin/python benchmarks/load_bands.py --runs 3 [--repeats 3]   # measures (about 3.5 min a run)
    .venv/bin/python benchmarks/load_bands.py --report RUN RUN ...      # runs made before
    .venv/bin/python benchmarks/load_bands.py --runs 5 --tests udp.ndr64,udp.pdr64 --modes native,fastdp,sleeve
                                                                        # the rate searches' bands

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


def measure(runs: int, repeats: int, out: str, tests: tuple[str, ...] = TESTS,
            modes: str = "native,fastdp", duration: float = 2) -> list[str]:
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    made = []
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for i in range(runs):
            p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "scenarios/load.toml", "--modes",
                                modes, "--placements", "host-host", "--tests", ",".join(tests),
                                "--repeats", str(repeats), "--duration", f"{duration:g}", "-q", "--results", out],
                               cwd=PROJECT, capture_output=True, text=True, check=True)
            made.append(p.stdout.splitlines()[0])
            print(f"run {i + 1}/{runs}: {made[-1]}", file=sys.stderr, flush=True)
    finally:
        if old is not None:
            AUTOGROUP.write_text(old)
    return made


def band(metric: str) -> str:
    return f"{DEFAULT_TOLERANCES[metric] * 100:.0f} %" if metric in DEFAULT_TOLERANCES else "not gated"


def report(runs: list[str], tests: tuple[str, ...] = TESTS) -> str:
    per_run: dict[tuple[str, str], list[float]] = {}
    singles: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        rr = stats.repeat_ratios(results.load(run), metrics=sorted({HEADLINE[t] for t in tests}))
        rr = rr[rr["mode"] != "native"]
        for (mode, test), g in rr.groupby(["mode", "test"]):
            g = g[g["metric"] == HEADLINE.get(test)]
            if len(g) and test in tests:
                per_run.setdefault((test, mode), []).append(float(g["ratio"].median()))
                singles.setdefault((test, mode), []).extend(float(x) for x in g["ratio"])
    lines = [f"| test · metric | mode | band | its ratio to native, median per run ({len(runs)} runs) | largest move "
             "between two runs | single repeats' ratios (min–max) |", "|---|---|---|---|---|---|"]
    for test, mode in sorted(per_run, key=lambda k: (tests.index(k[0]), k[1])):
        meds = per_run[(test, mode)]
        move = max((abs(math.log(a / b)) for a, b in itertools.combinations(meds, 2)), default=0.0)
        metric = HEADLINE[test]
        key = (test, mode)
        lines.append(f"| `{test}` · `{metric}` | {mode} | {band(metric)} | "
                     f"{' · '.join(f'{m:.2f}' for m in meds)} | {100 * (math.exp(move) - 1):.0f} % | "
                     f"{min(singles[key]):.2f}–{max(singles[key]):.2f} (median {statistics.median(singles[key]):.2f}) |")
    return "\n".join(lines + ["", *repeat_spread(runs, tests)])


def repeat_spread(runs: list[str], tests: tuple[str, ...]) -> list[str]:
    """Per test and mode, how far the repeats of one run spread in the headline's own value
    (highest over lowest, as a % above it), run by run: a ratio to native hides it where
    native is the sender's rate."""
    spread: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        df = results.load(run)
        df = df[df["ok"].astype(bool)]
        for (test, mode), g in df.groupby(["test", "mode"]):
            vals = [float(v) for v in g[g["metric"] == HEADLINE.get(test)]["value"]]
            if test in tests and vals and min(vals) > 0:
                spread.setdefault((test, mode), []).append(
                    f"{100 * (max(vals) / min(vals) - 1):.0f} % ({min(vals) / 1e3:.0f}–{max(vals) / 1e3:.0f}k)"
                    if HEADLINE[test].endswith("_pps") else f"{100 * (max(vals) / min(vals) - 1):.0f} %")
    return ["| test · metric | mode | repeats' spread in each run (highest over lowest) |", "|---|---|---|"] + [
        f"| `{t}` · `{HEADLINE[t]}` | {m} | {' · '.join(v)} |" for (t, m), v in sorted(spread.items())]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--results", default="results")
    p.add_argument("--tests", default=",".join(TESTS), help="the tests (default: every under-load test)")
    p.add_argument("--modes", default="native,fastdp", help="the modes, native among them (default: native,fastdp)")
    p.add_argument("--duration", type=float, default=2, help="each case's (a search's trial's) seconds (default: 2)")
    p.add_argument("--report", nargs="+", metavar="RUN", help="report these runs instead of measuring")
    a = p.parse_args(argv)
    tests = tuple(a.tests.split(","))
    runs = a.report or measure(a.runs, a.repeats, a.results, tests, a.modes, a.duration)
    print("runs: " + " ".join(runs))
    print(report(runs, tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
