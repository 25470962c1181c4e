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


def ab_failed(df: pd.DataFrame, kind: str, alpha: float, tol: dict) -> tuple[set, float]:
    """The metrics whose case failed (for p*: throughput only), and the throughput change."""
    v = compare.judge_frame(df, {}, alpha, tol)
    tp = [c for c in v.cases if c.case["metric"] == "throughput_bps"]
    failed = {c.case["metric"] for c in v.failures if kind == "aa" or c.case["metric"] == "throughput_bps"}
    return failed, (tp[0].change if tp else math.nan)


def old_failed(df: pd.DataFrame, kind: str, baseline: dict, alpha: float, tol: dict) -> set:
    df = df.assign(mode=df["mode"].map(lambda m: stats.split_arm(m)[0]))
    b = {**baseline, "alpha": alpha, "tolerances": tol}
    b["cases"] = [c for c in b["cases"] if c["mode"] == "sleeve" and c["placement"] == "container-container"
                  and c["underlay_mtu"] == 1500 and (kind == "aa" or c["metric"] == "throughput_bps")]
    v = gate.evaluate_frame(df, {}, b)
    return {c.case["metric"] for c in v.failures}


def _count(fails: list[set], kind: str) -> str:
    n = sum(bool(f) for f in fails)
    if kind != "aa" or not n:
        return f"{n}/{len(fails)}"
    tp = sum("throughput_bps" in f for f in fails)
    return f"{n}/{len(fails)} ({tp} throughput, {sum('latency_us' in f for f in fails)} latency)"


def report(a) -> int:
    out = pathlib.Path(a.out)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    base_run = next(d["run"] for d in log if d["round"] == 0)
    fresh = gate.make_baseline(out / "runs" / base_run)
    fresh = {**fresh, "cases": [{**c, "mode": stats.split_arm(c["mode"])[0]} for c in fresh["cases"]]}
    committed = gate.load_baseline(PROJECT / "results" / "baseline.json")
    counted = [d for d in log if d["round"] > 0]
    runs = {w: {k: [d["run"] for d in counted if d["gate"] == w and d["kind"] == k] for k in KINDS} for w in GATES}
    first, last = min(d["run"] for d in log), max(d["run"] for d in log)
    print(f"{len(counted)} comparisons in {len({d['round'] for d in counted})} rounds (runs {first} … {last} "
          f"under {out / 'runs'}); the stored-baseline gate's fresh baseline is run {base_run}")
    ns = {d["kind"]: d["ns"] for d in counted}
    ab_tol, old_tol = dict(compare.DEFAULT_TOLERANCES), dict(gate.DEFAULT_TOLERANCES)
    print("\nthe head arm's paired throughput change in the A/B runs (median, quartiles, min … max):")
    for kind in KINDS:
        ch = [ab_failed(_frame(out, r, None), kind, compare.DEFAULT_ALPHA, ab_tol)[1] for r in runs["ab"][kind]]
        if ch:
            q1, med, q3 = np.percentile(ch, [25, 50, 75]) * 100
            print(f"  {kind:4} --calibrate-ns {ns.get(kind, 0):>5}: {med:+.1f} % ({q1:+.1f} … {q3:+.1f}; "
                  f"{min(ch) * 100:+.1f} … {max(ch) * 100:+.1f}), {len(ch)} runs")

    def row(label: str, judge) -> str:
        return f"| {label} | " + " | ".join(_count([judge(r, kind) for r in runs[g][kind]], kind)
                                           for g, kind in ((label_gate[label], k) for k in KINDS)) + " |"

    label_gate = {}
    print("\n| gate, as configured | A/A alarms | 5 % caught | 10 % caught | 20 % caught |")
    print("|---|---|---|---|---|")
    lines = [
        ("A/B `compare`: 16 pairs of 2 s, α 0.05, tolerance 5 % / 10 %", "ab",
         lambda r, k: ab_failed(_frame(out, r, None), k, compare.DEFAULT_ALPHA, ab_tol)[0]),
        ("stored baseline, recorded in this campaign: 5 × 3 s against 5 × 3 s, α 0.05, 10 % / 15 %", "old",
         lambda r, k: old_failed(_frame(out, r, None), k, fresh, gate.DEFAULT_ALPHA, old_tol)),
        ("stored baseline, the committed results/baseline.json (another day)", "old",
         lambda r, k: old_failed(_frame(out, r, None), k, committed, gate.DEFAULT_ALPHA, old_tol)),
    ]
    for label, g, judge in lines:
        label_gate[label] = g
        print(row(label, judge))
    print("\nA/B on fewer pairs (the first k of each run) and other α and throughput tolerances "
          "(latency tolerance 10 %):")
    print("\n| pairs | α | tolerance | A/A alarms | 5 % caught | 10 % caught | 20 % caught |")
    print("|---|---|---|---|---|---|---|")
    for k in a.k:
        for al in a.alphas:
            for t in a.tolerances:
                tol = {**ab_tol, "throughput_bps": t}
                cells = [_count([ab_failed(_frame(out, r, k), kind, al, tol)[0] for r in runs["ab"][kind]], kind)
                         for kind in KINDS]
                print(f"| {k or a.ab_repeats} | {al} | {t * 100:.0f} % | " + " | ".join(cells) + " |")
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
    ap.add_argument("--alphas", type=lambda s: [float(x) for x in s.split(",")], default=[0.01, 0.05])
    ap.add_argument("--tolerances", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 0.03, 0.05, 0.10],
                    help="A/B throughput tolerances to try")
    a = ap.parse_args()
    return report(a) if a.report else measure(a)


def _interrupt(signum, frame):
    raise KeyboardInterrupt      # unwinds through the lab's cleanup, as the CLI does


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
