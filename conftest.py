"""Options and fixtures shared by tests/ and scenarios/.

Every session ends by checking that the lab left nothing behind: no namespace or
link with a lab prefix, no testbed's nftables table outside its own lab, no tool or
sleeve process that was not there before, no temporary directory of a run that is over.
"""

from __future__ import annotations

import os

import pytest

WATCHED = ("iperf", "irtt", "qperf", "sleeve", "wireguard-go", "flanneld", "etcd")


def pytest_addoption(parser):
    g = parser.getgroup("overlaybench")
    g.addoption("--backend", default="netns", help="testbed backend for scenarios/ (netns)")
    g.addoption("--baseline", default="results/baseline.json", help="gate baseline for scenarios/")
    g.addoption("--update-baseline", action="store_true", help="write the baseline from this run")
    g.addoption("--advisory", action="store_true",
                help="a regression against the stored baseline is a warning, not a failure (the "
                     "baseline came from another machine); a case that failed outright still fails")
    g.addoption("--scenario", default="scenarios/quick.toml", help="the regression scenario")
    g.addoption("--repeats", type=int, default=None,
                help="the regression scenario's repeats, overridden (a shorter trend run)")
    g.addoption("--duration", type=int, default=None,
                help="the regression scenario's seconds per test, overridden")


def pytest_configure(config):
    """The standard modes are loaded once, first: a test that sorts or colours modes in
    this process then sees their declared places, whatever ran before it (a run read from
    disk brings its own, from its run.json)."""
    from harness import modes
    modes.standard()


def pytest_collection_modifyitems(config, items):
    """Every test under tests/lab/ needs root and builds a lab: it carries the `lab` marker,
    so `-m "not lab"` and `pytest tests/unit tests/scripted` leave it out."""
    import pathlib
    lab_dir = pathlib.Path(__file__).resolve().parent / "tests" / "lab"
    for item in items:
        if lab_dir in pathlib.Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.lab)


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def live_others() -> set[str]:
    """Testbeds (labs and remote testbeds' state on this machine) that another live process
    owns: a run going on beside the tests, whose objects are not the tests' leftovers."""
    from harness.testbeds.lab_state import leftovers
    return {p for p, i in leftovers().items() if i["alive"] and not _mine(i)}


def stray_processes() -> list[str]:
    """Tool and sleeve processes that belong to no live namespace but a lab's: inside a
    lab-prefixed namespace, or in a namespace whose name is gone (a deleted lab's)."""
    import re

    others = live_others()
    root = _netns_inode("/proc/1/ns/net")
    named = {}
    for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        ino = _netns_inode(f"/run/netns/{name}")
        if ino:
            named[ino] = name
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if not comm.startswith(WATCHED):     # the sleeve runs as sleeve-<build label>
            continue
        ino = _netns_inode(f"/proc/{pid}/ns/net")
        if ino is None or ino == root:
            continue
        ns = named.get(ino)
        m = re.match(r"^(ob[0-9a-f]{4})-", ns or "")
        if ns is None or (m and m.group(1) not in others):
            out.append(f"{comm}[{pid}] in {ns or 'a deleted namespace'}")
    return out


def stray_tables() -> list[str]:
    """Testbeds' nftables tables (inet <P>-h<i>, harness/net/confine.py) whose testbed has no
    live owner beside the tests, in the root namespace or any named one; a lab's own
    tables inside its namespaces go with them and are not counted."""
    import re
    import subprocess

    from harness.net.confine import TABLE_RE
    others = live_others()
    spaces = [None] + [n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])]
    out = []
    for ns in spaces:
        argv = ["nft", "list", "tables", "inet"]
        done = subprocess.run(["ip", "netns", "exec", ns, *argv] if ns else argv, capture_output=True, text=True)
        own = re.match(r"^(ob[0-9a-f]{4})-", ns or "")
        for ln in done.stdout.splitlines():
            m = TABLE_RE.match(ln.split()[-1]) if ln.strip() else None
            if m and m.group(1) not in others and not (own and own.group(1) == m.group(1)):
                out.append(f"nft table inet {m.group(0)} in {ns or 'the root namespace'}")
    return out


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


