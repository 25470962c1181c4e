"""The kubernetes backend end to end on a fake API (tests/scripted_kube.py): whole runs
through the session and the runner, what is made and that it is gone after success, each
failure path and Ctrl-C; bad input before anything is made; `down` of dead owners; the
CNI as recorded in run.json. No cluster, no root."""

import json
import os
import pathlib
import re
import socket
import tempfile

import pytest
import yaml

from harness.bed import Options
from harness.cli import main
from harness.core.errors import HarnessError
from harness.hosts.kube import api as api_mod
from harness.hosts.kube.api import ApiError, PodStatus
from harness.run import session
from harness.testbeds import kubernetes as kube
from harness.testbeds.kubernetes import found, psa
from scripted_kube import RUNNING, FakeApi

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
IPERF = (DATA / "iperf3_tcp_1.out").read_text()
LINKS = (DATA / "kube" / "ip_d_link_flannel_vxlan.txt").read_text()
PROXY_MODE = (DATA / "kube" / "proxymode_iptables.out").read_text()     # kube-proxy's answer
STAT = "cpu  100 0 100 1000 0 0 0 0 0 0\n"
FLANNEL = {"kube-system": [{"name": "kube-proxy", "images": ["registry.k8s.io/kube-proxy:v1.34.4"]}],
           "kube-flannel": [{"name": "kube-flannel-ds", "images": ["ghcr.io/flannel-io/flannel:v0.26.7"]}]}
PULL = PodStatus("Pending", reason="ImagePullBackOff", message='Back-off pulling image "reg.example/tools:x"')


@pytest.fixture
def api(monkeypatch):
    fake = FakeApi(daemonsets=FLANNEL)
    monkeypatch.setattr(kube, "connect", lambda opts: fake)
    return fake


def _incidental(api: FakeApi) -> None:
    """What every pod answers whatever the case: node addresses and MTU, facts, CPU, offloads."""
    for i, n in enumerate(api.nodes):
        api.allow_exec(f"h{i}", "ip -o -4 addr show",
                       stdout=f"2: eth0    inet {n.address}/24 brd x scope global eth0\n")
        api.allow_exec(f"h{i}", "cat /sys/class/net/eth0/mtu", stdout="1500\n")
        api.allow_exec(f"h{i}", "ip -d -o link show", stdout=LINKS)
        api.allow_exec(f"h{i}", found.PROXY_MODE_ARGV, stdout=PROXY_MODE)
        for pod in (f"h{i}", f"c{i}", f"l{i}"):     # c<i>: a run without hostNetwork pods reads its facts there
            api.allow_exec(pod, re.compile(r"env 'SYSCTLS=.*|iperf3 --version|qperf --version|ping -V|ip -V", re.S))
            api.allow_exec(pod, "cat /proc/stat", stdout=STAT)
            api.allow_exec(pod, re.compile(r"ethtool -k \S+"))
            api.allow_exec(pod, ["ss", "-Hltn", "sport = :5201"], stdout="LISTEN 0 5 *:5201 *:*\n")
        api.allow_exec(f"c{i}", "cat /sys/class/net/eth0/mtu", stdout="1450\n")
        api.allow_exec(f"c{i}", "ip -o route show default", stdout="default via 10.244.0.1 dev eth0 \n")


def _run(tmp_path, modes=("native", "cni"), placements=("host-host", "container-container"), tests=("iperf3.tcp",),
         **opts):
    return session.run(overrides={"matrix": {"modes": list(modes), "placements": list(placements),
                                             "tests": list(tests), "repeats": 1, "duration": 1},
                                  "testbed": {"backend": "kubernetes"}},
                       results_dir=str(tmp_path / "results"), quiet=True, options=Options(**opts))


def _rows(store) -> list[dict]:
    return [json.loads(ln) for ln in (store.path / "measurements.jsonl").read_text().splitlines()]


