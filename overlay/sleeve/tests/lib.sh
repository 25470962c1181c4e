# tests/lib.sh - a two-host lab in network namespaces for the sleeve (sourced)
#
# hosts $HA / $HB joined by veth obs-u0/obs-u1 (198.18.0.1/.2), each with a
# bridge obs-br and a "container" namespace $CA / $CB attached by veth.
# L2 modes: containers 198.18.64.1 / .2 on one /24 across the bridges.
# L3 mode:  containers 198.18.64.2 (gw .64.1) and 198.18.65.2 (gw .65.1), routed
#           over the TUN device.
# Everything created here starts with obs-; lab_down removes exactly that.

# LABID tells two labs apart (namespaces obs-ha$LABID ...), e.g. to run VXLAN and
# the sleeve side by side and alternate measurements between them.
LABID=${LABID:-}
lab_select() { # lab_select ID : work on lab ID from now on
	LABID=$1
	HA=obs-ha$LABID HB=obs-hb$LABID CA=obs-ca$LABID CB=obs-cb$LABID
}
lab_select "$LABID"
LAB_NS_ALL=()
TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SLEEVE=${SLEEVE:-$TESTS_DIR/../build/sleeve}
LAB_TMP=$(mktemp -d /tmp/obs-sleeve.XXXXXX)
LAB_PIDS=()
GSO_MAX=${GSO_MAX:-65536} # the kernel default; the sleeve needs nothing smaller

ns() { local n=$1; shift; ip netns exec "$n" "$@"; }

lab_down() {
	local p
	for p in "${LAB_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${LAB_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	LAB_PIDS=()
	for n in $CA $CB $HA $HB; do
		ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$n" 2>/dev/null
	done
	return 0
}

lab_cleanup() {
	local n
	lab_down
	for n in "${LAB_NS_ALL[@]}"; do
		ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$n" 2>/dev/null
	done
	rm -rf "$LAB_TMP"
}

# lab_up UNDERLAY_MTU
lab_up() {
	local umtu=$1
	lab_down
	for n in $HA $HB $CA $CB; do
		LAB_NS_ALL+=("$n")
		ip netns add "$n"
		ns "$n" ip link set lo up
	done
	ip link add obs-u0 netns $HA mtu "$umtu" type veth peer name obs-u1 netns $HB mtu "$umtu"
	ns $HA ip addr add 198.18.0.1/24 dev obs-u0
	ns $HB ip addr add 198.18.0.2/24 dev obs-u1
	ns $HA ip link set obs-u0 up
	ns $HB ip link set obs-u1 up
}

# lab_containers OVERLAY_MTU l2|l3 : bridges, container veths, addresses
lab_containers() {
	local omtu=$1 mode=$2 h c side a
	for side in a b; do
		h=obs-h$side$LABID c=obs-c$side$LABID
		ns $h ip link add obs-br type bridge
		ip link add obs-c${side}0 netns $c mtu "$omtu" type veth peer name obs-c${side}1 netns $h mtu "$omtu"
		ns $c ip link set obs-c${side}0 gso_max_size $GSO_MAX
		ns $h ip link set obs-c${side}1 gso_max_size $GSO_MAX
		ns $h ip link set obs-c${side}1 master obs-br
		ns $h ip link set obs-c${side}1 up
		ns $h ip link set obs-br up
		ns $c ip link set obs-c${side}0 up
		ns $h sysctl -qw net.ipv4.ip_forward=1
	done
	if [ "$mode" = l2 ]; then
		ns $CA ip addr add 198.18.64.1/24 dev obs-ca0
		ns $CB ip addr add 198.18.64.2/24 dev obs-cb0
		PEER_IP=198.18.64.2
	else
		ns $HA ip addr add 198.18.64.1/24 dev obs-br
		ns $HB ip addr add 198.18.65.1/24 dev obs-br
		ns $CA ip addr add 198.18.64.2/24 dev obs-ca0
		ns $CB ip addr add 198.18.65.2/24 dev obs-cb0
		ns $CA ip route add default via 198.18.64.1
		ns $CB ip route add default via 198.18.65.1
		PEER_IP=198.18.65.2
	fi
}

