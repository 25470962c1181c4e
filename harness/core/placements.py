"""Where the two ends of a test sit: the one list of placements, in table order.

The client runs on side 0 and the server on side 1; each end is the side's host or the
container behind that host's overlay bridge. A container end needs an overlay, so the
native reference of every placement is the host-host figure. A service end is the
server's container reached through a load-balanced address in front of it (a Kubernetes
ClusterIP Service): only a testbed that makes one has it (Side.service_ip), and only the
modes that name the placement measure it (the `cni` mode).
"""

from __future__ import annotations

import dataclasses

HOST, CONTAINER, SERVICE = "host", "container", "service"


@dataclasses.dataclass(frozen=True)
class Placement:
    name: str
    client: str         # HOST or CONTAINER, on side 0
    server: str         # HOST, CONTAINER or SERVICE, on side 1

    @property
    def needs_overlay(self) -> bool:
        return bool({CONTAINER, SERVICE} & {self.client, self.server})

    @property
    def needs_service(self) -> bool:
        return SERVICE in (self.client, self.server)


PLACEMENTS: dict[str, Placement] = {p.name: p for p in (
    Placement("host-host", HOST, HOST),
    Placement("host-container", HOST, CONTAINER),
    Placement("container-container", CONTAINER, CONTAINER),
    Placement("container-service", CONTAINER, SERVICE),
)}
NAMES = tuple(PLACEMENTS)
# what a mode measures unless it says otherwise: every placement without a service end
WITHOUT_SERVICE = tuple(n for n, p in PLACEMENTS.items() if not p.needs_service)
REFERENCE = "host-host"     # native's only placement: the reference of every ratio


def rank(name: object) -> tuple:
    """Sort key: table order, then unknown names (older runs) alphabetically."""
    s = str(name)
    return (NAMES.index(s), s) if s in PLACEMENTS else (len(NAMES), s)
