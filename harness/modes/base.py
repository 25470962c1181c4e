"""The Mode contract: check what the host pair can do, deploy, tear down.

A mode is stateless; what one deployment made is in its Datapath, which teardown gets
back. Modes reach hosts only through testbed.sides, so the same code drives the local
lab and remote machines.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import signal
import time
from typing import Callable

from harness.bed import Side, Testbed
from harness.core.errors import HarnessError
from harness.core.placements import HOST_AND_CONTAINER
from harness.hosts.base import Process
from harness.net import confine

log = logging.getLogger(__name__)


# ethtool -k features worth recording: the ones that decide how big the units are
# that each device hands on (and so what an overlay costs).
OFFLOAD_KEYS = ("rx-checksumming", "tx-checksumming", "scatter-gather", "tcp-segmentation-offload",
                "generic-segmentation-offload", "generic-receive-offload", "large-receive-offload",
                "tx-udp_tnl-segmentation", "rx-udp-gro-forwarding", "tx-udp-segmentation")


@dataclasses.dataclass
class Datapath:
    """What one deployment of a mode made, and what carries the traffic."""

    mode: str
    kind: str                       # what carries traffic: native | fastdp | sleeve
    overlay_mtu: int
    devices: dict[int, list[str]] = dataclasses.field(default_factory=dict)  # side → devices to record
    processes: dict[int, Process] = dataclasses.field(default_factory=dict)  # side → daemon
    info: dict = dataclasses.field(default_factory=dict)  # flags, versions, decisions
    # side → {"host": …, "container": …}: endpoint addresses of a mode's own (the real
    # Flannel's subnets), where the side's flat overlay addresses are not the ones to use
    addrs: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    # what the deployment runs beside its data path (an etcd): stopped at teardown, its CPU
    # not the data path's
    services: list = dataclasses.field(default_factory=list)

    @property
    def overlay(self) -> bool:
        return self.kind != "native"


class Mode(abc.ABC):
    """An overlay mode. A module of this package that defines a subclass with its own
    `name` registers it (harness/modes/__init__.py): what follows is all the harness
    needs to know of a mode beyond deploy and teardown."""

    name: str
    kind: str                       # what carries the traffic: native | fastdp | sleeve | ...
    order: int = 1000               # its place in tables and plots (lower first)
    colour: str = ""                # its colour in the report's plots and legend ("": one derived from the name)
    features: tuple[str, ...] = ()  # kernel features the hosts need (probed by preflight, named by doctor)
    ships_sleeve: bool = False      # deploys the sleeve: each host builds or receives its binary
    overhead: int = 0               # bytes the encapsulation takes from the underlay MTU
    placements: tuple[str, ...] = HOST_AND_CONTAINER
    binaries: tuple[str, ...] = ()  # commands it needs on every host (checked by preflight)
    description: str = ""
    # deploys across more than two hosts, each a peer of every other (testbed.peers); a mode
    # that is not is refused on a testbed of more before anything is made
    multi_host: bool = False

    def overlay_mtu(self, underlay_mtu: int, requested: int | str) -> int:
        """The overlay MTU for `requested` ("auto" or a number), refused if it cannot fit."""
        fit = underlay_mtu - self.overhead
        if requested == "auto":
            return fit
        mtu = int(requested)
        if mtu < 576:
            raise HarnessError(f"overlay MTU {mtu} for mode {self.name}: below 576, IPv4's minimum")
        if mtu > fit:
            raise HarnessError(
                f"overlay MTU {mtu} does not fit mode {self.name} on underlay MTU {underlay_mtu}: "
                f"its encapsulation adds {self.overhead} bytes, so at most {fit}")
        return mtu

    def overhead_on(self, testbed) -> int:
        """The bytes its encapsulation takes on `testbed`: the stated `overhead`, unless the
        mode is found rather than deployed (cni), where the testbed tells it."""
        return self.overhead

    def local_check(self) -> None:
        """Raise HarnessError if this machine cannot ship the mode (a binary not built):
        called before any host is reached."""

    def check(self, testbed: Testbed) -> None:
        """Raise UnsupportedError if this host pair cannot run the mode."""

    @abc.abstractmethod
    def deploy(self, testbed: Testbed, overlay_mtu: int) -> Datapath:
        """Bring the data path up between the testbed's two hosts."""

    @abc.abstractmethod
    def teardown(self, testbed: Testbed, dp: Datapath) -> None:
        """Undo deploy. Must not raise for something already gone."""

    def counters(self, testbed: Testbed, dp: Datapath) -> dict | None:
        """The data path's own counters for the case just run (kept under raw/); None: none."""
        return None


