"""Real hosts (over SSH, two or more) as a testbed: the same Sides the lab gives, made of
prefixed objects on each host.

On each host, and nothing else:

    <P>-br0        the overlay bridge (198.18.64.<i+1>), IPv6 off, forwarding on it only
    <P>-c<i>       the container namespace, its veth <P>-vc<i> on the bridge, eth0 inside
    <P>-vx0, -sv0… the modes' devices (Side.prefix)
    inet <P>-h<i>  the side's nftables table: the bridge and an L3 mode's tunnel device
                   forward to each other and nowhere else (harness/net/confine.py)
    /run/overlaybench/<P>/   state.json (owner: orchestrator host, pid, run id; what the
                   underlay was), the pinned sleeve, keys, counters, and blast (this
                   machine's build, shipped where a test runs it: Testbed.tool_paths);
                   made 0700 with a plain mkdir, so a prefix another testbed holds is
                   drawn again

<P> = "ob" + 4 hex digits. The NIC is the underlay; its MTU and qdisc are never changed
unless the inventory says manage_underlay = true (then restored at teardown). Every
process the testbed starts carries OVERLAYBENCH_PREFIX=<P> in its environment, so
`overlaybench down --inventory` finds what a killed run left on a host. A host given CPUs
(the inventory's `cpus`, or the run's host_cpus) runs every such process under
`taskset -c` (harness/testbeds/cpusets.py); preflight asks the host unpinned.
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
import secrets
import shutil
import socket
import time

from harness.bed import Options, Side, Testbed
from harness.core import failpoints
from harness.core.errors import HarnessError
from harness.hosts import NetnsHost
from harness.hosts.base import Host
from harness.hosts.local import owned_tempdir, owner_stamp
from harness.hosts.pinned import Pinned
from harness.net import confine
from harness.net.underlay import apply_underlay
from harness.sleeve import build as sleeve_build
from harness.testbeds import cpusets, facts, preflight
from harness.testbeds.containers import base as containers_mod
from harness.testbeds.cpu import PerHostMeter
from harness.testbeds.inventory import HostSpec
from harness.testbeds.remote_down import STATE_ROOT, claim_state_dir, release_state_dir, remove_remote
from harness.testbeds.tagged import Tagged

log = logging.getLogger(__name__)

OVERLAY_NET = "198.18.64"
CLAIM_TRIES = 8


class RemoteTestbed(Testbed):
    """Two or more remote hosts. Construct (nothing is made), preflight(), build(), teardown()."""

    def __init__(self, specs: tuple[HostSpec, ...], hosts: tuple[Host, ...], opts: Options,
                 backend: str = "ssh", facts: dict | None = None, containers: str = "netns",
                 host_cpus: str | None = None, source: str = "the inventory"):
        self.backend = backend
        self.specs = specs
        # per host: (its CPU list, where it was given): the inventory's own, else the run's
        self.pins: tuple[tuple[str | None, str], ...] = tuple(
            (spec.cpus, source) if spec.cpus else (host_cpus, cpusets.HOST_CPUS_FROM) if host_cpus else (None, "")
            for spec in specs)
        self.placement = cpusets.given([cpus for cpus, _ in self.pins])
        self.opts = opts
        self.raw_hosts = hosts
        self.underlay_mtu = 0
        self.rate: str | None = None
        self.meter = PerHostMeter()
        self.containers = containers_mod.get(containers)
        self.extra_facts = facts or {}
        self._nic_mtu: dict[int, int] = {}
        self._capped = False
        self._claimed: set[int] = set()     # sides whose host holds the prefix's directory for this testbed
        self._torn_down = False
        self._sleeves: dict[tuple, str] = {}
        self._ships: tuple[str, ...] = ()       # the tools the harness builds that the scenario runs
        self._sleeve_sources: dict[int, dict[str, str | None]] = {}   # side → build label → source hash
        self.sides: tuple[Side, ...] = ()
        self._name("ob" + secrets.token_hex(2))
        self._artifacts = owned_tempdir(self.prefix)
        self.after_teardown: list = []      # what a backend removes once the hosts are clean

    def _name(self, p: str) -> None:
        """Name the testbed and every object of its sides after prefix `p` (what preflight
        learnt of the underlay kept)."""
        self.prefix, self.state = p, f"{STATE_ROOT}/{p}"
        sides = []
        self._unpinned = tuple(Tagged(raw, p) for raw in self.raw_hosts)     # what preflight asks
        for i, (spec, raw) in enumerate(zip(self.specs, self.raw_hosts)):
            cpus = self.pins[i][0]
            host = Tagged(Pinned(raw, cpus), p) if cpus else self._unpinned[i]
            dev, ip = (self.sides[i].underlay_dev, self.sides[i].underlay_ip) if self.sides else \
                (spec.underlay_interface, spec.underlay_address)
            sides.append(Side(index=i, host=host, underlay_dev=dev, underlay_ip=ip, overlay_ip=f"{OVERLAY_NET}.{i + 1}",
                              bridge=f"{p}-br0", container=NetnsHost(f"{p}-c{i}", name=f"{spec.name}/c{i}", host=host),
                              container_ip=f"{OVERLAY_NET}.{11 + i}", container_dev="eth0",
                              container_port=f"{p}-vc{i}", workdir=f"{self.state}/h{i}", prefix=p,
                              table=confine.table_name(p, i)))
        self.sides = tuple(sides)

    @property
    def artifact_dir(self) -> pathlib.Path:
        return self._artifacts

    # ------------------------------------------------------------- preflight
    def preflight(self, sc) -> None:
        from harness import tools
        self._ships = tuple(sorted({tools.get(t).binary for t in sc.tests if tools.get(t).builds}))
        problems = []
        for s, spec in zip(self.sides, self.specs):
            host, (cpus, cpus_from) = self._unpinned[s.index], self.pins[s.index]
            problems += preflight.host_problems(host, spec.name, sc, without=("etcd",) if self.etcd_endpoints else (),
                                                cpus=cpus, cpus_from=cpus_from)
            problems += self.containers.check(host, spec.name)
            used = host.run(["ip", "-o", "-4", "route", "show", "root", f"{OVERLAY_NET}.0/24"],
                              check=False, timeout=10).stdout.split("\n")
            clash = [ln.split()[ln.split().index("dev") + 1] for ln in used
                     if " dev " in f" {ln} " and ln.split()[0] != "default"]
            if clash:
                problems.append(f"{spec.name}: the overlay's {OVERLAY_NET}.0/24 is already routed there "
                                f"(dev {', '.join(clash)}): another testbed, or a network of its own, uses it")
        if problems:
            raise HarnessError("; ".join(problems))
        self._resolve_underlay()
        problems = []
        for s, spec in zip(self.sides, self.specs):
            mtu = self._nic_mtu[s.index]
            for u in sc.underlay_mtus:
                if u != "auto" and u != mtu and not spec.manage_underlay:
                    problems.append(f"{spec.name}: underlay MTU {u} but {s.underlay_dev} has MTU {mtu} and the "
                                    f"inventory does not let overlaybench change it (manage_underlay = true, "
                                    f"or --underlay-mtu auto / {mtu})")
            if sc.rate and not spec.manage_underlay:
                problems.append(f"{spec.name}: --rate needs a tbf qdisc on {s.underlay_dev}, which the inventory "
                                f"does not let overlaybench set (manage_underlay = true)")
        if problems:
            raise HarnessError("; ".join(dict.fromkeys(problems)))
        for s, spec in zip(self.sides, self.specs):
            for peer in self.peers(s):
                done = s.host.run(["ping", "-c", "2", "-i", "0.2", "-W", "2", "-I", s.underlay_ip, peer.underlay_ip],
                                  check=False, timeout=15)
                if not done.ok:
                    raise HarnessError(f"{spec.name}: its underlay address {s.underlay_ip} ({s.underlay_dev}) "
                                       f"cannot reach {self.specs[peer.index].name}'s {peer.underlay_ip}")

    def _resolve_underlay(self) -> None:
        """Fill in "auto" underlay interfaces and addresses, and read each NIC's MTU."""
        for s, spec in zip(self.sides, self.specs):
            dev, ip = spec.underlay_interface, spec.underlay_address
            if dev != "auto" and ip == "auto":
                ip = _first_ipv4(s.host, dev, spec.name)
            elif dev == "auto" and ip != "auto":
                dev = _dev_holding(s.host, ip, spec.name)
            elif dev != "auto":
                if ip not in _ipv4s(s.host, dev, spec.name):
                    raise HarnessError(f"{spec.name}: underlay_address {ip} is not on {dev}")
            s.underlay_dev, s.underlay_ip = dev, ip
        for s, spec in zip(self.sides, self.specs):
            if s.underlay_dev == "auto":
                peer = self.sides[(s.index + 1) % len(self.sides)]
                target = peer.underlay_ip if peer.underlay_ip != "auto" else self.specs[peer.index].address
                target = _resolve_name(target, spec.name)
                done = s.host.run(["ip", "-o", "-4", "route", "get", target], check=False, timeout=10)
                m = re.search(r"\bdev (\S+).*?\bsrc (\S+)", done.stdout)
                if not done.ok or not m:
                    raise HarnessError(f"{spec.name}: no route to its peer's {target}: "
                                       f"set underlay_interface and underlay_address in the inventory")
                s.underlay_dev, s.underlay_ip = m.group(1), m.group(2)
        for s, spec in zip(self.sides, self.specs):
            done = s.host.run(["cat", f"/sys/class/net/{s.underlay_dev}/mtu"], check=False, timeout=10)
            if not done.ok or not done.stdout.strip().isdigit():
                raise HarnessError(f"{spec.name}: underlay interface {s.underlay_dev} does not exist")
            self._nic_mtu[s.index] = int(done.stdout.strip())

    def native_mtu(self) -> int:
        a = self._nic_mtu[0]
        for s, spec in zip(self.sides[1:], self.specs[1:]):
            b = self._nic_mtu[s.index]
            if a != b:
                raise HarnessError(f"underlay MTU auto: {self.specs[0].name}'s {self.sides[0].underlay_dev} has MTU "
                                   f"{a}, {spec.name}'s {s.underlay_dev} {b}: give one MTU "
                                   f"(with manage_underlay = true on the host that differs)")
        return a

    # ------------------------------------------------------------- build
    def build(self, underlay_mtu: int, rate: str | None) -> None:
        owner = {"prefix": self.prefix, "kind": "remote", **owner_stamp(), "owner_host": socket.gethostname(),
                 "run_id": self.opts.run_id, "created": time.time()}
        try:
            self._claim()
            owner["prefix"] = self.prefix
            # every host's owner first: until its state.json names one, a `down` on that host
            # would take the claimed directory for a killed run's
            for s, spec in zip(self.sides, self.specs):
                underlay = {"host": spec.name, "dev": s.underlay_dev, "mtu": self._nic_mtu[s.index],
                            "managed": spec.manage_underlay}
                s.host.run(["mkdir", "-m", "0700", s.workdir])
                for path, doc in ((f"{self.state}/state.json", owner), (f"{s.workdir}/underlay.json", underlay)):
                    s.host.run(["sh", "-c", 'cat > "$1.tmp" && mv "$1.tmp" "$1"', "sh", path], input=json.dumps(doc))
            for s in self.sides:
                self._build_side(s)
            for s in self.sides:
                self.containers.verify(s.host, s.container.netns)
            self._ship_tools()
            self.set_underlay(underlay_mtu, rate)
        except BaseException:
            self.teardown()
            raise
        log.info("remote testbed %s up on %s", self.prefix, ", ".join(s.name for s in self.specs))

    def _claim(self) -> None:
        """Make the prefix's state directory on each host with a plain mkdir, which fails
        where it exists: a prefix another testbed holds is never shared (a failed build's
        teardown would remove the other's objects). Pick another prefix then."""
        nonce = secrets.token_hex(8)            # tells this testbed's own directory on a host both sides share
        for _ in range(CLAIM_TRIES):
            for s, spec in zip(self.sides, self.specs):
                if not claim_state_dir(s.host, self.prefix, nonce, spec.name):
                    log.info("%s: prefix %s is another testbed's: picking another", spec.name, self.prefix)
                    break
                self._claimed.add(s.index)
            else:
                return
            for i in sorted(self._claimed):
                release_state_dir(self.sides[i].host, self.prefix, nonce)
            self._claimed.clear()
            self._name("ob" + secrets.token_hex(2))
        raise HarnessError(f"no free testbed prefix on {', '.join(s.name for s in self.specs)} "
                           f"after {CLAIM_TRIES} tries: run `overlaybench down --inventory`")

    def _build_side(self, s: Side) -> None:
        h, ns, br, port = s.host, s.container.netns, s.bridge, s.container_port
        peer_end = f"{self.prefix}-ce{s.index}"
        confine.confine(h, s.table, br)     # before the bridge forwards anything
        cmds = [
            ["ip", "link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"],
            ["sysctl", "-q", "-w", f"net.ipv6.conf.{br}.disable_ipv6=1"],
            ["sysctl", "-q", "-w", f"net.ipv4.conf.{br}.forwarding=1"],
            ["ip", "addr", "add", f"{s.overlay_ip}/{self.overlay_prefix}", "dev", br],
            ["ip", "link", "set", br, "up"],
        ]
        for argv in cmds:
            h.run(argv)
        self.containers.create(h, ns, {"overlaybench.prefix": self.prefix, "overlaybench.run": self.opts.run_id})
        cmds = [
            ["ip", "link", "add", port, "type", "veth", "peer", "name", peer_end],
            ["sysctl", "-q", "-w", f"net.ipv6.conf.{port}.disable_ipv6=1"],
            ["ip", "link", "set", peer_end, "netns", ns],
            ["ip", "link", "set", port, "master", br, "up"],
        ]
        for argv in cmds:
            h.run(argv)
        c = s.container
        for argv in (["ip", "link", "set", "lo", "up"],
                     ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"],
                     ["ip", "link", "set", peer_end, "name", s.container_dev],
                     ["ip", "addr", "add", f"{s.container_ip}/{self.overlay_prefix}", "dev", s.container_dev],
                     ["ip", "link", "set", s.container_dev, "up"]):
            c.run(argv)

    def set_underlay(self, mtu: int, rate: str | None) -> None:
        for s, spec in zip(self.sides, self.specs):
            if spec.manage_underlay:
                apply_underlay(s.host, s.underlay_dev, mtu, rate, clear=self._capped)
            elif mtu != self._nic_mtu[s.index] or rate:
                raise HarnessError(f"{spec.name}: the underlay {s.underlay_dev} is not overlaybench's to change "
                                   f"(MTU {self._nic_mtu[s.index]}; manage_underlay = false)")
        self._capped = self._capped or bool(rate)
        self.underlay_mtu, self.rate = mtu, rate
        self._check_path_mtu(mtu)

    def _check_path_mtu(self, mtu: int) -> None:
        """A full-size packet with DF set must reach the peer: a NIC at the MTU says nothing of
        the switches between the hosts, and a path that drops big packets measures nonsense."""
        for s, spec in zip(self.sides, self.specs):
            for peer in (p.underlay_ip for p in self.peers(s)):
                payload = mtu - (48 if ":" in peer else 28)          # IPv6 or IPv4 header, ICMP header
                done = s.host.run(["ping", "-c", "2", "-i", "0.2", "-W", "1", "-M", "do", "-s", str(payload), peer],
                                  check=False, timeout=15)
                if not done.ok:
                    raise HarnessError(f"{spec.name}: a {mtu}-byte packet with DF set does not reach {peer} over "
                                       f"{s.underlay_dev}: the path between the hosts carries less than MTU {mtu}")

    # ------------------------------------------------------------- sleeve
    def _ship_tools(self) -> None:
        """blast (the one tool the harness builds), this machine's build at the same path on
        every host, in the prefix's state directory (removed with it): the tests run it there."""
        if not self._ships:
            return
        from harness.sleeve import blast as blast_build
        local, dest = blast_build.local_binary(), f"{self.state}/blast"
        for s, spec in zip(self.sides, self.specs):
            s.host.put(local, dest, 0o755)
            lost = sleeve_build.missing_libs(s.host, dest)
            if lost:
                raise HarnessError(f"{spec.name}: the shipped blast needs {', '.join(lost)}, which it lacks: "
                                   f"leave blast's tests out there")
        self.tool_paths = {"blast": dest}

    def install_sleeve(self, side: Side, source=None) -> str:
        key = (side.index, str(source.path) if source else None, source.label if source else None)
        if key not in self._sleeves:
            label = source.label if source else "shipped"
            self._sleeves[key] = sleeve_build.install_remote(side.host, f"{side.workdir}/sleeve-{label}", source)
            self._sleeve_sources.setdefault(side.index, {})[label] = _installed_hash(source)
        return self._sleeves[key]

    # ------------------------------------------------------------- teardown
    def teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        for s, spec in zip(self.sides, self.specs):
            if s.index not in self._claimed:
                continue                    # the prefix there is not this testbed's
            try:
                self.containers.remove(s.host, s.container.netns)
            except HarnessError as e:
                log.warning("%s: container %s not removed: %s", spec.name, s.container.netns, e)
            try:
                remove_remote(s.host, self.prefix, s.index)
            except HarnessError as e:
                log.warning("%s: teardown of %s incomplete: %s", spec.name, self.prefix, e)
            failpoints.reached("teardown")
        self.containers.close()
        for h in self.raw_hosts:
            h.close()
        shutil.rmtree(self._artifacts, ignore_errors=True)
        for step in self.after_teardown:
            step()
        log.info("remote testbed %s removed", self.prefix)

    @property
    def etcd_endpoints(self) -> str | None:
        """The etcd the inventory names for the flannel modes (the first host's), if any."""
        return self.specs[0].etcd_endpoints

    @property
    def flannel_network(self) -> str | None:
        """The flannel network the inventory names (the first host's), if any."""
        return self.specs[0].flannel_network

    # ------------------------------------------------------------- facts
    def facts(self) -> dict:
        return {"backend": self.backend, "prefix": self.prefix, "underlay_mtu": self.underlay_mtu,
                "rate": self.rate, **self.extra_facts, **self.containers.facts(),
                "cpus": self.placement.facts(),
                "hosts": {f"h{s.index}": {"name": spec.name, "address": spec.address, "user": spec.user,
                                          "sudo": spec.sudo, "underlay_dev": s.underlay_dev,
                                          "underlay": s.underlay_ip, "nic_mtu": self._nic_mtu.get(s.index),
                                          "manage_underlay": spec.manage_underlay, "overlay": s.overlay_ip,
                                          "container": s.container_ip}
                          for s, spec in zip(self.sides, self.specs)}}

    def host_facts(self) -> dict:
        return {f"h{s.index}": facts.host_facts(s.host, s.underlay_dev,
                                                sleeve_source=dict(self._sleeve_sources.get(s.index, {})))
                for s in self.sides}


