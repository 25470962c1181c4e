"""CPU accounting from /proc/stat and per-process stat (seed 004 used mpstat).

On the lab both hosts share one kernel and its CPUs, and VXLAN work runs in softirq,
charged to no process: the honest figure is the whole machine's busy share
(MachineMeter). On real hosts each host's own /proc/stat gives its busy share
(PerHostMeter). A testbed picks its meter; the runner only calls it.
"""

from __future__ import annotations

import dataclasses
import weakref

from harness.bed import CpuMeter
from harness.core.samples import Sample
from harness.hosts.base import Host, Process


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


_CLK_TCK: "weakref.WeakKeyDictionary[Host, int]" = weakref.WeakKeyDictionary()


def clk_tck(host: Host) -> int:
    """The host's clock ticks per second (getconf CLK_TCK), asked once per host."""
    if host not in _CLK_TCK:
        done = host.run(["getconf", "CLK_TCK"], check=False, timeout=10)
        _CLK_TCK[host] = int(done.stdout.strip()) if done.ok and done.stdout.strip().isdigit() else 100
    return _CLK_TCK[host]


def parse_process_seconds(text: str, ticks: int) -> float | None:
    """utime + stime from one /proc/PID/stat line, in seconds."""
    # The command name may contain spaces; fields after the closing paren are fixed.
    rest = text.rsplit(")", 1)[-1].split()
    try:
        return (int(rest[11]) + int(rest[12])) / ticks
    except (IndexError, ValueError):
        return None


def process_seconds(host: Host, pid: int) -> float | None:
    """utime + stime of a running process, in seconds."""
    done = host.run(["cat", f"/proc/{pid}/stat"], check=False, timeout=10)
    if not done.ok:
        return None
    return parse_process_seconds(done.stdout, clk_tck(host))


def _pct(seconds: float | None, wall: float) -> float | None:
    return None if seconds is None or wall <= 0 else round(100 * seconds / wall, 2)


class MachineMeter(CpuMeter):
    """Both hosts share one kernel (the lab): the machine's busy share as cpu_total_pct,
    and the client's and server's own CPU (% of one core) as cpu_client_pct/cpu_server_pct."""

    description = ("machine: the whole machine's busy share of all CPUs from /proc/stat "
                   "(user+nice+system+irq+softirq+steal) as cpu_total_pct; per-process CPU of "
                   "the client and server tools and the sleeve daemons as % of one CPU")

    def __init__(self, host: Host):
        self.host = host

    def begin(self, client, server):
        return snapshot(self.host)

    def end(self, begun, client, server, wall):
        after = snapshot(self.host)
        out = []
        if begun and after:
            out.append(Sample("cpu_total_pct", round(busy_pct(begun, after), 2), "pct"))
        for metric, proc in (("cpu_client_pct", client), ("cpu_server_pct", server)):
            pct = _pct(proc.cpu_seconds if proc is not None else None, wall)
            if pct is not None:
                out.append(Sample(metric, pct, "pct"))
        return out


class PerHostMeter(CpuMeter):
    """Each host has its own kernel and CPUs: each host's busy share of all its CPUs, from
    its own /proc/stat before and after the case, as cpu_client_pct and cpu_server_pct."""

    description = ("per-host: each host's busy share of all its CPUs from its own /proc/stat "
                   "(user+nice+system+irq+softirq+steal) as cpu_client_pct (client's host) and "
                   "cpu_server_pct (server's host); the sleeve daemons' CPU as % of one CPU")

    def begin(self, client, server):
        return (client, server, snapshot(client), snapshot(server))

    def end(self, begun, client_proc: Process, server_proc: Process | None, wall):
        client, server, a_c, a_s = begun
        out = []
        for metric, host, a in (("cpu_client_pct", client, a_c), ("cpu_server_pct", server, a_s)):
            b = snapshot(host)
            if a and b:
                out.append(Sample(metric, round(busy_pct(a, b), 2), "pct"))
        return out
