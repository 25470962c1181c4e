"""iperf 2 (2.1.8, Debian's `iperf`): latency under a working load, and the connection rate.

The server (`iperf -s -p PORT`) serves client after client until it is stopped. Two tests:

load.bounceback — a TCP request/response probe measured twice against one server, in
phases (tools/base.py Phase): `idle`, then `loaded`, where the same probe runs beside
`--bounceback-congest=bidir,N` (N TCP streams each way on the same path, the working
load, as flent's RRUL puts load both ways). The probe sends one request every
millisecond (`--bounceback=1 --bounceback-period=0.001`); the server answers each at
once. iperf 2.1.8 has one write size (-l) for the probe and its working load, and the
load is only as heavy as its writes: on the lab's native veth, two streams each way moved
0.48 Gbit/s with the default 100-byte writes, 3.1 Gbit/s with 1,400 and 20.5 Gbit/s (the
veth's TCP limit) with 16 KiB. So the probe is a 16 KiB request and its 16 KiB reply
(`-l 16K`), in both phases alike. iperf prints, with -e, the count and avg/min/max/stdev of the round trips (ms, three
decimals) and their histogram, always in 100 µs bins whatever `--histograms` asks (that
option sizes the write histograms only):

    [  1] 0.0000-2.0047 sec   354 KBytes  1.45 Mbits/sec    1815=0.050/0.020/9.171/0.292 ms    0 ...
    [  1] 0.0000-2.0047 sec BB8(f)-PDF: bin(w=100us):cnt(1815)=1:1774,2:13,3:17,... (5.00/95.00/...)

So the percentiles are read off the histogram as the upper edge of the bin that holds
them (bin k ends at k × 100 µs): an upper bound, 100 µs coarse. That hides nothing a
loaded path adds (milliseconds) but makes an idle path's percentiles all "≤ 100 µs"; the
mean, min and max keep iperf's microsecond resolution. The working load's throughput is
the sum of its streams' full-duplex totals (`[FDn]` lines, both directions), recorded beside
the latency so a load that did not fill the path shows.

iperf.crr — TCP connections opened and closed back to back (`--connect-only=N`), timed
each by iperf (`(ct=0.36 ms)` per connection, 10 µs resolution) and as a whole by two
`date +%s.%N` stamps around the one iperf run (iperf prints no elapsed time in this
mode). iperf's connect-only does the three-way handshake and the close, without a
request/response on the connection (netperf's TCP_CRR does one; Debian main has no netperf).

Quirks seen in real output (iperf 2.1.8):
- iperf exits 0 when the server refuses ("tcp connect failed: Connection refused" on
  stderr) and still prints "connected with" lines; failure is read from the output.
- `--connect-only=0` (forever) ignores both -t and SIGTERM: the count is always bounded.
"""

from __future__ import annotations

import math
import re
import shlex

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.tools.base import Phase, PhaseOutput, PhasedTool, TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, last_line, whole_seconds

DEFAULT_PORT = 5001
PROBE_PERIOD_S = 0.001           # one request a millisecond
PROBE_BYTES = "16K"              # the probe's request and reply, and the working load's writes
MAX_LOAD_STREAMS = 16            # each way: 2 × 16 TCP streams on two CPUs is plenty
CONNECTS_PER_SECOND = 2000       # connects asked per second of the case's duration
# Each closed connection holds its client port in TIME_WAIT for a minute (per network
# namespace): 28,232 ephemeral ports leave room for four cases to one server within a minute.
MAX_CONNECTS = 6000

