"""Hosts pinned to CPUs, on ScriptedHosts: a command carries `taskset -c LIST` exactly when
its host was given LIST (the lab's namespaces, and real hosts by the inventory's `cpus` or
the run's host_cpus), whatever runs it — a tool's client or server through the runner, a
daemon, a container's command; preflight asks the host unpinned and says in one line each
what a pinned host lacks. tests/lab/test_pinned_hosts_ssh.py reads the real affinity."""

from __future__ import annotations

import shlex

import pytest
from captures import capture
from scripted_fixtures import ScriptedTestbed, forbid_sleep

from harness import results
from harness.bed import Options
from harness.core.errors import HarnessError
from harness.hosts.netns import NetnsHost
from harness.hosts.scripted import ScriptedHost, ScriptedProcess
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.testbeds import cpusets, preflight
from harness.testbeds.inventory import HostSpec
from harness.testbeds.remote import RemoteTestbed

OFFLOADS = "Features for dev:\ngeneric-segmentation-offload: on\n"


def test_a_pinned_namespace_runs_and_starts_every_command_under_taskset():
    inner = ScriptedHost("root")
    inner.expect("taskset -c 1 ip netns exec ob1-h0 ip link show")
    inner.expect_start("taskset -c 1 ip netns exec ob1-h0 iperf3 -s", ScriptedProcess.runs())
    inner.expect("ip netns exec ob1-h1 ip link show")
    pinned, free = NetnsHost("ob1-h0", host=inner, cpus="1"), NetnsHost("ob1-h1", host=inner)
    pinned.run(["ip", "link", "show"])
    proc = pinned.start(["iperf3", "-s"])
    assert proc.argv == ["iperf3", "-s"]            # what the caller asked for
    free.run(["ip", "link", "show"])
    inner.assert_all_used()


def remote(cpus=("2-3", None), host_cpus=None) -> tuple[RemoteTestbed, tuple[ScriptedHost, ...]]:
    specs = tuple(HostSpec(name=f"node{i}", address=f"10.1.0.{i + 1}", underlay_interface="eth1",
                           underlay_address=f"10.1.0.{i + 1}", cpus=c) for i, c in enumerate(cpus))
    raw = tuple(ScriptedHost(f"node{i}") for i in range(len(cpus)))
    return RemoteTestbed(specs, raw, Options(), host_cpus=host_cpus, source="inv.toml"), raw


def test_a_real_host_given_cpus_runs_everything_there_and_the_other_nothing_pinned():
    tb, raw = remote()
    mark = f"env OVERLAYBENCH_PREFIX={tb.prefix}"
    try:
        raw[0].expect(f"taskset -c 2-3 {mark} ip link show")
        raw[0].expect_start(f"taskset -c 2-3 {mark} /run/sleeve --peer 10.1.0.2", ScriptedProcess.runs())
        raw[0].expect_start(f"taskset -c 2-3 {mark} ip netns exec {tb.prefix}-c0 iperf3 -s", ScriptedProcess.runs())
        raw[1].expect(f"{mark} ip link show")
        raw[1].expect_start(f"{mark} ip netns exec {tb.prefix}-c1 iperf3 -s", ScriptedProcess.runs())
        tb.sides[0].host.run(["ip", "link", "show"])
        tb.sides[0].host.start(["/run/sleeve", "--peer", "10.1.0.2"])        # a daemon, as modes start them
        tb.sides[0].container.start(["iperf3", "-s"])
        tb.sides[1].host.run(["ip", "link", "show"])
        tb.sides[1].container.start(["iperf3", "-s"])
        for h in raw:
            h.assert_all_used()
        assert tb.facts()["cpus"] == {"policy": "given", "hosts": {"h0": "2-3", "h1": "unpinned"}}
    finally:
        tb.teardown()


@pytest.mark.parametrize("cpus, host_cpus, want", [
    ((None, None), None, {"policy": "unpinned", "hosts": {"h0": "unpinned", "h1": "unpinned"}}),
    ((None, None), "1", {"policy": "given", "hosts": {"h0": "1", "h1": "1"}}),
    (("0", None), "1", {"policy": "given", "hosts": {"h0": "0", "h1": "1"}}),     # the inventory's own first
])
def test_the_runs_host_cpus_pins_the_hosts_the_inventory_leaves_unpinned(cpus, host_cpus, want):
    tb, raw = remote(cpus, host_cpus)
    try:
        assert tb.facts()["cpus"] == want
        for s, h in zip(tb.sides, raw):
            h.allow(lambda argv: True)
            s.host.run(["true"])
            pin = want["hosts"][f"h{s.index}"]
            assert h.commands == [[*(["taskset", "-c", pin] if pin != "unpinned" else []),
                                   "env", f"OVERLAYBENCH_PREFIX={tb.prefix}", "true"]]
    finally:
        tb.teardown()


