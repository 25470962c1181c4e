#!/bin/bash
# A local Kubernetes cluster in network namespaces of its own, from the binaries k8s/build.sh
# caches. Run as root.
#   k8s/cluster.sh up      start it; prints the admin kubeconfig's path as its last line
#   k8s/cluster.sh check   pause pods, on the node's network and on the pod network, must reach
#                          Running on every node (then they are deleted)
#   k8s/cluster.sh flannel B  restart flanneld on every node with backend B (vxlan, host-gw):
#                          the old backend's device and routes removed, the CNI config at the
#                          new MTU (pods made afterwards get it)
#   k8s/cluster.sh pod-mtu N  every node's CNI config at MTU N (as a CNI config's "mtu" that
#                          overrides flanneld's would), its bridge too; `pod-mtu flannel` back to
#                          flanneld's. Pods made afterwards get it
#   k8s/cluster.sh load F  import the image archive F (images/build.sh tools-archive) into
#                          every node's containerd
#   k8s/cluster.sh down    remove every process, mount, cgroup, namespace, sysctl change and file
#   k8s/cluster.sh status  exit 0: a cluster is up (every daemon it started runs) or coming up;
#                          3: a daemon or its `up` was killed (its state is left: down removes
#                          it); 1: none
#
# Layout (every name starts with obk8s):
#   netns obk8s-fab   the fabric: bridge obk8s-br 198.19.208.1/24, etcd, kube-apiserver
#                     (:6443), kube-controller-manager, kube-scheduler; reached from the root
#                     namespace over veth obk8s-api (198.19.209.1/30 <-> 198.19.209.2/30)
#   netns obk8s-nI    node I (198.19.208.1I/24 on eth0, a port of the bridge): containerd
#                     (own root, state, socket, runc root; cgroupfs) and a kubelet with
#                     cgroupRoot /obk8s-nI in every cgroup v1 hierarchy; every containerd
#                     reads a registry's CA and hosts.toml from $S/certs.d/HOST:PORT/
#   pods 198.19.224.0/20 (a /24 per node), services 198.19.216.0/24
# The pod network (OBK8S_CNI): flannel (default) runs the project's flanneld on every node with
# --kube-subnet-mgr (its lease is the node's podCIDR; backend OBK8S_FLANNEL_BACKEND, vxlan by
# default, or host-gw), and the node's CNI config is the one flannel's CNI plugin would hand
# to its delegate: a bridge with host-local addresses from the lease, at flanneld's MTU.
# cilium: a cilium-agent per node, VXLAN tunnels, configured from kube-system/cilium-config
# (k8s/cilium.sh; k8s/build.sh cilium builds it).
# bridge: that bridge alone, no route between nodes (one node). kube-proxy (iptables mode,
# touching no conntrack sysctl) runs on every node. OBK8S_NODES nodes (default 2).
# The kubelet rewrites kernel.panic, kernel.panic_on_oops and vm.overcommit_memory (not
# namespaced): up saves them, down restores them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
BIN=${OBK8S_BIN:-${OVERLAYBENCH_CACHE:-$HOME/.cache/overlaybench}/k8s/$K8S_VERSION/bin}
S=${OBK8S_STATE:-/var/lib/obk8s}
NODES=${OBK8S_NODES:-2}
CNI=${OBK8S_CNI:-flannel}
FLANNEL_BACKEND=${OBK8S_FLANNEL_BACKEND:-vxlan}
FLANNELD=${OBK8S_FLANNELD:-$here/../.venv/bin/flanneld}
P=obk8s
FAB=$P-fab
API_IP=198.19.208.1
ROOT_IP=198.19.209.1
API_OUTER=198.19.209.2
SERVICE_CIDR=198.19.216.0/24
POD_CIDR=198.19.224.0/20
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory"
export PATH=$BIN:$PATH
. "$here/config.sh"      # the files it writes: certificates, configurations, cgroups
. "$here/cilium.sh"      # OBK8S_CNI=cilium: an agent per node

