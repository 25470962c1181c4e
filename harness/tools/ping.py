"""ping -f (iputils): round-trip latency and loss, as seed 003 measured it.

`ping -f -c COUNT -q -s SIZE -w DEADLINE ADDR` prints only the summary:

    1000 packets transmitted, 1000 received, 0% packet loss, time 8ms
    rtt min/avg/max/mdev = 0.004/0.004/0.380/0.011 ms, ipg/ewma 0.008/0.005 ms

ping prints milliseconds with three decimals, so every figure has a 1 µs resolution.
"""

from __future__ import annotations

import logging
import re

from harness.core.samples import Sample
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.common import exit_reason, failed, last_line, whole_seconds

log = logging.getLogger(__name__)

_COUNTS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_RTT = re.compile(r"(?:rtt|round-trip) min/avg/max(?:/mdev)? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms")


class PingFlood(Tool):
    """Flood ping (needs root): COUNT echo requests of SIZE bytes, at most `duration` s."""

    name = "ping.flood"
    latency = True
    binary = "ping"
    package = "iputils-ping"
    version_argv = ("ping", "-V")
    version_re = r"iputils[- ](\S+)"
    needs_server = False

    def __init__(self, count: int = 1000, size: int = 56):
        self.count = count
        self.size = size

    def client_argv(self, spec: TestSpec) -> list[str]:
        return ["ping", "-f", "-c", str(self.count), "-q", "-s", str(self.size),
                "-w", str(whole_seconds(spec.duration)), spec.server_addr]

    def timeout(self, spec: TestSpec) -> float:
        return whole_seconds(spec.duration) + 5

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        """Latency from the rtt line, loss from the counts.

        ping exits 1 when any reply is missing; with a summary that is still a result
        (loss_pct > 0). With no reply at all there is no latency: the result is a
        failure ("100% packet loss") that still carries loss_pct = 100, the one true
        figure of that run. Exit 2 or no summary (unknown host, no route) is a plain
        failure with ping's message.
        """
        if returncode is None:
            return failed(exit_reason("ping", None, stderr))
        counts = _COUNTS.search(stdout)
        if not counts or returncode not in (0, 1):
            reason = exit_reason("ping", returncode, stderr or last_line(stdout))
            log.debug("ping failed: %s", reason)
            return failed(reason)
        sent, received = int(counts[1]), int(counts[2])
        if sent == 0:
            return failed("ping sent no packets")
        loss = Sample("loss_pct", 100.0 * (sent - received) / sent, "pct")
        if received == 0:
            return failed(f"no reply: 100% packet loss ({sent} sent)", [loss])
        rtt = _RTT.search(stdout)
        if not rtt:
            return failed("ping printed no rtt summary", [loss])
        return ToolResult(samples=rtt_samples(rtt) + [loss], ok=True)


def rtt_samples(rtt: re.Match[str]) -> list[Sample]:
    """min/avg/max/mdev in ms → latency_us (= avg) and latency_{min,max,mdev}_us."""
    names = ["latency_min_us", "latency_us", "latency_max_us", "latency_mdev_us"]
    return [Sample(name, float(ms) * 1000, "us")
            for name, ms in zip(names, rtt.groups()) if ms is not None]
