"""The margins behind the lab tests that judge a fresh measurement (tests/README.md, "No test
fails by chance"): for each, the distribution of the statistic the test compares with its
bar, measured in one run of many repeats beside busy loops (one per CPU by default), as the
soak runs the tests. Each part prints n, min/median/max and the margin against the bar: the
bar over the worst value seen, and the same distance on a log scale from the median, in
units of the median's distance to the worst value.

    .venv/bin/python benchmarks/verdict_margins.py --only NAME \\
        [--repeats N] [--hogs 2]

NAME: compare, flannel, tail, loaded, floors, ssh (one per invocation keeps each short).
Needs root. Removes what it made on every path; the busy loops die with this process.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "lab")]

from harness import results  # noqa: E402
from harness.core.errors import HarnessError, UnsupportedError  # noqa: E402
from harness.modes.native import Native  # noqa: E402
from harness.modes.sleeve import Sleeve  # noqa: E402
from harness.run import session  # noqa: E402

# A busy loop that dies with its parent (PR_SET_PDEATHSIG, SIGKILL), however that ends.
SPIN = "import ctypes; ctypes.CDLL(None).prctl(1, 9)\nwhile True: pass"


@contextlib.contextmanager
def hogs(n: int):
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def cpu_model() -> str:
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def row(label: str, values: list[float], unit: str = "", scale: float = 1.0) -> str:
    v = sorted(x / scale for x in values)
    return (f"  {label:34} n={len(v):<3} min {v[0]:10.4g}  median {statistics.median(v):10.4g}  "
            f"max {v[-1]:10.4g} {unit}")


def margin(label: str, values: list[float], bar: float, below: bool) -> str:
    """The statistic must stay below `bar` (below=True) or above it: how far the worst value
    seen is from the bar, as a factor and on a log scale from the median."""
    med = statistics.median(values)
    worst = max(values) if below else min(values)
    factor = bar / worst if below else worst / bar
    spread = abs(math.log(worst / med))
    logs = abs(math.log(bar / med)) / spread if spread > 0 else math.inf
    side = "<" if below else ">"
    logv = [math.log(x) for x in values]
    mu, sd = statistics.mean(logv), statistics.stdev(logv)
    z = abs(math.log(bar) - mu) / sd
    return (f"  {label}: bar {side} {bar:.4g}; worst seen {worst:.4g} (factor {factor:.3g} from the bar); "
            f"log distance median→bar = {logs:.3g} × median→worst; a normal fit to the logs puts the bar "
            f"{z:.2f} sd away (one-sided tail {0.5 * math.erfc(z / math.sqrt(2)):.1e})")


def tput(run_dir: pathlib.Path) -> dict[tuple[str, str, int], float]:
    return {(r["mode"], r["placement"], int(r["repeat"])): r["value"] for r in results.read_records(run_dir)
            if r["ok"] and r["metric"] == "throughput_bps"}


def harness_run(a, modes: list[str], placements: list[str], extra=()) -> pathlib.Path:
    store = session.run(overrides={"matrix": {
        "modes": modes, "tests": ["iperf3.tcp"], "placements": placements, "underlay_mtu": [1500],
        "repeats": a.repeats, "duration": 1}}, results_dir=a.results, quiet=True, extra_modes=extra)
    print(f"run: {store.path}")
    return pathlib.Path(store.path)


# ----------------------------------------------------------------------------- the parts

class Slowed(Sleeve):
    name = "sleeve-slowed"
    flags = ("--calibrate-ns", "5000000")


def part_compare(a) -> None:
    """test_compare_lab.py: the sleeve against the sleeve slowed by `--calibrate-ns` a frame
    (the test's 5 ms by default), container to container at 1500; the test needs every pair
    slower."""
    Slowed.flags = ("--calibrate-ns", str(a.calibrate_ns))
    t = tput(harness_run(a, ["sleeve", "sleeve-slowed"], ["container-container"], (Slowed(),)))
    base = [v for (m, _, _), v in t.items() if m == "sleeve"]
    slow = [v for (m, _, _), v in t.items() if m == "sleeve-slowed"]
    pairs = [t[("sleeve-slowed", p, r)] / v for (m, p, r), v in t.items() if m == "sleeve" and ("sleeve-slowed", p, r) in t]
    print("compare: iperf3.tcp container-container, MTU 1500, 1 s")
    print(row("sleeve (Gbit/s)", base, scale=1e9))
    print(row(f"slowed {a.calibrate_ns / 1000:g} µs/frame (Gbit/s)", slow, scale=1e9))
    print(row("pair ratio slowed/sleeve", pairs))
    print(f"  max(slowed)/min(sleeve) = {max(slow) / min(base):.4f} (the test needs every pair below 1)")
    print(margin("pair ratio slowed/sleeve", pairs, 1.0, below=True))


def part_flannel(a) -> None:
    """test_flannel_lab.py: flannel-udp's host-host throughput over flannel-vxlan's, one
    repeat each in the test (by[...] is that run's single value)."""
    t = tput(harness_run(a, ["flannel-vxlan", "flannel-udp"], ["host-host"]))
    vx = {r: v for (m, _, r), v in t.items() if m == "flannel-vxlan"}
    udp = {r: v for (m, _, r), v in t.items() if m == "flannel-udp"}
    ratios = [udp[r] / vx[r] for r in udp if r in vx]
    print("flannel: iperf3.tcp host-host, MTU 1500, 1 s")
    print(row("flannel-vxlan (Gbit/s)", list(vx.values()), scale=1e9))
    print(row("flannel-udp (Gbit/s)", list(udp.values()), scale=1e9))
    print(row("udp/vxlan, same repeat", ratios))
    print(f"  max(udp)/min(vxlan) = {max(udp.values()) / min(vx.values()):.4f} (any pairing)")
    print(margin("udp/vxlan", ratios, 0.5, below=True))


def _pingpong_p99(lab, dp) -> float:
    """The breadth test's own 2 s sockperf probe, host to host: its P99 (µs)."""
    from test_breadth_lab import _pingpong
    return _pingpong(lab, dp, "host-host")["latency_p99_us"]


def _loaded_p99(lab, dp) -> float:
    """The under-load test's own probe, host to host, for 3 s: its P99 (µs)."""
    from test_under_load_lab import _loaded_probe
    return _loaded_probe(lab, dp, "host-host", duration=3)["p99"]


def _native_repeats(a, measure) -> list[float]:
    from harness.testbeds.lab import Lab
    with Lab.create() as lab:
        mode = Native()
        dp = mode.deploy(lab, 1450)
        try:
            return [measure(lab, dp) for _ in range(a.repeats)]
        finally:
            mode.teardown(lab, dp)


def part_tail(a) -> None:
    """test_breadth_lab.py's ordering: native's sockperf ping-pong P99 over 2 s, host to host,
    against the 10 ms-a-frame sleeve's P50 (at least 20 ms by construction)."""
    p99 = _native_repeats(a, _pingpong_p99)
    print("tail: native sockperf.pingpong host-host, 2 s each")
    print(row("native P99 (µs, one way)", p99))
    print(margin("native P99 (µs)", p99, 20_000, below=True))


def part_loaded(a) -> None:
    """test_under_load_lab.py's ordering: native's loaded P99 (load.bounceback's loaded phase,
    3 s beside one TCP stream each way), host to host, against the 5 ms-a-frame sleeve's (its
    every round trip at least 20 ms by construction)."""
    p99 = _native_repeats(a, _loaded_p99)
    print("loaded: native load.bounceback loaded phase host-host, 3 s each")
    print(row("native loaded P99 (µs, round trip)", p99))
    print(margin("native loaded P99 (µs)", p99, 20_000, below=True))


FLOOR_MODES = ["fastdp", "sleeve", "sleeve-seg", "sleeve-basic", "sleeve-l3", "sleeve-crypto",
               "sleeve-crypto-chacha", "wireguard", "wireguard-go"]


def part_floors(a) -> None:
    """The throughput floors of the sleeve, WireGuard, command-mode, confine and quick-run
    tests: each mode's iperf3 TCP container to container at 1500 (the placement and MTU that
    carry least), and the slowest of all against the highest floor (100 Mbit/s)."""
    modes = a.modes.split(",") if a.modes else list(FLOOR_MODES)
    while True:
        try:
            t = tput(harness_run(a, modes, ["container-container"]))
            break
        except UnsupportedError as e:     # the default list leaves out what this kernel lacks
            gone = [m for m in modes if str(e).startswith(f"mode {m}:")]
            if a.modes or not gone:
                raise
            print(f"floors: {e}: left out")
            modes.remove(gone[0])
    print("floors: iperf3.tcp container-container, MTU 1500, 1 s")
    for m in modes:
        v = [x for (mm, _, _), x in t.items() if mm == m]
        if v:
            print(row(f"{m} (Mbit/s)", v, scale=1e6))
    slowest = min(modes, key=lambda m: min([x for (mm, _, _), x in t.items() if mm == m] or [math.inf]))
    vals = [x / 1e6 for (mm, _, _), x in t.items() if mm == slowest]
    print(margin(f"slowest mode {slowest} (Mbit/s)", vals, 100, below=False))
    print(margin(f"slowest mode {slowest} (Mbit/s)", vals, 50, below=False))


SSH_BAR = 3.0      # the test's bound on SSH's ratio over the lab's, both ways


def part_ssh(a) -> None:
    """test_testbed_ssh.py: the quick scenario's paired ratios (fastdp/native, sleeve/fastdp,
    per repeat, both placements) on the lab and over SSH, one run each; the test's statistic,
    the median of 12 ratios (6 repeats) over SSH over that on the lab, estimated by resampling
    6 repeats of each run, and from disjoint blocks of 6."""
    from test_testbed_ssh import SshLab
    quick = [str(ROOT / "scenarios" / "quick.toml"), "--underlay-mtu", "1500", "--tests", "iperf3.tcp",
             "--repeats", str(a.repeats), "--duration", "1", "-q"]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obmargin-"))
    knob = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
    was = knob.read_text().strip() if knob.exists() else None
    sl = SshLab(tmp)
    try:
        if was is not None:
            knob.write_text("0")
        inv = sl.inventory(extra={0: "manage_underlay = true\n", 1: "manage_underlay = true\n"})
        for s in sl.lab.sides:
            s.host.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
        runs = []
        for env, more in ((None, []), (sl.env(), ["--inventory", inv])):
            if env is not None:
                sl.bare()
            p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *quick, *more, "--results", a.results],
                               cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
            if p.returncode != 0:
                sys.exit(f"run failed ({p.returncode}): {p.stderr[-2000:]}")
            runs.append(pathlib.Path(p.stdout.splitlines()[0]))
            print(f"run: {runs[-1]}")
        left = sl.leftovers()
    finally:
        if was is not None:
            knob.write_text(was)
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if left:
        print(f"  LEFT BEHIND over SSH: {left}")
    sides = [_by_repeat(results.read_records(r)) for r in runs]
    print("ssh: quick scenario, iperf3.tcp, MTU 1500, 1 s, lab run then SSH run")
    rng = random.Random(1)
    for name in ("fastdp/native", "sleeve/fastdp"):
        lab, ssh = (s[name] for s in sides)
        print(row(f"{name} on the lab", [x for v in lab.values() for x in v]))
        print(row(f"{name} over SSH", [x for v in ssh.values() for x in v]))
        full = _med(ssh, list(ssh)) / _med(lab, list(lab))
        boot = []
        for _ in range(a.resamples):
            boot.append(_med(ssh, rng.choices(list(ssh), k=6)) / _med(lab, rng.choices(list(lab), k=6)))
        blocks = [sorted(s)[i:i + 6] for s in (lab, ssh) for i in range(0, len(s) - 5, 6)]
        nb = len(lab) // 6
        disjoint = [_med(ssh, bs) / _med(lab, bl) for bl in blocks[:nb] for bs in blocks[nb:]]
        out = {b: sum(1 for x in boot if not 1 / b <= x <= b) for b in (2, SSH_BAR)}
        print(f"  {name}: ssh/lab of all repeats {full:.3f}; resampled ({len(boot)}): min {min(boot):.3f} "
              f"median {statistics.median(boot):.3f} max {max(boot):.3f}, beyond 2x {out[2]}, "
              f"beyond {SSH_BAR:g}x {out[SSH_BAR]}")
        if disjoint:
            print(f"  {name}: disjoint blocks of 6 ({len(disjoint)} pairings): min {min(disjoint):.3f} "
                  f"max {max(disjoint):.3f}")
        worst = max(boot, key=lambda x: abs(math.log(x)))
        logs = [math.log(x) for x in boot]
        mu, sd = statistics.mean(logs), statistics.stdev(logs)
        print(f"  {name}: bar {SSH_BAR:g}x both ways; worst resampled {worst:.3f}: log distance "
              f"{math.log(SSH_BAR) / abs(math.log(worst)):.3g} × the worst; resampled logs mean {mu:.3f} "
              f"sd {sd:.3f} (within the runs; the runs' own offset comes on top)")


def _by_repeat(recs: list[dict]) -> dict[str, dict[int, list[float]]]:
    """The test's paired ratios, grouped by repeat (both placements of a repeat together)."""
    out: dict[str, dict[int, list[float]]] = {}
    from test_testbed_ssh import _paired_ratios
    for rep in sorted({int(r["repeat"]) for r in recs}):
        for name, v in _paired_ratios([r for r in recs if int(r["repeat"]) == rep]).items():
            out.setdefault(name, {})[rep] = v
    return out


def _med(by_rep: dict[int, list[float]], reps: list[int]) -> float:
    return statistics.median([x for r in reps for x in by_rep[r]])


PARTS = {"compare": part_compare, "flannel": part_flannel, "tail": part_tail, "loaded": part_loaded,
         "floors": part_floors, "ssh": part_ssh}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", required=True, choices=sorted(PARTS))
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--hogs", type=int, default=2, help="busy loops beside the run (default 2)")
    p.add_argument("--calibrate-ns", type=int, default=5_000_000, help="compare: the slowed arm's cost per frame")
    p.add_argument("--modes", default="", help="floors: the modes to measure (default: every floor test's)")
    p.add_argument("--resamples", type=int, default=20000, help="ssh: resampled statistics")
    p.add_argument("--results", default=str(ROOT / "results"))
    a = p.parse_args(argv)
    print(f"{a.only}: {a.repeats} repeats beside {a.hogs} busy loops; CPU {cpu_model()}, "
          f"{os.cpu_count()} CPUs")
    try:
        with hogs(a.hogs):
            PARTS[a.only](a)
    except HarnessError as e:
        print(f"verdict_margins: --only {a.only}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