say() { echo "k8s/cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }
node_ip() { echo "198.19.208.1$1"; }

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
	local limit=$1 what=$2 t0=$SECONDS; shift 2
	until "$@" >/dev/null 2>&1; do
		[ $((SECONDS - t0)) -lt "$limit" ] || die "$what not ready after $limit s (logs: $S/log)"
		sleep 0.2
	done
}

# start NAME NETNS COMMAND...: a daemon in NETNS (nsenter: the mount namespace stays shared),
# in a session of its own, without the caller's file descriptors (a lock's among them).
start() {
	local name=$1 ns=$2; shift 2
	(
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then eval "exec $fd>&-"; fi
		done
		exec setsid nsenter --net=/run/netns/"$ns" "$@" </dev/null >>"$S/log/$name.log" 2>&1
	) &
	echo $! >"$S/pid/$name"
}

# ---- flannel: one flanneld per node, its lease the node's podCIDR ----
start_flanneld() { # I
	mkdir -p "$S/n$1/flannel"
	start "flanneld-n$1" "$P-n$1" env NODE_NAME="$P-n$1" "$FLANNELD" --kube-subnet-mgr \
		--kubeconfig-file "$S/flannel.kubeconfig" --net-config-path "$S/flannel-net.json" \
		--subnet-file "$S/n$1/flannel/subnet.env" --iface eth0
}

# Every node's subnet file written, its CNI config at flanneld's MTU, and its routes to
# every other node's pods (flanneld adds them after it writes the file).
flannel_ready() {
	local i j t0=$SECONDS
	for i in $(seq 1 "$NODES"); do
		wait_for 60 "flanneld on $P-n$i" test -s "$S/n$i/flannel/subnet.env"
		cni_config "$i" "$(node_cidr "$i")" "$(. "$S/n$i/flannel/subnet.env"; echo "$FLANNEL_MTU")"
	done
	for i in $(seq 1 "$NODES"); do
		for j in $(seq 1 "$NODES"); do
			[ "$i" = "$j" ] || wait_for 60 "$P-n$i's route to $P-n$j's pods" has_route "$i" "$(node_cidr "$j")"
		done
	done
	say "flanneld ($FLANNEL_BACKEND) up on $NODES node(s) ($((SECONDS - t0)) s)"
}
has_route() { [ -n "$(ip -n "$P-n$1" route show "$2")" ]; }
kube_rules() { nsenter --net="/run/netns/$P-n$1" iptables -t nat -S KUBE-SERVICES | grep -q 'default/kubernetes:https'; }

flannel_switch() { # BACKEND
	local i j pid
	case ${1:-} in vxlan|host-gw) ;; *) die "flannel: backend vxlan or host-gw, not '${1:-}'" ;; esac
	[ -f "$S/flannel-net.json" ] || die "flannel: no cluster with flannel is up"
	FLANNEL_BACKEND=$1
	for i in $(seq 1 "$NODES"); do
		pid=$(cat "$S/pid/flanneld-n$i")
		kill "$pid" 2>/dev/null || true
		wait_for 20 "flanneld on $P-n$i to stop" dead "$pid"
		rm -f "$S/n$i/flannel/subnet.env"
		ip -n "$P-n$i" link del flannel.1 2>/dev/null || true
		for j in $(seq 1 "$NODES"); do
			[ "$j" = "$i" ] || ip -n "$P-n$i" route del "$(node_cidr "$j")" 2>/dev/null || true
		done
	done
	flannel_net_config
	for i in $(seq 1 "$NODES"); do start_flanneld "$i"; done
	flannel_ready
}
dead() { ! alive "$1"; }

