"""Which CPUs each lab host owns.

A lab host stands for a machine: every process the harness starts on it (the tools, the
data path's daemons, the containers' processes) runs on CPUs of its own, so a client and
its server never share a CPU by the scheduler's chance, as on two real machines. What it
cannot model: the hosts share one kernel, and the kernel's own work for a packet (softirq,
and veth handing a frame to its peer on the sending CPU) runs where the kernel puts it,
not on the receiving host's CPUs.

The CPUs this process may use are split into one contiguous group per host, as evenly as
they go (4 CPUs, 2 hosts: 0-1 and 2-3). With more hosts than CPUs, hosts share them
round-robin (3 hosts on 2 CPUs: 0, 1, 0), and the placement says so.
"""

from __future__ import annotations

import dataclasses
import os

OWN, SCHEDULER = "own", "scheduler"      # [testbed] lab_cpus
CHOICES = (OWN, SCHEDULER)


@dataclasses.dataclass(frozen=True)
class Placement:
    policy: str                         # own | scheduler
    cpus: tuple[str | None, ...]        # per host: a CPU list as taskset reads it, None: unpinned
    shared: bool = False                # more hosts than CPUs: some share

    def facts(self) -> dict:
        out: dict = {"policy": self.policy}
        if self.policy == OWN:
            out["hosts"] = {f"h{i}": c for i, c in enumerate(self.cpus)}
            out["shared"] = self.shared
        return out


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5"."""
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


def place(hosts: int, policy: str = OWN, available: list[int] | None = None) -> Placement:
    """Each of `hosts` hosts' CPUs under `policy`, from `available` (default: this process's)."""
    if policy == SCHEDULER:
        return Placement(SCHEDULER, (None,) * hosts)
    cpus = sorted(available if available is not None else os.sched_getaffinity(0))
    if hosts > len(cpus):
        return Placement(OWN, tuple(str(cpus[i % len(cpus)]) for i in range(hosts)), shared=True)
    per, extra = divmod(len(cpus), hosts)
    groups, at = [], 0
    for i in range(hosts):
        n = per + (1 if i < extra else 0)
        groups.append(_ranges(cpus[at:at + n]))
        at += n
    return Placement(OWN, tuple(groups))

