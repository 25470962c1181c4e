"""The commands a mode's deploy and teardown send each host, as steps the scripted mode
tests (test_native_fastdp_auto_scripted.py, test_sleeve_scripted.py, test_wireguard_scripted.py) put
together.

Each such test runs twice, through the `tb` fixture: on the lab's names (devices
unprefixed: each host is a namespace of its own) and on a remote testbed's (every device
carries the prefix ob12ab). The names are written out as literals per side (`LAB`,
`REMOTE`), not derived as the harness derives them, so a wrong device, address or
order, a missing or extra command fails the script. What the real commands do is
checked on the lab by test_fastdp_lab.py, test_sleeve_lab.py and test_wireguard_modes.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from scripted_fixtures import forbid_sleep, lab_testbed, remote_testbed

from harness.hosts.scripted import ScriptedProcess


@dataclasses.dataclass(frozen=True)
class Names:
    """One side's names as its commands spell them."""

    me: str                 # underlay address
    peer: str               # the peer's underlay address
    ov: str                 # overlay address
    ov_peer: str            # the peer's overlay and container addresses
    ct_peer: str
    ul: str                 # devices
    br: str
    vc: str
    vx: str
    sv: str
    wg: str                 # kernel WireGuard
    wggo: str               # wireguard-go
    table: str              # nftables table
    dir: str                # workdir


LAB = (Names("198.18.0.1", "198.18.0.2", "198.18.64.1", "198.18.64.2", "198.18.64.12", "ul0", "br0", "vc0",
             "vx0", "sv0", "obwg0", "obwge61b41", "ob12ab-h0", "/run/overlaybench/ob12ab/h0"),
       Names("198.18.0.2", "198.18.0.1", "198.18.64.2", "198.18.64.1", "198.18.64.11", "ul0", "br0", "vc0",
             "vx0", "sv0", "obwg0", "obwgcad764", "ob12ab-h1", "/run/overlaybench/ob12ab/h1"))
REMOTE = (Names("10.1.0.1", "10.1.0.2", "198.18.64.1", "198.18.64.2", "198.18.64.12", "eth1", "ob12ab-br0",
                "ob12ab-vc0", "ob12ab-vx0", "ob12ab-sv0", "ob12ab-wg0", "ob12ab-wg0", "ob12ab-h0",
                "/run/overlaybench/ob12ab/h0"),
          Names("10.1.0.2", "10.1.0.1", "198.18.64.2", "198.18.64.1", "198.18.64.11", "eth1", "ob12ab-br0",
                "ob12ab-vc1", "ob12ab-vx0", "ob12ab-sv0", "ob12ab-wg1", "ob12ab-wg1", "ob12ab-h1",
                "/run/overlaybench/ob12ab/h1"))


@pytest.fixture(params=["lab", "remote"])
def tb(request, tmp_path, monkeypatch):
    """A scripted testbed with `names`, the literal names of its sides."""
    forbid_sleep(monkeypatch)
    bed = lab_testbed(tmp_path) if request.param == "lab" else remote_testbed(tmp_path)
    bed.names = LAB if request.param == "lab" else REMOTE
    return bed


def sides(tb):
    """(side, its names) for both sides."""
    return list(zip(tb.sides, tb.names))


# ------------------------------------------------------------------ shared steps

def overlay_path(s, n: Names, mtu: int, tunnel: str | None = None) -> None:
    """reset_overlay_path: neighbours forgotten, the overlay MTU on every device of the path."""
    h, c = s.host, s.container
    h.expect(f"ip neigh flush dev {n.br}")
    c.expect("ip neigh flush dev eth0")
    if tunnel:
        h.expect(f"ip link set {tunnel} mtu {mtu}")
    h.expect(f"ip link set {n.vc} mtu {mtu}")
    c.expect(f"ip link set eth0 mtu {mtu}")
    h.expect(f"ip link set {n.br} mtu {mtu}")


def routed(s, n: Names, dev: str) -> None:
    """route_l3: the peer's /32s into the tunnel, the tunnel let through the side's table,
    forwarding on the bridge and the tunnel only, proxy ARP on the bridge."""
    h = s.host
    h.expect(f"ip route replace {n.ov_peer}/32 dev {dev} src {n.ov}")
    h.expect(f"ip route replace {n.ct_peer}/32 dev {dev} src {n.ov}")
    h.expect(["nft", "add", "element", "inet", n.table, "tunnels", f'{{ "{dev}" }}'])
    h.expect(f"sysctl -q -w net.ipv4.conf.{n.br}.forwarding=1")
    h.expect(f"sysctl -q -w net.ipv4.conf.{dev}.forwarding=1")
    h.expect(f"sysctl -q -w net.ipv4.conf.{n.br}.proxy_arp=1")
    h.expect(f"sysctl -q -w net.ipv4.neigh.{n.br}.proxy_delay=0")