# sleeve_start SIDE(a|b) ARGS... : starts the daemon (sleeve_wait waits for it);
# SLEEVE_ENV_a / SLEEVE_ENV_b: VAR=VALUE words for that side's environment only
sleeve_start() {
	local side=$1; shift
	local h=obs-h$side$LABID local_ip peer_ip i envs
	if [ "$side" = a ]; then local_ip=198.18.0.1 peer_ip=198.18.0.2; else local_ip=198.18.0.2 peer_ip=198.18.0.1; fi
	eval "envs=(\${SLEEVE_ENV_$side:-})"
	ip netns exec $h env "${envs[@]}" "$SLEEVE" --dev obs-sv --local $local_ip --peer $peer_ip \
		--stats-file "$LAB_TMP/stats-$side$LABID.json" "$@" \
		>"$LAB_TMP/out-$side$LABID" 2>"$LAB_TMP/err-$side$LABID" &
	LAB_PIDS+=($!)
	eval "SLEEVE_PID_$side$LABID=$!"
}

# sleeve_pid SIDE : the pid sleeve_start gave that side's daemon in this lab
sleeve_pid() { eval "echo \"\${SLEEVE_PID_$1$LABID:-}\""; }

# Every wait below is for a condition, with a deadline that only a hang reaches (each
# step takes milliseconds; 30 s holds on a machine whose CPUs something else keeps busy).

# sleeve_wait SIDE : wait for "ready", print the MTU
sleeve_wait() {
	local side=$1 i line
	for i in $(seq 1 300); do
		line=$(head -n1 "$LAB_TMP/out-$side$LABID" 2>/dev/null)
		case $line in ready\ *) echo "${line##*mtu=}"; return 0 ;; esac
		sleep 0.1
	done
	echo "sleeve $side not ready; stderr:" >&2
	cat "$LAB_TMP/err-$side$LABID" >&2
	return 1
}

# sleeve_attach SIDE l2|l3
sleeve_attach() {
	local h=obs-h$1$LABID
	if [ "$2" = l2 ]; then
		ns $h ip link set obs-sv master obs-br
	elif [ "$1" = a ]; then
		ns $h ip route add 198.18.65.0/24 dev obs-sv
	else
		ns $h ip route add 198.18.64.0/24 dev obs-sv
	fi
}

sleeve_stop_all() {
	local p
	for p in "${LAB_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${LAB_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	LAB_PIDS=()
}

# vxlan_up OVERLAY_MTU : kernel VXLAN between the hosts, on the bridges
vxlan_up() {
	local omtu=$1
	ns $HA ip link add obs-vx type vxlan id 42 remote 198.18.0.2 local 198.18.0.1 dstport 4789 nolearning dev obs-u0
	ns $HB ip link add obs-vx type vxlan id 42 remote 198.18.0.1 local 198.18.0.2 dstport 4789 nolearning dev obs-u1
	for h in $HA $HB; do
		ns $h ip link set obs-vx mtu "$omtu" gso_max_size $GSO_MAX
		ns $h ip link set obs-vx master obs-br
		ns $h ip link set obs-vx up
	done
}

# wait_ss NS WHAT SS_ARGS... : until `ss -Hn SS_ARGS` in NS lists a socket (30 s at most)
wait_ss() {
	local n=$1 what=$2 i; shift 2
	for i in $(seq 1 600); do
		[ -n "$(ns "$n" ss -Hn "$@")" ] && return 0
		sleep 0.05
	done
	echo "no $what in $n within 30 s" >&2
	return 1
}
wait_listen() { wait_ss "$1" "listener on port $2" -lt "sport = :$2"; }                        # NS PORT
wait_connected() { wait_ss "$1" "connection to port $2" -t state established "sport = :$2"; } # NS PORT

