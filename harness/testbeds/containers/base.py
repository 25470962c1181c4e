"""What a container endpoint is, by `[testbed] containers` (`--containers`):

    netns    a network namespace made for it (the default)
    docker   a real Docker container (network_mode "none") whose network namespace is
             attached under the same name (`ip netns attach`), as `weave attach` did

Either way the testbed then gives that namespace a veth on the overlay bridge and the
tools run in it through `ip netns exec`, so per-process CPU and hard timeouts work the
same. A kind is picked from KINDS; nothing else asks which one it is.
"""

from __future__ import annotations

import abc
import importlib

from harness.core.errors import HarnessError
from harness.hosts.base import Host


class Containers(abc.ABC):
    kind: str

    def check(self, host: Host, name: str) -> list[str]:
        """Problems on `host` (named `name`) before anything is made: one line each."""
        return []

    @abc.abstractmethod
    def create(self, host: Host, netns: str, labels: dict[str, str]) -> None:
        """Make the container; afterwards `netns` names its network namespace on `host`."""

    def verify(self, host: Host, netns: str) -> None:
        """Once the testbed is built: raise if the container made as `netns` stopped since."""

    @abc.abstractmethod
    def remove(self, host: Host, netns: str) -> None:
        """Remove what create made. Must not raise for something already gone."""

    def facts(self) -> dict:
        return {"containers": self.kind}

    def close(self) -> None:
        """Release connections (after the testbed's containers are removed)."""

    @classmethod
    def remove_prefix(cls, host: Host, prefix: str) -> list[str]:
        """Remove every container of this kind that a testbed with `prefix` made on `host`
        (what `down` calls for a killed run's leftovers). Returns what went."""
        return []


class NetnsContainers(Containers):
    kind = "netns"

    def create(self, host, netns, labels):
        host.run(["ip", "netns", "add", netns])

    def remove(self, host, netns):
        host.run(["ip", "netns", "del", netns], check=False)


# A string is "module:Class", imported only when that kind is used (the Docker SDK is slow
# to import, and `overlaybench --help` must not wait for it).
KINDS: dict[str, type[Containers] | str] = {
    "netns": NetnsContainers,
    "docker": "harness.testbeds.containers.docker:DockerContainers",
}


def remove_prefix_everywhere(host: Host, prefix: str) -> list[str]:
    """Every kind's leftovers of `prefix` on `host` (a killed run's kind is not known)."""
    out: list[str] = []
    for kind in KINDS:
        out += type(get(kind)).remove_prefix(host, prefix)
    return out


def get(kind: str) -> Containers:
    try:
        cls = KINDS[kind]
    except KeyError:
        raise HarnessError(f"unknown container kind {kind!r} (known: {', '.join(KINDS)})") from None
    if isinstance(cls, str):
        mod, _, name = cls.partition(":")
        cls = getattr(importlib.import_module(mod), name)
    return cls()
