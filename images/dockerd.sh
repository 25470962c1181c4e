#!/usr/bin/env bash
# Start dockerd when none answers, and stop only the one this script started.
#
#   images/dockerd.sh up      start dockerd unless `docker info` already answers
#   images/dockerd.sh down    stop the dockerd that `up` started (nothing else)
#   images/dockerd.sh status  say which dockerd answers and whether `up` started it
#
# The daemon's bridge is in the benchmark range (198.19.254.1/24), never Docker's default
# 172.17/16; --iptables=false and --ip-forward=false leave the machine's firewall and
# forwarding sysctl as they were (containers on one bridge reach each other at layer 2,
# published ports go through docker-proxy). Its data stays under the default root
# (/var/lib/docker), so images survive a stop. The pid of a dockerd started here is kept
# in $STATE/dockerd.pid; `down` stops that pid only if it still is a dockerd.
set -euo pipefail

STATE=${OVERLAYBENCH_DOCKERD_STATE:-/run/overlaybench}
PIDFILE=$STATE/dockerd.pid
LOG=$STATE/dockerd.log
BIP=${OVERLAYBENCH_DOCKER_BIP:-198.19.254.1/24}
WAIT=${OVERLAYBENCH_DOCKERD_WAIT:-60}   # seconds for dockerd to answer, and to stop

say() { echo "dockerd: $*"; }
die() { echo "dockerd: $*" >&2; exit 1; }

answers() { docker info >/dev/null 2>&1; }

ours() {  # the pid we started, if it is still a running dockerd
    [ -f "$PIDFILE" ] || return 1
    local pid; pid=$(cat "$PIDFILE")
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && echo "$pid"
}

bridge() { docker network inspect bridge -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null || true; }

up() {
    local pid subnet
    if answers; then
        if pid=$(ours); then say "running (pid $pid, started by this script)"
        else
            say "already running; left alone"
            for subnet in $(bridge); do
                case "$subnet" in
                    198.18.*|198.19.*) ;;
                    *) say "warning: its bridge $subnet is outside the benchmark range 198.18.0.0/15" >&2 ;;
                esac
            done
        fi
        return 0
    fi
    if [ -n "${DOCKER_HOST:-}" ]; then
        die "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to start a local dockerd"
    fi
    command -v dockerd >/dev/null || die "dockerd is not installed (apt-get install docker.io)"
    if pid=$(ours); then
        die "dockerd pid $pid (started here) runs but does not answer; see $LOG or run '$0 down'"
    fi
    mkdir -p "$STATE"
    # A session of its own: a Ctrl-C meant for make or pytest does not reach it.
    setsid dockerd --bip "$BIP" --iptables=false --ip-forward=false </dev/null >"$LOG" 2>&1 &
    pid=$!
    echo "$pid" >"$PIDFILE"
    local i
    for ((i = 0; i < WAIT * 4; i++)); do
        if answers; then
            say "started pid $pid (bridge $BIP, log $LOG)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PIDFILE"
            die "dockerd exited at once: $(tail -n 1 "$LOG")"
        fi
        sleep 0.25
    done
    stop "$pid"
    die "dockerd did not answer within ${WAIT}s; stopped it; see $LOG"
}

stop() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < WAIT * 4; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "pid $pid did not stop within ${WAIT}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
}

down() {
    local pid
    if pid=$(ours); then
        stop "$pid"
        say "stopped pid $pid"
    else
        rm -f "$PIDFILE"
        say "none started here; nothing stopped"
    fi
}

status() {
    local pid
    if answers; then
        if pid=$(ours); then say "running (pid $pid, started by this script)"
        else say "running (not started by this script)"; fi
    else
        say "not answering"
        return 1
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