def test_a_run_measures_native_and_cni_and_leaves_nothing(api, tmp_path):
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c 192\.0\.2\.99 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    api.expect_start("c1", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.1\.5 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path)
    rows = _rows(store)
    assert {(r["mode"], r["placement"]) for r in rows} == {("native", "host-host"), ("cni", "container-container")}
    assert all(r["ok"] for r in rows) and {"throughput_bps", "cpu_client_pct"} <= {r["metric"] for r in rows}
    meta = store.read_meta()
    assert meta["status"] == "complete" and meta["backend"] == "kubernetes"
    ns = meta["testbed"]["namespace"]
    assert re.fullmatch(r"overlaybench-ob[0-9a-f]{4}", ns)
    (cni,) = [d for d in meta["datapaths"] if d["mode"] == "cni"]
    assert cni["info"]["cni"] == "flannel" and cni["info"]["pod_mtu"] == 1450
    assert {"name": "kube-flannel-ds", "namespace": "kube-flannel",
            "images": ["ghcr.io/flannel-io/flannel:v0.26.7"]} in cni["info"]["daemonsets"]
    assert cni["info"]["encapsulation"]["node-a"][0]["kind"] == "vxlan"
    fp = cni["info"]["fingerprint"]
    assert (fp["cni"], fp["version"], fp["summary"]) == ("flannel", "v0.26.7", "flannel v0.26.7")
    assert "configmap kube-flannel-cfg: not read" in fp["seen"]        # the fake has none: nothing guessed
    assert fp["kube_proxy"] == "iptables"                             # as kube-proxy answered on node-a
    assert "node node-a: kube-proxy answers /proxyMode on 127.0.0.1:10249: iptables" in fp["seen"]
    assert {r["datapath"] for r in rows if r["mode"] == "cni"} == {"cni (flannel v0.26.7)"}
    # the rows carry the pod MTU the CNI set, not the underlay's the scenario expanded
    assert {(r["mode"], r["overlay_mtu"]) for r in rows} == {("native", 1500), ("cni", 1450)}
    # made in the run's namespace only, and gone
    made = [c for c in api.calls if c[0].startswith("create_")]
    assert [c[0] for c in made] == ["create_namespace"] + ["create_pod"] * 4
    assert all(c[1] == ns for c in made[1:]) and not api.services
    assert api.deleted == [ns] and not api.namespaces and not api.pods
    labels = [c for c in api.calls if c[0] == "create_namespace"][0][1]["metadata"]["labels"]
    assert labels["overlaybench/owner-pid"] == str(os.getpid())
    assert labels["overlaybench/run"] == meta["run_id"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"      # hostNetwork pods
    pods = {c[2]["metadata"]["name"]: c[2]["spec"] for c in made[1:]}
    assert {n: (s["nodeName"], s["hostNetwork"]) for n, s in pods.items()} == {
        "h0": ("node-a", True), "c0": ("node-a", False), "h1": ("node-b", True), "c1": ("node-b", False)}
    api.assert_clean()


def test_service_path_reaches_the_far_pod_through_its_cluster_ip(api, tmp_path):
    _incidental(api)
    api.expect_start("c1", "iperf3 -s -1 -p 5201 -B 10.244.1.5")   # the pod behind the Service binds its own
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.96\.0\.12 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-service",))
    assert all(r["ok"] for r in _rows(store))
    made = [c for c in api.calls if c[0].startswith("create_")]
    assert [c[2]["metadata"]["name"] for c in made if c[0] == "create_service"] == ["s0", "s1"]
    # one pair at a time: one port per server, TCP and UDP (iperf3, qperf + data, sockperf + data, iperf, irtt + data,
    # blast a port per flow)
    ports = {p["port"] for p in made[-1][2]["spec"]["ports"]}
    assert ports == {5201, 19765, 19766, 11111, 11112, 5001, 2112, 2113, 9000, 9001, 9002, 9003}
    meta = store.read_meta()
    assert meta["testbed"]["hosts"]["h1"]["service_ip"] == "10.96.0.12"
    # no host end: no hostNetwork pod, and the namespace enforces "restricted", which its pods pass
    pods = [c[2] for c in made if c[0] == "create_pod"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["c0", "c1"]
    ns_labels = made[0][1]["metadata"]["labels"]
    assert ns_labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(psa.violations(p, "restricted") == [] for p in pods)
    assert meta["testbed"]["pod_security"] == "restricted" and meta["testbed"]["host_network"] is False
    assert not api.namespaces
    api.assert_clean()


# ------------------------------------------------------------------ the same-node placement
def _pods_made(api: FakeApi) -> dict[str, dict]:
    return {c[2]["metadata"]["name"]: c[2] for c in api.calls if c[0] == "create_pod"}


def test_same_node_serves_from_a_second_pod_beside_the_client(api, tmp_path):
    _incidental(api)
    api.expect_start("c1", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.1\.5 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    api.expect_start("l0", "iperf3 -s -1 -p 5201")        # beside c0, on node-a: not c1, not node-b
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.0\.7 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-container", "same-node"))
    rows = _rows(store)
    assert all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert {r["placement"] for r in rows} == {"container-container", "same-node"}
    pods = _pods_made(api)
    assert {n: (p["spec"]["nodeName"], p["spec"]["hostNetwork"]) for n, p in pods.items()} == {
        "c0": ("node-a", False), "l0": ("node-a", False), "c1": ("node-b", False), "l1": ("node-b", False)}
    for i in (0, 1):                # the same pod as c<i> but for its name
        c, lp = pods[f"c{i}"], pods[f"l{i}"]
        assert lp["spec"] == c["spec"]
        assert {k: v for k, v in lp["metadata"]["labels"].items() if k != "overlaybench/side"} == \
            {k: v for k, v in c["metadata"]["labels"].items() if k != "overlaybench/side"}
        assert psa.violations(lp, "restricted") == []
    assert not api.services
    made = [c for c in api.calls if c[0].startswith("create_")]
    assert made[0][1]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    tb = store.read_meta()["testbed"]
    assert tb["local"] is True and tb["service"] is False and tb["host_network"] is False
    assert {h: (v["neighbour"], v["neighbour_ip"]) for h, v in tb["hosts"].items()} == {
        "h0": ("l0", "10.244.0.7"), "h1": ("l1", "10.244.1.7")}
    assert not api.namespaces and not api.pods
    api.assert_clean()


def test_same_node_beside_the_host_placements_makes_every_pod_at_once(api, tmp_path):
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c 192\.0\.2\.99 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    api.expect_start("l0", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.0\.7 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, placements=("host-host", "same-node"))
    rows = _rows(store)
    assert {(r["mode"], r["placement"]) for r in rows} == {("native", "host-host"), ("cni", "same-node")}
    assert all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert sorted(_pods_made(api)) == ["c0", "c1", "h0", "h1", "l0", "l1"]
    awaited = {c[2] for c in api.calls if c[0] == "pod_status"}
    assert awaited >= {"l0", "l1"}
    assert store.read_meta()["testbed"]["hosts"]["h0"]["neighbour_ip"] == "10.244.0.7"
    api.assert_clean()


def test_a_run_without_same_node_makes_no_second_pod(api, tmp_path):
    _incidental(api)
    api.expect_start("c1", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.1\.5 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-container",))
    assert sorted(_pods_made(api)) == ["c0", "c1"]
    tb = store.read_meta()["testbed"]
    assert tb["local"] is False and tb["hosts"]["h0"]["neighbour"] is None
    api.assert_clean()


def test_a_second_pod_that_does_not_run_is_named_against_the_one_deadline(api, tmp_path):
    api.pod_states["l1"] = [PodStatus("Pending", reason="ContainerCreating")]
    with pytest.raises(HarnessError, match=r"^pods not running after 0s: l1 on node node-b \(ContainerCreating\) "):
        _run(tmp_path, modes=("cni",), placements=("same-node",), pod_ready_timeout=0.001)
    assert not api.namespaces


def test_a_pull_that_fails_once_and_succeeds_on_the_kubelets_retry_is_waited_for(api):
    """ErrImagePull, then the back-off, then Running: the run goes on. The same failure
    outlasting PULL_GRACE (counted in polls: the fake sleeps take no time) is the one line."""
    from harness.run.scenario import from_command_line
    from harness.testbeds.kubernetes import backend
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes"},
                                  "matrix": {"modes": ["cni"], "placements": ["container-container"]}})
    polls = int(backend.PULL_GRACE / backend.READY_POLL)
    fail = [PodStatus("Pending", reason="ErrImagePull", message="no basic auth credentials")] + [PULL] * (polls - 2)
    api.pod_states["c1"] = fail + [RUNNING]
    tb = backend.KubeTestbed(api, api.nodes, Options(run_id="r1"), sleep=lambda s: None)
    tb.preflight(sc)
    try:
        tb._make()
        assert [s.container.status.phase for s in tb.sides] == ["Running", "Running"]
    finally:
        tb.teardown()
    api.pod_states["c1"] = fail + [PULL] * (polls + 2) + [RUNNING]
    tb = backend.KubeTestbed(api, api.nodes, Options(run_id="r2"), sleep=lambda s: None)
    tb.preflight(sc)
    with pytest.raises(HarnessError, match=r"cannot be pulled on node node-b: ImagePullBackOff"):
        tb._make()
    assert not api.namespaces


def test_same_node_pods_never_ping_so_stay_restricted_where_the_client_pods_need_net_raw(api):
    from harness.run.scenario import from_command_line
    from harness.testbeds.kubernetes.backend import KubeTestbed
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes"},
                                  "matrix": {"modes": ["cni"], "placements": ["same-node"], "tests": ["ping.flood"]}})
    tb = KubeTestbed(api, api.nodes, Options(run_id="r1"))
    tb.preflight(sc)
    try:
        tb.build(1500, None)
        pods = _pods_made(api)
        assert sorted(pods) == ["c0", "c1", "l0", "l1"] and tb.level == "privileged"
        assert pods["c0"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] == ["NET_RAW"]
        assert all(psa.violations(pods[f"l{i}"], "restricted") == [] for i in (0, 1))
        assert [(s.neighbour.pod, s.neighbour_ip) for s in tb.sides] == [("l0", "10.244.0.7"), ("l1", "10.244.1.7")]
    finally:
        tb.teardown()
    assert not api.namespaces


