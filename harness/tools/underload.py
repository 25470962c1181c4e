"""Latency under a working load: a fine probe idle, then beside iperf 2's load on the same path.

Each probe here times every round trip to the microsecond or better, so its percentiles
are round trips, not the upper edges of iperf 2's 100 µs bounceback bins (tools/iperf2.py,
load.bounceback). A case runs in two phases against one server:

- `idle`: the probe alone for the case's duration;
- `loaded`: the same probe beside iperf 2's working load, N TCP streams each way
  (`iperf -c … --full-duplex -P N -l 16K`, as flent's RRUL loads both directions), started
  first and running a second longer than the probe so that every probe meets it.

The probes (LoadProbe's subclasses): load.irtt (tools/load_irtt.py, irtt's isochronous 1 ms
probe) and load.sockperf (tools/load_sockperf.py, sockperf's ping-pong every 100 µs).

The server is one shell leading one process group: iperf 2's server (`iperf -s`, bounded by
`-t`) started in the background and waited for until it listens (its own pid on the port,
as `ss -p` shows: not whatever else may hold it), then the probe's server beside it. So the
case routine's wait for the probe's UDP port also means iperf's TCP one is ready. Stopping
the group (SIGTERM) ends the shell only once both servers are gone: iperf 2 takes over a
second to leave on SIGTERM, holding its port, so the shell kills it outright and waits for
it, and the next case's server on the same port never finds it taken.

The loaded phase's shell prints iperf's report, then one line `=== PROBE exit R iperf exit
W`, then the probe's output (held until iperf is done so the two never interleave).

Figures (µs, round trips): `rtt_idle_us` / `rtt_loaded_us` (means), their `_min`, `_max`,
`_p50`, `_p90`, `_p99` and `_p999`, `rtt_added_pNN_us` (loaded minus idle),
`load_throughput_bps` (the working load's both directions, iperf's [FDn] lines) and
`probe_loss_pct` (the loaded phase's probes lost).
"""

from __future__ import annotations

import abc
import re
import shlex

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.tools.base import Phase, PhaseOutput, PhasedTool, TestSpec, ToolResult
from harness.tools.common import failed, whole_seconds
from harness.tools.iperf2 import MAX_LOAD_STREAMS, PROBE_BYTES, load_rate, problem

MARK = re.compile(r"^=== (\w+) exit (\d+) iperf exit (\d+)$", re.MULTILINE)
LOAD_LEAD_S = 1          # the working load runs this much longer than the probe
READY_POLL_S = 0.05      # the server's shell asks `ss` this often whether iperf listens
PERCENTILES = ("p50", "p90", "p99", "p999")   # the percentiles every probe reports

# A probe's figures: {"mean", "min", "max", "p50" … "p999", "loss"} in µs (loss in %)
Figures = dict[str, float]


