"""The kubernetes backend's pure parts: node picking, the manifests a run makes, the
tunnel devices read from `ip -d link` (a real capture), the container-service and same-node
placements, and the CLI's kubernetes flags."""

import dataclasses
import pathlib

import pytest

from harness.bed import Side
from harness.cli import main
from harness.cli.args import options, overrides
from harness.core.errors import HarnessError
from harness.core.placements import CONTAINER, HOST_AND_CONTAINER, LOCAL, NAMES, PLACEMENTS
from harness.hosts.scripted import ScriptedHost
from harness.modes import standard
from harness.modes.base import Datapath
from harness.run.endpoints import endpoints
from harness.testbeds.kubernetes import found, nodes, psa, specs
from harness.tools.base import TestSpec
from harness.tools.irtt import IrttUdp
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


@pytest.mark.parametrize("image, policy", [("localhost/overlaybench/tools:bookworm", "IfNotPresent"), ("tools", "Always"),
                                           ("reg:5000/tools", "Always"), ("reg:5000/t@sha256:ab", "IfNotPresent")])
def test_pull_policy(image, policy):
    assert specs.pull_policy(image) == policy


def test_the_default_image_is_fully_qualified():
    """A node that lacks it never asks Docker Hub: its first part names a registry host
    (localhost: podman's convention for local images); the docker backend uses the same name."""
    from harness.testbeds.containers import docker
    for image in (specs.DEFAULT_IMAGE, docker.DEFAULT_IMAGE):
        host = image.split("/", 1)[0]
        assert "/" in image and (host == "localhost" or "." in host or ":" in host), image
    assert specs.DEFAULT_IMAGE == docker.DEFAULT_IMAGE


def test_service_selects_the_pod_on_every_server_port():
    svc = specs.service("s1", "c1", specs.service_ports(2))
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["selector"] == {"overlaybench/side": "c1"}
    ports = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
    for base in (5201, 19765, 19766, 11111, 11112, 5001, 2112, 2113):   # iperf3, qperf, sockperf, irtt (each +data), iperf 2
        for k in (0, 1):
            assert {("TCP", base + 2 * k), ("UDP", base + 2 * k)} <= ports
    assert {("UDP", p) for p in range(9000, 9008)} <= ports   # blast: both receivers' every flow
    assert len({p["name"] for p in svc["spec"]["ports"]}) == len(svc["spec"]["ports"])
    assert len(specs.service_ports(1)) == 8 + 4              # one pair at once: a port per server, blast's per flow


@pytest.mark.parametrize("sets, needle", [
    (3000, "3000 pairs at once: sockperf's ports 11111..17109 meet iperf3's from 5201"),
    (101, "101 pairs at once: iperf's ports 5001..5201 meet iperf3's from 5201"),      # the first set refused
])
def test_service_ports_that_collide_are_one_line(sets, needle):
    with pytest.raises(HarnessError) as e:
        specs.service_ports(sets)
    assert needle in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ least privilege
def test_pod_network_pod_passes_restricted_and_drops_everything():
    p = specs.pod("c0", "node-a", "tools:x", host_network=False)
    assert psa.violations(p, "restricted") == []
    (c,) = p["spec"]["containers"]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert p["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                                            "runAsUser": 65534, "runAsGroup": 65534,
                                            "sysctls": [{"name": "net.ipv4.ping_group_range",
                                                         "value": "65534 65534"}]}
    assert "tolerations" not in p["spec"]               # no blanket toleration


def test_a_pinging_pod_adds_net_raw_only():
    p = specs.pod("c0", "node-a", "tools:x", host_network=False, raw_sockets=True)
    assert p["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_RAW"]}
    assert psa.violations(p, "baseline") == ["container tools: capabilities.add ['NET_RAW']"]   # not in baseline's list
    assert "container tools: runAsNonRoot != true" in psa.violations(p, "restricted")


def test_host_network_pod_is_privileged_only():
    p = specs.pod("h0", "node-a", "tools:x", host_network=True)
    assert p["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_RAW"]}
    assert "hostNetwork=true" in psa.violations(p, "baseline")
    assert psa.violations(p, "privileged") == []