# ----------------------------------------------------------------- helpers

def _installed_hash(source) -> str | None:
    """The hash of the source install_remote installed from: the tag of its build in
    REMOTE_CACHE on the host, or of this machine's build shipped instead; None for an
    OVERLAYBENCH_SLEEVE_BINARY, whose source is not known."""
    if source is not None:
        return source.hash
    return None if sleeve_build.prebuilt() else sleeve_build.Source.shipped().hash


def _resolve_name(addr: str, who: str) -> str:
    try:
        return socket.gethostbyname(addr)
    except OSError as e:
        raise HarnessError(f"{who}: cannot resolve {addr!r} ({e})") from e


def _ipv4s(host: Host, dev: str, who: str) -> list[str]:
    done = host.run(["ip", "-o", "-4", "addr", "show", "dev", dev], check=False, timeout=10)
    if not done.ok:
        raise HarnessError(f"{who}: underlay interface {dev} does not exist")
    return [ln.split()[3].split("/")[0] for ln in done.stdout.splitlines() if len(ln.split()) > 3]


def _first_ipv4(host: Host, dev: str, who: str) -> str:
    addrs = _ipv4s(host, dev, who)
    if not addrs:
        raise HarnessError(f"{who}: underlay interface {dev} has no IPv4 address")
    return addrs[0]


def _dev_holding(host: Host, ip: str, who: str) -> str:
    done = host.run(["ip", "-o", "-4", "addr", "show"], check=False, timeout=10)
    for ln in done.stdout.splitlines():
        f = ln.split()
        if len(f) > 3 and f[3].split("/")[0] == ip:
            return f[1]
    raise HarnessError(f"{who}: no interface has the underlay_address {ip}")
