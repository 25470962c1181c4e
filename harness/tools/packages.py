"""Every command a run needs on a host, with the Debian package that installs it and how
it prints its version: one table for install hints and recorded versions.

The measurement tools declare theirs on their Tool (harness/tools/*.py); the system
commands the testbeds, modes and the sleeve's build use are listed here.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable

from harness.hosts.base import Host
from harness.tools import TOOLS

IPROUTE2 = r"iproute2-([0-9][\w.]*)"


@dataclasses.dataclass(frozen=True)
class Command:
    binary: str
    package: str
    version_argv: tuple[str, ...] = ()
    version_re: str = ""


SYSTEM: dict[str, Command] = {c.binary: c for c in (
    Command("ip", "iproute2", ("ip", "-V"), IPROUTE2),
    Command("tc", "iproute2", ("tc", "-V"), IPROUTE2),
    Command("ss", "iproute2", ("ss", "-V"), IPROUTE2),
    Command("bridge", "iproute2", ("bridge", "-V"), r"(?:iproute2-|utility, )([0-9][\w.]*)"),
    Command("ethtool", "ethtool", ("ethtool", "--version"), r"ethtool version (\S+)"),
    Command("nft", "nftables"),
    Command("sysctl", "procps"),
    Command("getconf", "libc-bin"),
    Command("etcd", "etcd-server", ("etcd", "--version"), r"etcd Version: (\S+)"),
    Command("curl", "curl", ("curl", "--version"), r"curl ([0-9][\w.]*)"),
    Command("sh", "dash"),          # iperf.crr runs iperf between two `date` stamps in sh
    Command("date", "coreutils"),
    Command("taskset", "util-linux"),  # a real host pinned to CPUs (inventory `cpus`)
    Command("gcc", "gcc"),
    Command("make", "make"),
)}


def command(binary: str) -> Command:
    """What is known of `binary`: a measurement tool's declaration, a system command's, or
    only its name (its package assumed to be called the same)."""
    for t in TOOLS.values():
        if t.binary == binary:
            return Command(t.binary, t.package, t.version_argv, t.version_re)
    return SYSTEM.get(binary, Command(binary, binary))


def install_hint(binaries: Iterable[str]) -> str:
    """`apt-get install -y PKG…` for the packages that provide `binaries`."""
    return "apt-get install -y " + " ".join(sorted({command(b).package for b in binaries}))


def has_version(binary: str) -> bool:
    return bool(command(binary).version_argv)


def version_of(host: Host, binary: str) -> str | None:
    """The version `binary` reports on `host` (None: not installed, or not said)."""
    c = command(binary)
    if not c.version_argv:
        return None
    done = host.run(list(c.version_argv), check=False, timeout=10)
    m = re.search(c.version_re, done.stdout + done.stderr)
    return m.group(1) if m else None
