"""The fine probe's gate: load.irtt's loaded P99 between runs of an unchanged build, the band
that spread implies, and how often the stored-baseline gate catches a sleeve that waits
50 µs on every frame.

Each round is one run on a fresh lab: native, sleeve and sleeve-slow (the same sleeve with
`--calibrate-ns 50000`: 50 µs spent on every frame it reads or writes), host to host,
load.irtt only, R repeats of D s, the modes deployed in turn within every repeat. Round 0's
native and sleeve make the baseline. In every later round the stored-baseline gate
(harness/gates/baseline.py) judges:

  aa    the round's sleeve: an unchanged build, so any failure is a false alarm;
  slow  the round's sleeve-slow, named sleeve: the regression, which it must fail.

The headline is load.irtt's `rtt_loaded_p99_us`, as a ratio to native in the same repeat.
The band (the metric table's, or --band) is printed beside the A/A spread: the largest move
of the sleeve's median ratio between any two rounds, on a log scale. --report judges the
stored runs again at other bands.

    .venv/bin/python benchmarks/fine_probe_gate.py --rounds 20 --out /tmp/fpg   # measures
    .venv/bin/python benchmarks/fine_probe_gate.py --report --out /tmp/fpg --band 0.5

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
from harness.modes.sleeve import Sleeve
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.testbeds.lab import Lab

METRIC = "rtt_loaded_p99_us"
AUTOGROUP = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
SLOW_NS = 50_000


class SlowSleeve(Sleeve):
    """The sleeve as if a change made it spend 50 µs on every frame (--calibrate-ns)."""
    name = "sleeve-slow"
    flags = ("--calibrate-ns", str(SLOW_NS))


def _scenario(repeats: int, duration: float) -> S.Scenario:
    return S.build({"matrix": {"modes": ["native", "sleeve", "sleeve-slow"], "tests": ["load.irtt"],
                               "placements": ["host-host"], "streams": [2], "repeats": repeats,
                               "duration": duration}}, extra=(SlowSleeve(),))


def measure(rounds: int, repeats: int, duration: float, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    sc = _scenario(repeats, duration)
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for i in range(len(_runs(out)), rounds + 1):
            store = results.RunStore.create(out, {"scenario": sc.to_dict(), "machine": {"hostname": "lab"}})
            with Lab.create() as lab:
                Runner(sc, lab, store).run(S.expand(sc))
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


def _median_ratio(df) -> float:
    rr = stats.repeat_ratios(df, metrics=[METRIC])
    return statistics.median(rr[(rr["mode"] == "sleeve") & (rr["metric"] == METRIC)]["ratio"])


def report(out: pathlib.Path, band: float) -> None:
    runs = _runs(out)
    if len(runs) < 2:
        raise SystemExit(f"{out}: {len(runs)} run(s); a baseline and at least one round are needed")
    frames = [results.load(r) for r in runs]
    meta = results.read_meta(runs[0])
    base = gate.baseline_from_frame(_arm(frames[0], "sleeve"), meta, tolerances={METRIC: band})
    aa = [_median_ratio(_arm(f, "sleeve")) for f in frames]
    slow = [_median_ratio(_arm(f, "sleeve-slow")) for f in frames[1:]]
    alarms = sum(not gate.evaluate_frame(_arm(f, "sleeve"), meta, base).ok for f in frames[1:])
    caught = sum(not gate.evaluate_frame(_arm(f, "sleeve-slow"), meta, base).ok for f in frames[1:])
    move = max(abs(math.log(a / b)) for a, b in itertools.combinations(aa, 2))
    n = len(frames) - 1
    print(f"{len(runs)} runs ({runs[0].name} the baseline); {METRIC}, sleeve / native, median of each run's repeats")
    print("A/A:  " + " · ".join(f"{r:.2f}" for r in aa))
    print("slow: " + " · ".join(f"{r:.2f}" for r in slow))
    print(f"largest A/A move between two runs: {math.exp(move) - 1:.0%} (×{math.exp(move):.2f}); "
          f"twice that on a log scale: a band of {math.exp(2 * move) - 1:.0%}")
    print(f"band {band:.0%}: false alarms {alarms} of {n} A/A rounds; slowed sleeve caught {caught} of {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="rounds after the baseline's (default 20)")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--out", type=pathlib.Path, required=True, help="where the runs go (resumes there)")
    ap.add_argument("--band", type=float, default=metrics.bands().get(METRIC),
                    help=f"the band to judge at (default: the metric table's, {metrics.bands().get(METRIC)})")
    ap.add_argument("--report", action="store_true", help="judge the stored runs only")
    a = ap.parse_args()
    if a.band is None:
        ap.error(f"{METRIC} has no band in the metric table: give --band")
    if not a.report:
        measure(a.rounds, a.repeats, a.duration, a.out)
    report(a.out, a.band)


if __name__ == "__main__":
    main()
