"""Units the scenario and the testbeds share: rates."""

from __future__ import annotations

import re

from harness.core.errors import HarnessError

RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)bit$", re.IGNORECASE)


def parse_rate(rate: str) -> int:
    """'1gbit' → 1_000_000_000 bits/s; a clear error for anything else."""
    m = RATE_RE.match(rate.strip())
    if not m:
        raise HarnessError(f"rate {rate!r}: expected a number and a unit like 100mbit, 1gbit, 10gbit")
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[m.group(2).lower()]
    bps = int(float(m.group(1)) * mult)
    if bps < 10**6:
        raise HarnessError(f"rate {rate!r}: below 1mbit would not carry a test in bounded time")
    return bps
