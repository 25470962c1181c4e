"""The MTU doctor on the local cluster of k8s/ (two nodes, flannel's VXLAN backend, the tools
image of images/tools.sh loaded into both nodes' containerd):

- the pod network as configured (flanneld's MTU, 1450 on a 1500 underlay): every pod-to-pod
  path, both ways, `ok`: the DF ping, the DF UDP probe and the TCP MSS all find 1450 to the
  byte, which is the nodes' path MTU (1500, bisected between hostNetwork pods) less VXLAN's
  50 read off the cluster's fingerprint; exit 0;
- the pods' MTU raised past that (1500, as a CNI config's "mtu" that overrides flanneld's
  would: `k8s/cluster.sh pod-mtu 1500`): every pod-to-pod path `too big`, its path MTU still
  1450 (the node answers "fragmentation needed"), the fix 1450 in flannel's CNI config;
  exit 1.

The DF probes run in pods Pod Security "restricted" admits: non-root, no capability, ping
through an ICMP datagram socket its group may open (net.ipv4.ping_group_range). No timing
is asserted: path MTUs and verdicts are sizes. Needs the binaries `make k8s-build` caches,
flanneld and buildah (make setup-test): skipped without them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import kube_cluster as kc
from conftest import needs_root

# unsoaked: make test leaves it out (make test-k8s runs it) until its 30 rounds under load
pytestmark = [needs_root(), pytest.mark.lab, pytest.mark.unsoaked,
              pytest.mark.skipif(kc.missing() is not None, reason=kc.missing() or "")]
TOOLS = kc.ROOT / "images" / "tools.sh"


def ob(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=kc.ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(kubeconfig, image): two nodes up with the tools image on both; down afterwards, and
    nothing of it left."""
    if not shutil.which("buildah"):
        pytest.skip("not installed: buildah (make setup-test installs it)")
    kc.clear_killed()
    if kc.objects():
        pytest.skip(f"a cluster is up here already: {kc.objects()}")
    archive = tmp_path_factory.mktemp("k8s-mtu") / "tools.tar"
    built = subprocess.run([str(TOOLS), "archive", str(archive)], capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    image = subprocess.run([str(TOOLS), "name"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        up = kc.run("up", timeout=300)
        assert up.returncode == 0, up.stderr
        load = kc.run("load", str(archive), timeout=300)
        assert load.returncode == 0, load.stderr
        yield up.stdout.strip().splitlines()[-1], image
    finally:
        down = kc.run("down", timeout=180)
        assert down.returncode == 0, down.stderr
        assert kc.objects() == []


def doctor(cluster) -> tuple[int, list[dict], str]:
    kubeconfig, image = cluster
    p = ob("mtu", "--backend", "kubernetes", "--kubeconfig", kubeconfig, "--image", image, "--modes", "cni",
           "--format", "json", "-q")
    assert p.returncode in (0, 1), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout)["paths"], p.stderr


def by_mode(paths: list[dict]) -> tuple[list[dict], list[dict]]:
    native = [p for p in paths if p["mode"] == "native"]
    cni = [p for p in paths if p["mode"] == "cni"]
    assert {(p["src"], p["dst"]) for p in cni} == {("obk8s-n1", "obk8s-n2"), ("obk8s-n2", "obk8s-n1")}, paths
    return native, cni


def test_flannel_as_configured_is_ok_to_the_byte(cluster):
    rc, paths, err = doctor(cluster)
    native, cni = by_mode(paths)
    assert [p["path_mtu"] for p in native] == [1500, 1500] and all(p["verdict"] == "ok" for p in native), native
    for p in cni:
        assert p["verdict"] == "ok", p
        assert (p["overhead"], p["expected_mtu"], p["underlay_path_mtu"]) == (50, 1450, 1500), p
        assert p["src_dev_mtu"] == p["dst_dev_mtu"] == p["path_mtu"] == 1450, p
        assert p["udp_path_mtu"] == 1450 and not p.get("udp_error"), p          # python3 in the image
        assert p["tcp_mtu"] == 1450 and p["throughput_bps"] > 0, p
        assert p["cni"] == "flannel" and p["datapath"].startswith("cni (flannel"), p
    assert rc == 0, err[-2000:]


def test_a_pod_mtu_past_the_tunnels_is_too_big_with_flannels_fix(cluster):
    raised = kc.run("pod-mtu", "1500", timeout=60)
    assert raised.returncode == 0, raised.stderr
    try:
        rc, paths, _err = doctor(cluster)
    finally:
        back = kc.run("pod-mtu", "flannel", timeout=60)
        assert back.returncode == 0, back.stderr
    _native, cni = by_mode(paths)
    for p in cni:
        assert p["verdict"] == "too big", p
        assert p["src_dev_mtu"] == p["dst_dev_mtu"] == 1500 and p["path_mtu"] == 1450, p
        assert p["fix_mtu"] == 1450 and "cni-conf.json" in p["fix"], p
        assert "the ends send 1500 bytes, the underlay carries 1450 after 50 bytes" in p["why"], p
    assert rc == 1
