"""irtt (0.9.0, Debian's `irtt`): isochronous UDP round trips with their tail and loss.

The server (`irtt server -b ADDR:PORT -i 0`) serves until stopped; `-i 0` lifts its default
10 ms floor on the client's interval (without it a 1 ms client is told "server increased
interval from 1ms to 10ms"). The client (`irtt client -i 1ms -d Ns -Q -o - ADDR:PORT`) sends
one 60-byte packet every millisecond for N seconds, waits for the last replies, and writes
one JSON document to stdout: `stats` (rtt, send_delay, receive_delay, ipdv_round_trip as
{n, min, max, mean, median, …} in ns; packets_sent, packets_received,
packet_loss_percent) and `round_trips`, each with its `lost` flag and `delay.rtt` (ns).

irtt.udp gives round trips (not halved as qperf's and sockperf's latency is):
`rtt_us` (mean), `rtt_min_us`, `rtt_max_us`, `rtt_p50_us`, `rtt_p90_us`, `rtt_p99_us`,
`rtt_p999_us` (nearest rank over every round trip that came back), `ipdv_us` (mean
round-trip delay variation, RFC 5481) and `probe_loss_pct`. One-way delays are left out:
they need the two hosts' clocks in step, which only the lab (one kernel) has.

Quirks seen (irtt 0.9.0): no server gives "Error: read udp4 …: connection refused" on
stderr and exit 1 after the open timeouts; a killed client prints nothing at all.
"""

from __future__ import annotations

import json
import math

from harness.core.samples import Sample
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, whole_seconds

DEFAULT_PORT = 2112
INTERVAL = "1ms"
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def nearest_rank(sorted_values: list[float], pct: float) -> float:
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


class IrttUdp(Tool):
    name = "irtt.udp"
    latency = True
    binary = "irtt"
    package = "irtt"
    version_argv = ("irtt", "version")
    version_re = r"irtt version: (\S+)"
    needs_server = True
    server_exits = False
    listen = "udp"            # the server binds a UDP socket

    def server_argv(self, spec: TestSpec) -> list[str]:
        return ["irtt", "server", "-b", f"{spec.bind_addr or spec.server_addr}:{spec.port or DEFAULT_PORT}",
                "-i", "0"]

    def client_argv(self, spec: TestSpec) -> list[str]:
        return ["irtt", "client", "-i", INTERVAL, "-d", f"{whole_seconds(spec.duration)}s", "-Q", "-o", "-",
                f"{spec.server_addr}:{spec.port or DEFAULT_PORT}"]

    def timeout(self, spec: TestSpec) -> float:
        # open timeouts (1+2+4+8 s) to nowhere, or the wait for the last replies (≤ 4 s)
        return whole_seconds(spec.duration) + 20

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        got, why = round_trips(stdout, stderr, returncode)
        if why:
            return failed(why, [Sample("probe_loss_pct", 100.0, "pct")] if got.get("sent") else [])
        samples = [Sample("rtt_us", got["mean"], "us"), Sample("rtt_min_us", got["min"], "us"),
                   Sample("rtt_max_us", got["max"], "us")]
        samples += [Sample(f"rtt_{p}_us", got[p], "us") for p in PERCENTILES]
        if "ipdv" in got:
            samples.append(Sample("ipdv_us", got["ipdv"], "us"))
        samples.append(Sample("probe_loss_pct", got["loss"], "pct"))
        return ToolResult(samples=samples, ok=True)


def round_trips(stdout: str, stderr: str, returncode: int | None) -> tuple[dict[str, float], str | None]:
    """One irtt client's JSON → ({"mean", "min", "max", "p50" … "p999", "loss", "sent"[, "ipdv"]}
    in µs, None), or (what it could read, why it failed)."""
    if returncode != 0:
        error = next((ln.strip() for ln in stderr.splitlines() if ln.startswith("Error")), stderr)
        return {}, exit_reason("irtt", returncode, error)
    try:
        doc = json.loads(stdout)
        stats = doc["stats"]
        rtts = sorted(float(rt["delay"]["rtt"]) / 1000 for rt in doc["round_trips"]
                      if rt.get("lost") == "false" and "rtt" in rt.get("delay", {}))
        sent, loss = int(stats["packets_sent"]), float(stats["packet_loss_percent"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        return {}, f"irtt printed no results ({type(e).__name__}: {e})"
    if sent == 0 or not rtts:
        return {"sent": sent}, f"irtt: no round trip came back ({sent} sent)"
    rtt = stats["rtt"]
    got = {"mean": float(rtt["mean"]) / 1000, "min": float(rtt["min"]) / 1000, "max": float(rtt["max"]) / 1000,
           "loss": loss, "sent": sent}
    got.update({p: nearest_rank(rtts, pct) for p, pct in PERCENTILES.items()})
    ipdv = stats.get("ipdv_round_trip") or {}
    if ipdv.get("n"):
        got["ipdv"] = float(ipdv["mean"]) / 1000
    return got, None