# lab_left : the namespaces this script made that are still there, one a line
lab_left() {
	local n
	for n in "${LAB_NS_ALL[@]}"; do
		ip netns list | grep -q "^$n\b" && echo "$n"
	done
	return 0
}

# stats_dump SIDE... : each side's daemon writes its counters (SIGUSR1); returns once every
# stats file is there again and parses (the daemon writes tmp + rename), 30 s at most
stats_dump() {
	local side i f
	for side in "$@"; do
		rm -f "$LAB_TMP/stats-$side$LABID.json"
		kill -USR1 "$(sleeve_pid "$side")" 2>/dev/null || return 1
	done
	for side in "$@"; do
		f=$LAB_TMP/stats-$side$LABID.json
		for i in $(seq 1 600); do
			python3 -c "import json; json.load(open('$f'))" 2>/dev/null && break
			sleep 0.05
		done
		[ -s "$f" ] || { echo "sleeve $side wrote no counters" >&2; return 1; }
	done
}

# stats_keep SIDE... : dump each side's counters now and keep them as the case's snapshot,
# which stat_get reads: what a daemon counts while the two stop one after the other (a
# heartbeat to a peer that has just gone, refused) is not the case's
stats_keep() {
	local side
	stats_dump "$@" || return 1
	for side in "$@"; do
		cp "$LAB_TMP/stats-$side$LABID.json" "$LAB_TMP/case-$side$LABID.json"
	done
}

# iperf_gbps CLIENT_NS SERVER_NS SERVER_IP SECONDS : received Gbit/s
iperf_gbps() {
	local cns=$1 sns=$2 ip=$3 t=$4 out
	ip netns exec "$sns" iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	local spid=$!
	LAB_PIDS+=($spid)
	wait_listen "$sns" 5201
	out=$(ns "$cns" timeout $((t + 15)) iperf3 -c "$ip" -p 5201 -t "$t" -J 2>/dev/null)
	wait $spid 2>/dev/null
	python3 -c 'import json,sys
d=json.loads(sys.stdin.read() or "{}")
e=d.get("end",{}).get("sum_received",{}).get("bits_per_second")
print("%.3f" % (e/1e9) if e else "0")' <<<"$out"
}

# qperf_lat CLIENT_NS SERVER_NS SERVER_IP SECONDS : tcp_lat in microseconds
qperf_lat() {
	local cns=$1 sns=$2 ip=$3 t=$4 out
	ip netns exec "$sns" timeout $((t + 15)) qperf -lp 19765 >/dev/null 2>&1 &
	local spid=$!
	LAB_PIDS+=($spid)
	wait_listen "$sns" 19765
	out=$(ns "$cns" timeout $((t + 10)) qperf -lp 19765 -ip 19766 -t "$t" -uu "$ip" tcp_lat 2>/dev/null)
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	awk '/latency/ {print $3}' <<<"$out"
}

stat_get() { # stat_get SIDE python-expr-on-d : on the case's snapshot (stats_keep), else the last write
	local f=$LAB_TMP/case-$1$LABID.json
	[ -f "$f" ] || f=$LAB_TMP/stats-$1$LABID.json
	python3 -c "import json; d=json.load(open('$f')); print($2)"
}

# wait_quiet : wait (up to 60 s) until the machine is >= 85% idle over 0.5 s, so
# that other users of this shared box disturb a measurement less. Prints nothing.
wait_quiet() {
	local i a b
	for i in $(seq 1 120); do
		a=($(head -1 /proc/stat)); sleep 0.5; b=($(head -1 /proc/stat))
		local tot=0 k
		for k in 1 2 3 4 5 6 7 8; do tot=$((tot + b[k] - a[k])); done
		[ $tot -gt 0 ] && [ $(( (b[4] - a[4]) * 100 / tot )) -ge 85 ] && return 0
	done
	return 0
}
