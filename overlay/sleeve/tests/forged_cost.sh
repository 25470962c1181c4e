#!/bin/bash
# forged_cost.sh - what datagrams under made-up sessions cost a keyed sleeve.
# Two namespaces run `sleeve --key-file K --cipher aes-256-gcm` (L2); for
# SECONDS an iperf3 TCP stream goes a -> b while tests/flood.c sends b, from a's
# own address and port (nft rewrites the source port), KIND datagrams at RATE a
# second: none, wrongkey (DATA under a made-up session and key) or wronghb (a
# HEARTBEAT likewise). Prints per build and kind b's sleeve CPU (utime + stime
# over the stream, % of one CPU) and the stream's Gbit/s; with SLEEVE_OLD and
# FLOOD_OLD (an older build and a flood.c built against its wire version) the
# builds alternate, round by round, in one run. A measurement, not a test.
# With IPERF=0 no stream runs: b's CPU is then what the flood alone costs, and
# ns/dgram that CPU time per datagram sent.
#   tests/forged_cost.sh [ROUNDS]   env: SECONDS_EACH (5), RATE (50000), IPERF (1)
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "forged_cost: needs root" >&2; exit 1; }
ROUNDS=${1:-2}
T=${SECONDS_EACH:-5}
RATE=${RATE:-50000}
FLOOD=${FLOOD:-$(dirname "$SLEEVE")/flood}
BUILDS=("new|$SLEEVE|$FLOOD")
[ -n "${SLEEVE_OLD:-}" ] && BUILDS+=("old|$SLEEVE_OLD|${FLOOD_OLD:?FLOOD_OLD too}")
KEY=$LAB_TMP/key
head -c 32 /dev/urandom >"$KEY"
chmod 600 "$KEY"
SPOOF_PORT=40999

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# one BUILD_SPEC KIND : prints "build kind cpu% gbit/s sent"
one() {
	local name=${1%%|*} rest=${1#*|} kind=$2 sl fl c0 c1 sent=0 bps
	sl=${rest%%|*} fl=${rest#*|}
	SLEEVE=$sl
	lab_up 1500
	lab_containers 1410 l2
	sleeve_start a --mtu 1410 --key-file "$KEY" --cipher aes-256-gcm
	sleeve_start b --mtu 1410 --key-file "$KEY" --cipher aes-256-gcm
	sleeve_wait a >/dev/null && sleeve_wait b >/dev/null || { echo "$name $kind not-ready"; sleeve_stop_all; return; }
	sleeve_attach a l2; sleeve_attach b l2
	ns $HA nft -f - <<-NFT
	table inet obs-cost {
		chain out {
			type filter hook output priority 0;
			ip daddr 198.18.0.2 udp dport 6784 udp sport $SPOOF_PORT udp sport set 6784
		}
	}
	NFT
	ns $CA ping -c 3 -i 0.2 -W 1 "$PEER_IP" >/dev/null 2>&1 # both sessions proven
	if [ "${IPERF:-1}" = 1 ]; then
		ip netns exec $CB timeout $((T + 20)) iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
		LAB_PIDS+=($!)
		sleep 0.3
	fi
	c0=$(cpu_ticks "$SLEEVE_PID_b")
	if [ "${IPERF:-1}" = 1 ]; then
		ns $CA timeout $((T + 15)) iperf3 -c "$PEER_IP" -p 5201 -t "$T" -J >"$LAB_TMP/iperf.json" 2>/dev/null &
	else
		sleep "$T" &
	fi
	local ip=$!
	if [ "$kind" != none ]; then
		sent=$(ns $HA "$fl" --target 198.18.0.2:6784 --peer 198.18.0.1:6784 --keyed \
			--spoof-port $SPOOF_PORT --only "$kind" --seconds "$T" --rate "$RATE" |
			python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(sum(k.values()) for k in d["sent"].values()))')
	fi
	wait $ip
	c1=$(cpu_ticks "$SLEEVE_PID_b")
	bps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 1e9))' "$LAB_TMP/iperf.json" 2>/dev/null)
	kill -USR1 "$SLEEVE_PID_b"; sleep 0.3
	echo "$name $kind cpu=$(( (c1 - c0) * 100 / ($(getconf CLK_TCK) * T) ))% gbps=${bps:-0} sent=$sent" \
		"ns/dgram=$([ "$sent" -gt 0 ] && echo $(( (c1 - c0) * 1000000000 / $(getconf CLK_TCK) / sent )) || echo -)" \
		"drops(auth_fail,unproven_session,trial_limit)=$(stat_get b 'd["drops"]["auth_fail"], d["drops"].get("unproven_session"), d["drops"].get("trial_limit")')"
	sleeve_stop_all
}

for r in $(seq 1 "$ROUNDS"); do
	for kind in none wrongkey wronghb; do
		for b in "${BUILDS[@]}"; do
			wait_quiet
			one "$b" "$kind"
		done
	done
done
lab_down