def test_a_case_runs_its_client_on_the_pinned_host_and_its_server_unpinned(tmp_path, monkeypatch):
    """Through the runner: every command the case sends node0 (the client's host) carries
    its CPUs, none that it sends node1 does."""
    forbid_sleep(monkeypatch)
    tb, raw = remote()
    mark = shlex.split(f"env OVERLAYBENCH_PREFIX={tb.prefix}")
    pin = ["taskset", "-c", "2-3", *mark]

    def on(prefix, line):
        return lambda argv: argv == [*prefix, *shlex.split(line)]

    out, err = capture("iperf3_tcp_1")
    raw[0].expect_start(on(pin, "iperf3 -c 10.1.0.2 -p 5201 -t 2 -J -P 1"),
                        ScriptedProcess.exits(0, out, err, cpu_seconds=0.5))
    raw[1].expect_start(on(mark, "iperf3 -s -1 -p 5201"), ScriptedProcess.runs())
    raw[1].expect(on(mark, "ss -Hltn 'sport = :5201'"), stdout="LISTEN 0 5 *:5201 *:*\n")
    raw[0].allow(lambda argv: argv[:len(pin)] == pin and "ethtool" in argv, stdout=OFFLOADS)
    raw[1].allow(lambda argv: argv[:len(mark)] == mark and "ethtool" in argv, stdout=OFFLOADS)
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp"], "placements": ["host-host"],
                             "repeats": 1, "duration": 2}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    try:
        Runner(sc, ScriptedTestbed(tb.sides, tmp_path / "artifacts"), store).run(S.expand(sc))
        for h in raw:
            h.assert_all_used()
        assert all(c[:3] == ["taskset", "-c", "2-3"] for c in raw[0].commands) and raw[0].commands
        assert not any("taskset" in c for c in raw[1].commands) and raw[1].commands
        assert [r["ok"] for r in store.records() if r["metric"] == "throughput_bps"] == [True]
    finally:
        tb.teardown()


def test_preflight_asks_a_pinned_host_unpinned_for_taskset_and_its_cpus(monkeypatch):
    """The check runs without the host's pin (which would fail where taskset is missing),
    asks for taskset beside the tools and for the CPUs the host may use; each problem is a
    line naming the host, the CPU list and where it was given."""
    monkeypatch.delenv("OVERLAYBENCH_SLEEVE_BINARY", raising=False)
    tb, raw = remote(("2-3", "4"), host_cpus=None)
    mark = ["env", f"OVERLAYBENCH_PREFIX={tb.prefix}"]
    asked = []

    def check(answer):
        def match(argv):
            if argv[:3] == [*mark, "env"] and argv[-3:] == ["sh", "-c", preflight.SCRIPT]:
                asked.append(argv)
                return True
            return False
        return match

    try:
        raw[0].expect(check(0), stdout="allowed 0-2\n")
        raw[0].expect([*mark, "ip", "-o", "-4", "route", "show", "root", "198.18.64.0/24"])
        raw[1].expect(check(1), stdout="missing taskset\nallowed 0-7\n")
        raw[1].expect([*mark, "ip", "-o", "-4", "route", "show", "root", "198.18.64.0/24"])
        with pytest.raises(HarnessError) as e:
            tb.preflight(S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp"]}}))
        assert str(e.value).split("; ") == [
            'node0: cpus = "2-3" (inv.toml) names CPU 3, which it cannot run on (its CPUs: 0-2)',
            'node1: taskset not found, which cpus = "4" (inv.toml) needs: apt-get install -y util-linux',
        ]
        for h in raw:
            h.assert_all_used()
        for argv in asked:
            assert "PINNED=1" in argv and "taskset" in next(a for a in argv if a.startswith("TOOLS=")).split()
    finally:
        tb.teardown()


def test_an_unpinned_host_is_asked_nothing_of_cpus():
    h = ScriptedHost("h0")
    h.expect(lambda argv: argv[0] == "env" and "PINNED=1" not in argv
             and "taskset" not in next(a for a in argv if a.startswith("TOOLS=")), stdout="")
    assert preflight.host_problems(h, "h0", S.build({"matrix": {"modes": ["native"]}})) == []
    h.assert_all_used()


def test_host_cpus_named_as_the_run_gave_them():
    tb, raw = remote((None, None), host_cpus="9")
    try:
        assert tb.pins == (("9", cpusets.HOST_CPUS_FROM),) * 2
        raw[0].expect(lambda argv: True, stdout="allowed 0-3\n")
        line = preflight.host_problems(raw[0], "node0", S.build({}), cpus="9", cpus_from=tb.pins[0][1])
        assert line == ['node0: cpus = "9" ([testbed] host_cpus / --host-cpus) names CPU 9, which it cannot run on '
                        '(its CPUs: 0-3)']
    finally:
        tb.teardown()


def test_doctor_checks_an_inventory_hosts_cpus_too():
    from harness.cli import checks
    h = ScriptedHost("node0")
    h.expect(lambda argv: argv[0] == "env" and "PINNED=1" in argv, stdout="allowed 0-1\n")
    found = checks.remote_checks([("node0", h)], {"node0": "1-2"}, "inv.toml")
    assert [(c.ok, c.detail) for c in found] == [
        (False, 'node0: cpus = "1-2" (inv.toml) names CPU 2, which it cannot run on (its CPUs: 0-1)')]
    h.assert_all_used()
