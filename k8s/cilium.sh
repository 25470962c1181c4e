# Cilium as the local cluster's pod network (OBK8S_CNI=cilium), sourced by k8s/cluster.sh
# (which sets S, P, NODES, BIN and the addresses): one cilium-agent per node, as flanneld
# runs there, in the node's network namespace: tunnel mode (VXLAN), IPAM from the node's
# podCIDR, kube-proxy kept (no kube-proxy replacement, no socket load balancing: nothing is
# attached to a cgroup), no L7 proxy, Hubble or health endpoints. Its CRDs are applied from
# the module's own files (the operator, which would register them, is not run).
# Each agent has a mount namespace of its own, so that its BPF filesystem (--bpf-root) and
# its cgroup2 mount go with it, and so that its writes to the two host-wide sysctls it sets
# (kernel.unprivileged_bpf_disabled: 1 cannot be undone; kernel.timer_migration) land in a
# file of the run's, not the kernel's. Its state, socket and compiled programs are under
# $S/nI/cilium; the pods' cilium-cni finds its node's agent by CILIUM_SOCK, which the node's
# containerd passes on.
# shellcheck shell=bash

CILIUM_DIR=${OBK8S_CILIUM_DIR:-$(dirname "$BIN")/cilium}    # k8s/build.sh cilium: bin/, lib/bpf/, crds/
LLVM_BIN=${OBK8S_LLVM_BIN:-/usr/lib/llvm-19/bin}             # clang >= 18.1 compiles its datapath

cilium_sock() { echo "$S/n$1/cilium/run/cilium.sock"; }

cilium_check() {
	[ -x "$CILIUM_DIR/bin/cilium-agent" ] && [ -x "$BIN/cni/cilium-cni" ] ||
		die "no Cilium in $CILIUM_DIR: run k8s/build.sh cilium"
	[ -x "$LLVM_BIN/clang" ] || die "no clang at $LLVM_BIN (Cilium compiles its datapath with clang >= 18.1: apt-get install clang-19 llvm-19)"
}

cilium_prepare() {
	if [ ! -e /run/cilium ]; then mkdir /run/cilium && touch "$S/made-run-cilium"; fi
	cilium_config
	k apply --server-side -f "$CILIUM_DIR/crds/" >/dev/null
	k wait --for condition=established --timeout 60s crd --all >/dev/null
}

# Its configuration as Cilium's Helm chart leaves it: a ConfigMap kube-system/cilium-config
# (what overlaybench's fingerprint reads) whose keys the agents read as files (--config-dir).
CILIUM_CONFIG="routing-mode=tunnel tunnel-protocol=vxlan ipam=kubernetes enable-ipv4=true
enable-ipv6=false kube-proxy-replacement=false bpf-lb-sock=false identity-allocation-mode=crd
enable-l7-proxy=false enable-hubble=false enable-health-checking=false
enable-endpoint-health-checking=false enable-ipv4-masquerade=true install-iptables-rules=true
datapath-mode=veth cluster-name=$P"
cilium_config() {
	local kv d=$S/cilium-config
	mkdir -p "$d"
	for kv in $CILIUM_CONFIG; do printf %s "${kv#*=}" >"$d/${kv%%=*}"; done
	k -n kube-system create configmap cilium-config --from-file "$d" >/dev/null
}

# The agent, run by `start` in the node's network namespace: what is the node's own (its
# paths, its device) on its command line.
start_cilium() { # I
	local n=$S/n$1/cilium sysfile
	mkdir -p "$n/run" "$n/bpf" "$n/cgroupv2" "$n/sysctl"
	for sysfile in unprivileged_bpf_disabled timer_migration; do     # those this kernel has
		[ ! -e "/proc/sys/kernel/$sysfile" ] || cat "/proc/sys/kernel/$sysfile" >"$n/sysctl/$sysfile"
	done
	start "cilium-n$1" "$P-n$1" env K8S_NODE_NAME="$P-n$1" PATH="$LLVM_BIN:$PATH" \
		unshare --mount --propagation private sh -c '
			n=$1; shift
			for f in "$n"/sysctl/*; do
				[ ! -e "$f" ] || mount --bind "$f" "/proc/sys/kernel/${f##*/}"
			done
			mount --bind "$n/run" /run/cilium
			exec "$@"' sh "$n" \
		"$CILIUM_DIR/bin/cilium-agent" --config-dir "$S/cilium-config" \
		--k8s-kubeconfig-path "$S/admin.kubeconfig" --lib-dir "$CILIUM_DIR/lib" --bpf-root "$n/bpf" \
		--cgroup-root "$n/cgroupv2" --devices eth0
}

# Every agent answers on its socket, and every node's CNI config names cilium-cni.
cilium_ready() {
	local i t0=$SECONDS
	for i in $(seq 1 "$NODES"); do
		wait_for 300 "cilium-agent on $P-n$i" env CILIUM_SOCK="$(cilium_sock "$i")" \
			"$CILIUM_DIR/bin/cilium-dbg" status --brief
		cat >"$S/n$i/cni/05-cilium.conflist" <<-EOF
		{"cniVersion": "0.3.1", "name": "cilium", "plugins": [{"type": "cilium-cni"}]}
		EOF
	done
	say "cilium-agent (VXLAN) up on $NODES node(s) ($((SECONDS - t0)) s)"
}

# What the agents left outside $S: /run/cilium where up made it (the pods' cilium-cni may
# write there; each agent saw its own $S/nI/cilium/run in its place).
cilium_down() {
	[ ! -f "$S/made-run-cilium" ] || rm -rf /run/cilium
}
