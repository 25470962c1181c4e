"""A testbed's hosts forward only between its overlay bridge and its tunnel, for real.

Host h0 gets a network that is none of the testbed's: a veth into a namespace the test
owns (198.18.210.0/24), routed from h0. The container behind h0's bridge, and the peer
host through the tunnel, send to it; an nft counter in that namespace counts what
arrives. Without the testbed's table the kernel forwards all of it (forwarding is on for
the bridge, and the kernel checks only the input device); with it, nothing arrives,
while the far network still answers h0 itself and iperf3 still crosses the overlay.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys

import pytest
from test_testbed_ssh import ssh_lab  # noqa: F401 - the fixture

from conftest import needs_root
from harness import modes
from harness.bed import Options
from harness.net import confine
from harness.run.endpoints import endpoints
from harness.run.procs import wait_listening

pytestmark = [needs_root(), pytest.mark.lab]
FAR_NET, FAR_GW, FAR = "198.18.210.0/24", "198.18.210.1", "198.18.210.2"
SENT = 10
COUNT_RULES = """
table inet obcount {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    ip saddr 198.18.64.0/24 counter
    ip saddr 198.18.210.1 counter
  }
}
"""


@contextlib.contextmanager
def far_network(host_netns: str):
    """A namespace of the test's, reached from `host_netns` over the veth fwx0 (198.18.210.1
    there, .2 inside); yields a function that reads (packets from the overlay's
    198.18.64.0/24, packets from h0's own 198.18.210.1) as counted on arrival."""
    ns = "obfw" + secrets.token_hex(3)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for argv in (["ip", "link", "add", "fwx0", "netns", host_netns, "type", "veth", "peer", "name", "fwx1",
                      "netns", ns],
                     ["ip", "-n", host_netns, "addr", "add", f"{FAR_GW}/24", "dev", "fwx0"],
                     ["ip", "-n", host_netns, "link", "set", "fwx0", "up"],
                     ["ip", "-n", ns, "addr", "add", f"{FAR}/24", "dev", "fwx1"],
                     ["ip", "-n", ns, "link", "set", "fwx1", "up"],
                     ["ip", "-n", ns, "link", "set", "lo", "up"]):
            subprocess.run(argv, check=True, capture_output=True)
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=COUNT_RULES, text=True, check=True)

        def counts() -> tuple[int, int]:
            out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "table", "inet", "obcount"],
                                 capture_output=True, text=True, check=True).stdout
            found = [e["counter"]["packets"] for item in json.loads(out)["nftables"] if "rule" in item
                     for e in item["rule"]["expr"] if "counter" in e]
            return found[0], found[1]
        yield counts
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)   # takes the veth pair along


def _iperf_bps(tb, dp) -> float:
    c, s = endpoints(tb, dp, "container-container")
    srv = s.host.start(["iperf3", "-s", "-1", "-p", "5201"])
    try:
        why = wait_listening(s.host, 5201, srv)
        assert why is None, why
        out = c.host.run(["iperf3", "-c", s.addr, "-p", "5201", "-t", "1", "-J"], timeout=30, check=False)
    finally:
        srv.stop()
    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]


def _tunnel_route(mode, dp, s1) -> list[str] | None:
    """How the peer host sends towards the far network through the tunnel: L2 modes via
    h0's bridge address (the frame crosses the tunnel to h0's bridge), the sleeve's L3
    mode into its TUN. None for WireGuard: its allowed IPs keep such a packet on the peer."""
    if getattr(mode, "l3", False):
        return ["dev", s1.dev("sv0"), "src", s1.overlay_ip]
    if dp.kind in ("fastdp", "sleeve"):
        return ["via", "198.18.64.1", "dev", s1.bridge]
    return None


def check_confined(tb, name: str, host_netns: str) -> None:
    """Deploy `name` on `tb`, try to reach the far network from h0's container and through
    the tunnel from h1, and count what arrives. (False-failure probability below 1e-9: the
    positive control needs a first ping reply within 1 s on a bare veth, and the iperf3
    floor of 10 Mbit/s is 100 times below the slowest mode deployed here.)"""
    mode = modes.get(name)
    mode.check(tb)
    dp = mode.deploy(tb, mode.overlay_mtu(1500, "auto"))
    s0, s1 = tb.sides
    route = _tunnel_route(mode, dp, s1)
    try:
        with far_network(host_netns) as counts:
            # The far network is there: h0 itself reaches it (not forwarded).
            s0.host.run(["ping", "-c", "3", "-i", "0.1", "-W", "1", FAR])
            s0.container.run(["ip", "route", "replace", FAR_NET, "via", s0.overlay_ip])
            s0.container.run(["ping", "-c", str(SENT), "-i", "0.05", "-W", "1", FAR], check=False)
            if route:
                s1.host.run(["ip", "route", "replace", FAR_NET, *route])
                s1.host.run(["ping", "-c", str(SENT), "-i", "0.05", "-W", "1", FAR], check=False)
            forwarded, own = counts()
            assert own >= 3, "the far network does not answer h0 itself: the test is broken"
            assert forwarded == 0, f"{name}: {forwarded} packets forwarded from the overlay to another network"
        bps = _iperf_bps(tb, dp)
        assert bps > 10e6, f"{name}: iperf3 across the overlay at only {bps / 1e6:.1f} Mbit/s"
    finally:
        s1.host.run(["ip", "route", "del", FAR_NET], check=False)
        s0.container.run(["ip", "route", "del", FAR_NET], check=False)
        mode.teardown(tb, dp)


