"""A/B: does the harness cost throughput? fastdp container→container iperf3 TCP, hand-run
vs through the harness's case routine (run/case.py), interleaved on one lab. Prints medians and their ratio.

    .venv/bin/python benchmarks/harness_overhead.py [--pairs 7] [--duration 3] [--underlay-mtu 1500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time

from harness import results
from harness.run import case as case_mod, scenario as S
from harness.testbeds.lab import Lab


def hand_run(lab: Lab, duration: int) -> float:
    c0, c1 = lab.sides[0].container, lab.sides[1].container
    srv = subprocess.Popen(["ip", "netns", "exec", c1.netns, "iperf3", "-s", "-1", "-p", "5201"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    out = subprocess.run(["ip", "netns", "exec", c0.netns, "iperf3", "-c", lab.sides[1].container_ip,
                          "-p", "5201", "-t", str(duration), "-J"], capture_output=True, text=True, timeout=duration + 20)
    srv.wait(10)
    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--underlay-mtu", type=int, default=1500)
    a = ap.parse_args()
    sc = S.build({"matrix": {"modes": ["fastdp"], "tests": ["iperf3.tcp"], "placements": ["container-container"],
                             "repeats": 1, "duration": a.duration, "underlay_mtu": [a.underlay_mtu]}})
    case = S.expand(sc)[0]
    hand, harness = [], []
    with Lab.create(a.underlay_mtu) as lab, tempfile.TemporaryDirectory() as tmp:
        store = results.RunStore.create(tmp, {"scenario": sc.to_dict()})
        rec = case_mod.Recorder(lab, sc.rate)
        mode = sc.mode("fastdp")
        dp = mode.deploy(lab, case.overlay_mtu)
        try:
            for i in range(a.pairs):
                order = ("hand", "harness") if i % 2 == 0 else ("harness", "hand")
                for who in order:
                    if who == "hand":
                        hand.append(hand_run(lab, a.duration))
                    else:
                        ms = case_mod.measure(lab, store, rec, sc, mode, [case], dp).rows[0]
                        harness.append(next(m.value for m in ms if m.metric == "throughput_bps"))
        finally:
            mode.teardown(lab, dp)
    mh, mr = statistics.median(hand), statistics.median(harness)
    print(f"hand-run iperf3  median {mh / 1e9:.2f} Gbit/s  ({', '.join(f'{x / 1e9:.2f}' for x in hand)})")
    print(f"harness          median {mr / 1e9:.2f} Gbit/s  ({', '.join(f'{x / 1e9:.2f}' for x in harness)})")
    print(f"harness / hand = {mr / mh:.3f}")


if __name__ == "__main__":
    main()
