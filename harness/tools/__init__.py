"""The measurement tools by test name (TOOLS: iperf3.tcp, iperf3.udp, the iperf3 packet-rate tests,
qperf's bandwidth and latency, sockperf's ping-pong, ping.flood; latency under load (iperf 2's
bounceback, irtt's and sockperf's probes beside iperf 2's load);
blast's packet rates udp.ppsN and packet.ppsN and rate searches udp.ndrN, udp.pdrN)."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.tools.base import TestSpec, Tool, ToolResult
from harness.tools.blast import BlastPps
from harness.tools.iperf2 import IperfCrr, LoadBounceback
from harness.tools.irtt import IrttUdp
from harness.tools.load_irtt import LoadIrtt
from harness.tools.load_sockperf import LoadSockperf
from harness.tools.ndr import BlastSearch
from harness.tools.iperf3 import Iperf3Pps, Iperf3Tcp, Iperf3Udp
from harness.tools.ping import PingFlood
from harness.tools.qperf import Qperf
from harness.tools.sockperf import SockperfPingPong
from harness.tools.sweep import Iperf3Sweep

__all__ = ["TOOLS", "get", "Sample", "TestSpec", "Tool", "ToolResult"]

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Iperf3Tcp(),
        Iperf3Udp(),
        Iperf3Pps(64),
        Iperf3Pps(256),
        Iperf3Pps(1400),
        Qperf("tcp_bw"),
        Qperf("tcp_lat"),
        Qperf("udp_bw"),
        Qperf("udp_lat"),
        SockperfPingPong("udp"),
        SockperfPingPong("tcp"),
        PingFlood(),
        LoadBounceback(),
        LoadIrtt(),
        LoadSockperf(),
        IperfCrr(),
        Iperf3Sweep(64),
        Iperf3Sweep(1400),
        IrttUdp(),
        BlastPps(64),
        BlastPps(1400),
        BlastPps(64, packet=True),
        BlastPps(1400, packet=True),
        BlastSearch("ndr", 64),
        BlastSearch("pdr", 64),
    )
}


def get(name: str) -> Tool:
    """The tool for test `name`; HarnessError naming the known tests otherwise."""
    try:
        return TOOLS[name]
    except KeyError as e:
        raise HarnessError(f"unknown test {name!r} (known: {', '.join(TOOLS)})") from e
