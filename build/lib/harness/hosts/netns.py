"""A network namespace on this machine: LocalHost plus `ip netns exec NS`."""

from __future__ import annotations

from harness.hosts.local import LocalHost


class NetnsHost(LocalHost):
    """Shares the file system with the root namespace, so put() is a local copy."""

    def __init__(self, netns: str, name: str | None = None):
        super().__init__(name or netns)
        self.netns = netns

    def wrap(self, argv):
        return ["ip", "netns", "exec", self.netns, *argv]
