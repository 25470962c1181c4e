"""The MTU doctor's probes: DF pings by size, the kernel's fragment counters, and the
bisection that finds a path's MTU to the byte.

Like every tool here, nothing runs anything: argv builders, pure parsers of what the
commands print (tested on the captures of tests/data/capture_mtu.sh), and a bisection
that takes the probe as a function, so it is tested on known answers without a host.

`ping -M do -s N -c 1 -W 1 ADDR` (iputils) sends one echo of N + 28 bytes with DF set:

    1380 bytes from 198.18.2.2: icmp_seq=1 ttl=63 time=3.59 ms       it crossed (exit 0)
    From 198.18.1.254 icmp_seq=1 Frag needed and DF set (mtu = 1400)  a router refused it
    ping: local error: message too long, mtu=1400   (stderr)           the sender's device or its
                                                                        learnt path MTU refused it
    1 packets transmitted, 0 received, 100% packet loss                 it vanished (no reply, no
                                                                        ICMP within 1 s)
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

IP_ICMP_HEADERS = 28            # IPv4 20 + ICMP echo 8: ping -s N sends N + 28 bytes
TCP_IP_HEADERS = 40             # IPv4 20 + TCP 20
TCP_TIMESTAMPS = 12             # the timestamp option Linux puts on every segment (tcp_timestamps=1)
MIN_MTU, MAX_MTU = 576, 65535   # IPv4's minimum datagram every host must take; the largest an IP length holds

# The kernel's fragment counters (nstat's names; /proc/net/snmp's Ip: FragCreates ...).
FRAG_COUNTERS = ("IpFragCreates", "IpFragOKs", "IpFragFails", "IpReasmReqds", "IpReasmOKs", "IpReasmFails")

PASSED, FRAG_NEEDED, LOCAL, LOST, ERROR = "passed", "frag-needed", "local", "lost", "error"

_RECEIVED = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_FRAG = re.compile(r"From (\S+) .*Frag(?:mentation)? needed and DF set \(mtu = (\d+)\)")
_LOCAL = re.compile(r"local error: message too long, mtu[= ]+(\d+)")
_TOO_LONG = re.compile(r"message too long, mtu[= ]+(\d+)", re.I)


@dataclasses.dataclass(frozen=True)
class Probe:
    """What one DF probe of `size` bytes (the IP packet) met."""

    size: int
    outcome: str                   # PASSED, FRAG_NEEDED, LOCAL, LOST or ERROR
    mtu: int | None = None         # the MTU an ICMP or the local error named
    source: str | None = None      # who sent the frag-needed
    error: str | None = None       # ping's own message, for ERROR

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED


def df_ping_argv(addr: str, size: int, wait: int = 1) -> list[str]:
    """One echo whose IP packet is `size` bytes with DF set, waiting `wait` s for it."""
    if size < IP_ICMP_HEADERS:
        raise ValueError(f"a DF probe of {size} bytes cannot hold the IPv4 and ICMP headers")
    return ["ping", "-M", "do", "-s", str(size - IP_ICMP_HEADERS), "-c", "1", "-W", str(wait), "-n", addr]


def parse_df_ping(size: int, stdout: str, stderr: str, returncode: int | None) -> Probe:
    """Pure: one `df_ping_argv` probe's output → its Probe."""
    m = _FRAG.search(stdout)
    if m:
        return Probe(size, FRAG_NEEDED, int(m[2]), m[1])
    m = _LOCAL.search(stderr) or _TOO_LONG.search(stdout)
    if m:
        return Probe(size, LOCAL, int(m[1]))
    counts = _RECEIVED.search(stdout)
    if returncode is None:
        return Probe(size, ERROR, error="ping timed out (killed)")
    if counts and int(counts[2]) > 0 and returncode == 0:
        return Probe(size, PASSED)
    if counts and int(counts[1]) > 0 and int(counts[2]) == 0 and returncode == 1:
        return Probe(size, LOST)
    why = (stderr.strip() or stdout.strip() or f"exit {returncode}").splitlines()[-1]
    return Probe(size, ERROR, error=f"ping exited {returncode}: {why}")


