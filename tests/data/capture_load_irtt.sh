#!/usr/bin/env bash
# Capture real load.irtt output (irtt 0.9.0 beside iperf 2.1.8's working load) for
# tests/unit/test_tools_load_irtt.py: the server is load.irtt's own (one shell: iperf -s,
# waited for, then irtt's server exec'd), the phases its own argv, all on loopback
# (127.0.0.1: ports 15122/15123 for the server; 15128 an irtt server with no iperf beside it).
# Each capture NAME leaves NAME.out and NAME.err next to this script and replaces its line
# "NAME<TAB>RC<TAB>ARGV" in captures.tsv. Needs no root; let nothing else measure on the
# machine while it measures. The tests assert the exact figures of these files. The probe
# sends every 10 ms here (the test sends every 1 ms) to keep the files small.
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

setsid sh -c 'iperf -s -p 15123 -t 60 >/dev/null & p=$!; until ss -Hltnp '"'"'sport = :15123'"'"' | grep -q "pid=$p,"; do kill -0 $p 2>/dev/null || { echo '"'"'iperf -s exited before listening'"'"' >&2; exit 1; }; sleep 0.05; done; exec irtt server -b 127.0.0.1:15122 -i 0' >/dev/null 2>&1 & PIDS+=($!)
irtt server -b 127.0.0.1:15128 -i 0 >/dev/null 2>&1 & PIDS+=($!)
until ss -Hlun 'sport = :15122' | grep -q . && ss -Hlun 'sport = :15128' | grep -q .; do sleep 0.05; done

LOADED='iperf -c 127.0.0.1 -p 15123 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$(irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15122); r=$?; wait $p; w=$?; echo "=== irtt exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
NOLOAD='iperf -c 127.0.0.1 -p 15129 --full-duplex -P 2 -l 16K -t 2 -e & p=$!; j=$(irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15128); r=$?; wait $p; w=$?; echo "=== irtt exit $r iperf exit $w"; printf '"'"'%s\n'"'"' "$j"'
cap load_irtt_idle 22 irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:15122
cap load_irtt_loaded 23 sh -c "$LOADED"
cap load_irtt_noload 23 sh -c "$NOLOAD"
cap load_irtt_killed 1 sh -c "$LOADED"