class LoadProbe(PhasedTool):
    """A fine probe idle, then beside iperf 2's working load; a subclass names the probe."""

    phased_as = "idle, then loaded"
    also_needs = ("iperf",)       # the working load
    listen = "udp"
    latency = True
    parallel = True
    max_streams = MAX_LOAD_STREAMS
    default_port: int             # the probe server's port where the run gives none

    @abc.abstractmethod
    def probe_server(self, spec: TestSpec) -> list[str]:
        """The probe's server, serving until it is stopped."""

    @abc.abstractmethod
    def probe(self, spec: TestSpec) -> list[str]:
        """The probe's client, running for the case's duration."""

    @abc.abstractmethod
    def round_trips(self, stdout: str, stderr: str, returncode: int | None) -> tuple[Figures, str | None]:
        """The probe's output → (its Figures, None), or (what it could read, why it failed)."""

    def load_port(self, spec: TestSpec) -> int:
        """iperf 2's port: the probe's data port (harness/run/procs.py: the one after its own)."""
        return spec.data_port or (spec.port or self.default_port) + 1

    def server_argv(self, spec: TestSpec) -> list[str]:
        port = self.load_port(spec)
        bound = int(self.timeout(spec)) + 10
        script = (f"iperf -s -p {port} -t {bound} >/dev/null & p=$!; "
                  f"until ss -Hltnp 'sport = :{port}' | grep -q \"pid=$p,\"; do "
                  f"kill -0 $p 2>/dev/null || {{ echo 'iperf -s exited before listening' >&2; exit 1; }}; "
                  f"sleep {READY_POLL_S}; done; "
                  f"{shlex.join(self.probe_server(spec))} & q=$!; "
                  f"trap 'kill -KILL $p $q 2>/dev/null; wait $p $q; exit 143' TERM INT; "
                  f"wait $q; r=$?; kill -KILL $p 2>/dev/null; wait $p; exit $r")
        return ["sh", "-c", script]

    def probe_limit(self, spec: TestSpec) -> float:
        """The idle phase's hard limit: the probe's duration and its own timeouts."""
        return whole_seconds(spec.duration) + 20

    def phases(self, spec: TestSpec) -> list[Phase]:
        if not 1 <= spec.streams <= self.max_streams:
            raise HarnessError(f"{self.name}: {spec.streams} working-load streams; 1 to {self.max_streams} each way")
        seconds = whole_seconds(spec.duration)
        load = ["iperf", "-c", spec.server_addr, "-p", str(self.load_port(spec)), "--full-duplex",
                "-P", str(spec.streams), "-l", PROBE_BYTES, "-t", str(seconds + LOAD_LEAD_S), "-e"]
        script = (f"{shlex.join(load)} & p=$!; j=$({shlex.join(self.probe(spec))}); r=$?; wait $p; w=$?; "
                  f"echo \"=== {self.binary} exit $r iperf exit $w\"; printf '%s\\n' \"$j\"")
        limit = self.probe_limit(spec)
        return [Phase("idle", self.probe(spec), limit), Phase("loaded", ["sh", "-c", script], limit + LOAD_LEAD_S)]

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        raise HarnessError(f"{self.name} runs in phases: parse_phases reads them")

    def parse_phases(self, outputs: list[PhaseOutput]) -> ToolResult:
        if [o.name for o in outputs] != ["idle", "loaded"]:
            return failed(f"{self.name}: expected phases idle and loaded, got "
                          f"{', '.join(o.name for o in outputs) or 'none'}")
        idle_out, loaded_out = outputs
        idle, why = self.round_trips(idle_out.stdout, idle_out.stderr, idle_out.returncode)
        if why:
            return failed(f"idle: {why}")
        loaded, load_bps, why = self.split_loaded(loaded_out)
        if why:
            return failed(f"loaded: {why}")
        samples = phase_samples("idle", idle) + phase_samples("loaded", loaded)
        samples += [Sample(f"rtt_added_{p}_us", loaded[p] - idle[p], "us") for p in PERCENTILES]
        samples += [Sample("load_throughput_bps", load_bps, "bps"), Sample("probe_loss_pct", loaded["loss"], "pct")]
        return ToolResult(samples=samples, ok=True)

    def split_loaded(self, o: PhaseOutput) -> tuple[Figures, float, str | None]:
        """The loaded phase's output → (the probe's figures, the load's bits/s, None), or why not."""
        if o.returncode is None:
            return {}, 0.0, f"killed at its timeout{': ' + o.stderr.strip()[-200:] if o.stderr.strip() else ''}"
        mark = MARK.search(o.stdout)
        if mark is None or mark.group(1) != self.binary:
            return {}, 0.0, f"the probe's shell printed no result line (exit {o.returncode}): {o.stderr.strip()[-200:]}"
        iperf_out, probe_out = o.stdout[:mark.start()], o.stdout[mark.end():]
        got, why = self.round_trips(probe_out, o.stderr, int(mark.group(2)))
        if why:
            return {}, 0.0, why
        why = problem(iperf_out, o.stderr, int(mark.group(3)))
        if why:
            return {}, 0.0, f"the working load: {why}"
        bps = load_rate(iperf_out)
        if bps is None:
            return {}, 0.0, "iperf printed no working-load totals ([FD] lines)"
        return got, bps, None


def phase_samples(phase: str, got: Figures) -> list[Sample]:
    """`rtt_{phase}_us` (the mean), `_min_us`, `_max_us` and `_p50_us` … `_p999_us`."""
    out = [Sample(f"rtt_{phase}_us", got["mean"], "us"), Sample(f"rtt_{phase}_min_us", got["min"], "us"),
           Sample(f"rtt_{phase}_max_us", got["max"], "us")]
    return out + [Sample(f"rtt_{phase}_{p}_us", got[p], "us") for p in PERCENTILES]
