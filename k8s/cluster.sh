#!/bin/bash
# A local Kubernetes cluster in network namespaces of its own, from the binaries k8s/build.sh
# caches. Run as root.
#   k8s/cluster.sh up      start it; prints the admin kubeconfig's path as its last line
#   k8s/cluster.sh check   pause pods, on the node's network and on the pod network, must reach
#                          Running on every node (then they are deleted)
#   k8s/cluster.sh flannel B  restart flanneld on every node with backend B (vxlan, host-gw):
#                          the old backend's device and routes removed, the CNI config at the
#                          new MTU (pods made afterwards get it)
#   k8s/cluster.sh load F  import the image archive F (images/build.sh tools-archive) into
#                          every node's containerd
#   k8s/cluster.sh down    remove every process, mount, cgroup, namespace, sysctl change and file
#   k8s/cluster.sh status  exit 0: a cluster is up (every daemon it started runs); 3: one was
#                          killed or stopped (its state is left: down removes it); 1: none
#
# Layout (every name starts with obk8s):
#   netns obk8s-fab   the fabric: bridge obk8s-br 198.19.208.1/24, etcd, kube-apiserver
#                     (:6443), kube-controller-manager, kube-scheduler; reached from the root
#                     namespace over veth obk8s-api (198.19.209.1/30 <-> 198.19.209.2/30)
#   netns obk8s-nI    node I (198.19.208.1I/24 on eth0, a port of the bridge): containerd
#                     (own root, state, socket, runc root; cgroupfs) and a kubelet with
#                     cgroupRoot /obk8s-nI in every cgroup v1 hierarchy
#   pods 198.19.224.0/20 (a /24 per node), services 198.19.216.0/24
# The pod network (OBK8S_CNI): flannel (default) runs the project's flanneld on every node with
# --kube-subnet-mgr (its lease is the node's podCIDR; backend OBK8S_FLANNEL_BACKEND, vxlan by
# default, or host-gw), and the node's CNI config is the one flannel's CNI plugin would hand
# to its delegate: a bridge with host-local addresses from the lease, at flanneld's MTU.
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

# ---- certificates (openssl, EC P-256, one CA) ----
cert() { # NAME CN ORG [SAN]
	local name=$1 cn=$2 org=$3 san=${4:-} d=$S/pki subj
	subj="/CN=$cn"; [ -z "$org" ] || subj="/O=$org$subj"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/$name.key" 2>/dev/null
	openssl req -new -key "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[ -z "$san" ] || echo "subjectAltName=$san"
	} >"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 30 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
	rm -f "$d/$name.csr" "$d/$name.ext"
}

kubeconfig() { # FILE SERVER CERTNAME
	local ca crt key
	ca=$(base64 -w0 "$S/pki/ca.crt"); crt=$(base64 -w0 "$S/pki/$3.crt"); key=$(base64 -w0 "$S/pki/$3.key")
	cat >"$1" <<-EOF
	apiVersion: v1
	kind: Config
	clusters:
	- name: $P
	  cluster: {server: "https://$2:6443", certificate-authority-data: $ca}
	users:
	- name: $3
	  user: {client-certificate-data: $crt, client-key-data: $key}
	contexts:
	- name: $P
	  context: {cluster: $P, user: $3}
	current-context: $P
	EOF
	chmod 600 "$1"
}

