"""False alarms and power of both regression gates, measured: A/A pairs and injected regressions.

Each round measures, in a shuffled order, for each kind (aa: no change; p5, p10, p20: the
head build slowed with `--calibrate-ns N`, N chosen from benchmarks/calibrate_ns.py):

  ab   one `overlaybench compare`-style run: sleeve@base and sleeve@head deployed in turn
       within every repeat, judged head against base (harness/compare.py);
  old  one run of native and the sleeve (slowed for p*), gated on its ratio to native
       against a stored baseline (harness/gate.py): the run of round 0 (same machine, same
       hour: the old gate's best case) and results/baseline.json (committed, another day).

aa runs measure iperf3.tcp and qperf.tcp_lat (an alarm on either counts); p* runs only
iperf3.tcp (what was slowed, and the figure a regression must move). One MTU, one
placement, short tests: A/B runs 16 repeats of 2 s, the stored-baseline gate as CI ran it,
5 repeats of 3 s. Every comparison is a line in OUT/log.jsonl, so the campaign can be run
in batches and resumed; --report re-judges the stored runs, A/B also on fewer repeats (the
first k pairs) and with other α and tolerances, to choose the defaults.

    flock /work/heavy.lock .venv/bin/python benchmarks/gate_power.py --batch 10    # repeat until done
    .venv/bin/python benchmarks/gate_power.py --report
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import random
import signal
import sys
import time

import numpy as np
import pandas as pd

from harness import builds, compare, gate, results, session, stats
from harness.facts import PROJECT

KINDS = ("aa", "p5", "p10", "p20")
GATES = ("ab", "old")


def plan(rounds: int, seed: int = 1) -> list[tuple[int, str, str]]:
    """(round, kind, gate) in run order: round 0 is the old gate's baseline run."""
    rng = random.Random(seed)
    out = [(0, "aa", "old")]
    for r in range(1, rounds + 1):
        items = [(r, k, g) for k in KINDS for g in GATES]
        rng.shuffle(items)
        out += items
    return out


def matrix(kind: str, which: str, modes: list[str], a) -> dict:
    tests = ["iperf3.tcp", "qperf.tcp_lat"] if kind == "aa" else ["iperf3.tcp"]
    repeats, duration = (a.ab_repeats, a.ab_duration) if which == "ab" else (a.old_repeats, a.old_duration)
    return {"matrix": {"modes": modes, "underlay_mtu": [a.underlay_mtu], "placements": ["container-container"],
                       "tests": tests, "repeats": repeats, "duration": duration}}


def run_one(kind: str, which: str, ns: dict[str, int], a, out: pathlib.Path) -> str:
    flags = ("--calibrate-ns", str(ns[kind])) if kind != "aa" else ()
    runs = str(out / "runs")
    if which == "ab":
        with compare.prepare(PROJECT, None, head_flags=flags) as arms:
            return compare.measure(arms, overrides=matrix(kind, which, ["sleeve"], a), results_dir=runs,
                                   quiet=True).name
    with builds.Snapshots() as snaps:
        v = builds.variant("sleeve", snaps.add(PROJECT, None, "x", flags))
        with builds.registered([v]):
            store = session.run(overrides=matrix(kind, which, ["native", v.name], a), results_dir=runs, quiet=True)
    return store.path.name


