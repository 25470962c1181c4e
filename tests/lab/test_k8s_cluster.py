"""The local Kubernetes cluster of k8s/ (the kubernetes backend's test fixture), for real.

`k8s/cluster.sh up` brings two nodes Ready with flannel (vxlan, --kube-subnet-mgr) and
kube-proxy; pause pods on each node's network and on the pod network reach Running
(`check`); and `down` leaves nothing: no process of the cluster's binaries or its
flanneld, no namespace, link, cgroup or mount, no state directory, and the kernel sysctls
the kubelet rewrites are as they were.

Needs the binaries `make k8s-build` caches (k8s/build.sh; minutes to build) and flanneld:
skipped when they are not there, so a fresh machine's `make test` builds no Kubernetes.
"""

from __future__ import annotations

import json

import pytest

import kube_cluster as kc
from conftest import needs_root

pytestmark = [needs_root(), pytest.mark.skipif(kc.missing() is not None, reason=kc.missing() or "")]


def test_two_nodes_flannel_and_kube_proxy_up_pods_running_and_nothing_left():
    kc.clear_killed()
    if kc.objects():
        pytest.skip(f"a cluster is up here already: {kc.objects()}")
    before = kc.sysctls(kc.KUBELET_SYSCTLS)
    try:
        up = kc.run("up", timeout=300)
        assert up.returncode == 0, up.stderr
        kubeconfig = up.stdout.strip().splitlines()[-1]
        assert kubeconfig == str(kc.STATE / "admin.kubeconfig")
        nodes = kc.kubectl(kubeconfig, "get", "nodes", "-o", "json")
        items = json.loads(nodes.stdout)["items"]
        assert [(n["metadata"]["name"], n["status"]["nodeInfo"]["kubeletVersion"]) for n in items] == \
            [("obk8s-n1", kc.VERSION), ("obk8s-n2", kc.VERSION)]
        cidrs = {n["metadata"]["name"]: n["spec"]["podCIDR"] for n in items}
        assert len(set(cidrs.values())) == 2
        for n in items:
            # flanneld took the node's podCIDR as its lease, and announced its VTEP on the node
            assert "flannel.alpha.coreos.com/backend-type" in n["metadata"]["annotations"]
            assert n["metadata"]["annotations"]["flannel.alpha.coreos.com/backend-type"] == "vxlan"
        for me, peer in (("obk8s-n1", "obk8s-n2"), ("obk8s-n2", "obk8s-n1")):
            link = kc.in_node(me, "ip", "-d", "-o", "link", "show", "flannel.1")
            assert " vxlan id 1 " in link.stdout and "dstport 8472" in link.stdout, link.stdout + link.stderr
            route = kc.in_node(me, "ip", "-4", "route", "show", cidrs[peer])
            assert "dev flannel.1" in route.stdout, route.stdout
            env = (kc.STATE / f"n{me[-1]}" / "flannel" / "subnet.env").read_text()
            assert "FLANNEL_MTU=1450" in env and f"FLANNEL_SUBNET={cidrs[me].rsplit('.', 1)[0]}.1/24" in env
            chains = kc.in_node(me, "iptables", "-t", "nat", "-S", "KUBE-SERVICES")
            assert chains.returncode == 0 and "default/kubernetes:https" in chains.stdout, chains.stderr
        check = kc.run("check", timeout=300)
        assert check.returncode == 0, check.stderr
        for i in (1, 2):
            node, prefix = f"obk8s-n{i}", cidrs[f"obk8s-n{i}"].rsplit(".", 1)[0] + "."
            assert f"pod obk8s-probe-host-n{i} Running on {node} at 198.19.208.1{i} " in check.stderr
            assert f"pod obk8s-probe-pod-n{i} Running on {node} at {prefix}" in check.stderr
    finally:
        down = kc.run("down", timeout=120)
    assert down.returncode == 0, down.stderr
    assert kc.objects() == []
    assert kc.sysctls(kc.KUBELET_SYSCTLS) == before
