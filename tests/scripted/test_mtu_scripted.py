"""The MTU doctor through run/mtu.py on scripted hosts (the lab's names and a remote
testbed's), with a small kernel answering their commands: devices and their MTUs, VXLAN
refusing an MTU over its underlay device's less its 50 bytes, DF pings and DF UDP probes
that cross up to the path's MTU and meet "fragmentation needed" above it.

What a defect would break: a mode that does not deploy must give rows with an `error` and
the reason, not stop the doctor; the modes and MTUs after it are still probed; the
testbed's refusal to raise its underlay is said beside the kernel's; the command's exit
code is 1. No root, no waits."""

from __future__ import annotations

import json
import re

import pytest
from captures import capture
from scripted_fixtures import forbid_sleep, lab_testbed, remote_testbed

from harness import modes
from harness.analysis import mtu as verdicts
from harness.core.errors import HarnessError
from harness.hosts.base import Completed
from harness.hosts.scripted import ScriptedHost, ScriptedProcess
from harness.run import mtu
from harness.tools import mtu_udp

VXLAN = 50
REFUSAL = "h1: the underlay eth1 is not overlaybench's to change (MTU 1500; manage_underlay = false)"


class Kernel:
    """Every host's and container's devices, as the commands a run sends set them."""

    def __init__(self, tb):
        self.tb = tb
        self.mtus: dict[tuple[str, str], int] = {}        # (host name, device) → MTU
        self.udp_cap: int | None = None                   # UDP datagrams bigger than this vanish
        self.raises: BaseException | None = None          # what `ip link add` raises (a transport lost)
        for s in tb.sides:
            self.mtus[(s.host.name, s.underlay_dev)] = tb.underlay_mtu
            self.mtus[(s.container.name, s.container_dev)] = 1500
            for h in (s.host, s.container):
                h.allow(lambda argv: True, answer=self.answer(h, s))

    def underlay(self) -> int:
        return self.tb.underlay_mtu

    def path(self, addr: str) -> int:
        """What crosses to `addr`: the underlay, or the overlay (its devices, VXLAN's room)."""
        if any(addr == s.underlay_ip for s in self.tb.sides):
            return self.underlay()
        return min(self.underlay() - VXLAN, *(self.mtus[(s.container.name, s.container_dev)] for s in self.tb.sides))

    def answer(self, h: ScriptedHost, s):
        def ok(stdout="", rc=0, stderr=""):
            return Completed([], rc, stdout, stderr)

        def run(argv, input):
            line = " ".join(argv)
            if argv[:3] == ["ip", "link", "add"] and "vxlan" in argv:
                if self.raises:
                    raise self.raises
                return ok()
            if argv[:3] == ["ip", "link", "set"] and argv[4:5] == ["mtu"]:
                dev, m = argv[3], int(argv[5])
                if dev.endswith("vx0") and m > self.underlay() - VXLAN:
                    return ok(rc=2, stderr="RTNETLINK answers: Invalid argument\n")
                self.mtus[(h.name, dev)] = m
                return ok()
            if argv[:3] == ["bridge", "fdb", "show"]:
                return ok(f"00:00:00:00:00:00 dst {self.tb.peer(s).underlay_ip} self permanent\n")
            if argv[:4] == ["ip", "-o", "route", "get"]:
                dev = s.container_dev if h is s.container else s.underlay_dev
                return ok(f"{argv[4]} dev {dev} src 198.18.0.9 uid 0\n    cache\n")
            if argv[:5] == ["ip", "-o", "link", "show", "dev"]:
                return ok(f"7: {argv[5]}: <BROADCAST,MULTICAST,UP> mtu {self.mtus[(h.name, argv[5])]} qdisc noqueue\n")
            if argv[:3] == ["ping", "-M", "do"]:
                size, addr = int(argv[4]) + 28, argv[-1]
                if size <= self.path(addr):
                    return ok(f"{size - 8} bytes from {addr}\n\n1 packets transmitted, 1 received, 0% packet loss\n")
                return ok(f"From 198.18.64.1 icmp_seq=1 Frag needed and DF set (mtu = {self.path(addr)})\n\n"
                          f"1 packets transmitted, 0 received, +1 errors, 100% packet loss\n", rc=1)
            if argv[:2] == ["python3", "-"]:
                assert input == mtu_udp.SENDER
                addr, size = argv[2], int(argv[4])
                if self.udp_cap and size > self.udp_cap:
                    return ok(f"lost {size}\n")
                if size <= self.path(addr):
                    return ok(f"passed {size}\n")
                return ok(f"frag-needed {size} mtu={self.path(addr)} from=198.18.64.1\n")
            if argv[:3] == ["sh", "-c", 'command -v "$1"']:
                return ok(f"/usr/bin/{argv[-1]}\n")
            if argv[:2] == ["ss", "-Hlun"] or argv[:2] == ["ss", "-Hltn"]:
                return ok("UNCONN 0 0 *:1 *:*\n")
            if argv[:2] == ["iperf3", "-c"]:
                doc = json.loads(capture("iperf3_tcp_1")[0])
                doc["start"]["tcp_mss_default"] = self.path(argv[2]) - 52
                return ok(json.dumps(doc))
            if argv == ["nstat", "-asz"]:
                return ok("#kernel\nIpFragCreates 0 0.0\n")
            if re.fullmatch(r"ip (link (del \S+|set .* master .* up)|neigh flush dev \S+|route flush cache)|"
                            r"bridge fdb append .*|ping -M dont .*", line):
                return ok()
            raise AssertionError(f"{h.name}: the fake kernel has no answer for {line}")

        return run


