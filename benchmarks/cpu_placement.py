"""Where the lab's hosts run, and what it does to latency: the same matrix measured with
the hosts where the scheduler puts them, on CPUs of their own (idle CPUs halting), on
their own CPUs with idle CPUs polling while latency tests run (the lab's default), and
polling for the whole run, back to back; then, per variant and mode, the median and
max/min over the repeats of qperf tcp_lat and sockperf's P50 and P99, and TCP throughput
as a % of native.

    .venv/bin/python benchmarks/cpu_placement.py                       # measures (about 17 min)
    .venv/bin/python benchmarks/cpu_placement.py --report RUN RUN RUN RUN   # the table of runs made before

Scheduler autogroups are turned off while it measures (restored after), as for any
measurement of processes that share one kernel.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys

from harness import results
from harness.core.paths import PROJECT

VARIANTS = (("scheduler", ["--lab-cpus", "scheduler", "--halt-idle"]), ("own", ["--lab-cpus", "own", "--halt-idle"]),
            ("own, polling in latency tests (the default)", ["--lab-cpus", "own"]),
            ("own, polling", ["--lab-cpus", "own", "--poll-idle"]))
MATRIX = ["--modes", "native,fastdp,sleeve", "--placements", "host-host",
          "--tests", "qperf.tcp_lat,sockperf.pingpong,iperf3.tcp", "--repeats", "10", "--duration", "2", "-q"]
FIGURES = (("qperf.tcp_lat", "latency_us", "tcp_lat"), ("sockperf.pingpong", "latency_p50_us", "P50"),
           ("sockperf.pingpong", "latency_p99_us", "P99"), ("iperf3.tcp", "throughput_bps", "TCP"))
AUTOGROUP = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")


def measure(out: str) -> list[str]:
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    runs = []
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for _label, flags in VARIANTS:
            p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *MATRIX, *flags, "--results", out],
                               cwd=PROJECT, capture_output=True, text=True, check=True)
            runs.append(p.stdout.splitlines()[0])
    finally:
        if old is not None:
            AUTOGROUP.write_text(old)
    return runs


def report(runs: list[str]) -> str:
    lines = ["| hosts' CPUs | mode | tcp_lat µs (max/min) | sockperf P50 µs (max/min) | P99 µs (max/min) | "
             "TCP Gbit/s | TCP % of native |", "|---|---|---|---|---|---|---|"]
    for (label, _flags), run in zip(VARIANTS, runs):
        df = results.load(run)
        df = df[df["ok"] == True]  # noqa: E712
        tcp_native = None
        for mode in ("native", "fastdp", "sleeve"):
            cells = []
            for test, metric, _name in FIGURES:
                v = df[(df["mode"] == mode) & (df["test"] == test) & (df["metric"] == metric)]["value"].tolist()
                if not v:
                    cells.append("–")
                    continue
                med = statistics.median(v)
                if metric == "throughput_bps":
                    tcp_native = med if mode == "native" else tcp_native
                    cells.append(f"{med / 1e9:.1f}")
                    cells.append(f"{100 * med / tcp_native:.0f}" if tcp_native else "–")
                else:
                    cells.append(f"{med:.1f} ({max(v) / min(v):.2f})")
            lines.append(f"| {label} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results", help="where the runs go (default results/)")
    p.add_argument("--report", nargs=len(VARIANTS), metavar="RUN",
                   help="report these runs, one per variant in the order above")
    a = p.parse_args(argv)
    runs = a.report or measure(a.results)
    print("runs: " + " ".join(runs))
    print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
