"""False alarms and power of both regression gates, measured: A/A pairs and injected regressions.

Each round is one run with six modes deployed in turn within every repeat (their order
shuffled per round, then rotated by the runner from repeat to repeat):

  native        the reference of the stored-baseline gate
  sleeve@base   the working tree's sleeve
  sleeve@aa     the same build again (an A/A comparison: nothing changed)
  sleeve@p5, sleeve@p10, sleeve@p20
                the same build slowed with `--calibrate-ns N` (N from
                benchmarks/calibrate_ns.py: about 5 %, 10 % and 20 % of throughput)

From one round come four comparisons for each gate:

  ab   `overlaybench compare`'s judgement (harness/gates/compare.py) of sleeve@KIND against
       sleeve@base, repeat by repeat;
  old  the stored-baseline gate (harness/gates/baseline.py): sleeve@KIND's ratio to native over the
       round's first --old-repeats repeats, against a baseline of the sleeve's ratio to
       native: round 0's run (same machine, same hour: that gate's best case), and the
       committed results/baseline.json (another day).

The four comparisons of a round share its base arm (and native), so they are not
independent of each other; rounds are. An A/A alarm counts on either test (iperf3.tcp or
qperf.tcp_lat); an injected regression counts as caught only on throughput, the figure it
moves. Every round is a line in OUT/log.jsonl, so the campaign runs in batches and
resumes; --report judges the stored runs again, A/B also on fewer pairs (the first k) and
with other α and tolerances, to choose the defaults.

    .venv/bin/python benchmarks/gate_power.py --batch 5       # repeat until done
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

from harness.core.paths import PROJECT
from harness.gates import baseline as gate, compare
from harness.modes import variants
from harness import results
from harness.run import session
from harness.sleeve import refs as builds

KINDS = ("aa", "p5", "p10", "p20")
ARMS = ("base",) + KINDS
TESTS = ["iperf3.tcp", "qperf.tcp_lat"]


def _matrix(modes: list[str], repeats: int, duration: float, mtu: int) -> dict:
    return {"matrix": {"modes": modes, "underlay_mtu": [mtu], "placements": ["container-container"],
                       "tests": TESTS, "repeats": repeats, "duration": duration}}


def run_round(r: int, a, ns: dict[str, int], out: pathlib.Path) -> str:
    """Round 0: native and the sleeve, --old-repeats (the stored-baseline gate's baseline);
    rounds ≥ 1: native and the five sleeve arms, --repeats."""
    arms = ("base",) if r == 0 else ARMS
    with builds.Snapshots() as snaps:
        made = [variants.variant("sleeve", snaps.add(PROJECT, None, arm,
                                                     ("--calibrate-ns", str(ns[arm])) if arm in ns else ()))
                for arm in arms]
        modes = ["native"] + [v.name for v in made]
        random.Random(r).shuffle(modes)
        store = session.run(overrides=_matrix(modes, a.old_repeats if r == 0 else a.repeats, a.duration,
                                              a.underlay_mtu),
                            results_dir=str(out / "runs"), quiet=True, extra_modes=tuple(made))
    return store.path.name


def measure(a) -> int:
    out = pathlib.Path(a.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    log = out / "log.jsonl"
    done = {d["round"] for d in _log(out)} if log.exists() else set()
    ns = {"p5": a.ns5, "p10": a.ns10, "p20": a.ns20}
    todo = [r for r in range(a.rounds + 1) if r not in done][:a.batch]
    for r in todo:
        t0 = time.monotonic()
        run = run_round(r, a, ns, out)
        line = {"round": r, "run": run, "ns": ns, "repeats": a.old_repeats if r == 0 else a.repeats,
                "duration": a.duration, "underlay_mtu": a.underlay_mtu, "seconds": round(time.monotonic() - t0, 1)}
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)
    left = a.rounds + 1 - len(done) - len(todo)
    print(f"{len(todo)} rounds measured, {left} left", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- report

_LOADED: dict[str, pd.DataFrame] = {}


def _log(out: pathlib.Path) -> list[dict]:
    return [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines() if x.strip()]


def _frame(out: pathlib.Path, run: str) -> pd.DataFrame:
    if run not in _LOADED:
        _LOADED[run] = results.load(out / "runs" / run)
    return _LOADED[run]


def _arm(df: pd.DataFrame, keep: dict[str, str], k: int | None) -> pd.DataFrame:
    """The rows of the modes in `keep`, renamed to its values, and only the first k repeats."""
    d = df[df["mode"].isin(list(keep))]
    d = d.assign(mode=d["mode"].map(keep))
    if k is not None:
        d = d[pd.to_numeric(d["repeat"]) < k]
    return d


def ab_failed(df: pd.DataFrame, kind: str, k: int | None, alpha: float, tol: dict) -> tuple[set, float]:
    """The metrics whose case failed (for p*: throughput only), and the throughput change."""
    failed, change, _ = ab_judged(df, kind, k, alpha, tol)
    return failed, change


def ab_judged(df: pd.DataFrame, kind: str, k: int | None, alpha: float, tol: dict) -> tuple[set, float, int]:
    """ab_failed's two, and the pairs the sequential rule used for the whole comparison
    (the most any case used: what `compare` would have measured before stopping)."""
    d = _arm(df, {"sleeve@base": "sleeve@base", f"sleeve@{kind}": "sleeve@head"}, k)
    v = compare.judge_frame(d, {}, alpha, tol)
    tp = [c for c in v.cases if c.case["metric"] == "throughput_bps"]
    failed = {c.case["metric"] for c in v.failures if kind == "aa" or c.case["metric"] == "throughput_bps"}
    return failed, (tp[0].change if tp else math.nan), max((c.pairs_used or 0) for c in v.cases)


def old_failed(df: pd.DataFrame, kind: str, k: int, baseline: dict) -> set:
    d = _arm(df, {"native": "native", f"sleeve@{kind}": "sleeve"}, k)
    b = dict(baseline)
    b["cases"] = [c for c in b["cases"] if c["mode"] == "sleeve" and c["placement"] == "container-container"
                  and c["underlay_mtu"] == 1500 and (kind == "aa" or c["metric"] == "throughput_bps")]
    v = gate.evaluate_frame(d, {}, b)
    return {c.case["metric"] for c in v.failures if kind == "aa" or c.case["metric"] == "throughput_bps"}


def _count(fails: list[set], kind: str) -> str:
    n = sum(bool(f) for f in fails)
    if kind != "aa" or not n:
        return f"{n}/{len(fails)}"
    tp = sum("throughput_bps" in f for f in fails)
    return f"{n}/{len(fails)} ({tp} throughput, {sum('latency_us' in f for f in fails)} latency)"


def report(a) -> int:
    out = pathlib.Path(a.out)
    log = _log(out)
    base_run = next(d["run"] for d in log if d["round"] == 0)
    fresh = gate.baseline_from_frame(_arm(_frame(out, base_run), {"native": "native", "sleeve@base": "sleeve"}, None),
                                     results.read_meta(out / "runs" / base_run))
    committed = gate.load_baseline(PROJECT / "results" / "baseline.json")
    rounds = sorted((d for d in log if d["round"] > 0), key=lambda d: d["round"])
    runs = [d["run"] for d in rounds]
    if not runs:
        print("no round measured yet beyond the baseline run")
        return 0
    first = rounds[0]
    print(f"{len(runs)} rounds (runs {min(runs)} … {max(runs)} under {out / 'runs'}), each {first['repeats']} "
          f"repeats of {first['duration']:g} s per test; --calibrate-ns {first['ns']}; the stored-baseline "
          f"gate's fresh baseline is run {base_run} (round 0)")
    ab_tol = dict(compare.AB_TOLERANCES)
    print("\nthe arm's paired throughput change against sleeve@base (median, quartiles, min … max):")
    for kind in KINDS:
        ch = [ab_failed(_frame(out, r), kind, None, compare.DEFAULT_ALPHA, ab_tol)[1] for r in runs]
        q1, med, q3 = np.percentile(ch, [25, 50, 75]) * 100
        print(f"  {kind:4}: {med:+.1f} % ({q1:+.1f} … {q3:+.1f}; {min(ch) * 100:+.1f} … {max(ch) * 100:+.1f})")

    def ab(k, alpha, tol):
        return [_count([ab_failed(_frame(out, r), kind, k, alpha, tol)[0] for r in runs], kind) for kind in KINDS]

    def old(k, b):
        return [_count([old_failed(_frame(out, r), kind, k, b) for r in runs], kind) for kind in KINDS]

    n = first["repeats"]
    ok = a.old_repeats
    print("\n| gate, as configured | A/A alarms | 5 % caught | 10 % caught | 20 % caught |")
    print("|---|---|---|---|---|")
    rows = [
        (f"A/B `compare`: {n} pairs, α {compare.DEFAULT_ALPHA}, tolerance "
         f"{ab_tol['throughput_bps'] * 100:.0f} % / {ab_tol['latency_us'] * 100:.0f} %",
         ab(None, compare.DEFAULT_ALPHA, ab_tol)),
        (f"stored baseline recorded in round 0 ({ok} repeats against {ok})", old(ok, fresh)),
        (f"stored baseline, the committed results/baseline.json (another day; {ok} repeats)", old(ok, committed)),
    ]
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\npairs the sequential A/B rule used before deciding (median, quartiles, min … max):")
    for kind in KINDS:
        used = [ab_judged(_frame(out, r), kind, None, compare.DEFAULT_ALPHA, ab_tol)[2] for r in runs]
        q1, med, q3 = np.percentile(used, [25, 50, 75])
        print(f"  {kind:4}: {med:g} ({q1:g} … {q3:g}; {min(used)} … {max(used)})")
    print("\nA/B on fewer pairs (the first k of each run) and other α and tolerances:")
    print("\n| pairs | α | tolerance: throughput / latency | A/A alarms | 5 % caught | 10 % caught | 20 % caught |")
    print("|---|---|---|---|---|---|---|")
    for k in a.k:
        for al in a.alphas:
            for t in a.tolerances:
                for lt in a.lat_tolerances:
                    cells = ab(k, al, {"throughput_bps": t, "latency_us": lt})
                    print(f"| {k or n} | {al} | {t * 100:.0f} % / {lt * 100:.0f} % | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PROJECT / "results" / "gate-power"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=5, help="rounds to measure in this call")
    ap.add_argument("--repeats", type=int, default=48, help="repeats per round (the A/B gate's budget of pairs)")
    ap.add_argument("--duration", type=float, default=1, help="seconds per test")
    ap.add_argument("--old-repeats", type=int, default=5,
                    help="the stored-baseline gate: repeats of its baseline run and judged per round")
    ap.add_argument("--underlay-mtu", type=int, default=1500)
    ap.add_argument("--ns5", type=int, default=500)
    ap.add_argument("--ns10", type=int, default=1800)
    ap.add_argument("--ns20", type=int, default=6000)
    ap.add_argument("--report", action="store_true", help="print the tables from what was measured")
    ap.add_argument("--k", type=lambda s: [int(x) if x != "all" else None for x in s.split(",")],
                    default=[5, 8, 12, None], help="A/B: repeats to judge on (the first k pairs; all = every repeat)")
    ap.add_argument("--alphas", type=lambda s: [float(x) for x in s.split(",")], default=[0.01, 0.05])
    ap.add_argument("--tolerances", type=lambda s: [float(x) for x in s.split(",")], default=[0.05, 0.08, 0.10],
                    help="A/B throughput tolerances to try")
    ap.add_argument("--lat-tolerances", type=lambda s: [float(x) for x in s.split(",")], default=[0.10],
                    help="A/B latency tolerances to try")
    a = ap.parse_args()
    return report(a) if a.report else measure(a)


def _interrupt(signum, frame):
    raise KeyboardInterrupt      # unwinds through the lab's cleanup, as the CLI does


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
