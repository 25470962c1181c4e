"""The datapath's fingerprint (harness/testbeds/kubernetes/fingerprint.py) over objects
captured from the CNIs' own published manifests, charts and docs: each file under
tests/data/kube/fingerprint/<cni>/ names its repository, path and commit."""

import copy
import json
import pathlib

import pytest
import yaml

from harness.testbeds.kubernetes import fingerprint as fpm

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "kube" / "fingerprint"
PLURALS = {"DaemonSet": "daemonsets", "ConfigMap": "configmaps", "IPPool": "ippools",
           "FelixConfiguration": "felixconfigurations"}


def load(*names: str, unread=()) -> dict:
    """The captured files' objects, sorted as the API's reads hand them to fingerprint.of."""
    objects: dict = {p: [] for p in PLURALS.values()}
    objects["unread"] = list(unread)
    for name in names:
        for doc in yaml.safe_load_all((DATA / name).read_text()):
            if doc:
                objects[PLURALS[doc["kind"]]].append(doc)
    return objects


def test_every_captured_file_names_its_source():
    files = sorted(DATA.rglob("*.y*ml"))
    assert len(files) >= 10
    for f in files:
        head = f.read_text().split("\n", 3)[:3]
        assert head[0].startswith("# Source: ") and "commit" in " ".join(head), f


# ------------------------------------------------------------------ flannel
def test_flannel_vxlan_from_its_own_manifest():
    fp = fpm.of(load("flannel/kube-flannel.yml", "kube-proxy/kubeadm.yaml"))
    assert (fp.cni, fp.version, fp.encapsulation, fp.routing, fp.encryption) == \
        ("flannel", "v0.11.0", "vxlan", "tunnel", "none")
    assert fp.details["network"] == "10.244.0.0/16" and fp.mtu is None
    assert fp.kube_proxy == "iptables"
    assert fp.summary() == "flannel v0.11.0, vxlan"
    assert "configmap kube-system/kube-flannel-cfg" in fp.seen


@pytest.mark.parametrize("backend, want", [
    ({"Type": "host-gw"}, ("none", "native", "none")),
    ({"Type": "wireguard"}, ("wireguard", "tunnel", "wireguard")),
    ({"Type": "udp"}, ("udp", "tunnel", "none")),
    ({"Type": "vxlan", "DirectRouting": True}, ("vxlan", "cross-subnet", "none")),
])
def test_flannel_backends(backend, want):
    objects = load("flannel/kube-flannel.yml")
    cm = objects["configmaps"][0]
    net = json.loads(cm["data"]["net-conf.json"])
    cm["data"]["net-conf.json"] = json.dumps({**net, "Backend": backend})
    fp = fpm.of(objects)
    assert (fp.encapsulation, fp.routing, fp.encryption) == want


def test_flannel_without_its_configmap_names_what_it_could_not_read():
    objects = load("flannel/kube-flannel.yml", unread=["configmap kube-flannel-cfg: not read"])
    objects["configmaps"] = []
    fp = fpm.of(objects)
    assert fp.cni == "flannel" and fp.encapsulation == "" and "configmap kube-flannel-cfg: not read" in fp.seen


# ------------------------------------------------------------------ AWS VPC CNI
def test_aws_vpc_cni_is_named_and_routed_without_encapsulation():
    fp = fpm.of(load("aws-vpc-cni/aws-k8s-cni.yaml", "kube-proxy/kubeadm.yaml"))
    assert (fp.cni, fp.version, fp.encapsulation, fp.routing, fp.encryption, fp.mtu) == \
        ("aws-vpc-cni", "v1.12.1-rc3", "none", "native", "none", 9001)
    assert fp.details["external_snat"] == "false" and fp.details["pod_eni"] == "false"
    assert fp.summary() == "aws-vpc-cni v1.12.1-rc3, no encapsulation"


# ------------------------------------------------------------------ kube-router
def test_kube_router_kubeadm_example_keeps_kube_proxy():
    fp = fpm.of(load("kube-router/kubeadm-kuberouter.yaml", "kube-proxy/kubeadm.yaml"))
    assert (fp.cni, fp.version) == ("kube-router", "")          # the example's image has no tag
    # its defaults: the overlay on, IPIP between subnets only
    assert (fp.encapsulation, fp.routing) == ("ipip", "cross-subnet")
    assert fp.details["run-service-proxy"] == "false" and fp.kube_proxy == "iptables"


