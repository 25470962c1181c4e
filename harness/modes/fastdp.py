"""fastdp: kernel VXLAN on each host, enslaved to the overlay bridge (Weave's fast datapath).

dstport 4789 (iproute2 otherwise warns and the kernel uses 8472), nolearning, and one
all-zeros FDB entry per peer (`bridge fdb append … dst PEER`): a frame for a MAC the
device has no entry for floods to every peer, and the overlay bridges above learn where
each container is. Another entry for the same peer would double every flooded frame (a
device made with `remote PEER` already has one; appending another on top makes ping show
duplicates and halves throughput), so deploy checks there is exactly one per peer.
"""

from __future__ import annotations

import logging

from harness.core.errors import CommandError, HarnessError, UnsupportedError
from harness.modes.base import Datapath, Mode, reset_overlay_path

log = logging.getLogger(__name__)

VXLAN_OVERHEAD = 50  # outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14
VNI = 42
PORT = 4789
DEV = "vx0"


class FastDP(Mode):
    name = "fastdp"
    kind = "fastdp"
    order = 10
    colour = "#0072B2"
    features = ("vxlan",)
    overhead = VXLAN_OVERHEAD
    description = "kernel VXLAN (dstport 4789) on the overlay bridge"
    multi_host = True

    def __init__(self, dev: str = DEV, vni: int = VNI, port: int = PORT):
        self.dev, self.vni, self.port = dev, vni, port

    def check(self, testbed):
        probe = testbed.sides[0].host
        tmp = "obchkvx"
        done = probe.run(["ip", "link", "add", tmp, "type", "vxlan", "id", "1", "dstport", "0"],
                         check=False)
        if not done.ok:
            raise UnsupportedError(f"mode fastdp: kernel VXLAN unsupported here ({done.stderr.strip()})")
        probe.run(["ip", "link", "del", tmp], check=False)

    def deploy(self, testbed, overlay_mtu):
        try:
            for s in testbed.sides:
                dev = s.dev(self.dev)
                s.host.run(["ip", "link", "add", dev, "type", "vxlan", "id", str(self.vni),
                            "dstport", str(self.port), "local", s.underlay_ip,
                            "dev", s.underlay_dev, "nolearning"])
                for peer in testbed.peers(s):
                    s.host.run(["bridge", "fdb", "append", "00:00:00:00:00:00", "dev", dev,
                                "dst", peer.underlay_ip])
                reset_overlay_path(s, overlay_mtu, dev)
                s.host.run(["ip", "link", "set", dev, "master", s.bridge, "up"])
                for peer in testbed.peers(s):
                    self._check_fdb(s, peer.underlay_ip)
        except BaseException:
            self.teardown(testbed, None)
            raise
        return Datapath(self.name, self.kind, overlay_mtu,
                        devices={s.index: [s.underlay_dev, s.dev(self.dev), s.bridge, s.container_port,
                                           f"ctr:{s.container_dev}"] for s in testbed.sides},
                        info={"vni": self.vni, "dstport": self.port})

    def _check_fdb(self, side, peer_ip: str) -> None:
        dev = side.dev(self.dev)
        fdb = side.host.run(["bridge", "fdb", "show", "dev", dev]).stdout
        entries = [ln for ln in fdb.splitlines() if ln.startswith("00:00:00:00:00:00") and f" dst {peer_ip} " in f"{ln} "]
        if len(entries) != 1:
            raise HarnessError(f"{side.host.name}: {dev} has {len(entries)} default FDB entries for "
                               f"{peer_ip}, expected exactly 1 (duplicates double every flooded frame)")

    def teardown(self, testbed, dp):
        for s in testbed.sides:
            try:
                s.host.run(["ip", "link", "del", s.dev(self.dev)], check=False)
                reset_overlay_path(s, 1500, None)
            except CommandError as e:
                log.warning("fastdp teardown on %s: %s", s.host.name, e)
