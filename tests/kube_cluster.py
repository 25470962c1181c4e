"""The local cluster of k8s/ as the lab tests use it: where its binaries are, whether they
are there, and everything of it the machine still has (what `k8s/cluster.sh down` must
remove)."""

from __future__ import annotations

import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "k8s" / "cluster.sh"
STATE = pathlib.Path("/var/lib/obk8s")
NEEDED = ("kubelet", "kube-apiserver", "kube-proxy", "containerd", "etcd", "runc", "kubectl")


VERSIONS = dict(line.split("=", 1) for line in (ROOT / "k8s" / "versions.env").read_text().splitlines()
                if line and not line.startswith("#"))
VERSION = VERSIONS["K8S_VERSION"]         # the cluster's Kubernetes (v1.34.4)
BIN = pathlib.Path(os.environ.get("OVERLAYBENCH_CACHE", pathlib.Path.home() / ".cache" / "overlaybench")) \
    / "k8s" / VERSION / "bin"
CILIUM = BIN.parent / "cilium"            # k8s/build.sh cilium: the agent, its CLI, datapath sources, CRDs
# the flanneld k8s/cluster.sh runs (OBK8S_FLANNELD there too): the checkout's, built by make flanneld
FLANNELD = pathlib.Path(os.environ.get("OBK8S_FLANNELD") or ROOT / ".venv" / "bin" / "flanneld")


def missing() -> str | None:
    """Why the cluster cannot come up here (None: it can)."""
    gone = [b for b in NEEDED if not (BIN / b).exists()]
    if gone:
        return f"the cluster's binaries are not in {BIN} ({', '.join(gone)}: make k8s-build)"
    if not FLANNELD.exists():
        return f"no flanneld at {FLANNELD} (make flanneld)"
    return None


def cilium_missing() -> str | None:
    """Why the cluster cannot come up with Cilium here (None: it can)."""
    if not (CILIUM / "bin" / "cilium-agent").exists() or not (BIN / "cni" / "cilium-cni").exists():
        return f"Cilium is not built in {CILIUM} (k8s/build.sh cilium)"
    if not pathlib.Path("/usr/lib/llvm-19/bin/clang").exists():
        return "no clang 19 for Cilium's datapath (apt-get install clang-19 llvm-19)"
    return missing()


# the host-wide sysctls the kubelet rewrites (up saves them, down restores them)
KUBELET_SYSCTLS = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")


def sysctls(keys) -> dict[str, str]:
    """The values of these sysctls now."""
    return {k: pathlib.Path("/proc/sys", *k.split(".")).read_text().strip() for k in keys}


def objects() -> list[str]:
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
        if exe.startswith((str(BIN), str(CILIUM))) or (exe == str(FLANNELD.resolve()) and str(STATE) in _cmdline(pid)):
            found.append(f"process {pid} {exe}")
    if STATE.exists():
        found.append(f"directory {STATE}")
    return found


def _cmdline(pid: str) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def clear_killed() -> None:
    """A killed cluster's leftovers removed (`status` 3), as `overlaybench down` would."""
    if run("status", timeout=30).returncode == 3:
        down = run("down", timeout=180)
        assert down.returncode == 0, down.stderr


def run(*args: str, timeout: int, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def kubectl(kubeconfig: str, *args: str, timeout: int = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "kubectl"), "--kubeconfig", kubeconfig, *args], capture_output=True,
                          text=True, timeout=timeout)


def in_node(node: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", node, *cmd], capture_output=True, text=True, timeout=30)