def test_kube_router_as_service_proxy_and_full_overlay():
    objects = load("kube-router/kubeadm-kuberouter.yaml")
    c = objects["daemonsets"][0]["spec"]["template"]["spec"]["containers"][0]
    c["args"] = ["--run-router=true", "--run-service-proxy=true", "--enable-overlay=true", "--overlay-type=full"]
    fp = fpm.of(objects)
    assert (fp.routing, fp.kube_proxy) == ("tunnel", "replaced by kube-router (ipvs)")
    assert "kube-proxy replacement" in fp.summary()
    c["args"] = ["--run-router=true", "--enable-overlay=false"]
    assert (fpm.of(objects).encapsulation, fpm.of(objects).routing) == ("none", "native")


# ------------------------------------------------------------------ Calico
def test_calico_manifest_alone_reads_the_default_pool_from_calico_node_env():
    fp = fpm.of(load("calico/calico.yaml", "kube-proxy/kubeadm.yaml", unread=["ippools: not listed"]))
    assert (fp.cni, fp.version, fp.encapsulation, fp.routing, fp.dataplane, fp.encryption) == \
        ("calico", "master", "ipip", "tunnel", "iptables", "none")
    assert fp.mtu is None                    # veth_mtu "0": detected by calico itself
    assert fp.details["calico_backend"] == "bird"
    assert any("CALICO_IPV4POOL_IPIP" in s for s in fp.seen) and "ippools: not listed" in fp.seen


def test_calico_ippools_and_felixconfiguration_win_over_env():
    fp = fpm.of(load("calico/calico.yaml", "calico/ippool.yaml", "calico/felixconfiguration.yaml",
                     "kube-proxy/kubeadm.yaml"))
    assert (fp.encapsulation, fp.routing, fp.dataplane) == ("ipip", "cross-subnet", "iptables")
    assert fp.details["ippools"] == {"my.ippool-1": {"cidr": "10.1.0.0/16", "ipipMode": "CrossSubnet",
                                                     "natOutgoing": True}}
    assert "felixconfiguration default" in fp.seen
    assert fp.summary() == "calico master, ipip, cross-subnet only"


def test_calico_vxlan_pool_nftables_and_wireguard():
    objects = load("calico/calico.yaml", "calico/ippool.yaml", "calico/felixconfiguration.yaml")
    pool = objects["ippools"][0]["spec"]
    pool.update(ipipMode="Never", vxlanMode="Always")
    objects["felixconfigurations"][0]["spec"].update(nftablesMode="Enabled", wireguardEnabled=True)
    fp = fpm.of(objects)
    assert (fp.encapsulation, fp.routing, fp.dataplane, fp.encryption) == ("vxlan", "tunnel", "nftables", "wireguard")
    disabled = copy.deepcopy(objects["ippools"][0])
    disabled["metadata"]["name"], disabled["spec"]["disabled"] = "old", True
    objects["ippools"].append(disabled)
    assert "old" not in fpm.of(objects).details["ippools"]


def test_calico_ebpf_manifest_replaces_kube_proxy():
    fp = fpm.of(load("calico/calico-bpf.yaml"))
    assert (fp.version, fp.dataplane, fp.encapsulation, fp.routing) == ("v3.29.6", "ebpf", "none", "native")
    assert fp.kube_proxy == "replaced by calico ebpf"
    assert fp.summary() == "calico v3.29.6, no encapsulation, ebpf, kube-proxy replacement"
    both = fpm.of(load("calico/calico-bpf.yaml", "kube-proxy/kubeadm.yaml"))
    assert both.kube_proxy == "replaced by calico ebpf" and both.details["kube_proxy_also_running"] == "iptables"


# ------------------------------------------------------------------ Cilium
def test_cilium_1_6_quick_install_uses_the_old_tunnel_key():
    fp = fpm.of(load("cilium/quick-install-v1.6.0.yaml"))
    assert (fp.cni, fp.version, fp.encapsulation, fp.routing, fp.encryption, fp.dataplane) == \
        ("cilium", "v1.6.0", "vxlan", "tunnel", "none", "ebpf")
    assert fp.kube_proxy == "none" and "no kube-proxy daemonset" in fp.seen
    assert fp.summary() == "cilium v1.6.0, vxlan, no kube-proxy"


