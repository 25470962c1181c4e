"""fastdp for real: kernel VXLAN at full MTU, one FDB entry, clean teardown."""

import pytest

from conftest import full_size_pings, needs_root
from harness import modes
from harness.core.errors import HarnessError
from harness.run.endpoints import endpoints

pytestmark = [needs_root(), pytest.mark.lab]


@pytest.mark.parametrize("underlay", [1500, 9000])
def test_fastdp_carries_full_size_frames_without_duplicates(lab, underlay):
    lab.set_underlay(underlay, None)
    m = modes.get("fastdp")
    mtu = m.overlay_mtu(underlay, "auto")
    assert mtu == underlay - 50
    dp = m.deploy(lab, mtu)
    try:
        assert dp.kind == "fastdp"
        full_size_pings(lab, dp, ("container-container", "host-container", "host-host"), mtu)
        # One more byte than the overlay MTU does not pass with DF set.
        c, s = endpoints(lab, dp, "container-container")
        too_big = c.host.run(["ping", "-c", "1", "-W", "1", "-M", "do", "-s", str(mtu - 27), s.addr], check=False)
        assert not too_big.ok
        fdb = lab.sides[0].host.run(["bridge", "fdb", "show", "dev", "vx0"]).stdout
        assert sum(1 for ln in fdb.splitlines() if ln.startswith("00:00:00:00:00:00")) == 1
        vx = lab.sides[0].host.run(["ip", "-d", "link", "show", "vx0"]).stdout
        assert "dstport 4789" in vx and "nolearning" in vx
    finally:
        m.teardown(lab, dp)
    assert lab.sides[0].host.run(["ip", "link", "show", "vx0"], check=False).returncode != 0


def test_native_reaches_only_the_underlay(lab):
    dp = modes.get("native").deploy(lab, 1500)
    c, s = endpoints(lab, dp, "host-host")
    assert s.addr == lab.sides[1].underlay_ip
    with pytest.raises(HarnessError, match="needs an overlay"):
        endpoints(lab, dp, "container-container")


def test_duplicate_fdb_entry_is_detected(lab):
    m = modes.get("fastdp")
    dp = m.deploy(lab, 1450)
    try:
        side = lab.sides[0]
        # the same destination once more, through the underlay device: the entry `remote …
        # dev ul0` makes, which a plain append beside it would duplicate (an identical
        # append is a no-op)
        side.host.run(["bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "vx0", "dst",
                       lab.sides[1].underlay_ip, "via", "ul0"])
        with pytest.raises(HarnessError, match="expected exactly 1"):
            m._check_fdb(side, lab.sides[1].underlay_ip)
    finally:
        m.teardown(lab, dp)


def test_unknown_mode():
    with pytest.raises(HarnessError, match=r"unknown mode 'vxlan' \(known: native, fastdp"):
        modes.get("vxlan")
