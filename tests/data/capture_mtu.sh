#!/usr/bin/env bash
# Capture real `ping -M do` and `nstat` output for the MTU doctor's parsers
# (tests/unit/test_tools_mtu.py).
#
# Three namespaces in a line, a (198.18.1.1) — r (a router) — b (198.18.2.2); the link r—b
# has MTU 1400, a's own link 1500, so a DF packet between them meets a router that must
# answer "fragmentation needed". Captures: a probe that fits (ping_df_ok), one the router
# refuses (ping_df_fragneeded), the same size again once a has learnt the path MTU
# (ping_df_local: ping's "local error"), one over a's own device MTU (ping_df_local_dev),
# one whose ICMP the router's nft rule drops (ping_df_blackhole: the packet just vanishes),
# and nstat -asz after a fragmented (non-DF) ping (nstat_frag). The UDP probe
# (harness/tools/mtu_udp.py, its receiver on b) the same way: udp_df_ok, udp_df_fragneeded,
# udp_df_local, udp_df_local_dev, udp_df_blackhole, and udp_df_noreceiver (nothing listens:
# ICMP port unreachable). Each NAME leaves NAME.out
# and NAME.err here and a line "NAME<TAB>RC<TAB>ARGV" in captures.tsv (its old lines
# replaced). Needs root: sudo tests/data/capture_mtu.sh
set -euo pipefail

DIR=$(cd "$(dirname "$0")" && pwd)
A=obt-mtu-a R=obt-mtu-r B=obt-mtu-b
NAMES=(ping_df_ok ping_df_fragneeded ping_df_local ping_df_local_dev ping_df_blackhole nstat_frag
       udp_df_ok udp_df_fragneeded udp_df_local udp_df_local_dev udp_df_blackhole udp_df_noreceiver)
PYTHON=${PYTHON:-python3}
SENDER=""
RECEIVER_PID=""
export PYTHONPATH="$DIR/../.."


cleanup() {
    [ -n "$RECEIVER_PID" ] && kill "$RECEIVER_PID" 2>/dev/null || true
    [ -n "$SENDER" ] && rm -f "$SENDER"
    for ns in "$A" "$R" "$B"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup
SENDER=$(mktemp)
"$PYTHON" -c 'from harness.tools.mtu_udp import SENDER; print(SENDER)' >"$SENDER"
for ns in "$A" "$R" "$B"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add ra netns "$R" type veth peer name eth0 netns "$A"
ip link add rb netns "$R" type veth peer name eth0 netns "$B"
ip -n "$A" addr add 198.18.1.1/24 dev eth0
ip -n "$R" addr add 198.18.1.254/24 dev ra
ip -n "$R" addr add 198.18.2.254/24 dev rb
ip -n "$B" addr add 198.18.2.2/24 dev eth0
ip -n "$R" link set rb mtu 1400
ip -n "$B" link set eth0 mtu 1400
for l in "$A eth0" "$R ra" "$R rb" "$B eth0"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$A" route add default via 198.18.1.254
ip -n "$B" route add default via 198.18.2.254
ip netns exec "$R" sysctl -q -w net.ipv4.ip_forward=1

grep -v -E "^($(IFS='|'; echo "${NAMES[*]}"))	" "$DIR/captures.tsv" >"$DIR/captures.tsv.new" || true
mv "$DIR/captures.tsv.new" "$DIR/captures.tsv"

capture() {    # capture NAME ARGV... : ARGV in namespace a
    local name=$1 rc=0
    shift
    ip netns exec "$A" "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" || rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$*" >>"$DIR/captures.tsv"
}

capture_udp() {    # capture_udp NAME SIZE [PORT] : the UDP probe from a to b, its program on stdin
    local name=$1 size=$2 port=${3:-19801} rc=0
    ip netns exec "$A" python3 - 198.18.2.2 "$port" "$size" 1 <"$SENDER" >"$DIR/$name.out" 2>"$DIR/$name.err" || rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "python3 - 198.18.2.2 $port $size 1" >>"$DIR/captures.tsv"
}

drop_frag_needed() {   # the router stops sending ICMP frag-needed: a black hole
    ip netns exec "$R" nft -f - <<'NFT'
table inet obtmtu {
    chain out {
        type filter hook output priority 0;
        icmp type destination-unreachable icmp code frag-needed drop
    }
}
NFT
}

capture ping_df_ok ping -M do -s 1372 -c 1 -W 1 -n 198.18.2.2
capture ping_df_fragneeded ping -M do -s 1373 -c 1 -W 1 -n 198.18.2.2
capture ping_df_local ping -M do -s 1373 -c 1 -W 1 -n 198.18.2.2
capture ping_df_local_dev ping -M do -s 1473 -c 1 -W 1 -n 198.18.2.2
ip netns exec "$A" ip route flush cache
drop_frag_needed
capture ping_df_blackhole ping -M do -s 1373 -c 1 -W 1 -n 198.18.2.2
ip netns exec "$R" nft delete table inet obtmtu
ip netns exec "$A" ip route flush cache
ip netns exec "$A" nstat -n >/dev/null       # nstat's history: the capture's figures are its own
ip netns exec "$A" ping -M dont -s 1472 -c 2 -i 0.2 -W 1 198.18.2.2 >/dev/null
ip netns exec "$R" nstat -asz >"$DIR/nstat_frag.out" 2>"$DIR/nstat_frag.err"
printf '%s\t%s\t%s\n' nstat_frag 0 "nstat -asz" >>"$DIR/captures.tsv"

# the UDP probe, the same faults
ip netns exec "$B" "$PYTHON" -c "$("$PYTHON" -c 'from harness.tools.mtu_udp import RECEIVER; print(RECEIVER)')" \
    198.18.2.2 19801 >/dev/null &
RECEIVER_PID=$!
until ip netns exec "$B" ss -Hlun 'sport = :19801' | grep -q .; do sleep 0.05; done
ip netns exec "$A" ip route flush cache
capture_udp udp_df_ok 1400
capture_udp udp_df_fragneeded 1401
capture_udp udp_df_local 1401
capture_udp udp_df_local_dev 1501
ip netns exec "$A" ip route flush cache
drop_frag_needed
capture_udp udp_df_blackhole 1401
ip netns exec "$R" nft delete table inet obtmtu
capture_udp udp_df_noreceiver 1000 19802