def test_cilium_chart_defaults_tunnel_vxlan_beside_kube_proxy():
    fp = fpm.of(load("cilium/helm-defaults.yaml", "kube-proxy/kubeadm.yaml"))
    assert (fp.encapsulation, fp.routing, fp.encryption, fp.kube_proxy) == ("vxlan", "tunnel", "none", "iptables")
    assert fp.details["kube_proxy_replacement"] == "false"
    assert fp.summary() == "cilium, vxlan"


def test_cilium_native_wireguard_and_kube_proxy_replacement():
    fp = fpm.of(load("cilium/helm-native-wireguard-kpr.yaml"))
    assert (fp.encapsulation, fp.routing, fp.encryption, fp.mtu) == ("none", "native", "wireguard", 1450)
    assert fp.kube_proxy == "replaced by cilium"
    assert fp.summary() == "cilium, no encapsulation, wireguard, kube-proxy replacement"
    d = fp.as_dict()
    assert d["summary"] == fp.summary() and d["cni"] == "cilium" and "version" not in d


def test_cilium_ipsec_and_geneve():
    objects = load("cilium/helm-defaults.yaml")
    objects["configmaps"][0]["data"].update({"tunnel-protocol": "geneve", "enable-ipsec": "true"})
    fp = fpm.of(objects)
    assert (fp.encapsulation, fp.encryption) == ("geneve", "ipsec")


# ------------------------------------------------------------------ kube-proxy
@pytest.mark.parametrize("mode, want", [("ipvs", "ipvs"), ("nftables", "nftables"), ('""', "iptables")])
def test_kube_proxy_mode_from_its_configmap(mode, want):
    objects = load("kube-proxy/kubeadm.yaml")
    cm = objects["configmaps"][0]
    cm["data"]["config.conf"] = cm["data"]["config.conf"].replace('mode: ""', f"mode: {mode}")
    assert fpm.kube_proxy_mode(objects)[0] == want


def test_kube_proxy_mode_from_a_flag_and_unread():
    objects = load("kube-proxy/kubeadm.yaml")
    objects["daemonsets"][0]["spec"]["template"]["spec"]["containers"][0]["command"].append("--proxy-mode=ipvs")
    assert fpm.kube_proxy_mode(objects)[0] == "ipvs"
    objects = load("kube-proxy/kubeadm.yaml")
    objects["configmaps"] = []
    mode, where = fpm.kube_proxy_mode(objects)
    assert mode == "" and "not read" in where


# ------------------------------------------------------------------ what no recogniser knows
def _ds(name, image, ns="kube-system"):
    return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"containers": [{"name": "x", "image": image}]}}}}


def test_an_unknown_cni_stays_unknown_with_what_was_seen():
    fp = fpm.of({"daemonsets": [_ds("mynet-agent", "reg.example/mynet:1.0")]})
    assert fp.cni == "unknown" and fp.encapsulation == "" and fp.version == ""
    assert "daemonset kube-system/mynet-agent (reg.example/mynet:1.0)" in fp.seen
    assert fp.as_dict()["summary"] == "unknown, no kube-proxy"


def test_a_cni_without_a_recogniser_is_named_not_read():
    fp = fpm.of({"daemonsets": [_ds("antrea-agent", "antrea/antrea-agent-ubuntu:v2.1.0")]})
    assert (fp.cni, fp.version, fp.encapsulation) == ("antrea", "v2.1.0", "")
    assert any("no recogniser" in s for s in fp.seen)


@pytest.mark.parametrize("image, tag", [
    ("quay.io/cilium/cilium:v1.16.1@sha256:0123", "v1.16.1"), ("quay.io/coreos/flannel:v0.11.0-amd64", "v0.11.0"),
    ("localhost:5000/kube-router", ""), ("docker.io/calico/node:v3.29.6", "v3.29.6")])
def test_image_version(image, tag):
    assert fpm.image_version(image) == tag
