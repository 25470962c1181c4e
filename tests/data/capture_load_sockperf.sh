#!/usr/bin/env bash
# Capture real sockperf (3.7) and iperf 2 (2.1.8) output for load.sockperf's parser tests
# (tests/unit/test_tools_load_sockperf.py): its own server shell (iperf -s, waited for, and
# sockperf's server beside it; ports 15132/15133), its own phase commands, and the ways its
# ping-pong fails: no working load (15138, a sockperf server with no iperf beside it on
# 15139), a server gone mid-run (15136: the ping-pong waits for the lost reply to the end),
# and a client killed at its deadline.
#
# Runs on loopback (127.0.0.1), needs no root, and kills every server on exit. Each capture
# NAME leaves NAME.out and NAME.err next to this script and replaces its line
# "NAME<TAB>RC<TAB>ARGV" in captures.tsv. Let nothing else measure on the machine while it
# measures. The tests assert the exact figures of these files: update them with new ones.
# Not made here: load_sockperf_lost, the probe's argv between two network namespaces
# (198.19.250.1 to 198.19.250.2 over a veth pair) with an nftables rule in the server's
# dropping one datagram in 100 to its port (`udp dport 11111 numgen random mod 100 == 0
# drop`): the ping-pong waits for the lost one to the end and prints only its totals.
set -uo pipefail

DIR=$(cd "$(dirname "$0")" && pwd)
PIDS=()
trap 'kill -9 -- "${PIDS[@]/#/-}" 2>/dev/null; kill -9 "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null' EXIT

cap() {   # cap NAME SECONDS ARGV... : run ARGV with a SIGKILL deadline, keep its output and exit code
    local name=$1 limit=$2; shift 2
    timeout -s KILL "$limit" "$@" >"$DIR/$name.out" 2>"$DIR/$name.err"
    local rc=$?
    [ "$rc" = 137 ] && rc=-9
    grep -v "^$name	" "$DIR/captures.tsv" >"$DIR/captures.tsv.new" || true
    printf '%s\t%s\t%s\n' "$name" "$rc" "$*" >>"$DIR/captures.tsv.new"
    mv "$DIR/captures.tsv.new" "$DIR/captures.tsv"
}

# load.sockperf's server shell, as the tool starts it, in a process group of its own
setsid sh -c 'iperf -s -p 15133 -t 60 >/dev/null & p=$!; until ss -Hltnp '"'"'sport = :15133'"'"' | grep -q "pid=$p,"; do kill -0 $p 2>/dev/null || { echo '"'"'iperf -s exited before listening'"'"' >&2; exit 1; }; sleep 0.05; done; sockperf sr -i 127.0.0.1 -p 15132 & q=$!; trap '"'"'kill -KILL $p $q 2>/dev/null; wait $p $q; exit 143'"'"' TERM INT; wait $q; r=$?; kill -KILL $p 2>/dev/null; wait $p; exit $r' >/dev/null 2>&1 & PIDS+=($!)
sockperf sr -i 127.0.0.1 -p 15138 >/dev/null 2>&1 & PIDS+=($!)
until ss -Hlun 'sport = :15132' | grep -q . && ss -Hlun 'sport = :15138' | grep -q .; do sleep 0.05; done

PROBE='sockperf pp -i 127.0.0.1 -p 15132 -t 1 --mps=10000 --full-rtt'
LOADED='iperf -c 127.0.0.1 -p 15133 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$('"$PROBE"'); r=$?; wait $p; w=$?; echo "=== sockperf exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
NOLOAD='iperf -c 127.0.0.1 -p 15139 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$(sockperf pp -i 127.0.0.1 -p 15138 -t 1 --mps=10000 --full-rtt); r=$?; wait $p; w=$?; echo "=== sockperf exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
# shellcheck disable=SC2086
cap load_sockperf_idle 16 $PROBE
cap load_sockperf_loaded 17 sh -c "$LOADED"
cap load_sockperf_noload 17 sh -c "$NOLOAD"
cap load_sockperf_killed 1 sh -c "$LOADED"

# a server that leaves a second into a 3 s ping-pong
sockperf sr -i 127.0.0.1 -p 15136 >/dev/null 2>&1 & GONE=$!; PIDS+=($GONE)
until ss -Hlun 'sport = :15136' | grep -q .; do sleep 0.05; done
(sleep 1; kill -9 "$GONE") &
cap load_sockperf_stalled 18 sockperf pp -i 127.0.0.1 -p 15136 -t 3 --mps=10000 --full-rtt
