"""CPU accounting from /proc/stat and per-process stat (seed 004 used mpstat).

On the lab both hosts share one kernel and its CPUs, and VXLAN work runs in softirq,
charged to no process: the honest figure is the whole machine's busy share. On real
hosts each host's own /proc/stat gives its busy share.
"""

from __future__ import annotations

import dataclasses

from harness.hosts.base import Host


@dataclasses.dataclass(frozen=True)
class CpuTimes:
    busy: int    # jiffies: user + nice + system + irq + softirq + steal
    total: int   # busy + idle + iowait


def parse_proc_stat(text: str) -> CpuTimes:
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
            busy = user + nice + system + irq + softirq + steal
            return CpuTimes(busy, busy + idle + iowait)
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def busy_pct(a: CpuTimes, b: CpuTimes) -> float:
    """Busy share of all CPUs between two snapshots, 0..100."""
    dt = b.total - a.total
    return 100.0 * (b.busy - a.busy) / dt if dt > 0 else 0.0


def snapshot(host: Host) -> CpuTimes | None:
    done = host.run(["cat", "/proc/stat"], check=False, timeout=10)
    return parse_proc_stat(done.stdout) if done.ok else None


def process_seconds(host: Host, pid: int, clk_tck: int = 100) -> float | None:
    """utime + stime of a running process, in seconds."""
    done = host.run(["cat", f"/proc/{pid}/stat"], check=False, timeout=10)
    if not done.ok:
        return None
    # The command name may contain spaces; fields after the closing paren are fixed.
    rest = done.stdout.rsplit(")", 1)[-1].split()
    return (int(rest[11]) + int(rest[12])) / clk_tck
