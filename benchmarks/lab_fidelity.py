"""Does the lab measure what a hand-built pair of namespaces does? Native host to host,
qperf tcp_lat, sockperf ping-pong P50/P99 and iperf3 TCP, measured alternately by hand
(two namespaces joined by a veth, IPv6 off, each tool pinned with taskset to its host's
CPU, idle CPUs polling while latency is measured) and by `overlaybench run` on its lab (each host
on a CPU of its own, idle CPUs polling during latency tests: the defaults). Prints each
figure's medians and the harness / hand ratio.

    .venv/bin/python benchmarks/lab_fidelity.py [--rounds 6] [--duration 3]

Scheduler autogroups are turned off while it measures (restored after).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import struct
import subprocess
import sys
import time

from harness import results
from harness.core.paths import PROJECT
from harness.tools import TOOLS

NS = ("obfid-a", "obfid-b")
ADDR = ("198.18.250.1", "198.18.250.2")
AUTOGROUP = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
FIGURES = (("qperf.tcp_lat", "latency_us", "tcp_lat µs"), ("sockperf.pingpong", "latency_p50_us", "sockperf P50 µs"),
           ("sockperf.pingpong", "latency_p99_us", "sockperf P99 µs"), ("iperf3.tcp", "throughput_bps", "TCP Gbit/s"))


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)


def build() -> None:
    for ns in NS:
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", "ul0", "netns", NS[0], "type", "veth", "peer", "name", "ul0", "netns", NS[1])
    for ns, addr in zip(NS, ADDR):
        # IPv6 off, as on the lab's hosts: a new link's duplicate-address and router
        # solicitation traffic would otherwise run beside the first test
        sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "ul0")
        sh("ip", "-n", ns, "link", "set", "ul0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def teardown() -> None:
    for ns in NS:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def on(i: int, cpus: tuple[str, str], *argv: str) -> list[str]:
    return ["ip", "netns", "exec", NS[i], "taskset", "-c", cpus[i], *argv]


@contextlib.contextmanager
def polling(active: bool):
    """Idle CPUs poll while held: a PM QoS request of 0 µs on /dev/cpu_dma_latency."""
    if not active:
        yield
        return
    fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    try:
        os.write(fd, struct.pack("i", 0))
        yield
    finally:
        os.close(fd)


def listening(i: int, port: int, deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        out = subprocess.run(["ip", "netns", "exec", NS[i], "ss", "-Htlnu", f"sport = :{port}"],
                             capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port} in {NS[i]}")


def hand_round(cpus: tuple[str, str], duration: int) -> dict[str, float]:
    got: dict[str, float] = {}
    plans = (("qperf.tcp_lat", ["qperf", "-lp", "19765"], 19765,
              ["qperf", "-lp", "19765", "-ip", "19766", "-t", str(duration), "-uu", "-v", ADDR[1], "tcp_lat"], True),
             ("sockperf.pingpong", ["sockperf", "sr", "-i", ADDR[1], "-p", "11111"], 11111,
              ["sockperf", "pp", "-i", ADDR[1], "-p", "11111", "-t", str(duration)], True),
             ("iperf3.tcp", ["iperf3", "-s", "-1", "-p", "5201"], 5201,
              ["iperf3", "-c", ADDR[1], "-p", "5201", "-t", str(duration), "-J", "-P", "1"], False))
    for test, server, port, client, latency in plans:
        srv = subprocess.Popen(on(1, cpus, *server), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            listening(1, port)
            with polling(latency):
                out = subprocess.run(on(0, cpus, *client), capture_output=True, text=True, timeout=duration + 20)
        finally:
            srv.kill()
            srv.wait(10)
        res = TOOLS[test].parse(out.stdout, out.stderr, out.returncode)
        if not res.ok:
            raise RuntimeError(f"{test} by hand: {res.error}")
        got.update({f"{test} {s.metric}": s.value for s in res.samples})
    return got


def harness_round(duration: int, out: str) -> dict[str, float]:
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--modes", "native", "--placements", "host-host",
                        "--underlay-mtu", "1500", "--tests", "qperf.tcp_lat,sockperf.pingpong,iperf3.tcp",
                        "--repeats", "1", "--duration", str(duration), "-q", "--results", out],
                       cwd=PROJECT, capture_output=True, text=True, check=True)
    df = results.load(p.stdout.splitlines()[0])
    df = df[df["ok"] == True]  # noqa: E712
    return {f"{r.test} {r.metric}": r.value for r in df.itertuples()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--duration", type=int, default=3)
    p.add_argument("--results", default="results")
    a = p.parse_args(argv)
    avail = sorted(os.sched_getaffinity(0))
    cpus = (str(avail[0]), str(avail[-1]))          # as the lab places two hosts on two CPUs
    old = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    hand: list[dict] = []
    lab: list[dict] = []
    teardown()
    try:
        if old is not None:
            AUTOGROUP.write_text("0")
        for i in range(a.rounds):
            build()
            try:
                hand.append(hand_round(cpus, a.duration))
            finally:
                teardown()
            lab.append(harness_round(a.duration, a.results))
            print(f"round {i + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    finally:
        teardown()
        if old is not None:
            AUTOGROUP.write_text(old)
    for i, (h, lb) in enumerate(zip(hand, lab)):
        print(f"round {i + 1}: " + "; ".join(f"{label} hand {h.get(f'{t} {m}', float('nan')):.4g} lab "
                                             f"{lb.get(f'{t} {m}', float('nan')):.4g}" for t, m, label in FIGURES))
    print(f"| figure | by hand (median, min–max of {a.rounds}) | the lab (median, min–max) | lab / hand |")
    print("|---|---|---|---|")
    for test, metric, label in FIGURES:
        k = f"{test} {metric}"
        scale = 1e-9 if metric == "throughput_bps" else 1.0
        h = [r[k] * scale for r in hand if k in r]
        lb = [r[k] * scale for r in lab if k in r]
        mh, ml = statistics.median(h), statistics.median(lb)
        print(f"| {label} | {mh:.2f} ({min(h):.2f}–{max(h):.2f}) | {ml:.2f} ({min(lb):.2f}–{max(lb):.2f}) | "
              f"{ml / mh:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