def stop_daemon(side: Side, dp: Datapath | None, what: str) -> None:
    """Stop the side's data-path daemon of `dp`, if any; an exit other than SIGTERM's is
    logged with its last output, never raised (teardown goes on)."""
    proc = dp.processes.get(side.index) if dp else None
    if proc is None:
        return
    out = proc.stop()
    if out.returncode not in (0, -signal.SIGTERM, None):
        log.warning("%s: %s exited %s: %s", side.host.name, what, out.returncode, out.stderr.strip()[-300:])


def wait_ready(side: Side, proc: Process, ready: Callable[[], bool], what: str, timeout: float,
               exited: str = "exited before ready") -> None:
    """Poll a daemon just started until `ready()` (its device up, its socket there), every
    50 ms. HarnessError "<host>: <what> <exited>: <its last line of output>" if the daemon
    exits first, "<host>: <what> not ready after <timeout>s" if `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.wait(0)
            why = (out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}").splitlines()[-1]
            raise HarnessError(f"{side.host.name}: {what} {exited}: {why}")
        if ready():
            return
        time.sleep(0.05)
    raise HarnessError(f"{side.host.name}: {what} not ready after {timeout:.0f}s")


def reset_overlay_path(side: Side, mtu: int, tunnel_dev: str | None) -> None:
    """Give every device on one side's overlay path the overlay MTU, and forget the
    neighbours the previous mode taught the host and its container (an L2 mode leaves
    the peer container's real MAC cached, which a routed L3 mode never answers for)."""
    h = side.host
    h.run(["ip", "neigh", "flush", "dev", side.bridge], check=False)
    if side.container is not None:
        side.container.run(["ip", "neigh", "flush", "dev", side.container_dev], check=False)
    if tunnel_dev:
        h.run(["ip", "link", "set", tunnel_dev, "mtu", str(mtu)])
    if side.container is not None:
        h.run(["ip", "link", "set", side.container_port, "mtu", str(mtu)])
        side.container.run(["ip", "link", "set", side.container_dev, "mtu", str(mtu)])
    h.run(["ip", "link", "set", side.bridge, "mtu", str(mtu)])


def offloads_of(host, dev: str) -> dict[str, str]:
    """ethtool -k of one device: the features in OFFLOAD_KEYS, or {"error": why}."""
    done = host.run(["ethtool", "-k", dev], check=False, timeout=10)
    if not done.ok:
        return {"error": (done.stderr.strip() or "ethtool failed").splitlines()[-1]}
    feats = {}
    for line in done.stdout.splitlines()[1:]:
        key, _, val = line.strip().partition(":")
        if key in OFFLOAD_KEYS:
            feats[key] = val.strip()
    return feats


def offloads(side: Side, devs: list[str]) -> dict[str, dict[str, str]]:
    """ethtool -k of the given devices on one side (container devices as 'ctr:eth0')."""
    out = {}
    for dev in devs:
        host, name = side.host, dev
        if dev.startswith("ctr:"):
            host, name = side.container, dev[4:]
        out[dev] = offloads_of(host, name)
    return out


def route_l3(side: Side, peer: Side, dev: str) -> None:
    """Wire an L3 tunnel device (TUN, WireGuard) into one side's flat overlay /24: route
    the peer's overlay and container /32s through `dev`, and let the bridge answer ARP
    for them (proxy ARP, no delay), so the host and its container reach the far side
    as if it were on the same segment."""
    h = side.host
    for dst in (peer.overlay_ip, peer.container_ip):
        if dst:
            h.run(["ip", "route", "replace", f"{dst}/32", "dev", dev, "src", side.overlay_ip])
    # Forwarding on these two devices only, never host-wide (a real host's ip_forward is
    # not overlaybench's to change); the kernel forwards what arrives on them anywhere, so
    # the side's table (harness/net/confine.py) lets the tunnel reach the bridge and nothing
    # else, before forwarding is on.
    if side.table:
        confine.allow_tunnel(h, side.table, dev)
    for d in (side.bridge, dev):
        h.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{d}.forwarding=1"])
    h.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{side.bridge}.proxy_arp=1"])
    h.run(["sysctl", "-q", "-w", f"net.ipv4.neigh.{side.bridge}.proxy_delay=0"])


def unroute_l3(side: Side, peer: Side, dev: str) -> None:
    """Undo route_l3: the routes, proxy ARP off, the proxy delay back to the host's
    default. Never raises for what is already gone."""
    h = side.host
    for dst in (peer.overlay_ip, peer.container_ip):
        if dst:
            h.run(["ip", "route", "del", f"{dst}/32", "dev", dev], check=False)
    if side.table:
        confine.forget_tunnel(h, side.table, dev)
    h.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{side.bridge}.proxy_arp=0"], check=False)
    default = h.run(["sysctl", "-n", "net.ipv4.neigh.default.proxy_delay"], check=False)
    if default.ok and default.stdout.strip().isdigit():
        h.run(["sysctl", "-q", "-w", f"net.ipv4.neigh.{side.bridge}.proxy_delay={default.stdout.strip()}"],
              check=False)
