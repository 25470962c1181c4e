"""Which CPUs each host's processes run on, on every backend, and the record run.json keeps.

The lab. A lab host stands for a machine: every process the harness starts on it (the
tools, the data path's daemons, the containers' processes) runs on CPUs of its own, so a
client and its server never share a CPU by the scheduler's chance, as on two real
machines. What it cannot model: the hosts share one kernel, and the kernel's own work for
a packet (softirq, and veth handing a frame to its peer on the sending CPU) runs where the
kernel puts it, not on the receiving host's CPUs. The CPUs this process may use are split
into one contiguous group per host, as evenly as they go (4 CPUs, 2 hosts: 0-1 and 2-3).
With more hosts than CPUs, hosts share them round-robin (3 hosts on 2 CPUs: 0, 1, 0), and
the placement says so.

Real hosts (ssh, vagrant). A machine's CPUs are its own already: nothing is split, and
nothing is pinned unless asked. An inventory host's `cpus` (or `[testbed] host_cpus` /
`--host-cpus` for every host that names none) puts every process the harness starts on
that host — the tools' clients and servers, the data path's daemons, the commands that
set the testbed up — on those CPUs, through the same wrapper as the lab's hosts
(harness/hosts/pinned.py). Preflight checks that the host has `taskset` and may use
every CPU named.

Kubernetes: the tools run in pods, placed by the node's kubelet; nothing is pinned.

The record (run.json's testbed `cpus`):

    {"policy": "own" | "scheduler" | "given" | "unpinned",
     "hosts": {"h0": "2-3", "h1": "unpinned"},   # per host: where every process the harness
                                                 # started there ran (tools and daemons alike)
     "shared": false}                            # "own" only: more lab hosts than CPUs

own: the lab's hosts on CPUs of their own; scheduler: the lab's hosts unpinned (lab_cpus);
given: real hosts pinned as the inventory or host_cpus says, "unpinned" where neither
does; unpinned: nothing pinned anywhere (real hosts by default, pods).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from harness.hosts.pinned import parse, ranges

OWN, SCHEDULER = "own", "scheduler"      # [testbed] lab_cpus
CHOICES = (OWN, SCHEDULER)
GIVEN, UNPINNED = "given", "unpinned"    # real hosts, pods
HOST_CPUS_FROM = "[testbed] host_cpus / --host-cpus"


@dataclasses.dataclass(frozen=True)
class Placement:
    policy: str                         # own | scheduler | given | unpinned
    cpus: tuple[str | None, ...]        # per host: a CPU list as taskset reads it, None: unpinned
    shared: bool = False                # more hosts than CPUs: some share

    def facts(self) -> dict:
        out: dict = {"policy": self.policy, "hosts": {f"h{i}": c or UNPINNED for i, c in enumerate(self.cpus)}}
        if self.policy == OWN:
            out["shared"] = self.shared
        return out


def place(hosts: int, policy: str = OWN, available: list[int] | None = None) -> Placement:
    """Each of `hosts` lab hosts' CPUs under `policy`, from `available` (default: this process's)."""
    if policy == SCHEDULER:
        return Placement(SCHEDULER, (None,) * hosts)
    cpus = sorted(available if available is not None else os.sched_getaffinity(0))
    if hosts > len(cpus):
        return Placement(OWN, tuple(str(cpus[i % len(cpus)]) for i in range(hosts)), shared=True)
    per, extra = divmod(len(cpus), hosts)
    groups, at = [], 0
    for i in range(hosts):
        n = per + (1 if i < extra else 0)
        groups.append(ranges(cpus[at:at + n]))
        at += n
    return Placement(OWN, tuple(groups))


def given(cpus: Sequence[str | None]) -> Placement:
    """Real hosts' placement: each host's CPU list as given, or None (unpinned)."""
    return Placement(GIVEN if any(cpus) else UNPINNED, tuple(cpus))


def unpinned(hosts: int) -> Placement:
    return Placement(UNPINNED, (None,) * hosts)


def cpu_list(v: str) -> str:
    """A CPU list as taskset reads it, checked (the inventory's `cpus`, `host_cpus`)."""
    parse(v)
    return v.strip()


def lacking(cpus: str, allowed: str) -> list[int]:
    """The CPUs of `cpus` that a host whose Cpus_allowed_list is `allowed` may not run on."""
    try:
        have = set(parse(allowed))
    except ValueError:
        return []                       # an answer that is no CPU list: nothing to judge by
    return [c for c in parse(cpus) if c not in have]