pod_mtu() { # N | flannel
	local i mtu
	[ -f "$S/ready" ] || die "pod-mtu: no cluster is up"
	[ ! -d "$S/cilium-config" ] || die "pod-mtu: the pods of a cluster on Cilium take its MTU, not a CNI config's"
	case ${1:-} in
	flannel) [ -f "$S/flannel-net.json" ] || die "pod-mtu flannel: no cluster with flannel is up" ;;
	*[!0-9]*|'') die "pod-mtu: an MTU from 576 to 9000, or flannel, not '${1:-}'" ;;
	*) [ "$1" -ge 576 ] && [ "$1" -le 9000 ] || die "pod-mtu: an MTU from 576 to 9000, not $1" ;;
	esac
	for i in $(seq 1 "$NODES"); do
		mtu=$1
		[ "$mtu" != flannel ] || mtu=$(. "$S/n$i/flannel/subnet.env"; echo "$FLANNEL_MTU")
		cni_config "$i" "$(node_cidr "$i")" "$mtu"
		ip -n "$P-n$i" link set "$P-cni0" mtu "$mtu" 2>/dev/null || true     # made by the first pod
	done
	say "pods made from now on: MTU $mtu"
}

# ---- up ----
up() {
	[ -x "$BIN/kubelet" ] || die "no binaries in $BIN: run make k8s-build (k8s/build.sh)"
	[ ! -e "$S" ] || die "$S exists: a cluster is up or was killed; run k8s/cluster.sh down first"
	ip netns list | grep -q "^$P-" && die "namespaces $P-* exist: run k8s/cluster.sh down first"
	case $CNI in
	flannel) [ -x "$FLANNELD" ] || die "no flanneld at $FLANNELD: run make flanneld" ;;
	cilium) cilium_check ;;
	bridge) [ "$NODES" = 1 ] || die "OBK8S_CNI=bridge routes no pod between nodes: use it with OBK8S_NODES=1" ;;
	*) die "OBK8S_CNI=$CNI: flannel, cilium or bridge" ;;
	esac
	local t0=$SECONDS i n
	trap 'say "up failed: removing the cluster; its logs are in ${OBK8S_KEEP_LOGS:=/tmp/$P-failed-logs}"; down' EXIT
	mkdir -p "$S/log" "$S/pid" "$S/certs.d"
	echo "$NODES" >"$S/nodes"
	echo $$ >"$S/up.pid"
	for i in $(seq 1 "$NODES"); do mkdir -p "$S/n$i/cni" "$S/n$i/pod-logs"; done
	for k in $SYSCTLS; do echo "$k=$(sysctl -n "$k")"; done >"$S/sysctl.saved"
	make_pki

	# fabric namespace, its bridge, and the veth the root namespace reaches the API server by
	ip netns add "$FAB"
	ip -n "$FAB" link set lo up
	ip -n "$FAB" link add $P-br type bridge
	ip -n "$FAB" addr add "$API_IP/24" dev $P-br
	ip -n "$FAB" link set $P-br up
	ip link add $P-api type veth peer name $P-apin netns "$FAB"
	ip addr add "$ROOT_IP/30" dev $P-api
	ip link set $P-api up
	ip -n "$FAB" addr add "$API_OUTER/30" dev $P-apin
	ip -n "$FAB" link set $P-apin up
	for i in $(seq 1 "$NODES"); do
		ip netns add "$P-n$i"
		ip -n "$P-n$i" link set lo up
		ip -n "$FAB" link add "n$i" type veth peer name eth0 netns "$P-n$i"
		ip -n "$FAB" link set "n$i" master $P-br up
		ip -n "$P-n$i" addr add "$(node_ip "$i")/24" dev eth0
		ip -n "$P-n$i" link set eth0 up
		ip -n "$P-n$i" route add default via "$API_IP"
	done

	start etcd "$FAB" etcd --name $P --data-dir "$S/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster $P=http://127.0.0.1:2380 --log-level warn
	wait_for 60 etcd nsenter --net=/run/netns/$FAB etcdctl --endpoints http://127.0.0.1:2379 endpoint health
	say "etcd up ($((SECONDS - t0)) s)"

	start kube-apiserver "$FAB" kube-apiserver --etcd-servers http://127.0.0.1:2379 \
		--bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$API_IP" \
		--service-cluster-ip-range "$SERVICE_CIDR" --cert-dir "$S/pki" \
		--client-ca-file "$S/pki/ca.crt" --tls-cert-file "$S/pki/apiserver.crt" \
		--tls-private-key-file "$S/pki/apiserver.key" \
		--kubelet-client-certificate "$S/pki/apiserver-kubelet.crt" \
		--kubelet-client-key "$S/pki/apiserver-kubelet.key" \
		--service-account-key-file "$S/pki/sa.pub" --service-account-signing-key-file "$S/pki/sa.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--authorization-mode Node,RBAC --allow-privileged=true --anonymous-auth=false \
		--kubelet-preferred-address-types InternalIP \
		--enable-admission-plugins NodeRestriction --profiling=false
	wait_for 120 kube-apiserver kubectl --kubeconfig "$S/admin.kubeconfig" get --raw /readyz
	say "kube-apiserver up ($((SECONDS - t0)) s)"

	start kube-controller-manager "$FAB" kube-controller-manager \
		--kubeconfig "$S/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$S/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$S/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$S/pki/sa.key" --root-ca-file "$S/pki/ca.crt" \
		--cluster-signing-cert-file "$S/pki/ca.crt" --cluster-signing-key-file "$S/pki/ca.key" \
		--allocate-node-cidrs --cluster-cidr "$POD_CIDR" --node-cidr-mask-size 24 \
		--service-cluster-ip-range "$SERVICE_CIDR" --profiling=false
	start kube-scheduler "$FAB" kube-scheduler --kubeconfig "$S/scheduler.kubeconfig" \
		--authentication-kubeconfig "$S/scheduler.kubeconfig" \
		--authorization-kubeconfig "$S/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false

	pause_archive "$S/pause-oci.tar"
	for i in $(seq 1 "$NODES"); do
		n=$S/n$i
		containerd_config "$i"
		start "containerd-n$i" "$P-n$i" env CILIUM_SOCK="$(cilium_sock "$i")" containerd --config "$n/containerd.toml"
		wait_for 60 "containerd-n$i" ctr --address "$n/containerd.sock" version
		ctr --address "$n/containerd.sock" -n k8s.io images import "$S/pause-oci.tar" 2>&1 >/dev/null | quiet >&2
		kubelet_config "$i"
		make_cgroups "$i"
		start "kubelet-n$i" "$P-n$i" kubelet --config "$n/kubelet.yaml" \
			--kubeconfig "$n/kubelet.kubeconfig" --root-dir "$n/kubelet" --cert-dir "$n/kubelet/pki" \
			--hostname-override "$P-n$i" --node-ip "$(node_ip "$i")" --v 1
	done
	[ "$CNI" != flannel ] || flannel_net_config
	[ "$CNI" != cilium ] || cilium_prepare
	for i in $(seq 1 "$NODES"); do
		wait_for 120 "node $P-n$i's pod CIDR" node_cidr "$i"
		case $CNI in
		flannel)
			start_flanneld "$i" ;;
		bridge) cni_config "$i" "$(node_cidr "$i")" 1500 ;;
		esac
		kube_proxy_config "$i"
		start "kube-proxy-n$i" "$P-n$i" kube-proxy --config "$S/n$i/kube-proxy.yaml"
		[ "$CNI" != cilium ] || start_cilium "$i"
	done
	[ "$CNI" != flannel ] || flannel_ready
	[ "$CNI" != cilium ] || cilium_ready
	for i in $(seq 1 "$NODES"); do
		wait_for 60 "kube-proxy on $P-n$i" nsenter --net=/run/netns/$P-n$i curl -fsS http://127.0.0.1:10256/healthz
		wait_for 60 "kube-proxy's rules on $P-n$i" kube_rules "$i"
	done
	for i in $(seq 1 "$NODES"); do
		wait_for 120 "node $P-n$i Ready" node_ready "$i"
	done
	say "$NODES node(s) Ready ($((SECONDS - t0)) s)"
	touch "$S/ready"
	trap - EXIT
	echo "$S/admin.kubeconfig"
}

