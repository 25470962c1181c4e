# overlaybench — the README's commands. Run as root on Debian; each target installs
# what it needs that is missing, then does its job.
#
# What each installs (Debian packages, every one through scripts/apt-install.sh, so that
# none leaves a service enabled or running; the rest are built or pip-installed locally):
#   make bench       APT_BENCH, the .venv, the sleeve: what scenarios/quick.toml runs on the
#                    lab (iperf3, qperf, the kernel's VXLAN, the sleeve built with OpenSSL)
#   make setup       also APT_RUN (every test tool and mode: irtt, sockperf, iperf, etcd for
#                    flannel, cmake for AWS-LC), AWS-LC for the sleeve's AES-GCM (built from
#                    source), wireguard-tools, wireguard-go and flanneld (built with go, if any)
#   make setup-test  also APT_TEST (the report's browser, clang for the sleeve's fuzzers, sshd
#                    for the SSH tests, Prometheus for the export tests), APT_HOSTS
#                    (Docker and Vagrant hosts and the images' debootstrap), APT_IMAGE (buildah
#                    and skopeo for the tools image) and APT_REGISTRY (a registry to push it to)
#   make test        make setup-test, then the tests

PY      := .venv/bin/python
APT     := scripts/apt-install.sh
# The quick scenario's needs on the local lab (harness/testbeds/preflight.py: ip, tc, ss,
# bridge, ethtool, ping, sysctl, nft, iperf3, qperf; the sleeve's build: gcc, make,
# pkg-config, libssl-dev; git for run.json's commit; python3-venv for the .venv).
APT_BENCH := python3-venv iperf3 qperf iputils-ping iproute2 procps nftables ethtool gcc make pkg-config libssl-dev git
APT_RUN := $(APT_BENCH) iperf irtt sockperf cmake etcd-server curl
APT_TEST:= chromium clang openssh-server openssh-client sudo prometheus prometheus-pushgateway libseccomp-dev
# Daemons that the lists' packages pull in (as dependencies or recommendations): never
# installed by name, only quieted where installed (scripts/apt-install.sh --quiet), so that
# a machine set up before the helper existed is quieted too.
APT_QUIET := containerd prometheus-node-exporter prometheus-node-exporter-collectors rpcbind nfs-common \
             nfs-kernel-server avahi-daemon exim4-base smartmontools openipmi
APT_INSTALL := $(APT) $(addprefix --quiet ,$(APT_QUIET))
# Without Recommends (they name a kernel image, for the module): `wg` for the WireGuard modes.
APT_RUN_BARE := wireguard-tools
# Userspace WireGuard for mode wireguard-go, built from its Go module at a pinned version
# (Debian 12's wireguard-go predates its GSO/GRO work). Needs go; without it the mode is
# "unsupported here". Static (no cgo), so the harness can ship it to remote hosts.
WIREGUARD_GO_MODULE  := golang.zx2c4.com/wireguard
WIREGUARD_GO_VERSION := v0.0.0-20260522210424-ecfc5a8d5446
# The real Flannel for the flannel-* modes, from its Go module at a pinned version (the module
# proxy here refuses some releases and dependencies; this one builds). cgo on: its UDP
# backend's packet loop is C. Needs go; without it the flannel modes say how to get it.
FLANNEL_MODULE  := github.com/flannel-io/flannel
FLANNEL_VERSION := v0.26.7
SCENARIO ?= scenarios/quick.toml
# AWS-LC for the sleeve's AES-256-GCM (overlay/sleeve/aws-lc.sh: source pinned on PyPI), where
# the harness's local sleeve builds find it (harness/sleeve/build.py).
AWSLC_DIR := $(or $(OVERLAYBENCH_CACHE),$(HOME)/.cache/overlaybench)/aws-lc
# Vagrant hosts and Docker containers: make test and the image targets need these, make bench does not.
APT_HOSTS := debootstrap debian-archive-keyring docker.io vagrant vagrant-libvirt
# The tools image (images/tools.sh): buildah builds images/tools.Containerfile without a daemon,
# skopeo copies it into a dockerd or a registry; debootstrap makes the base where no registry serves one.
APT_IMAGE := buildah skopeo debootstrap debian-archive-keyring
# A real registry for tests/lab/test_tools_image.py (distribution, TLS and htpasswd auth).
APT_REGISTRY := docker-registry apache2-utils

.PHONY: setup setup-test bench test soak lint docs sleeve aws-lc clean down
.PHONY: wireguard-tools wireguard-go flanneld
.PHONY: dockerd-up dockerd-down images vagrant-image tools-image tools-archive
.PHONY: k8s-build k8s-cilium k8s-up k8s-tools k8s-down test-k8s

# Everything: every mode and test tool of this machine (make bench needs less).
setup: .venv/.stamp sleeve aws-lc .apt-run.stamp
setup: wireguard-tools wireguard-go flanneld

# Debian packages, only the missing ones (apt-get update only when something is missing),
# through scripts/apt-install.sh: nothing they bring stays enabled or running, and the
# units of those installed before (by an earlier Makefile) are quieted as well. Made again
# when the Makefile or the helper changes.
.apt-bench.stamp: Makefile $(APT)
	@$(APT_INSTALL) $(APT_BENCH)
	@touch $@

