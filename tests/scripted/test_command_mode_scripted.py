"""A mode defined by commands, deployed and torn down on ScriptedHosts: the definition's
commands with the side's values, the harness's wiring around them (l2 as fastdp, l3 as
sleeve-l3), the pid file's daemon as the runner sees it, and an `up` that fails as a failed
row carrying its stderr. Each test runs on the lab's names and a remote testbed's (the
`tb` fixture of scripted_modes.py); what the commands do is for test_command_mode_lab.py."""

from __future__ import annotations

import re

import pytest
from scripted_modes import (
    overlay_path,
    routed,
    sides,
    tb,  # noqa: F401 - tb is the fixture
    unrouted,
)

from harness import modes
from harness.core.errors import HarnessError
from harness.modes import commands, pidfile
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner, daemon_death

UP = ("ip link add ${dev} type vxlan id 77 dstport 4790 local ${underlay_ip} remote ${peer_underlay_ip} "
      "dev ${underlay_dev} nolearning")
OFFLOADS = "Features for dev:\ngeneric-segmentation-offload: on\n"


def mode(**kw) -> commands.CommandMode:
    d = {"layer": "l2", "overhead": 50, "device": "vx77", "up": [UP], "down": ["ip link del ${dev}"], **kw}
    return commands.CommandMode("vx77", d, "s.toml")


def dev(n, base="vx77") -> str:
    """The device as the host sees it: the remote testbed's names carry the prefix."""
    return f"ob12ab-{base}" if n.ul == "eth1" else base


def vxlan_add(n) -> str:
    return f"ip link add {dev(n)} type vxlan id 77 dstport 4790 local {n.me} remote {n.peer} dev {n.ul} nolearning"


def prepared(s, n, down_rc=1):
    """The side's directory, then `down` (a first deployment finds nothing to remove)."""
    s.host.expect(f"mkdir -p -m 0700 {n.dir}")
    s.host.expect(f"ip link del {dev(n)}", returncode=down_rc,
                  stderr="" if down_rc == 0 else f'Cannot find device "{dev(n)}"\n')


def wired_l2(s, n, mtu, d=None):
    d = d or dev(n)
    s.host.expect(f"ip link show dev {d}", stdout=f"9: {d}: <BROADCAST,MULTICAST> mtu 1500\n")
    overlay_path(s, n, mtu, d)
    s.host.expect(f"ip link set {d} master {n.br} up")


def removed(s, n, d=None, down=None):
    d = d or dev(n)
    for line in down or [f"ip link del {d}"]:
        s.host.expect(line)
    s.host.expect(f"ip link del {d}", returncode=1, stderr=f'Cannot find device "{d}"\n')
    overlay_path(s, n, 1500)


def test_an_l2_mode_runs_up_on_each_host_then_is_enslaved_to_the_bridge(tb):
    m = mode()
    for s, n in sides(tb):
        prepared(s, n)
        s.host.expect(vxlan_add(n))
    for s, n in sides(tb):
        wired_l2(s, n, 1450)
    dp = m.deploy(tb, 1450)
    tb.assert_all_used()
    assert (dp.mode, dp.kind, dp.overlay_mtu, dp.processes) == ("vx77", "vx77", 1450, {})
    assert dp.info == {"layer": "l2", "overhead": 50, "defined_in": "s.toml"}
    assert dp.devices == {s.index: [n.ul, dev(n), n.br, n.vc, "ctr:eth0"] for s, n in sides(tb)}
    for s, n in sides(tb):
        removed(s, n)
    m.teardown(tb, dp)
    tb.assert_all_used()


def test_every_variable_is_the_sides_own_fact(tb):
    names = list(commands.VARIABLES)
    m = mode(up=[["printf", "%s\\n", *(f"${{{v}}}" for v in names)]], down=[["true", "${dev}"]])
    for s, n in sides(tb):
        ctr = "198.18.64.11" if s.index == 0 else "198.18.64.12"
        want = {"prefix": "ob12ab", "side": str(s.index), "dev": dev(n), "underlay_dev": n.ul, "underlay_ip": n.me,
                "peer_underlay_ip": n.peer, "overlay_ip": n.ov, "peer_overlay_ip": n.ov_peer, "container_ip": ctr,
                "peer_container_ip": n.ct_peer, "overlay_prefix": "24", "mtu": "1400", "underlay_mtu": "1500",
                "bridge": n.br, "workdir": n.dir}
        assert list(want) == names
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(["true", dev(n)])
        s.host.expect(["printf", "%s\\n", *want.values()])
    for s, n in sides(tb):
        wired_l2(s, n, 1400)
    m.deploy(tb, 1400)
    tb.assert_all_used()


