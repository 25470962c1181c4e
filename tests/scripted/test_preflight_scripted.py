"""Preflight on ScriptedHosts: what the one round trip asks, and the one line per problem
(with what to install) that each answer gives. test_preflight.py runs the same script on
a real SSH host; these need no root."""

from __future__ import annotations

import platform

import pytest

from harness.bed import Options
from harness.core.errors import HarnessError
from harness.hosts.scripted import ScriptedHost
from harness.run import scenario as S
from harness.sleeve import build as sleeve_build
from harness.testbeds import preflight
from harness.testbeds.inventory import HostSpec
from harness.testbeds.remote import RemoteTestbed

OTHER_ARCH = "riscv64" if platform.machine() != "riscv64" else "x86_64"
VXLAN = "ip link add obchk$$ type vxlan id 1 dstport 0 && ip link del obchk$$"


def sc(*modes, tests=("iperf3.tcp", "qperf.tcp_lat")):
    return S.build({"matrix": {"modes": list(modes), "tests": list(tests)}})


def checks(tools: str, features: str, build: str, *probes: str) -> list[str]:
    return ["env", f"TOOLS={tools}", f"FEATURES={features}", f"BUILD_NEEDS={build}",
            f"MISSING_SH={sleeve_build.MISSING_SH}", *probes, "sh", "-c", preflight.SCRIPT]


@pytest.fixture(autouse=True)
def no_prebuilt(monkeypatch):
    monkeypatch.delenv("OVERLAYBENCH_SLEEVE_BINARY", raising=False)


def test_one_round_trip_asks_for_the_scenarios_tools_features_and_sleeve_build():
    h = ScriptedHost("h0")
    h.expect(checks("ip tc ss bridge ethtool ping sysctl nft iperf3 qperf", "vxlan tun",
                    "make gcc pkg-config /usr/include/openssl/evp.h",
                    f"probe_vxlan={VXLAN}", "probe_tun=test -c /dev/net/tun"))
    assert preflight.host_problems(h, "h0", sc("native", "fastdp", "sleeve")) == []
    h.assert_all_used()


def test_a_scenario_without_the_sleeve_asks_nothing_of_its_build():
    h = ScriptedHost("h0")
    h.expect(checks("ip tc ss bridge ethtool ping sysctl nft qperf", "vxlan", "", f"probe_vxlan={VXLAN}"))
    assert preflight.host_problems(h, "h0", sc("native", "fastdp", tests=("qperf.tcp_lat",))) == []
    h.assert_all_used()


def test_every_problem_is_one_line_naming_the_host_and_the_fix():
    h = ScriptedHost("h1")
    h.expect(lambda argv: argv[0] == "env", stdout=(
        "notroot alice\nnonetns\nnonetnsadd\nnosysctl\nmissing iperf3\nmissing nft\nmissing ping\n"
        "nofeature vxlan RTNETLINK answers: Operation not supported\nnofeature tun\n"))
    assert preflight.host_problems(h, "h1", sc("fastdp", "sleeve")) == [
        "h1: runs commands as alice, not root: log in as root or set sudo = true (with passwordless sudo)",
        "h1: `ip netns` does not work (iproute2 missing or not root): apt-get install -y iproute2",
        "h1: cannot make network namespaces (`ip netns add` mounts: it needs CAP_SYS_ADMIN; in a container, "
        "--cap-add SYS_ADMIN)",
        "h1: /proc/sys is read-only (per-device sysctls such as forwarding cannot be set; in a container, "
        "--security-opt systempaths=unconfined)",
        "h1: kernel vxlan unsupported here (RTNETLINK answers: Operation not supported)",
        "h1: kernel tun unsupported here (probe failed)",
        "h1: iperf3, nft, ping not found: apt-get install -y iperf3 iputils-ping nftables",
    ]


def test_a_host_that_can_neither_build_the_sleeve_nor_run_this_machines_binary_is_one_line():
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env", stdout=f"arch {OTHER_ARCH}\nnobuild gcc /usr/include/openssl/evp.h\n")
    assert preflight.host_problems(h, "h0", sc("auto")) == [
        f"h0: cannot build the sleeve (missing gcc, /usr/include/openssl/evp.h) and this machine's sleeve binary "
        f"is for {platform.machine()}, the host is {OTHER_ARCH}: apt-get install -y gcc libssl-dev"]


