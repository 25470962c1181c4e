"""Which CPUs each lab host owns (testbeds/cpusets.py), and the commands that put it there."""

import pytest

from harness.analysis import tablefmt
from harness.hosts.netns import NetnsHost
from harness.testbeds import cpusets


@pytest.mark.parametrize("hosts, available, want, shared", [
    (2, [0, 1], ("0", "1"), False),
    (2, [0, 1, 2, 3], ("0-1", "2-3"), False),
    (3, [0, 1, 2, 3], ("0-1", "2", "3"), False),
    (2, [2, 3, 6, 7], ("2-3", "6-7"), False),
    (3, [0, 1], ("0", "1", "0"), True),
    (8, [0, 1], ("0", "1") * 4, True),
    (2, [0, 2, 4, 5], ("0,2", "4-5"), False),
])
def test_each_host_gets_its_own_cpus_and_shares_only_when_there_are_too_few(hosts, available, want, shared):
    p = cpusets.place(hosts, cpusets.OWN, available)
    assert p.cpus == want and p.shared is shared
    assert p.facts() == {"policy": "own", "hosts": {f"h{i}": c for i, c in enumerate(want)}, "shared": shared}


def test_the_scheduler_policy_pins_nothing():
    p = cpusets.place(3, cpusets.SCHEDULER, [0, 1])
    assert p.cpus == (None, None, None) and p.facts() == {"policy": "scheduler"}


def test_a_pinned_namespace_host_runs_every_command_under_taskset():
    assert NetnsHost("ob1-h0", cpus="1").wrap(["iperf3", "-s"]) == \
        ["ip", "netns", "exec", "ob1-h0", "taskset", "-c", "1", "iperf3", "-s"]
    assert NetnsHost("ob1-h0").wrap(["iperf3", "-s"]) == ["ip", "netns", "exec", "ob1-h0", "iperf3", "-s"]


def test_the_table_says_where_the_hosts_ran_and_how_cpus_idled():
    own = {"testbed": {"cpus": {"policy": "own", "hosts": {"h0": "0", "h1": "1"}, "shared": False}},
           "cpu_idle": "poll"}
    assert tablefmt.run_notes(own) == [
        "CPUs: each lab host on CPUs of its own (h0 on CPU 0, h1 on CPU 1).",
        "Idle CPUs polled (--poll-idle): no wake-up from a halted CPU in any mode's latency."]
    shared = {"testbed": {"cpus": {"policy": "own", "hosts": {"h0": "0", "h1": "1", "h2": "0"}, "shared": True}}}
    assert tablefmt.run_notes(shared) == ["CPUs: more lab hosts than CPUs, shared round-robin "
                                          "(h0 on CPU 0, h1 on CPU 1, h2 on CPU 0)."]
    assert tablefmt.run_notes({"testbed": {"backend": "ssh"}}) == []     # a remote run records no lab CPUs
