"""The kubernetes backend's pure parts: node picking, the manifests a run makes, the
tunnel devices read from `ip -d link` (a real capture), the container-service placement,
and the CLI's kubernetes flags."""

import pathlib

import pytest

from harness.bed import Side
from harness.cli import main
from harness.cli.args import options, overrides
from harness.core.errors import HarnessError
from harness.core.placements import NAMES, PLACEMENTS
from harness.hosts.scripted import ScriptedHost
from harness.modes import standard
from harness.modes.base import Datapath
from harness.run.endpoints import endpoints
from harness.testbeds.kubernetes import found, nodes, specs
from scripted_kube import node

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "kube"


# ------------------------------------------------------------------ nodes
def test_picks_the_first_two_ready_schedulable_nodes_by_name():
    got = nodes.pick([node("c"), node("a", ready=False), node("b", schedulable=False), node("e"), node("d")])
    assert [n.name for n in got] == ["c", "d"]


def test_hosts_n_picks_n_nodes():
    assert [n.name for n in nodes.pick([node(x) for x in "dcba"], count=3)] == ["a", "b", "c"]


def test_all_is_every_ready_schedulable_node():
    got = nodes.pick([node("c"), node("a"), node("b", ready=False)], ("all",))
    assert [n.name for n in got] == ["a", "c"]
    with pytest.raises(HarnessError, match="the cluster has 1 Ready, schedulable node"):
        nodes.pick([node("a"), node("b", ready=False)], ("all",))


def test_named_nodes_keep_their_order():
    assert [n.name for n in nodes.pick([node("a"), node("b")], ("b", "a"))] == ["b", "a"]


@pytest.mark.parametrize("have, wanted, count, needle", [
    ([node("a"), node("b", ready=False)], (), 2, "the cluster has 1 Ready, schedulable node (a); the run needs 2"),
    ([node("a"), node("b")], (), 3, "has 2 Ready, schedulable nodes (a, b); the run needs 3"),
    ([node("a"), node("b")], ("a", "x"), 2, "no node named 'x' in the cluster (nodes: a, b)"),
    ([node("a"), node("b", ready=False)], ("a", "b"), 2, "node b is not Ready"),
    ([node("a"), node("b", schedulable=False)], ("a", "b"), 2, "node b is not schedulable"),
    ([node("a"), node("b")], ("a",), 2, "name two or more different nodes"),
    ([node("a"), node("b")], ("a", "a"), 2, "name two or more different nodes"),
])
def test_nodes_that_cannot_be_had_are_one_line(have, wanted, count, needle):
    with pytest.raises(HarnessError) as e:
        nodes.pick(have, wanted, count)
    assert needle in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ manifests
def test_namespace_carries_run_owner_and_pod_security():
    ns = specs.namespace("ob12ab", "20261128T004744Z-1a2b", 4242, "bench box.example")
    assert ns["metadata"]["name"] == "overlaybench-ob12ab"
    assert ns["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "overlaybench", "overlaybench/prefix": "ob12ab",
        "overlaybench/run": "20261128T004744Z-1a2b", "overlaybench/owner-pid": "4242",
        "overlaybench/owner-host": "bench_box.example", "pod-security.kubernetes.io/enforce": "privileged"}


@pytest.mark.parametrize("text, want", [("host-1.example", "host-1.example"), ("-x y-", "x_y"),
                                        ("a" * 80, "a" * 63), ("__", "")])
def test_label_values_are_valid(text, want):
    assert specs.label_value(text) == want


def test_host_network_pod_is_pinned_and_sleeps():
    p = specs.pod("h0", "node-a", "reg.example/ob/tools:bookworm", host_network=True)
    spec = p["spec"]
    assert p["metadata"]["name"] == "h0" and p["metadata"]["labels"]["overlaybench/side"] == "h0"
    assert spec["nodeName"] == "node-a" and spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet" and spec["restartPolicy"] == "Never"
    (c,) = spec["containers"]
    assert c["image"] == "reg.example/ob/tools:bookworm" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["command"] == ["sleep", "infinity"]
    assert "privileged" not in c["securityContext"]


def test_pod_network_pod_has_no_host_network():
    spec = specs.pod("c1", "node-b", "tools:latest", host_network=False)["spec"]
    assert spec["hostNetwork"] is False and "dnsPolicy" not in spec
    assert spec["containers"][0]["imagePullPolicy"] == "Always"


@pytest.mark.parametrize("image, policy", [("overlaybench/tools:bookworm", "IfNotPresent"), ("tools", "Always"),
                                           ("reg:5000/tools", "Always"), ("reg:5000/t@sha256:ab", "IfNotPresent")])
def test_pull_policy(image, policy):
    assert specs.pull_policy(image) == policy