# metric suffix → percentile
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
_UNITS = {"bits/sec": 1.0, "Kbits/sec": 1e3, "Mbits/sec": 1e6, "Gbits/sec": 1e9}
_BB = re.compile(r"sec\s.*?\s(\d+)=([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_PDF = re.compile(r"BB8\(f\)-PDF: bin\(w=(\d+)(us|ms)\):cnt\((\d+)\)=([\d:,]+)")
_FD = re.compile(r"^\[FD\s*\d+\].*?([\d.]+) ((?:[KMG])?bits/sec)", re.MULTILINE)
_CT = re.compile(r"\(ct=([\d.]+) ms\)")
_CT_TOTAL = re.compile(r"\(tot/err\) = (\d+)/(\d+)")
_STAMP = re.compile(r"^(\d{9,}\.\d+)$", re.MULTILINE)
_CONNECT_FAILED = "tcp connect failed"


def histogram_percentile(bins: dict[int, int], width_us: float, pct: float) -> float:
    """The upper edge (k × width) of the first bin k whose cumulative count reaches `pct`
    of all counts; ValueError for an empty histogram."""
    total = sum(bins.values())
    if total <= 0:
        raise ValueError("empty histogram")
    need = pct / 100 * total
    seen = 0
    for k in sorted(bins):
        seen += bins[k]
        if seen >= need - 1e-9:
            return k * width_us
    return max(bins) * width_us


def nearest_rank(values: list[float], pct: float) -> float:
    """The nearest-rank percentile of `values` (one of them, never interpolated)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    return xs[max(0, math.ceil(pct / 100 * len(xs)) - 1)]


def problem(stdout: str, stderr: str, returncode: int | None) -> str | None:
    """Why an iperf 2 client run failed before printing its figures, or None."""
    if returncode is None:
        return exit_reason("iperf", None)
    refused = next((ln.strip() for ln in stderr.splitlines() if _CONNECT_FAILED in ln), None)
    if returncode != 0:
        return exit_reason("iperf", returncode, refused or stderr)
    return f"iperf: {refused}" if refused else None


def load_rate(stdout: str) -> float | None:
    """The working load's bits/s: the sum of every [FDn] line (None: no such line)."""
    rates = [float(v) * _UNITS[u] for v, u in _FD.findall(stdout)]
    return sum(rates) if rates else None


def bounceback(stdout: str, stderr: str, returncode: int | None) -> tuple[dict[str, float], str | None]:
    """One bounceback run → ({"avg", "min", "max", "p50", …} in µs [+ "load_bps"], None), or
    ({}, the reason)."""
    why = problem(stdout, stderr, returncode)
    if why:
        return {}, why
    bb = list(_BB.finditer(stdout))
    pdf = list(_PDF.finditer(stdout))
    if not bb or not pdf:
        return {}, f"iperf printed no bounceback summary{': ' + last_line(stdout) if stdout.strip() else ''}"
    count, avg, lo, hi, _sd = bb[-1].groups()
    if int(count) == 0:
        return {}, "iperf: no bounceback completed"
    width, unit, _cnt, cells = pdf[-1].groups()
    width_us = float(width) * (1000 if unit == "ms" else 1)
    bins = {int(k): int(v) for k, v in (c.split(":") for c in cells.strip(",").split(","))}
    out = {"avg": float(avg) * 1000, "min": float(lo) * 1000, "max": float(hi) * 1000}
    for name, pct in PERCENTILES.items():
        out[name] = histogram_percentile(bins, width_us, pct)
    rate = load_rate(stdout)
    if rate is not None:
        out["load_bps"] = rate
    return out, None


class Iperf2(Tool):
    binary = "iperf"
    package = "iperf"
    version_argv = ("iperf", "--version")
    version_re = r"iperf version (\S+)"
    needs_server = True
    server_exits = False      # serves until stopped

    def server_argv(self, spec: TestSpec) -> list[str]:
        argv = ["iperf", "-s", "-p", str(spec.port or DEFAULT_PORT)]
        if spec.bind_addr:
            argv += ["-B", spec.bind_addr]
        return argv

    def _client(self, spec: TestSpec) -> list[str]:
        return ["iperf", "-c", spec.server_addr, "-p", str(spec.port or DEFAULT_PORT)]


class LoadBounceback(PhasedTool, Iperf2):
    phased_as = "idle, then loaded"
    """load.bounceback: the probe idle, then beside N TCP streams each way (module doc)."""

    name = "load.bounceback"
    latency = True
    parallel = True
    max_streams = MAX_LOAD_STREAMS

    def _probe(self, spec: TestSpec) -> list[str]:
        return self._client(spec) + ["--bounceback=1", f"--bounceback-period={PROBE_PERIOD_S}",
                                     "-l", PROBE_BYTES, "-t", str(whole_seconds(spec.duration)), "-e"]

    def phases(self, spec: TestSpec) -> list[Phase]:
        if not 1 <= spec.streams <= self.max_streams:
            raise HarnessError(f"{self.name}: {spec.streams} working-load streams; 1 to {self.max_streams} each way")
        limit = whole_seconds(spec.duration) + 15
        return [Phase("idle", self._probe(spec), limit),
                Phase("loaded", self._probe(spec) + [f"--bounceback-congest=bidir,{spec.streams}"], limit)]

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        """One probe run alone: its latency as `latency_*` (the idle figures' shape)."""
        got, why = bounceback(stdout, stderr, returncode)
        if why:
            return failed(why)
        return ToolResult(samples=latency_samples("latency", got), ok=True)

    def parse_phases(self, outputs: list[PhaseOutput]) -> ToolResult:
        """idle then loaded; the first phase that failed names the reason (a runner may stop
        after it), then a phase missing."""
        figures = {}
        for o in outputs:
            got, why = bounceback(o.stdout, o.stderr, o.returncode)
            if why and o.name == "loaded" and o.returncode is None:
                why += (" (a round trip longer than iperf's read timeout, half of -t, stalls the probe "
                        "until then: a longer duration allows slower ones)")
            if why:
                return failed(f"{o.name}: {why}")
            figures[o.name] = got
        if set(figures) != {"idle", "loaded"} or len(outputs) != 2:
            return failed(f"{self.name}: expected phases idle and loaded, got {', '.join(o.name for o in outputs) or 'none'}")
        idle, loaded = figures["idle"], figures["loaded"]
        if "load_bps" not in loaded:
            return failed("loaded: iperf printed no working-load totals ([FD] lines)")
        samples = latency_samples("lat_idle", idle) + latency_samples("lat_loaded", loaded)
        samples += [Sample(f"lat_added_{p}_us", loaded[p] - idle[p], "us") for p in PERCENTILES]
        samples.append(Sample("load_throughput_bps", loaded["load_bps"], "bps"))
        return ToolResult(samples=samples, ok=True)


def latency_samples(prefix: str, got: dict[str, float]) -> list[Sample]:
    """`{prefix}_us` (the mean), `_min_us`, `_max_us` and `_p50_us` … `_p999_us`."""
    out = [Sample(f"{prefix}_us", got["avg"], "us"), Sample(f"{prefix}_min_us", got["min"], "us"),
           Sample(f"{prefix}_max_us", got["max"], "us")]
    return out + [Sample(f"{prefix}_{p}_us", got[p], "us") for p in PERCENTILES]


def connects(duration: float) -> int:
    """How many connections a case of `duration` seconds opens."""
    return min(MAX_CONNECTS, CONNECTS_PER_SECOND * whole_seconds(duration))


class IperfCrr(Iperf2):
    """iperf.crr: connections per second, connect-time P50/P99 and failures (module doc)."""

    name = "iperf.crr"
    latency = True

    def client_argv(self, spec: TestSpec) -> list[str]:
        iperf = self._client(spec) + [f"--connect-only={connects(spec.duration)}", "-e"]
        script = f"date +%s.%N; {shlex.join(iperf)}; rc=$?; date +%s.%N; exit $rc"
        return ["sh", "-c", script]

    def timeout(self, spec: TestSpec) -> float:
        # a slow path connects in milliseconds: 5 ms each is far beyond any mode seen
        return connects(spec.duration) * 0.005 + 15

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        cts = [float(v) * 1000 for v in _CT.findall(stdout)]
        refused = sum(1 for ln in stderr.splitlines() if _CONNECT_FAILED in ln)
        total = _CT_TOTAL.search(stdout)
        fails = max(refused, int(total[2]) if total else 0)
        stamps = [float(v) for v in _STAMP.findall(stdout)]
        if returncode is None or returncode != 0:
            return failed(exit_reason("iperf", returncode, stderr))
        if not cts:
            first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
            return failed(f"iperf: no connection made{': ' + first if first else ''}",
                          [Sample("conn_failed", float(fails), "count")])
        if len(stamps) != 2 or stamps[1] <= stamps[0]:
            return failed("iperf.crr: the start and end stamps around iperf are missing")
        seconds = stamps[1] - stamps[0]
        return ToolResult(samples=[
            Sample("conn_per_s", len(cts) / seconds, "1/s"),
            Sample("connect_us", sum(cts) / len(cts), "us"),
            Sample("connect_p50_us", nearest_rank(cts, 50), "us"),
            Sample("connect_p99_us", nearest_rank(cts, 99), "us"),
            Sample("conn_failed", float(fails), "count"),
        ], ok=True)
