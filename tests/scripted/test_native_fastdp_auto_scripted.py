"""native, fastdp and auto: deploy and teardown, command by command, on ScriptedHosts
(the steps and names in scripted_modes.py); no root, no waits."""

from __future__ import annotations

import pytest
from scripted_modes import (
    SLEEVE_FLAGS,
    fastdp_down,
    fastdp_up,
    sides,
    sleeve_down,
    sleeve_up,
    tb,  # noqa: F401 - tb is the fixture
)

from harness import modes
from harness.core.errors import CommandError, HarnessError, SshConnectionLost
from harness.modes.commands import CommandMode


def test_every_mode_in_the_registry_has_scripted_deploy_and_teardown_tests():
    """native, fastdp and auto here, the sleeves in test_sleeve_scripted.py, WireGuard in
    test_wireguard_scripted.py, the real Flannel's five in test_flannel_scripted.py, cni in
    test_kubernetes_scripted.py."""
    covered = {"native", "fastdp", "auto", "wireguard", "wireguard-go", *SLEEVE_FLAGS, "flannel-vxlan",
               "flannel-udp", "flannel-host-gw", "flannel-ipip", "flannel-wireguard", "cni"}
    bundled = set(modes.standard())
    assert covered == bundled, "a mode without a scripted test"


# ------------------------------------------------------------------ native

def test_native_makes_nothing_and_measures_the_underlay(tb):
    mode = modes.get("native")
    dp = mode.deploy(tb, 1400)
    assert (dp.kind, dp.overlay_mtu, dp.overlay) == ("native", 1500, False)
    assert dp.devices == {0: [tb.names[0].ul], 1: [tb.names[1].ul]}
    mode.teardown(tb, dp)
    assert all(h.calls == [] for h in tb.hosts)


def test_fastdp_deploys_vxlan_on_the_bridge_and_removes_it(tb):
    mode = modes.get("fastdp")
    for s, n in sides(tb):
        fastdp_up(s, n, 1450)
    dp = mode.deploy(tb, 1450)
    tb.assert_all_used()
    assert (dp.kind, dp.overlay_mtu, dp.info) == ("fastdp", 1450, {"vni": 42, "dstport": 4789})
    assert dp.devices == {s.index: [n.ul, n.vx, n.br, n.vc, "ctr:eth0"] for s, n in sides(tb)}
    for s, n in sides(tb):
        fastdp_down(s, n)
    mode.teardown(tb, dp)
    tb.assert_all_used()


def test_fastdp_a_second_default_fdb_entry_fails_the_deploy_and_both_hosts_are_cleaned(tb):
    (s0, n0), (s1, n1) = sides(tb)
    fastdp_up(s0, n0, 1450, fdb=f"00:00:00:00:00:00 dst {n0.peer} self permanent\n"
                                f"00:00:00:00:00:00 dst {n0.peer} self permanent\n")
    fastdp_down(s0, n0)
    fastdp_down(s1, n1)
    with pytest.raises(HarnessError, match=f"h0: {n0.vx} has 2 default FDB entries for {n0.peer}, expected exactly 1"):
        modes.get("fastdp").deploy(tb, 1450)
    tb.assert_all_used()


def test_fastdp_a_command_failing_on_the_second_host_cleans_both(tb):
    (s0, n0), (s1, n1) = sides(tb)
    fastdp_up(s0, n0, 1450)
    s1.host.expect(f"ip link add {n1.vx} type vxlan id 42 dstport 4789 local {n1.me} dev {n1.ul} nolearning",
                   returncode=2, stderr="RTNETLINK answers: File exists\n")
    fastdp_down(s0, n0)
    fastdp_down(s1, n1)
    with pytest.raises(CommandError, match=f"h1: `ip link add {n1.vx} .*` exited 2: RTNETLINK answers: File exists"):
        modes.get("fastdp").deploy(tb, 1450)
    tb.assert_all_used()


