#!/bin/bash
# netns_smoke.sh - the sleeve carrying real traffic between two namespaces.
# Needs root. Creates only obs-* namespaces (198.18.0.0/15) and removes them on
# every exit path. Each case: ping across (full-size, DF) and an iperf3 TCP stream of
# IPERF_S seconds (default 1: this checks that traffic flows, BENCHMARKS.md measures speed).
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
# this run's own namespaces (obs-ha<pid> ...), so that two runs on one machine stay apart
lab_select "${LABID:-$$}"
trap 'lab_cleanup' EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "netns_smoke: needs root" >&2; exit 1; }
[ -x "$SLEEVE" ] || { echo "netns_smoke: build first (make)" >&2; exit 1; }

PASS=0 FAIL=0
IPERF_S=${IPERF_S:-1}
ok() { echo "ok   $*"; PASS=$((PASS + 1)); }
bad() { echo "FAIL $*"; FAIL=$((FAIL + 1)); }
# stat_check SIDE EXPR OK BAD : ok OK if the python EXPR on SIDE's counters holds, else bad BAD
stat_check() { if stat_get "$1" "$2" | grep -q True; then ok "$3"; else bad "$4"; fi; }

KEY1=$LAB_TMP/key1 KEY2=$LAB_TMP/key2
head -c 32 /dev/urandom >"$KEY1"
head -c 32 /dev/urandom >"$KEY2"
chmod 600 "$KEY1" "$KEY2"

# --- command line contract (no namespaces needed) ---
cli() { # cli WANT_EXIT DESC ARGS...
	local want=$1 desc=$2 out rc; shift 2
	out=$("$SLEEVE" "$@" 2>&1 >/dev/null); rc=$?
	if [ $rc -eq "$want" ] && { [ "$want" = 0 ] || { [ "$(wc -l <<<"$out")" = 1 ] && [[ $out == sleeve:* ]]; }; }; then
		ok "cli: $desc"
	else
		bad "cli: $desc (exit $rc, stderr: $out)"
	fi
}
cli 0 "--version" --version
cli 0 "--help" --help
cli 2 "no args"
cli 2 "unknown flag" --dev x --local 198.18.0.1 --peer 198.18.0.2 --bogus
cli 2 "bad --mtu" --dev x --local 198.18.0.1 --peer 198.18.0.2 --mtu 12
cli 2 "bad --mtu word" --dev x --local 198.18.0.1 --peer 198.18.0.2 --mtu big
cli 2 "bad address" --dev x --local 198.18.0.300 --peer 198.18.0.2
cli 2 "bad port" --dev x --local 198.18.0.1:70000 --peer 198.18.0.2
cli 2 "missing --peer" --dev x --local 198.18.0.1
cli 2 "bad --heartbeat-ms" --dev x --local 198.18.0.1 --peer 198.18.0.2 --heartbeat-ms 0
cli 2 "stray argument" --dev x --local 198.18.0.1 --peer 198.18.0.2 extra
cli 2 "missing key file" --dev x --local 198.18.0.1 --peer 198.18.0.2 --key-file /nonexistent
head -c 32 /dev/urandom >"$LAB_TMP/key-open"; chmod 644 "$LAB_TMP/key-open"
cli 2 "key file mode 0644 refused" --dev x --local 198.18.0.1 --peer 198.18.0.2 --key-file "$LAB_TMP/key-open"
head -c 31 /dev/urandom >"$LAB_TMP/key-short"; chmod 600 "$LAB_TMP/key-short"
cli 2 "key file of 31 bytes refused" --dev x --local 198.18.0.1 --peer 198.18.0.2 --key-file "$LAB_TMP/key-short"
cli 2 "--cipher without a key" --dev x --local 198.18.0.1 --peer 198.18.0.2 --cipher aes-256-gcm
cli 2 "unknown --cipher" --dev x --local 198.18.0.1 --peer 198.18.0.2 --key-file "$KEY1" --cipher aes-128-gcm
cli 2 "a key with a wildcard --local" --dev x --local 0.0.0.0 --peer 198.18.0.2 --key-file "$KEY1"
"$SLEEVE" --version | grep -q '^sleeve [0-9]' && ok "cli: --version says 'sleeve VERSION'" || bad "cli: --version format"

