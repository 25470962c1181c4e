"""Where the tools run for a placement: a host, or a container behind its overlay bridge.

The client always runs on side 0 and the server on side 1.
"""

from __future__ import annotations

import dataclasses

from harness.core.errors import HarnessError
from harness.hosts.base import Host
from harness.modes.base import Datapath
from harness.testbeds.base import Side, Testbed


@dataclasses.dataclass(frozen=True)
class Endpoint:
    host: Host
    addr: str     # the address the peer reaches it at


def _host_end(side: Side, dp: Datapath) -> Endpoint:
    return Endpoint(side.host, side.overlay_ip if dp.overlay else side.underlay_ip)


def _container_end(side: Side) -> Endpoint:
    if side.container is None:
        raise HarnessError(f"host {side.host.name} has no container endpoint")
    return Endpoint(side.container, side.container_ip)


def endpoints(testbed: Testbed, dp: Datapath, placement: str) -> tuple[Endpoint, Endpoint]:
    """(client, server) for a placement on a deployed data path."""
    a, b = testbed.sides
    if not dp.overlay and placement != "host-host":
        raise HarnessError(f"placement {placement} needs an overlay; mode {dp.mode} has none")
    if placement == "host-host":
        return _host_end(a, dp), _host_end(b, dp)
    if placement == "host-container":
        return _host_end(a, dp), _container_end(b)
    if placement == "container-container":
        return _container_end(a), _container_end(b)
    raise HarnessError(f"unknown placement {placement!r}")
