#!/usr/bin/env bash
# Packet rate of 64-byte UDP datagrams from one sending CPU, four generators in turn:
# iperf3 (one datagram a syscall), blast's UDP sockets (sendmmsg), blast --packet (a packet
# socket past the qdisc) and netsniff-ng's trafgen (a PACKET_MMAP TX ring, one CPU), into a
# veth pair of two namespaces, as the lab's native path is: the sender pinned to CPU 0, the
# receiver to CPU 1 (a veth delivers on the sending CPU). trafgen's frames carry blast's
# header, so `blast recv` counts them as it counts blast's.
#   benchmarks/packet_headroom.sh [ROUNDS] [SECONDS]     (default 5 rounds of 2 s)
# As root; trafgen from Debian's netsniff-ng (scripts/apt-install.sh netsniff-ng). Prints one
# line a round (received Mpps per generator) and each generator's median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
secs=${2:-2}
A=obb-hr-a B=obb-hr-b
BLAST=overlay/blast/build/blast
command -v trafgen >/dev/null || { echo "packet_headroom: no trafgen (apt-get install netsniff-ng)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "packet_headroom: no iperf3" >&2; exit 2; }
make -s -C overlay/blast build/blast
work=
cleanup() { ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; [ -z "$work" ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
work=$(mktemp -d)
ip netns add $A
ip netns add $B
ip link add obb-hr-va netns $A type veth peer name obb-hr-vb netns $B
ip -n $A addr add 198.18.0.1/24 dev obb-hr-va
ip -n $B addr add 198.18.0.2/24 dev obb-hr-vb
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set obb-hr-va up
ip -n $B link set obb-hr-vb up
ip netns exec $A ping -c 1 -W 2 198.18.0.2 >/dev/null          # the neighbour known before any packet socket
mac_a=$(ip -n $A -o link show obb-hr-va | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
mac_b=$(ip -n $B -o link show obb-hr-vb | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')

# four flows to blast's four ports, 64-byte payloads opening with blast's data header
# ("BLD1", a run id, then zeros for its sequence and flow)
for f in 0 1 2 3; do
	printf '{ eth(da=%s, sa=%s), ipv4(saddr=198.18.0.1, daddr=198.18.0.2, ttl=64, df), udp(sport=%d, dport=%d),\n' \
		"$mac_b" "$mac_a" $((40000 + f)) $((9000 + f))
	printf '  c32(0x424c4431), c32(0x0b0b0b0b), fill(0x00, 56) }\n'
done >"$work/trafgen.cfg"

in_a() { ip netns exec $A taskset -c 0 "$@"; }
recv_start() {   # the receiver as this shell's child (exec: $RPID is blast itself)
	rm -f "$work/recv.out"
	(exec ip netns exec $B taskset -c 1 "$BLAST" recv --port 9000 --flows 4 --mtu 1500 --duration $((secs + 4)) \
		>"$work/recv.out") &
	RPID=$!
	for _ in $(seq 50); do grep -q ready "$work/recv.out" 2>/dev/null && return; sleep 0.1; done
	echo "packet_headroom: blast recv never got ready" >&2; exit 1
}
recv_mpps() { wait "$RPID"; python3 -c 'import json,sys
d=[json.loads(l) for l in open(sys.argv[1]) if "\"recv\"" in l][-1]
print("%.3f" % (d["packets"] / d["seconds"] / 1e6))' "$work/recv.out"; }
blast_mpps() { python3 -c 'import json,sys
d=json.loads([l for l in sys.stdin if "\"send\"" in l][-1])
print("%.3f" % (d["receiver"]["packets"] / d["seconds"] / 1e6))'; }

gen_iperf3() {
	(exec ip netns exec $B taskset -c 1 iperf3 -s -1 -p 5201 >/dev/null 2>&1) &
	local spid=$!
	sleep 0.3
	in_a iperf3 -u -c 198.18.0.2 -p 5201 -l 64 -b 0 -t "$secs" -J | python3 -c 'import json,sys
e=json.load(sys.stdin)["end"]; r=e.get("sum_received") or e["sum"]
print("%.3f" % ((r["packets"] - r["lost_packets"]) / r["seconds"] / 1e6))'
	wait "$spid" || true
}
gen_blast() {   # [--packet]
	recv_start
	in_a "$BLAST" send --addr 198.18.0.2 --port 9000 --flows 4 --size 64 --mtu 1500 --duration "$secs" --rate 0 "$@" \
		| blast_mpps
	kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null || true
}
gen_trafgen() {
	recv_start
	in_a timeout -s INT "$secs" trafgen --dev obb-hr-va --conf "$work/trafgen.cfg" --cpus 1 >/dev/null 2>&1 || true
	recv_mpps
}

echo "round  iperf3  blast-udp  blast-packet  trafgen   (received Mpps, 64-byte payloads, sender on CPU 0)"
for r in $(seq 1 "$rounds"); do
	i=$(gen_iperf3); u=$(gen_blast); p=$(gen_blast --packet); t=$(gen_trafgen)
	printf '%5d  %6s  %9s  %12s  %7s\n' "$r" "$i" "$u" "$p" "$t" | tee -a "$work/rows"
done
python3 - "$work/rows" <<'EOF'
import statistics, sys
rows = [list(map(float, ln.split()[1:])) for ln in open(sys.argv[1])]
names = ("iperf3", "blast-udp", "blast-packet", "trafgen")
med = [statistics.median(c) for c in zip(*rows)]
print("median " + "  ".join(f"{n} {m:.3f}" for n, m in zip(names, med)))
ratios = [[x / row[0] for x in row[1:]] for row in rows]
for n, col in zip(names[1:], zip(*ratios)):
    print(f"{n} / iperf3 per round: {min(col):.2f}-{max(col):.2f}, median {statistics.median(col):.2f}")
EOF
