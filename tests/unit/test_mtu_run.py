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
    assert mtu.overlay_mtu(fastdp, 1500, "auto") == 1450
    assert mtu.overlay_mtu(fastdp, 1500, 1500) == 1500          # the fault the doctor is for
    with pytest.raises(HarnessError, match="outside 576–65535"):
        mtu.overlay_mtu(fastdp, 1500, 575)


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
    with pytest.raises(HarnessError, match="found, not stated"):
        mtu.check_modes([modes.get("cni")])


def test_every_pair_both_ways_once():
    tb = types.SimpleNamespace(sides=[types.SimpleNamespace(name="h0"), types.SimpleNamespace(name="h1")])
    assert mtu.directions(tb, None) == [("h0", "h1"), ("h1", "h0")]
    assert mtu.directions(tb, [("h0", "h1"), ("h1", "h0"), ("h0", "h2")]) == [("h0", "h1"), ("h1", "h0"),
                                                                              ("h0", "h2"), ("h2", "h0")]


def test_placements_native_is_host_to_host_overlays_their_own():
    assert mtu.placements_of(modes.get("native"), ("container-container",)) == ["host-host"]
    assert mtu.placements_of(modes.get("fastdp"), ("host-host",)) == ["container-container"]
    assert mtu.placements_of(modes.get("fastdp"), ("host-host", "host-container")) == ["host-container"]
