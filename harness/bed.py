"""The testbed contract: what modes, endpoints and the runner need from the hosts, whatever
brought them up.

A Testbed is two or more Sides (a host, its underlay device and address, an overlay bridge
and a container behind it) plus what only the testbed knows: how to check its hosts before
anything is made, how to build and remove its objects, where the sleeve binary comes
from, and how CPU is honestly measured on it (its CpuMeter). Modes, endpoints and the
runner touch hosts only through this; they never ask which backend they are on. It sits
below the modes that deploy on it and above the hosts it names, so modes import it as
plainly as any module below them; the backends that implement it live in harness/testbeds/.

Backends, by name (harness/testbeds/registry.py): `netns` (harness/testbeds/lab.py, the local lab),
`ssh`/`vagrant` (harness/testbeds/remote.py over SSH hosts) and `kubernetes`
(harness/testbeds/kubernetes/, pods on a cluster's nodes).
"""

from __future__ import annotations

import abc
import dataclasses
import pathlib
from typing import Any

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.hosts.base import Host, Process


@dataclasses.dataclass
class Side:
    """One host of the pair and the names of its parts."""

    index: int              # its place among the testbed's hosts (0, 1, …)
    host: Host
    underlay_dev: str       # the device facing the peer
    underlay_ip: str
    overlay_ip: str         # the host's own address on the overlay bridge
    bridge: str             # the overlay bridge the tunnel device and containers hang off
    container: Host | None = None
    container_ip: str = ""
    container_dev: str = ""  # device inside the container namespace
    container_port: str = ""  # the container's veth end on the bridge
    workdir: str = "/tmp"   # where files for this host go (keys, stats, the sleeve)
    prefix: str = ""        # prefix for devices a mode makes: "" inside a lab namespace,
                            # the testbed's prefix on a real host (only prefixed objects there)
    table: str = ""         # the side's nftables table (harness/net/confine.py): what it may forward
    service_ip: str = ""    # a load-balanced address in front of the container (a Kubernetes
                            # ClusterIP Service), where the testbed makes one
    neighbour: Host | None = None   # a second container beside the side's own, on the same host
                            # (a second pod on the node), where the testbed makes one
    neighbour_ip: str = ""  # its address

    def dev(self, name: str) -> str:
        """The name a mode's device gets on this host ("vx0" → "ob12ab-vx0" on a real host)."""
        return f"{self.prefix}-{name}" if self.prefix else name

    @property
    def name(self) -> str:
        return self.host.name


@dataclasses.dataclass(frozen=True)
class Options:
    """What a backend may need beyond the scenario (from command-line flags). The run's
    own settings are the session's (harness/run/session.py's RunSettings)."""

    accept_new_host_keys: bool = False
    vagrant_dir: str | None = None
    vagrant_destroy: bool = False
    vagrant_provider: str | None = None   # None: $VAGRANT_DEFAULT_PROVIDER, else docker
    run_id: str = ""                # the run the testbed is for: its labels and state file name it
    kubeconfig: str | None = None   # the kubernetes backend: None is $KUBECONFIG or ~/.kube/config
    kube_context: str | None = None
    nodes: tuple[str, ...] = ()     # the nodes to measure between (): two Ready, schedulable ones
    node_count: int = 2             # how many nodes, when they are picked (--hosts)
    image: str | None = None        # the tools image the pods run (None: localhost/overlaybench/tools:bookworm)
    kube_namespace: str | None = None   # an existing namespace to run in (None: a fresh one per run)
    pod_cpu: str | None = None      # REQUEST[:LIMIT] of every pod (None: the backend's default)
    pod_memory: str | None = None
    tolerate: tuple[str, ...] = ()  # KEY[=VALUE][:EFFECT] taints the pods tolerate
    pod_ready_timeout: float | None = None      # seconds for every pod to run (None: the default)
    older_than: float | None = None     # down: another machine's leftovers older than this (seconds)
    pull_secrets: tuple[str, ...] = ()  # image pull secrets the pods carry (copied into a fresh namespace)
    node_selector: tuple[str, ...] = ()     # KEY=VALUE node labels every candidate node has
    across_zones: bool = False      # every pair's nodes in different zones (topology.kubernetes.io/zone)
    same_node: bool = False         # both ends of every pair on one node (the CNI's node-local path)
    port_base: int | None = None    # the tools' server ports from here (None: their fixed ports)


