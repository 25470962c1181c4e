"""The local lab: two or more hosts as network namespaces on this machine.

    root ns ──(mgmt veth <P>-m0/m1)──┐
                                     │
    <P>-h0 [ul0 198.18.0.1] ═══ veth underlay (MTU, tbf cap) ═══ [ul0 198.18.0.2] <P>-h1
        br0 198.18.64.1                                              br0 198.18.64.2
         └ vc0 ── eth0 198.18.64.11 <P>-c0          <P>-c1 198.18.64.12 eth0 ── vc0 ┘

With N > 2 hosts (`lab_hosts`, at most 8) the underlay is a switch: a bridge in the lab's
namespace <P>-sw with a veth port p<i> to each host's ul0 (198.18.0.<i+1>); the MTU and the
tbf cap are set on each host's ul0, the switch ports take the MTU. Two hosts keep the
direct veth, so a pair measured as always has no bridge in its path.

Every namespace and root-side link carries the lab's prefix <P> = "ob" + 4 hex digits,
and the lab's files live in /run/overlaybench/<P>/, so `down` removes exactly what labs
made. Addresses come only from 198.18.0.0/15 (RFC 2544's benchmark range); host
namespaces have no default route, so no traffic leaves what the lab made.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pathlib
import secrets
import shutil
import time

from harness.bed import Options, Side, Testbed
from harness.core.errors import HarnessError
from harness.hosts import LocalHost, NetnsHost
from harness.hosts.local import pidns_of
from harness.net import confine
from harness.net.underlay import apply_underlay
from harness.sleeve import build as sleeve_build
from harness.testbeds import cpusets
from harness.testbeds.containers import base as containers_mod
from harness.testbeds.cpu import MachineMeter
from harness.testbeds.lab_state import STATE_ROOT, down, ip, read_state, remove_lab, require_root, state_lock
from harness.testbeds.preflight import needed_binaries
from harness.tools.packages import install_hint

log = logging.getLogger(__name__)


UNDERLAY_NET = "198.18.0"
OVERLAY_NET = "198.18.64"
MGMT_BASE = 128  # management /30s live in 198.18.128.0/17, MAX_HOSTS of them per lab index
MAX_LABS = 64
MAX_HOSTS = 8     # per lab: they share this machine's CPUs
LAB_BINARIES = ["ip", "tc", "ss", "bridge", "nft"]


def open_testbed(sc, opts: Options) -> "Lab":
    """The netns backend: a lab allocated (its prefix and state directory), not yet built."""
    return Lab.allocate(run_id=opts.run_id, containers=sc.containers, hosts=sc.lab_hosts, cpus=sc.lab_cpus)


class Lab(Testbed):
    """A lab of 2 to MAX_HOSTS hosts in network namespaces. Use as a context manager, or call teardown()."""

    backend = "netns"
    measures_here = True

    def __init__(self, prefix: str, index: int, persistent: bool = False, containers: str = "netns",
                 run_id: str = "", hosts: int = 2, cpus: str = cpusets.OWN):
        if not 2 <= hosts <= MAX_HOSTS:
            raise HarnessError(f"a lab of {hosts} hosts: between 2 and {MAX_HOSTS}")
        self.prefix = prefix
        self.run_id = run_id
        self.index = index
        self.persistent = persistent
        self.underlay_mtu = 1500
        self.rate: str | None = None
        self.state_dir = STATE_ROOT / prefix
        self._torn_down = False
        # every process a host runs, its container's too, on the host's own CPUs (testbeds/cpusets.py)
        self.placement = cpusets.place(hosts, cpus)
        sides = []
        for i in range(hosts):
            pin = self.placement.cpus[i]
            host = NetnsHost(self.ns(f"h{i}"), name=f"h{i}", cpus=pin)
            ctr = NetnsHost(self.ns(f"c{i}"), name=f"c{i}", cpus=pin)
            sides.append(Side(index=i, host=host, underlay_dev="ul0",
                              underlay_ip=f"{UNDERLAY_NET}.{i + 1}", overlay_ip=f"{OVERLAY_NET}.{i + 1}",
                              bridge="br0", container=ctr, container_ip=f"{OVERLAY_NET}.{11 + i}",
                              container_dev="eth0", container_port="vc0",
                              workdir=str(self.state_dir / f"h{i}"), table=confine.table_name(prefix, i)))
        self.sides = tuple(sides)
        self.root = LocalHost("root")
        self.meter = MachineMeter(self.root)
        self.containers = containers_mod.get(containers)
        self._sleeves: dict[tuple, pathlib.Path] = {}

    # names -----------------------------------------------------------------
    def ns(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def mgmt_addrs(self, i: int) -> tuple[str, str]:
        """(root side, host side) of host i's management /30."""
        base = 4 * MAX_HOSTS * self.index + 4 * i
        third, fourth = MGMT_BASE + base // 256, base % 256
        return f"198.18.{third}.{fourth + 1}", f"198.18.{third}.{fourth + 2}"

    @property
    def artifact_dir(self) -> pathlib.Path:
        return self.state_dir

    # life cycle --------------------------------------------------------------
    @classmethod
    def create(cls, underlay_mtu: int = 1500, rate: str | None = None, persistent: bool = False,
               hosts: int = 2, cpus: str = cpusets.OWN) -> "Lab":
        """Allocate and build a lab in one step."""
        lab = cls.allocate(persistent, hosts=hosts, cpus=cpus)
        lab.build(underlay_mtu, rate)
        return lab

    @classmethod
    def allocate(cls, persistent: bool = False, run_id: str = "", containers: str = "netns",
                 hosts: int = 2, cpus: str = cpusets.OWN) -> "Lab":
        """Claim a prefix, an index (its management addresses) and a state directory."""
        require_root()
        if not shutil.which("ip"):
            raise HarnessError("`ip` (iproute2) not found: apt-get install iproute2")
        STATE_ROOT.mkdir(parents=True, exist_ok=True)
        with state_lock(fcntl.LOCK_EX):
            used = {read_state(d).get("index") for d in STATE_ROOT.iterdir() if d.is_dir()}
            index = next((i for i in range(MAX_LABS) if i not in used), None)
            if index is None:
                raise HarnessError(f"{MAX_LABS} labs exist already: run `overlaybench down`")
            for _ in range(8):
                # mkdir, not exist_ok: a prefix whose directory exists is another lab's, never shared
                prefix = "ob" + secrets.token_hex(2)
                lab = cls(prefix, index, persistent, containers, run_id, hosts, cpus)
                try:
                    lab.state_dir.mkdir(mode=0o700)
                    break
                except FileExistsError:
                    log.info("lab prefix %s is taken: picking another", prefix)
            else:
                raise HarnessError("no free lab prefix after 8 tries: run `overlaybench down`")
            (lab.state_dir / "state.json").write_text(json.dumps(
                {"prefix": prefix, "index": index, "pid": None if persistent else os.getpid(),
                 "pidns": None if persistent else pidns_of(),
                 "run_id": run_id, "containers": containers, "hosts": hosts, "created": time.time()}))
        return lab

    def build(self, underlay_mtu: int = 1500, rate: str | None = None) -> None:
        try:
            self._build()
            self.set_underlay(underlay_mtu, rate)
        except BaseException:
            self.teardown()
            raise
        log.info("lab %s up", self.prefix)

    def preflight(self, sc) -> None:
        """The lab's hosts share this machine's file system: its tools are theirs."""
        problems = self.containers.check(self.root, "this machine")
        if problems:
            raise HarnessError("; ".join(problems))
        missing = [b for b in needed_binaries(sc, base=LAB_BINARIES) if not shutil.which(b)]
        if missing:
            raise HarnessError(f"{', '.join(missing)} not found on this machine: {install_hint(missing)}")

    def install_sleeve(self, side: Side, source=None) -> str:
        """Built once per source on this machine (cached by its hash) and pinned for the
        lab's life, so editing the C source during a run cannot mix builds."""
        key = (str(source.path), source.label) if source else None
        pinned = self._sleeves.get(key)
        if pinned is None:
            built = sleeve_build.build_local(source)
            pinned = self.artifact_dir / f"sleeve-{source.label if source else 'shipped'}"
            tmp = pinned.with_suffix(".tmp")
            shutil.copyfile(built, tmp)
            tmp.chmod(0o755)
            tmp.replace(pinned)
            self._sleeves[key] = pinned
        dest = f"{side.workdir}/{pinned.name}"
        side.host.put(str(pinned), dest, 0o755)
        return dest

    def _build(self) -> None:
        for s in self.sides:
            ip("netns", "add", s.host.netns)
            self.containers.create(self.root, s.container.netns,
                                   {"overlaybench.prefix": self.prefix, "overlaybench.run": self.run_id})
            for h in (s.host, s.container):
                ip("-n", h.netns, "link", "set", "lo", "up")
                # No IPv6 chatter (DAD, router solicitations) in the measurements.
                h.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
            os.makedirs(s.workdir, mode=0o700, exist_ok=True)
        if self.switched:
            sw = self.ns("sw")
            ip("netns", "add", sw)
            ip("-n", sw, "link", "set", "lo", "up")
            ip("-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0")
            ip("-n", sw, "link", "set", "br0", "up")
            for s in self.sides:
                port = f"p{s.index}"
                ip("link", "add", port, "netns", sw, "type", "veth", "peer", "name", "ul0", "netns", s.host.netns)
                ip("-n", sw, "link", "set", port, "master", "br0", "up")
        else:
            h0, h1 = (s.host.netns for s in self.sides)
            ip("link", "add", "ul0", "netns", h0, "type", "veth", "peer", "name", "ul0", "netns", h1)
        for s in self.sides:
            h, c = s.host.netns, s.container.netns
            confine.confine(s.host, s.table, s.bridge)      # before anything forwards
            s.host.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            ip("-n", h, "addr", "add", f"{s.underlay_ip}/24", "dev", "ul0")
            ip("-n", h, "link", "set", "ul0", "up")
            ip("-n", h, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0")
            ip("-n", h, "addr", "add", f"{s.overlay_ip}/{self.overlay_prefix}", "dev", "br0")
            ip("-n", h, "link", "set", "br0", "up")
            ip("link", "add", "eth0", "netns", c, "type", "veth", "peer", "name", "vc0", "netns", h)
            ip("-n", h, "link", "set", "vc0", "master", "br0", "up")
            ip("-n", c, "addr", "add", f"{s.container_ip}/{self.overlay_prefix}", "dev", "eth0")
            ip("-n", c, "link", "set", "eth0", "up")
            root_ip, host_ip = self.mgmt_addrs(s.index)
            m = self.ns(f"m{s.index}")
            ip("link", "add", m, "type", "veth", "peer", "name", "mg0", "netns", h)
            ip("addr", "add", f"{root_ip}/30", "dev", m)
            ip("link", "set", m, "up")
            ip("-n", h, "addr", "add", f"{host_ip}/30", "dev", "mg0")
            ip("-n", h, "link", "set", "mg0", "up")
        for s in self.sides:
            self.containers.verify(self.root, s.container.netns)

    @property
    def switched(self) -> bool:
        """The underlay is the switch namespace's bridge (more than two hosts)."""
        return len(self.sides) > 2

    def set_underlay(self, mtu: int, rate: str | None) -> None:
        if self.switched:
            sw = self.ns("sw")
            for s in self.sides:         # the switch carries every frame a host's link may send
                ip("-n", sw, "link", "set", f"p{s.index}", "mtu", str(mtu))
        for s in self.sides:
            apply_underlay(s.host, s.underlay_dev, mtu, rate)
        self.underlay_mtu, self.rate = mtu, rate

    def teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        try:
            remove_lab(self.prefix)
        finally:
            self.containers.close()
        log.info("lab %s removed", self.prefix)

    def facts(self) -> dict:
        return {"backend": "netns", "prefix": self.prefix, "underlay_mtu": self.underlay_mtu,
                "rate": self.rate, "hosts": len(self.sides), "cpus": self.placement.facts(),
                "underlay": "switch (a bridge in the lab's namespace)" if self.switched else "veth pair",
                **self.containers.facts(),
                "addresses": {f"h{s.index}": {"underlay": s.underlay_ip, "overlay": s.overlay_ip,
                                              "container": s.container_ip,
                                              "mgmt": self.mgmt_addrs(s.index)[1]} for s in self.sides}}


def remove_leftovers(opts: Options, inventory: str | None, force: bool) -> tuple[list[str], list[str]]:
    """The netns backend's `down`: labs on this machine whose owner is gone, and the local
    Kubernetes cluster of k8s/ when one of its daemons was killed (a running one with force)."""
    if inventory:
        raise HarnessError("down --inventory removes leftovers on SSH hosts: leave out --backend netns")
    from harness.testbeds.kubernetes import local as local_cluster    # the backend's package: on use only
    removed, kept = down(force=force)
    try:
        cluster = local_cluster.state()
        if cluster == "stopped" or (cluster == "up" and force):
            removed += local_cluster.remove()
        elif cluster == "up":
            kept.append("the local Kubernetes cluster (k8s/cluster.sh; make k8s-down removes it)")
    except HarnessError as e:
        kept.append(f"the local Kubernetes cluster: {e}")
    return removed, kept