def test_the_validator_names_what_restricted_forbids():
    bad = {"spec": {"hostPID": True, "volumes": [{"name": "v", "hostPath": {"path": "/"}}],
                    "containers": [{"name": "t", "securityContext": {"privileged": True, "runAsUser": 0,
                                                                     "capabilities": {"add": ["NET_ADMIN"]}},
                                    "ports": [{"hostPort": 80}]}]}}
    got = psa.violations(bad)
    for needle in ("hostPID=true", "hostPath volume v", "container t: privileged", "container t: hostPort",
                   "capabilities.add ['NET_ADMIN']", "allowPrivilegeEscalation != false",
                   "capabilities.drop lacks ALL", "runAsNonRoot != true", "runAsUser=0", "seccompProfile unset"):
        assert any(needle in g for g in got), (needle, got)


@pytest.mark.parametrize("host, raw, level", [(True, False, "privileged"), (True, True, "privileged"),
                                              (False, True, "privileged"), (False, False, "restricted")])
def test_the_namespace_level_is_the_least_the_pods_need(host, raw, level):
    assert psa.level_of(host, raw) == level
    ns = specs.namespace("ob1", "r", 1, "h", level=level)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == level
    assert psa.admits("privileged", level) and psa.admits("", level)
    assert psa.admits("restricted", level) == (level == "restricted")


def test_resources_tolerations_and_pull_secrets_on_every_pod():
    ps = specs.PodSettings(image="tools:x", cpu=specs.resources("--pod-cpu", "1"),
                           memory=specs.resources("--pod-memory", "128Mi:512Mi"),
                           tolerations=(specs.toleration("dedicated=bench:NoSchedule"), specs.toleration("gpu")),
                           pull_secrets=("regcred",))
    spec = specs.pod("c0", "n", ps, host_network=False)["spec"]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "128Mi"},
                                                  "limits": {"cpu": "1", "memory": "512Mi"}}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"},
                                   {"key": "gpu", "operator": "Exists"}]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    default = specs.pod("c0", "n", "tools:x", host_network=False)["spec"]["containers"][0]["resources"]
    assert default == {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}


@pytest.mark.parametrize("flag, text", [("--pod-cpu", "lots"), ("--pod-memory", "1Gi:x"), ("--tolerate", "k:Never"),
                                        ("--tolerate", "=v"), ("--tolerate", "k=:NoSchedule")])
def test_bad_pod_settings_are_one_line(flag, text):
    with pytest.raises(HarnessError, match=f"^{flag} "):
        specs.toleration(text) if flag == "--tolerate" else specs.resources(flag, text)


def test_a_tolerated_taint_makes_a_node_usable():
    tainted = dataclasses.replace(node("b", schedulable=False), taints=(("dedicated", "bench", "NoSchedule"),))
    with pytest.raises(HarnessError, match="node b is not schedulable \\(tainted dedicated=bench:NoSchedule: "
                                           "--tolerate dedicated=bench:NoSchedule runs there\\)"):
        nodes.pick([node("a"), tainted], ("a", "b"))
    assert [n.name for n in nodes.pick([node("a"), tainted], tolerations=(specs.toleration("dedicated"),))] \
        == ["a", "b"]


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


def test_kube_proxys_mode_from_its_real_proxymode_answer():
    """Captured on the local cluster's node with found.PROXY_MODE_ARGV's command: kube-proxy's
    answer, and the same asked of a port where nothing listens."""
    out = (DATA / "proxymode_iptables.out").read_text()
    assert found.parse_proxy_mode(out, "", "n1") == (
        "iptables", "node n1: kube-proxy answers /proxyMode on 127.0.0.1:10249: iptables")
    refused = (DATA / "proxymode_refused.err").read_text()
    assert found.parse_proxy_mode("", refused, "n1")[0] == "none"
    assert found.parse_proxy_mode(out.replace("200 OK", "404 Not Found"), "", "n1") == (
        "", "node n1: /proxyMode on 127.0.0.1:10249 not read (HTTP 404)")
    assert found.parse_proxy_mode("", "", "n1") == ("", "node n1: /proxyMode on 127.0.0.1:10249 not read (no answer)")


