"""The kubernetes backend on a fleet, end to end on a fake API (tests/scripted_kube.py): the
nodes --node-selector leaves, pairs across zones and the zones run.json records, both pods
of a pair on one node (--same-node), the tools' ports and the Services' moved by
--port-base, and bad input as the command line says it. No cluster, no root."""

import json
import pathlib
import re

import pytest

from harness.bed import Options
from harness.cli import main
from harness.core.errors import HarnessError
from harness.run import session
from harness.testbeds import kubernetes as kube
from harness.testbeds.kubernetes import found
from scripted_kube import FakeApi, node

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
IPERF = (DATA / "iperf3_tcp_1.out").read_text()
LINKS = (DATA / "kube" / "ip_d_link_flannel_vxlan.txt").read_text()
PROXY_MODE = (DATA / "kube" / "proxymode_iptables.out").read_text()     # kube-proxy's answer
STAT = "cpu  100 0 100 1000 0 0 0 0 0 0\n"
FLANNEL = {"kube-flannel": [{"name": "kube-flannel-ds", "images": ["ghcr.io/flannel-io/flannel:v0.26.7"]}]}
FLEET = [node("node-a", zone="eu-1a", labels={"pool": "web"}), node("node-b", zone="eu-1a", labels={"pool": "perf"}),
         node("node-c", zone="eu-1b", labels={"pool": "perf"}), node("node-d", zone="eu-1c", labels={"pool": "perf"})]


@pytest.fixture
def api(monkeypatch):
    fake = FakeApi(nodes=list(FLEET), daemonsets=FLANNEL)
    monkeypatch.setattr(kube, "connect", lambda opts: fake)
    return fake


def _incidental(api: FakeApi, picked: list[str], port: int = 5201) -> None:
    """What the pods of the sides on the nodes `picked` answer whatever the case."""
    for i, name in enumerate(picked):
        n = next(x for x in api.nodes if x.name == name)
        api.allow_exec(f"h{i}", "ip -o -4 addr show", stdout=f"2: eth0    inet {n.address}/24 brd x scope global eth0\n")
        api.allow_exec(f"h{i}", "cat /sys/class/net/eth0/mtu", stdout="1500\n")
        api.allow_exec(f"h{i}", "ip -d -o link show", stdout=LINKS)
        api.allow_exec(f"h{i}", found.PROXY_MODE_ARGV, stdout=PROXY_MODE)
        for pod in (f"h{i}", f"c{i}", f"l{i}"):
            api.allow_exec(pod, re.compile(r"env 'SYSCTLS=.*|iperf3 --version|qperf --version|ping -V|ip -V", re.S))
            api.allow_exec(pod, "cat /proc/stat", stdout=STAT)
            api.allow_exec(pod, re.compile(r"ethtool -k \S+"))
            api.allow_exec(pod, ["ss", "-Hltn", f"sport = :{port}"], stdout=f"LISTEN 0 5 *:{port} *:*\n")
        api.allow_exec(f"c{i}", "cat /sys/class/net/eth0/mtu", stdout="1450\n")
        api.allow_exec(f"c{i}", "ip -o route show default", stdout="default via 10.244.0.1 dev eth0 \n")


def _run(tmp_path, modes=("cni",), placements=("container-container",), pairs=None, schedule=None,
         tests=("iperf3.tcp",), **opts):
    matrix = {"modes": list(modes), "placements": list(placements), "tests": list(tests), "repeats": 1,
              "duration": 1, **({"pairs": pairs} if pairs else {}), **({"schedule": schedule} if schedule else {})}
    return session.run(overrides={"matrix": matrix, "testbed": {"backend": "kubernetes"}},
                       results_dir=str(tmp_path / "results"), quiet=True, options=Options(**opts))


def _rows(store) -> list[dict]:
    return [json.loads(ln) for ln in (store.path / "measurements.jsonl").read_text().splitlines()]


def _pods(api: FakeApi) -> dict[str, tuple[str, bool]]:
    """Every pod made: its node and whether it is a hostNetwork pod."""
    return {c[2]["metadata"]["name"]: (c[2]["spec"]["nodeName"], c[2]["spec"]["hostNetwork"])
            for c in api.calls if c[0] == "create_pod"}