class CpuMeter(abc.ABC):
    """How CPU is measured around one case on a testbed; the runner only calls this."""

    description: str = ""

    @abc.abstractmethod
    def begin(self, client: Host, server: Host) -> Any:
        """Snapshot before the client starts; returns what end() needs."""

    @abc.abstractmethod
    def end(self, begun: Any, client: Process, server: Process | None, wall: float) -> list[Sample]:
        """The CPU samples of the case (after the client exited, before the server stops)."""


class Testbed(abc.ABC):
    """Two or more hosts joined by an underlay, each with an overlay bridge and a container."""

    backend: str
    sides: tuple[Side, ...]
    underlay_mtu: int
    rate: str | None
    meter: CpuMeter
    overlay_prefix: int = 24
    # True where the testbed's hosts are this machine (the lab): then one run measures at a
    # time here, since two runs' loads on the same CPUs spoil both runs' ratios.
    measures_here: bool = False
    # An etcd the flannel modes use instead of starting their own (an SSH inventory's).
    etcd_endpoints: str | None = None
    flannel_network: str | None = None   # the flannel modes' network (None: their default)
    # The tools' server (port, data port) by binary where the testbed moves them (a cluster's
    # --port-base); None, or a binary not named: harness/run/procs.py's fixed ports.
    tool_ports: dict[str, tuple[int, int | None]] | None = None
    # A tool the harness builds (blast), where the testbed's hosts hold it already: the path
    # they run it by (a cluster's tools image: on PATH); None: built here and run by its path.
    tool_paths: dict[str, str] | None = None

    # ---------------------------------------------------------------- life cycle
    def preflight(self, sc) -> None:
        """Check every host for scenario `sc` before anything is made (reachable, root,
        tools, kernel features, the underlay); raise HarnessError naming host and fix."""

    def native_mtu(self) -> int:
        """The underlay's MTU as it is (what underlay MTU "auto" means)."""
        return 1500

    def fixed_underlay_mtu(self) -> int | None:
        """The one underlay MTU this testbed measures at, where it sets none (a cluster's
        nodes keep theirs); None where the scenario's MTUs are set on the underlay."""
        return None

    @abc.abstractmethod
    def build(self, underlay_mtu: int, rate: str | None) -> None:
        """Make the testbed's objects on its hosts (bridge, containers, underlay settings);
        on failure remove what was made and raise."""

    @abc.abstractmethod
    def set_underlay(self, mtu: int, rate: str | None) -> None:
        """Set the underlay MTU (both ends) and rate cap (None: uncapped), or refuse."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Remove everything this testbed made. Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    # ---------------------------------------------------------------- for modes
    def peer(self, side: Side) -> Side:
        """The other host of a two-host testbed (a mode between two hosts only)."""
        if len(self.sides) != 2:
            raise HarnessError(f"{len(self.sides)} hosts: a mode that has one peer runs between two hosts only")
        return self.sides[1 - side.index]

    def peers(self, side: Side) -> list[Side]:
        """Every other host: a mode across N hosts makes each one a peer of all the others."""
        return [s for s in self.sides if s.index != side.index]

    @abc.abstractmethod
    def install_sleeve(self, side: Side, source=None) -> str:
        """The path on side.host of a sleeve binary built from `source` (a
        harness.sleeve.build.Source; None: the one shipped with overlaybench)."""

    def pod_network(self) -> dict | None:
        """The pod network a cluster runs, as found (its CNI's DaemonSets and images, the pod
        interface's MTU, the encapsulation devices on its nodes); None: no cluster here."""
        return None

    def facts(self) -> dict:
        return {}

    def host_facts(self) -> dict:
        """Per host: kernel, CPU, NIC, tool versions … (run.json)."""
        return {}

    @property
    @abc.abstractmethod
    def artifact_dir(self) -> pathlib.Path:
        """A directory on this machine for the testbed's files (pinned builds, keys)."""