# run_case NAME UNDERLAY OVERLAY l2|l3 EXPECT(pass|ping|fail) ARGS_A -- ARGS_B
# (ping: the full-size ping must pass, no iperf3; for cases about agreement, not speed)
run_case() {
	local name=$1 umtu=$2 omtu=$3 mode=$4 expect=$5; shift 5
	local a=() b=() seen=0 x mtu_a mtu_b gbps
	for x in "$@"; do
		if [ "$x" = -- ]; then seen=1; continue; fi
		if [ $seen = 0 ]; then a+=("$x"); else b+=("$x"); fi
	done
	rm -f "$LAB_TMP"/case-*                 # the snapshots stat_check reads are this case's
	lab_up "$umtu"
	lab_containers "$omtu" "$mode"
	sleeve_start a "${a[@]}"
	sleeve_start b "${b[@]}"
	if ! mtu_a=$(sleeve_wait a) || ! mtu_b=$(sleeve_wait b); then
		bad "$name: daemon not ready"; sleeve_stop_all; return
	fi
	sleeve_attach a "$mode"; sleeve_attach b "$mode"
	# full-size ping with DF: the overlay MTU really holds
	if ns $CA ping -c 3 -i 0.2 -W 2 -M do -s $((omtu - 28)) "$PEER_IP" >/dev/null 2>&1; then
		if [ "$expect" = ping ]; then
			ok "$name: ping -s $((omtu - 28)) -M do (mtu $mtu_a/$mtu_b)"
		elif [ "$expect" = pass ]; then
			gbps=$(iperf_gbps $CA $CB "$PEER_IP" "$IPERF_S")
			if python3 -c "import sys; sys.exit(0 if float('$gbps') > 0.02 else 1)"; then
				ok "$name: ping -s $((omtu - 28)) -M do, iperf3 $gbps Gbit/s (mtu $mtu_a/$mtu_b)"
			else
				bad "$name: iperf3 failed ($gbps)"
			fi
		else
			bad "$name: ping went through but must not"
		fi
	else
		if [ "$expect" = fail ]; then ok "$name: no traffic, as required"; else bad "$name: ping failed"; fi
	fi
	stats_keep a b || bad "$name: counters not written on SIGUSR1"
	CASE_MTU_A=$mtu_a
	sleeve_stop_all
	if ns $HA ip link show obs-sv >/dev/null 2>&1; then bad "$name: device left after SIGTERM"; fi
	[ -s "$LAB_TMP/stats-a$LABID.json" ] || bad "$name: no stats file"
}

run_case "L2 1500/1410" 1500 1410 l2 pass --mtu 1410 -- --mtu 1410
stat_check a 'd["offload"]["vnet_hdr"] and d["offload"]["udp_gso"] and d["offload"]["udp_gro"] and d["tx"]["super_frames"] > 0' \
	"L2 1500/1410: offload path ran (vnet_hdr, udp_gso, udp_gro, super-frames)" "L2 1500/1410: offload counters"
run_case "L3 1500/1410" 1500 1410 l3 pass --l3 --mtu 1410 -- --l3 --mtu 1410
run_case "L2 crypto 1500/1410" 1500 1410 l2 pass --mtu 1410 --key-file "$KEY1" -- --mtu 1410 --key-file "$KEY1"
stat_check b 'd["crypto"] and d["rx"]["frames"] > 0 and d["drops"]["auth_fail"] == 0' \
	"L2 crypto: sealed frames received, no auth failures" "L2 crypto counters"
stat_check a 'd["cipher"] == "aes-256-gcm" and d["peers"][0]["cipher"] == "aes-256-gcm" and d["cipher_flag"] == "auto"' \
	"L2 crypto: both auto on AES-NI, AES-256-GCM agreed" "L2 crypto: cipher ($(stat_get a 'd["cipher"], d["peers"]'))"
