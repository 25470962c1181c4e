"""Where the tools run for a placement: a host, a container behind its overlay bridge,
that container reached through the service in front of it (Side.service_ip), or a second
container beside the client's own (Side.neighbour: a local end, on the client's side).

The client runs on the pair's first host and the server on its second (a local end: beside
the client, on the first): sides 0 and 1 unless the case names its pair (harness/core/pairs.py).
"""

from __future__ import annotations

import dataclasses

from harness.bed import Side, Testbed
from harness.core.errors import HarnessError
from harness.core.placements import HOST, LOCAL, PLACEMENTS, SERVICE
from harness.hosts.base import Host
from harness.modes.base import Datapath


@dataclasses.dataclass(frozen=True)
class Endpoint:
    host: Host
    addr: str     # the address the peer reaches it at
    bind: str | None = None     # the address its server binds, where that is not `addr` (a
                                # Service's ClusterIP is no address of the pod behind it)


def _end(side: Side, dp: Datapath, where: str) -> Endpoint:
    own = dp.addrs.get(side.index, {})     # a mode's own addresses (the real Flannel's subnets)
    if where == HOST:
        return Endpoint(side.host, own.get("host") or (side.overlay_ip if dp.overlay else side.underlay_ip))
    if side.container is None:
        raise HarnessError(f"host {side.host.name} has no container endpoint")
    if where == SERVICE:
        if not side.service_ip:
            raise HarnessError(f"host {side.host.name} has no service in front of its container")
        return Endpoint(side.container, side.service_ip, bind=side.container_ip or None)
    return Endpoint(side.container, own.get("container") or side.container_ip)


def pair_sides(testbed: Testbed, src: str = "", dst: str = "") -> tuple[Side, Side]:
    """The (client, server) sides of a pair by host name; ("", ""): the first two."""
    if not src:
        return testbed.sides[0], testbed.sides[1]
    by = {s.name: s for s in testbed.sides}
    try:
        return by[src], by[dst]
    except KeyError as e:
        raise HarnessError(f"no host {e.args[0]!r} on this testbed (hosts: {', '.join(by)})") from None


def endpoints(testbed: Testbed, dp: Datapath, placement: str, src: str = "", dst: str = "") -> tuple[Endpoint, Endpoint]:
    """(client, server) for a placement on a deployed data path, between the pair's hosts."""
    try:
        p = PLACEMENTS[placement]
    except KeyError:
        raise HarnessError(f"unknown placement {placement!r}") from None
    if not dp.overlay and p.needs_overlay:
        raise HarnessError(f"placement {placement} needs an overlay; mode {dp.mode} has none")
    a, b = pair_sides(testbed, src, dst)
    return _end(a, dp, p.client), (_neighbour(a) if p.server == LOCAL else _end(b, dp, p.server))


def _neighbour(side: Side) -> Endpoint:
    """A local end: the second container beside the client side's own."""
    if side.neighbour is None:
        raise HarnessError(f"host {side.host.name} has no second container beside its own (a local end)")
    return Endpoint(side.neighbour, side.neighbour_ip)
