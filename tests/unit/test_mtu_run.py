"""run/mtu.py's pure parts: which MTU a mode is deployed at, which modes can be judged,
the directions probed."""

from __future__ import annotations

import types

import pytest

from harness import modes
from harness.core.errors import HarnessError
from harness.modes.base import Mode
from harness.run import mtu


def test_auto_fits_and_a_number_is_taken_even_when_it_does_not():
    fastdp = modes.get("fastdp")
    assert mtu.overlay_mtu(fastdp, 1500, "auto", fastdp.overhead) == 1450
    assert mtu.overlay_mtu(fastdp, 1500, 1500, fastdp.overhead) == 1500          # the fault the doctor is for
    with pytest.raises(HarnessError, match="outside 576–65535"):
        mtu.overlay_mtu(fastdp, 1500, 575, fastdp.overhead)


class Unstated(Mode):
    name, kind = "unstated", "unstated"

    def deploy(self, testbed, overlay_mtu):
        raise AssertionError

    def teardown(self, testbed, dp):
        pass


def test_a_mode_must_state_its_overhead():
    mtu.check_modes([modes.get("native"), modes.get("fastdp"), modes.get("sleeve-l3"), modes.get("flannel-host-gw")])
    with pytest.raises(HarnessError, match="mode unstated states no encapsulation overhead"):
        mtu.check_modes([Unstated()])
    mtu.check_modes([modes.get("cni")])          # a cluster's: found once the testbed is up


@pytest.mark.parametrize("fp, want", [
    ({"cni": "flannel", "encapsulation": "vxlan", "routing": "tunnel", "encryption": "none"}, 50),
    ({"cni": "flannel", "encapsulation": "none", "routing": "native"}, 0),              # host-gw
    ({"cni": "calico", "encapsulation": "ipip", "routing": "tunnel"}, 20),
    ({"cni": "cilium", "encapsulation": "geneve", "routing": "tunnel", "encryption": "wireguard"}, 110),
    ({"cni": "flannel", "encapsulation": "wireguard", "encryption": "wireguard"}, 60),   # counted once
])
def test_a_clusters_encapsulation_is_read_off_its_fingerprint(fp, want):
    tb = types.SimpleNamespace(pod_network=lambda: {"fingerprint": fp})
    assert modes.get("cni").overhead_on(tb) == want
    assert modes.get("fastdp").overhead_on(tb) == 50             # a stated one, whatever the testbed


@pytest.mark.parametrize("fp, needle", [
    ({"cni": "weave"}, "encapsulation was not read (weave CNI"),
    ({"cni": "calico", "encapsulation": "vxlan", "routing": "cross-subnet"}, "tunnels only between subnets"),
    ({"cni": "cilium", "encapsulation": "vxlan", "encryption": "ipsec"}, "ipsec encryption's size depends"),
])
def test_an_encapsulation_the_doctor_cannot_size_is_one_line(fp, needle):
    tb = types.SimpleNamespace(pod_network=lambda: {"fingerprint": fp})
    with pytest.raises(HarnessError) as e:
        modes.get("cni").overhead_on(tb)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_every_pair_both_ways_once():
    tb = types.SimpleNamespace(sides=[types.SimpleNamespace(name="h0"), types.SimpleNamespace(name="h1")])
    assert mtu.directions(tb, None) == [("h0", "h1"), ("h1", "h0")]
    assert mtu.directions(tb, [("h0", "h1"), ("h1", "h0"), ("h0", "h2")]) == [("h0", "h1"), ("h1", "h0"),
                                                                              ("h0", "h2"), ("h2", "h0")]


def test_placements_native_is_host_to_host_overlays_their_own():
    assert mtu.placements_of(modes.get("native"), ("container-container",)) == ["host-host"]
    assert mtu.placements_of(modes.get("fastdp"), ("host-host",)) == ["container-container"]
    assert mtu.placements_of(modes.get("fastdp"), ("host-host", "host-container")) == ["host-container"]


def test_the_probes_ports_follow_a_testbeds_moved_ones():
    from harness.run.mtu_probe import ports
    assert ports(None) == (5201, 19801)                              # iperf3's own, the UDP probe's own
    assert ports({"iperf3": (30000, None), "qperf": (30002, 30003)}) == (30000, 30001)   # --port-base 30000