run_case "L3 crypto 1500/1410" 1500 1410 l3 pass --l3 --mtu 1410 --key-file "$KEY1" -- --l3 --mtu 1410 --key-file "$KEY1"
# the AEADs: each forced on both sides, forced on one, a side without AES-NI
# (OPENSSL_ia32cap masks it for OpenSSL and the sleeve alike), forced ones that differ
for c in aes-256-gcm chacha20-poly1305; do
	run_case "L2 crypto --cipher $c" 1500 1410 l2 ping --mtu 1410 --key-file "$KEY1" --cipher $c -- --mtu 1410 --key-file "$KEY1" --cipher $c
	stat_check b "d['cipher'] == '$c' and d['peers'][0]['cipher'] == '$c' and d['rx']['frames'] > 0 and d['drops']['auth_fail'] == 0 and d['drops']['cipher_mismatch'] == 0" \
		"--cipher $c: sealed with it, frames received, nothing refused" "--cipher $c: counters"
done
run_case "crypto auto vs chacha20-poly1305" 1500 1410 l2 ping --mtu 1410 --key-file "$KEY1" -- --mtu 1410 --key-file "$KEY1" --cipher chacha20-poly1305
stat_check a 'd["cipher"] == "chacha20-poly1305" and d["cipher_flag"] == "auto" and d["rx"]["frames"] > 0' \
	"auto vs chacha20-poly1305: the auto side seals with ChaCha20-Poly1305" "auto vs chacha20-poly1305: counters"
SLEEVE_ENV_a="OPENSSL_ia32cap=~0x200000200000000" run_case "crypto auto, one side without AES-NI" 1500 1410 l2 ping --mtu 1410 --key-file "$KEY1" -- --mtu 1410 --key-file "$KEY1"
stat_check b 'd["cipher"] == "chacha20-poly1305" and d["rx"]["frames"] > 0' \
	"one side without AES-NI: both seal with ChaCha20-Poly1305" "one side without AES-NI: counters"
stat_check a 'd["cipher"] == "chacha20-poly1305"' "one side without AES-NI: that side too" "one side without AES-NI: side a"
run_case "crypto aes-256-gcm vs chacha20-poly1305" 1500 1410 l2 fail --mtu 1410 --key-file "$KEY1" --cipher aes-256-gcm -- --mtu 1410 --key-file "$KEY1" --cipher chacha20-poly1305
for side in a b; do
	stat_check $side 'd["drops"]["cipher_mismatch"] > 0 and d["rx"]["frames"] == 0 and d["peers"][0]["cipher"] == "none" and d["peers"][0]["heard"]' \
		"forced ciphers differ: $side refuses its peer, counts it, receives no frame" "forced ciphers differ: $side counters"
	n=$(grep -c 'accepts only' "$LAB_TMP/err-$side$LABID")
	[ "$n" = 1 ] && ok "forced ciphers differ: $side said so once" || bad "forced ciphers differ: $side said so $n times"
done
run_case "different keys" 1500 1410 l2 fail --mtu 1410 --key-file "$KEY1" -- --mtu 1410 --key-file "$KEY2"
stat_check b 'd["drops"]["auth_fail"] > 0 and d["rx"]["frames"] == 0' \
	"different keys: every datagram dropped as auth_fail" "different keys: counters"
run_case "key vs no key" 1500 1410 l2 fail --mtu 1410 --key-file "$KEY1" -- --mtu 1410
stat_check a 'd["drops"]["crypto_mismatch"] > 0 and d["rx"]["frames"] == 0' \
	"key vs no key: plaintext refused (crypto_mismatch)" "key vs no key: counters"
run_case "basic 1500/1410" 1500 1410 l2 pass --basic --mtu 1410 -- --basic --mtu 1410
stat_check a 'd["basic"] and not any(d["offload"].values()) and d["tx"]["batches"] == 0 and d["tx"]["datagrams"] == d["tx"]["send_calls"]' \
	"basic: no offloads, no batches, one send per datagram" "basic: counters"
