"""Where the two ends of a test sit: the one list of placements, in table order.

The client runs on side 0 and the server on side 1; each end is the side's host or the
container behind that host's overlay bridge. A container end needs an overlay, so the
native reference of every placement is the host-host figure.
"""

from __future__ import annotations

import dataclasses

HOST, CONTAINER = "host", "container"


@dataclasses.dataclass(frozen=True)
class Placement:
    name: str
    client: str         # HOST or CONTAINER, on side 0
    server: str         # HOST or CONTAINER, on side 1

    @property
    def needs_overlay(self) -> bool:
        return CONTAINER in (self.client, self.server)


PLACEMENTS: dict[str, Placement] = {p.name: p for p in (
    Placement("host-host", HOST, HOST),
    Placement("host-container", HOST, CONTAINER),
    Placement("container-container", CONTAINER, CONTAINER),
)}
NAMES = tuple(PLACEMENTS)
REFERENCE = "host-host"     # native's only placement: the reference of every ratio


def rank(name: object) -> tuple:
    """Sort key: table order, then unknown names (older runs) alphabetically."""
    s = str(name)
    return (NAMES.index(s), s) if s in PLACEMENTS else (len(NAMES), s)
