"""The kubernetes backend against a real cluster: the two-node cluster of k8s/ (flannel's
VXLAN with --kube-subnet-mgr, kube-proxy in iptables mode, containerd, runc), the tools
image imported on both nodes.

One run of every placement (host-host, host-container, container-container and the
Service path) with iperf3 and qperf must measure every case; run.json must name what the
pod network is (flannel's VXLAN device on each node, the pods' MTU 1450, the nodes'
addresses); `show`, `report`, `baseline` and `gate` work on that run; the run's namespace
is deleted when it ends. With flannel restarted on host-gw, the pod network has no tunnel
and the pods' MTU is the nodes'. `overlaybench down --kubeconfig` deletes the namespace of
a run that was killed; a ServiceAccount without the right to exec, a node the cluster
lacks, more nodes than it has and an overlay mode are each refused in one line before
anything is made; an image no node can pull is one line before any case. The
regression scenario file runs unchanged. No timing is asserted: the verdicts are about
what ran, not how fast.

Needs the binaries `make k8s-build` caches, flanneld and dockerd (for the tools image):
skipped without the binaries, so a fresh machine's `make test` builds no Kubernetes.
"""

from __future__ import annotations

import json
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

import kube_cluster as kc
from conftest import needs_root

IMAGES = kc.ROOT / "images"
pytestmark = [needs_root(), pytest.mark.lab, pytest.mark.skipif(kc.missing() is not None, reason=kc.missing() or "")]
MANAGED = "app.kubernetes.io/managed-by=overlaybench"