def test_service_selects_the_pod_on_every_server_port():
    svc = specs.service("s1", "c1", sets=2)
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["selector"] == {"overlaybench/side": "c1"}
    ports = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
    for base in (5201, 19765, 19766, 11111):
        for k in (0, 1):
            assert {("TCP", base + 2 * k), ("UDP", base + 2 * k)} <= ports
    assert len({p["name"] for p in svc["spec"]["ports"]}) == len(svc["spec"]["ports"])


# ------------------------------------------------------------------ what is found
def test_tunnel_devices_from_a_real_ip_d_link():
    text = (DATA / "ip_d_link_flannel_vxlan.txt").read_text()
    assert found.parse_links(text) == [{"name": "flannel.1", "kind": "vxlan", "mtu": 1450, "id": 1, "dstport": 8472}]


def test_which_cni():
    ds = [{"name": "kube-proxy", "images": ["registry.k8s.io/kube-proxy:v1.34.4"]},
          {"name": "kube-flannel-ds", "images": ["ghcr.io/flannel-io/flannel:v0.26.7"]}]
    assert found.which_cni(ds) == "flannel"
    assert found.which_cni(ds[:1]) == ""


def test_the_cni_from_a_real_ip_link_when_no_daemonset_names_it():
    """flanneld run as a node daemon (the local cluster) has no DaemonSet; its device says it."""
    text = (DATA / "ip_d_link_flannel_vxlan.txt").read_text()
    assert found.device_names(text) == ["lo", "veth9c3a1b2e", "eth0", "flannel.1", "cni0"]
    assert found.cni_of_devices(found.device_names(text)) == "flannel"
    assert found.cni_of_devices(["lo", "eth0", "cni0"]) == ""          # host-gw: no device of its own
    assert found.cni_of_devices(["lo", "cilium_host", "cilium_vxlan"]) == "cilium"
    assert found.cni_of_devices(["lo", "vxlan.calico", "cali12ab"]) == "calico"


# ------------------------------------------------------------------ the service placement
def test_container_service_is_a_placement_only_cni_measures():
    assert "container-service" in NAMES and PLACEMENTS["container-service"].needs_service
    reg = standard()
    assert "container-service" in reg.get("cni").placements
    for name in ("native", "fastdp", "sleeve"):
        assert "container-service" not in reg.get(name).placements


def _sides(service_ip=""):
    return [Side(i, ScriptedHost(f"n{i}"), "eth0", f"192.0.2.{i + 1}", f"192.0.2.{i + 1}", "",
                 container=ScriptedHost(f"n{i}/c{i}"), container_ip=f"10.244.{i}.5", service_ip=service_ip)
            for i in (0, 1)]


class _Tb:
    def __init__(self, sides):
        self.sides = sides


def test_service_end_is_the_far_pod_behind_its_service_address():
    tb = _Tb(_sides("10.96.0.11"))
    client, server = endpoints(tb, Datapath("cni", "cni", 1450), "container-service")
    assert client.host.name == "n0/c0" and server.host.name == "n1/c1" and server.addr == "10.96.0.11"


def test_service_end_without_a_service_is_refused():
    with pytest.raises(HarnessError, match="no service in front of its container"):
        endpoints(_Tb(_sides()), Datapath("cni", "cni", 1450), "container-service")


# ------------------------------------------------------------------ the command line
def _args(*argv):
    from harness.cli import parser
    return parser().parse_args(["run", *argv])


def test_kubeconfig_implies_the_backend_and_fills_the_options(tmp_path):
    a = _args("--kubeconfig", "kc", "--context", "ctx", "--nodes", "a,b", "--image", "r/t:1", "--hosts", "3")
    assert overrides(a)["testbed"] == {"backend": "kubernetes"}      # --hosts is no lab host count here
    assert overrides(a)["matrix"]["modes"] == ["native", "cni"]      # the built-in scenario's, on a cluster
    assert overrides(_args("--kubeconfig", "kc", "--modes", "native"))["matrix"]["modes"] == ["native"]
    quick = str(pathlib.Path(__file__).resolve().parents[2] / "scenarios" / "quick.toml")
    assert overrides(_args(quick, "--kubeconfig", "kc"))["matrix"] == {"modes": ["native", "cni"]}   # a file's too
    assert "matrix" not in overrides(_args(quick))
    own = tmp_path / "pods.toml"
    own.write_text('[matrix]\nmodes = ["cni"]\nplacements = ["container-service"]\n')
    assert "matrix" not in overrides(_args(str(own), "--kubeconfig", "kc"))    # a cluster's modes only: kept
    o = options(a)
    assert o.kubeconfig.endswith("/kc") and o.kube_context == "ctx" and o.nodes == ("a", "b")
    assert o.image == "r/t:1" and o.node_count == 3


def test_kubernetes_flags_on_another_backend_are_one_line(capsys):
    assert main(["run", "--backend", "netns", "--nodes", "a,b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "overlaybench: --nodes is the kubernetes backend's; this is --backend netns"
