"""The real Flannel's modes, without hosts: names, MTU, subnet files and etcd requests.

The subnet files and etcd replies are real captures (tests/data/flannel/, from flanneld
v0.26.7 and Debian's etcd 3.4 on the lab)."""

from __future__ import annotations

import base64
import json
import pathlib

import pytest

from harness import modes
from harness.core.errors import HarnessError
from harness.modes import etcd
from harness.modes import flannel_config as flannel

DATA = pathlib.Path(__file__).parents[1] / "data" / "flannel"


def test_the_vxlan_device_names_the_prefix_and_fits_a_link_name():
    assert flannel.vni_for("") == 1                          # inside a lab namespace
    assert flannel.vni_for("ob0000") == 1 << 20
    assert flannel.vni_for("ob12ab") == (1 << 20) + 0x12ab
    longest = f"flannel.{flannel.vni_for('obffff')}"
    assert len(longest) <= 15 and flannel.vni_for("obffff") < 1 << 24     # IFNAMSIZ, 24-bit VNI


@pytest.mark.parametrize("backend", ["vxlan", "udp", "host-gw"])
def test_a_captured_subnet_file_parses_to_the_subnet_and_mtu(backend):
    env = flannel.parse_subnet_env((DATA / f"subnet-{backend}.env").read_text())
    assert env["FLANNEL_NETWORK"] == flannel.NETWORK
    assert env["FLANNEL_SUBNET"].endswith("/24") and env["FLANNEL_SUBNET"].startswith("198.19.")
    assert int(env["FLANNEL_MTU"]) == 1500 - modes.get(f"flannel-{backend}").overhead


def test_a_subnet_file_without_a_subnet_is_refused():
    with pytest.raises(HarnessError, match="FLANNEL_SUBNET"):
        flannel.parse_subnet_env("FLANNEL_NETWORK=198.19.64.0/18\nFLANNEL_MTU=1450\n")
    with pytest.raises(HarnessError, match="garbles"):
        flannel.parse_subnet_env("FLANNEL_NETWORK=198.19.64.0/18\nFLANNEL_SUBNET=x\nFLANNEL_MTU=1450\n")


def test_the_endpoints_are_the_subnets_first_two_addresses():
    assert flannel.endpoint_addrs("198.19.71.1/24") == ("198.19.71.1", "198.19.71.2")


def test_the_default_network_is_clear_of_the_labs_ranges_and_dockerds_bridge():
    assert flannel.check_network(flannel.NETWORK) == flannel.NETWORK


@pytest.mark.parametrize("value,why", [
    ("198.18.64.0/20", "overlaps 198.18.64.0/24"), ("198.19.0.0/16", "overlaps 198.19.254.0/24"),
    ("10.244.0.0/16", "outside the benchmark range"), ("198.19.64.0/23", "too small"),
    ("198.19.64.0/33", "not an IPv4 network"), ("198.18.128.0/18", "overlaps 198.18.128.0/17")])
def test_a_flannel_network_on_the_labs_ranges_or_outside_the_benchmark_range_is_refused(value, why):
    with pytest.raises(ValueError, match=why):
        flannel.check_network(value)
    assert flannel.check_network("198.19.0.0/17") == "198.19.0.0/17"


@pytest.mark.parametrize("name,fit", [("flannel-vxlan", 1450), ("flannel-udp", 1472), ("flannel-host-gw", 1500)])
def test_flannel_sets_the_overlay_mtu_and_any_other_is_refused(name, fit):
    mode = modes.get(name)
    assert mode.overlay_mtu(1500, "auto") == fit
    assert mode.overlay_mtu(1500, fit) == fit
    with pytest.raises(HarnessError, match=rf"^mode {name}: flannel sets the overlay MTU itself \({fit} on "):
        mode.overlay_mtu(1500, 1400)


def test_etcd_bodies_cover_exactly_the_prefix():
    body = json.loads(etcd.delete_body("/overlaybench/ob12ab/flannel-udp/network"))
    assert base64.b64decode(body["key"]) == b"/overlaybench/ob12ab/flannel-udp/network"
    assert base64.b64decode(body["range_end"]) == b"/overlaybench/ob12ab/flannel-udp/networl"
    put = json.loads(etcd.put_body("/k", '{"Network": "x"}'))
    assert base64.b64decode(put["value"]) == b'{"Network": "x"}'


def test_a_captured_range_reply_lists_its_keys():
    keys = etcd.keys_of((DATA / "etcd-range.json").read_text())
    assert keys[0].endswith("/network/config") and any("/network/subnets/" in k for k in keys)
    assert etcd.keys_of('{"header": {}}') == []
    with pytest.raises(HarnessError, match="not a range reply"):
        etcd.keys_of("<html>")


def test_flannel_config_names_the_backend_and_the_vni_on_a_real_host():
    class Tb:
        prefix = "ob12ab"
        flannel_network = None

        class sides:  # noqa: N801 - a stand-in for the testbed's tuple
            pass
    side = type("S", (), {"prefix": "ob12ab"})()
    Tb.sides = (side, side)
    assert modes.get("flannel-vxlan").config(Tb) == {
        "Network": "198.19.64.0/18", "SubnetLen": 24, "Backend": {"Type": "vxlan", "VNI": (1 << 20) + 0x12ab}}
    assert modes.get("flannel-host-gw").config(Tb)["Backend"] == {"Type": "host-gw"}
    assert modes.get("flannel-udp").key_prefix(Tb) == "/overlaybench/ob12ab/flannel-udp/network"


def test_a_mode_of_its_own_overlay_mtu_runs_beside_modes_at_a_fixed_one():
    """seed000: the stand-ins at Weave's 1410, the real Flannel at the MTU it sets; a key that
    is neither an underlay MTU nor a mode is refused."""
    from harness.run import scenario
    root = pathlib.Path(__file__).parents[2] / "scenarios"
    cases = scenario.expand(scenario.load(root / "seed000-weave-is-kinda-slow.toml"))
    assert sorted({(c.mode, c.overlay_mtu) for c in cases}) == [
        ("fastdp", 1410), ("flannel-udp", 1472), ("flannel-vxlan", 1450), ("native", 1500),
        ("sleeve-basic", 1410), ("sleeve-l3", 1410)]
    only = scenario.build({"matrix": {"modes": ["fastdp", "flannel-vxlan"],
                                      "overlay_mtu": {"flannel-vxlan": ["auto"]}}})
    assert sorted({(c.mode, c.overlay_mtu) for c in scenario.expand(only)}) == [("fastdp", 1450), ("flannel-vxlan", 1450)]
    with pytest.raises(HarnessError, match=r"\[matrix.overlay_mtu\] flanel-vxlan: neither one of the underlay MTUs "
                                           r"\(1500\) nor a mode \(did you mean 'flannel-vxlan'\?\)"):
        scenario.build({"matrix": {"modes": ["flannel-vxlan"], "overlay_mtu": {"flanel-vxlan": ["auto"]}}})
    with pytest.raises(HarnessError, match="flannel sets the overlay MTU itself"):
        scenario.expand(scenario.build({"matrix": {"modes": ["flannel-vxlan"], "overlay_mtu": {"1500": [1400]}}}))