make_pki() {
	local d=$S/pki i
	mkdir -p "$d"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/ca.key" -subj "/CN=$P-ca" -days 30 -out "$d/ca.crt" 2>/dev/null
	cert apiserver kube-apiserver "" "IP:$API_IP,IP:$API_OUTER,IP:127.0.0.1,IP:${SERVICE_CIDR%.0/24}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
	cert admin $P-admin system:masters
	cert controller-manager system:kube-controller-manager ""
	cert scheduler system:kube-scheduler ""
	for i in $(seq 1 "$NODES"); do cert "node-$i" "system:node:$P-n$i" system:nodes; done
	cert kube-proxy system:kube-proxy ""      # bound to system:node-proxier by default
	cert flannel $P-flannel system:masters    # flanneld patches its node's annotations and status
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/sa.key" 2>/dev/null
	openssl ec -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	kubeconfig "$S/admin.kubeconfig" "$API_OUTER" admin
	kubeconfig "$S/controller-manager.kubeconfig" 127.0.0.1 controller-manager
	kubeconfig "$S/scheduler.kubeconfig" 127.0.0.1 scheduler
	for i in $(seq 1 "$NODES"); do kubeconfig "$S/n$i/kubelet.kubeconfig" "$API_IP" "node-$i"; done
	kubeconfig "$S/kube-proxy.kubeconfig" "$API_IP" kube-proxy
	kubeconfig "$S/flannel.kubeconfig" "$API_IP" flannel
}

