"""The datapath's fingerprint read through the client seam (found.pod_network on the fake
API of tests/scripted_kube.py): which objects are asked for, from the DaemonSets listed,
and what a forbidden or missing read leaves behind."""

import pathlib

import yaml

from harness.testbeds.kubernetes import found
from scripted_kube import FakeApi

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "kube" / "fingerprint"


def _fake(*names: str, denied=()) -> FakeApi:
    objects = [d for n in names for d in yaml.safe_load_all((DATA / n).read_text()) if d]
    listed: dict = {}
    for d in objects:
        if d["kind"] == "DaemonSet":
            ns = d["metadata"]["namespace"]
            images = [c["image"] for c in d["spec"]["template"]["spec"]["containers"]]
            listed.setdefault(ns, []).append({"name": d["metadata"]["name"], "images": images})
    return FakeApi(daemonsets=listed, objects=objects, denied=denied)


def test_cilium_and_kube_proxy_read_from_their_configmaps():
    api = _fake("cilium/quick-install-v1.6.0.yaml", "kube-proxy/kubeadm.yaml")
    info = found.pod_network(api, [])
    fp = info["fingerprint"]
    assert fp["summary"] == "cilium v1.6.0, vxlan" and fp["kube_proxy"] == "iptables"
    asked = [c for c in api.calls if c[0].startswith(("read_", "list_custom"))]
    assert ("read_configmap", "kube-system", "cilium-config") in asked
    assert ("read_configmap", "kube-system", "kube-proxy") in asked
    assert not [c for c in asked if c[0] == "list_custom_objects"]       # no calico: no IPPools asked for
    api.assert_clean()


def test_calico_lists_its_ippools_and_felixconfiguration():
    api = _fake("calico/calico.yaml", "calico/ippool.yaml", "calico/felixconfiguration.yaml")
    fp = found.pod_network(api, [])["fingerprint"]
    assert (fp["encapsulation"], fp["routing"]) == ("ipip", "cross-subnet")
    assert ("list_custom_objects", "projectcalico.org", "v3", "ippools") in api.calls


def test_forbidden_reads_are_named_and_nothing_is_guessed():
    api = _fake("calico/calico.yaml", denied=("list ippools", "list felixconfigurations", "get configmaps"))
    info = found.pod_network(api, [])
    fp = info["fingerprint"]
    assert fp["encapsulation"] == "ipip"           # from calico-node's env, and said so
    assert any("IPPools not read" in s for s in fp["seen"])
    assert "ippools: not listed (no such resource, or forbidden)" in fp["seen"]
    assert "mtu" not in fp


def test_aws_vpc_cni_fills_the_cni_the_names_did_not_give():
    info = found.pod_network(_fake("aws-vpc-cni/aws-k8s-cni.yaml"), [])
    assert (info["cni"], info["cni_from"]) == ("aws-vpc-cni", "fingerprint")
    assert info["fingerprint"]["mtu"] == 9001


def test_an_unknown_daemonset_stays_unknown():
    api = FakeApi(daemonsets={"kube-system": [{"name": "mynet", "images": ["reg.example/mynet:2"]}]})
    fp = found.pod_network(api, [])["fingerprint"]
    assert fp["cni"] == "unknown" and "daemonset kube-system/mynet (reg.example/mynet:2)" in fp["seen"]
    assert not [c for c in api.calls if c[0].startswith("read_")]


class _Pod:
    def __init__(self, answers: dict):
        self.answers = answers

    def run(self, argv, check=False, timeout=None):
        import types
        out = self.answers.get(" ".join(argv), "")
        return types.SimpleNamespace(ok=bool(out), stdout=out, stderr="" if out else "not scripted")


def _cilium_node():
    import types
    links = (DATA.parent / "ip_d_link_cilium_vxlan.txt").read_text()     # a node of the local cluster with Cilium
    return types.SimpleNamespace(name="n1", host=_Pod({"ip -d -o link show": links}),
                                 container=_Pod({"cat /sys/class/net/eth0/mtu": "1500\n",
                                                 # captured in that node's pod: Cilium's routes at the tunnel's MTU
                                                 "ip -o route show default":
                                                 "default via 198.19.225.180 dev eth0 mtu 1450 \n"}))


def test_a_cni_its_devices_name_is_read_from_its_configmap_without_a_daemonset():
    # Cilium's agents run as node processes (no DaemonSet), configured from cilium-config
    api = _fake("cilium/helm-native-wireguard-kpr.yaml")
    api.daemonsets = {}
    info = found.pod_network(api, [_cilium_node()])
    fp = info["fingerprint"]
    assert (info["cni"], info["cni_from"]) == ("cilium", "fingerprint")
    assert (fp["routing"], fp["encryption"], fp["kube_proxy"]) == ("native", "wireguard", "replaced by cilium")
    assert ("read_configmap", "kube-system", "cilium-config") in api.calls
    assert any("devices name cilium, no DaemonSet does" in s for s in fp["seen"])
    assert (info["pod_mtu"], info["pod_device_mtu"]) == (1450, 1500)     # what the pod sends at, and its eth0


def test_without_its_configmap_the_devices_alone_name_the_cni():
    api = FakeApi()
    info = found.pod_network(api, [_cilium_node()])
    fp = info["fingerprint"]
    assert (info["cni"], info["cni_from"]) == ("cilium", "devices")
    assert (fp["encapsulation"], fp["routing"]) == ("vxlan", "tunnel")
    assert any(s.startswith("devices of cilium on node(s) n1: cilium_vxlan (vxlan") for s in fp["seen"])
