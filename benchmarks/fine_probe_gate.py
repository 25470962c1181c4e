"""The fine probe's gate: a fine probe's figures under load (load.irtt's, or load.sockperf's
with --test) between runs of an unchanged build, the band that spread implies, and how often
the stored-baseline gate catches a sleeve that waits 50 µs on every frame.

Each round is one run on a fresh lab: native, sleeve and sleeve-slow (the same sleeve with
`--calibrate-ns 50000`: 50 µs spent on every frame it reads or writes), host to host,
the one probe only, R repeats of D s, the modes deployed in turn within every repeat, idle CPUs
polling while it measures (as `overlaybench run` has them). Round 0's
native and sleeve make the baseline. In every later round the stored-baseline gate
(harness/gates/baseline.py) judges:

  aa    the round's sleeve: an unchanged build, so any failure is a false alarm;
  slow  the round's sleeve-slow, named sleeve: the regression, which it must fail.

The gate judges the probe's headline (gates/verdict.py), as a ratio to native in the same
repeat, at the metric table's band (or --band). Beside it, for each candidate figure, the
A/A spread: the largest move of the sleeve's median ratio between any two rounds, on a log
scale, and the band at twice that. --report judges the stored runs again at other bands.

    .venv/bin/python benchmarks/fine_probe_gate.py --rounds 20 --out /tmp/fpg   # measures
    .venv/bin/python benchmarks/fine_probe_gate.py --report --out /tmp/fpg --band 0.5
    .venv/bin/python benchmarks/fine_probe_gate.py --test load.sockperf --rounds 20 --out /tmp/fps

Scheduler autogroups are turned off while it measures (restored after).
"""

from __future__ import annotations

import argparse
import itertools
import math
import pathlib
import statistics

from harness import results
from harness.analysis import stats
from harness.core import metrics
from harness.gates import baseline as gate
from harness.gates.verdict import HEADLINE
from harness.modes.sleeve import Sleeve
from harness.run import cpuidle, scenario as S
from harness.run.runner import Runner
from harness.testbeds.lab import Lab

PROBES = ("load.irtt", "load.sockperf")
AUTOGROUP = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
SLOW_NS = 50_000


class SlowSleeve(Sleeve):
    """The sleeve as if a change made it spend 50 µs on every frame (--calibrate-ns)."""
    name = "sleeve-slow"
    flags = ("--calibrate-ns", str(SLOW_NS))


def _scenario(test: str, repeats: int, duration: float) -> S.Scenario:
    return S.build({"matrix": {"modes": ["native", "sleeve", "sleeve-slow"], "tests": [test],
                               "placements": ["host-host"], "streams": [2], "repeats": repeats,
                               "duration": duration}}, extra=(SlowSleeve(),))


def measure(test: str, rounds: int, repeats: int, duration: float, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    sc = _scenario(test, repeats, duration)
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for i in range(len(_runs(out)), rounds + 1):
            store = results.RunStore.create(out, {"scenario": sc.to_dict(), "machine": {"hostname": "lab"}})
            with Lab.create() as lab:
                # idle CPUs poll while the latency test runs, as `overlaybench run` has them
                Runner(sc, lab, store, poll_latency=cpuidle.hold if cpuidle.available() else None).run(S.expand(sc))
            print(f"round {i}: {store.path}", flush=True)
    finally:
        if old is not None:
            AUTOGROUP.write_text(old)


def _runs(out: pathlib.Path) -> list[pathlib.Path]:
    return sorted((p for p in out.iterdir() if (p / "measurements.jsonl").exists()), key=lambda p: p.name) \
        if out.exists() else []


def _arm(df, keep: str):
    """The frame with `keep` as the sleeve: native's rows and `keep`'s, renamed sleeve."""
    df = df[df["mode"].isin(["native", keep])].copy()
    df.loc[df["mode"] == keep, "mode"] = "sleeve"
    return df


SPREAD = ("rtt_loaded_p50_us", "rtt_loaded_p90_us", "rtt_loaded_p99_us", "rtt_loaded_us", "rtt_idle_p50_us",
          "rtt_idle_p99_us")


def _median_ratio(df, metric: str) -> float:
    rr = stats.repeat_ratios(df, metrics=[metric])
    return statistics.median(rr[(rr["mode"] == "sleeve") & (rr["metric"] == metric)]["ratio"])


def _complete(frames: list) -> list:
    """The runs whose every mode has every repeat (a run cut short is left out)."""
    n = max(len(f["repeat"].unique()) for f in frames)
    return [f for f in frames if all(len(f[(f["mode"] == m) & f["ok"]]["repeat"].unique()) == n
                                     for m in ("native", "sleeve", "sleeve-slow"))]


def report(out: pathlib.Path, metric: str, band: float) -> None:
    runs = _runs(out)
    frames = _complete([results.load(r) for r in runs])
    if len(frames) < 2:
        raise SystemExit(f"{out}: {len(frames)} complete run(s); a baseline and at least one round are needed")
    meta = results.read_meta(runs[0])
    print(f"{len(frames)} complete runs; sleeve / native per repeat, each run's median; the A/A move is the largest "
          f"between two runs, the band twice it on a log scale")
    print("| metric | A/A, min–max of the runs | largest A/A move | band at twice it | 50 µs a frame, min–max |")
    print("|---|---|---|---|---|")
    for figure in SPREAD:
        aa = [_median_ratio(_arm(f, "sleeve"), figure) for f in frames]
        slow = [_median_ratio(_arm(f, "sleeve-slow"), figure) for f in frames]
        move = max(abs(math.log(a / b)) for a, b in itertools.combinations(aa, 2))
        print(f"| `{figure}` | {min(aa):.2f}–{max(aa):.2f} | {math.exp(move) - 1:.0%} | {math.exp(2 * move) - 1:.0%} "
              f"| {min(slow):.2f}–{max(slow):.2f} |")
    base = gate.baseline_from_frame(_arm(frames[0], "sleeve"), meta, tolerances={metric: band})
    alarms = sum(not gate.evaluate_frame(_arm(f, "sleeve"), meta, base).ok for f in frames[1:])
    caught = sum(not gate.evaluate_frame(_arm(f, "sleeve-slow"), meta, base).ok for f in frames[1:])
    n = len(frames) - 1
    print(f"the gate on `{metric}` at a band of {band:.0%}, against the first run's baseline: "
          f"false alarms {alarms} of {n} A/A rounds; the slowed sleeve caught {caught} of {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="rounds after the baseline's (default 20)")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--out", type=pathlib.Path, required=True, help="where the runs go (resumes there)")
    ap.add_argument("--test", choices=PROBES, default=PROBES[0], help="the probe (default load.irtt)")
    ap.add_argument("--band", type=float, help="the band to judge at (default: the metric table's for the "
                                               "probe's headline)")
    ap.add_argument("--report", action="store_true", help="judge the stored runs only")
    a = ap.parse_args()
    metric = HEADLINE[a.test]
    band = a.band if a.band is not None else metrics.bands().get(metric)
    if band is None:
        ap.error(f"{metric} has no band in the metric table: give --band")
    if not a.report:
        measure(a.test, a.rounds, a.repeats, a.duration, a.out)
    report(a.out, metric, band)


if __name__ == "__main__":
    main()
