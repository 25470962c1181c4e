"""Which CPUs each host's processes run on (testbeds/cpusets.py): the lab's split, real
hosts' CPU lists checked, the record run.json keeps and the table's footer line. The
commands that put a host there: tests/scripted/test_pinning_scripted.py."""

import pytest

from harness.analysis import tablefmt
from harness.core.errors import ScenarioError
from harness.hosts import pinned
from harness.hosts.scripted import ScriptedHost
from harness.run import scenario as S
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
    assert p.cpus == (None, None, None)
    assert p.facts() == {"policy": "scheduler", "hosts": {"h0": "unpinned", "h1": "unpinned", "h2": "unpinned"}}


@pytest.mark.parametrize("text, cpus", [
    ("0", [0]), ("2-3", [2, 3]), ("0,4-7", [0, 4, 5, 6, 7]), ("0-6:2", [0, 2, 4, 6]), (" 1 , 3 ", [1, 3]),
    ("3,1,1", [1, 3]), ("8191", [8191]),
])
def test_a_cpu_list_is_read_as_taskset_reads_it(text, cpus):
    assert pinned.parse(text) == cpus
    assert cpusets.cpu_list(text) == text.strip()


@pytest.mark.parametrize("text, why", [
    ("", "expected a CPU list"), ("  ", "expected a CPU list"), ("a", "'a' is not a CPU number or range"),
    ("2-", "'2-' is not a CPU number"), ("1,,2", "'' is not a CPU number"), ("-1", "'-1' is not"),
    ("0x3", "'0x3' is not"), ("3-1", "'3-1' is not a range of CPUs"), ("0-4:0", "'0-4:0' is not a range"),
    ("8192", "'8192' is not a range"), ("1\n2", "is not a CPU number"), ("2 3", "'2 3' is not"),
])
def test_a_malformed_cpu_list_is_refused_naming_the_part(text, why):
    with pytest.raises(ValueError) as e:
        pinned.parse(text)
    assert why in str(e.value)
    with pytest.raises(ValueError):
        pinned.Pinned(ScriptedHost("h0"), text)     # never a host pinned to nonsense


@pytest.mark.parametrize("cpus, allowed, lacking", [
    ("2-3", "0-3", []), ("2-3", "0-2", [3]), ("4,6", "0-3", [4, 6]), ("0-6:2", "0-3,6", [4]),
    ("1", "", []),          # no answer: nothing to judge by (taskset itself then says)
])
def test_cpus_a_host_cannot_run_on_are_named(cpus, allowed, lacking):
    assert cpusets.lacking(cpus, allowed) == lacking


def test_real_hosts_record_each_hosts_cpus_or_unpinned():
    assert cpusets.given(["2-3", None]).facts() == {"policy": "given", "hosts": {"h0": "2-3", "h1": "unpinned"}}
    assert cpusets.given([None, None]).facts() == {"policy": "unpinned",
                                                   "hosts": {"h0": "unpinned", "h1": "unpinned"}}
    assert cpusets.unpinned(3).facts() == {"policy": "unpinned",
                                           "hosts": {"h0": "unpinned", "h1": "unpinned", "h2": "unpinned"}}


def test_host_cpus_is_for_real_hosts_only_and_checked():
    assert S.build({"testbed": {"backend": "ssh", "host_cpus": "1"}}).host_cpus == "1"
    assert S.build({"testbed": {"backend": "vagrant", "host_cpus": "0-1"}}).host_cpus == "0-1"
    assert S.build({}).host_cpus is None
    with pytest.raises(ScenarioError, match=r"x.toml: \[testbed\] host_cpus: '1-': '1-' is not a CPU number"):
        S.build({"testbed": {"backend": "ssh", "host_cpus": "1-"}}, source="x.toml")
    with pytest.raises(ScenarioError, match=r"\[testbed\] host_cpus: pins real hosts \(backend ssh or vagrant\); "
                                            r".*lab_cpus"):
        S.build({"testbed": {"host_cpus": "1"}}, source="x.toml")
    with pytest.raises(ScenarioError, match=r"\[testbed\] host_cpus: pins real hosts .*pods"):
        S.build({"testbed": {"backend": "kubernetes", "host_cpus": "1"}}, source="x.toml")


def test_the_table_says_where_the_hosts_ran_and_how_cpus_idled():
    own = {"testbed": {"cpus": {"policy": "own", "hosts": {"h0": "0", "h1": "1"}, "shared": False}},
           "cpu_idle": "poll"}
    assert tablefmt.run_notes(own) == [
        "CPUs: each lab host on CPUs of its own (h0 on CPU 0, h1 on CPU 1).",
        "Idle CPUs polled (--poll-idle): no wake-up from a halted CPU in any mode's latency."]
    shared = {"testbed": {"cpus": {"policy": "own", "hosts": {"h0": "0", "h1": "1", "h2": "0"}, "shared": True}}}
    assert tablefmt.run_notes(shared) == ["CPUs: more lab hosts than CPUs, shared round-robin "
                                          "(h0 on CPU 0, h1 on CPU 1, h2 on CPU 0)."]
    assert tablefmt.run_notes({"testbed": {"backend": "ssh"}}) == []     # a run from before CPUs were recorded
    unpinned = {"testbed": {"backend": "ssh", "cpus": cpusets.given([None, None]).facts()}}
    assert tablefmt.run_notes(unpinned) == []                           # real hosts as the user runs them
    assert tablefmt.run_notes({"testbed": {"backend": "kubernetes", "cpus": cpusets.unpinned(2).facts()}}) == []


def test_the_table_says_when_real_hosts_were_pinned():
    meta = {"testbed": {"backend": "ssh", "cpus": cpusets.given(["2-3", None]).facts(),
                        "hosts": {"h0": {"name": "alpha"}, "h1": {"name": "beta"}}}}
    assert tablefmt.run_notes(meta) == [
        "CPUs: each host's tools and daemons pinned with taskset as given (alpha on CPU 2-3, beta unpinned)."]
