"""The MTU doctor's verdicts (harness/analysis/mtu.py) on known answers: each verdict, its
fix and the order they are checked in."""

from __future__ import annotations

import pytest

from harness.analysis import mtu as v


def path(**kw) -> dict:
    base = {"mode": "fastdp", "placement": "container-container", "src": "h0", "dst": "h1", "overhead": 50,
            "underlay_mtu": 1500, "underlay_path_mtu": 1500, "overlay_mtu": 1450, "src_dev_mtu": 1450,
            "dst_dev_mtu": 1450, "path_mtu": 1450, "discovery": "local", "fragments": {"IpFragCreates": 0}}
    return {**base, **kw}


def test_ok_when_the_path_is_the_underlay_minus_the_encapsulation():
    j = v.judge(path())
    assert j["verdict"] == v.OK and j["fix_mtu"] is None and j["expected_mtu"] == 1450


def test_too_big_when_the_ends_send_more_than_fits_with_the_fix_and_cost():
    j = v.judge(path(overlay_mtu=1500, src_dev_mtu=1500, dst_dev_mtu=1500, discovery="frag-needed",
                     fragments={"IpFragCreates": 12}, throughput_bps=2.6e9, fit_throughput_bps=5.0e9, fit_mtu=1450))
    assert j["verdict"] == v.TOO_BIG and j["fix_mtu"] == 1450
    assert "--overlay-mtu 1450" in j["fix"] and "12 fragments" in j["why"]
    assert j["cost"].startswith("0.52× the throughput of 1450")


def test_too_big_without_fragments_is_rediscovered():
    j = v.judge(path(src_dev_mtu=1500, dst_dev_mtu=1500, discovery="frag-needed"))
    assert j["verdict"] == v.TOO_BIG and "rediscovered" in j["why"]


def test_a_packet_that_vanishes_over_the_path_mtu_is_a_black_hole():
    j = v.judge(path(src_dev_mtu=1500, dst_dev_mtu=1500, discovery="lost", fit_throughput_bps=4e9, fit_mtu=1450,
                     transfer_error="iperf3: timed out"))
    assert j["verdict"] == v.BLACK_HOLE and j["fix_mtu"] == 1450 and "1451" in j["why"]
    assert "moved nothing" in j["cost"]
    assert v.judge(path(path_mtu=None))["verdict"] == v.BLACK_HOLE


def test_a_bigger_underlay_makes_the_overlay_too_small_with_the_share_lost():
    j = v.judge(path(underlay_mtu=9000, underlay_path_mtu=9000))
    assert j["verdict"] == v.TOO_SMALL and j["fix_mtu"] == 8950
    assert "7500 bytes" in j["why"] and "84%" in j["why"]


def test_ends_that_disagree_or_directions_that_differ_are_asymmetric():
    j = v.judge(path(dst_dev_mtu=1400, path_mtu=1400))
    assert j["verdict"] == v.ASYMMETRIC and j["fix_mtu"] == 1450 and "1450 at the sender, 1400" in j["why"]
    assert j["fix"].startswith("make both ends agree: set the overlay MTU to 1450")
    j = v.judge(path(), reverse=path(src="h1", dst="h0", path_mtu=1400))
    assert j["verdict"] == v.ASYMMETRIC and j["fix_mtu"] == 1400


def test_the_fix_names_where_each_kind_of_mode_sets_it():
    assert "--underlay-mtu 1500" in v.fix_text({"mode": "native"}, 1500)
    assert "the CNI's own MTU setting" in v.fix_text({"mode": "cni"}, 1450)
    assert "cni-conf.json), the delegate's \"mtu\"" in v.fix_text({"mode": "cni", "cni": "flannel"}, 1450)
    assert "Helm value MTU" in v.fix_text({"mode": "cni", "cni": "cilium"}, 1450)
    assert "flannel" in v.fix_text({"mode": "flannel-vxlan"}, 1450)
    assert "[modes.sleeve] overlay_mtu" in v.fix_text({"mode": "sleeve"}, 1450)


def test_judge_all_pairs_the_directions_and_the_table_says_each_fix():
    paths = [path(), path(src="h1", dst="h0", path_mtu=1400)]
    judged = v.judge_all(paths)
    assert [j["verdict"] for j in judged] == [v.ASYMMETRIC, v.ASYMMETRIC]
    assert not v.all_ok(judged) and v.all_ok(v.judge_all([path()]))
    table = v.format_table(judged)
    assert table.splitlines()[0].split()[:2] == ["mode", "placement"]
    assert "h0→h1" in table and "Fix: make both directions agree: set the overlay MTU to 1400" in table


def test_a_mode_that_did_not_deploy_is_an_error_with_the_fit_where_its_mtu_was_too_big():
    refused = {"mode": "fastdp", "placement": "container-container", "src": "h0", "dst": "h1", "overhead": 50,
               "underlay_mtu": 1500, "underlay_path_mtu": 1500, "overlay_mtu": 1500,
               "error": "did not deploy at overlay MTU 1500: h0: `ip link set ob12ab-vx0 mtu 1500` exited 2"}
    j = v.judge(refused)
    assert j["verdict"] == v.ERROR and j["why"] == refused["error"]
    assert j["fix_mtu"] == 1450 and "--overlay-mtu 1450" in j["fix"]
    missing = {**refused, "overlay_mtu": 1450, "error": "did not deploy at overlay MTU 1450: VXLAN unsupported"}
    assert v.judge(missing)["fix"] == "" and v.judge(missing)["fix_mtu"] is None
    judged = v.judge_all([refused, path(src="h1", dst="h0")])
    assert [j["verdict"] for j in judged] == [v.ERROR, v.OK] and not v.all_ok(judged)
    table = v.format_table(judged)
    assert "fastdp container-container h0→h1: error: did not deploy at overlay MTU 1500" in table


def test_udp_that_differs_from_icmp_is_caught_before_the_mtu_checks():
    j = v.judge(path(udp_path_mtu=1400, udp_probes=12))
    assert j["verdict"] == v.UDP_DIFFERS and j["fix_mtu"] == 1400
    assert "received: 1400 bytes" in j["why"] and "overstates" in j["why"] and "--overlay-mtu 1400" in j["fix"]
    j = v.judge(path(udp_path_mtu=None, udp_probes=6))
    assert j["verdict"] == v.UDP_DIFFERS and "not even the smallest" in j["why"]
    # the same size both ways, or a UDP probe that could not run: no say
    assert v.judge(path(udp_path_mtu=1450, udp_probes=12))["verdict"] == v.OK
    assert v.judge(path(udp_path_mtu=None, udp_error="h0: no python3 for the UDP probe"))["verdict"] == v.OK
    # a black hole for ICMP outranks it
    assert v.judge(path(src_dev_mtu=1500, dst_dev_mtu=1500, discovery="lost", udp_path_mtu=1400,
                        udp_probes=12))["verdict"] == v.BLACK_HOLE


@pytest.mark.parametrize("verdict", v.VERDICTS)
def test_every_verdict_is_reachable(verdict):
    cases = {v.OK: path(), v.TOO_BIG: path(src_dev_mtu=1500, dst_dev_mtu=1500),
             v.BLACK_HOLE: path(src_dev_mtu=1500, dst_dev_mtu=1500, discovery="lost"),
             v.TOO_SMALL: path(underlay_path_mtu=9000), v.ASYMMETRIC: path(dst_dev_mtu=1500),
             v.ERROR: path(error="did not deploy"), v.UDP_DIFFERS: path(udp_path_mtu=1400, udp_probes=12)}
    assert v.judge(cases[verdict])["verdict"] == verdict