def measure(a) -> int:
    out = pathlib.Path(a.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    log = out / "log.jsonl"
    done = {(d["round"], d["kind"], d["gate"]) for d in map(json.loads, log.read_text().splitlines())} \
        if log.exists() else set()
    ns = {"p5": a.ns5, "p10": a.ns10, "p20": a.ns20}
    todo = [p for p in plan(a.rounds) if p not in done][:a.batch]
    for r, kind, which in todo:
        t0 = time.monotonic()
        run = run_one(kind, which, ns, a, out)
        m = matrix(kind, which, [], a)["matrix"]
        line = {"round": r, "kind": kind, "gate": which, "run": run, "ns": ns.get(kind, 0),
                "repeats": m["repeats"], "duration": m["duration"], "seconds": round(time.monotonic() - t0, 1)}
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)
    left = len([p for p in plan(a.rounds) if p not in done]) - len(todo)
    print(f"{len(todo)} comparisons measured, {left} left", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- report

_LOADED: dict[str, pd.DataFrame] = {}


def _frame(out: pathlib.Path, run: str, k: int | None) -> pd.DataFrame:
    if run not in _LOADED:
        _LOADED[run] = results.load(out / "runs" / run)
    df = _LOADED[run]
    if k is not None:
        df = df[pd.to_numeric(df["repeat"]) < k]
    return df


def ab_alarm(df, kind, alpha, tol) -> tuple[bool, float]:
    v = compare.judge_frame(df, {}, alpha, {"throughput_bps": tol, "latency_us": max(tol, 0.10)})
    cases = v.cases if kind == "aa" else [c for c in v.cases if c.case["metric"] == "throughput_bps"]
    tp = [c for c in v.cases if c.case["metric"] == "throughput_bps"]
    return any(c.failed for c in cases), (tp[0].change if tp else math.nan)


def old_alarm(df, kind, baseline, alpha, tol) -> bool:
    df = df.assign(mode=df["mode"].map(lambda m: stats.split_arm(m)[0]))
    b = {**baseline, "alpha": alpha,
         "tolerances": {"throughput_bps": tol, "latency_us": max(tol, 0.15)}}
    if kind != "aa":
        b["cases"] = [c for c in b["cases"] if c["metric"] == "throughput_bps"]
    b["cases"] = [c for c in b["cases"] if c["mode"] == "sleeve" and c["placement"] == "container-container"
                  and c["underlay_mtu"] == 1500]
    v = gate.evaluate_frame(df, {}, b)
    cases = v.cases if kind == "aa" else [c for c in v.cases if c.case["metric"] == "throughput_bps"]
    return any(c.failed for c in cases)


def report(a) -> int:
    out = pathlib.Path(a.out)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    base_run = next(d["run"] for d in log if d["round"] == 0)
    fresh = gate.make_baseline(out / "runs" / base_run)
    fresh = {**fresh, "cases": [{**c, "mode": stats.split_arm(c["mode"])[0]} for c in fresh["cases"]]}
    committed = gate.load_baseline(PROJECT / "results" / "baseline.json")
    counted = [d for d in log if d["round"] > 0]
    rounds = len({d["round"] for d in counted})
    print(f"{len(counted)} comparisons in {rounds} rounds, runs under {out / 'runs'}; "
          f"old-gate baseline from run {base_run}; the stored-baseline gate always on all its repeats")
    ns = {d["kind"]: d["ns"] for d in counted}
    print("\nmeasured change of the head arm (A/B runs, median and range of the per-run paired change):")
    for kind in KINDS:
        ch = [ab_alarm(_frame(out, d["run"], None), kind, 0.05, 0.05)[1] for d in counted
              if d["kind"] == kind and d["gate"] == "ab"]
        if ch:
            print(f"  {kind:4} N={ns.get(kind, 0):>6} ns: {np.median(ch) * 100:+.1f} % "
                  f"({min(ch) * 100:+.1f} … {max(ch) * 100:+.1f}), {len(ch)} runs")
    settings = [(k, al, tol) for k in a.k for al in a.alphas for tol in a.tolerances]
    print("\n| gate | repeats | α | tolerance | A/A alarms | 5 % caught | 10 % caught | 20 % caught |")
    print("|---|---|---|---|---|---|---|---|")
    for k, al, tol in settings:
        row = {}
        for which, label in (("ab", "A/B (compare)"), ("old", "stored, fresh baseline"),
                             ("old-committed", "stored, committed baseline")):
            row[label] = {}
            for kind in KINDS:
                hits = []
                for d in counted:
                    if d["kind"] != kind or d["gate"] != which.split("-")[0]:
                        continue
                    df = _frame(out, d["run"], k if which == "ab" else None)
                    if which == "ab":
                        hits.append(ab_alarm(df, kind, al, tol)[0])
                    else:
                        hits.append(old_alarm(df, kind, committed if which == "old-committed" else fresh, al, tol))
                row[label][kind] = f"{sum(hits)}/{len(hits)}"
        for label, r in row.items():
            print(f"| {label} | {k} | {al} | {tol * 100:.0f} % | " + " | ".join(r[kind] for kind in KINDS) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PROJECT / "results" / "gate-power"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8, help="comparisons to measure in this call")
    ap.add_argument("--ab-repeats", type=int, default=16)
    ap.add_argument("--ab-duration", type=float, default=2)
    ap.add_argument("--old-repeats", type=int, default=5, help="the stored-baseline gate as CI ran it: 5 repeats")
    ap.add_argument("--old-duration", type=float, default=3, help="of 3 s (scenarios/quick.toml)")
    ap.add_argument("--underlay-mtu", type=int, default=1500)
    ap.add_argument("--ns5", type=int, default=3000)
    ap.add_argument("--ns10", type=int, default=4500)
    ap.add_argument("--ns20", type=int, default=7500)
    ap.add_argument("--report", action="store_true", help="print the tables from what was measured")
    ap.add_argument("--k", type=lambda s: [int(x) if x != "all" else None for x in s.split(",")],
                    default=[5, 8, 12, None], help="A/B: repeats to judge on (the first k pairs; all = every repeat)")
    ap.add_argument("--alphas", type=lambda s: [float(x) for x in s.split(",")], default=[0.05])
    ap.add_argument("--tolerances", type=lambda s: [float(x) for x in s.split(",")], default=[0.05, 0.10])
    a = ap.parse_args()
    return report(a) if a.report else measure(a)


def _interrupt(signum, frame):
    raise KeyboardInterrupt      # unwinds through the lab's cleanup, as the CLI does


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