# ---- the pause image: an OCI archive of one uncompressed layer holding the static pause ----
pause_archive() { # OUT
	local w=$S/oci l d cfg man sz csz msz
	rm -rf "$w"; mkdir -p "$w/rootfs" "$w/layout/blobs/sha256"
	cp "$BIN/pause" "$w/rootfs/pause"
	tar -C "$w/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" pause
	l=$(sha256sum "$w/layer.tar" | cut -d' ' -f1); sz=$(stat -c %s "$w/layer.tar")
	mv "$w/layer.tar" "$w/layout/blobs/sha256/$l"
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$l" >"$w/config.json"
	cfg=$(sha256sum "$w/config.json" | cut -d' ' -f1); csz=$(stat -c %s "$w/config.json")
	mv "$w/config.json" "$w/layout/blobs/sha256/$cfg"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
		"$cfg" "$csz" "$l" "$sz" >"$w/manifest.json"
	man=$(sha256sum "$w/manifest.json" | cut -d' ' -f1); msz=$(stat -c %s "$w/manifest.json")
	mv "$w/manifest.json" "$w/layout/blobs/sha256/$man"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$man" "$msz" "$PAUSE_IMAGE" "${PAUSE_IMAGE##*:}" >"$w/layout/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$w/layout/oci-layout"
	tar -C "$w/layout" -cf "$1" .
	rm -rf "$w"
}

# ---- configuration files ----
containerd_config() { # I
	local n=$S/n$1
	cat >"$n/containerd.toml" <<-EOF
	version = 3
	root = "$n/containerd/root"
	state = "$n/containerd/state"
	oom_score = 0
	[grpc]
	  address = "$n/containerd.sock"
	[ttrpc]
	  address = "$n/containerd.sock.ttrpc"
	[plugins.'io.containerd.internal.v1.opt']
	  path = "$n/containerd/opt"
	[plugins.'io.containerd.nri.v1.nri']
	  disable = true
	[plugins.'io.containerd.cri.v1.images'.pinned_images]
	  sandbox = "$PAUSE_IMAGE"
	[plugins.'io.containerd.cri.v1.runtime']
	  restrict_oom_score_adj = true
	  netns_mounts_under_state_dir = true
	  cdi_spec_dirs = []
	[plugins.'io.containerd.cri.v1.runtime'.cni]
	  bin_dirs = ["$BIN/cni"]
	  conf_dir = "$n/cni"
	[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
	  runtime_type = "io.containerd.runc.v2"
	[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
	  BinaryName = "$BIN/runc"
	  Root = "$n/runc"
	  SystemdCgroup = false
	EOF
}

kubelet_config() { # I
	local n=$S/n$1
	cat >"$n/kubelet.yaml" <<-EOF
	apiVersion: kubelet.config.k8s.io/v1beta1
	kind: KubeletConfiguration
	address: $(node_ip "$1")
	port: 10250
	readOnlyPort: 0
	healthzBindAddress: 127.0.0.1
	healthzPort: 10248
	authentication:
	  anonymous: {enabled: false}
	  webhook: {enabled: false}
	  x509: {clientCAFile: "$S/pki/ca.crt"}
	authorization: {mode: AlwaysAllow}
	cgroupDriver: cgroupfs
	cgroupRoot: /$P-n$1
	cgroupsPerQOS: true
	containerRuntimeEndpoint: unix://$n/containerd.sock
	podLogsDir: $n/pod-logs
	failSwapOn: false
	oomScoreAdj: 0
	protectKernelDefaults: false
	clusterDomain: cluster.local
	evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
	imageGCHighThresholdPercent: 100
	imageGCLowThresholdPercent: 99
	EOF
}

kube_proxy_config() { # I
	cat >"$S/n$1/kube-proxy.yaml" <<-EOF
	apiVersion: kubeproxy.config.k8s.io/v1alpha1
	kind: KubeProxyConfiguration
	clientConnection: {kubeconfig: "$S/kube-proxy.kubeconfig"}
	mode: iptables
	clusterCIDR: $POD_CIDR
	hostnameOverride: $P-n$1
	healthzBindAddress: 127.0.0.1:10256
	metricsBindAddress: 127.0.0.1:10249
	nodePortAddresses: [primary]
	iptables: {localhostNodePorts: false}
	conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
	EOF
}

# ---- flannel: one flanneld per node, its lease the node's podCIDR ----
flannel_net_config() {
	printf '{"Network": "%s", "SubnetLen": 24, "Backend": {"Type": "%s"}}\n' "$POD_CIDR" "$FLANNEL_BACKEND" \
		>"$S/flannel-net.json"
	echo "$FLANNEL_BACKEND" >"$S/flannel-backend"
}

start_flanneld() { # I
	mkdir -p "$S/n$1/flannel"
	start "flanneld-n$1" "$P-n$1" env NODE_NAME="$P-n$1" "$FLANNELD" --kube-subnet-mgr \
		--kubeconfig-file "$S/flannel.kubeconfig" --net-config-path "$S/flannel-net.json" \
		--subnet-file "$S/n$1/flannel/subnet.env" --iface eth0
}

# Every node's subnet file written, and its CNI config at flanneld's MTU.
flannel_ready() {
	local i t0=$SECONDS
	for i in $(seq 1 "$NODES"); do
		wait_for 60 "flanneld on $P-n$i" test -s "$S/n$i/flannel/subnet.env"
		cni_config "$i" "$(node_cidr "$i")" "$(. "$S/n$i/flannel/subnet.env"; echo "$FLANNEL_MTU")"
	done
	say "flanneld ($FLANNEL_BACKEND) up on $NODES node(s) ($((SECONDS - t0)) s)"
}

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
dead() { ! kill -0 "$1" 2>/dev/null; }

# ---- cgroups: /obk8s-nI in every v1 hierarchy (cpuset needs cpus and mems before use) ----
v1_hierarchies() {
	local h
	for h in /sys/fs/cgroup/*; do
		[ "$(stat -f -c %T "$h" 2>/dev/null)" = cgroupfs ] && echo "$h"
	done
}

make_cgroups() { # I
	local h g
	for h in $(v1_hierarchies); do
		g=$h/$P-n$1
		mkdir -p "$g"
		if [ -e "$h/cpuset.cpus" ]; then
			cat "$h/cpuset.cpus" >"$g/cpuset.cpus"
			cat "$h/cpuset.mems" >"$g/cpuset.mems"
		fi
	done
}

# ---- up ----
up() {
	[ -x "$BIN/kubelet" ] || die "no binaries in $BIN: run make k8s-build (k8s/build.sh)"
	[ ! -e "$S" ] || die "$S exists: a cluster is up or was killed; run k8s/cluster.sh down first"
	ip netns list | grep -q "^$P-" && die "namespaces $P-* exist: run k8s/cluster.sh down first"
	case $CNI in
	flannel) [ -x "$FLANNELD" ] || die "no flanneld at $FLANNELD: run make flanneld" ;;
	bridge) [ "$NODES" = 1 ] || die "OBK8S_CNI=bridge routes no pod between nodes: use it with OBK8S_NODES=1" ;;
	*) die "OBK8S_CNI=$CNI: flannel or bridge" ;;
	esac
	local t0=$SECONDS i n
	trap 'say "up failed: removing the cluster; its logs are in ${OBK8S_KEEP_LOGS:=/tmp/$P-failed-logs}"; down' EXIT
	mkdir -p "$S/log" "$S/pid"
	echo "$NODES" >"$S/nodes"
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
		start "containerd-n$i" "$P-n$i" containerd --config "$n/containerd.toml"
		wait_for 60 "containerd-n$i" ctr --address "$n/containerd.sock" version
		ctr --address "$n/containerd.sock" -n k8s.io images import "$S/pause-oci.tar" 2>&1 >/dev/null | quiet >&2
		kubelet_config "$i"
		make_cgroups "$i"
		start "kubelet-n$i" "$P-n$i" kubelet --config "$n/kubelet.yaml" \
			--kubeconfig "$n/kubelet.kubeconfig" --root-dir "$n/kubelet" --cert-dir "$n/kubelet/pki" \
			--hostname-override "$P-n$i" --node-ip "$(node_ip "$i")" --v 1
	done
	[ "$CNI" != flannel ] || flannel_net_config
	for i in $(seq 1 "$NODES"); do
		wait_for 120 "node $P-n$i's pod CIDR" node_cidr "$i"
		case $CNI in
		flannel)
			start_flanneld "$i" ;;
		bridge) cni_config "$i" "$(node_cidr "$i")" 1500 ;;
		esac
		kube_proxy_config "$i"
		start "kube-proxy-n$i" "$P-n$i" kube-proxy --config "$S/n$i/kube-proxy.yaml"
	done
	[ "$CNI" != flannel ] || flannel_ready
	for i in $(seq 1 "$NODES"); do
		wait_for 60 "kube-proxy on $P-n$i" nsenter --net=/run/netns/$P-n$i curl -fsS http://127.0.0.1:10256/healthz
	done
	for i in $(seq 1 "$NODES"); do
		wait_for 120 "node $P-n$i Ready" node_ready "$i"
	done
	say "$NODES node(s) Ready ($((SECONDS - t0)) s)"
	trap - EXIT
	echo "$S/admin.kubeconfig"
}

k() { kubectl --kubeconfig "$S/admin.kubeconfig" "$@"; }
node_cidr() { local c; c=$(k get node "$P-n$1" -o 'jsonpath={.spec.podCIDR}'); [ -n "$c" ] && echo "$c"; }
node_ready() {
	[ "$(k get node "$P-n$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# The node's pod network: a bridge at MTU with host-local addresses from the node's pod CIDR
# (with flannel, the lease flanneld wrote: the same /24), and a default route through the
# bridge, where flanneld's routes lead to the other nodes (containerd picks the file up when
# it appears).
cni_config() { # I CIDR MTU
	cat >"$S/n$1/cni/10-$P.conflist" <<-EOF
	{"cniVersion": "1.0.0", "name": "$P", "plugins": [
	  {"type": "bridge", "bridge": "$P-cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true, "mtu": $3,
	   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$2"}]],
	            "dataDir": "$S/n$1/cni-ipam", "routes": [{"dst": "0.0.0.0/0"}]}},
	  {"type": "portmap", "capabilities": {"portMappings": true}}
	]}
	EOF
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
	for f in "$S"/pid/*; do
		[ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null || dead="$dead ${f##*/}"
	done
	[ -z "$dead" ] || { say "stopped:$dead"; return 3; }
}

[ "${1:-}" = up ] || [ ! -f "$S/nodes" ] || NODES=$(cat "$S/nodes")
case ${1:-} in
up) up ;;
check) check ;;
load) load "${2:-}" ;;
flannel) flannel_switch "${2:-}" ;;
down) down ;;
status) status ;;
*) echo "usage: k8s/cluster.sh up|check|load ARCHIVE|flannel vxlan|host-gw|down|status" >&2; exit 2 ;;
esac