.apt-run.stamp: .apt-bench.stamp
	@$(APT_INSTALL) $(APT_RUN)
	@touch $@

.apt-test.stamp: .apt-run.stamp .apt-image.stamp
	@$(APT_INSTALL) $(APT_TEST) $(APT_REGISTRY)
	@touch $@

.apt-image.stamp: .apt-bench.stamp
	@$(APT_INSTALL) $(APT_IMAGE)
	@touch $@

# A dockerd or vagrant already installed from elsewhere (docker-ce, HashiCorp's vagrant) is used as it is.
# Installed here, no service starts and docker.io's units (and containerd's) are disabled: a
# dockerd on Docker's default 172.17/16 must not appear; make dockerd-up starts the lab's.
.apt-hosts.stamp: .apt-bench.stamp
	@$(APT_INSTALL) $$(for p in $(APT_HOSTS); do \
	  case $$p in docker.io) command -v dockerd >/dev/null && ! dpkg -s docker.io >/dev/null 2>&1 && continue;; \
	    vagrant|vagrant-libvirt) command -v vagrant >/dev/null && ! dpkg -s vagrant >/dev/null 2>&1 && continue;; esac; \
	  echo $$p; done)
	@touch $@

.venv/.stamp: pyproject.toml .apt-bench.stamp
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

sleeve: .apt-bench.stamp
	@if [ -f overlay/sleeve/Makefile ]; then $(MAKE) -s -C overlay/sleeve; fi

# AES-256-GCM from AWS-LC for local sleeve builds (cmake, from APT_RUN); without it the
# sleeve uses OpenSSL's (harness/sleeve/build.py).
aws-lc: .venv/.stamp .apt-run.stamp
	@PYTHON=$(PY) overlay/sleeve/aws-lc.sh $(AWSLC_DIR)

# Checked on every setup (one dpkg query), so a checkout set up before these existed gets them.
wireguard-tools:
	@$(APT) --no-install-recommends $(APT_RUN_BARE)

# wireguard-go into .venv/bin (go install names it after the module: wireguard), built only when the binary there is not the pinned version.
wireguard-go: .venv/.stamp
	@if ! command -v go >/dev/null; then \
	  echo "wireguard-go: no go here, so mode wireguard-go is unsupported here (apt-get install -y golang-go)"; \
	elif ! go version -m .venv/bin/wireguard-go 2>/dev/null | grep -q "$(WIREGUARD_GO_MODULE)	$(WIREGUARD_GO_VERSION)"; then \
	  echo "building wireguard-go $(WIREGUARD_GO_VERSION)"; \
	  tmp=$$(mktemp -d) && CGO_ENABLED=0 GOBIN=$$tmp go install $(WIREGUARD_GO_MODULE)@$(WIREGUARD_GO_VERSION) && \
	  mv $$tmp/wireguard .venv/bin/wireguard-go && rmdir $$tmp; \
	fi

# flanneld into .venv/bin, built only when the binary there is not the pinned version.
flanneld: .venv/.stamp
	@if ! command -v go >/dev/null; then \
	  echo "flanneld: no go here, so the flannel modes cannot run (apt-get install -y golang-go)"; \
	elif ! go version -m .venv/bin/flanneld 2>/dev/null | grep -q "$(FLANNEL_MODULE)	$(FLANNEL_VERSION)"; then \
	  echo "building flanneld $(FLANNEL_VERSION)"; \
	  tmp=$$(mktemp -d) && CGO_ENABLED=1 GOBIN=$$tmp go install $(FLANNEL_MODULE)@$(FLANNEL_VERSION) && \
	  mv $$tmp/flannel .venv/bin/flanneld && rmdir $$tmp; \
	fi

setup-test: setup .apt-test.stamp
setup-test: .apt-hosts.stamp

# The main job on the local lab: run the quick scenario, print its table, write a report.
# Installs only what that needs (APT_BENCH, the .venv, the sleeve); make setup the rest.
bench: .venv/.stamp sleeve
	$(PY) -m harness.cli run $(SCENARIO) --results results | tee results/.last-bench.txt
	@run=$$(grep -m1 '^results/' results/.last-bench.txt); \
	$(PY) -m harness.cli report $$run -o reports/$$(basename $$run).html

# Unit and integration tests of harness/ and overlay/ (real namespaces, real tools), after the
# import contracts of pyproject.toml (ARCHITECTURE.md, "Layers").
# A dockerd runs for them (the one started here, if none answered, is stopped afterwards).
# The sleeve's smoke test floods one mode here (AES-GCM forced, through OpenSSL):
# tests/lab/test_sleeve_flood.py floods all six modes with more checks, and
# `make -C overlay/sleeve netns` runs the smoke test's six.
test: setup-test docs
	.venv/bin/lint-imports --no-cache
	@if [ -f overlay/sleeve/Makefile ]; then FLOOD_CASES=crypto $(MAKE) -s -C overlay/sleeve test asan netns && \
	  $(MAKE) -s -C overlay/sleeve test BUILD=build/awslc AWSLC=$(AWSLC_DIR); fi
	$(MAKE) -s -C overlay/blast test asan
	@started=; images/dockerd.sh status >/dev/null || started=1; images/dockerd.sh up; \
	trap '[ -z "$$started" ] || images/dockerd.sh down' EXIT; trap 'exit 130' INT TERM; \
	$(MAKE) -s images && $(PY) -m pytest -q --durations=20 -m "not unsoaked" tests

