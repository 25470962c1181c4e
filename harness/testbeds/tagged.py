"""A host whose every command carries OVERLAYBENCH_PREFIX=<P> in its environment.

A remote testbed runs everything on its hosts through this (harness/testbeds/remote.py),
so a daemon started in the background inherits the mark and `overlaybench down
--inventory` finds what a killed run left on a host by it
(harness/testbeds/remote_down.py).
"""

from __future__ import annotations

from harness.hosts.base import Host
from harness.hosts.wrapped import Wrapped
from harness.testbeds.remote_down import MARK


class Tagged(Wrapped):
    """A host whose every command carries OVERLAYBENCH_PREFIX=<P> in its environment (not
    the byte streams it opens: they end with the connection)."""

    def __init__(self, inner: Host, prefix: str):
        super().__init__(inner)
        self.prefix = prefix

    def front(self) -> list[str]:
        return ["env", f"{MARK}={self.prefix}"]
