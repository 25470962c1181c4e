#!/usr/bin/env bash
# Capture real iperf3 / qperf / ping / sockperf output for the parser tests
# (tests/unit/test_tools_*.py).
#
# Makes two namespaces (obt-cap-a = client 198.18.0.1, obt-cap-b = server 198.18.0.2)
# joined by a veth pair, runs every tool for ~2 s, and deletes everything on exit.
# Each capture NAME leaves NAME.out (stdout) and NAME.err (stderr) next to this script,
# and a line "NAME<TAB>RC<TAB>ARGV" in captures.tsv (RC as the shell saw it; the client
# argv without the `ip netns exec` prefix). Needs root. Re-run: sudo tests/data/capture.sh
# (new numbers: the tests assert the exact figures of these files, so update them too).
# `capture.sh TOOL...` (iperf3, qperf, ping, sockperf) redoes only those tools' captures:
# their lines in captures.tsv and versions.txt are replaced, every other one is kept.
# iperf3_udp_3.1.3.out is not made here: see iperf3_udp_3.1.3.SOURCE.
set -euo pipefail

DIR=$(cd "$(dirname "$0")" && pwd)
NSA=obt-cap-a NSB=obt-cap-b
ADDR_A=198.18.0.1 ADDR_B=198.18.0.2
ADDR_NOBODY=198.18.0.99            # in the /24, nobody answers
ADDR_NOROUTE=198.19.100.1          # in 198.18.0.0/15 but no route to it from $NSA
DUR=2
IPERF_PORT=5201 QPERF_PORT=19765 QPERF_DATA=19766 SOCKPERF_PORT=11111
MTU=1500 UDP_LEN=$((1500 - 28))    # IPv4 + UDP headers: datagrams never fragment

SERVER_PID=""

cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
}
trap cleanup EXIT

setup() {
    cleanup
    ip netns add "$NSA"
    ip netns add "$NSB"
    ip link add obt-cap-va netns "$NSA" type veth peer name obt-cap-vb netns "$NSB"
    ip -n "$NSA" addr add "$ADDR_A/24" dev obt-cap-va
    ip -n "$NSB" addr add "$ADDR_B/24" dev obt-cap-vb
    for ns in "$NSA" "$NSB"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$NSA" link set obt-cap-va mtu "$MTU" up
    ip -n "$NSB" link set obt-cap-vb mtu "$MTU" up
}

# capture NAME TIMEOUT ARGV... : run ARGV as the client in $NSA under `timeout`.
capture() {
    local name=$1 limit=$2
    shift 2
    local rc=0
    # shellcheck disable=SC2086  # $limit may carry "-s KILL"
    timeout $limit ip netns exec "$NSA" "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" || rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$*" >>"$DIR/captures.tsv"
}

# wait_port PORT [udp] : until something in $NSB listens on TCP PORT (or has UDP PORT bound).
wait_port() {
    local flags=-Hltn
    [ "${2:-tcp}" = udp ] && flags=-Hlun
    for _ in $(seq 50); do
        ip netns exec "$NSB" ss "$flags" "sport = :$1" | grep -q . && return 0
        sleep 0.1
    done
    echo "nothing listens on ${2:-tcp} port $1 in $NSB" >&2
    return 1
}

iperf3_server() {
    ip netns exec "$NSB" iperf3 -s -1 -p "$IPERF_PORT" -B "$ADDR_B" >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port "$IPERF_PORT"
}

iperf3_done() {
    # -s -1 exits after one test; a killed client can leave it waiting.
    for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# --- iperf3 packet rate and per-stream UDP ---------------------------------------------
# `capture.sh pps` makes only these (small-datagram runs for iperf3.pps*, and two UDP
# streams for the per-stream figures), replacing their lines in captures.tsv and keeping
# every other capture as it is. A run of all iperf3 captures makes them too.
capture_pps() {
    local ipc=(iperf3 -c "$ADDR_B" -p "$IPERF_PORT" -t "$DUR" -J)
    iperf3_server; capture iperf3_pps_64 20 "${ipc[@]}" -P 1 -u -b 0 -l 64; iperf3_done
    iperf3_server; capture iperf3_pps_1400 20 "${ipc[@]}" -P 1 -u -b 0 -l 1400; iperf3_done
    iperf3_server; capture iperf3_udp_2 20 "${ipc[@]}" -P 2 -u -b 0 -l "$UDP_LEN"; iperf3_done
}
if [ "${1:-}" = pps ]; then
    setup
    sed -i -e '/^iperf3_pps_/d' -e '/^iperf3_udp_2\t/d' "$DIR/captures.tsv"
    capture_pps
    exit 0
fi

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# version TOOL : its version line for versions.txt.
version() {
    case $1 in
        iperf3) iperf3 --version | head -1 ;;
        qperf) qperf --version 2>&1 | head -1 ;;
        ping) ping -V | head -1 ;;
        sockperf) sockperf --version 2>&1 | head -1 ;;
    esac
}

