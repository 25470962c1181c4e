"""The real Flannel (flanneld, pinned, built by `make flanneld`) as modes, beside the
bundled stand-ins for it (`sleeve-l3` for its UDP backend, `fastdp` for its VXLAN).

    flannel-vxlan     flanneld's kernel VXLAN device flannel.<VNI>, routes and FDB from etcd
    flannel-udp       flanneld carrying every packet itself through the TUN flannel<N>
    flannel-host-gw   routes to each host's subnet via its underlay address, no encapsulation
    flannel-wireguard, flannel-ipip
                      flanneld's kernel WireGuard and IPIP backends, where the kernel has them

A deployment starts an etcd on the first host (harness/modes/etcd.py) or uses the
testbed's, puts the network's config under a key prefix of its own, starts one flanneld
per host and waits for each to write its subnet file (subnet.env) and learn its peer's
subnet. Then, as `docker --bip=${FLANNEL_SUBNET}` did in the write-ups, the side's bridge
takes the subnet's first address and its container the second, with a route to the
flannel network through the bridge: the endpoints are those addresses
(Datapath.addrs), so host-host runs between the two bridges' addresses and
container-container between the containers'. Forwarding is on only for the bridge and
the device flannel routes through (the underlay itself for host-gw), confined by the
side's nftables table (harness/net/confine.py).

Flannel sets the overlay MTU (the underlay's less its encapsulation): "auto" takes it,
and any other overlay MTU for these modes is refused. flanneld runs with
`-ip-masq=false -iptables-forward-rules=false`, so it writes no firewall rule. What it
changes on a host is its device, the routes to the other subnets (and for VXLAN their
neighbour and FDB entries) and its subnet file; teardown stops it, deletes the device and
routes it left, and what the harness added. On a real host the VXLAN device carries the
testbed's prefix in its VNI (vni_for), so `down` finds a killed run's; flannel.json in the
side's directory tells `down` the host-gw routes and the underlay's forwarding to restore.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import pathlib
import platform
import re
import time

from harness.bed import Side, Testbed
from harness.core.errors import CommandError, HarnessError, UnsupportedError
from harness.modes import etcd as etcd_mod
from harness.modes.base import Datapath, Mode, reset_overlay_path, stop_daemon
from harness.modes.flannel_config import (ENV_BINARY, SUBNET_LEN, endpoint_addrs, find_binary, forwarding, network,
                                          parse_subnet_env, version_of, vni_for)
from harness.net import confine

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0       # a hang, not a speed: flanneld writes its subnet file within seconds
ROUTE_TIMEOUT = 30.0       # for each flanneld to learn its peer's lease from etcd
# Devices flanneld names without a number of ours: one per host, refused where it exists
# (a flannel of the host's own), deleted at teardown and by `down` (flannel.json names it).
FIXED_DEVICES = {"ipip": "flannel.ipip", "wireguard": "flannel-wg"}


class Flannel(Mode):
    """flanneld with one backend; the subclasses name it."""

    kind = "flannel"
    backend = ""
    probe: list[str] | None = None       # `ip link add … type X` that shows the kernel has the backend
    binaries = ("etcd", "curl")          # etcd runs on the first host; curl speaks to it from there

    def overlay_mtu(self, underlay_mtu: int, requested: int | str) -> int:
        fit = underlay_mtu - self.overhead
        if requested != "auto" and int(requested) != fit:
            raise HarnessError(f"mode {self.name}: flannel sets the overlay MTU itself ({fit} on underlay MTU "
                               f"{underlay_mtu}); ask for \"auto\", not {requested}")
        return fit

    # check -------------------------------------------------------------------
    def check(self, testbed: Testbed) -> None:
        if self.probe:
            for s in testbed.sides:
                done = s.host.run(["ip", "link", "add", "obflchk", "type", *self.probe], check=False)
                if not done.ok:
                    why = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[-1]
                    raise UnsupportedError(f"mode {self.name}: kernel {self.probe[0]} unsupported here on "
                                           f"{s.host.name} ({why})")
                s.host.run(["ip", "link", "del", "obflchk"], check=False)
        for s in testbed.sides:
            arch = s.host.run(["uname", "-m"], check=False).stdout.strip()
            if arch and arch != platform.machine() and not os.environ.get(ENV_BINARY):
                raise UnsupportedError(f"mode {self.name}: unsupported on {s.host.name} ({arch}): the flanneld "
                                       f"shipped is this machine's ({platform.machine()}); build one for {arch} "
                                       f"and name it in {ENV_BINARY}")
        if self.backend in FIXED_DEVICES:
            for s in testbed.sides:
                if s.host.run(["ip", "link", "show", FIXED_DEVICES[self.backend]], check=False).ok:
                    raise HarnessError(f"mode {self.name}: {s.host.name} already has {FIXED_DEVICES[self.backend]} "
                                       f"(a flannel of its own?); the run would take it over")

    def local_check(self) -> None:
        find_binary()

    # names -------------------------------------------------------------------
    def key_prefix(self, testbed: Testbed) -> str:
        return f"/overlaybench/{getattr(testbed, 'prefix', 'ob') or 'ob'}/{self.name}/network"

    def config(self, testbed: Testbed) -> dict:
        backend: dict = {"Type": self.backend}
        if self.backend == "vxlan":
            backend["VNI"] = vni_for(testbed.sides[0].prefix)
        return {"Network": network(testbed), "SubnetLen": SUBNET_LEN, "Backend": backend}

    def route_dev(self, s: Side, dp: Datapath) -> str:
        """The device flannel routes the peer's subnet through on side `s`."""
        return dp.info["devices"][str(s.index)]

    # deploy ------------------------------------------------------------------
    def deploy(self, testbed: Testbed, overlay_mtu: int) -> Datapath:
        binary = find_binary()
        dp = Datapath(self.name, self.kind, overlay_mtu,
                      info={"backend": self.backend, "version": version_of(binary), "network": network(testbed),
                            "etcd_prefix": self.key_prefix(testbed)})
        try:
            db = self._etcd(testbed, dp)
            db.put(f"{self.key_prefix(testbed)}/config", json.dumps(self.config(testbed)))
            for s in testbed.sides:
                self._start(testbed, s, binary, db, dp)
            envs = {s.index: self._wait_subnet(s, dp) for s in testbed.sides}
            dp.info["subnets"] = {str(i): e["FLANNEL_SUBNET"] for i, e in envs.items()}
            dp.info["flannel_mtu"] = int(envs[0]["FLANNEL_MTU"])
            for i, e in envs.items():
                if int(e["FLANNEL_MTU"]) != overlay_mtu:
                    raise HarnessError(f"flanneld on {testbed.sides[i].host.name} set MTU {e['FLANNEL_MTU']}, not the "
                                       f"{overlay_mtu} expected of mode {self.name} on underlay MTU "
                                       f"{testbed.underlay_mtu}")
            dp.info["devices"] = {str(s.index): self._device(testbed, s) for s in testbed.sides}
            for s in testbed.sides:
                self._wait_route(testbed, s, envs[1 - s.index]["FLANNEL_SUBNET"], dp)
            for s in testbed.sides:
                self._wire(testbed, s, envs[s.index], dp)
            self._wait_path(testbed, dp)
        except BaseException:
            self.teardown(testbed, dp)
            raise
        dp.devices = {s.index: [s.underlay_dev, self.route_dev(s, dp), s.bridge, s.container_port,
                                f"ctr:{s.container_dev}"] for s in testbed.sides}
        return dp

    def _etcd(self, testbed: Testbed, dp: Datapath) -> etcd_mod.Etcd:
        first = testbed.sides[0]
        given = testbed.etcd_endpoints
        db = etcd_mod.existing(first, given) if given else etcd_mod.start(first, getattr(testbed, "prefix", "ob"))
        dp.services.append(db)
        dp.info["etcd"] = db.describe()
        return db

    def _start(self, testbed: Testbed, s: Side, binary: pathlib.Path, db: etcd_mod.Etcd, dp: Datapath) -> None:
        h = s.host
        h.run(["mkdir", "-p", "-m", "0700", s.workdir])
        remote = f"{s.workdir}/flanneld"
        h.put(str(binary), remote, 0o755)
        subnet_file = f"{s.workdir}/flannel-subnet.env"
        h.run(["rm", "-f", subnet_file])
        # What `down` needs to undo a killed run's: the underlay's forwarding as it was, and
        # (host-gw) where the routes flanneld adds go. Written before flanneld starts.
        fwd = h.run(["sysctl", "-n", forwarding(s.underlay_dev)], check=False).stdout.strip()
        note = {"network": network(testbed), "underlay_dev": s.underlay_dev, "underlay_ip": s.underlay_ip,
                "underlay_forwarding": fwd, "device": FIXED_DEVICES.get(self.backend, ""),
                "peer_underlay_ip": testbed.peer(s).underlay_ip, "backend": self.backend}
        h.run(["sh", "-c", 'umask 077 && cat > "$1"', "sh", f"{s.workdir}/flannel.json"], input=json.dumps(note))
        dp.info.setdefault("underlay_forwarding", {})[str(s.index)] = fwd
        # WIREGUARD_KEY_FILE: the WireGuard backend's key in the side's directory (else
        # /run/flannel/wgkey, which the lab's two hosts would share).
        dp.processes[s.index] = h.start([
            "env", f"WIREGUARD_KEY_FILE={s.workdir}/flannel-wg.key", remote,
            "-etcd-endpoints", db.url, "-etcd-prefix", self.key_prefix(testbed),
            "-iface", s.underlay_dev, "-public-ip", s.underlay_ip, "-subnet-file", subnet_file,
            "-ip-masq=false", "-iptables-forward-rules=false", "-healthz-port", "0"])

    def _wait_subnet(self, s: Side, dp: Datapath) -> dict[str, str]:
        path = f"{s.workdir}/flannel-subnet.env"
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            self._alive(s, dp, "writing its subnet file")
            done = s.host.run(["cat", path], check=False, timeout=10)
            if done.ok and "FLANNEL_MTU=" in done.stdout:
                return parse_subnet_env(done.stdout)
            if time.monotonic() > deadline:
                raise HarnessError(f"{s.host.name}: flanneld wrote no subnet file within {READY_TIMEOUT:.0f}s")
            time.sleep(0.1)

    def _alive(self, s: Side, dp: Datapath, doing: str) -> None:
        proc = dp.processes.get(s.index)
        if proc is not None and proc.poll() is not None:
            out = proc.wait(0)
            lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
            raise HarnessError(f"{s.host.name}: flanneld exited ({out.returncode}) before {doing}: "
                               f"{(lines[-1] if lines else 'no output')[-300:]}")

    def _device(self, testbed: Testbed, s: Side) -> str:
        """The device flannel routes the peer's subnet through: its VXLAN or IPIP device, the
        TUN it routes the whole network to (named by the kernel), the underlay for host-gw."""
        if self.backend == "host-gw":
            return s.underlay_dev
        if self.backend == "udp":
            done = s.host.run(["ip", "-o", "route", "show", "exact", network(testbed)], check=False, timeout=10)
            m = re.search(r"\bdev (flannel[0-9]+)\b", done.stdout)
            if not m:
                raise HarnessError(f"{s.host.name}: flanneld wrote its subnet file but routes {network(testbed)} through "
                                   f"no TUN: {done.stdout.strip()[:200]!r}")
            return m.group(1)
        return FIXED_DEVICES.get(self.backend) or f"flannel.{vni_for(s.prefix)}"

    def _wait_route(self, testbed: Testbed, s: Side, peer_subnet: str, dp: Datapath) -> None:
        """Until side `s` routes the peer's bridge address through flannel's device (for
        host-gw: via the peer's underlay address): flanneld learnt the peer's lease."""
        target = endpoint_addrs(peer_subnet)[0]
        want = f"dev {self.route_dev(s, dp)} "
        via = f"via {testbed.peer(s).underlay_ip} " if self.backend == "host-gw" else ""
        deadline = time.monotonic() + ROUTE_TIMEOUT
        while True:
            self._alive(s, dp, "routing its peer's subnet")
            done = s.host.run(["ip", "-o", "route", "get", target], check=False, timeout=10)
            if done.ok and want in done.stdout + " " and via in done.stdout:
                return
            if time.monotonic() > deadline:
                raise HarnessError(f"{s.host.name}: flanneld did not route {peer_subnet} (its peer's subnet) "
                                   f"through {self.route_dev(s, dp)} within {ROUTE_TIMEOUT:.0f}s "
                                   f"({done.stdout.strip() or done.stderr.strip()})")
            time.sleep(0.1)

    def _wait_path(self, testbed: Testbed, dp: Datapath) -> None:
        """Until one ping crosses bridge to bridge (the UDP backend learns its peer inside
        flanneld, after the route): the first measurement never pays for it."""
        a, b = testbed.sides
        deadline = time.monotonic() + ROUTE_TIMEOUT
        while not a.host.run(["ping", "-c", "1", "-W", "1", "-I", dp.addrs[0]["host"], dp.addrs[1]["host"]],
                             check=False, timeout=10).ok:
            for s in testbed.sides:
                self._alive(s, dp, "carrying a ping")
            if time.monotonic() > deadline:
                raise HarnessError(f"{a.host.name}: no ping crosses {self.name} from {dp.addrs[0]['host']} to "
                                   f"{dp.addrs[1]['host']} within {ROUTE_TIMEOUT:.0f}s")
            time.sleep(0.1)

    def _wire(self, testbed: Testbed, s: Side, env: dict[str, str], dp: Datapath) -> None:
        """The bridge and container into the side's subnet, forwarding on for the two devices."""
        h = s.host
        bridge_ip, ctr_ip = endpoint_addrs(env["FLANNEL_SUBNET"])
        plen = ipaddress.ip_interface(env["FLANNEL_SUBNET"]).network.prefixlen
        dev = self.route_dev(s, dp)
        reset_overlay_path(s, dp.overlay_mtu, None if dev == s.underlay_dev else dev)
        h.run(["ip", "addr", "add", f"{bridge_ip}/{plen}", "dev", s.bridge])
        addrs = {"host": bridge_ip}
        if s.container is not None:
            s.container.run(["ip", "addr", "add", f"{ctr_ip}/{plen}", "dev", s.container_dev])
            for dst in self._container_routes(testbed, s):
                s.container.run(["ip", "route", "replace", dst, "via", bridge_ip, "dev", s.container_dev,
                                 "src", ctr_ip])
            addrs["container"] = ctr_ip
        dp.addrs[s.index] = addrs
        if s.table:
            if dev == s.underlay_dev:
                confine.allow_gateway(h, s.table, dev, self._gateway_nets(testbed, s),
                                      only_bridge=dp.info["underlay_forwarding"][str(s.index)] != "1")
            else:
                confine.allow_tunnel(h, s.table, dev)
        for d in (s.bridge, dev):
            h.run(["sysctl", "-q", "-w", f"{forwarding(d)}=1"])

    def _container_routes(self, testbed: Testbed, s: Side) -> list[str]:
        """What a side's container routes through its bridge: the flannel network, and for
        host-gw the peer's underlay address too (a peer host reaches the container from it,
        unencapsulated, as a Docker container's default route would answer it)."""
        return [network(testbed)] + ([f"{testbed.peer(s).underlay_ip}/32"] if self.backend == "host-gw" else [])

    def _gateway_nets(self, testbed: Testbed, s: Side) -> list[str]:
        """Where host-gw forwards between the bridge and the underlay: the flannel network, and
        the peer's underlay address (the container's answers to the peer host)."""
        return [network(testbed), f"{testbed.peer(s).underlay_ip}/32"]

    # teardown ----------------------------------------------------------------
    def teardown(self, testbed: Testbed, dp: Datapath | None) -> None:
        for s in testbed.sides:
            stop_daemon(s, dp, "flanneld")
        for db in (dp.services if dp else []):
            try:
                if db.own:
                    db.stop()
                else:
                    db.delete_prefix(self.key_prefix(testbed))
            except HarnessError as e:
                log.warning("etcd teardown: %s", e)
        for s in testbed.sides:
            try:
                self._unwire(testbed, s, dp)
            except CommandError as e:
                log.warning("%s teardown on %s: %s", self.name, s.host.name, e)

    def _unwire(self, testbed: Testbed, s: Side, dp: Datapath | None) -> None:
        h = s.host
        info = dp.info if dp else {}
        subnet = info.get("subnets", {}).get(str(s.index))
        if subnet:
            bridge_ip, ctr_ip = endpoint_addrs(subnet)
            plen = ipaddress.ip_interface(subnet).network.prefixlen
            h.run(["ip", "addr", "del", f"{bridge_ip}/{plen}", "dev", s.bridge], check=False)
            if s.container is not None:
                for dst in self._container_routes(testbed, s):
                    s.container.run(["ip", "route", "del", dst, "dev", s.container_dev], check=False)
                s.container.run(["ip", "addr", "del", f"{ctr_ip}/{plen}", "dev", s.container_dev], check=False)
        # flanneld leaves its kernel devices and its routes when it stops; the TUN goes with it.
        if self.backend == "vxlan":
            h.run(["ip", "link", "del", f"flannel.{vni_for(s.prefix)}"], check=False)
        elif self.backend in FIXED_DEVICES:
            h.run(["ip", "link", "del", FIXED_DEVICES[self.backend]], check=False)
        for peer in info.get("subnets", {}).values():
            net = str(ipaddress.ip_interface(peer).network)
            if peer != subnet:
                h.run(["ip", "route", "del", net, "via", testbed.peer(s).underlay_ip, "dev", s.underlay_dev], check=False)
        dev = info.get("devices", {}).get(str(s.index))
        if dev and s.table:
            if dev == s.underlay_dev:
                confine.forget_gateway(h, s.table, dev, self._gateway_nets(testbed, s))
            else:
                confine.forget_tunnel(h, s.table, dev)
        fwd = info.get("underlay_forwarding", {}).get(str(s.index))
        if fwd in ("0", "1"):
            h.run(["sysctl", "-q", "-w", f"{forwarding(s.underlay_dev)}={fwd}"], check=False)
        h.run(["rm", "-f", f"{s.workdir}/flanneld", f"{s.workdir}/flannel-subnet.env", f"{s.workdir}/flannel.json",
               f"{s.workdir}/flannel-wg.key"], check=False)
        reset_overlay_path(s, 1500, None)