run_case "no-offload 1500/1410" 1500 1410 l2 pass --no-offload --mtu 1410 -- --no-offload --mtu 1410
run_case "no-batch 1500/1410" 1500 1410 l2 pass --no-batch --mtu 1410 -- --no-batch --mtu 1410
run_case "offload vs no-offload" 1500 1410 l2 pass --mtu 1410 -- --no-offload --mtu 1410
stat_check a 'd["offload"]["tso"] == False and d["drops"]["gso_unsupported"] == 0' \
	"offload vs no-offload: sender kept super-frames off for that peer" "offload vs no-offload: counters"
# --segment: super-frames cut into TCP segments and gathered back on the far side
run_case "segment 1500/1410" 1500 1410 l2 pass --segment --mtu 1410 -- --segment --mtu 1410
stat_check a 'd["segment"] and d["tx"]["segmented"] > 0 and d["tx"]["fragments"] == 0' \
	"segment: the sender cut super-frames, no FRAG pieces" "segment: sender counters"
stat_check b 'd["rx"]["coalesced"] > 0 and sum(d["drops"].values()) == 0' \
	"segment: the receiver gathered them back, nothing dropped" "segment: receiver counters"
run_case "segment crypto 1500/1410" 1500 1410 l2 pass --segment --mtu 1410 --key-file "$KEY1" -- --segment --mtu 1410 --key-file "$KEY1"
stat_check b 'd["rx"]["coalesced"] > 0 and d["drops"]["auth_fail"] == 0' \
	"segment crypto: sealed segments gathered, no auth failures" "segment crypto: counters"
run_case "segment L3 1500/1410" 1500 1410 l3 pass --l3 --segment --mtu 1410 -- --l3 --segment --mtu 1410
# a cutting sender and a receiver that writes every segment as it comes
run_case "segment vs whole" 1500 1410 l2 pass --segment --mtu 1410 -- --mtu 1410
stat_check b 'd["rx"]["coalesced"] == 0 and d["rx"]["frames"] > 1000' \
	"segment vs whole: segments delivered one by one" "segment vs whole: counters"
run_case "segment 9000/8950" 9000 8950 l2 pass --segment --mtu 8950 -- --segment --mtu 8950
run_case "L2 9000/8950" 9000 8950 l2 pass --mtu 8950 -- --mtu 8950
run_case "L2 crypto 9000/8950" 9000 8950 l2 pass --mtu 8950 --key-file "$KEY1" -- --mtu 8950 --key-file "$KEY1"
run_case "basic 9000/8950" 9000 8950 l2 pass --basic --mtu 8950 -- --basic --mtu 8950
stat_check a 'd["tx"]["fragments"] == 0 and d["tx"]["frames"] > 0' \
	"basic 9000/8950: every frame in one datagram (no fragments)" "basic 9000/8950: fragments"
run_case "L2 1500/1500 (frames bigger than a datagram)" 1500 1500 l2 pass --mtu 1500 -- --mtu 1500
run_case "basic 1500/1500 (frames bigger than a datagram)" 1500 1500 l2 pass --basic --mtu 1500 -- --basic --mtu 1500
# sealed units without super-frames: oversize frames, each sealed once and cut
for v in --no-offload --basic; do
	run_case "crypto $v 1500/1500 (sealed units)" 1500 1500 l2 pass $v --mtu 1500 --key-file "$KEY1" -- $v --mtu 1500 --key-file "$KEY1"
	stat_check b 'd["rx"]["fragments"] > 0 and d["rx"]["frames"] > 0 and d["drops"]["auth_fail"] == 0 and d["drops"]["reasm_bad"] == 0' \
		"crypto $v: sealed units received, no auth failures" "crypto $v: counters"
done

