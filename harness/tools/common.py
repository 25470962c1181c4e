"""Small pure helpers the tool modules share."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence

from harness.core.errors import HarnessError
from harness.core.samples import Sample
from harness.tools.base import ToolResult

IPV4_UDP_HEADERS = 20 + 8
IPV6_UDP_HEADERS = 40 + 8


def udp_payload(mtu: int, addr: str) -> int:
    """Largest UDP payload that crosses a path of `mtu` to `addr` without fragmenting."""
    try:
        v6 = ipaddress.ip_address(addr).version == 6
    except ValueError:
        v6 = False  # a host name: the lab and the seeds are IPv4
    payload = mtu - (IPV6_UDP_HEADERS if v6 else IPV4_UDP_HEADERS)
    if mtu < 68 or payload < 16:
        raise HarnessError(f"overlay MTU {mtu} is too small for a UDP test")
    return payload


def whole_seconds(duration: float) -> int:
    """A duration as the whole seconds iperf3 -t, qperf -t and ping -w accept (at least 1)."""
    if duration <= 0:
        raise HarnessError(f"test duration must be positive, not {duration}")
    return max(1, math.ceil(duration))


def last_line(text: str) -> str:
    """The last non-blank line of a tool's output, for an error message."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def exit_reason(tool: str, returncode: int | None, stderr: str = "") -> str:
    """'iperf3 timed out' / 'iperf3 exited 137: <last stderr line>'."""
    what = "timed out (killed)" if returncode is None else f"exited {returncode}"
    detail = last_line(stderr)
    return f"{tool} {what}: {detail}" if detail else f"{tool} {what}"


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of non-negative shares: (sum x)^2 / (n * sum x^2).

    1.0 when every share is equal, 1/n when one takes everything; it does not depend on
    the unit or on a common scale factor. Empty input, or a negative or non-finite share,
    is a ValueError (a caller's mistake); all zeros give nan, as nobody got anything to
    share out fairly or not.
    """
    xs = [float(x) for x in values]
    if not xs:
        raise ValueError("Jain's index of no values")
    if any(not math.isfinite(x) or x < 0 for x in xs):
        raise ValueError(f"Jain's index needs finite non-negative values, not {xs}")
    top = max(xs)
    if top == 0:
        return math.nan
    xs = [x / top for x in xs]   # the index is scale-free; this keeps squares in range
    # Within [1/n, 1] by Cauchy–Schwarz; rounding can pass 1 by an ulp on equal shares.
    return min(1.0, math.fsum(xs) ** 2 / (len(xs) * math.fsum(x * x for x in xs)))


def failed(reason: str, samples: list[Sample] | None = None) -> ToolResult:
    """ok=False with the reason (and any figure that is still true, e.g. 100% loss)."""
    return ToolResult(samples=list(samples or []), ok=False, error=reason)