def test_fastdp_teardown_goes_on_to_the_next_host_when_one_fails(tb):
    """A device already gone is fine (ip link del is unchecked); a path device that cannot
    be reset on one host is logged, and the other host is still cleaned."""
    (s0, n0), (s1, n1) = sides(tb)
    s0.host.expect(f"ip link del {n0.vx}", returncode=1, stderr=f'Cannot find device "{n0.vx}"\n')
    s0.host.expect(f"ip neigh flush dev {n0.br}")
    s0.container.expect("ip neigh flush dev eth0")
    s0.host.expect(f"ip link set {n0.vc} mtu 1500", returncode=1, stderr=f'Cannot find device "{n0.vc}"\n')
    fastdp_down(s1, n1)
    modes.get("fastdp").teardown(tb, None)
    tb.assert_all_used()


# ------------------------------------------------------------------ auto

PING_OK = ("PING 198.18.64.2 (198.18.64.2) 1422(1450) bytes of data.\n\n--- 198.18.64.2 ping statistics ---\n"
           "3 packets transmitted, 3 received, 0% packet loss, time 402ms\n"
           "rtt min/avg/max/mdev = 0.071/0.080/0.090/0.008 ms\n")
PING_LOST = ("PING 198.18.64.2 (198.18.64.2) 1422(1450) bytes of data.\n\n--- 198.18.64.2 ping statistics ---\n"
             "25 packets transmitted, 0 received, 100% packet loss, time 4952ms\n\n")
PROBE = "ping -c 3 -i 0.2 -w 5 -M do -s 1422 198.18.64.2"


def test_auto_keeps_fastdp_when_the_full_mtu_probe_passes(tb):
    mode = modes.get("auto")
    for s, n in sides(tb):
        fastdp_up(s, n, 1450)
    tb.sides[0].host.expect(PROBE, stdout=PING_OK)
    dp = mode.deploy(tb, 1450)
    tb.assert_all_used()
    assert (dp.mode, dp.kind, dp.info["decision"]) == ("auto", "fastdp", "fastdp: full-MTU probe across VXLAN passed")
    for s, n in sides(tb):
        fastdp_down(s, n)
    mode.teardown(tb, dp)
    tb.assert_all_used()


def test_auto_falls_back_to_the_sleeve_when_the_probe_fails(tb):
    mode = modes.get("auto")
    for s, n in sides(tb):
        fastdp_up(s, n, 1450)
    tb.sides[0].host.expect(PROBE, returncode=1, stdout=PING_LOST)
    for s, n in sides(tb):
        fastdp_down(s, n)
    daemons = sleeve_up("sleeve", tb, 1450)
    dp = mode.deploy(tb, 1450)
    tb.assert_all_used()
    assert (dp.mode, dp.kind, dp.processes) == ("auto", "sleeve", daemons)
    assert dp.info["decision"].startswith("sleeve: full-MTU (1450) DF probe across VXLAN failed")
    for s, n in sides(tb):
        sleeve_down("sleeve", s, n)
    mode.teardown(tb, dp)
    tb.assert_all_used()


def test_auto_removes_fastdp_when_its_probe_cannot_run(tb):
    for s, n in sides(tb):
        fastdp_up(s, n, 1450)
    tb.sides[0].host.expect(PROBE, raises=SshConnectionLost("h0: connection lost while running `ping`"))
    for s, n in sides(tb):
        fastdp_down(s, n)
    with pytest.raises(SshConnectionLost):
        modes.get("auto").deploy(tb, 1450)
    tb.assert_all_used()


def test_auto_records_the_probes_loss_as_the_reason_it_fell_back(tb):
    for s, n in sides(tb):
        fastdp_up(s, n, 1450)
    tb.sides[0].host.expect(PROBE, returncode=1, stdout=PING_LOST)
    for s, n in sides(tb):
        fastdp_down(s, n)
    sleeve_up("sleeve", tb, 1450)
    dp = modes.get("auto").deploy(tb, 1450)
    assert dp.info["decision"] == ("sleeve: full-MTU (1450) DF probe across VXLAN failed: "
                                   "25 packets transmitted, 0 received, 100% packet loss, time 4952ms")