def test_the_nodes_name_a_cni_no_daemonset_names_and_kube_proxys_mode():
    """flanneld and kube-proxy run as node processes (no DaemonSet): the fingerprint the
    objects give is `unknown, no kube-proxy`; the nodes' devices and kube-proxy's own answer
    name both."""
    from harness.testbeds.kubernetes import fingerprint
    text = (DATA / "ip_d_link_flannel_vxlan.txt").read_text()
    fp = fingerprint.of({"daemonsets": []})
    assert fp.summary() == "unknown, no kube-proxy"
    names = {"n1": found.device_names(text), "n2": found.device_names(text)}
    tunnels = {"n1": found.parse_links(text), "n2": found.parse_links(text)}
    proxy = found.parse_proxy_mode((DATA / "proxymode_iptables.out").read_text(), "", "n1")
    found.from_nodes(fp, names, tunnels, proxy)
    assert (fp.cni, fp.encapsulation, fp.routing, fp.kube_proxy) == ("flannel", "vxlan", "tunnel", "iptables")
    assert fp.summary() == "flannel, vxlan"
    assert any(s.startswith("devices of flannel on node(s) n1, n2: flannel.1 (vxlan id 1 dstport 8472)") for s in fp.seen)
    # host-gw: no device of flannel's own; the CNI stays unknown, never a guess
    bare = fingerprint.of({"daemonsets": []})
    found.from_nodes(bare, {"n1": ["lo", "eth0", "cni0"]}, {"n1": []}, None)
    assert bare.cni == "unknown" and bare.kube_proxy == "none"
    # a replacement named by its CNI's configuration stays; a kube-proxy still answering is noted
    kpr = fingerprint.Fingerprint(cni="cilium", kube_proxy="replaced by cilium")
    found.from_nodes(kpr, {}, {}, ("iptables", "node n1: …"))
    assert kpr.kube_proxy == "replaced by cilium" and kpr.details["kube_proxy_also_running"] == "iptables"


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
    # the ClusterIP is no address of the pod: a server that binds (irtt always does) binds the pod's own
    assert server.bind == "10.244.1.5" and client.bind is None
    spec = TestSpec(server_addr=server.addr, bind_addr=server.bind, duration=1)
    assert IrttUdp().server_argv(spec)[:4] == ["irtt", "server", "-b", "10.244.1.5:2112"]
    assert endpoints(tb, Datapath("cni", "cni", 1450), "container-container")[1].bind is None


def test_service_end_without_a_service_is_refused():
    with pytest.raises(HarnessError, match="no service in front of its container"):
        endpoints(_Tb(_sides()), Datapath("cni", "cni", 1450), "container-service")


# ------------------------------------------------------------------ the same-node placement
def test_same_node_is_a_placement_only_cni_measures_after_container_service():
    assert NAMES[-2:] == ("container-service", "same-node")
    p = PLACEMENTS["same-node"]
    assert (p.client, p.server) == (CONTAINER, LOCAL) and p.needs_local and p.needs_overlay
    assert not p.needs_service and not PLACEMENTS["container-service"].needs_local
    assert HOST_AND_CONTAINER == ("host-host", "host-container", "container-container")
    reg = standard()
    assert "same-node" in reg.get("cni").placements
    for name in ("native", "fastdp", "sleeve", "wireguard"):
        assert "same-node" not in reg.get(name).placements


def test_a_local_end_is_the_client_sides_neighbour_at_its_address():
    sides = _sides()
    for s in sides:
        s.neighbour, s.neighbour_ip = ScriptedHost(f"n{s.index}/l{s.index}"), f"10.244.{s.index}.7"
    client, server = endpoints(_Tb(sides), Datapath("cni", "cni", 1450), "same-node")
    assert client.host.name == "n0/c0" and client.addr == "10.244.0.5"
    assert server.host.name == "n0/l0" and server.addr == "10.244.0.7"      # the client's node, not side 1's
    client, server = endpoints(_Tb(sides), Datapath("cni", "cni", 1450), "same-node", "n1", "n0")
    assert (client.host.name, server.host.name, server.addr) == ("n1/c1", "n1/l1", "10.244.1.7")


def test_a_local_end_without_a_neighbour_is_one_line():
    with pytest.raises(HarnessError) as e:
        endpoints(_Tb(_sides()), Datapath("cni", "cni", 1450), "same-node")
    assert str(e.value) == "host n0 has no second container beside its own (a local end)"
    with pytest.raises(HarnessError, match="needs an overlay; mode native has none"):
        endpoints(_Tb(_sides()), Datapath("native", "native", 1500), "same-node")


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


