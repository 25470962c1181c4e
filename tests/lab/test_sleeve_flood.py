"""Every sleeve mode under a flood of hostile datagrams, on the real lab.

While iperf3 TCP runs container to container across the sleeve, tests/flood.c
(overlay/sleeve) on h0 first captures a few of the datagrams h0's sleeve sends,
then sends h1's sleeve, for FLOOD_SECONDS at RATE datagrams a second, a mix of
empty, 1-byte, header-only, truncated, oversized (65,507 bytes), random, replayed
(the captured ones) and wrong-key datagrams, from three sources:

    other_port  h0's address, another port                  -> drops.wrong_port
    stranger    198.18.0.77, an extra address on h0's        -> drops.no_peer
                underlay that is no peer's
    spoofed     h0's own address and port (an nft rule on h0 rewrites the source
                port): h1 takes them for h0's and drops them by what they hold

One more kind, "marked", is a valid plaintext DATA datagram whose frame is a UDP
packet from h0's container to h1's container, port 9, its UDP source port naming
the flood source it came from (MARK_SPORT + 0 other_port, + 1 stranger, + 2
spoofed). nft counters in h1's container count those that arrive, source by
source: none may come through the stranger or other_port sources; through the
spoofed one they must arrive without a key (they are the peer's as far as h1 can
tell: the positive control that the check can fail) and not with one.

The sleeves stay up, the TCP stream completes, h1's drop counters grow by what
was sent, reason by reason (flood prints which reason each kind must land in;
what h1's kernel dropped before the sleeve could read it is the only slack), and
nothing comes back from h1's sleeve to the strangers (nft counters on h0).

Whatever fails, the stranger address and the nft tables go again (on remote hosts
nothing else would remove them).

Chance in it, by design none: the flood starts once iperf3 is connected (a condition),
captures until its pool is full (milliseconds while TCP flows; 2 s at most, with a
heartbeat a second besides), and the counters are read once they have caught up with
what was sent (a condition, 20 s deadline). Lower bounds sit far below what a stalled
CPU could cause: a quarter of the planned datagrams sent, 20 Mbit/s of TCP (the slowest
mode carries 2.6 Gbit/s). The kernel's drops before the sleeve (UDP receive errors,
reassembly failures, and the backlog drops of /proc/net/softnet_stat) are the only
slack allowed below what was sent.
"""

import json
import subprocess
import time

import pytest

from conftest import needs_root
from harness import modes
from harness.core.paths import PROJECT
from harness.modes.sleeve import PORT
from harness.run.endpoints import endpoints
from harness.run.procs import wait_listening

pytestmark = [needs_root(), pytest.mark.lab]
SLEEVE_DIR = PROJECT / "overlay" / "sleeve"

SLEEVES = ["sleeve", "sleeve-basic", "sleeve-l3", "sleeve-crypto", "sleeve-crypto-chacha", "sleeve-seg"]
MTU = 1410
FLOOD_SECONDS = 2
CAPTURE_SECONDS = 2       # at most: the capture ends as soon as its pool is full
RATE = 2000
SETTLE_SECONDS = 20       # for h1's sleeve to count what is still in its socket
STRANGER = "198.18.0.77"
SPOOF_PORT = 46784
TABLE = "obflood"
MARK_TABLE = "obfloodmark"  # in the receiving container
MARK_SPORT = 47000          # + 0 other_port, + 1 stranger, + 2 spoofed (flood.c's --mark-sport)
MARK_SOURCES = ("other_port", "stranger", "spoofed")
MARK_HEAD = "0x6f62666c6f6f6420"  # "obflood ", the first 8 bytes of flood.c's MARK_PAYLOAD