k() { kubectl --kubeconfig "$S/admin.kubeconfig" "$@"; }
node_cidr() { local c; c=$(k get node "$P-n$1" -o 'jsonpath={.spec.podCIDR}'); [ -n "$c" ] && echo "$c"; }
node_ready() {
	[ "$(k get node "$P-n$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# On every node two pause pods must reach Running: one on the node's network, one on the pod
# network (its address from the node's pod CIDR). All are deleted afterwards.
check() {
	local t0=$SECONDS pod host i pods=
	for i in $(seq 1 "$NODES"); do pods="$pods $P-probe-host-n$i $P-probe-pod-n$i"; done
	k delete pod $pods --ignore-not-found --wait >/dev/null
	wait_for 60 "service account default" k get serviceaccount default
	for i in $(seq 1 "$NODES"); do
		for pod in $P-probe-host-n$i $P-probe-pod-n$i; do
			host=false; [ $pod = $P-probe-host-n$i ] && host=true
			k apply -f - >/dev/null <<-EOF
			apiVersion: v1
			kind: Pod
			metadata: {name: $pod, namespace: default}
			spec:
			  nodeName: $P-n$i
			  hostNetwork: $host
			  terminationGracePeriodSeconds: 0
			  containers:
			  - {name: pause, image: $PAUSE_IMAGE, imagePullPolicy: Never}
			EOF
		done
	done
	for pod in $pods; do
		wait_for 120 "pod $pod Running" pod_running "$pod"
		say "pod $pod Running on $(k get pod "$pod" -o 'jsonpath={.spec.nodeName}') at" \
			"$(k get pod "$pod" -o 'jsonpath={.status.podIP}') ($((SECONDS - t0)) s)"
	done
	k delete pod $pods --wait >/dev/null
}
pod_running() { [ "$(k get pod "$1" -o 'jsonpath={.status.phase}')" = Running ]; }

# ---- down ----
ns_inodes() {
	local ns
	for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do stat -L -c %i "/run/netns/$ns"; done
}

# Every process of the cluster: whatever runs in its network namespaces (the daemons, the
# shims, hostNetwork pods) or in its cgroups (every pod).
cluster_pids() {
	local inodes pid f h
	inodes=" $(ns_inodes | tr '\n' ' ') "
	for pid in /proc/[0-9]*; do
		pid=${pid#/proc/}
		f=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
		f=${f#net:[}; f=${f%]}
		case $inodes in *" $f "*) echo "$pid" ;; esac
	done
	for h in /sys/fs/cgroup/*/$P-*; do
		[ -d "$h" ] && find "$h" -name cgroup.procs -exec cat {} + 2>/dev/null
	done
	true
}

kill_all() { # SIGNAL [COMM]: signals the cluster's processes (but those named COMM); 1 if none
	local sig=$1 spare=${2:-} p out=
	for p in $(cluster_pids | sort -un | grep -vx "$$" || true); do
		[ -n "$spare" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$spare" ] && continue
		out="$out $p"
	done
	[ -n "$out" ] || return 1
	kill "-$sig" $out 2>/dev/null || true
}

down() {
	local t0=$SECONDS k v m h t spare
	# the pods' processes first, at once (a container's PID 1, such as a pod's sleep, ignores
	# SIGTERM); then the daemons, etcd last: the API server's graceful stop waits for it, and
	# would wait forever
	for h in /sys/fs/cgroup/*/$P-*; do
		[ -d "$h" ] && find "$h" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -un | xargs -r kill -KILL 2>/dev/null || true
	for spare in etcd ""; do
		t=$SECONDS
		kill_all TERM "$spare" || continue
		while kill_all 0 "$spare" && [ $((SECONDS - t)) -lt 10 ]; do sleep 0.2; done
	done
	if kill_all 0; then
		say "still running after SIGTERM, killed: $(for p in $(cluster_pids | sort -un); do
			cat "/proc/$p/comm" 2>/dev/null; done | sort | uniq -c | tr -s ' \n' ' ')"
	fi
	while kill_all KILL; do
		[ $((SECONDS - t0)) -lt 40 ] || die "processes left: $(cluster_pids | sort -un | tr '\n' ' ')"
		sleep 0.2
	done
	if [ -d "$S" ]; then
		for m in $(findmnt -rn -o TARGET | grep "^$S/" | sort -r); do umount -l "$m" 2>/dev/null || true; done
	fi
	for h in /sys/fs/cgroup/*/$P-*; do
		[ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	for h in /sys/fs/cgroup/*/$P-*; do [ ! -d "$h" ] || die "cgroup left: $h"; done
	for m in $(ip netns list | awk '{print $1}' | grep "^$P-" || true); do ip netns del "$m"; done
	ip link del $P-api 2>/dev/null || true
	if [ -f "$S/sysctl.saved" ]; then
		while IFS== read -r k v; do
			[ "$(sysctl -n "$k")" = "$v" ] && continue
			say "restoring $k: $(sysctl -n "$k") -> $v"
			sysctl -q -w "$k=$v" >/dev/null
		done <"$S/sysctl.saved"
	fi
	if [ -n "${OBK8S_KEEP_LOGS:-}" ] && [ -d "$S/log" ]; then
		rm -rf "$OBK8S_KEEP_LOGS"; cp -r "$S/log" "$OBK8S_KEEP_LOGS"
	fi
	[ -z "$(findmnt -rn -o TARGET | grep "^$S/" || true)" ] || die "mounts left under $S"
	[ ! -d "$S" ] || cilium_down
	rm -rf "$S"
	say "down ($((SECONDS - t0)) s)"
}

# stdin without containerd's warning that cgroup v1 is deprecated (this machine has no v2)
quiet() { grep -v 'DEPRECATION: The support for cgroup v1' || true; }

# An image archive into every node's containerd (the k8s.io namespace the kubelet uses).
load() { # ARCHIVE
	local i
	[ -f "${1:-}" ] || die "load: no image archive ${1:-(none given)} (images/build.sh tools-archive writes one)"
	[ -d "$S" ] || die "load: no cluster is up ($S missing)"
	for i in $(seq 1 "$NODES"); do
		ctr --address "$S/n$i/containerd.sock" -n k8s.io images import "$1" 2>&1 >/dev/null | quiet >&2
		say "$P-n$i: imported $1"
	done
}

# 0: up, every daemon alive; 3: state left with a daemon gone (a killed cluster); 1: none
status() {
	local f dead=
	if [ ! -d "$S" ]; then
		ip netns list | grep -q "^$P-" && { say "namespaces $P-* without $S"; return 3; }
		return 1
	fi
	if [ ! -e "$S/ready" ]; then         # coming up, or its `up` was killed
		alive "$(cat "$S/up.pid" 2>/dev/null)" && return 0
		say "its up (pid $(cat "$S/up.pid" 2>/dev/null || echo ?)) ended before the cluster was ready"
		return 3
	fi
	for f in "$S"/pid/*; do
		[ -e "$f" ] || continue
		alive "$(cat "$f")" || dead="$dead ${f##*/}"
	done
	[ -z "$dead" ] || { say "stopped:$dead"; return 3; }
}
# a process of that pid exists (read in /proc: kill -0 would fail on another user's)
alive() { [ -n "$1" ] && [ -d "/proc/$1" ]; }

[ "${1:-}" = up ] || [ ! -f "$S/nodes" ] || NODES=$(cat "$S/nodes")
case ${1:-} in
up) up ;;
check) check ;;
load) load "${2:-}" ;;
flannel) flannel_switch "${2:-}" ;;
pod-mtu) pod_mtu "${2:-}" ;;
down) down ;;
status) status ;;
*) echo "usage: k8s/cluster.sh up|check|load ARCHIVE|flannel vxlan|host-gw|pod-mtu N|flannel|down|status" >&2; exit 2 ;;
esac
