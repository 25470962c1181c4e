"""False alarms, power and pairs of `overlaybench compare`'s sequential rule, measured as it runs.

Each round is four comparisons, each one real `overlaybench compare --base HEAD` run on the
lab with the scenario's defaults (scenarios/ab.toml: iperf3 TCP and qperf tcp_lat, 1 s, a
budget of 48 pairs, stopping once every case is decided):

  aa    --measure-unchanged: both arms the same build (nothing changed)
  p5, p10, p20
        --inject-ns N: the head arm busy-waits N ns per frame (`sleeve --calibrate-ns`),
        N from --ns5/--ns10/--ns20, chosen with benchmarks/calibrate_ns.py to cost about
        5 %, 10 % and 20 % of throughput

The four run in a shuffled order per round. Every comparison is a line of OUT/log.jsonl
(its run, exit code, and per case the status, pairs used and paired change), so the
campaign runs in batches and resumes. --report prints, per kind: how often each case came
out slower / not slower / undecided, the pairs the comparison used, and the paired
throughput change the arm really had (what `--calibrate-ns` cost, measured pair by pair in
the same runs). An A/A alarm counts on either case; a slowdown counts as caught on
throughput, the figure it moves. Each line records the run's `cpu_idle` (`poll` under
--poll-idle), and a campaign resumes only with the settings it began with.

    .venv/bin/python benchmarks/sequential_power.py --batch 5       # repeat until done
    .venv/bin/python benchmarks/sequential_power.py --report

A machine may not outlive a campaign (results/ is not committed): commit OUT/log.jsonl with
the figures it gives. BENCHMARKS.md's rounds 11–20 are benchmarks/data/sequential-power:
--report --out benchmarks/data/sequential-power prints their table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import subprocess
import sys
import time

import numpy as np

from harness.core.paths import PROJECT
from harness import results

KINDS = ("aa", "p5", "p10", "p20")


def _log(out: pathlib.Path) -> list[dict]:
    f = out / "log.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []


def measure(a, out: pathlib.Path) -> None:
    ns = {"p5": a.ns5, "p10": a.ns10, "p20": a.ns20}
    log = _log(out)
    idle = "poll" if a.poll_idle else "default"
    for d in log:                  # a campaign measures one setting throughout
        if d["kind"] != "aa" and d["ns"] != ns[d["kind"]] or d.get("cpu_idle", idle) != idle:
            sys.exit(f"{out}: round {d['round']} {d['kind']} was measured with --inject-ns {d['ns']} and idle CPUs "
                     f"{d.get('cpu_idle')}; resume with the same settings, or start another --out")
    done = {(d["round"], d["kind"]) for d in log}
    rounds = [r for r in range(1, a.rounds + 1) if any((r, k) not in done for k in KINDS)][:a.batch]
    for r in rounds:
        kinds = list(KINDS)
        random.Random(r).shuffle(kinds)
        for kind in (k for k in kinds if (r, k) not in done):
            args = [sys.executable, "-m", "harness.cli", "compare", "--base", "HEAD", "--results",
                    str(out / "runs"), "--format", "json", "-q"]
            args += ["--measure-unchanged"] if kind == "aa" else ["--inject-ns", str(ns[kind])]
            args += ["--poll-idle"] if a.poll_idle else []
            t0 = time.monotonic()
            p = subprocess.run(args, capture_output=True, text=True, cwd=PROJECT)
            if p.returncode not in (0, 1, 4):
                sys.exit(f"round {r} {kind}: compare exited {p.returncode}: {p.stderr.strip()[-500:]}")
            v = json.loads(p.stdout)
            line = {"round": r, "kind": kind, "ns": ns.get(kind, 0), "run": v["run_id"], "exit": p.returncode,
                    "seconds": round(time.monotonic() - t0, 1),
                    "cpu_idle": results.read_meta(out / "runs" / v["run_id"]).get("cpu_idle"),
                    "cases": {c["metric"]: {"status": c["status"], "pairs_used": c["pairs_used"],
                                            "change": c["change"]} for c in v["cases"]}}
            with open(out / "log.jsonl", "a") as f:
                f.write(json.dumps(line) + "\n")
            print(json.dumps(line), flush=True)


def report(out: pathlib.Path) -> None:
    log = _log(out)
    if not log:
        print("nothing measured yet")
        return
    n_rounds = len({d["round"] for d in log})
    print(f"{n_rounds} rounds; --inject-ns {sorted({(d['kind'], d['ns']) for d in log if d['kind'] != 'aa'})}\n")
    print("| true change | paired throughput change (median; min … max) | slower | not slower | undecided "
          "| pairs used (median; min … max) | minutes (mean) |")
    print("|---|---|---|---|---|---|---|")
    used_by: dict[str, list[int]] = {}       # the pairs each comparison used, per kind
    for kind in KINDS:
        rows = [d for d in log if d["kind"] == kind]
        if not rows:
            continue
        tp = [d["cases"].get("throughput_bps", {}) for d in rows]
        ch = [c["change"] for c in tp if c.get("change") is not None]
        if kind == "aa":          # an alarm on either case
            slower = sum(any(c["status"] == "fail" for c in d["cases"].values()) for d in rows)
        else:
            slower = sum(c.get("status") == "fail" for c in tp)
        passed = sum(c.get("status") in ("pass", "improved") for c in tp)
        undecided = sum(c.get("status") == "undecided" for c in tp)
        used = used_by[kind] = [max((c["pairs_used"] or 0) for c in d["cases"].values()) for d in rows]
        mins = np.mean([d["seconds"] for d in rows]) / 60
        chs = (f"{np.median(ch) * 100:+.1f} % ({min(ch) * 100:+.1f} … {max(ch) * 100:+.1f})" if ch else "—")
        print(f"| {kind} | {chs} | {slower}/{len(rows)} | {passed}/{len(rows)} | {undecided}/{len(rows)} | "
              f"{np.median(used):g} ({min(used)} … {max(used)}) | {mins:.1f} |")
    print("\npairs used (the comparison's last case to stop), how often:")
    for kind, used in used_by.items():
        print(f"  {kind}: " + ", ".join(f"{n} × {used.count(n)}" for n in sorted(set(used))))
    print(f"\nminutes per comparison, mean over every arm: {np.mean([d['seconds'] for d in log]) / 60:.1f} "
          f"({len(log)} comparisons)")
    lat = [d["cases"].get("latency_us", {}).get("status") for d in log if d["kind"] == "aa"]
    if lat:
        print(f"\nA/A latency cases: {sum(s == 'fail' for s in lat)} slower, "
              f"{sum(s in ('pass', 'improved') for s in lat)} not slower, {sum(s == 'undecided' for s in lat)} "
              f"undecided of {len(lat)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PROJECT / "results" / "sequential-power"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=5, help="rounds to measure in this call")
    for kind, n in (("ns5", 1200), ("ns10", 2500), ("ns20", 6000)):
        ap.add_argument(f"--{kind}", type=int, default=n,
                        help=f"--inject-ns of the {kind[2:]} %% arm (default {n}: calibrate with "
                             f"benchmarks/calibrate_ns.py first)")
    ap.add_argument("--poll-idle", action="store_true", help="pass --poll-idle to every comparison")
    ap.add_argument("--report", action="store_true", help="print the table from what was measured")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.report:
        measure(a, out)
    report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