def test_an_image_that_cannot_be_pulled_is_one_line_before_any_case(api, tmp_path, monkeypatch):
    from harness.testbeds.kubernetes import backend
    monkeypatch.setattr(backend, "PULL_GRACE", 0.0)      # the kubelet's retry is not waited for here
    api.pod_states["c1"] = [PodStatus("Pending", reason="ContainerCreating"), PULL]
    with pytest.raises(HarnessError) as e:
        _run(tmp_path, image="reg.example/tools:x")
    assert str(e.value) == ('image reg.example/tools:x cannot be pulled on node node-b: ImagePullBackOff: '
                            'Back-off pulling image "reg.example/tools:x"')
    assert not api.namespaces and len(api.deleted) == 1
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_pods_are_awaited_against_one_deadline_and_the_stuck_one_named(api, tmp_path):
    api.pod_states["h1"] = [PodStatus("Pending", reason="ContainerCreating")]
    with pytest.raises(HarnessError, match=r"^pods not running after 0s: h1 on node node-b \(ContainerCreating\) "
                                           r"\(--pod-ready-timeout SECONDS waits longer\)$"):
        _run(tmp_path, pod_ready_timeout=0.001)
    assert not api.namespaces


def _nothing_made(api: FakeApi, tmp_path) -> None:
    assert not [c for c in api.calls if c[0].startswith("create_")]
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("denied, needle", [
    ({"create pods/exec"}, "may not create pods/exec"),
    ({"delete namespaces", "create pods"}, "may not delete namespaces, create pods "),
])
def test_a_forbidden_verb_is_one_line_before_anything_is_made(api, tmp_path, denied, needle):
    api.denied = denied
    with pytest.raises(HarnessError) as e:
        _run(tmp_path)
    assert needle in str(e.value) and str(e.value).startswith("forbidden: this kubeconfig's user")
    _nothing_made(api, tmp_path)


