"""iperf3 -J: TCP and UDP throughput, and the UDP packet rate of small datagrams.

The server serves one test and exits (`-s -1`). The client prints one JSON document;
iperf3 puts a failure in its top-level "error" (and 3.12 then still exits 0 when the
connection is refused, so the exit code alone proves nothing).

With more than one stream (-P N) every test also reports each stream's received goodput
(`stream_throughput_bps`, one sample per stream in end.streams order) and Jain's
fairness index over them (`fairness_jain`).
"""

from __future__ import annotations

import abc
import json
import logging
import math
from typing import Any

from harness.core.samples import Sample
from harness.tools.base import PER_STREAM_METRIC, TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, jain, udp_payload, whole_seconds

log = logging.getLogger(__name__)

DEFAULT_PORT = 5201
MIN_UDP_PAYLOAD = 4 + 4 + 8        # iperf3's own header: seconds, microseconds, 64-bit counter
MAX_UDP_PAYLOAD = 65535 - 8 - 20   # iperf 3.12 src/iperf.h MIN_/MAX_UDP_BLOCKSIZE


class Iperf3(Tool):
    """Common argv and failure handling; subclasses read the protocol's figures."""

    binary = "iperf3"
    package = "iperf3"
    version_argv = ("iperf3", "--version")
    version_re = r"iperf (\S+)"
    needs_server = True
    server_exits = True       # -s -1: the server ends with the test, no need to stop it

    def server_argv(self, spec: TestSpec) -> list[str]:
        argv = ["iperf3", "-s", "-1", "-p", str(spec.port or DEFAULT_PORT)]
        if spec.bind_addr:
            argv += ["-B", spec.bind_addr]
        return argv

    def client_argv(self, spec: TestSpec) -> list[str]:
        if spec.streams < 1:
            raise ValueError(f"streams must be at least 1, not {spec.streams}")
        argv = ["iperf3", "-c", spec.server_addr, "-p", str(spec.port or DEFAULT_PORT),
                "-t", str(whole_seconds(spec.duration)), "-J", "-P", str(spec.streams)]
        if spec.reverse:
            argv.append("-R")
        return argv + self.protocol_args(spec)

    def protocol_args(self, spec: TestSpec) -> list[str]:
        return []

    def timeout(self, spec: TestSpec) -> float:
        # connect, parameter exchange and the final results exchange come on top of -t
        return whole_seconds(spec.duration) + 15

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        doc, reason = load(stdout, stderr, returncode)
        if doc is None:
            log.debug("iperf3 failed: %s", reason)
            return failed(reason)
        try:
            end = doc["end"]
            samples = self.figures(end) + stream_samples(self.stream_rates(end)) + cpu_samples(end)
        except (KeyError, TypeError, ValueError) as e:
            return failed(f"iperf3 JSON lacks the summary ({type(e).__name__}: {e})")
        return ToolResult(samples=samples, ok=True, intervals=intervals(doc))

    @abc.abstractmethod
    def figures(self, end: dict[str, Any]) -> list[Sample]:
        """The protocol's samples from the JSON's "end" object."""

    @abc.abstractmethod
    def stream_rates(self, end: dict[str, Any]) -> list[float]:
        """Each stream's received goodput in bits/s, in end.streams order."""


class Iperf3Tcp(Iperf3):
    name = "iperf3.tcp"

    def figures(self, end: dict[str, Any]) -> list[Sample]:
        return tcp_samples(end)

    def stream_rates(self, end: dict[str, Any]) -> list[float]:
        return tcp_stream_rates(end)


class Iperf3Udp(Iperf3):
    """UDP at `rate` ("0": as fast as it goes), datagrams sized to the path MTU."""

    name = "iperf3.udp"

    def __init__(self, rate: str = "0"):
        self.rate = rate

    def protocol_args(self, spec: TestSpec) -> list[str]:
        return ["-u", "-b", self.rate, "-l", str(udp_payload(spec.overlay_mtu, spec.server_addr))]

    def figures(self, end: dict[str, Any]) -> list[Sample]:
        return udp_samples(end)

    def stream_rates(self, end: dict[str, Any]) -> list[float]:
        return udp_stream_rates(end)


class Iperf3Pps(Iperf3):
    """UDP packet rate: datagrams of `size` payload bytes as fast as they go (no rate cap).

    `payload` tells the scenario the size, which must fit the overlay (size + 28 <= MTU);
    what counts is how many packets per second the receiver got, so small sizes measure
    the per-packet cost of a datapath rather than its bandwidth.
    """

    def __init__(self, size: int):
        if not MIN_UDP_PAYLOAD <= size <= MAX_UDP_PAYLOAD:
            raise ValueError(f"iperf3 UDP payload must be {MIN_UDP_PAYLOAD}..{MAX_UDP_PAYLOAD} "
                             f"bytes, not {size}")
        self.name = f"iperf3.pps{size}"
        self.payload = size

    def protocol_args(self, spec: TestSpec) -> list[str]:
        return ["-u", "-b", "0", "-l", str(self.payload)]

    def figures(self, end: dict[str, Any]) -> list[Sample]:
        return [pps_sample(end)] + udp_samples(end)

    def stream_rates(self, end: dict[str, Any]) -> list[float]:
        return udp_stream_rates(end)