# --mtu auto: discovered path MTU - overhead
auto_case() { # auto_case NAME UNDERLAY MODE WANT ARGS...
	local name=$1 umtu=$2 mode=$3 want=$4; shift 4
	run_case "$name" "$umtu" "$want" "$mode" pass --mtu auto "$@" -- --mtu auto "$@"
	[ "$CASE_MTU_A" = "$want" ] && ok "$name: auto MTU $CASE_MTU_A" || bad "$name: auto MTU $CASE_MTU_A, want $want"
}
# overhead on IPv4: 50 L2 (as kernel VXLAN), 36 L3, 82 L2 crypto, 68 L3 crypto
auto_case "auto L2 1500" 1500 l2 1450
auto_case "auto L2 crypto 1500" 1500 l2 1418 --key-file "$KEY1"
auto_case "auto L3 1500" 1500 l3 1464 --l3
auto_case "auto L3 crypto 1500" 1500 l3 1432 --l3 --key-file "$KEY1"
auto_case "auto L2 9000" 9000 l2 8950

# VXLAN's MTUs given explicitly (1450 / 8950): full-size DF pings pass; --basic
# (no super-frames) shows that every frame went in one datagram, no FRAG
run_case "L2 1500/1450 (VXLAN MTU)" 1500 1450 l2 pass --mtu 1450 -- --mtu 1450
stat_check a 'd["overhead"] == 50 and d["drops"]["oversize"] == 0' \
	"L2 1500/1450: overhead 50" "L2 1500/1450: counters (overhead, oversize)"
run_case "basic 1500/1450" 1500 1450 l2 pass --basic --mtu 1450 -- --basic --mtu 1450
stat_check a 'd["tx"]["fragments"] == 0 and d["tx"]["frames"] > 0' \
	"basic 1500/1450: every frame in one datagram (no fragments)" "basic 1500/1450: fragments"
run_case "no-batch 9000/8950" 9000 8950 l2 pass --no-batch --mtu 8950 -- --no-batch --mtu 8950
run_case "basic crypto 1500/1418" 1500 1418 l2 pass --basic --mtu 1418 --key-file "$KEY1" -- --basic --mtu 1418 --key-file "$KEY1"
stat_check a 'd["tx"]["fragments"] == 0 and d["overhead"] == 82' \
	"basic crypto 1500/1418: overhead 82, no fragments" "basic crypto 1500/1418: counters"