def test_forbidden_nodes_list_names_verb_and_resource(api, tmp_path):
    api.fail("list_nodes", ApiError(403, "list", "nodes", "Forbidden"))
    with pytest.raises(HarnessError, match=r"^forbidden: this kubeconfig's user may not list nodes$"):
        _run(tmp_path)
    _nothing_made(api, tmp_path)


@pytest.mark.parametrize("opts, needle", [
    ({"nodes": ("node-a", "node-x")}, "no node named 'node-x' in the cluster (nodes: node-a, node-b)"),
    ({"node_count": 3}, "the cluster has 2 Ready, schedulable nodes (node-a, node-b); the run needs 3"),
])
def test_nodes_that_do_not_exist_are_refused_before_anything_is_made(api, tmp_path, opts, needle):
    with pytest.raises(HarnessError, match=re.escape(needle)):
        _run(tmp_path, **opts)
    _nothing_made(api, tmp_path)


def test_an_overlay_mode_is_refused_before_the_api_is_reached(monkeypatch, tmp_path):
    def never(opts):
        raise AssertionError("the API was reached")
    monkeypatch.setattr(kube, "connect", never)
    with pytest.raises(HarnessError, match=r"^mode fastdp deploys an overlay onto the hosts; the kubernetes backend "):
        _run(tmp_path, modes=("native", "fastdp"))


def test_docker_containers_are_refused_before_the_api_is_reached(monkeypatch, tmp_path):
    monkeypatch.setattr(kube, "connect", lambda opts: pytest.fail("the API was reached"))
    with pytest.raises(HarnessError, match=r"^--containers docker: on the kubernetes backend the containers are"):
        session.run(overrides={"testbed": {"backend": "kubernetes", "containers": "docker"}},
                    results_dir=str(tmp_path / "results"), quiet=True, options=Options())


def test_cni_is_refused_elsewhere_in_one_line():
    from harness.core.errors import UnsupportedError
    from harness.modes import standard

    class Lab:
        backend = "netns"

        def pod_network(self):
            return None
    with pytest.raises(UnsupportedError, match="the netns backend has none"):
        standard().get("cni").check(Lab())


# ------------------------------------------------------------------ the real client, no cluster
def test_no_kubeconfig_is_one_line(tmp_path):
    with pytest.raises(HarnessError, match=r"^no usable kubeconfig \(.*/missing\): "):
        api_mod.connect(str(tmp_path / "missing"), None)


def test_an_unreachable_api_is_one_line(tmp_path):
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    with pytest.raises(ApiError) as e:
        api_mod.connect(str(kc), None).server_version()
    assert e.value.status == 0 and str(e.value).startswith("the Kubernetes API is unreachable (get version: ")
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------ cleanup on every failure path
def test_a_failed_build_deletes_the_namespace(api, tmp_path):
    api.fail("create_pod", ApiError(403, "create", "pods", "Forbidden", "overlaybench-x"))
    with pytest.raises(HarnessError, match="may not create pods"):
        _run(tmp_path)
    assert len(api.deleted) == 1 and not api.namespaces


def test_ctrl_c_while_pods_start_deletes_the_namespace(api, tmp_path):
    api.fail("pod_status", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path)
    assert len(api.deleted) == 1 and not api.namespaces


def test_ctrl_c_mid_case_deletes_the_namespace(api, tmp_path):
    _incidental(api)

    def interrupt(argv):         # Ctrl-C while the case waits for its server
        if argv[0] == "ss":
            raise KeyboardInterrupt
        return False
    api.allow_exec("h1", interrupt)
    api._allowed.insert(0, api._allowed.pop())
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, modes=("native",), placements=("host-host",))
    assert [c[3][-1] for c in api.calls if c[0] == "exec" and c[2] == "h1"][-2:] == ["sport = :5201", "TERM"]
    assert len(api.deleted) == 1 and not api.namespaces


def test_a_namespace_that_cannot_be_deleted_is_logged_not_raised(api, tmp_path, caplog):
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c .*"), returncode=0, stdout=IPERF, runs=False)
    api.fail("delete_namespace", ApiError(0, "delete", "namespaces", "connection refused"))
    store = _run(tmp_path, modes=("native",), placements=("host-host",))
    assert store.read_meta()["status"] == "complete"
    assert "overlaybench down --kubeconfig removes it" in caplog.text