def load(stdout: str, stderr: str, returncode: int | None) -> tuple[dict | None, str]:
    """The JSON document, or None and why the run failed."""
    try:
        doc = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError as e:
        doc = None
        garbled = f"iperf3 output is not valid JSON ({e.msg} at line {e.lineno})"
    else:
        garbled = "iperf3 printed no output"
    if isinstance(doc, dict) and doc.get("error"):
        suffix = " (timed out)" if returncode is None else ""
        return None, f"iperf3: {doc['error']}{suffix}"
    if returncode != 0:
        return None, exit_reason("iperf3", returncode, stderr)
    if not isinstance(doc, dict):
        return None, garbled
    return doc, ""


def tcp_samples(end: dict[str, Any]) -> list[Sample]:
    """Goodput as the receiver counted it; retransmits as the sender's kernel counted them."""
    samples = [Sample("throughput_bps", float(end["sum_received"]["bits_per_second"]), "bps")]
    retransmits = end["sum_sent"].get("retransmits")  # absent where the OS does not tell
    if retransmits is not None:
        samples.append(Sample("retransmits", float(retransmits), "count"))
    return samples


def udp_samples(end: dict[str, Any]) -> list[Sample]:
    """Goodput, jitter and loss at the receiver.

    iperf3 >= 3.11 reports the receiver in end.sum_received. Older ones have only
    end.sum, whose bytes and bits_per_second are the SENDER's while jitter and loss come
    from the receiver; there the goodput is the sender's rate less the lost share.
    """
    rx = end.get("sum_received")
    if rx is not None:
        bps = float(rx["bits_per_second"])
    else:
        rx = end["sum"]
        bps = sent_less_lost(rx)
    return [
        Sample("throughput_bps", bps, "bps"),
        Sample("jitter_ms", float(rx["jitter_ms"]), "ms"),
        Sample("loss_pct", float(rx["lost_percent"]), "pct"),
    ]


def sent_less_lost(udp: dict[str, Any]) -> float:
    """Received goodput from a UDP summary whose bits_per_second is the SENDER's rate:
    that rate less the share the receiver found lost (every datagram has one size)."""
    return float(udp["bits_per_second"]) * (1 - float(udp["lost_percent"]) / 100)


def pps_sample(end: dict[str, Any]) -> Sample:
    """Datagrams the receiver got per second.

    iperf3 3.12's end.sum_received has `packets` (the receiver's highest sequence number
    seen, i.e. what was sent up to the last arrival, not what arrived) and `lost_packets`
    (the gaps below it), so arrivals are packets - lost_packets; that times the datagram
    size is exactly its `bytes`. Over its `seconds` (the receiver's test time) that is
    the rate. Before 3.11 there is only end.sum, with the sender's packet count and the
    receiver's losses: the same difference over its seconds.
    """
    rx = end.get("sum_received")
    if rx is None or "packets" not in rx:
        rx = end["sum"]
    got = int(rx["packets"]) - int(rx["lost_packets"])
    seconds = float(rx["seconds"])
    if got < 0 or seconds <= 0:
        raise ValueError(f"{got} packets received in {seconds} s")
    return Sample("pps", got / seconds, "pps")


def tcp_stream_rates(end: dict[str, Any]) -> list[float]:
    """end.streams[i].receiver.bits_per_second: what each stream's receiver counted."""
    return [float(s["receiver"]["bits_per_second"]) for s in end.get("streams") or []]


def udp_stream_rates(end: dict[str, Any]) -> list[float]:
    """end.streams[i].udp has no receiver's rate, in 3.12 as in 3.1.3: its bytes and
    bits_per_second are the sender's (over the sender's seconds, shared by all streams),
    its lost_percent the receiver's. So each is the sender's rate less the lost share,
    as for end.sum before 3.11; their sum differs from sum_received's rate by the
    sender's and receiver's test times."""
    return [sent_less_lost(s["udp"]) for s in end.get("streams") or []]


def stream_samples(rates: list[float]) -> list[Sample]:
    """One stream_throughput_bps per stream and Jain's index over them; nothing for one
    stream, and no index when no stream got anything (it is undefined there)."""
    if len(rates) < 2:
        return []
    samples = [Sample(PER_STREAM_METRIC, r, "bps") for r in rates]
    fairness = jain(rates)
    if not math.isnan(fairness):
        samples.append(Sample("fairness_jain", fairness, "ratio"))
    return samples


def cpu_samples(end: dict[str, Any]) -> list[Sample]:
    """iperf3's own CPU use of the client (host) and server (remote) process."""
    cpu = end.get("cpu_utilization_percent")
    if not cpu:
        return []
    return [Sample("cpu_client_pct", float(cpu["host_total"]), "pct"),
            Sample("cpu_server_pct", float(cpu["remote_total"]), "pct")]


def intervals(doc: dict[str, Any]) -> list[tuple[float, float]]:
    """(end seconds, bits/s) per reporting interval, as the client saw it (sender side
    unless -R), skipping --omit intervals."""
    out = []
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        if s.get("omitted") or "end" not in s or "bits_per_second" not in s:
            continue
        out.append((float(s["end"]), float(s["bits_per_second"])))
    return out
