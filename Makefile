# overlaybench — the README's commands. Run as root on Debian; each target installs
# what it needs that is missing, then does its job.

PY      := .venv/bin/python
APT_RUN := iperf3 qperf iputils-ping iproute2 ethtool nftables gcc make libsodium-dev pkg-config python3-venv git
APT_TEST:= chromium clang
SCENARIO ?= scenarios/quick.toml

.PHONY: setup setup-test bench test lint sleeve clean down

setup: .venv/.stamp sleeve

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