class FlannelVxlan(Flannel):
    name = "flannel-vxlan"
    backend = "vxlan"
    order = 15
    colour = "#44AA99"
    features = ("vxlan",)
    overhead = 50          # flannel's encapOverhead: outer IPv4 20 + UDP 8 + VXLAN 8 + Ethernet 14
    description = "the real Flannel, VXLAN backend (kernel device flannel.<VNI>, routes from etcd)"


class FlannelUdp(Flannel):
    name = "flannel-udp"
    backend = "udp"
    order = 55
    colour = "#999933"
    features = ("tun",)
    overhead = 28          # IPv4 20 + UDP 8: IP packets straight in UDP
    description = "the real Flannel, UDP backend (flanneld copies every packet through TUN flannel<N>)"


class FlannelHostGw(Flannel):
    name = "flannel-host-gw"
    backend = "host-gw"
    order = 11
    colour = "#AA3377"
    overhead = 0
    description = "the real Flannel, host-gw backend (routes via the peer's underlay address, no encapsulation)"


class FlannelWireGuard(Flannel):
    name = "flannel-wireguard"
    backend = "wireguard"
    order = 95
    colour = "#AA4499"
    probe = ["wireguard"]
    overhead = 80          # flannel's own allowance (IPv6 outer headers), whatever the underlay
    description = "the real Flannel, WireGuard backend (kernel WireGuard)"


class FlannelIpip(Flannel):
    name = "flannel-ipip"
    backend = "ipip"
    order = 16
    colour = "#88CCEE"
    probe = ["ipip", "remote", "198.18.0.254"]
    overhead = 20
    description = "the real Flannel, IPIP backend (kernel IPIP device flannel.ipip)"
