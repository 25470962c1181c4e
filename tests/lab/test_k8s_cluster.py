"""The local Kubernetes cluster of k8s/ (the kubernetes backend's test fixture), for real.

`k8s/cluster.sh up` brings one node Ready, pause pods on the node's network and on the pod
network reach Running (`check`), and `down` leaves nothing: no process of the cluster's
binaries, no namespace, link, cgroup or mount, no state directory, and the kernel sysctls
the kubelet rewrites are as they were.

Needs the binaries `make k8s-build` caches (k8s/build.sh; minutes to build): skipped when
they are not there, so a fresh machine's `make test` builds no Kubernetes.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from conftest import needs_root

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "k8s" / "cluster.sh"
STATE = pathlib.Path("/var/lib/obk8s")
SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")


def _bin_dir() -> pathlib.Path:
    env = dict(line.split("=", 1) for line in (ROOT / "k8s" / "versions.env").read_text().splitlines()
               if line and not line.startswith("#"))
    cache = pathlib.Path(os.environ.get("OVERLAYBENCH_CACHE", pathlib.Path.home() / ".cache" / "overlaybench"))
    return cache / "k8s" / env["K8S_VERSION"] / "bin"


BIN = _bin_dir()
pytestmark = [
    needs_root(),
    pytest.mark.skipif(not all((BIN / b).exists() for b in ("kubelet", "kube-apiserver", "containerd", "etcd", "runc")),
                       reason=f"the cluster's binaries are not in {BIN} (make k8s-build)"),
]


def _sysctls() -> dict[str, str]:
    return {k: pathlib.Path("/proc/sys", *k.split(".")).read_text().strip() for k in SYSCTLS}


def _cluster_objects() -> list[str]:
    """Everything of the cluster's the machine still has, named."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found += [f"netns {n}" for n in netns if n.startswith("obk8s-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"link {ln.split(':')[1].strip()}" for ln in links.splitlines() if ": obk8s-" in ln]
    found += [f"cgroup {p}" for p in pathlib.Path("/sys/fs/cgroup").glob("*/obk8s-*")]
    mounts = pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
    found += [f"mount {ln.split()[4]}" for ln in mounts if ln.split()[4].startswith(str(STATE))]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.startswith(str(BIN)):
            found.append(f"process {pid} {exe}")
    if STATE.exists():
        found.append(f"directory {STATE}")
    return found


def _run(*args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout)


def test_one_node_up_pods_running_and_nothing_left():
    if _cluster_objects():
        pytest.skip(f"a cluster is up here already: {_cluster_objects()}")
    before = _sysctls()
    try:
        up = _run("up", timeout=300)
        assert up.returncode == 0, up.stderr
        kubeconfig = up.stdout.strip().splitlines()[-1]
        assert kubeconfig == str(STATE / "admin.kubeconfig")
        nodes = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "-o",
                                "jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion}{end}"],
                               capture_output=True, text=True, timeout=30)
        assert nodes.stdout.split() == ["obk8s-n1", "v1.34.4"], nodes.stderr
        check = _run("check", timeout=300)
        assert check.returncode == 0, check.stderr
        assert "pod obk8s-probe-host Running on obk8s-n1 at 198.19.208.11" in check.stderr
        assert "pod obk8s-probe-pod Running on obk8s-n1 at 198.19.22" in check.stderr   # the pod CIDR, 198.19.224.0/20
    finally:
        down = _run("down", timeout=120)
    assert down.returncode == 0, down.stderr
    assert _cluster_objects() == []
    assert _sysctls() == before
