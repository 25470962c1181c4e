"""Where the two ends of a test sit: the one list of placements, in table order.

The client runs on side 0 and the server on side 1; each end is the side's host or the
container behind that host's overlay bridge. A container end needs an overlay, so the
native reference of every placement is the host-host figure. A service end is the
server's container reached through a load-balanced address in front of it (a Kubernetes
ClusterIP Service): only a testbed that makes one has it (Side.service_ip). A local end
is a second container beside the client's own, on the client's host (Side.neighbour): the
pod network's node-local path, container to container with no tunnel between them; only
a testbed that makes one has it. Service and local ends are measured only by the modes
that name their placements (the `cni` mode); every other mode measures the placements
whose ends are hosts and containers only (HOST_AND_CONTAINER).
"""

from __future__ import annotations

import dataclasses

HOST, CONTAINER, SERVICE, LOCAL = "host", "container", "service", "local"


@dataclasses.dataclass(frozen=True)
class Placement:
    name: str
    client: str         # HOST or CONTAINER, on side 0
    server: str         # HOST, CONTAINER or SERVICE on side 1, or LOCAL: beside the client on side 0

    @property
    def needs_overlay(self) -> bool:
        return bool({CONTAINER, SERVICE, LOCAL} & {self.client, self.server})

    @property
    def needs_service(self) -> bool:
        return SERVICE in (self.client, self.server)

    @property
    def needs_local(self) -> bool:
        return LOCAL in (self.client, self.server)


PLACEMENTS: dict[str, Placement] = {p.name: p for p in (
    Placement("host-host", HOST, HOST),
    Placement("host-container", HOST, CONTAINER),
    Placement("container-container", CONTAINER, CONTAINER),
    Placement("container-service", CONTAINER, SERVICE),
    Placement("same-node", CONTAINER, LOCAL),
)}
NAMES = tuple(PLACEMENTS)
# what a mode measures unless it says otherwise: every placement whose ends are only hosts
# and containers (no service in front, no second container beside the client)
HOST_AND_CONTAINER = tuple(n for n, p in PLACEMENTS.items() if {p.client, p.server} <= {HOST, CONTAINER})
REFERENCE = "host-host"     # native's only placement: the reference of every ratio


def rank(name: object) -> tuple:
    """Sort key: table order, then unknown names (older runs) alphabetically."""
    s = str(name)
    return (NAMES.index(s), s) if s in PLACEMENTS else (len(NAMES), s)
