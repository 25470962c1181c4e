#!/bin/bash
# netns_replay.sh - a keyed sleeve restarted with the same key takes nothing of a
# recording of its peer. Two namespaces run `sleeve --l3 --key-file K`; the UDP
# from a to b is recorded on a's underlay while 20 pings cross; both daemons
# stop; b starts again with the same key; the recording is sent to it from a's
# address and port. Nothing of it may reach b's device (b's rx frames, and an nft
# counter of ICMP echo requests in b's container), and b's counters must say why
# (unproven_session: the sessions the recording names were never proven to the
# new b). Needs root; obs-* namespaces only, removed on every exit path.
# False failures: the 20 pings over two veths on an otherwise idle path must all
# cross (no loss source there but a full queue; chance well below 1e-6). Every
# wait is for a condition (the recorder ready, the peer heard, the replay counted)
# with a 30 s deadline.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
lab_select "${LABID:-$$}"      # this run's own namespaces
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "netns_replay: needs root" >&2; exit 1; }
[ -x "$SLEEVE" ] || { echo "netns_replay: build first (make)" >&2; exit 1; }
PASS=0 FAIL=0
ok() { echo "ok   $*"; PASS=$((PASS + 1)); }
bad() { echo "FAIL $*"; FAIL=$((FAIL + 1)); }
KEY=$LAB_TMP/key
head -c 32 /dev/urandom >"$KEY"
chmod 600 "$KEY"
REC=$LAB_TMP/recording

# heard SIDE : its peer's HEARTBEATs count (with a key: the handshake is done);
# up to 30 s
heard() {
	local i
	for i in $(seq 1 300); do
		stats_dump "$1" || return 1
		[ "$(stat_get "$1" 'd["peers"][0]["heard"]' 2>/dev/null)" = True ] && return 0
		sleep 0.1
	done
	return 1
}

# unproven_since FILE : b's unproven_session drops since the snapshot FILE
unproven_since() {
	python3 -c "import json; a, b = (json.load(open(f)) for f in ('$1', '$LAB_TMP/stats-b$LABID.json')); print(b['drops'].get('unproven_session', -1) - a['drops'].get('unproven_session', 0))"
}

# record / replay: sleeve datagrams from 198.18.0.1:6784 to 198.18.0.2:6784, as
# a's underlay carries them (a GSO send is cut back into datagrams by headers)
PY_REC='
import socket, struct, sys
out = open(sys.argv[1], "ab", buffering=0)
s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3))  # ETH_P_ALL
s.bind(("obs-u0", 0))
open(sys.argv[1] + ".ready", "w").close()
while True:
    p = s.recv(70000)
    if len(p) < 28 or p[0] >> 4 != 4 or p[9] != 17 or p[12:20] != bytes([198, 18, 0, 1, 198, 18, 0, 2]):
        continue
    ihl = (p[0] & 15) * 4
    sport, dport = struct.unpack("!HH", p[ihl:ihl + 4])
    if sport != 6784 or dport != 6784:
        continue
    d, off = p[ihl + 8:], 0
    while off + 8 <= len(d) and d[off:off + 2] == b"SV":
        n = 8 + struct.unpack("!H", d[off + 6:off + 8])[0] + (16 if d[off + 3] == 2 else 32)
        out.write(struct.pack("!H", n) + d[off:off + n])
        off += n
'
PY_REPLAY='
import socket, struct, sys, time
data, off, n, kinds = open(sys.argv[1], "rb").read(), 0, 0, {}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.0.1", 6784))
while off + 2 <= len(data):
    k = struct.unpack("!H", data[off:off + 2])[0]
    d = data[off + 2:off + 2 + k]
    off += 2 + k
    s.sendto(d, ("198.18.0.2", 6784))
    kinds[d[3]] = kinds.get(d[3], 0) + 1
    n += 1
    time.sleep(0.001)
print(n, kinds.get(1, 0), kinds.get(3, 0))
'

lab_up 1500
lab_containers 1410 l3
ns $HA python3 -c "$PY_REC" "$REC" &
LAB_PIDS+=($!)
for i in $(seq 1 300); do [ -e "$REC.ready" ] && break; sleep 0.1; done
[ -e "$REC.ready" ] || bad "replay: the recorder did not start"
sleeve_start a --l3 --mtu 1410 --key-file "$KEY"
sleeve_start b --l3 --mtu 1410 --key-file "$KEY"
if ! sleeve_wait a >/dev/null || ! sleeve_wait b >/dev/null || ! heard a || ! heard b; then
	bad "replay: the daemons did not come up and hear each other"
else
	sleeve_attach a l3; sleeve_attach b l3
	got=$(ns $CA ping -c 20 -i 0.05 -w 20 "$PEER_IP" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
	[ "${got:-0}" = 20 ] && ok "replay: 20 pings crossed while a's datagrams were recorded" ||
		bad "replay: ${got:-0} of 20 pings crossed"
fi
sleeve_stop_all # the recorder too
sleeve_start b --l3 --mtu 1410 --key-file "$KEY"
if ! sleeve_wait b >/dev/null; then
	bad "replay: b did not start again"
else
	sleeve_attach b l3
	ns $CB nft -f - <<-NFT
	table inet obs-replay {
		chain in {
			type filter hook input priority 0;
			icmp type echo-request counter
		}
	}
	NFT
	stats_dump b || bad "replay: b wrote no counters"
	cp "$LAB_TMP/stats-b$LABID.json" "$LAB_TMP/before.json"
	read -r sent data hbs < <(ns $HA python3 -c "$PY_REPLAY" "$REC")
	# b's counters, read again until it has counted every replayed DATA datagram (30 s at most)
	for i in $(seq 1 150); do
		stats_dump b && [ "$(unproven_since "$LAB_TMP/before.json")" -ge "${data:-0}" ] && break
		sleep 0.2
	done
	icmp=$(ns $CB nft list table inet obs-replay | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
	frames=$(python3 -c "import json; a, b = (json.load(open(f)) for f in ('$LAB_TMP/before.json', '$LAB_TMP/stats-b$LABID.json')); print(b['rx']['frames'] - a['rx']['frames'])")
	why=$(unproven_since "$LAB_TMP/before.json")
	echo "replay: sent ${sent:-0} recorded datagrams (${data:-0} DATA, ${hbs:-0} HEARTBEAT) to the restarted b"
	[ "${data:-0}" -ge 20 ] && ok "replay: the recording holds the ${data} DATA datagrams of the pings and more" ||
		bad "replay: only ${data:-0} DATA datagrams recorded"
	[ "$frames" = 0 ] && [ "${icmp:-x}" = 0 ] && ok "replay: nothing reached b's device (rx frames 0, echo requests 0)" ||
		bad "replay: the recording reached b's device: rx frames $frames, echo requests ${icmp:-?}"
	[ "$why" -ge "${data:-0}" ] && [ "$why" -ge 20 ] && ok "replay: b counted unproven_session $why" ||
		bad "replay: b's unproven_session counted $why for ${data:-0} DATA datagrams"
fi
lab_down
for n in $(lab_left); do bad "namespace $n left behind"; done
echo "netns_replay: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
