"""A host whose every command runs on chosen CPUs: `taskset -c CPUS` in front of it.

It holds the host it wraps (the local machine, a namespace, an SSH host), as NetnsHost
does, so one mechanism pins the lab's hosts and real ones. Whatever a command starts (a
daemon's threads, a shell's children) inherits the affinity; taskset execs the command,
so a started process keeps its pid. Files and command streams are the wrapped host's.

A CPU list is what `taskset -c` reads: CPU numbers and ranges, comma-separated, a range
with an optional stride ("0", "2-3", "0,4-7", "0-6:2"). `parse` checks one and says which
CPUs it names, so a typo fails before a host is reached.
"""

from __future__ import annotations

import re

from harness.hosts.base import Host
from harness.hosts.wrapped import Wrapped

_PART = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
MAX_CPU = 8191          # the kernel's largest NR_CPUS


def parse(cpus: str) -> list[int]:
    """The CPUs a taskset CPU list names, in order; ValueError naming what is wrong."""
    if not isinstance(cpus, str) or not cpus.strip():
        raise ValueError(f"{cpus!r}: expected a CPU list as taskset -c reads it (\"2\", \"2-3\", \"0,4-7\")")
    out: set[int] = set()
    for part in cpus.split(","):
        m = _PART.match(part.strip())
        if not m:
            raise ValueError(f"{cpus!r}: {part.strip()!r} is not a CPU number or range "
                             f"(a CPU list as taskset -c reads it: \"2\", \"2-3\", \"0,4-7\")")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi < lo or step < 1 or hi > MAX_CPU:
            raise ValueError(f"{cpus!r}: {part.strip()!r} is not a range of CPUs (low-high, 0 to {MAX_CPU})")
        out.update(range(lo, hi + 1, step))
    return sorted(out)


def ranges(cpus: list[int] | set[int]) -> str:
    """CPUs as a CPU list: [0, 1, 2, 5] → "0-2,5"."""
    cpus = sorted(cpus)
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


def taskset(cpus: str) -> list[str]:
    """The words that put a command on `cpus`."""
    return ["taskset", "-c", cpus]


class Pinned(Wrapped):
    """`inner` with every command on CPUs `cpus` (a CPU list as taskset reads it)."""

    def __init__(self, inner: Host, cpus: str):
        parse(cpus)
        super().__init__(inner)
        self.cpus = cpus

    def front(self) -> list[str]:
        return taskset(self.cpus)

    def __repr__(self) -> str:
        return f"<Pinned {self.inner!r} on CPUs {self.cpus}>"
