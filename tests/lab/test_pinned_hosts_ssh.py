"""Real hosts pinned to CPUs, for real: over the sshd "machines" of test_testbed_ssh.py, an
inventory's `cpus` puts each host's iperf3 clients and servers and its sleeve daemon (every
thread) on that host's CPUs, and a CPU a host lacks is refused in one line before anything
is made.

Nothing here depends on chance or timing: it reads the kernel's affinity of the processes
the run started, each while it runs (a client is read as soon as it has become iperf3, of
its two seconds)."""

from __future__ import annotations

import os
import pathlib
import time

import pytest
from test_testbed_ssh import _one_line, ob, ssh_lab  # noqa: F401 - the fixture

from conftest import needs_root
from harness import results
from harness.bed import Options
from harness.hosts.base import Host
from harness.hosts.pinned import parse
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.testbeds import ssh as ssh_backend

pytestmark = [needs_root(), pytest.mark.lab]


def _allowed(pid: int) -> set[int]:
    """The CPUs every thread of `pid` may run on (the threads must agree)."""
    seen = {frozenset(os.sched_getaffinity(int(t.name))) for t in pathlib.Path(f"/proc/{pid}/task").iterdir()}
    assert len(seen) == 1, f"threads of {pid} differ: {seen}"
    return set(next(iter(seen)))


def _became(pid: int, comm: str) -> None:
    """Until `pid` (sudo's shell, env, taskset in turn) has exec'd `comm`: the affinity read
    before would be theirs. A deadline only a hang reaches."""
    deadline = time.monotonic() + 20
    while pathlib.Path(f"/proc/{pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < deadline, f"{pid} never became {comm}"
        time.sleep(0.005)


class Watched(Host):
    """A side's host that notes, of every iperf3 and sleeve it starts, the CPUs it may run on.
    The hosts are namespaces of this machine, so a pid there is a pid here."""

    def __init__(self, host: Host, index: int, seen: list):
        self.host, self.index, self.seen, self.name = host, index, seen, host.name

    def start(self, argv):
        proc = self.host.start(argv)
        comm = os.path.basename(argv[0])[:15]
        if comm == "iperf3" or comm.startswith("sleeve"):
            _became(proc.pid, comm)
            role = "daemon" if comm != "iperf3" else "server" if "-s" in argv else "client"
            self.seen.append((self.index, role, _allowed(proc.pid)))
        return proc

    def run(self, argv, **kw):
        return self.host.run(argv, **kw)

    def put(self, *a, **kw):
        return self.host.put(*a, **kw)

    def get(self, *a, **kw):
        return self.host.get(*a, **kw)


def test_a_pinned_run_runs_each_hosts_tools_and_sleeve_on_its_cpus(ssh_lab, tmp_path, monkeypatch):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: a pinned host could not be told from an unpinned one")
    want = (str(cpus[-1]), str(cpus[0]))        # h0 (the clients') on the last CPU, h1 (the servers') on the first
    ssh_lab.bare()

    # A CPU the host does not have: one line naming the inventory and the host, nothing made.
    bad = ssh_lab.inventory("bad.toml", extra={1: f'cpus = "{cpus[-1] + 1}"\n'})
    p = ob("run", "--modes", "native", "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1",
           "--inventory", bad, "--results", str(tmp_path / "refused"), env=ssh_lab.env(), timeout=120)
    line = _one_line(p)
    assert f'h1: cpus = "{cpus[-1] + 1}" ({bad}) names CPU {cpus[-1] + 1}, which it cannot run on' in line, line
    assert not (tmp_path / "refused").exists() and ssh_lab.leftovers() == []

    inv = ssh_lab.inventory(extra={i: f'cpus = "{c}"\n' for i, c in enumerate(want)})
    monkeypatch.setenv("HOME", str(ssh_lab.tmp))        # no ~/.ssh of the machine's user applies
    sc = S.build({"matrix": {"modes": ["native", "sleeve"], "tests": ["iperf3.tcp"], "repeats": 1, "duration": 2,
                             "placements": ["host-host", "container-container"]},
                  "testbed": {"backend": "ssh", "inventory": inv}})
    tb = ssh_backend.open_testbed(sc, Options())
    seen: list = []
    plain = [(s.host, s.container) for s in tb.sides]
    try:
        tb.preflight(sc)
        tb.build(1500, None)
        assert tb.facts()["cpus"] == {"policy": "given", "hosts": {"h0": want[0], "h1": want[1]}}
        for s in tb.sides:
            s.host, s.container = Watched(s.host, s.index, seen), Watched(s.container, s.index, seen)
        store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
        Runner(sc, tb, store).run(S.expand(sc))
        recs = store.records()
    finally:
        for s, (host, container) in zip(tb.sides, plain):
            s.host, s.container = host, container       # teardown's removal must not carry the run's mark
        tb.teardown()
    assert [r["ok"] for r in recs if r["metric"] == "throughput_bps"] == [True] * 3, recs
    # native host-host, the sleeve host-host and container-container: a client and a server
    # each, and one sleeve per host
    roles = sorted((i, role) for i, role, _ in seen)
    assert roles == [(0, "client")] * 3 + [(0, "daemon")] + [(1, "daemon")] + [(1, "server")] * 3, roles
    for i, role, allowed in seen:
        assert allowed == set(parse(want[i])), (f"h{i}", role, allowed, want[i])
    assert ssh_lab.leftovers() == []
