"""How much an unchanged build's A/B pairs swing, with the CPUs' idle states as they are and
with --poll-idle: alternate A/A `compare` runs of both kinds, then the spread of their pairs.

Each round is two runs of `overlaybench compare --base HEAD --measure-unchanged` (both arms
the same build), one plain and one with --poll-idle, their order alternating by round. Per
kind and test: the spread of the per-pair log-ratios (a robust σ: 1.4826 × the median
absolute deviation), the largest |log-ratio|, and each run's median paired change.

    .venv/bin/python benchmarks/latency_aa.py --rounds 3            # measures (about 4 min a round)
    .venv/bin/python benchmarks/latency_aa.py --report               # the table again
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import subprocess
import sys

import numpy as np

from harness.analysis import stats
from harness.core.paths import PROJECT
from harness.modes.variants import BASE, HEAD
from harness import results

KINDS = ("default", "poll-idle")


def measure(a, out: pathlib.Path) -> None:
    log = out / "log.jsonl"
    done = len(log.read_text().splitlines()) if log.exists() else 0
    for r in range(done // 2, a.rounds):
        for kind in (KINDS if r % 2 == 0 else KINDS[::-1]):
            args = [sys.executable, "-m", "harness.cli", "compare", "--base", "HEAD", "--measure-unchanged",
                    "--tests", "iperf3.tcp,qperf.tcp_lat", "--repeats", str(a.repeats),
                    "--results", str(out / "runs"), "--format", "json", "-q"]
            args += ["--poll-idle"] if kind == "poll-idle" else []
            p = subprocess.run(args, capture_output=True, text=True, cwd=PROJECT)
            if p.returncode not in (0, 1, 4):
                sys.exit(f"round {r} {kind}: compare exited {p.returncode}: {p.stderr.strip()[-500:]}")
            run = json.loads(p.stdout)["run_id"]
            with open(log, "a") as f:
                f.write(json.dumps({"round": r, "kind": kind, "run": run}) + "\n")
            print(f"round {r} {kind}: {run}", flush=True)


def report(out: pathlib.Path) -> None:
    lines = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if x.strip()]
    print("| idle | test | runs | pairs | robust σ of a pair's log-ratio | largest swing | runs' median changes |")
    print("|---|---|---|---|---|---|---|")
    for kind in KINDS:
        runs = [d["run"] for d in lines if d["kind"] == kind]
        per_test: dict[str, list] = {}
        for run in runs:
            pairs = stats.arm_pairs(results.load(out / "runs" / run), BASE, HEAD)
            for test, g in pairs.groupby("test"):
                metric = {"iperf3.tcp": "throughput_bps", "qperf.tcp_lat": "latency_us"}[test]
                d = g[g["metric"] == metric]["log_ratio"].astype(float).to_numpy()
                per_test.setdefault(test, []).append(d)
        for test, ds in sorted(per_test.items()):
            allp = np.concatenate(ds)
            sigma = 1.4826 * float(np.median(np.abs(allp - np.median(allp))))
            meds = ", ".join(f"{math.expm1(float(np.median(d))) * 100:+.1f} %" for d in ds)
            print(f"| {kind} | {test} | {len(ds)} | {len(allp)} | {sigma:.3f} | "
                  f"{math.expm1(float(np.max(np.abs(allp)))) * 100:.0f} % | {meds} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PROJECT / "results" / "latency-aa"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=16,
                    help="pairs per run at most (a run stops once both cases are decided, from 14 on)")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.report:
        measure(a, out)
    report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