@dataclasses.dataclass(frozen=True)
class Bisection:
    """The largest DF packet that crossed, and every probe that found it."""

    mtu: int | None                # None: not even the smallest size crossed
    probes: tuple[Probe, ...]

    @property
    def refusals(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if not p.passed)


class ProbeError(Exception):
    """A probe that could not be run or read (not a packet that did not cross)."""


LOST_TRIES = 3      # a size is lost only when this many probes in a row vanish


def bisect(probe: Callable[[int], Probe], low: int, high: int, tries: int = LOST_TRIES,
           hint: int | None = None) -> Bisection:
    """The largest size in [low, high] whose probe passes, to the byte, assuming every
    size up to the path MTU passes and none above it does. `high` first (a path that
    carries what its ends send needs one probe), then `low` (a path that carries nothing
    is said so rather than bisected), then halves. With a `hint` (what another probe of
    the same path found), `hint` and `hint + 1` first: a path that agrees with it needs
    those two, one that does not is bisected on the side the hint leaves. A probe that
    errs raises ProbeError. A probe that vanished (LOST) is sent again, up to `tries` in
    all: one echo late past its wait on a loaded host must not read as a black hole or a
    smaller MTU."""
    if not MIN_MTU <= low <= high:
        raise ValueError(f"bisection range {low}..{high}")
    done: list[Probe] = []

    def ask(size: int) -> bool:
        for _ in range(max(1, tries)):
            p = probe(size)
            done.append(p)
            if p.outcome == ERROR:
                raise ProbeError(p.error or f"probe of {size} bytes failed")
            if p.outcome != LOST:
                break
        return p.passed

    good = None
    if hint is not None and low <= hint < high:
        if ask(hint):
            if not ask(hint + 1):
                return Bisection(hint, tuple(done))
            good = hint + 1
        elif hint == low:
            return Bisection(None, tuple(done))
        else:
            high = hint - 1
    if ask(high):
        return Bisection(high, tuple(done))
    if good is None:
        if not ask(low):
            return Bisection(None, tuple(done))
        good = low
    bad = high                       # good passes, bad does not
    while bad - good > 1:
        mid = (good + bad) // 2
        if ask(mid):
            good = mid
        else:
            bad = mid
    return Bisection(good, tuple(done))


def nstat_argv() -> list[str]:
    """Every kernel counter, absolute, zeros included, without touching nstat's history."""
    return ["nstat", "-asz"]


def parse_nstat(stdout: str) -> dict[str, int]:
    """Pure: `nstat -az` → {counter: value} (the `#kernel` header and rates left out)."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#") and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def frag_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The fragment counters' increase between two readings of one host."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in FRAG_COUNTERS}


def mss_mtu(mss: int, timestamps: bool = True) -> int:
    """The IP packet size of a full segment of MSS payload bytes (iperf3's tcp_mss_default
    is the payload a segment carries, TCP options taken off)."""
    return mss + TCP_IP_HEADERS + (TCP_TIMESTAMPS if timestamps else 0)


def parse_mss(doc: dict) -> int | None:
    """iperf3 -J's negotiated MSS (start.tcp_mss_default), or None where it printed none."""
    mss = (doc.get("start") or {}).get("tcp_mss_default")
    return int(mss) if isinstance(mss, (int, float)) and mss > 0 else None


_DEV = re.compile(r"\bdev (\S+)")
_MTU = re.compile(r"\bmtu (\d+)")


def parse_route_dev(stdout: str) -> str | None:
    """`ip -o route get ADDR` → the device the route leaves by."""
    m = _DEV.search(stdout)
    return m[1] if m else None


def parse_route_mtu(stdout: str) -> int | None:
    """`ip -o route get ADDR` (or `ip -o route show default`) → the MTU the route itself
    sets (a route's `mtu` metric, as Cilium gives a pod's routes below its device's MTU), or
    None: none, or only a path MTU the host learnt (`cache expires …s mtu N`: discovered,
    not configured)."""
    line = stdout.strip().splitlines()[0] if stdout.strip() else ""
    if "expires" in line:
        return None
    m = _MTU.search(line)
    return int(m[1]) if m else None


def parse_link_mtu(stdout: str) -> int | None:
    """`ip -o link show dev DEV` → its MTU."""
    m = _MTU.search(stdout)
    return int(m[1]) if m else None
