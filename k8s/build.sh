#!/bin/bash
# Builds the local Kubernetes cluster's binaries from Go modules into
# $OVERLAYBENCH_CACHE/k8s/<K8S_VERSION>/bin (default ~/.cache/overlaybench), skipping each
# component whose stamp (bin/.stamp-<name>-<version>) is already there.
#   k8s/build.sh [component ...]   components: kube pause etcd containerd runc cni crictl (the
#                                  default), cilium (asked for by name)
# Prints the bin directory as its last line. Needs go, gcc and libseccomp-dev (runc).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
cache=${OVERLAYBENCH_CACHE:-$HOME/.cache/overlaybench}/k8s/$K8S_VERSION
bin=$cache/bin
mkdir -p "$bin"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

say() { echo "k8s-build: $*" >&2; }

# run_step NAME VERSION FUNCTION: runs FUNCTION unless NAME's stamp for VERSION exists; times it.
run_step() {
	local name=$1 version=$2 fn=$3 stamp=$bin/.stamp-$1-$2 t0
	if [ -e "$stamp" ]; then say "$name $version: cached"; return; fi
	t0=$(date +%s)
	say "$name $version: building"
	"$fn"
	touch "$stamp"
	say "$name $version: built in $(( $(date +%s) - t0 )) s"
}

# Each component builds in its wrapper module under k8s/modules/, whose go.mod and go.sum pin it;
# check_pin fails when versions.env names another version than the go.mod requires.
check_pin() {
	grep -qE "^(require)?[[:space:]]+$2 $3( |$)" "$here/modules/$1/go.mod" || {
		echo "k8s/build.sh: k8s/modules/$1/go.mod does not require $2 $3 (k8s/versions.env)" >&2; exit 2; }
}

build_kube() {
	check_pin kubernetes k8s.io/kubernetes "$K8S_VERSION"
	local info date minor=${K8S_VERSION#v1.} ldflags="-s -w" key val kv
	minor=${minor%%.*}
	info=$(cd "$here/modules/kubernetes" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/.*"Info": "\(.*\)",/\1/p')
	date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
	for kv in "gitVersion=$K8S_VERSION" gitMajor=1 "gitMinor=$minor" "buildDate=$date"; do
		key=${kv%%=*}; val=${kv#*=}
		ldflags+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
	done
	( cd "$here/modules/kubernetes" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl )
}

# pause: the static C program the Kubernetes pause image runs, from the same module.
build_pause() {
	local src
	src=$(cd "$here/modules/kubernetes" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/.*"Dir": "\(.*\)",/\1/p')
	gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION" -o "$bin/pause" "$src/build/pause/linux/pause.c"
	strip "$bin/pause"
}

build_etcd() {
	check_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
	( cd "$here/modules/etcd" && export CGO_ENABLED=0 &&
		go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3 &&
		go build -trimpath -ldflags "-s -w" -o "$bin/etcdctl" go.etcd.io/etcd/etcdctl/v3 )
}

build_containerd() {
	check_pin containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION"
	local m=github.com/containerd/containerd/v2 tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
	( cd "$here/modules/containerd" && export CGO_ENABLED=1 &&
		go build -trimpath -tags "$tags" -ldflags "-s -w -X $m/version.Version=${CONTAINERD_VERSION#v}" \
			-o "$bin/" $m/cmd/containerd $m/cmd/ctr &&
		go build -trimpath -tags "$tags no_grpc" -ldflags "-s -w -X $m/version.Version=${CONTAINERD_VERSION#v}" \
			-o "$bin/" $m/cmd/containerd-shim-runc-v2 )
}

build_runc() {
	check_pin runc github.com/opencontainers/runc "$RUNC_VERSION"
	( cd "$here/modules/runc" && CGO_ENABLED=1 go build -trimpath -tags "seccomp urfave_cli_no_docs" \
		-ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$bin/runc" github.com/opencontainers/runc )
}

build_cni() {
	check_pin cni github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION"
	mkdir -p "$bin/cni"
	( cd "$here/modules/cni" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/cni/" \
		github.com/containernetworking/plugins/plugins/main/bridge \
		github.com/containernetworking/plugins/plugins/main/loopback \
		github.com/containernetworking/plugins/plugins/ipam/host-local \
		github.com/containernetworking/plugins/plugins/meta/portmap )
}

build_crictl() {
	check_pin crictl sigs.k8s.io/cri-tools "$CRICTL_VERSION"
	( cd "$here/modules/crictl" && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" -o "$bin/crictl" \
		sigs.k8s.io/cri-tools/cmd/crictl )
}

# cilium (not built by default: k8s/cluster.sh runs it with OBK8S_CNI=cilium): the agent, its
# CLI (the cluster asks it whether the agent is up) and its CNI plugin, and from the same
# module the datapath's C sources the agent compiles at run time and its CRDs, into
# $cache/cilium/{bin,lib/bpf,crds} (cilium-cni beside the other plugins).
build_cilium() {
	check_pin cilium github.com/cilium/cilium "$CILIUM_VERSION"
	local m=github.com/cilium/cilium src d=$cache/cilium crds
	src=$(cd "$here/modules/cilium" && go mod download -json "$m@$CILIUM_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
	rm -rf "$d"; mkdir -p "$d/bin" "$d/lib" "$d/crds" "$bin/cni"
	( cd "$here/modules/cilium" && export CGO_ENABLED=0 &&
		go build -trimpath -ldflags "-s -w" -o "$d/bin/cilium-agent" $m/daemon &&
		go build -trimpath -ldflags "-s -w" -o "$d/bin/cilium-dbg" $m/cilium-dbg &&
		go build -trimpath -ldflags "-s -w" -o "$bin/cni/cilium-cni" $m/plugins/cilium-cni )
	cp -r "$src/bpf" "$d/lib/bpf"
	crds=$src/pkg/k8s/apis/cilium.io/client/crds
	cp "$crds"/v2/*.yaml "$crds"/v2alpha1/*.yaml "$d/crds/"
	chmod -R u+w "$d"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube pause etcd containerd runc cni crictl)
for c in "${components[@]}"; do
	case $c in
	kube) run_step kube "$K8S_VERSION" build_kube ;;
	pause) run_step pause "$K8S_VERSION" build_pause ;;
	etcd) run_step etcd "$ETCD_VERSION" build_etcd ;;
	containerd) run_step containerd "$CONTAINERD_VERSION" build_containerd ;;
	runc) run_step runc "$RUNC_VERSION" build_runc ;;
	cni) run_step cni "$CNI_PLUGINS_VERSION" build_cni ;;
	crictl) run_step crictl "$CRICTL_VERSION" build_crictl ;;
	cilium) run_step cilium "$CILIUM_VERSION" build_cilium ;;
	*) echo "k8s/build.sh: unknown component '$c' (kube pause etcd containerd runc cni crictl cilium)" >&2; exit 2 ;;
	esac
done
echo "$bin"
