#!/bin/bash
# bench.sh - single-stream iperf3 TCP and qperf tcp_lat container to container,
# behind the sleeve vs kernel VXLAN in the same topology; modes interleaved,
# medians and ratios to VXLAN. Needs root; obs-* namespaces only, removed on exit.
#   REPEATS=3 SECONDS_=4 MODES="vxlan sleeve crypto" MTUS="1500:1410 9000:8950" tests/bench.sh
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }

REPEATS=${REPEATS:-3}
T=${SECONDS_:-4}
MODES=${MODES:-"vxlan sleeve crypto l3 basic"}
MTUS=${MTUS:-"1500:1410 9000:8950"}
LAT=${LAT:-1}
# IPERF=0 measures latency only
KEY=$LAB_TMP/key
head -c 32 /dev/urandom >"$KEY"; chmod 600 "$KEY"
RES=$LAB_TMP/results
: >"$RES"

deploy() { # deploy MODE UNDERLAY OVERLAY
	local mode=$1 umtu=$2 omtu=$3 l=l2 args=()
	case $mode in
	sleeve) ;;
	crypto) args=(--key-file "$KEY") ;;
	basic) args=(--basic) ;;
	nooffload) args=(--no-offload) ;;
	l3) l=l3 args=(--l3) ;;
	esac
	lab_up "$umtu"
	lab_containers "$omtu" $l
	if [ "$mode" = vxlan ]; then
		vxlan_up "$omtu"
	else
		sleeve_start a --mtu "$omtu" "${args[@]}"
		sleeve_start b --mtu "$omtu" "${args[@]}"
		sleeve_wait a >/dev/null && sleeve_wait b >/dev/null || return 1
		sleeve_attach a $l; sleeve_attach b $l
	fi
	ns $CA ping -c 2 -i 0.2 -W 2 "$PEER_IP" >/dev/null 2>&1
}

for rep in $(seq 1 "$REPEATS"); do
	for um in $MTUS; do
		umtu=${um%%:*} omtu=${um##*:}
		for mode in $MODES; do
			if ! deploy "$mode" "$umtu" "$omtu"; then
				echo "$mode $omtu $rep deploy-failed" >&2; sleeve_stop_all; continue
			fi
			g=-
			wait_quiet
			if [ "${IPERF:-1}" = 1 ]; then
				g=$(iperf_gbps $CA $CB "$PEER_IP" "$T")
				echo "$mode $omtu gbps $g" >>"$RES"
			fi
			lat=
			if [ "$LAT" = 1 ] && [ "$omtu" -lt 2000 ]; then
				wait_quiet
				lat=$(qperf_lat $CA $CB "$PEER_IP" 3)
				echo "$mode $omtu lat_ns $lat" >>"$RES"
			fi
			printf 'rep %s  %-8s mtu %-5s %7s Gbit/s  %s\n' "$rep" "$mode" "$omtu" "$g" "${lat:+lat ${lat} ns}"
			sleeve_stop_all
		done
	done
done
lab_down

python3 - "$RES" <<'PY'
import sys, statistics as st, collections
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, mtu, metric, val = line.split()
    try: v[(mode, int(mtu), metric)].append(float(val))
    except ValueError: pass
med = {k: st.median(x) for k, x in v.items() if x}
print("\nmedians and ratio to vxlan (throughput: higher is better; latency: lower)")
for (mode, mtu, metric), m in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    ref = med.get(("vxlan", mtu, metric))
    r = "%.2f" % (m / ref) if ref else "-"
    unit = "Gbit/s" if metric == "gbps" else "ns"
    print("  %-9s mtu %-5d %-7s %9.3f %-6s ratio %s   (n=%d)" % (mode, mtu, metric, m, unit, r, len(v[(mode, mtu, metric)])))
PY
