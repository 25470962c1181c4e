"""The lab's hosts on CPUs of their own, for real: every process a host or its container
starts, and every thread of a data path's daemon, may run only on that host's CPUs.

Nothing here depends on chance: it reads the kernel's affinity of processes it started."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from conftest import needs_root
from harness import modes
from harness.testbeds import cpusets

pytestmark = [needs_root(), pytest.mark.lab]


def _running(pid: int, comm: str) -> None:
    """Until `pid` has become `comm` (ip netns exec and taskset exec it in turn): the
    affinity read before that would be ip's. A deadline only a hang reaches."""
    deadline = time.monotonic() + 20
    while pathlib.Path(f"/proc/{pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < deadline, f"{pid} never became {comm}"
        time.sleep(0.01)


def _allowed(pid: int) -> set[int]:
    """The CPUs every thread of `pid` may run on (the union over its threads, which must agree)."""
    seen = set()
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        seen.add(frozenset(os.sched_getaffinity(int(task.name))))
    assert len(seen) == 1, f"threads of {pid} differ: {seen}"
    return set(next(iter(seen)))


def _cpus(spec: str) -> set[int]:
    out = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def test_every_process_of_a_host_and_its_container_runs_on_the_hosts_cpus(lab):
    want = cpusets.place(len(lab.sides))
    assert lab.facts()["cpus"] == want.facts()
    procs = []
    try:
        for s in lab.sides:
            for host in (s.host, s.container):
                p = host.start(["sleep", "60"])
                procs.append(p)
                _running(p.pid, "sleep")
                assert _allowed(p.pid) == _cpus(want.cpus[s.index]), (host, want.cpus[s.index])
    finally:
        for p in procs:
            p.stop()


def test_a_sleeves_every_thread_runs_on_its_hosts_cpus(lab):
    mode = modes.get("sleeve")
    dp = mode.deploy(lab, 1450)
    try:
        for i, proc in dp.processes.items():
            assert _allowed(proc.pid) == _cpus(lab.placement.cpus[i]), f"h{i}'s sleeve"
    finally:
        mode.teardown(lab, dp)