# --- flood: hostile datagrams while TCP runs across the sleeve ---
# tests/flood.c on host a sends, for FLOOD_S seconds, empty, 1-byte, header-only,
# truncated, oversized (65,507 bytes), random, replayed (captured from a's own
# sleeve) and wrong-key datagrams to b's sleeve, from a's address on another
# port, from 198.18.0.77 (an extra address on a's underlay, no peer), and from a's
# address and port (an nft rule on a rewrites the source port). b must stay up,
# the TCP stream must complete, b's drop counters must hold exactly what was sent
# (less what b's kernel dropped), and nothing may come back to the strangers.
# FLOOD_CASES: the cases to run, comma-separated names as below (default all).
FLOOD=${FLOOD:-$(dirname "$SLEEVE")/flood}
FLOOD_S=${FLOOD_S:-2}
FLOOD_CASES=${FLOOD_CASES:-all}
SPOOF_PORT=46784
flood_case() { # flood_case NAME l2|l3 FLOOD_ARGS -- SLEEVE_ARGS
	local name=$1 mode=$2 fargs=() x seen=0 pid_ip rc; shift 2
	local args=()
	case ",$FLOOD_CASES," in
		,all,|*",$name,"*) ;;
		*) echo "skip flood $name (FLOOD_CASES=$FLOOD_CASES)"; return ;;
	esac
	for x in "$@"; do
		if [ "$x" = -- ]; then seen=1; continue; fi
		if [ $seen = 0 ]; then fargs+=("$x"); else args+=("$x"); fi
	done
	lab_up 1500
	lab_containers 1410 "$mode"
	sleeve_start a --mtu 1410 "${args[@]}"
	sleeve_start b --mtu 1410 "${args[@]}"
	if ! sleeve_wait a >/dev/null || ! sleeve_wait b >/dev/null; then
		bad "flood $name: daemon not ready"; sleeve_stop_all; return
	fi
	sleeve_attach a "$mode"; sleeve_attach b "$mode"
	ns $HA ip addr add 198.18.0.77/24 dev obs-u0
	ns $HA nft -f - <<-NFT
	table inet obs-flood {
		chain out {
			type filter hook output priority 0;
			ip daddr 198.18.0.2 udp dport 6784 udp sport $SPOOF_PORT udp sport set 6784
		}
		chain in {
			type filter hook input priority 0;
			ip saddr 198.18.0.2 udp sport 6784 ip daddr 198.18.0.77 counter
			ip saddr 198.18.0.2 udp sport 6784 ip daddr 198.18.0.1 udp dport != 6784 counter
		}
	}
	NFT
	stats_dump b || bad "flood $name: counters not written on SIGUSR1"
	cp "$LAB_TMP/stats-b$LABID.json" "$LAB_TMP/flood-before.json"
	ns $HB cat /proc/net/snmp >"$LAB_TMP/snmp-before"
	cat /proc/net/softnet_stat >"$LAB_TMP/softnet-before"
	ip netns exec $CB timeout 60 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	LAB_PIDS+=($!)
	wait_listen $CB 5201
	# TCP outlasts the capture (it ends once its pool is full: milliseconds while TCP
	# flows, 2 s at most) and the flood
	ns $CA timeout 60 iperf3 -c "$PEER_IP" -p 5201 -t $((FLOOD_S + 4)) -J >"$LAB_TMP/flood-iperf.json" 2>/dev/null &
	pid_ip=$!
	wait_connected $CB 5201
	ns $HA timeout $((FLOOD_S + 20)) "$FLOOD" --target 198.18.0.2:6784 --peer 198.18.0.1:6784 \
		--stranger 198.18.0.77 --spoof-port $SPOOF_PORT --seconds "$FLOOD_S" --rate 2000 \
		--capture obs-u0 --capture-seconds 2 "${fargs[@]}" >"$LAB_TMP/flood.json"
	rc=$?
	wait $pid_ip
	if [ $rc != 0 ]; then bad "flood $name: flood exited $rc"; fi
	if kill -0 "$(sleeve_pid a)" 2>/dev/null && kill -0 "$(sleeve_pid b)" 2>/dev/null; then
		# the counters, read again until b has counted what is still in its socket (20 s at most)
		for x in $(seq 1 40); do
			stats_dump b && cp "$LAB_TMP/stats-b$LABID.json" "$LAB_TMP/flood-after.json"
			ns $HB cat /proc/net/snmp >"$LAB_TMP/snmp-after"
			cat /proc/net/softnet_stat >"$LAB_TMP/softnet-after"
			python3 "$TESTS_DIR/flood_check.py" "$LAB_TMP" "$name" "$FLOOD_S" --settled && break
			sleep 0.5
		done
		ok "flood $name: both sleeves up"
	else
		bad "flood $name: a sleeve died ($(tail -n1 "$LAB_TMP/err-b$LABID"))"; sleeve_stop_all; return
	fi
	ns $HA nft list table inet obs-flood >"$LAB_TMP/flood-nft.txt"
	sleeve_stop_all
	# the checks print "ok   ..." / "FAIL ..." lines; counted here, in this shell
	while read -r x; do
		case $x in "ok   "*) ok "${x#ok   }" ;; "FAIL "*) bad "${x#FAIL }" ;; *) echo "$x" ;; esac
	done < <(python3 "$TESTS_DIR/flood_check.py" "$LAB_TMP" "$name" "$FLOOD_S" "${fargs[@]}" 2>&1)
}
flood_case "sleeve" l2 --
flood_case "basic" l2 -- --basic
flood_case "L3" l3 --l3 -- --l3
flood_case "crypto" l2 --keyed --cipher aes-256-gcm -- --key-file "$KEY1" --cipher aes-256-gcm
flood_case "crypto chacha" l2 --keyed --cipher chacha20-poly1305 -- --key-file "$KEY1" --cipher chacha20-poly1305
flood_case "segment" l2 -- --segment

lab_down
for n in $(lab_left); do bad "namespace $n left behind"; done
echo "netns_smoke: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
