"""Four lab hosts, every pair: `sequential` against `rounds`, wall time and per-pair ratios.

Two runs of the same matrix, one per schedule (each the whole matrix: native host-host,
the overlay modes container-container, iperf3 TCP, every pair of four hosts), one after
the other; then, per mode and pair, the median ratio to native (the pair's own native,
in the same repeats) of both side by side, and each run's wall time from its run.json.

    .venv/bin/python benchmarks/fleet_schedules.py --repeats 3 --duration 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import subprocess
import sys

from harness.analysis import summary as summ
from harness.core.paths import PROJECT
from harness import results


def _run(schedule: str, a) -> pathlib.Path:
    args = [sys.executable, "-m", "harness.cli", "run", "--hosts", str(a.hosts), "--modes", a.modes,
            "--tests", "iperf3.tcp", "--placements", "host-host,container-container", "--schedule", schedule,
            "--repeats", str(a.repeats), "--duration", str(a.duration), "--results", a.results, "-q",
            "--format", "json"]
    p = subprocess.run(args, capture_output=True, text=True, cwd=PROJECT)
    if p.returncode != 0:
        sys.exit(f"{schedule}: run exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return pathlib.Path(json.loads(p.stdout)["run_dir"])


def _wall(run: pathlib.Path) -> float:
    meta = results.read_meta(run)
    start, end = (datetime.datetime.fromisoformat(meta[k]) for k in ("start", "end"))
    return (end - start).total_seconds()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--modes", default="native,fastdp,sleeve")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2)
    ap.add_argument("--results", default=str(PROJECT / "results"))
    a = ap.parse_args()
    runs = {s: _run(s, a) for s in ("sequential", "rounds")}
    tables = {s: summ.summary_table(results.load(r)) for s, r in runs.items()}
    print(f"{a.hosts} lab hosts, every pair, {a.modes}, iperf3 TCP, {a.repeats} repeats of {a.duration:g} s\n")
    print("| schedule | run | wall time |")
    print("|---|---|---|")
    for s, r in runs.items():
        print(f"| {s} | {r.name} | {_wall(r):.0f} s |")
    print("\n| mode | placement | pair | sequential: Gbit/s, % of native | rounds: Gbit/s, % of native |")
    print("|---|---|---|---|---|")
    seq = tables["sequential"].set_index(["mode", "placement", "pair"])
    rnd = tables["rounds"].set_index(["mode", "placement", "pair"])
    for key in seq.index:
        if key[0] == "native" or key not in rnd.index:
            continue
        cells = []
        for t in (seq, rnd):
            r = t.loc[key]
            cells.append(f"{r['tcp_gbps']:.2f}, {r['bw_pct']:.0f} %")
        print(f"| {key[0]} | {key[1]} | {key[2]} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