# ------------------------------------------------------------------ down
def _ns(name, pid, host=None):
    return {"name": name, "phase": "Active",
            "labels": {"app.kubernetes.io/managed-by": "overlaybench", "overlaybench/run": f"run-{name}",
                       "overlaybench/owner-pid": str(pid),
                       "overlaybench/owner-host": host or socket.gethostname()}}


@pytest.mark.parametrize("force, gone", [(False, {"overlaybench-dead"}),
                                         (True, {"overlaybench-dead", "overlaybench-live", "overlaybench-far"})])
def test_down_deletes_the_namespaces_whose_owner_is_gone(monkeypatch, capsys, tmp_path, force, gone):
    fake = FakeApi(namespaces=[_ns("overlaybench-dead", 2 ** 22 + 7), _ns("overlaybench-live", os.getpid()),
                               _ns("overlaybench-far", 1, host="elsewhere")])
    fake.namespaces["kube-system"] = {"name": "kube-system", "labels": {}, "phase": "Active"}
    monkeypatch.setattr(kube, "connect", lambda opts: fake)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))      # down --force empties /tmp of owned dirs
    assert main(["down", "--kubeconfig", str(tmp_path / "kc")] + (["--force"] if force else [])) == 0
    out = capsys.readouterr().out
    assert set(fake.deleted) == gone and "kube-system" in fake.namespaces
    assert "removed namespace overlaybench-dead (run run-overlaybench-dead)" in out
    if not force:
        assert "left namespace overlaybench-live (owned by running pid" in out
        assert "left namespace overlaybench-far (owned by elsewhere, which this machine cannot check; " \
               "--older-than AGE removes it once that old)" in out


def test_a_scenarios_testbed_pair_names_the_nodes_and_flags_win(api):
    from harness.run.scenario import from_command_line
    sc = from_command_line(None, {"testbed": {"backend": "kubernetes", "pair": ["node-b", "node-a"]},
                                  "matrix": {"modes": ["native"]}})
    tb = kube.open_testbed(sc, Options())
    assert [s.name for s in tb.sides] == ["node-b", "node-a"] and tb.sides[0].underlay_ip == "192.0.2.99"
    tb = kube.open_testbed(sc, Options(nodes=("node-a", "node-b")))
    assert [s.name for s in tb.sides] == ["node-a", "node-b"]
    assert not [c for c in api.calls if c[0].startswith("create_")]