def test_a_host_of_this_machines_architecture_takes_its_binary_instead_of_a_build():
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env", stdout=f"arch {platform.machine()}\nnobuild gcc make\n")
    assert preflight.host_problems(h, "h0", sc("sleeve")) == []


def test_a_prebuilt_binary_for_another_architecture_is_refused(tmp_path, monkeypatch):
    binary = tmp_path / "sleeve"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("OVERLAYBENCH_SLEEVE_BINARY", str(binary))
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env", stdout=f"arch {OTHER_ARCH}\n")
    assert preflight.host_problems(h, "h0", sc("sleeve")) == [
        f"h0: OVERLAYBENCH_SLEEVE_BINARY is shipped instead of a build, and it is for {platform.machine()}, "
        f"the host is {OTHER_ARCH}: unset it to build the sleeve there"]


@pytest.mark.parametrize("returncode, stderr, why", [
    (127, "env: 'sh': No such file or directory\n", "env: 'sh': No such file or directory"),
    (None, "", "no output"),
])
def test_checks_that_did_not_run_are_a_line_too(returncode, stderr, why):
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env", returncode=returncode, stderr=stderr)
    assert preflight.host_problems(h, "h0", sc("native")) == [f"h0: the checks did not run ({why})"]


def test_a_remote_testbed_reports_every_hosts_problems_at_once_before_making_anything():
    """Both hosts are asked (their commands carrying the testbed's mark), every problem
    is in the one error, and nothing else is run on either host."""
    specs = tuple(HostSpec(name=f"node{i}", address=f"10.1.0.{i + 1}", underlay_interface="eth1",
                           underlay_address=f"10.1.0.{i + 1}") for i in (0, 1))
    raw = (ScriptedHost("node0"), ScriptedHost("node1"))
    tb = RemoteTestbed(specs, raw, Options())
    mark = ["env", f"OVERLAYBENCH_PREFIX={tb.prefix}"]
    try:
        raw[0].expect(lambda argv: argv[:3] == [*mark, "env"] and argv[-3:-1] == ["sh", "-c"],
                      stdout="notroot alice\n")
        raw[0].expect([*mark, "ip", "-o", "-4", "route", "show", "root", "198.18.64.0/24"])
        raw[1].expect(lambda argv: argv[:3] == [*mark, "env"], stdout="missing iperf3\n")
        raw[1].expect([*mark, "ip", "-o", "-4", "route", "show", "root", "198.18.64.0/24"],
                      stdout="198.18.64.0/24 dev docker7 proto kernel scope link src 198.18.64.1 \n")
        with pytest.raises(HarnessError) as e:
            tb.preflight(sc("native"))
        assert str(e.value).split("; ") == [
            "node0: runs commands as alice, not root: log in as root or set sudo = true (with passwordless sudo)",
            "node1: iperf3 not found: apt-get install -y iperf3",
            "node1: the overlay's 198.18.64.0/24 is already routed there (dev docker7): another testbed, "
            "or a network of its own, uses it",
        ]
        for h in raw:
            h.assert_all_used()
    finally:
        tb.teardown()


def test_a_host_without_sockperf_is_one_line_with_its_package():
    h = ScriptedHost("h1")
    h.expect(checks("ip tc ss bridge ethtool ping sysctl nft sockperf iperf3", "", ""),
             stdout="missing sockperf\n")
    assert preflight.host_problems(h, "h1", sc("native", tests=("sockperf.pingpong", "iperf3.pps64"))) == [
        "h1: sockperf not found: apt-get install -y sockperf"]
    h.assert_all_used()


def test_blast_is_shipped_so_a_remote_host_needs_no_compiler_only_this_machines_architecture():
    import platform
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env" and "TOOLS=ip tc ss bridge ethtool ping sysctl nft" in argv,
             stdout=f"arch {platform.machine()}\n")
    assert preflight.host_problems(h, "h0", sc("native", tests=("udp.pps64", "udp.ndr64"))) == []
    h.assert_all_used()
    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env", stdout=f"arch {other}\n")
    assert preflight.host_problems(h, "h0", sc("native", tests=("udp.pps64",))) == [
        f"h0: udp.pps64 run blast, which is built on this machine ({platform.machine()}) and shipped; h0 is "
        f"{other}: leave these tests out there"]
    h.assert_all_used()
