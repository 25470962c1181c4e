"""The six sleeves: deploy and teardown, command by command, on ScriptedHosts (the steps
and names in scripted_modes.py); no root, no waits."""

from __future__ import annotations

import signal

import pytest
from scripted_modes import (
    LINK_UP,
    SLEEVE_FLAGS,
    overlay_path,
    routed,
    sides,
    sleeve_argv,
    sleeve_down,
    sleeve_up,
    tb,  # noqa: F401 - tb is the fixture
)

from harness import modes
from harness.core.errors import CommandError, HarnessError
from harness.hosts.scripted import ScriptedProcess


@pytest.mark.parametrize("name", SLEEVE_FLAGS)
def test_sleeve_modes_deploy_a_daemon_per_host_and_tear_it_down(tb, name):
    mode = modes.get(name)
    mtu = 1500 - mode.overhead
    daemons = sleeve_up(name, tb, mtu)
    dp = mode.deploy(tb, mtu)
    tb.assert_all_used()
    assert dp.processes == daemons
    assert dp.devices == {s.index: [n.ul, n.sv, n.br, n.vc, "ctr:eth0"] for s, n in sides(tb)}
    assert dp.info["version"] == "sleeve 2.1 (wire v2)"
    assert dp.info["flags"] == SLEEVE_FLAGS[name].split()
    assert tb.events == ["install_sleeve h0 shipped", "install_sleeve h1 shipped"]
    if "crypto" in name:
        assert (dp.info["cipher"], dp.info["cipher_impl"]) == ("aes-256-gcm", ["OpenSSL 3.0.17"] * 2)
        assert [d.signals for d in daemons.values()] == [[signal.SIGUSR1] * 2] * 2
        (k0, m0), (k1, m1) = (s.host.files[f"{n.dir}/sleeve.key"] for s, n in sides(tb))
        assert len(k0) == 32 and k0 == k1 and m0 == m1 == 0o600, "one fresh key, 0600 on both hosts"
        assert list(tb.artifact_dir.iterdir()) == [], "no copy of the key is left here"
    else:
        assert not any(d.signals for d in daemons.values()) and "cipher" not in dp.info

    for s, n in sides(tb):
        sleeve_down(name, s, n)
    mode.teardown(tb, dp)
    tb.assert_all_used()
    assert all(d.stopped for d in daemons.values())
    for s, n in sides(tb):                   # the daemon goes before its device
        t = s.host.transcript()
        assert t.index(f"stop: {sleeve_argv(name, n, mtu)} (exited -15)") < t.index(f"run: ip link del {n.sv}")


def test_a_sleeve_that_exits_before_ready_fails_the_deploy_and_both_hosts_are_cleaned(tb):
    """h1's daemon cannot open its TUN device: the deploy says so, h0's daemon is stopped,
    and neither host keeps a device or a file."""
    (s0, n0), (s1, n1) = sides(tb)
    d0 = ScriptedProcess.runs()
    s0.host.expect_start(sleeve_argv("sleeve", n0, 1450), d0)
    s1.host.expect_start(sleeve_argv("sleeve", n1, 1450), ScriptedProcess.exits(
        1, stderr="sleeve: open /dev/net/tun: No such device\n"))
    s0.host.expect(f"ip -o link show {n0.sv}", stdout=LINK_UP.format(dev=n0.sv, mtu=1450))
    for s, n in sides(tb):
        sleeve_down("sleeve", s, n)
    with pytest.raises(HarnessError, match="^h1: sleeve exited before ready: sleeve: open /dev/net/tun: No such device$"):
        modes.get("sleeve").deploy(tb, 1450)
    tb.assert_all_used()
    assert d0.stopped


@pytest.mark.parametrize("name", SLEEVE_FLAGS)
def test_a_sleeve_whose_second_host_cannot_be_wired_in_is_removed_from_both(tb, name):
    """Both daemons are up and the first host is wired in (routed, for sleeve-l3) when the
    second host refuses the overlay MTU: both daemons stop, both hosts are cleaned."""
    mode = modes.get(name)
    mtu = 1500 - mode.overhead
    (s0, n0), (s1, n1) = sides(tb)
    daemons = [ScriptedProcess.runs(), ScriptedProcess.runs()]
    for (s, n), d in zip(sides(tb), daemons):
        s.host.expect_start(sleeve_argv(name, n, mtu), d)
        s.host.expect(f"ip -o link show {n.sv}", stdout=LINK_UP.format(dev=n.sv, mtu=mtu))
    overlay_path(s0, n0, mtu, n0.sv)
    if name == "sleeve-l3":
        routed(s0, n0, n0.sv)
    else:
        s0.host.expect(f"ip link set {n0.sv} master {n0.br} up")
    s1.host.expect(f"ip neigh flush dev {n1.br}")
    s1.container.expect("ip neigh flush dev eth0")
    s1.host.expect(f"ip link set {n1.sv} mtu {mtu}", returncode=2, stderr="Error: mtu greater than device maximum.\n")
    for s, n in sides(tb):
        sleeve_down(name, s, n)
    with pytest.raises(CommandError, match=f"^h1: `ip link set {n1.sv} mtu {mtu}` exited 2: Error: mtu greater"):
        mode.deploy(tb, mtu)
    tb.assert_all_used()
    assert all(d.stopped for d in daemons)


def test_a_sleeve_that_cannot_start_on_the_second_host_stops_the_first(tb):
    (s0, n0), (s1, n1) = sides(tb)
    d0 = ScriptedProcess.runs()
    s0.host.expect_start(sleeve_argv("sleeve-crypto", n0, 1418), d0)
    s1.host.expect_start(sleeve_argv("sleeve-crypto", n1, 1418),
                         raises=CommandError("h1", ["sleeve"], 127, "", "No such file or directory"))
    for s, n in sides(tb):
        sleeve_down("sleeve-crypto", s, n)
    with pytest.raises(CommandError, match="h1: `sleeve` exited 127"):
        modes.get("sleeve-crypto").deploy(tb, 1418)
    tb.assert_all_used()
    assert d0.stopped
    assert list(tb.artifact_dir.iterdir()) == []


def test_a_sleeve_that_died_is_not_stopped_again_and_its_host_is_still_cleaned(tb):
    mode = modes.get("sleeve")
    daemons = sleeve_up("sleeve", tb, 1450)
    dp = mode.deploy(tb, 1450)
    daemons[1].die(signal.SIGSEGV, stderr="Segmentation fault\n")
    for s, n in sides(tb):
        sleeve_down("sleeve", s, n)
    mode.teardown(tb, dp)
    tb.assert_all_used()
    assert daemons[0].stopped and not daemons[1].stopped