def test_the_command_line_says_a_missing_kubeconfig_in_one_line(capsys, tmp_path):
    code = main(["run", "--kubeconfig", str(tmp_path / "nope"), "--modes", "native", "-q",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"overlaybench: no usable kubeconfig ({tmp_path / 'nope'}): ")
    assert not (tmp_path / "results").exists()


def test_a_lab_scenario_file_runs_unchanged_on_a_cluster(api, tmp_path, capsys, caplog):
    """scenarios/quick.toml names fastdp and sleeve and the underlay MTUs 1500 and 9000: on a
    cluster it measures native and cni at the nodes' MTU, and says what it left out."""
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c 192\.0\.2\.99 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    api.expect_start("c1", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.1\.5 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    quick = pathlib.Path(__file__).resolve().parents[2] / "scenarios" / "quick.toml"
    code = main(["run", str(quick), "--kubeconfig", str(tmp_path / "kubeconfig"), "--tests", "iperf3.tcp",
                 "--repeats", "1", "--duration", "1", "-q", "--results", str(tmp_path / "results")])
    assert code == 0, capsys.readouterr().err
    (run_dir,) = (tmp_path / "results").iterdir()
    rows = [json.loads(ln) for ln in (run_dir / "measurements.jsonl").read_text().splitlines()]
    assert {(r["mode"], r["placement"], r["underlay_mtu"]) for r in rows} == {
        ("native", "host-host", 1500), ("cni", "container-container", 1500)}
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("instead of the scenario's modes fastdp, sleeve" in m for m in said), said
    assert "underlay MTU 9000 left out: the kubernetes backend measures at the nodes' MTU, 1500" in said
    api.assert_clean()


@pytest.mark.parametrize("mtus, needle", [(("auto",), None), (("9000",), "underlay MTU 9000: the kubernetes "
                                                                  "backend measures at the nodes' MTU, 1500")])
def test_underlay_mtu_auto_is_the_nodes_and_another_is_refused(api, tmp_path, capsys, mtus, needle):
    _incidental(api)
    if needle is None:
        api.expect_start("h1", "iperf3 -s -1 -p 5201")
        api.expect_start("h0", re.compile(r"iperf3 -c 192\.0\.2\.99 -p 5201 .*"), returncode=0, stdout=IPERF,
                         runs=False)
    code = main(["run", "--kubeconfig", str(tmp_path / "kubeconfig"), "--modes", "native", "--underlay-mtu",
                 *mtus, "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1", "-q",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    if needle is None:
        assert code == 0, err
        (run_dir,) = (tmp_path / "results").iterdir()
        assert json.loads((run_dir / "run.json").read_text())["testbed"]["underlay_mtu"] == 1500
    else:
        assert code == 2 and err.count("\n") == 1 and needle in err, err
        assert api.deleted and not api.namespaces        # the pods made to read the MTU are gone
    api.assert_clean()


def test_underlay_mtu_auto_with_a_node_pod_that_cannot_run_is_one_line(api, tmp_path, capsys, monkeypatch):
    from harness.testbeds.kubernetes import backend
    monkeypatch.setattr(backend, "PULL_GRACE", 0.0)
    _incidental(api)
    api.pod_states["h0"] = [PULL]
    code = main(["run", "--kubeconfig", str(tmp_path / "kubeconfig"), "--modes", "native", "--underlay-mtu", "auto",
                 "--tests", "iperf3.tcp", "--repeats", "1", "--duration", "1", "-q",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "image localhost/overlaybench/tools:bookworm cannot be pulled on node node-a: ImagePullBackOff" in err
    assert api.deleted and not api.namespaces


def test_resume_on_a_cluster_finishes_what_is_missing(api, tmp_path, capsys):
    """--resume with --kubeconfig: the run's stored scenario (backend and modes) is used, a
    new namespace is made, and only the missing cases run."""
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c 192\.0\.2\.99 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    for _ in range(2):                                          # the cni case, then again on resume
        api.expect_start("c1", "iperf3 -s -1 -p 5201")
        api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.1\.5 -p 5201 .*"), returncode=0, stdout=IPERF,
                         runs=False)
    store = _run(tmp_path)
    store.unlock()                                              # as if its process had ended
    jsonl = store.path / "measurements.jsonl"
    jsonl.write_text("".join(ln + "\n" for ln in jsonl.read_text().splitlines() if '"mode": "cni"' not in ln))
    code = main(["run", "--resume", str(store.path), "--kubeconfig", str(tmp_path / "kc"), "-q"])
    assert code == 0, capsys.readouterr().err
    rows = _rows(store)
    assert sorted({(r["mode"], r["repeat"]) for r in rows}) == [("cni", 0), ("native", 0)]
    assert len(api.deleted) == 2 and not api.namespaces       # one namespace per attempt, both gone
    api.assert_clean()


# ------------------------------------------------------------------ an existing namespace
def _team_ns(api, level=None):
    labels = {"team": "net"} | ({"pod-security.kubernetes.io/enforce": level} if level else {})
    api.namespaces["bench"] = {"name": "bench", "labels": labels, "phase": "Active"}
    return dict(labels)


def test_a_run_in_an_existing_namespace_makes_and_deletes_only_its_own(api, tmp_path):
    before = _team_ns(api, "restricted")
    api.namespaces["bench"]["body"] = None
    _incidental(api)
    api.expect_start("c1", "iperf3 -s -1 -p 5201 -B 10.244.1.5")   # the pod behind the Service binds its own
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.96\.0\.12 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-service",), kube_namespace="bench")
    assert all(r["ok"] for r in _rows(store))
    assert not [c for c in api.calls if c[0] in ("create_namespace", "delete_namespace")]
    assert api.namespaces["bench"]["labels"] == before            # no label touched
    made = [c for c in api.calls if c[0] in ("create_pod", "create_service")]
    assert {c[1] for c in made} == {"bench"}
    assert all(c[2]["metadata"]["labels"]["overlaybench/run"] == store.read_meta()["run_id"] for c in made)
    deleted = sorted((c[1], c[3]) for c in api.calls if c[0] == "delete_object")
    assert deleted == [("pods", "c0"), ("pods", "c1"), ("services", "s0"), ("services", "s1")]
    assert not api.pods and not api.services
    asked = {(c[1], c[2]) for c in api.calls if c[0] == "allowed"}
    assert ("create", "namespaces") not in asked and ("delete", "pods") in asked and ("list", "nodes") in asked
    api.assert_clean()


def test_same_node_in_an_existing_namespace_deletes_its_second_pods_too(api, tmp_path):
    _team_ns(api, "restricted")
    _incidental(api)
    api.expect_start("l0", "iperf3 -s -1 -p 5201")
    api.expect_start("c0", re.compile(r"iperf3 -c 10\.244\.0\.7 -p 5201 .*"), returncode=0, stdout=IPERF, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("same-node",), kube_namespace="bench")
    assert all(r["ok"] for r in _rows(store))
    made = [c for c in api.calls if c[0] == "create_pod"]
    assert {c[1] for c in made} == {"bench"} and not api.services
    deleted = sorted((c[1], c[3]) for c in api.calls if c[0] == "delete_object")
    assert deleted == [("pods", "c0"), ("pods", "c1"), ("pods", "l0"), ("pods", "l1")]
    assert not api.pods and "bench" in api.namespaces
    api.assert_clean()


def test_host_network_in_a_restricted_namespace_is_one_line_naming_what_runs_there(api, tmp_path):
    _team_ns(api, "restricted")
    with pytest.raises(HarnessError) as e:
        _run(tmp_path, kube_namespace="bench")
    assert str(e.value) == ('namespace bench enforces Pod Security "restricted": hostNetwork pods (the native '
                            'reference, host-host, host-container) need a namespace admitting "privileged" pods; '
                            'there, --modes cni --placements container-container,container-service can run')
    _nothing_made(api, tmp_path)


def test_a_policy_denial_is_reported_as_the_policy_said(api, tmp_path):
    _team_ns(api)                                   # no label readable: admission decides
    msg = 'pods "h0" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)'
    api.fail("create_pod", ApiError(403, "create", "pods", "Forbidden", "bench", policy=msg))
    with pytest.raises(HarnessError) as e:
        _run(tmp_path, kube_namespace="bench")
    assert str(e.value).startswith(f"create pods in namespace bench denied by admission: {msg}; hostNetwork pods")
    assert "may not" not in str(e.value) and "bench" in api.namespaces


def test_down_in_an_existing_namespace_removes_dead_runs_objects_only(api, monkeypatch, capsys, tmp_path):
    _team_ns(api)
    dead = {"app.kubernetes.io/managed-by": "overlaybench", "overlaybench/prefix": "ob0001", "overlaybench/run": "r1",
            "overlaybench/owner-pid": str(2 ** 22 + 7), "overlaybench/owner-host": socket.gethostname()}
    live = dict(dead, **{"overlaybench/prefix": "ob0002", "overlaybench/run": "r2",
                         "overlaybench/owner-pid": str(os.getpid())})
    for name, labels in (("c0", dead), ("c1", live), ("theirs", {"app": "x"})):
        api.pods[("bench", name)] = {"metadata": {"name": name, "labels": labels}}
    api.services[("bench", "s0")] = {"metadata": {"name": "s0", "labels": dead}}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["down", "--kubeconfig", str(tmp_path / "kc"), "--namespace", "bench"]) == 0
    out = capsys.readouterr().out
    assert "removed in namespace bench: pod c0, service s0 (run r1)" in out
    assert "left in namespace bench: pod c1 (owned by running pid" in out
    assert set(api.pods) == {("bench", "c1"), ("bench", "theirs")} and "bench" in api.namespaces
    # down lists only what the existing namespace's Role of docs/kubernetes.md lets it list
    listed = {c[1] for c in api.calls if c[0] == "list_objects"}
    assert listed and listed <= _role_may("list"), listed


def _role_may(verb: str) -> set[str]:
    """The resources docs/kubernetes.md's Role for an existing namespace grants `verb` on."""
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", doc.split("### An existing namespace (`--namespace`)")[1], re.S).group(1)
    role = next(d for d in yaml.safe_load_all(block) if d["kind"] == "Role")
    return {r for rule in role["rules"] if verb in rule["verbs"] for r in rule["resources"]}


# ------------------------------------------------------------------ image pull secrets, the image's tools
REGCRED = {"kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/dockerconfigjson",
           "metadata": {"name": "regcred", "namespace": "default", "uid": "x", "resourceVersion": "7"},
           "data": {".dockerconfigjson": "e30="}}


def test_an_image_pull_secret_is_copied_into_the_run_namespace_and_carried(api, tmp_path):
    api.objects.append(REGCRED)
    _incidental(api)
    api.expect_start("h1", "iperf3 -s -1 -p 5201")
    api.expect_start("h0", re.compile(r"iperf3 -c .*"), returncode=0, stdout=IPERF, runs=False)
    _run(tmp_path, modes=("native",), placements=("host-host",), pull_secrets=("regcred",))
    (copy,) = [c for c in api.calls if c[0] == "create_object"]
    assert copy[1:3] == ("secrets", [c for c in api.calls if c[0] == "create_namespace"][0][1]["metadata"]["name"])
    assert copy[3]["data"] == REGCRED["data"] and copy[3]["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert "uid" not in copy[3]["metadata"] and "namespace" not in copy[3]["metadata"]
    pods = [c[2] for c in api.calls if c[0] == "create_pod"]
    assert all(p["spec"]["imagePullSecrets"] == [{"name": "regcred"}] for p in pods)
    assert not api.namespaces
    api.assert_clean()


def test_a_missing_image_pull_secret_is_one_line_and_nothing_is_made(api, tmp_path):
    api.current_namespace = "team"
    with pytest.raises(HarnessError, match=r"^--image-pull-secret nope: no secret nope in namespace team or default "
                                           r"\(or this kubeconfig's user may not read it\)$"):
        _run(tmp_path, pull_secrets=("nope",))
    _nothing_made(api, tmp_path)


def test_a_test_whose_tool_the_image_lacks_is_refused_before_anything_is_made(api, tmp_path, monkeypatch):
    from harness.testbeds.kubernetes import specs
    monkeypatch.setattr(specs, "IMAGE_TOOLS", specs.IMAGE_TOOLS - {"irtt"})
    with pytest.raises(HarnessError, match=r"^test irtt\.udp needs irtt, which the image localhost/overlaybench/tools:bookworm "
                                           r"does not hold \(it holds "):
        session.run(overrides={"matrix": {"modes": ["native"], "placements": ["host-host"], "tests": ["irtt.udp"],
                                          "repeats": 1, "duration": 1}, "testbed": {"backend": "kubernetes"}},
                    results_dir=str(tmp_path / "results"), quiet=True, options=Options())
    _nothing_made(api, tmp_path)


def test_blast_runs_from_the_image_in_pods_a_restricted_namespace_admits(api, tmp_path):
    """udp.pps64 on a cluster: the tools image's blast, by its name on PATH (nothing built or
    copied here), its receiver waited for on its UDP port; the pods need no capability."""
    _incidental(api)
    out, err = ((DATA / f"blast_pps64.{x}").read_text() for x in ("out", "err"))
    api.allow_exec("c1", ["ss", "-Hlun", "sport = :9000"], stdout="UNCONN 0 0 *:9000 *:*\n")
    api.expect_start("c1", re.compile(r"blast recv --port 9000 --flows 4 .*"))
    api.expect_start("c0", re.compile(r"blast send --addr 10\.244\.1\.5 --port 9000 .*--size 64 .*"), returncode=0,
                     stdout=out, stderr=err, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-container",), tests=("udp.pps64",))
    rows = _rows(store)
    assert rows and all(r["ok"] for r in rows) and "pps" in {r["metric"] for r in rows}, rows
    pods = [c[2] for c in api.calls if c[0] == "create_pod"]
    assert all(psa.violations(p, "restricted") == [] for p in pods)
    assert store.read_meta()["testbed"]["pod_security"] == "restricted"
    api.assert_clean()


def test_blast_runs_through_a_service_on_every_flows_port(api, tmp_path):
    """udp.pps64 with container-service: blast's receiver in the pod behind the Service,
    bound to the pod's own address, the sender to the Service's ClusterIP from its
    first port; the Service carries each of its four flows' ports (UDP), so no flow is one
    kube-proxy has no rule for, and the report comes back over the flow (conntrack)."""
    _incidental(api)
    out, err = ((DATA / f"blast_pps64.{x}").read_text() for x in ("out", "err"))
    api.allow_exec("c1", ["ss", "-Hlun", "sport = :9000"], stdout="UNCONN 0 0 10.244.1.5:9000 *:*\n")
    api.expect_start("c1", re.compile(r"blast recv --port 9000 --flows 4 .*--addr 10\.244\.1\.5$"))
    api.expect_start("c0", re.compile(r"blast send --addr 10\.96\.0\.12 --port 9000 --flows 4 .*--size 64 .*"),
                     returncode=0, stdout=out, stderr=err, runs=False)
    store = _run(tmp_path, modes=("cni",), placements=("container-service",), tests=("udp.pps64",))
    rows = _rows(store)
    assert rows and all(r["ok"] for r in rows) and "pps" in {r["metric"] for r in rows}, rows
    assert {r["placement"] for r in rows} == {"container-service"}
    for svc in api.calls_of("create_service"):
        carried = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
        assert {("UDP", 9000 + f) for f in range(4)} <= carried
    assert all(psa.violations(p, "restricted") == [] for p in api.calls_of("create_pod"))
    api.assert_clean()


def test_the_image_recipe_holds_every_tool_a_cluster_test_needs():
    from harness import tools
    from harness.testbeds.kubernetes import specs
    # a tool the project builds itself (blast) is no package: the image compiles it in a stage of its own
    packaged = {t.binary for t in tools.TOOLS.values() if not t.builds}
    assert packaged <= specs.IMAGE_TOOLS
    assert not {t.binary for t in tools.TOOLS.values() if t.builds} & specs.IMAGE_TOOLS
    assert {t.binary for t in tools.TOOLS.values() if t.builds} <= specs.IMAGE_BUILT      # its own stage builds them
    assert "blast" in (pathlib.Path(__file__).resolve().parents[2] / "images" / "tools.Containerfile").read_text()
    recipe = (pathlib.Path(__file__).resolve().parents[2] / "images" / "rootfs.packages").read_text().split()
    assert {"iperf3", "qperf", "sockperf", "iputils-ping", "iperf", "irtt"} <= set(recipe)


def test_down_older_than_removes_other_machines_leftovers_by_age(monkeypatch, capsys, tmp_path):
    import time
    old, new = _ns("overlaybench-old", 1, host="crashed"), _ns("overlaybench-new", 1, host="busy")
    old["created"], new["created"] = time.time() - 3 * 3600, time.time() - 600
    fake = FakeApi(namespaces=[old, new, _ns("overlaybench-live", os.getpid())])
    monkeypatch.setattr(kube, "connect", lambda opts: fake)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["down", "--kubeconfig", str(tmp_path / "kc"), "--older-than", "2h"]) == 0
    out = capsys.readouterr().out
    assert fake.deleted == ["overlaybench-old"]
    assert "left namespace overlaybench-new (owned by busy, which this machine cannot check)" in out
    assert "left namespace overlaybench-live (owned by running pid" in out


def test_down_older_than_bad_age_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["down", "--kubeconfig", str(tmp_path / "kc"), "--older-than", "soon"])
    assert e.value.code == 2 and "'soon': not an age such as 30m, 2h or 1d" in capsys.readouterr().err
