"""What modes and endpoints need from a pair of hosts, whatever brought them up.

The local lab (harness/lab.py) is one Testbed; remote backends (SSH, Vagrant) are
others. A mode only ever touches a testbed through its two Sides and their Hosts.
"""

from __future__ import annotations

import abc
import dataclasses
import pathlib

from harness.hosts.base import Host


@dataclasses.dataclass
class Side:
    """One host of the pair and the names of its parts."""

    index: int              # 0 (client side) or 1 (server side)
    host: Host
    underlay_dev: str       # the device facing the peer
    underlay_ip: str
    overlay_ip: str         # the host's own address on the overlay bridge
    bridge: str             # the overlay bridge the tunnel device and containers hang off
    container: Host | None = None
    container_ip: str = ""
    container_dev: str = ""  # device inside the container namespace
    container_port: str = ""  # the container's veth end on the bridge
    workdir: str = "/tmp"   # where files for this host go (keys, stats)


class Testbed(abc.ABC):
    """Two hosts joined by an underlay, each with an overlay bridge and a container."""

    sides: tuple[Side, Side]
    underlay_mtu: int
    rate: str | None
    overlay_prefix: int = 24
    accounting: str = "per-host"  # "machine" where both hosts share one kernel

    @abc.abstractmethod
    def set_underlay(self, mtu: int, rate: str | None) -> None:
        """Set the underlay MTU (both ends) and rate cap (None: uncapped)."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Remove everything this testbed made. Idempotent."""

    def peer(self, side: Side) -> Side:
        return self.sides[1 - side.index]

    def facts(self) -> dict:
        return {}

    @property
    def artifact_dir(self) -> pathlib.Path:
        raise NotImplementedError
