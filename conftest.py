"""Options and fixtures shared by tests/ and scenarios/.

Every session ends by checking that the lab left nothing behind: no namespace or
link with a lab prefix, no tool or sleeve process that was not there before.
"""

from __future__ import annotations

import os
import subprocess

import pytest

WATCHED = ("iperf3", "qperf", "sleeve")


def pytest_addoption(parser):
    g = parser.getgroup("overlaybench")
    g.addoption("--backend", default="netns", help="testbed backend for scenarios/ (netns)")
    g.addoption("--baseline", default="results/baseline.json", help="gate baseline for scenarios/")
    g.addoption("--update-baseline", action="store_true", help="write the baseline from this run")
    g.addoption("--scenario", default="scenarios/quick.toml", help="the regression scenario")


def _our_procs() -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,comm="], capture_output=True, text=True).stdout
    return {int(pid) for pid, _, comm in (ln.strip().partition(" ") for ln in out.splitlines())
            if comm.strip() in WATCHED}


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    before = _our_procs()
    yield
    from harness.lab import leftovers
    labs = {p: i for p, i in leftovers().items() if not i["alive"] or i["pid"] == os.getpid()}
    stray = _our_procs() - before
    problems = []
    if labs:
        problems.append(f"labs left behind: {labs}")
    if stray:
        problems.append(f"processes left behind: {sorted(stray)}")
    if problems:
        from harness.lab import remove_lab
        for p in labs:
            remove_lab(p)
        pytest.fail("; ".join(problems))


@pytest.fixture
def lab():
    """A fresh two-host lab, removed afterwards whatever the test did."""
    from harness.lab import Lab
    with Lab.create() as lab:
        yield lab
