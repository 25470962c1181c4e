# The local cluster's files, sourced by k8s/cluster.sh (which sets S, P, NODES, the addresses
# and versions): certificates and kubeconfigs, the pause image's archive, each daemon's
# configuration, the nodes' CNI configs, and the cgroups each kubelet is rooted in.
# shellcheck shell=bash

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
	[plugins.'io.containerd.cri.v1.images'.registry]
	  config_path = "$S/certs.d"
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