# --- iperf3 ---------------------------------------------------------------------------
capture_iperf3() {
    IPC=(iperf3 -c "$ADDR_B" -p "$IPERF_PORT" -t "$DUR" -J)
    iperf3_server; capture iperf3_tcp_1 20 "${IPC[@]}" -P 1; iperf3_done
    iperf3_server; capture iperf3_tcp_4 20 "${IPC[@]}" -P 4; iperf3_done
    iperf3_server; capture iperf3_tcp_reverse 20 "${IPC[@]}" -P 1 -R; iperf3_done
    iperf3_server; capture iperf3_udp 20 "${IPC[@]}" -P 1 -u -b 0 -l "$UDP_LEN"; iperf3_done
    # no server on the port: top-level "error" in the JSON, exit 1
    capture iperf3_refused 20 iperf3 -c "$ADDR_B" -p 5299 -t "$DUR" -J -P 1
    # a client stopped by SIGTERM mid-test (valid JSON, "error": "interrupt ...")
    iperf3_server; capture iperf3_tcp_sigterm 1 iperf3 -c "$ADDR_B" -p "$IPERF_PORT" -t 10 -J -P 1; iperf3_done
    # a client killed outright: no output at all
    iperf3_server; capture iperf3_tcp_killed "-s KILL 1" iperf3 -c "$ADDR_B" -p "$IPERF_PORT" -t 10 -J -P 1; iperf3_done
    capture_pps
}

# --- qperf ----------------------------------------------------------------------------
capture_qperf() {
    QPC=(qperf -lp "$QPERF_PORT" -ip "$QPERF_DATA" -t "$DUR" -uu -v)
    capture qperf_refused 20 "${QPC[@]}" "$ADDR_B" tcp_bw    # before the server starts
    ip netns exec "$NSB" qperf -lp "$QPERF_PORT" >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port "$QPERF_PORT"
    capture qperf_tcp_bw 20 "${QPC[@]}" "$ADDR_B" tcp_bw
    capture qperf_tcp_lat 20 "${QPC[@]}" "$ADDR_B" tcp_lat
    capture qperf_udp_bw 20 "${QPC[@]}" -m "$UDP_LEN" "$ADDR_B" udp_bw
    capture qperf_udp_lat 20 "${QPC[@]}" "$ADDR_B" udp_lat
    # -vv also prints send_msgs / recv_msgs
    capture qperf_udp_bw_vv 20 qperf -lp "$QPERF_PORT" -ip "$QPERF_DATA" -t "$DUR" -uu -vv \
        -m "$UDP_LEN" "$ADDR_B" udp_bw
    capture qperf_tcp_bw_killed "-s KILL 1" qperf -lp "$QPERF_PORT" -ip "$QPERF_DATA" -t 10 -uu -v \
        "$ADDR_B" tcp_bw
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
}

# --- ping -----------------------------------------------------------------------------
capture_ping() {
    capture ping_flood 20 ping -f -c 1000 -q -s 56 -w "$DUR" "$ADDR_B"
    capture ping_loss 20 ping -f -c 1000 -q -s 56 -w "$DUR" "$ADDR_NOBODY"
    # no route at all (the namespace has only its /24): ping exits 2, no summary
    capture ping_unreachable 20 ping -f -c 1000 -q -s 56 -w "$DUR" "$ADDR_NOROUTE"
    # about a quarter of the echo requests dropped by nft on the far side (no netem here)
    ip netns exec "$NSB" nft -f - <<'NFT'
table inet obt_cap {
    chain input {
        type filter hook input priority 0;
        icmp type echo-request numgen random mod 4 == 0 drop
    }
}
NFT
    capture ping_partial_loss 20 ping -f -c 1000 -q -s 56 -w "$DUR" "$ADDR_B"
    ip netns exec "$NSB" nft delete table inet obt_cap
}

# --- sockperf -------------------------------------------------------------------------
# ping-pong: one message in flight; the client prints avg-latency and percentiles, half
# the round trip (no --full-rtt). The server (`sr`) serves until it is stopped.
capture_sockperf() {
    local spc=(sockperf pp -i "$ADDR_B" -p "$SOCKPERF_PORT" -t "$DUR")
    # no server: TCP is refused at once; UDP sends into the void for the whole test
    capture sockperf_refused 20 "${spc[@]}" --tcp
    capture sockperf_udp_noserver 20 "${spc[@]}"
    ip netns exec "$NSB" sockperf sr -i "$ADDR_B" -p "$SOCKPERF_PORT" >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port "$SOCKPERF_PORT" udp
    capture sockperf_udp 20 "${spc[@]}"
    # a client killed mid-test: what a hard timeout leaves
    capture sockperf_udp_killed "-s KILL 1" sockperf pp -i "$ADDR_B" -p "$SOCKPERF_PORT" -t 10
    stop_server
    ip netns exec "$NSB" sockperf sr -i "$ADDR_B" -p "$SOCKPERF_PORT" --tcp >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port "$SOCKPERF_PORT"
    capture sockperf_tcp 20 "${spc[@]}" --tcp
    stop_server
}

ALL=(iperf3 qperf ping sockperf)
TOOLS=("${@:-${ALL[@]}}")
for tool in "${TOOLS[@]}"; do
    case " ${ALL[*]} " in
        *" $tool "*) ;;
        *) echo "usage: $0 [${ALL[*]}]..." >&2; exit 2 ;;
    esac
done

setup
if [ $# -eq 0 ]; then
    : >"$DIR/captures.tsv"
    { for tool in "${ALL[@]}"; do version "$tool"; done; uname -sr; } >"$DIR/versions.txt"
else
    # the other tools' captures and versions stay; a redone tool's version line names
    # the kernel it was captured on, which may not be the one on the last line
    for tool in "${TOOLS[@]}"; do
        sed -i -e "/^${tool}_/d" "$DIR/captures.tsv"
        line=$(version "$tool")
        grep -v -e "^${line%% *} " "$DIR/versions.txt" >"$DIR/versions.txt.new" || true
        { head -n -1 "$DIR/versions.txt.new"; echo "$line ($(uname -sr))"
          tail -n 1 "$DIR/versions.txt.new"; } >"$DIR/versions.txt"
        rm -f "$DIR/versions.txt.new"
    done
fi
for tool in "${TOOLS[@]}"; do
    "capture_$tool"
done
