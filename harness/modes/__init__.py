"""Overlay modes by name."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.modes.base import ALL_PLACEMENTS, Datapath, Mode
from harness.modes.fastdp import FastDP
from harness.modes.native import Native
from harness.modes.sleeve import Auto, Sleeve, SleeveBasic, SleeveCrypto, SleeveCryptoChacha, SleeveL3, SleeveSeg
from harness.modes.wireguard import WireGuard, WireGuardGo

MODES: dict[str, Mode] = {m.name: m for m in (Native(), FastDP(), Sleeve(), SleeveSeg(), SleeveBasic(), SleeveL3(),
                                                SleeveCrypto(), SleeveCryptoChacha(), Auto())}
MODES.update({m.name: m for m in (WireGuardGo(), WireGuard())})


def get(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise HarnessError(f"unknown mode {name!r} (known: {', '.join(MODES)})") from None


__all__ = ["ALL_PLACEMENTS", "Datapath", "Mode", "MODES", "get"]