L3_OR_L2 = ["fastdp", "sleeve", "sleeve-l3", "wireguard-go"]


@pytest.mark.parametrize("name", L3_OR_L2)
def test_the_lab_forwards_nothing_from_the_overlay_to_another_network(lab, name):
    check_confined(lab, name, lab.sides[0].host.netns)
    assert confine.tables(lab.sides[0].host) == [f"{lab.prefix}-h0"]


def test_the_lab_without_nft_fails_preflight_naming_nftables(lab, tmp_path, monkeypatch):
    from harness.core.errors import HarnessError
    from harness.run import scenario as S
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/sbin", "/usr/bin"):
        for name in os.listdir(d):
            if name != "nft" and not (bin_dir / name).exists():
                os.symlink(f"{d}/{name}", bin_dir / name)
    monkeypatch.setenv("PATH", str(bin_dir))
    sc = S.build({"matrix": {"modes": ["fastdp"], "tests": ["iperf3.tcp"]}})
    with pytest.raises(HarnessError, match=r"^nft not found on this machine: apt-get install -y nftables$"):
        lab.preflight(sc)


def test_a_table_that_cannot_be_made_is_an_error_naming_nftables():
    """The table cannot be made (no nft on the host): a clear error, never a testbed that
    forwards unconfined."""
    from harness.core.errors import HarnessError
    from harness.hosts.base import Completed

    class NoNft:
        name = "h9"

        def run(self, argv, **kw):
            return Completed(list(argv), 127, "", "nft: not found")
    with pytest.raises(HarnessError, match=r"h9: cannot make the nftables table ob12ab-h0 .*apt-get install -y "
                                           r"nftables"):
        confine.confine(NoNft(), "ob12ab-h0", "br0")


# --------------------------------------------------------------------------- over SSH

def test_a_testbed_over_ssh_forwards_nothing_from_the_overlay_to_another_network(ssh_lab, monkeypatch):
    """The issue's experiment on two sshd hosts (each a lab namespace running sshd): a host
    that forwards nothing between its interfaces (ip_forward 0, as a real host), the
    testbed built over SSH, every mode that forwards tried in turn."""
    from harness.run import scenario as S
    from harness.testbeds import registry as backends
    from harness.bed import Options
    ssh_lab.bare()
    monkeypatch.setenv("HOME", str(ssh_lab.tmp))
    for s in ssh_lab.lab.sides:
        s.host.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
    sc = S.build({"matrix": {"modes": L3_OR_L2}, "testbed": {"backend": "ssh", "inventory": ssh_lab.inventory()}})
    tb = backends.open_testbed(sc, Options())
    try:
        tb.preflight(sc)
        tb.build(1500, None)
        for name in L3_OR_L2:
            check_confined(tb, name, ssh_lab.lab.sides[0].host.netns)
        assert confine.tables(ssh_lab.lab.sides[0].host) == [f"{ssh_lab.lab.prefix}-h0", f"{tb.prefix}-h0"]
    finally:
        tb.teardown()
    assert confine.tables(ssh_lab.lab.sides[0].host) == [f"{ssh_lab.lab.prefix}-h0"]
    assert ssh_lab.leftovers() == []


# An orchestrator killed once its testbed is built: the tables stay on the hosts.
KILLED = """
import os, signal, sys
from harness.bed import Options
from harness.testbeds import registry as backends
from harness.run import scenario as S
sc = S.build({"matrix": {"modes": ["fastdp"]}, "testbed": {"backend": "ssh", "inventory": sys.argv[1]}})
tb = backends.open_testbed(sc, Options())
tb.preflight(sc)
tb.build(1500, None)
print(tb.prefix, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_down_inventory_removes_a_killed_runs_tables_and_nothing_else(ssh_lab):
    ssh_lab.bare()
    inv = ssh_lab.inventory()
    root = pathlib.Path(__file__).resolve().parents[2]
    killed = subprocess.run([sys.executable, "-c", KILLED, inv], cwd=root, capture_output=True, text=True,
                            env=ssh_lab.env(), timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    prefix = killed.stdout.strip()
    hosts = [s.host for s in ssh_lab.lab.sides]
    for i, h in enumerate(hosts):
        assert f"{prefix}-h{i}" in confine.tables(h)
    # a table of another's, like the testbed's in name but not its prefix: down leaves it
    bystander = f"ob{(int(prefix[2:], 16) ^ 1):04x}-h0"
    hosts[0].run(["nft", "add", "table", "inet", bystander])
    try:
        d = subprocess.run([sys.executable, "-m", "harness.cli", "down", "--inventory", inv], cwd=root,
                           capture_output=True, text=True, env=ssh_lab.env(), timeout=120)
        assert d.returncode == 0, d.stderr
        for i, h in enumerate(hosts):
            assert f"h{i}: nft table inet {prefix}-h{i}" in d.stdout, d.stdout
            assert confine.tables(h) == [f"{ssh_lab.lab.prefix}-h{i}"] + ([bystander] if i == 0 else [])
    finally:
        hosts[0].run(["nft", "delete", "table", "inet", bystander], check=False)
    assert ssh_lab.leftovers() == []