# Prove tests that depend on timing or measurement: TESTS (pytest arguments) run N times in
# a row beside one CPU hog per CPU, with dockerd and the images up as for make test; prints
# "N passed, M failed" (rounds). Every round runs: a failure is reported, never retried.
N ?= 30
soak: setup-test
	@[ -n "$(TESTS)" ] || { echo 'make soak needs TESTS="tests/lab/test_x.py ..." (and N=rounds, default 30)'; exit 2; }
	@started=; images/dockerd.sh status >/dev/null || started=1; images/dockerd.sh up; \
	trap '[ -z "$$started" ] || images/dockerd.sh down' EXIT; trap 'exit 130' INT TERM; \
	$(MAKE) -s images && $(PY) tests/soak.py -n $(N) -- $(TESTS)

# dockerd with its bridge in the benchmark range (198.19.254.1/24), started only when none
# answers; dockerd-down stops only the one dockerd-up started.
dockerd-up: .apt-hosts.stamp
	@images/dockerd.sh up

dockerd-down:
	@images/dockerd.sh down

# Local images from one cached debootstrap of Debian bookworm (no registry needed); a no-op
# while the image carries its recipe's current hash. vagrant-image is a docker import and
# leaves dockerd running.
vagrant-image: dockerd-up
	@images/build.sh vagrant-host

# The tools image from images/tools.Containerfile with buildah (else podman, else docker): no
# daemon needed; copied into a dockerd that answers, for the docker backend.
tools-image: .apt-image.stamp
	@images/tools.sh build

# The tools image as an archive for a cluster's nodes (--image REF of the kubernetes backend).
tools-archive: .apt-image.stamp
	@images/tools.sh archive $(or $(ARCHIVE),$(or $(OVERLAYBENCH_IMAGE_CACHE),/var/cache/overlaybench)/overlaybench-tools.tar)

images: vagrant-image tools-image

# A local Kubernetes cluster, a test fixture for the kubernetes backend (k8s/): k8s-build builds
# its pieces from Go modules (pinned in k8s/versions.env and k8s/modules/) into
# ~/.cache/overlaybench/k8s/<version>/bin, each only once; k8s-up starts the cluster in network
# namespaces (two nodes, flannel and kube-proxy) and prints its kubeconfig's path last;
# k8s-tools loads the tools image into its nodes; k8s-down removes all it made. As root; the
# first build took about nine minutes on two cores.
k8s-build: .apt-test.stamp
	@k8s/build.sh >/dev/null

k8s-up: k8s-build flanneld
	@k8s/cluster.sh up

# Cilium for the local cluster (OBK8S_CNI=cilium make k8s-up): built from its Go module (about
# five minutes), with clang 19 from Debian, which compiles its datapath when the agent starts.
k8s-cilium: k8s-build
	@$(APT) --no-install-recommends clang-19 llvm-19
	@k8s/build.sh cilium >/dev/null

k8s-tools: tools-archive
	@k8s/cluster.sh load $(or $(ARCHIVE),$(or $(OVERLAYBENCH_IMAGE_CACHE),/var/cache/overlaybench)/overlaybench-tools.tar)

k8s-down:
	@k8s/cluster.sh down

# The local cluster's tests (built first where missing; make test runs them only where built).
test-k8s: k8s-build k8s-cilium flanneld setup-test
	@started=; images/dockerd.sh status >/dev/null || started=1; images/dockerd.sh up; \
	trap '[ -z "$$started" ] || images/dockerd.sh down' EXIT; trap 'exit 130' INT TERM; \
	$(PY) -m pytest -q tests/lab/test_k8s_cluster.py tests/lab/test_kubernetes_lab.py tests/lab/test_k8s_platform_lab.py \
		tests/lab/test_k8s_mtu_lab.py tests/lab/test_k8s_cilium.py

# The CI workflow, linted with actionlint (built from the Go module proxy; needs go).
# docs/ as a site (mkdocs.yml, strict: a broken link, anchor or an unlisted page fails).
docs: .venv/.stamp
	.venv/bin/mkdocs build --strict --quiet -d $(or $(SITE_DIR),site)

lint: docs
	@command -v go >/dev/null || { echo "lint needs go (apt-get install -y golang-go)"; exit 2; }
	GOBIN=$(CURDIR)/.venv/bin go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
	.venv/bin/actionlint .github/workflows/*.yml

down:
	$(PY) -m harness.cli down

clean:
	rm -rf .venv .apt-bench.stamp .apt-run.stamp .apt-test.stamp
	rm -f .apt-hosts.stamp .apt-image.stamp
	@if [ -f overlay/sleeve/Makefile ]; then $(MAKE) -s -C overlay/sleeve clean; fi
