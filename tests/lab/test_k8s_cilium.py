"""The local cluster of k8s/ with Cilium as its pod network (OBK8S_CNI=cilium), for real.

`k8s/cluster.sh up` brings two nodes Ready with a cilium-agent on each (tunnel mode,
VXLAN, IPAM from the node's podCIDR, kube-proxy kept) configured from the ConfigMap
kube-system/cilium-config; pause pods reach Running on the pod network with addresses of
their node's podCIDR, and each node reaches the other node's pod through cilium_vxlan.
`down` leaves nothing: no agent, namespace, mount (each agent's BPF filesystem and cgroup2
were in a mount namespace of its own), no /run/cilium it made, and the host-wide sysctls
the agent sets (kernel.unprivileged_bpf_disabled, kernel.timer_migration) and those the
kubelet rewrites are as they were.

Needs the cluster's binaries and Cilium (k8s/build.sh cilium) with clang 19: skipped
where they are not there, so a fresh machine's `make test` builds no Cilium (make test-k8s
builds them). Nothing measured is judged; every wait is bounded far above what it takes.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

import kube_cluster as kc
from conftest import needs_root

SYSCTLS = kc.KUBELET_SYSCTLS + ("kernel.unprivileged_bpf_disabled", "kernel.timer_migration")  # and the agent's
pytestmark = [needs_root(), pytest.mark.lab,
              pytest.mark.skipif(kc.cilium_missing() is not None, reason=kc.cilium_missing() or "")]


def test_two_nodes_on_cilium_vxlan_pods_reached_across_nodes_and_nothing_left():
    kc.clear_killed()
    if kc.objects():
        pytest.skip(f"a cluster is up here already: {kc.objects()}")
    before, run_cilium = kc.sysctls(SYSCTLS), pathlib.Path("/run/cilium").exists()
    try:
        up = kc.run("up", timeout=300, env={"OBK8S_CNI": "cilium"})
        assert up.returncode == 0, up.stderr
        assert "cilium-agent (VXLAN) up on 2 node(s)" in up.stderr
        kubeconfig = up.stdout.strip().splitlines()[-1]
        items = json.loads(kc.kubectl(kubeconfig, "get", "nodes", "-o", "json").stdout)["items"]
        cidrs = {n["metadata"]["name"]: n["spec"]["podCIDR"] for n in items}
        assert sorted(cidrs) == ["obk8s-n1", "obk8s-n2"] and len(set(cidrs.values())) == 2
        config = kc.kubectl(kubeconfig, "-n", "kube-system", "get", "configmap", "cilium-config", "-o", "json")
        data = json.loads(config.stdout)["data"]
        assert (data["routing-mode"], data["tunnel-protocol"], data["kube-proxy-replacement"]) == \
            ("tunnel", "vxlan", "false")
        ciliumnodes = kc.kubectl(kubeconfig, "get", "ciliumnodes", "-o", "name")
        assert sorted(ciliumnodes.stdout.split()) == ["ciliumnode.cilium.io/obk8s-n1", "ciliumnode.cilium.io/obk8s-n2"]
        for me in cidrs:
            link = kc.in_node(me, "ip", "-d", "-o", "link", "show", "cilium_vxlan")
            assert " vxlan " in link.stdout and "dstport 8472" in link.stdout, link.stdout + link.stderr
            # the agent's BPF filesystem is in its own mount namespace, not the machine's
            assert not [ln for ln in pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
                        if "/cilium/bpf" in ln.split()[4]]
        check = kc.run("check", timeout=300)        # pause pods on every node's pod network …
        assert check.returncode == 0, check.stderr
        pods = {}
        for i in (1, 2):
            node, prefix = f"obk8s-n{i}", cidrs[f"obk8s-n{i}"].rsplit(".", 1)[0] + "."
            line = next(ln for ln in check.stderr.splitlines() if f"pod obk8s-probe-pod-n{i} Running" in ln)
            assert f" on {node} at {prefix}" in line, line
            pods[node] = line.split(" at ")[1].split()[0]
        # … deleted by check: a pod made now on n2 is reached from n1 through the tunnel
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "obk8s-cilium-probe", "namespace": "default"},
               "spec": {"nodeName": "obk8s-n2", "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.2",
                                        "imagePullPolicy": "Never"}]}}
        made = subprocess.run([str(kc.BIN / "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", "-"],
                              input=json.dumps(pod), capture_output=True, text=True, timeout=30)
        assert made.returncode == 0, made.stderr
        ready = kc.kubectl(kubeconfig, "wait", "--for", "condition=Ready", "--timeout", "120s",
                           "pod/obk8s-cilium-probe", timeout=150)
        assert ready.returncode == 0, ready.stderr
        ip = kc.kubectl(kubeconfig, "get", "pod", "obk8s-cilium-probe", "-o", "jsonpath={.status.podIP}").stdout
        assert ip.startswith(cidrs["obk8s-n2"].rsplit(".", 1)[0] + ".")
        route = kc.in_node("obk8s-n1", "ip", "-4", "route", "get", ip)
        assert "dev cilium_host" in route.stdout, route.stdout
        ping = kc.in_node("obk8s-n1", "ping", "-c", "3", "-W", "5", ip)
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
    finally:
        down = kc.run("down", timeout=120)
    assert down.returncode == 0, down.stderr
    assert kc.objects() == []
    assert pathlib.Path("/run/cilium").exists() == run_cilium
    assert kc.sysctls(SYSCTLS) == before
