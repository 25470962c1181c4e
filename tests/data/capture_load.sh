#!/usr/bin/env bash
# Capture real iperf 2 (2.1.8), iperf3 UDP-sweep, irtt (0.9.0) and sockperf (3.7) output for
# the under-load parser tests (tests/unit/test_tools_iperf2.py, test_tools_sweep.py,
# test_tools_irtt.py, test_tools_load_irtt.py, test_tools_load_sockperf.py).
# `capture_load.sh sockperf` redoes load.sockperf's captures alone. load.irtt's captures use its own server shell (iperf -s, waited
# for, and irtt's server beside it; ports 15122/15123; 15128 an irtt server with no iperf
# beside it) and its own phase commands, the probe every 10 ms to keep the files small.
#
# Runs on loopback (127.0.0.1, ports 15001, 15201, 15112; nothing listens on 15009, 15209,
# 15119), one server per tool for the whole script, and kills them on exit. Each capture NAME
# leaves NAME.out and NAME.err next to this script and replaces its line "NAME<TAB>RC<TAB>ARGV"
# in captures.tsv. Needs no root; let nothing else measure on the machine while it
# measures. The tests assert the exact figures of these files: update them with new ones.
# Not made here: iperf2_lab_idle and iperf2_lab_loaded_16k, taken between two lab hosts
# (`overlaybench up`; the client in <prefix>-h0, `iperf -s -p 5001` in <prefix>-h1, server
# 198.18.0.2) with the argv captures.tsv gives them.
# iperf ignores SIGTERM in --connect-only loops: every client here is bounded and killed
# with SIGKILL at its deadline.
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

if [ "${1:-all}" != sockperf ]; then
iperf -s -p 15001 >/dev/null 2>&1 & PIDS+=($!)
iperf3 -s -p 15201 >/dev/null 2>&1 & PIDS+=($!)
irtt server -b 127.0.0.1:15112 -i 0 >/dev/null 2>&1 & PIDS+=($!)
sleep 0.5

BB=(iperf -c 127.0.0.1 -p 15001)
cap iperf2_bb_idle 20 "${BB[@]}" --bounceback --bounceback-period=0 -t 2 --histograms=1u,100000 -e
cap iperf2_bb_congest 20 "${BB[@]}" --bounceback --bounceback-period=0 --bounceback-congest=bidir,2 -t 2 --histograms=1u,100000 -e
cap iperf2_bbp_idle 20 "${BB[@]}" --bounceback=1 --bounceback-period=0.001 -t 2 --histograms=10u,10000 -e
cap iperf2_bbp_congest1 20 "${BB[@]}" --bounceback=1 --bounceback-period=0.001 --bounceback-congest=bidir,1 -t 2 -e
cap iperf2_bb_killed 3 "${BB[@]}" --bounceback=1 --bounceback-period=0.001 -t 10 -e
cap iperf2_bb_refused 20 iperf -c 127.0.0.1 -p 15009 --bounceback --bounceback-period=0 -t 2 --histograms=1u,100000 -e
cap iperf2_crr 20 sh -c 'date +%s.%N; iperf -c 127.0.0.1 -p 15001 --connect-only=500 -e; rc=$?; date +%s.%N; exit $rc'
cap iperf2_crr_refused 20 sh -c 'date +%s.%N; iperf -c 127.0.0.1 -p 15009 --connect-only=20 -e; rc=$?; date +%s.%N; exit $rc'
cap iperf3_sweep64_100M 20 iperf3 -c 127.0.0.1 -p 15201 -u -b 100M -l 64 -t 1 -J
cap iperf3_sweep1400_5G 20 iperf3 -c 127.0.0.1 -p 15201 -u -b 5G -l 1400 -t 1 -J
cap iperf3_sweep_refused 20 iperf3 -c 127.0.0.1 -p 15209 -u -b 100M -l 64 -t 1 -J
cap irtt_ok 20 irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15112
cap irtt_killed 1 irtt client -i 1ms -d 3s -Q -o - 127.0.0.1:15112
cap irtt_noserver 30 irtt client -i 1ms -d 2s -Q -o - --timeouts=200ms,400ms 127.0.0.1:15119

# load.irtt (one server shell as the tool starts it, in a process group of its own)
setsid sh -c 'iperf -s -p 15123 -t 60 >/dev/null & p=$!; until ss -Hltnp '"'"'sport = :15123'"'"' | grep -q "pid=$p,"; do kill -0 $p 2>/dev/null || { echo '"'"'iperf -s exited before listening'"'"' >&2; exit 1; }; sleep 0.05; done; irtt server -b 127.0.0.1:15122 -i 0 & q=$!; trap '"'"'kill -KILL $p $q 2>/dev/null; wait $p $q; exit 143'"'"' TERM INT; wait $q; r=$?; kill -KILL $p 2>/dev/null; wait $p; exit $r' >/dev/null 2>&1 & PIDS+=($!)
irtt server -b 127.0.0.1:15128 -i 0 >/dev/null 2>&1 & PIDS+=($!)
until ss -Hlun 'sport = :15122' | grep -q . && ss -Hlun 'sport = :15128' | grep -q .; do sleep 0.05; done

LOADED='iperf -c 127.0.0.1 -p 15123 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$(irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15122); r=$?; wait $p; w=$?; echo "=== irtt exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
NOLOAD='iperf -c 127.0.0.1 -p 15129 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$(irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15128); r=$?; wait $p; w=$?; echo "=== irtt exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
cap load_irtt_idle 22 irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15122
cap load_irtt_loaded 23 sh -c "$LOADED"
cap load_irtt_noload 23 sh -c "$NOLOAD"
cap load_irtt_killed 1 sh -c "$LOADED"
fi

# load.sockperf: its own server shell (iperf -s, waited for, and sockperf's server beside it;
# ports 15132/15133), its own phase commands, and the ways its ping-pong fails: no working
# load (15138, a sockperf server with no iperf beside it on 15139), a server gone mid-run
# (15136), and a client killed at its deadline. Not made here: load_sockperf_lost, the
# probe's argv between two network namespaces (198.19.250.1 to 198.19.250.2 over a veth
# pair) with an nftables rule in the server's dropping one datagram in 100 to its port
# (`udp dport 11111 numgen random mod 100 == 0 drop`): the ping-pong waits for the lost one
# to the end and prints only its totals.
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