def test_an_l3_mode_is_routed_through_its_device(tb):
    m = mode(layer="l3", device="tun7", overhead=20,
             up=["ip link add ${dev} type ipip local ${underlay_ip} remote ${peer_underlay_ip}"])
    for s, n in sides(tb):
        d = dev(n, "tun7")
        s.host.expect(f"mkdir -p -m 0700 {n.dir}")
        s.host.expect(f"ip link del {d}", returncode=1)
        s.host.expect(f"ip link add {d} type ipip local {n.me} remote {n.peer}")
    for s, n in sides(tb):
        d = dev(n, "tun7")
        s.host.expect(f"ip link show dev {d}", stdout=f"9: {d}: <NOARP> mtu 1480\n")
        overlay_path(s, n, 1480, d)
        s.host.expect(f"ip link set {d} up")
        routed(s, n, d)
    dp = m.deploy(tb, 1480)
    tb.assert_all_used()
    for s, n in sides(tb):
        d = dev(n, "tun7")
        unrouted(s, n, d)
        removed(s, n, d)
    m.teardown(tb, dp)
    tb.assert_all_used()


def test_an_up_that_fails_raises_with_its_stderr_after_down_ran_on_both_hosts(tb):
    (s0, n0), (s1, n1) = sides(tb)
    prepared(s0, n0)
    s0.host.expect(vxlan_add(n0))
    prepared(s1, n1)
    s1.host.expect(vxlan_add(n1), returncode=2,
                   stderr="Error: argument is wrong\nRTNETLINK answers: File exists\n")
    for s, n in sides(tb):
        removed(s, n)
    with pytest.raises(HarnessError) as e:
        mode().deploy(tb, 1450)
    tb.assert_all_used()
    assert str(e.value) == (f"mode vx77: up on h1: `{vxlan_add(n1)}` exited 2: "
                            "Error: argument is wrong | RTNETLINK answers: File exists")


def test_an_up_that_makes_no_device_fails_the_deploy(tb):
    m = mode(up=["true"])
    for s, n in sides(tb):
        prepared(s, n)
        s.host.expect("true")
    (s0, n0), _ = sides(tb)
    s0.host.expect(f"ip link show dev {dev(n0)}", returncode=1, stderr=f'Device "{dev(n0)}" does not exist.\n')
    for s, n in sides(tb):
        removed(s, n)
    with pytest.raises(HarnessError, match=f"mode vx77: `up` made no device {dev(n0)} on h0"):
        m.deploy(tb, 1450)
    tb.assert_all_used()


# ------------------------------------------------------------------ the daemon of a pid file

def test_the_pid_files_daemon_is_the_datapaths_process_until_it_is_gone(tb):
    """The runner's CPU accounting reads its pid; its death fails the case (runner.daemon_death);
    teardown stops it after `down`, by its start time so that a reused pid is left alone."""
    m = mode(pid_file="${workdir}/keeper.pid")
    for s, n in sides(tb):
        prepared(s, n)
        s.host.expect(vxlan_add(n))
    for s, n in sides(tb):
        wired_l2(s, n, 1450)
        s.host.expect(f"cat {n.dir}/keeper.pid", stdout=f"{4321 + s.index}\n")
        s.host.expect(["sh", "-c", pidfile.ALIVE, "sh", str(4321 + s.index)], stdout="7700\n")
    dp = m.deploy(tb, 1450)
    assert {i: p.pid for i, p in dp.processes.items()} == {0: 4321, 1: 4322}
    (s0, _), (s1, _) = sides(tb)
    s0.host.expect(["sh", "-c", pidfile.ALIVE, "sh", "4321"], stdout="7700\n")
    s1.host.expect(["sh", "-c", pidfile.ALIVE, "sh", "4322"], stdout="9100\n")   # another process now
    assert daemon_death(tb, dp) == ("vx77 on h1 died (exit 1): pid 4322 from /run/overlaybench/ob12ab/h1/keeper.pid "
                                    "is gone (its exit status is not the harness's to know)")
    tb.assert_all_used()
    for s, n in sides(tb):
        s.host.expect(f"ip link del {dev(n)}")
        if s.index == 0:                    # h1's is gone already
            s.host.expect(["sh", "-c", pidfile.STOP, "sh", "4321", "7700", "50"])
        s.host.expect(f"ip link del {dev(n)}", returncode=1)
        overlay_path(s, n, 1500)
    m.teardown(tb, dp)
    tb.assert_all_used()


