"""The test-name registry in harness.tools."""

from __future__ import annotations

import pytest

from harness import tools
from harness.core.errors import HarnessError
from harness.tools.base import Tool

NAMES = ["iperf3.tcp", "iperf3.udp", "iperf3.pps64", "iperf3.pps256", "iperf3.pps1400", "qperf.tcp_bw", "qperf.tcp_lat", "qperf.udp_bw",
         "qperf.udp_lat", "sockperf.pingpong", "sockperf.pingpong_tcp", "ping.flood", "load.bounceback", "load.irtt",
         "load.sockperf", "iperf.crr", "iperf3.udp_sweep64", "iperf3.udp_sweep1400", "irtt.udp", "udp.pps64", "udp.pps1400", "packet.pps64", "packet.pps1400",
         "udp.ndr64", "udp.pdr64"]


def test_registry_holds_the_design_names():
    assert list(tools.TOOLS) == NAMES
    for name, tool in tools.TOOLS.items():
        assert isinstance(tool, Tool)
        assert tool.name == name
        assert tool.binary == ("irtt" if name == "load.irtt" else "sockperf" if name == "load.sockperf" else "iperf" if name.startswith("load.") else "blast" if name.startswith(("udp.", "packet."))
                               else name.split(".")[0])


def test_get_known_and_unknown():
    assert tools.get("qperf.udp_bw") is tools.TOOLS["qperf.udp_bw"]
    with pytest.raises(HarnessError) as e:
        tools.get("iperf3.sctp")
    assert str(e.value) == f"unknown test 'iperf3.sctp' (known: {', '.join(NAMES)})"


def test_servers_that_do_not_end_by_themselves_are_marked():
    assert tools.get("iperf3.tcp").server_exits is True
    assert tools.get("qperf.tcp_lat").server_exits is False


def test_run_help_names_every_test():
    """`run --help` lists the tests without importing the registry (for its speed): the list
    must not drift from it."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--help"], capture_output=True,
                         text=True, check=True).stdout
    listed = "".join(out.split("--tests T,..")[-1].split("--streams")[0].split("(default")[0].split())
    assert listed.split(",") == NAMES