def full_size_pings(testbed, dp, placements, mtu: int) -> None:
    """Three pings of exactly `mtu` bytes with DF set, from each placement's client to its
    server across `dp`, must all come back, once each. `-w 10` waits for all three (iputils'
    `-W` stops waiting for the rest 2 × the slowest round trip after the first reply, so a
    reply held by a busy machine would count as lost); a wrong MTU loses every one."""
    from harness.run.endpoints import endpoints
    for placement in placements:
        c, s = endpoints(testbed, dp, placement)
        out = c.host.run(["ping", "-c", "3", "-i", "0.2", "-w", "10", "-M", "do", "-s", str(mtu - 28), s.addr],
                         check=False).stdout
        assert " 3 received" in out and "DUP" not in out, (placement, out)


def stray_containers() -> list[str]:
    """Docker containers a testbed made (they carry its prefix label) whose owner is gone
    or is this process; none when no dockerd answers (then none of anyone's runs)."""
    from harness.core.errors import HarnessError
    from harness.hosts import LocalHost
    from harness.testbeds.containers.docker import PREFIX_LABEL, connect
    try:
        client, _ = connect(LocalHost("local"))
    except HarnessError:
        return []
    try:
        found = client.containers.list(all=True, filters={"label": PREFIX_LABEL})
        others = live_others()
        return [f"{c.name} ({c.status})" for c in found if c.labels.get(PREFIX_LABEL, "") not in others]
    finally:
        client.close()


def leftovers_now() -> list[str]:
    """What the tests left on this machine: labs whose owner is dead or is this process,
    tool and sleeve processes in lab namespaces, and testbed containers. Empty when clean."""
    from harness.testbeds.lab_state import leftovers
    labs = {p: i for p, i in leftovers().items() if not i["alive"] or _mine(i)}
    problems = []
    if labs:
        problems.append(f"labs left behind: {labs}")
    stray = stray_processes()
    if stray:
        problems.append(f"processes left behind: {stray}")
    tables = stray_tables() if os.geteuid() == 0 else []
    if tables:
        problems.append(f"nftables tables left behind: {tables}")
    containers = stray_containers()
    if containers:
        problems.append(f"containers left behind: {containers}")
    dirs = stray_tempdirs()
    if dirs:
        problems.append(f"temporary directories left behind: {dirs}")
    if os.geteuid() == 0 and _cluster_state() == "stopped":
        problems.append("a killed local Kubernetes cluster (k8s/cluster.sh status: stopped)")
    return problems


def _mine(lab: dict) -> bool:
    """Whether a lab's owner is this process (the same pid in the same pid namespace, on this machine)."""
    from harness.hosts.local import pidns_of
    return lab["pid"] == os.getpid() and lab.get("pidns") in (None, pidns_of()) and not lab.get("foreign")


def _cluster_state() -> str | None:
    from harness.testbeds.kubernetes import local
    return local.state()


def stray_tempdirs() -> list[str]:
    """This machine's owned temporary directories (a remote testbed's artifacts, a tunnel's
    socket) whose owner is gone or is this process."""
    from harness.hosts.local import owned_tempdirs, owner_alive, pidns_of
    return sorted(str(d) for d, (pid, ns) in owned_tempdirs().items()
                  if (pid == os.getpid() and ns in (None, pidns_of())) or not owner_alive(pid, ns))


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    """After the last test of the session, whatever ran and in whatever order (random,
    `-k`, one file alone): nothing a test made is left. What is found is reported as an
    error of the session and then removed, so one leak does not fail the next session too."""
    yield
    if os.geteuid() != 0:
        return                      # without root no test could make a lab or a container
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return                      # one of several sessions at once: another's live objects are not leftovers
    import shutil

    from harness.testbeds.lab_state import leftovers, remove_lab
    problems = leftovers_now()
    for p, i in leftovers().items():
        if not i["alive"] or _mine(i):
            remove_lab(p)
    for d in stray_tempdirs():
        shutil.rmtree(d, ignore_errors=True)
    if _cluster_state() == "stopped":
        from harness.testbeds.kubernetes import local
        local.remove()
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture
def lab():
    """A fresh two-host lab, removed afterwards whatever the test did."""
    from harness.testbeds.lab import Lab
    with Lab.create() as lab:
        yield lab


@pytest.fixture(scope="module")
def dockerd():
    """A dockerd that answers: the one running, or one started here (images/dockerd.sh) and
    stopped after the module."""
    import pathlib
    import subprocess
    script = pathlib.Path(__file__).resolve().parent / "images" / "dockerd.sh"
    answered = subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    if not answered:
        subprocess.run([str(script), "up"], check=True)
    yield
    if not answered:
        subprocess.run([str(script), "down"], check=True)
