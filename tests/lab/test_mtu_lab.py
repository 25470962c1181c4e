"""The MTU doctor on real faults of one lab: each verdict and its fix, never a throughput
figure (the cost is a measurement, not an assertion).

fastdp at overlay MTU 1500 on a 1500 underlay is too big (full-size non-DF packets
fragment, counted by the hosts); the same with an nft rule dropping ICMP frag-needed on
the hosts' bridges is a black hole; one end's device at 1400 is asymmetric; a 9000
underlay under a 1450 overlay is too small; fastdp and the sleeve at auto are ok, the
bisection equal to their MTU to the byte."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import needs_root
from harness import modes
from harness.analysis import mtu as verdicts
from harness.run import mtu

pytestmark = [needs_root(), pytest.mark.lab]


@pytest.fixture(scope="module")
def mlab():
    """One lab for the module, at a 1500 underlay for each test."""
    from harness.testbeds.lab import Lab
    with Lab.create() as lab:
        yield lab


@pytest.fixture
def lab(mlab):
    mlab.set_underlay(1500, None)
    yield mlab
    mlab.set_underlay(1500, None)


def doctor(lab, names, overlay, underlay=1500, after_deploy=None):
    rows = mtu.measure(lab, [modes.get(n) for n in names], [overlay], ("container-container",), None, underlay,
                       duration=1, after_deploy=after_deploy)
    return verdicts.judge_all(rows)


def by_mode(judged, name):
    got = [p for p in judged if p["mode"] == name]
    assert [(p["src"], p["dst"]) for p in got] == [("h0", "h1"), ("h1", "h0")], got
    return got


def test_auto_is_ok_and_the_bisection_is_the_mtu_to_the_byte(lab):
    judged = doctor(lab, ["native", "fastdp", "sleeve"], "auto")
    assert verdicts.all_ok(judged), verdicts.format_table(judged)
    for p in by_mode(judged, "native"):
        assert p["path_mtu"] == p["expected_mtu"] == 1500
    for name in ("fastdp", "sleeve"):
        for p in by_mode(judged, name):
            assert p["path_mtu"] == p["udp_path_mtu"] == p["expected_mtu"] == p["overlay_mtu"] == 1450
            assert p["tcp_mtu"] == 1450 and p["tcp_mss"] == 1398
            assert p["fragments"] == 0 and p["fix"] == ""


def test_fastdp_at_1500_on_1500_is_too_big_and_fragments(lab):
    for p in by_mode(doctor(lab, ["fastdp"], 1500), "fastdp"):
        assert p["verdict"] == verdicts.TOO_BIG, p["why"]
        assert p["fragments"] > 0 and p["deployed_over_raised_underlay"]
        assert p["fix_mtu"] == 1450 and "--overlay-mtu 1450" in p["fix"]
        assert p["fit_mtu"] == 1450 and p["cost"]


def drop_frag_needed(tb, dp):
    """The fault: every host's bridge drops ICMP fragmentation-needed."""
    for s in tb.sides:
        s.host.run(["nft", "add", "table", "bridge", "obmtu"])
        s.host.run(["nft", "add", "chain", "bridge", "obmtu", "pmtu", "{ type filter hook forward priority 0; }"])
        s.host.run(["nft", "add", "rule", "bridge", "obmtu", "pmtu", "icmp", "type", "destination-unreachable",
                    "icmp", "code", "frag-needed", "drop"])


def test_dropped_frag_needed_is_a_black_hole(lab):
    try:
        judged = doctor(lab, ["fastdp"], 1500, after_deploy=drop_frag_needed)
    finally:
        for s in lab.sides:
            s.host.run(["nft", "delete", "table", "bridge", "obmtu"], check=False)
    for p in by_mode(judged, "fastdp"):
        assert p["verdict"] == verdicts.BLACK_HOLE, p["why"]
        assert p["discovery"] == "lost" and p["path_mtu"] == 1450
        assert p["fix_mtu"] == 1450 and "--overlay-mtu 1450" in p["fix"]


def shrink_far_container(tb, dp):
    s = tb.sides[1]
    s.container.run(["ip", "link", "set", s.container_dev, "mtu", "1400"])


def test_ends_that_disagree_are_asymmetric(lab):
    for p in by_mode(doctor(lab, ["fastdp"], "auto", after_deploy=shrink_far_container), "fastdp"):
        assert p["verdict"] == verdicts.ASYMMETRIC, p["why"]
        assert {p["src_dev_mtu"], p["dst_dev_mtu"]} == {1450, 1400}
        assert p["fix_mtu"] == 1450 and p["fix"].startswith("make both ends agree: set the overlay MTU to 1450")


def test_a_1450_overlay_on_a_9000_underlay_is_too_small(lab):
    lab.set_underlay(9000, None)
    for p in by_mode(doctor(lab, ["fastdp"], 1450, underlay=9000), "fastdp"):
        assert p["verdict"] == verdicts.TOO_SMALL, p["why"]
        assert p["path_mtu"] == 1450 and p["expected_mtu"] == 8950 and "7500 bytes" in p["why"]
        assert p["fix_mtu"] == 8950 and "--overlay-mtu 8950" in p["fix"]


def test_the_command_exits_1_on_a_fault_and_says_the_fix():
    """The command end to end: its own lab, the table, exit 1, the lab removed."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "mtu", "--modes", "fastdp", "--overlay-mtu", "1500",
                           "-q", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    import json
    doc = json.loads(done.stdout)
    assert not doc["ok"] and {p["verdict"] for p in doc["paths"]} == {"too big"}
    assert all(p["fix_mtu"] == 1450 for p in doc["paths"])