def ob(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=kc.ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(dockerd, tmp_path_factory):
    """The cluster up with the tools image on both nodes; its kubeconfig. Down afterwards,
    and nothing of it left."""
    kc.clear_killed()
    if kc.objects():
        pytest.skip(f"a cluster is up here already: {kc.objects()}")
    archive = tmp_path_factory.mktemp("k8s") / "tools.tar"
    built = subprocess.run([str(IMAGES / "build.sh"), "tools-archive", str(archive)], capture_output=True,
                           text=True, timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    try:
        up = kc.run("up", timeout=300)
        assert up.returncode == 0, up.stderr
        load = kc.run("load", str(archive), timeout=300)
        assert load.returncode == 0, load.stderr
        yield up.stdout.strip().splitlines()[-1]
    finally:
        down = kc.run("down", timeout=120)
        assert down.returncode == 0, down.stderr
        assert kc.objects() == []


def active(kubeconfig: str) -> set[str]:
    """The run namespaces not on their way out (one an earlier test's run deleted may still
    be Terminating, and vanish at any moment)."""
    return {n for n, phase in run_namespaces(kubeconfig).items() if phase == "Active"}


def run_namespaces(kubeconfig: str) -> dict[str, str]:
    """The run namespaces the cluster has, with their phase (Terminating while they go)."""
    got = kc.kubectl(kubeconfig, "get", "namespaces", "-l", MANAGED, "-o", "json")
    assert got.returncode == 0, got.stderr
    return {n["metadata"]["name"]: n["status"]["phase"] for n in json.loads(got.stdout)["items"]}


def test_every_placement_measured_through_flannel_and_the_service_and_the_namespace_deleted(cluster, tmp_path):
    p = ob("run", "--kubeconfig", cluster, "--modes", "native,cni", "--underlay-mtu", "1500",
           "--placements", "host-host,host-container,container-container,container-service",
           "--tests", "iperf3.tcp,qperf.tcp_lat", "--repeats", "1", "--duration", "2", "-q",
           "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = pathlib.Path(p.stdout.splitlines()[0])
    rows = [json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines()]
    failed = {r["case"]: r["error"] for r in rows if not r["ok"]}
    assert failed == {}
    got = {(r["placement"], r["test"]) for r in rows if r["metric"] in ("throughput_bps", "latency_us")}
    assert got == {(pl, t) for pl in ("host-host", "host-container", "container-container", "container-service")
                   for t in ("iperf3.tcp", "qperf.tcp_lat")}
    assert all(r["value"] > 0 for r in rows if r["metric"] in ("throughput_bps", "latency_us"))

    meta = json.loads((run_dir / "run.json").read_text())
    tb = meta["testbed"]
    assert tb["backend"] == "kubernetes" and tb["server_version"].startswith(kc.VERSION)
    assert [h["name"] for h in tb["hosts"].values()] == ["obk8s-n1", "obk8s-n2"]
    assert [h["node_ip"] for h in tb["hosts"].values()] == ["198.19.208.11", "198.19.208.12"]
    assert all(h["nic_mtu"] == 1500 and h["pod_ip"].startswith("198.19.2") and h["service_ip"].startswith("198.19.216.")
               for h in tb["hosts"].values())
    info = next(d["info"] for d in meta["datapaths"] if d["mode"] == "cni")
    assert info["pod_mtu"] == 1450
    for node in ("obk8s-n1", "obk8s-n2"):
        assert {"name": "flannel.1", "kind": "vxlan", "mtu": 1450, "id": 1, "dstport": 8472} in \
            info["encapsulation"][node]
    # deletion is asked for when the run ends: the namespace is gone or going
    assert set(run_namespaces(cluster).values()) <= {"Terminating"}

    show = ob("show", str(run_dir))
    assert show.returncode == 0 and "container-service" in show.stdout and "cni" in show.stdout, show.stderr
    report = ob("report", str(run_dir), "-o", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    assert "kubernetes" in (tmp_path / "report.html").read_text()
    base = ob("baseline", str(run_dir), "-o", str(tmp_path / "baseline.json"))
    assert base.returncode == 0, base.stderr
    gate = ob("gate", str(run_dir), "--baseline", str(tmp_path / "baseline.json"))
    assert gate.returncode == 0, gate.stdout + gate.stderr      # a run against its own baseline


def test_the_regression_scenario_file_runs_unchanged_on_the_cluster(cluster, tmp_path):
    """scenarios/quick.toml (fastdp and sleeve at underlay MTUs 1500 and 9000 on the lab):
    on the cluster, native and cni at the nodes' MTU."""
    p = ob("run", str(kc.ROOT / "scenarios" / "quick.toml"), "--kubeconfig", cluster, "--tests", "iperf3.tcp",
           "--repeats", "1", "--duration", "1", "-q", "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "instead of the scenario's modes fastdp, sleeve" in p.stderr
    assert "underlay MTU 9000 left out" in p.stderr
    rows = [json.loads(ln) for ln in (pathlib.Path(p.stdout.splitlines()[0]) / "measurements.jsonl").read_text()
            .splitlines()]
    assert {(r["mode"], r["placement"], r["underlay_mtu"], r["ok"]) for r in rows} == {
        ("native", "host-host", 1500, True), ("cni", "container-container", 1500, True)}


def test_flannel_host_gw_has_no_tunnel_and_the_nodes_mtu(cluster, tmp_path):
    switched = kc.run("flannel", "host-gw", timeout=120)
    assert switched.returncode == 0, switched.stderr
    try:
        # host-host: a host end, so hostNetwork pods read the nodes' devices
        p = ob("run", "--kubeconfig", cluster, "--modes", "native,cni", "--underlay-mtu", "1500",
               "--placements", "host-host,container-container", "--tests", "iperf3.tcp", "--repeats", "1",
               "--duration", "2", "-q", "--results", str(tmp_path))
        assert p.returncode == 0, p.stderr[-3000:]
        run_dir = pathlib.Path(p.stdout.splitlines()[0])
        rows = [json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines()]
        assert rows and all(r["ok"] for r in rows)
        (info,) = [d["info"] for d in json.loads((run_dir / "run.json").read_text())["datapaths"] if d["mode"] == "cni"]
        assert info["pod_mtu"] == 1500
        assert info["encapsulation"] == {"obk8s-n1": [], "obk8s-n2": []}
        # no DaemonSet and no device of flannel's own: the CNI is not guessed; kube-proxy answers
        assert (info["fingerprint"]["cni"], info["fingerprint"]["kube_proxy"]) == ("unknown", "iptables")
    finally:
        back = kc.run("flannel", "vxlan", timeout=120)
        assert back.returncode == 0, back.stderr


def test_a_service_account_that_may_not_exec_is_refused_before_anything_is_made(cluster, tmp_path):
    """A kubeconfig of a ServiceAccount bound to a ClusterRole with every verb the run needs
    but pods/exec: one line naming it, exit 2, no namespace made."""
    role = kc.ROOT / "tests" / "data" / "kube" / "rbac-no-exec.yaml"
    applied = kc.kubectl(cluster, "apply", "-f", str(role))
    assert applied.returncode == 0, applied.stderr
    try:
        token = kc.kubectl(cluster, "-n", "default", "create", "token", "obk8s-no-exec")
        assert token.returncode == 0, token.stderr
        server = json.loads(kc.kubectl(cluster, "config", "view", "--raw", "-o", "json").stdout)["clusters"][0]
        cfg = tmp_path / "no-exec.kubeconfig"
        cfg.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "c", "cluster": server["cluster"]}],
            "users": [{"name": "sa", "user": {"token": token.stdout.strip()}}],
            "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}))
        before = active(cluster)
        p = ob("run", "--kubeconfig", str(cfg), "--modes", "native", "--underlay-mtu", "1500", "--tests",
               "iperf3.tcp", "--repeats", "1", "--duration", "1", "-q", "--results", str(tmp_path))
        assert p.returncode == 2, p.stdout + p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "may not create pods/exec" in lines[0], p.stderr
        assert active(cluster) == before
    finally:
        kc.kubectl(cluster, "delete", "-f", str(role), "--ignore-not-found")


def test_down_deletes_the_namespace_of_a_killed_run(cluster, tmp_path):
    before = active(cluster)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--kubeconfig", cluster, "--modes",
                             "native", "--underlay-mtu", "1500", "--tests", "iperf3.tcp", "--repeats", "20",
                             "--duration", "5", "-q", "--results", str(tmp_path)],
                            cwd=kc.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        made: set[str] = set()
        while not made:                 # the run's namespace, once made (polled: no event tells us)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the run made no namespace within 120 s"
            made = active(cluster) - before
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    (name,) = made
    assert run_namespaces(cluster)[name] == "Active"         # a killed run deletes nothing
    down = ob("down", "--kubeconfig", cluster, timeout=120)
    assert down.returncode == 0, down.stderr
    assert name in down.stdout + down.stderr
    assert run_namespaces(cluster).get(name, "Terminating") == "Terminating"


@pytest.mark.parametrize("args, line", [
    (["--nodes", "obk8s-n1,obk8s-n9"], "no node named 'obk8s-n9' in the cluster (nodes: obk8s-n1, obk8s-n2)"),
    (["--hosts", "3"], "the cluster has 2 Ready, schedulable nodes (obk8s-n1, obk8s-n2); the run needs 3"),
    (["--modes", "native,fastdp"], "mode fastdp deploys an overlay onto the hosts; the kubernetes backend measures "
                                   "the cluster as found: --modes native,cni"),
])
def test_bad_input_on_the_cluster_is_one_line_before_anything_is_made(cluster, tmp_path, args, line):
    before = active(cluster)
    p = ob("run", "--kubeconfig", cluster, "--underlay-mtu", "1500", "--tests", "iperf3.tcp", "--repeats", "1",
           "--duration", "1", "-q", "--results", str(tmp_path), *args)
    assert (p.returncode, p.stderr) == (2, f"overlaybench: {line}\n")
    assert active(cluster) == before and not any(tmp_path.iterdir())


def test_an_image_the_nodes_cannot_pull_is_one_line_before_any_case(cluster, tmp_path):
    """An image from a registry that refuses the connection (the fabric's bridge address,
    a port nothing listens on: the pull fails at once and no packet leaves the cluster's
    namespaces). The image preflight ends the run before any case in one line naming the
    node, the image and the kubelet's reason (exit 2), and the run's namespace is deleted."""
    before = active(cluster)
    image = "198.19.208.1:1/overlaybench/tools:missing"
    p = ob("run", "--kubeconfig", cluster, "--modes", "native,cni", "--underlay-mtu", "1500", "--image", image,
           "--placements", "host-host,container-container", "--tests", "iperf3.tcp",
           "--repeats", "1", "--duration", "1", "-q", "--results", str(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-3000:]
    assert re.match(rf"overlaybench: image {re.escape(image)} cannot be pulled on node obk8s-n[12]: "
                    r"(ErrImagePull|ImagePullBackOff): .*connection refused", p.stderr), p.stderr
    assert not list(tmp_path.rglob("measurements.jsonl")) or not any(
        f.read_text().strip() for f in tmp_path.rglob("measurements.jsonl"))
    assert active(cluster) == before
