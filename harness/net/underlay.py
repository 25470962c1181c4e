"""The underlay link's MTU and rate cap on one host: shared by the lab and by remote hosts
whose inventory lets overlaybench manage the underlay."""

from __future__ import annotations

from harness.core.errors import HarnessError, UnsupportedError
from harness.core.units import parse_rate
from harness.hosts.base import Host


def apply_underlay(host: Host, dev: str, mtu: int, rate: str | None, clear: bool = True) -> None:
    """Set `dev`'s MTU and a tbf cap. Without a rate, `clear` removes the root qdisc (a cap
    set earlier); a host's own qdisc is left alone by passing clear=False."""
    if not 1280 <= mtu <= 65535:
        raise HarnessError(f"underlay MTU {mtu}: must be between 1280 and 65535")
    rate_bps = parse_rate(rate) if rate else None
    host.run(["ip", "link", "set", dev, "mtu", str(mtu)])
    if rate_bps:
        burst = max(rate_bps // 8 // 250, 16 * mtu)  # 4 ms of traffic, at least 16 packets
        done = host.run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                         str(rate_bps), "burst", str(burst), "latency", "50ms"], check=False)
        if not done.ok:
            raise UnsupportedError(f"rate cap {rate}: tbf qdisc unsupported on {host.name} ({done.stderr.strip()})")
    elif clear:
        host.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