def unrouted(s, n: Names, dev: str) -> None:
    h = s.host
    h.expect(f"ip route del {n.ov_peer}/32 dev {dev}")
    h.expect(f"ip route del {n.ct_peer}/32 dev {dev}")
    h.expect(["nft", "delete", "element", "inet", n.table, "tunnels", f'{{ "{dev}" }}'])
    h.expect(f"sysctl -q -w net.ipv4.conf.{n.br}.proxy_arp=0")
    h.expect("sysctl -n net.ipv4.neigh.default.proxy_delay", stdout="80\n")
    h.expect(f"sysctl -q -w net.ipv4.neigh.{n.br}.proxy_delay=80")


# ------------------------------------------------------------------ fastdp

def fastdp_up(s, n: Names, mtu: int, fdb: str | None = None) -> None:
    s.host.expect(f"ip link add {n.vx} type vxlan id 42 dstport 4789 local {n.me} dev {n.ul} nolearning")
    s.host.expect(f"bridge fdb append 00:00:00:00:00:00 dev {n.vx} dst {n.peer}")
    overlay_path(s, n, mtu, n.vx)
    s.host.expect(f"ip link set {n.vx} master {n.br} up")
    s.host.expect(f"bridge fdb show dev {n.vx}",
                  stdout=fdb if fdb is not None else f"00:00:00:00:00:00 dst {n.peer} self permanent\n")


def fastdp_down(s, n: Names) -> None:
    s.host.expect(f"ip link del {n.vx}")
    overlay_path(s, n, 1500)


# ------------------------------------------------------------------ the sleeves

SLEEVE_FLAGS = {"sleeve": "", "sleeve-seg": "--segment", "sleeve-basic": "--basic", "sleeve-l3": "--l3",
                "sleeve-crypto": "--cipher auto", "sleeve-crypto-chacha": "--cipher chacha20-poly1305"}
LINK_UP = "7: {dev}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc fq_codel state UNKNOWN\n"
COUNTERS = {"peers": [{"cipher": "aes-256-gcm"}], "cipher_impl": "OpenSSL 3.0.17"}


def sleeve_argv(name: str, n: Names, mtu: int) -> str:
    key = f" --key-file {n.dir}/sleeve.key" if "crypto" in name else ""
    return " ".join(f"{n.dir}/sleeve-shipped --dev {n.sv} --local {n.me}:6784 --peer {n.peer}:6784 --mtu {mtu} "
                    f"--stats-file {n.dir}/sleeve-stats.json {SLEEVE_FLAGS[name]}{key}".split())


def sleeve_up(name: str, tb, mtu: int) -> dict[int, ScriptedProcess]:
    """Both daemons started, each waited for, each wired in; the version from the first
    host's own binary; for a keyed sleeve the agreed AEAD, read twice from each daemon's counters."""
    daemons = {}
    for s, n in sides(tb):
        daemons[s.index] = ScriptedProcess.runs()
        s.host.expect_start(sleeve_argv(name, n, mtu), daemons[s.index])
        s.host.expect(f"ip -o link show {n.sv}", stdout=LINK_UP.format(dev=n.sv, mtu=mtu))
        overlay_path(s, n, mtu, n.sv)
        if name == "sleeve-l3":
            routed(s, n, n.sv)
        else:
            s.host.expect(f"ip link set {n.sv} master {n.br} up")
    s0, n0 = sides(tb)[0]
    s0.host.expect(f"{n0.dir}/sleeve-shipped --version", stdout="sleeve 2.1 (wire v2)\n")
    if "crypto" in name:
        for _ in ("agreed_cipher", "cipher_impls"):
            for s, n in sides(tb):
                s.host.expect(f"rm -f {n.dir}/sleeve-stats.json")
                s.host.expect(f"cat {n.dir}/sleeve-stats.json", stdout=json.dumps(COUNTERS))
    return daemons


def sleeve_down(name: str, s, n: Names) -> None:
    s.host.expect(f"ip link del {n.sv}")
    s.host.expect(f"rm -f {n.dir}/sleeve.key {n.dir}/sleeve-stats.json")
    if name == "sleeve-l3":
        unrouted(s, n, n.sv)
    overlay_path(s, n, 1500)
