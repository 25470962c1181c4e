#!/bin/bash
# capture_seeds.sh - real reads for the socket fuzz target (fuzz/fuzz_sock.c):
# the sleeve between two namespaces carries a 2 s iperf3 TCP stream in each mode,
# and tests/flood.c captures, on the underlay, what each sleeve sends the other
# (a UDP GSO send is what the receiving socket reads as one GRO train). Keyed
# modes use the fuzz targets' key (32 bytes of 0x42) so that the seeds open:
# a's (198.18.0.1) as fuzz_sock's first peer, b's (198.18.0.2) as its second.
# Needs root; obs-* namespaces only, removed on every exit path.
#   tests/capture_seeds.sh [DIR]      (default fuzz/corpus-sock)
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "capture_seeds: needs root" >&2; exit 1; }
OUT=$(realpath "${1:-fuzz/corpus-sock}")
FLOOD=$(dirname "$SLEEVE")/flood
[ -x "$SLEEVE" ] && [ -x "$FLOOD" ] || { echo "capture_seeds: build first (make build/sleeve build/flood)" >&2; exit 1; }
mkdir -p "$OUT"
KEY=$LAB_TMP/key42
printf '\x42%.0s' $(seq 32) >"$KEY"
chmod 600 "$KEY"

# capture NAME CFG l2|l3 [--l3] [--keyed] -- SLEEVE_ARGS : cfg as fuzz_sock's first byte
capture() {
	local name=$1 cfg=$2 mode=$3 fargs=() args=() seen=0 x; shift 3
	for x in "$@"; do
		if [ "$x" = -- ]; then seen=1; continue; fi
		if [ $seen = 0 ]; then fargs+=("$x"); else args+=("$x"); fi
	done
	lab_up 1500
	lab_containers 1410 "$mode"
	sleeve_start a --mtu 1410 "${args[@]}"
	sleeve_start b --mtu 1410 "${args[@]}"
	sleeve_wait a >/dev/null && sleeve_wait b >/dev/null || { echo "capture_seeds: $name: not ready" >&2; exit 1; }
	sleeve_attach a "$mode"; sleeve_attach b "$mode"
	ip netns exec $CB timeout 20 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	LAB_PIDS+=($!)
	sleep 0.3
	ns $CA timeout 20 iperf3 -c "$PEER_IP" -p 5201 -t 2 >/dev/null 2>&1 &
	LAB_PIDS+=($!)
	sleep 0.5
	# a -> b (the data) and b -> a (the acknowledgements), at the same time
	ns $HA "$FLOOD" --target 198.18.0.2:6784 --peer 198.18.0.1:6784 --seconds 0 "${fargs[@]}" \
		--capture obs-u0 --capture-seconds 1 --seeds "$OUT" --seed-cfg "$cfg" \
		--seed-prefix "capture-$name-data-" --seeds-max 3 | head -n1 &
	x=$!
	ns $HB "$FLOOD" --target 198.18.0.1:6784 --peer 198.18.0.2:6784 --seconds 0 "${fargs[@]}" \
		--capture obs-u1 --capture-seconds 1 --seeds "$OUT" --seed-cfg $((cfg | 32)) --seed-from 3 \
		--seed-prefix "capture-$name-acks-" --seeds-max 8 | head -n1
	wait $x
	sleeve_stop_all
}

# cfg bits: 1 keyed, 2 L3, 4 vnet device, 8 --segment, 32 two peers (set for
# b's), 64 --basic, 128 a receiver that accepts only ChaCha20-Poly1305
capture sleeve 4 l2 --
capture keyed 5 l2 --keyed -- --key-file "$KEY"
capture keyed-chacha 133 l2 --keyed -- --key-file "$KEY" --cipher chacha20-poly1305
capture l3 6 l3 --l3 -- --l3
capture segment 12 l2 -- --segment
capture basic 64 l2 -- --basic
lab_down
ls "$OUT" | grep -c '^capture-' | sed 's/^/capture_seeds: seeds in '"${OUT//\//\\/}"': /'