def _iperf(api: FakeApi, server: str, client: str, addr: str, port: int = 5201, bind: str = "") -> None:
    """One iperf3 case; `bind`: the server pod's own address, which a server behind a Service binds."""
    api.expect_start(server, f"iperf3 -s -1 -p {port}" + (f" -B {bind}" if bind else ""))
    api.expect_start(client, re.compile(rf"iperf3 -c {re.escape(addr)} -p {port} .*"), returncode=0, stdout=IPERF,
                     runs=False)


# ------------------------------------------------------------------ --node-selector
def test_the_selector_leaves_only_matching_nodes_to_measure_between(api, tmp_path):
    # by name alone the pair is node-a and node-b; node-a is pool=web
    _incidental(api, ["node-b", "node-c"])
    _iperf(api, "h1", "h0", "192.0.2.100")           # node-c's address (the fake's: its name's last letter)
    _iperf(api, "c1", "c0", "10.244.1.5")
    store = _run(tmp_path, modes=("native", "cni"), placements=("host-host", "container-container"),
                 node_selector=("pool=perf",))
    assert all(r["ok"] for r in _rows(store))
    assert _pods(api) == {"h0": ("node-b", True), "c0": ("node-b", False), "h1": ("node-c", True),
                          "c1": ("node-c", False)}
    tb = store.read_meta()["testbed"]
    assert tb["nodes"] == {"selector": {"pool": "perf"}, "across_zones": False, "same_node": False}
    assert not api.namespaces
    api.assert_clean()


# ------------------------------------------------------------------ --across-zones
def test_across_zones_pairs_nodes_of_different_zones_and_records_each_zone(api, tmp_path):
    # by name alone: node-a and node-b, both eu-1a
    _incidental(api, ["node-a", "node-c"])
    _iperf(api, "c1", "c0", "10.244.1.5")
    store = _run(tmp_path, across_zones=True)
    assert all(r["ok"] for r in _rows(store))
    assert _pods(api) == {"c0": ("node-a", False), "c1": ("node-c", False)}
    hosts = store.read_meta()["testbed"]["hosts"]
    assert {h: (v["node"], v["zone"]) for h, v in hosts.items()} == {"h0": ("node-a", "eu-1a"),
                                                                       "h1": ("node-c", "eu-1b")}
    assert all(v["instance_type"] is None and v["kernel"] is None for v in hosts.values())   # the fake's nodes have neither
    api.assert_clean()


def test_three_zones_every_pair_crosses_and_is_measured_by_node_name(api, tmp_path):
    # a run with no host end: each side's host is its pod, under the node's name (the pairs name nodes)
    _incidental(api, ["node-a", "node-c", "node-d"])
    _iperf(api, "c1", "c0", "10.244.1.5")
    _iperf(api, "c2", "c0", "10.244.2.5")
    _iperf(api, "c2", "c1", "10.244.2.5")
    store = _run(tmp_path, across_zones=True, node_count=3)
    rows = [r for r in _rows(store) if r["metric"] == "throughput_bps"]
    assert all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert sorted(r["pair"] for r in rows) == ["node-a→node-c", "node-a→node-d", "node-c→node-d"]
    zone = {v["name"]: v["zone"] for v in store.read_meta()["testbed"]["hosts"].values()}
    assert zone == {"node-a": "eu-1a", "node-c": "eu-1b", "node-d": "eu-1c"}
    for r in rows:
        src, dst = r["pair"].split("→")
        assert zone[src] != zone[dst]
    api.assert_clean()


