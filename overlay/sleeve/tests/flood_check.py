"""Checks one flood case of netns_smoke.sh from the files it left in its temporary directory.

    flood_check.py TMP NAME SECONDS [--settled] FLOOD_ARGS...

Without --settled: prints one "ok   ..." or "FAIL ..." line per check. With --settled:
prints nothing and exits 0 once the receiving sleeve's drop counters hold, reason by
reason, at least what was sent less what the kernel dropped before the sleeve could read
it (the files are read again after each counter dump), 1 while they do not.

What the kernel dropped: UDP receive errors and reassembly failures in the receiving
host's namespace, and the backlog drops of every CPU (/proc/net/softnet_stat).
"""

import json
import re
import sys


def _snmp(path):
    rows = [line.split() for line in open(path)]
    return {(a[0], k): int(v) for a, b in zip(rows[::2], rows[1::2]) for k, v in zip(a[1:], b[1:])}


def _backlog(path):
    return sum(int(line.split()[1], 16) for line in open(path))


def counts(tmp):
    """(want, got, lost): drops by reason expected from what was sent, counted, and lost in the kernel."""
    load = lambda f: json.load(open(f"{tmp}/{f}"))
    flood, before, after = load("flood.json"), load("flood-before.json"), load("flood-after.json")
    s0, s1 = _snmp(f"{tmp}/snmp-before"), _snmp(f"{tmp}/snmp-after")
    lost = sum(s1[k] - s0[k] for k in [("Udp:", "InErrors"), ("Ip:", "ReasmFails")])
    lost += _backlog(f"{tmp}/softnet-after") - _backlog(f"{tmp}/softnet-before")
    want = {}
    for src, kinds in flood["sent"].items():
        for kind, n in kinds.items():
            r = flood["expect"][src][kind]
            if r != "accepted":            # plaintext has no replay protection
                want[r] = want.get(r, 0) + n
    got = {r: after["drops"][r] - before["drops"][r] for r in want}
    return want, got, lost


def report(tmp, name, seconds, fargs):
    flood = json.load(open(f"{tmp}/flood.json"))
    want, got, lost = counts(tmp)
    iperf = json.loads(open(f"{tmp}/flood-iperf.json").read() or "{}")
    sent = sum(sum(k.values()) for k in flood["sent"].values())
    bps = iperf.get("end", {}).get("sum_received", {}).get("bits_per_second", 0)
    nft = [int(n) for n in re.findall(r"counter packets (\d+)", open(f"{tmp}/flood-nft.txt").read())]

    def say(ok, what):
        print(("ok   " if ok else "FAIL ") + f"flood {name}: {what}")

    # paced by the clock and catching up after a stall: a quarter is far below what even
    # a loaded machine sends, far above what a broken sender does
    say(flood["captured"]["datagrams"] > 0 and sent >= 0.25 * 2000 * seconds,
        f"sent {sent} datagrams, {flood['captured']['datagrams']} of them captured for replay")
    if "--keyed" in fargs:
        refl = flood["sent"]["spoofed"]["reflected"]
        say(refl > 0 and flood["expect"]["spoofed"]["reflected"] == "unproven_session",
            f"{refl} of b's own datagrams reflected from a's address, each refused unopened")
    say(not iperf.get("error") and bps > 20e6, f"TCP completed, {bps / 1e9:.2f} Gbit/s ({iperf.get('error', 'no error')})")
    say(all(want[r] - lost <= got[r] <= want[r] for r in want),
        "drops by reason " + ", ".join(f"{r} {got[r]}/{want[r]}" for r in sorted(want)) + f" (kernel lost {lost})")
    say(len(nft) == 2 and sum(nft) == 0, f"nothing came back to the strangers (nft {nft})")


def main(argv):
    tmp, name, seconds, rest = argv[0], argv[1], float(argv[2]), argv[3:]
    if rest[:1] == ["--settled"]:
        want, got, lost = counts(tmp)
        return 0 if all(got[r] >= want[r] - lost for r in want) else 1
    report(tmp, name, seconds, rest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
