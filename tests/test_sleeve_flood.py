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

The sleeves stay up, the TCP stream completes, h1's drop counters grow by what
was sent, reason by reason (flood prints which reason each kind must land in;
what h1's kernel dropped before the sleeve could read it is the only slack), and
nothing comes back from h1's sleeve to the strangers (nft counters on h0).
"""

import json
import subprocess
import time

import pytest

from conftest import needs_root
from harness import modes
from harness.endpoints import endpoints
from harness.facts import PROJECT
from harness.modes.sleeve import PORT
from harness.runner import wait_listening

pytestmark = [needs_root(), pytest.mark.lab]
SLEEVE_DIR = PROJECT / "overlay" / "sleeve"

SLEEVES = ["sleeve", "sleeve-basic", "sleeve-l3", "sleeve-crypto", "sleeve-crypto-chacha", "sleeve-seg"]
MTU = 1410
FLOOD_SECONDS = 2
RATE = 2000
STRANGER = "198.18.0.77"
SPOOF_PORT = 46784
TABLE = "obflood"


@pytest.fixture(scope="module")
def flood_binary():
    p = subprocess.run(["make", "-s", "-C", str(SLEEVE_DIR), "build/flood"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return SLEEVE_DIR / "build" / "flood"


def _nft_rules(side, peer):
    """On h0: the spoofing rewrite, and counters of what h1's sleeve sends back to a stranger."""
    h0, h1 = side.underlay_ip, peer.underlay_ip
    return f"""
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


def _nft_counters(host) -> dict[str, int]:
    out = json.loads(host.run(["nft", "-j", "list", "table", "inet", TABLE]).stdout)
    counts = {}
    for item in out["nftables"]:
        rule = item.get("rule")
        if rule and "comment" in rule:
            counts[rule["comment"]] = next(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    return counts


def _snmp(host) -> dict[tuple[str, str], int]:
    rows = [line.split() for line in host.run(["cat", "/proc/net/snmp"]).stdout.splitlines()]
    return {(a[0], k): int(v) for a, b in zip(rows[::2], rows[1::2]) for k, v in zip(a[1:], b[1:])}


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
        a.host.run(["ip", "addr", "add", f"{STRANGER}/24", "dev", a.underlay_dev])
        a.host.run(["nft", "-f", "-"], input=_nft_rules(a, b))
        before = mode.counters(lab, dp)["h1"]
        snmp0 = _snmp(b.host)
        c, s = endpoints(lab, dp, "container-container")
        srv = s.host.start(["iperf3", "-s", "-1", "-p", "5201"])
        cli = None
        try:
            why = wait_listening(s.host, 5201, srv)
            assert why is None, why
            cli = c.host.start(["iperf3", "-c", s.addr, "-p", "5201", "-t", str(FLOOD_SECONDS + 2), "-J"])
            time.sleep(0.3)
            done = a.host.run([str(flood_binary), "--target", f"{b.underlay_ip}:{PORT}",
                               "--peer", f"{a.underlay_ip}:{PORT}", "--stranger", STRANGER,
                               "--spoof-port", str(SPOOF_PORT), "--seconds", str(FLOOD_SECONDS),
                               "--rate", str(RATE), "--capture", a.underlay_dev, "--capture-seconds", "0.8",
                               *(["--l3"] if mode.l3 else []),
                               *(["--keyed", "--cipher", dp.info["cipher"]] if mode.crypto else [])],
                              timeout=FLOOD_SECONDS + 30, check=False)
            try:
                tcp = cli.wait(FLOOD_SECONDS + 15)
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
        assert sent >= 0.9 * RATE * FLOOD_SECONDS, flood
        assert set(flood["sent"]) == {"other_port", "stranger", "spoofed"}

        # h1's drop counters hold it, reason by reason
        after = mode.counters(lab, dp)["h1"]
        snmp1 = _snmp(b.host)
        lost = sum(snmp1[k] - snmp0[k] for k in [("Udp:", "InErrors"), ("Ip:", "ReasmFails")])
        want: dict[str, int] = {}
        for src, kinds in flood["sent"].items():
            for kind, n in kinds.items():
                reason = flood["expect"][src][kind]
                if reason != "accepted":  # plaintext has no replay protection
                    want[reason] = want.get(reason, 0) + n
        got = {r: after["drops"][r] - before["drops"][r] for r in want}
        assert want["wrong_port"] == sum(flood["sent"]["other_port"].values())
        assert want["no_peer"] == sum(flood["sent"]["stranger"].values())
        off = {r: (got[r], want[r]) for r in want if not want[r] - lost <= got[r] <= want[r]}
        assert not off, f"{name}: drops (counted, sent) off by reason: {off}; kernel lost {lost}; all: {got}"

        # and nothing came back to a stranger
        assert _nft_counters(a.host) == {"to-stranger": 0, "to-other-port": 0}
    finally:
        mode.teardown(lab, dp)