def test_across_zones_in_one_zone_is_one_line_naming_it_and_nothing_is_made(api, tmp_path, capsys):
    api.nodes = [node("node-a", zone="eu-1a"), node("node-b", zone="eu-1a"), node("node-x")]
    code = main(["run", "--kubeconfig", str(tmp_path / "kc"), "--modes", "cni", "--across-zones", "-q",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err == ("overlaybench: --across-zones: the Ready, schedulable nodes span 1 zone (eu-1a) "
                                 "and 1 node without a topology.kubernetes.io/zone label; a pair across zones "
                                 "needs two\n")
    assert not [c for c in api.calls if c[0].startswith("create_")]


# ------------------------------------------------------------------ --same-node
def test_same_node_pins_both_pods_of_the_pair_to_one_node(api, tmp_path):
    _incidental(api, ["node-b", "node-b"])
    _iperf(api, "c1", "c0", "10.244.1.5")
    _iperf(api, "c1", "c0", "10.96.0.12", bind="10.244.1.5")     # the second Service: s1, in front of c1
    store = _run(tmp_path, placements=("container-container", "container-service"), same_node=True,
                 node_selector=("pool=perf",))
    rows = _rows(store)
    assert all(r["ok"] for r in rows) and {r["placement"] for r in rows} == {"container-container",
                                                                             "container-service"}
    assert _pods(api) == {"c0": ("node-b", False), "c1": ("node-b", False)}      # no hostNetwork pod at all
    assert {s["spec"]["selector"]["overlaybench/side"] for s in api.calls_of("create_service")} == {"c0", "c1"}
    tb = store.read_meta()["testbed"]
    assert tb["nodes"]["same_node"] is True and tb["host_network"] is False
    assert {h: (v["name"], v["node"]) for h, v in tb["hosts"].items()} == {"h0": ("node-b/c0", "node-b"),
                                                                          "h1": ("node-b/c1", "node-b")}
    api.assert_clean()


def test_same_node_flag_and_placement_put_four_pods_on_the_one_node(api, tmp_path):
    """--same-node with the same-node placement: c0, c1, l0 and l1 all on the one node; the
    same-node case is c0 to l0 (beside it), container-container c0 to c1."""
    _incidental(api, ["node-a", "node-a"])
    _iperf(api, "c1", "c0", "10.244.1.5")
    _iperf(api, "l0", "c0", "10.244.0.7")
    store = _run(tmp_path, placements=("container-container", "same-node"), same_node=True)
    rows = _rows(store)
    assert all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert {r["placement"] for r in rows} == {"container-container", "same-node"}
    assert _pods(api) == {"c0": ("node-a", False), "c1": ("node-a", False), "l0": ("node-a", False),
                          "l1": ("node-a", False)}
    hosts = store.read_meta()["testbed"]["hosts"]
    assert {h: (v["name"], v["neighbour"], v["neighbour_ip"]) for h, v in hosts.items()} == {
        "h0": ("node-a/c0", "l0", "10.244.0.7"), "h1": ("node-a/c1", "l1", "10.244.1.7")}
    api.assert_clean()


def test_same_node_on_a_fleet_serves_each_client_from_its_own_node(api, tmp_path):
    """Three nodes, every pair in rounds: each pair's same-node case is its client's pod to
    the second pod on the client's node, whichever node the pair's server is on."""
    _incidental(api, ["node-a", "node-c", "node-d"])
    for i in range(3):
        api.allow_exec(f"l{i}", re.compile(r"ss -Hltn 'sport = :520[0-9]'"), stdout="LISTEN 0 5 *:5201 *:*\n")
    for server, client, addr in (("l0", "c0", "10.244.0.7"), ("l0", "c0", "10.244.0.7"), ("l1", "c1", "10.244.1.7")):
        api.expect_start(server, re.compile(r"iperf3 -s -1 -p 520[0-9]"))
        api.expect_start(client, re.compile(rf"iperf3 -c {re.escape(addr)} -p 520[0-9] .*"), returncode=0,
                         stdout=IPERF, runs=False)
    store = _run(tmp_path, placements=("same-node",), schedule="rounds", across_zones=True, node_count=3)
    rows = [r for r in _rows(store) if r["metric"] == "throughput_bps"]
    assert len(rows) == 3 and all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert sorted(r["pair"] for r in rows) == ["node-a→node-c", "node-a→node-d", "node-c→node-d"]
    assert sorted(_pods(api)) == ["c0", "c1", "c2", "l0", "l1", "l2"]
    api.assert_clean()


def test_same_node_with_a_host_end_is_refused_before_the_api_is_reached(monkeypatch, tmp_path):
    monkeypatch.setattr(kube, "connect", lambda opts: pytest.fail("the API was reached"))
    with pytest.raises(HarnessError, match=r"^--same-node: mode native's placement host-host has a host end; on one "
                                           r"node the run makes pod-network pods only: --modes cni "):
        _run(tmp_path, modes=("native", "cni"), placements=("host-host", "container-container"), same_node=True)


# ------------------------------------------------------------------ --port-base
def test_port_base_moves_the_services_and_the_tools_ports(api, tmp_path):
    _incidental(api, ["node-a", "node-b"], port=30000)
    _iperf(api, "c1", "c0", "10.96.0.12", port=30000, bind="10.244.1.5")
    store = _run(tmp_path, placements=("container-service",), port_base=30000)
    assert all(r["ok"] for r in _rows(store))
    (s0, s1) = api.calls_of("create_service")
    ports = [(p["port"], p["targetPort"], p["protocol"]) for p in s1["spec"]["ports"]]
    assert {p for p, _t, _ in ports} == {30000, 30002, 30003, 30004, 30005, 30006, 30008, 30009,
                                         30010, 30011, 30012, 30013}            # blast: a port per flow
    assert all(p == t for p, t, _ in ports) and len(ports) == 24                    # TCP and UDP each
    assert not {5201, 19765, 19766, 11111, 11112, 5001, 2112} & {p["port"] for p in s0["spec"]["ports"]}
    assert store.read_meta()["testbed"]["tool_ports"]["iperf3"] == [30000, None]
    api.assert_clean()


def test_port_base_moves_the_host_network_pods_ports_too(api, tmp_path):
    _incidental(api, ["node-a", "node-b"], port=40000)
    _iperf(api, "h1", "h0", "192.0.2.99", port=40000)
    store = _run(tmp_path, modes=("native",), placements=("host-host",), port_base=40000)
    assert all(r["ok"] for r in _rows(store)) and not api.services
    api.assert_clean()


def test_a_mesh_across_zones_serves_each_pair_on_its_own_moved_port_through_the_services(api, tmp_path):
    """Three pairs at once: two servers in one pod (c2, for node-a→node-d and node-c→node-d),
    each on the port its place in the set gives it, and every one of them a port the
    Services carry. A layout that gave a tool fewer ports than the pairs at once would
    hand the third pair the next tool's port; a Service sized for one pair would not
    carry it."""
    _incidental(api, ["node-a", "node-c", "node-d"], port=30000)
    for i in range(3):
        api.allow_exec(f"c{i}", re.compile(r"ss -Hltn 'sport = :3000[024]'"), stdout="LISTEN 0 5 *:30000 *:*\n")
    for server in ("c1", "c2", "c2"):
        api.expect_start(server, re.compile(r"iperf3 -s -1 -p 3000[024] -B 10\.244\.[12]\.5"))
    for client in ("c0", "c0", "c1"):
        api.expect_start(client, re.compile(r"iperf3 -c 10\.96\.0\.1[23] -p 3000[024] .*"), returncode=0,
                         stdout=IPERF, runs=False)
    store = _run(tmp_path, placements=("container-service",), schedule="mesh", across_zones=True, node_count=3,
                 port_base=30000)
    rows = [r for r in _rows(store) if r["metric"] == "throughput_bps"]
    assert len(rows) == 3 and all(r["ok"] for r in rows), [r["error"] for r in rows]
    served = [a[a.index("iperf3"):] for a in (c[3] for c in api.calls if c[0] == "exec") if "iperf3" in a]
    ports = sorted(int(a[a.index("-p") + 1]) for a in served if a[1] == "-s")
    assert ports == [30000, 30002, 30004]                       # a port per place in the set, none shared
    services = api.calls_of("create_service")
    assert len(services) == 3
    for svc in services:
        carried = {p["port"] for p in svc["spec"]["ports"]}
        assert set(ports) <= carried and {30006, 30007, 30008, 30009, 30010, 30011} <= carried     # qperf's block
        assert {30024, 30025, 30028, 30029} <= carried             # irtt's, its data's last: 30025 + 2 × 2
        assert max(carried) == 30000 + 14 * 3 - 1                   # blast's third receiver's last flow
    assert store.read_meta()["testbed"]["tool_ports"]["qperf"] == [30006, 30007]
    api.assert_clean()


def test_a_mesh_of_blast_through_the_services_gives_each_receiver_a_block_the_services_carry(api, tmp_path):
    """udp.pps64 for three pairs at once behind the Services, from --port-base: each pair's
    receiver binds four ports (a flow each) from its own first, FLOWS apart past irtt's
    block, and every Service carries all twelve. Blocks sized like the other tools' (2 ×
    pairs) would have the second receiver bind the first's flows; a Service without a
    flow's port would leave kube-proxy no rule for its datagrams."""
    _incidental(api, ["node-a", "node-c", "node-d"], port=30000)
    out = (DATA / "blast_pps64.out").read_text()
    for i in range(3):
        api.allow_exec(f"c{i}", re.compile(r"ss -Hlun 'sport = :300(30|34|38)'"), stdout="UNCONN 0 0 *:30030 *:*\n")
    for server in ("c1", "c2", "c2"):
        api.expect_start(server, re.compile(r"blast recv --port 300(30|34|38) --flows 4 .*--addr 10\.244\.[12]\.5$"))
    for client in ("c0", "c0", "c1"):
        api.expect_start(client, re.compile(r"blast send --addr 10\.96\.0\.1[23] --port 300(30|34|38) --flows 4 .*"),
                         returncode=0, stdout=out, runs=False)
    store = _run(tmp_path, placements=("container-service",), schedule="mesh", across_zones=True, node_count=3,
                 port_base=30000, tests=("udp.pps64",))
    rows = [r for r in _rows(store) if r["metric"] == "pps"]
    assert len(rows) == 3 and all(r["ok"] for r in rows), [r["error"] for r in rows]
    served = [a[a.index("blast"):] for a in (c[3] for c in api.calls if c[0] == "exec") if "blast" in a]
    firsts = sorted(int(a[a.index("--port") + 1]) for a in served if a[1] == "recv")
    assert firsts == [30030, 30034, 30038]                      # FLOWS apart: no receiver's flows another's
    flows = {p + f for p in firsts for f in range(4)}
    for svc in api.calls_of("create_service"):
        carried = {(p["protocol"], p["port"]) for p in svc["spec"]["ports"]}
        assert {("UDP", p) for p in flows} <= carried
    assert store.read_meta()["testbed"]["tool_ports"]["blast"] == [30030, None]
    api.assert_clean()


# ------------------------------------------------------------------ the command line
@pytest.mark.parametrize("argv, line", [
    (["--port-base", "80"], "--port-base 80: below 1024 (the pods run as non-root); give one from 1024 to 65522"),
    (["--node-selector", "pool"], "--node-selector pool: not KEY=VALUE of a node label"),
    (["--nodes", "node-a,node-b", "--node-selector", "pool=perf"], "--node-selector with the nodes named"),
    (["--same-node", "--across-zones"], "--same-node and --across-zones: both ends on one node cannot be in"),
    (["--same-node", "--modes", "native"], "--same-node: mode native's placement host-host has a host end"),
    (["--node-selector", "pool=gpu"], "the cluster has 0 Ready, schedulable nodes matching --node-selector "
                                      "pool=gpu (none); the run needs 2"),
])
def test_bad_fleet_flags_are_one_line_exit_2(api, tmp_path, capsys, argv, line):
    code = main(["run", "--kubeconfig", str(tmp_path / "kc"), "--modes", "cni", *argv, "-q",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"overlaybench: {line}"), err
    assert not [c for c in api.calls if c[0].startswith("create_")]
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("flag", [["--node-selector", "a=b"], ["--across-zones"], ["--same-node"],
                                  ["--port-base", "30000"], ["--port-base", "0"]])
def test_fleet_flags_are_the_kubernetes_backends_only(tmp_path, capsys, flag):
    code = main(["run", *flag, "-q", "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"overlaybench: {flag[0]} is the kubernetes backend's; name it with --backend "
                                 f"kubernetes or --kubeconfig\n")
    code = main(["run", "--backend", "ssh", *flag, "-q", "--results", str(tmp_path / "results")])
    assert code == 2 and capsys.readouterr().err == f"overlaybench: {flag[0]} is the kubernetes backend's; this " \
                                                    f"is --backend ssh\n"


def test_a_port_base_that_is_no_number_is_argparses_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--kubeconfig", str(tmp_path / "kc"), "--port-base", "x"])
    assert e.value.code == 2 and "argument --port-base: 'x': not a port number" in capsys.readouterr().err
