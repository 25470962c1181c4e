#!/bin/bash
# bench.sh - single-stream iperf3 TCP and qperf tcp_lat container to container,
# behind the sleeve vs kernel VXLAN in the same topology; modes interleaved,
# medians and ratios to VXLAN. Needs root; obs-* namespaces only, removed on exit.
#   REPEATS=3 SECONDS_=4 MODES="vxlan sleeve crypto" MTUS="1500:1410 9000:8950" tests/bench.sh
# A/B of builds or settings in one run: a mode BASE/NAME runs BASE with the words of
# $VARIANT_NAME in both daemons' environment (SLEEVE=PATH among them: that binary), e.g.
#   VARIANT_spin0="SLEEVE_SPIN_US=0" VARIANT_old="SLEEVE=/tmp/sleeve-old" \
#   MODES="vxlan crypto crypto/spin0 crypto/old" tests/bench.sh
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

deploy() { # deploy MODE[/VARIANT] UNDERLAY OVERLAY
	local mode=${1%%/*} umtu=$2 omtu=$3 l=l2 args=() var= w bin=$SLEEVE envs=()
	if [ "$mode" != "$1" ]; then
		var=VARIANT_${1#*/}
		for w in ${!var:-}; do
			case $w in SLEEVE=*) bin=${w#SLEEVE=} ;; *) envs+=("$w") ;; esac
		done
	fi
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
		SLEEVE=$bin SLEEVE_ENV_a="${envs[*]}" sleeve_start a --mtu "$omtu" "${args[@]}"
		SLEEVE=$bin SLEEVE_ENV_b="${envs[*]}" sleeve_start b --mtu "$omtu" "${args[@]}"
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
				c0=($(head -1 /proc/stat))
				g=$(iperf_gbps $CA $CB "$PEER_IP" "$T")
				c1=($(head -1 /proc/stat))
				echo "$mode $omtu gbps $g" >>"$RES"
				# Gbit per busy CPU-second of the whole machine (idle+iowait excluded)
				busy=0
				for k in 1 2 3 6 7 8; do busy=$((busy + c1[k] - c0[k])); done
				[ $busy -gt 0 ] && echo "$mode $omtu gbit_per_cpus $(python3 -c "print('%.3f' % ($g * $T * $(getconf CLK_TCK) / $busy))")" >>"$RES"
			fi
			lat=
			if [ "$LAT" = 1 ] && [ "$omtu" -lt 2000 ]; then
				wait_quiet
				lat=$(qperf_lat $CA $CB "$PEER_IP" 3)
				echo "$mode $omtu lat_ns $lat" >>"$RES"
			fi
			printf 'rep %s  %-8s mtu %-5s %7s Gbit/s  %s\n' "$rep" "$mode" "$omtu" "$g" "${lat:+lat ${lat} ns}"
			sleeve_stop_all
			# the daemons' busy-polling over the case (both sides, all threads)
			if [ -f "$LAB_TMP/stats-a$LABID.json" ] && [ -f "$LAB_TMP/stats-b$LABID.json" ]; then
				for k in ns:spin_ms:1e6 sleeps:sleeps:1 hits:spin_hits:1; do
					IFS=: read -r key name div <<<"$k"
					echo "$mode $omtu $name $(python3 -c "import json; print(sum(json.load(open('$LAB_TMP/stats-%s$LABID.json' % x)).get('polling', {}).get('$key', 0) for x in 'ab') / $div)")" >>"$RES"
				done
				rm -f "$LAB_TMP/stats-a$LABID.json" "$LAB_TMP/stats-b$LABID.json"
			fi
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
    unit = {"gbps": "Gbit/s", "gbit_per_cpus": "Gb/CPUs", "lat_ns": "us"}.get(metric, "")
    print("  %-9s mtu %-5d %-7s %9.3f %-6s ratio %s   (n=%d)" % (mode, mtu, metric, m, unit, r, len(v[(mode, mtu, metric)])))
PY