@pytest.fixture(scope="module")
def flood_binary():
    p = subprocess.run(["make", "-s", "-C", str(SLEEVE_DIR), "build/flood"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return SLEEVE_DIR / "build" / "flood"


def _nft_rules(side, peer):
    """On h0: the spoofing rewrite, and counters of what h1's sleeve sends back to a stranger."""
    h0, h1 = side.underlay_ip, peer.underlay_ip
    # the first two lines drop a table left behind by an earlier run, in the same transaction
    return f"""
table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
    chain out {{
        type filter hook output priority 0;
        ip daddr {h1} udp dport {PORT} udp sport {SPOOF_PORT} udp sport set {PORT}
    }}
    chain in {{
        type filter hook input priority 0;
        ip saddr {h1} udp sport {PORT} ip daddr {STRANGER} counter comment "to-stranger"
        ip saddr {h1} udp sport {PORT} ip daddr {h0} udp dport != {PORT} counter comment "to-other-port"
    }}
}}
"""


def _mark_rules():
    """In h1's container: count flood's marked packets as they arrive, by the source they were
    sent from (the UDP source port), and every packet to port 9 whatever its source port."""
    rules = "\n".join(f'        udp dport 9 udp sport {MARK_SPORT + i} @th,64,64 {MARK_HEAD} counter comment "{src}"'
                      for i, src in enumerate(MARK_SOURCES))
    return f"""
table inet {MARK_TABLE}
delete table inet {MARK_TABLE}
table inet {MARK_TABLE} {{
    chain pre {{
        type filter hook prerouting priority -300;
{rules}
        udp dport 9 counter comment "any"
    }}
}}
"""


def _nft_counters(host, table=TABLE) -> dict[str, int]:
    out = json.loads(host.run(["nft", "-j", "list", "table", "inet", table]).stdout)
    counts = {}
    for item in out["nftables"]:
        rule = item.get("rule")
        if rule and "comment" in rule:
            counts[rule["comment"]] = next(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    return counts


def _snmp(host) -> dict[tuple[str, str], int]:
    rows = [line.split() for line in host.run(["cat", "/proc/net/snmp"]).stdout.splitlines()]
    return {(a[0], k): int(v) for a, b in zip(rows[::2], rows[1::2]) for k, v in zip(a[1:], b[1:])}


def _kernel_drops(host) -> int:
    """What the host's kernel dropped of received datagrams before a socket read them: UDP
    receive errors and reassembly failures (its namespace's), and the backlog drops of
    every CPU (the machine's: /proc/net/softnet_stat, second column)."""
    snmp = _snmp(host)
    backlog = sum(int(line.split()[1], 16) for line in host.run(["cat", "/proc/net/softnet_stat"]).stdout.splitlines())
    return snmp[("Udp:", "InErrors")] + snmp[("Ip:", "ReasmFails")] + backlog


def _wait_connected(host, port: int, deadline_s: float = 30.0) -> None:
    """Until a TCP connection to `port` is established on `host` (iperf3's client is in)."""
    end = time.monotonic() + deadline_s
    while not host.run(["ss", "-Htn", "state", "established", f"sport = :{port}"], check=False).stdout.strip():
        assert time.monotonic() < end, f"no connection to port {port} within {deadline_s:.0f} s"
        time.sleep(0.05)


def _settled_drops(mode, lab, dp, before, want, kernel0) -> tuple[dict, int]:
    """h1's drop counts since `before`, read again until every reason holds at least what
    was sent less what the kernel dropped, or SETTLE_SECONDS pass; and the kernel's drops."""
    end = time.monotonic() + SETTLE_SECONDS
    while True:
        after = mode.counters(lab, dp)["h1"]
        lost = _kernel_drops(lab.sides[1].host) - kernel0
        got = {r: after["drops"][r] - before["drops"][r] for r in want}
        if all(got[r] >= want[r] - lost for r in want) or time.monotonic() > end:
            return got, lost
        time.sleep(0.2)


@pytest.mark.parametrize("name", SLEEVES)
def test_a_flood_of_hostile_datagrams_is_dropped_and_counted(lab, name, flood_binary):
    flood_case(lab, name, flood_binary)


def flood_case(lab, name, flood_binary) -> None:
    """Deploy mode `name` on testbed `lab` (the local lab, or remote hosts), flood h1's sleeve
    from h0 while TCP crosses, and check what h1 counted and that nothing came back."""
    mode = modes.get(name)
    a, b = lab.sides
    dp = mode.deploy(lab, MTU)
    try:
        c, s = endpoints(lab, dp, "container-container")  # s.host: h1's container, b.container
        a.host.run(["ip", "addr", "replace", f"{STRANGER}/24", "dev", a.underlay_dev])
        a.host.run(["nft", "-f", "-"], input=_nft_rules(a, b))
        s.host.run(["nft", "-f", "-"], input=_mark_rules())
        # the marked frames' Ethernet destination: the container's own MAC (L2)
        mac = json.loads(s.host.run(["ip", "-j", "link", "show", "dev", b.container_dev]).stdout)[0]["address"]
        before = mode.counters(lab, dp)["h1"]
        kernel0 = _kernel_drops(b.host)
        srv = s.host.start(["iperf3", "-s", "-1", "-p", "5201"])
        cli = None
        try:
            why = wait_listening(s.host, 5201, srv)
            assert why is None, why
            cli = c.host.start(["iperf3", "-c", s.addr, "-p", "5201", "-t",
                                str(CAPTURE_SECONDS + FLOOD_SECONDS + 2), "-J"])
            _wait_connected(s.host, 5201)
            done = a.host.run([str(flood_binary), "--target", f"{b.underlay_ip}:{PORT}",
                               "--peer", f"{a.underlay_ip}:{PORT}", "--stranger", STRANGER,
                               "--spoof-port", str(SPOOF_PORT), "--seconds", str(FLOOD_SECONDS),
                               "--rate", str(RATE), "--capture", a.underlay_dev, "--capture-seconds", str(CAPTURE_SECONDS),
                               "--mark-dst", s.addr, "--mark-src", c.addr, "--mark-sport", str(MARK_SPORT),
                               *(["--l3"] if mode.l3 else ["--mark-mac", mac]),
                               *(["--keyed", "--cipher", dp.info["cipher"]] if mode.crypto else [])],
                              timeout=CAPTURE_SECONDS + FLOOD_SECONDS + 30, check=False)
            try:
                tcp = cli.wait(CAPTURE_SECONDS + FLOOD_SECONDS + 30)
            except TimeoutError:
                tcp = None
        finally:
            if cli is not None:
                cli.stop()
            srv.stop()

        # the sleeves stayed up and the stream went through
        for i, proc in dp.processes.items():
            assert proc.poll() is None, f"h{i} sleeve exited {proc.poll()}: {proc.stop().stderr.strip()[-300:]}"
        assert tcp is not None, "iperf3 did not finish"
        assert done.ok, f"flood exited {done.returncode}: {done.stderr}"
        flood = json.loads(done.stdout)
        result = json.loads(tcp.stdout)
        assert "error" not in result, result["error"]
        bps = result["end"]["sum_received"]["bits_per_second"]
        assert bps > 20e6, f"{name}: TCP under the flood carried only {bps / 1e6:.1f} Mbit/s"

        # the flood was what it claims to be
        sent = sum(sum(kinds.values()) for kinds in flood["sent"].values())
        assert flood["captured"]["datagrams"] > 0, "nothing captured to replay"
        assert sent >= 0.25 * RATE * FLOOD_SECONDS, flood     # paced by the clock, catching up after a stall
        assert set(flood["sent"]) == set(MARK_SOURCES)
        assert flood["mark_sport"] == {src: MARK_SPORT + i for i, src in enumerate(MARK_SOURCES)}
        marked = {src: flood["sent"][src]["marked"] for src in MARK_SOURCES}
        assert all(marked.values()), f"marked datagrams not sent from every source: {marked}"

        # nothing of the strangers' reached h1's container; the peer's (spoofed) marked
        # frames did without a key - so this check sees frames when they come through
        arrived = _nft_counters(s.host, MARK_TABLE)
        assert arrived["other_port"] == 0 and arrived["stranger"] == 0, \
            f"{name}: strangers' frames reached the container: {arrived} (sent {marked})"
        assert flood["expect"]["spoofed"]["marked"] == ("crypto_mismatch" if mode.crypto else "accepted")
        if mode.crypto:
            assert arrived["spoofed"] == 0, f"{name}: plaintext frames reached a keyed sleeve's container: {arrived}"
        else:
            assert 0 < arrived["spoofed"] <= marked["spoofed"], \
                f"{name}: the peer's marked frames did not arrive as sent: {arrived} (sent {marked})"
        assert arrived["any"] == arrived["spoofed"], f"{name}: other packets to port 9: {arrived}"

        # h1's drop counters hold it, reason by reason
        want: dict[str, int] = {}
        for src, kinds in flood["sent"].items():
            for kind, n in kinds.items():
                reason = flood["expect"][src][kind]
                if reason != "accepted":  # plaintext has no replay protection
                    want[reason] = want.get(reason, 0) + n
        got, lost = _settled_drops(mode, lab, dp, before, want, kernel0)
        assert want["wrong_port"] == sum(flood["sent"]["other_port"].values())
        assert want["no_peer"] == sum(flood["sent"]["stranger"].values())
        off = {r: (got[r], want[r]) for r in want if not want[r] - lost <= got[r] <= want[r]}
        assert not off, f"{name}: drops (counted, sent) off by reason: {off}; kernel lost {lost}; all: {got}"

        # and nothing came back to a stranger
        assert _nft_counters(a.host) == {"to-stranger": 0, "to-other-port": 0}
    finally:
        # on remote hosts nothing else removes these; each goes even if another cannot
        left = _remove(((b.container, ["nft", "delete", "table", "inet", MARK_TABLE]),
                        (a.host, ["nft", "delete", "table", "inet", TABLE]),
                        (a.host, ["ip", "addr", "del", f"{STRANGER}/24", "dev", a.underlay_dev])))
        mode.teardown(lab, dp)
    assert not left, f"could not remove: {left}"


def _remove(steps) -> list[str]:
    """Run each removal (check=False: what is gone is gone); one that cannot even run
    (a lost connection) does not keep the others from running. Returns those."""
    failed = []
    for host, argv in steps:
        if host is None:
            continue
        try:
            host.run(argv, check=False, timeout=20)
        except Exception as e:  # noqa: BLE001 - reported after every other step ran
            failed.append(f"{host.name}: {' '.join(argv)}: {e}")
    return failed