def started(h: ScriptedHost, n: int = 40):
    """Servers (the UDP receiver, iperf3 -s) started as asked, each running until stopped
    (up to `n`: more than a test here starts on one host)."""
    for _ in range(n):
        h.expect_start(lambda argv: argv[:2] in (["python3", "-c"], ["iperf3", "-s"]),
                       answer=lambda argv, _input: ScriptedProcess.runs())


@pytest.fixture(params=["lab", "remote"])
def tb(request, tmp_path, monkeypatch):
    forbid_sleep(monkeypatch)
    # the remote testbed's NIC is not its own to raise: the underlay stays at 1500
    bed = (lab_testbed(tmp_path, refuse={1550: REFUSAL}) if request.param == "lab"
           else remote_testbed(tmp_path, refuse={1550: REFUSAL}))
    bed.kernel = Kernel(bed)
    for h in bed.hosts:
        started(h)
    return bed


def test_a_mode_that_does_not_deploy_is_a_row_and_the_others_are_still_probed(tb):
    rows = mtu.measure(tb, [modes.get("fastdp"), modes.get("native")], [1500, "auto"], ("container-container",),
                       None, 1500)
    judged = verdicts.judge_all(rows)
    got = [(p["mode"], p["overlay_mtu"], p["src"], p["verdict"]) for p in judged]
    assert got == [("fastdp", 1500, "h0", "error"), ("fastdp", 1500, "h1", "error"),
                   ("fastdp", 1450, "h0", "ok"), ("fastdp", 1450, "h1", "ok"),
                   ("native", 1500, "h0", "ok"), ("native", 1500, "h1", "ok")], verdicts.format_table(judged)
    for p in judged[:2]:
        assert p["why"].startswith("did not deploy at overlay MTU 1500: h0: `ip link set ")
        assert "RTNETLINK answers: Invalid argument" in p["why"] and REFUSAL in p["why"]
        assert p["fix_mtu"] == 1450 and "--overlay-mtu 1450" in p["fix"]
        assert p["datapath"] is None and p.get("path_mtu") is None
    for p in judged[2:4]:
        assert p["path_mtu"] == p["udp_path_mtu"] == p["tcp_mtu"] == 1450
        assert p["udp_probes"] == 1             # the device MTU, 1450, crossed: nothing to bisect
    # the underlay was asked up for the moment, refused, and set back; nothing else
    assert tb.events == ["set_underlay 1550", "set_underlay 1500"]
    assert not verdicts.all_ok(judged)


def test_a_udp_path_that_differs_from_icmp_is_its_own_verdict(tb):
    """The UDP probe lands on what the far end received, not on what ping says."""
    tb.kernel.udp_cap = 1400
    judged = verdicts.judge_all(mtu.measure(tb, [modes.get("fastdp")], ["auto"], ("container-container",), None,
                                            1500))
    for p in judged:
        assert (p["path_mtu"], p["udp_path_mtu"], p["udp_discovery"]) == (1450, 1400, "lost")
        assert p["verdict"] == verdicts.UDP_DIFFERS and p["fix_mtu"] == 1400


def test_the_command_exits_1_when_a_mode_did_not_deploy(tb, monkeypatch, capsys):
    from harness.cli import main
    rows = mtu.measure(tb, [modes.get("fastdp")], [1500], ("container-container",), None, 1500)
    monkeypatch.setattr(mtu, "doctor", lambda *a, **kw: rows)
    assert main(["mtu", "--modes", "fastdp", "--overlay-mtu", "1500", "-q", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["ok"] and {p["verdict"] for p in doc["paths"]} == {"error"}


def test_a_lost_connection_is_not_a_row(tb):
    """A transport that failed is no verdict on the mode: the doctor stops."""
    from harness.core.errors import SshConnectionLost
    tb.kernel.raises = SshConnectionLost("h0: connection lost")
    with pytest.raises(HarnessError, match="connection lost"):
        mtu.measure(tb, [modes.get("fastdp")], ["auto"], ("container-container",), None, 1500)