def test_the_platform_flags_fill_the_options():
    o = options(_args("--kubeconfig", "kc", "--namespace", "bench", "--pod-cpu", "1:4", "--pod-memory", "1Gi",
                      "--tolerate", "a=b:NoSchedule", "--tolerate", "c", "--image-pull-secret", "r1",
                      "--image-pull-secret", "r2", "--pod-ready-timeout", "60"))
    assert (o.kube_namespace, o.pod_cpu, o.pod_memory, o.tolerate, o.pull_secrets, o.pod_ready_timeout) == (
        "bench", "1:4", "1Gi", ("a=b:NoSchedule", "c"), ("r1", "r2"), 60.0)
    from harness.cli import parser
    d = parser().parse_args(["down", "--kubeconfig", "kc", "--namespace", "bench", "--older-than", "90m"])
    assert options(d).older_than == 5400.0 and options(d).kube_namespace == "bench"


def test_a_bad_pod_setting_on_the_command_line_is_one_line_before_the_api(capsys, tmp_path):
    assert main(["run", "--kubeconfig", str(tmp_path / "kc"), "--pod-memory", "lots", "-q",
                 "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("overlaybench: --pod-memory lots: not REQUEST[:LIMIT]")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flag", [["--pod-cpu", "1"], ["--tolerate", "k"], ["--namespace", "x"]])
def test_kubernetes_flags_on_the_netns_backend_are_one_line(capsys, flag):
    assert main(["run", "--backend", "netns", *flag]) == 2
    assert capsys.readouterr().err.strip().endswith("is the kubernetes backend's; this is --backend netns")


def test_kubernetes_flags_on_another_backend_are_one_line(capsys):
    assert main(["run", "--backend", "netns", "--nodes", "a,b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "overlaybench: --nodes is the kubernetes backend's; this is --backend netns"


# ------------------------------------------------------------------ transient faults
class _Err(Exception):
    def __init__(self, status=None, reason="", headers=None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers


@pytest.mark.parametrize("err, verb, resource, want", [
    (_Err(429, headers={"Retry-After": "3"}), "create", "pods", 3.0),
    (_Err(429, headers={"Retry-After": "120"}), "get", "pods", 8.0),          # capped
    (_Err(503), "list", "nodes", 0.0), (_Err(500), "create", "pods", 0.0),
    (_Err(403), "create", "pods", None), (_Err(404), "get", "pods", None),
    (_Err(0, "('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"), "get", "pods", 0.0),
    (_Err(0, "Connection reset by peer"), "create", "pods", None),            # it may have been made
    (_Err(0, "Connection reset by peer"), "create", "selfsubjectaccessreviews", 0.0),
    (_Err(0, "Connection refused"), "get", "version", None),
])
def test_which_faults_are_asked_again(err, verb, resource, want):
    from harness.hosts.kube.api import transient
    assert transient(err, verb, resource) == want


@pytest.mark.parametrize("modes, placements, tests, host, raw", [
    (["native", "cni"], ["host-host", "container-container"], ["iperf3.tcp"], True, False),
    (["cni"], ["container-container", "container-service"], ["iperf3.tcp"], False, False),
    (["cni"], ["container-container"], ["ping.flood"], False, True),
    (["native"], ["host-host"], ["ping.flood"], True, False),            # ping in hostNetwork pods only
    (["cni"], ["host-container"], ["ping.flood"], True, False),
    (["cni"], ["same-node"], ["ping.flood"], False, True),
    (["cni"], ["container-container"], ["udp.pps64"], False, False),       # blast's UDP sockets: no NET_RAW
    (["cni"], ["container-container"], ["packet.pps64"], False, True),     # its packet socket: NET_RAW
])
def test_what_a_run_needs_follows_its_placements_and_tests(modes, placements, tests, host, raw):
    from harness.run.scenario import from_command_line
    from harness.testbeds.kubernetes import plan
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes"},
                                  "matrix": {"modes": modes, "placements": placements, "tests": tests}})
    assert (plan.needs_host_network(sc), plan.needs_raw_sockets(sc)) == (host, raw)
    assert plan.needs_local(sc) == ("same-node" in placements)


@pytest.mark.parametrize("modes, placements, local", [
    (["native", "cni"], ["host-host", "container-container"], False),
    (["native", "cni"], ["host-host", "same-node"], True),
    (["native"], ["same-node"], False),                 # native has no such placement: host-host only
    (["cni"], ["host-host"], True),                     # none asked that cni has: all of cni's
])
def test_a_local_end_is_needed_only_where_a_mode_measures_same_node(modes, placements, local):
    from harness.run.scenario import from_command_line
    from harness.testbeds.kubernetes import plan
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes"},
                                  "matrix": {"modes": modes, "placements": placements}})
    assert plan.needs_local(sc) is local
