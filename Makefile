# overlaybench — the README's commands. Run as root on Debian; each target installs
# what it needs that is missing, then does its job.

PY      := .venv/bin/python
APT_RUN := iperf3 qperf iputils-ping iproute2 ethtool nftables gcc make libssl-dev pkg-config python3-venv
APT_TEST:= chromium clang openssh-server openssh-client sudo
# Without Recommends (they name a kernel image, for the module): `wg` for the WireGuard modes.
APT_RUN_BARE := wireguard-tools
# Userspace WireGuard for mode wireguard-go, built from its Go module at a pinned version
# (Debian 12's wireguard-go predates its GSO/GRO work). Needs go; without it the mode is
# "unsupported here". Static (no cgo), so the harness can ship it to remote hosts.
WIREGUARD_GO_MODULE  := golang.zx2c4.com/wireguard
WIREGUARD_GO_VERSION := v0.0.0-20260522210424-ecfc5a8d5446
SCENARIO ?= scenarios/quick.toml

.PHONY: setup setup-test bench test lint sleeve clean down
.PHONY: wireguard-tools wireguard-go

setup: .venv/.stamp sleeve
setup: wireguard-tools wireguard-go

# Debian packages, only the missing ones (apt-get update only when something is missing).
.apt-run.stamp:
	@missing=$$(for p in $(APT_RUN); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@touch $@

.apt-test.stamp: .apt-run.stamp
	@missing=$$(for p in $(APT_TEST); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@touch $@

.venv/.stamp: pyproject.toml .apt-run.stamp
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

sleeve: .apt-run.stamp
	@if [ -f overlay/sleeve/Makefile ]; then $(MAKE) -s -C overlay/sleeve; fi

# Checked on every setup (one dpkg query), so a checkout set up before these existed gets them.
wireguard-tools:
	@missing=$$(for p in $(APT_RUN_BARE); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# wireguard-go into .venv/bin (go install names it after the module: wireguard), built only when the binary there is not the pinned version.
wireguard-go: .venv/.stamp
	@if ! command -v go >/dev/null; then \
	  echo "wireguard-go: no go here, so mode wireguard-go is unsupported here (apt-get install -y golang-go)"; \
	elif ! go version -m .venv/bin/wireguard-go 2>/dev/null | grep -q "$(WIREGUARD_GO_MODULE)	$(WIREGUARD_GO_VERSION)"; then \
	  echo "building wireguard-go $(WIREGUARD_GO_VERSION)"; \
	  tmp=$$(mktemp -d) && CGO_ENABLED=0 GOBIN=$$tmp go install $(WIREGUARD_GO_MODULE)@$(WIREGUARD_GO_VERSION) && \
	  mv $$tmp/wireguard .venv/bin/wireguard-go && rmdir $$tmp; \
	fi

setup-test: setup .apt-test.stamp

# The main job on the local lab: run the quick scenario, print its table, write a report.
bench: setup
	$(PY) -m harness.cli run $(SCENARIO) --results results | tee results/.last-bench.txt
	@run=$$(grep -m1 '^results/' results/.last-bench.txt); \
	$(PY) -m harness.cli report $$run -o reports/$$(basename $$run).html

# Unit and integration tests of harness/ and overlay/ (real namespaces, real tools).
test: setup-test
	@if [ -f overlay/sleeve/Makefile ]; then $(MAKE) -s -C overlay/sleeve test asan netns; fi
	$(PY) -m pytest -q tests

# The CI workflow, linted with actionlint (built from the Go module proxy; needs go).
lint:
	@command -v go >/dev/null || { echo "lint needs go (apt-get install -y golang-go)"; exit 2; }
	GOBIN=$(CURDIR)/.venv/bin go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
	.venv/bin/actionlint .github/workflows/*.yml

down:
	$(PY) -m harness.cli down

clean:
	rm -rf .venv .apt-run.stamp .apt-test.stamp
	@if [ -f overlay/sleeve/Makefile ]; then $(MAKE) -s -C overlay/sleeve clean; fi
