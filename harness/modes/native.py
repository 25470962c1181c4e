"""native: the tools talk over the underlay itself, the reference every ratio uses."""

from __future__ import annotations

from harness.core.placements import REFERENCE
from harness.modes.base import Datapath, Mode


class Native(Mode):
    name = "native"
    kind = "native"
    order = 0
    colour = "#5f6368"
    overhead = 0
    placements = (REFERENCE,)  # containers only exist behind an overlay
    multi_host = True
    description = "the underlay itself, no encapsulation"

    def deploy(self, testbed, overlay_mtu):
        return Datapath(self.name, self.kind, testbed.underlay_mtu,
                        devices={s.index: [s.underlay_dev] for s in testbed.sides})

    def teardown(self, testbed, dp):
        pass
