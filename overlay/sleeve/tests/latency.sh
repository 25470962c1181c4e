#!/bin/bash
# latency.sh - qperf tcp_lat container to container, kernel VXLAN and the sleeve
# deployed side by side (two labs) and measured alternately, so that load from
# other users of the machine hits both alike. Needs root; obs-* only.
#   ROUNDS=8 MTUS=1500:1410 SLEEVE_ARGS="" tests/latency.sh
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "latency: needs root" >&2; exit 1; }
ROUNDS=${ROUNDS:-8}
UM=${MTUS:-1500:1410}
umtu=${UM%%:*} omtu=${UM##*:}
KEY=$LAB_TMP/key
head -c 32 /dev/urandom >"$KEY"; chmod 600 "$KEY"
read -r -a SARGS <<<"${SLEEVE_ARGS:-}"
SARGS=("${SARGS[@]//@KEY@/$KEY}")

lab_select v
lab_up "$umtu"; lab_containers "$omtu" l2; vxlan_up "$omtu"
ns $CA ping -c 2 -i 0.2 -W 2 "$PEER_IP" >/dev/null || { echo "vxlan lab: no ping" >&2; exit 1; }
lab_select s
lab_up "$umtu"; lab_containers "$omtu" l2
sleeve_start a --mtu "$omtu" "${SARGS[@]}"; sleeve_start b --mtu "$omtu" "${SARGS[@]}"
sleeve_wait a >/dev/null && sleeve_wait b >/dev/null || exit 1
sleeve_attach a l2; sleeve_attach b l2
ns $CA ping -c 2 -i 0.2 -W 2 "$PEER_IP" >/dev/null || { echo "sleeve lab: no ping" >&2; exit 1; }

V=() S=()
for r in $(seq 1 "$ROUNDS"); do
	lab_select v; v=$(qperf_lat $CA $CB "$PEER_IP" 2)
	lab_select s; s=$(qperf_lat $CA $CB "$PEER_IP" 2)
	printf 'round %d  vxlan %s ns  sleeve %s ns\n' "$r" "$v" "$s"
	V+=("$v") S+=("$s")
done
python3 - "${V[*]}" "${S[*]}" <<'PY'
import sys, statistics as st
v = [float(x) for x in sys.argv[1].split() if x]
s = [float(x) for x in sys.argv[2].split() if x]
rs = [b / a for a, b in zip(v, s) if a > 0]
print("tcp_lat median: vxlan %.1f us, sleeve %.1f us; ratio of medians %.2f, median of paired ratios %.2f"
      % (st.median(v) / 1e3, st.median(s) / 1e3, st.median(s) / st.median(v), st.median(rs)))
PY
