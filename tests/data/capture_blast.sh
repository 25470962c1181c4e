#!/usr/bin/env bash
# Capture real blast output (overlay/blast) for the parser tests (tests/unit/test_tools_blast.py).
#
# Makes two namespaces (obt-capb-a = sender 198.18.0.1, obt-capb-b = receiver 198.18.0.2)
# joined by a veth pair of MTU 1500, builds blast, runs each capture for about a second and
# deletes everything on exit. Each capture NAME leaves NAME.out and NAME.err next to this
# script and replaces its line "NAME<TAB>RC<TAB>ARGV" in captures.tsv (argv[0] as `blast`).
# Needs root: sudo tests/data/capture_blast.sh. The tests assert the exact figures of these
# files: update them with new ones.
set -uo pipefail

DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$DIR/../.." && pwd)
NSA=obt-capb-a NSB=obt-capb-b
B="$ROOT/overlay/blast/build/blast"
RPID=""

cleanup() {
    [ -n "$RPID" ] && kill "$RPID" 2>/dev/null; wait 2>/dev/null
    ip netns del "$NSA" 2>/dev/null; ip netns del "$NSB" 2>/dev/null; true
}
trap cleanup EXIT

make -s -C "$ROOT/overlay/blast" build/blast || exit 1
cleanup
ip netns add "$NSA" && ip netns add "$NSB" || exit 1
ip link add obt-capb-va netns "$NSA" type veth peer name obt-capb-vb netns "$NSB"
ip -n "$NSA" addr add 198.18.0.1/24 dev obt-capb-va
ip -n "$NSB" addr add 198.18.0.2/24 dev obt-capb-vb
for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
ip -n "$NSA" link set obt-capb-va up
ip -n "$NSB" link set obt-capb-vb up

record() {   # record NAME RC ARGV...
    local name=$1 rc=$2; shift 2
    [ "$rc" = 137 ] && rc=-9
    grep -v "^$name	" "$DIR/captures.tsv" >"$DIR/captures.tsv.new" || true
    printf '%s\t%s\t%s\n' "$name" "$rc" "blast $*" >>"$DIR/captures.tsv.new"
    mv "$DIR/captures.tsv.new" "$DIR/captures.tsv"
}

cap() {      # cap NAME SECONDS NS ARGV... : blast ARGV in NS with a SIGKILL deadline
    local name=$1 limit=$2 ns=$3; shift 3
    timeout -s KILL "$limit" ip netns exec "$ns" "$B" "$@" >"$DIR/$name.out" 2>"$DIR/$name.err"
    record "$name" $? "$@"
}

receiver() { # receiver NAME ARGV... : a receiver in the background, its output kept as NAME
    RNAME=$1; shift
    RARGV=("$@")
    ip netns exec "$NSB" "$B" "$@" >"$DIR/$RNAME.out" 2>"$DIR/$RNAME.err" &
    RPID=$!
    for _ in $(seq 50); do grep -q ready "$DIR/$RNAME.out" 2>/dev/null && return 0; sleep 0.1; done
    echo "blast recv never got ready" >&2; exit 1
}

receiver_done() {
    kill -TERM "$RPID"; wait "$RPID"; record "$RNAME" $? "${RARGV[@]}"; RPID=""
}

if [ -z "${ONLY:-}" ]; then           # ONLY=packet or ONLY=starved: those captures alone
receiver blast_recv recv --port 9000 --flows 4 --mtu 1500 --duration 60
cap blast_pps64 20 "$NSA" send --addr 198.18.0.2 --port 9000 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0
cap blast_pps1400 20 "$NSA" send --addr 198.18.0.2 --port 9000 --flows 4 --size 1400 --mtu 1500 --duration 1 --rate 0
cap blast_paced 20 "$NSA" send --addr 198.18.0.2 --port 9000 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 100000
cap blast_killed 1 "$NSA" send --addr 198.18.0.2 --port 9000 --flows 4 --size 64 --mtu 1500 --duration 5 --rate 0
receiver_done
cap blast_norecv 20 "$NSA" send --addr 198.18.0.2 --port 9100 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0
cap blast_recv_idle 20 "$NSB" recv --port 9200 --flows 4 --mtu 1500 --duration 1
cap blast_badsize 20 "$NSA" send --addr 198.18.0.2 --port 9000 --size 10 --mtu 1500 --duration 1
cap blast_toobig 20 "$NSA" send --addr 198.18.0.2 --port 9000 --size 1473 --mtu 1500 --duration 1
fi
if [ -z "${ONLY:-}" ] || [ "$ONLY" = packet ]; then
receiver blast_recv_packet recv --port 9300 --flows 4 --mtu 1500 --duration 60
cap blast_packet64 20 "$NSA" send --addr 198.18.0.2 --port 9300 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0 --packet
cap blast_packet1400 20 "$NSA" send --addr 198.18.0.2 --port 9300 --flows 4 --size 1400 --mtu 1500 --duration 1 --rate 0 --packet
receiver_done
cap blast_packet_v6 20 "$NSA" send --addr fd00::2 --port 9300 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0 --packet
# --packet without CAP_NET_RAW (uid 65534, no capabilities): one line, exit 1
timeout -s KILL 20 ip netns exec "$NSA" setpriv --reuid=65534 --regid=65534 --clear-groups "$B" send --addr 198.18.0.2 \
    --port 9300 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0 --packet \
    >"$DIR/blast_packet_noraw.out" 2>"$DIR/blast_packet_noraw.err"
record blast_packet_noraw $? send --addr 198.18.0.2 --port 9300 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0 --packet
fi
if [ -z "${ONLY:-}" ] || [ "$ONLY" = starved ]; then
# the sender on CPU 0 beside a busy loop there: starved (it waits, runnable, for its CPU), nothing lost
receiver blast_recv_starved recv --port 9400 --flows 4 --mtu 1500 --duration 60
taskset -c 0 sh -c 'while :; do :; done' &
HOG=$!
timeout -s KILL 20 ip netns exec "$NSA" taskset -c 0 "$B" send --addr 198.18.0.2 --port 9400 --flows 4 --size 64 \
    --mtu 1500 --duration 1 --rate 0 >"$DIR/blast_pps64_starved.out" 2>"$DIR/blast_pps64_starved.err"
record blast_pps64_starved $? send --addr 198.18.0.2 --port 9400 --flows 4 --size 64 --mtu 1500 --duration 1 --rate 0
kill "$HOG"
receiver_done
fi