@pytest.mark.parametrize("cat, alive, needle", [
    ({"returncode": 1, "stderr": "cat: no such file\n"}, None, "pid_file {d}/k.pid: not written by `up`"),
    ({"stdout": "12ab\n"}, None, "pid_file {d}/k.pid: holds '12ab', not a pid"),
    ({"stdout": "4321\n"}, "", "pid_file {d}/k.pid: process 4321 is not running"),
])
def test_a_pid_file_without_a_live_daemon_fails_the_deploy(tb, cat, alive, needle):
    m = mode(pid_file="${workdir}/k.pid")
    for s, n in sides(tb):
        prepared(s, n)
        s.host.expect(vxlan_add(n))
    (s0, n0), _ = sides(tb)
    wired_l2(s0, n0, 1450)
    s0.host.expect(f"cat {n0.dir}/k.pid", **cat)
    if alive is not None:
        s0.host.expect(["sh", "-c", pidfile.ALIVE, "sh", "4321"], stdout=alive)
    for s, n in sides(tb):
        removed(s, n)
    with pytest.raises(HarnessError, match=re.escape("h0: " + needle.format(d=n0.dir))):
        m.deploy(tb, 1450)
    tb.assert_all_used()


# ------------------------------------------------------------------ in a run

def test_a_mode_whose_up_fails_is_its_groups_failed_rows_with_the_stderr(tb, tmp_path):
    """As the runner does for any mode that cannot deploy: every case of the group is a row
    with the reason, here the definition's command and what it printed; `down` ran after."""
    for h in tb.hosts:
        h.allow(re.compile(r"ethtool -k \S+"), stdout=OFFLOADS)
    (s0, n0), (s1, n1) = sides(tb)
    prepared(s0, n0)
    s0.host.expect(vxlan_add(n0), returncode=1, stderr="Error: Unknown device type.\n")
    for s, n in sides(tb):
        removed(s, n)
    sc = S.build({"modes": {"vx77": {"layer": "l2", "overhead": 50, "device": "vx77", "up": [UP],
                                     "down": ["ip link del ${dev}"]}},
                  "matrix": {"modes": ["vx77"], "repeats": 1, "duration": 2, "tests": ["iperf3.tcp", "qperf.tcp_lat"],
                             "placements": ["container-container"]}}, source="s.toml")
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store).run(S.expand(sc))
    tb.assert_all_used()
    why = f"deploy failed: mode vx77: up on h0: `{vxlan_add(n0)}` exited 1: Error: Unknown device type."
    assert [(r["mode"], r["test"], r["metric"], r["ok"], r["error"]) for r in store.records()] == [
        ("vx77", "iperf3.tcp", "failed", False, why), ("vx77", "qperf.tcp_lat", "failed", False, why)]
    assert s1.host.transcript()[-1] == "run: ip link set ob12ab-br0 mtu 1500".replace("ob12ab-br0", n1.br)


def test_check_names_a_program_the_commands_start_that_a_host_lacks(tb):
    m = mode(up=[UP, "mytool ${dev}"])
    for s, n in sides(tb):
        s.host.expect(["sh", "-c", 'command -v "$1"', "sh", "ip"], stdout="/usr/sbin/ip\n")
        s.host.expect(["sh", "-c", 'command -v "$1"', "sh", "mytool"], returncode=0 if s.index == 0 else 1,
                      stdout="/usr/local/bin/mytool\n" if s.index == 0 else "")
    with pytest.raises(HarnessError, match=r"^mode vx77 \(s.toml\): `mytool` not found on h1$"):
        m.check(tb)
    tb.assert_all_used()
