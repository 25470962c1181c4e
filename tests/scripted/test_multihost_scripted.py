"""Three hosts on ScriptedHosts: fastdp makes every host a peer of the others, the runner
measures each pair with the pair's own client and server, and every line says its pair.

The commands are scripted exactly (harness/hosts/scripted.py), so these run without root
and without chance; the real three- and four-host labs are tests/lab/test_hosts_lab.py.
"""

from __future__ import annotations

import re

import pytest
from captures import capture
from scripted_fixtures import forbid_sleep, lab_testbed
from scripted_modes import LAB, overlay_path

from harness import modes
from harness.core.errors import HarnessError
from harness.hosts.scripted import ScriptedProcess
from harness import results
from harness.run import scenario as S, session
from harness.run.runner import Runner

OFFLOADS = "Features for dev:\ngeneric-segmentation-offload: on\n"


@pytest.fixture
def tb3(tmp_path, monkeypatch):
    forbid_sleep(monkeypatch)
    bed = lab_testbed(tmp_path, hosts=3)
    for h in bed.hosts:
        h.allow(re.compile(r"ethtool -k \S+"), stdout=OFFLOADS)
    return bed


def test_fastdp_gives_each_host_one_flooding_entry_per_peer(tb3):
    n = LAB[0]
    for s in tb3.sides:
        h = s.host
        peers = [p.underlay_ip for p in tb3.sides if p is not s]
        h.expect(f"ip link add vx0 type vxlan id 42 dstport 4789 local {s.underlay_ip} dev ul0 nolearning")
        for ip in peers:
            h.expect(f"bridge fdb append 00:00:00:00:00:00 dev vx0 dst {ip}")
        overlay_path(s, n, 1450, "vx0")
        h.expect("ip link set vx0 master br0 up")
        fdb = "".join(f"00:00:00:00:00:00 dst {ip} self permanent\n" for ip in peers)
        for _ in peers:
            h.expect("bridge fdb show dev vx0", stdout=fdb)
    dp = modes.get("fastdp").deploy(tb3, 1450)
    tb3.assert_all_used()
    assert sorted(dp.devices) == [0, 1, 2]


def test_a_duplicate_entry_for_one_of_two_peers_fails_the_deploy(tb3):
    s = tb3.sides[0]
    for h in tb3.hosts:
        h.allow(re.compile(r"(ip (neigh|link) .*)|(bridge fdb append .*)"))
    twice = "00:00:00:00:00:00 dst 198.18.0.2 self permanent\n" * 2 + "00:00:00:00:00:00 dst 198.18.0.3 self permanent\n"
    s.host.expect("bridge fdb show dev vx0", stdout=twice)
    with pytest.raises(HarnessError, match=r"h0: vx0 has 2 default FDB entries for 198.18.0.2, expected exactly 1"):
        modes.get("fastdp").deploy(tb3, 1450)


def _serve_and_measure(server, client, addr):
    out, err = capture("iperf3_tcp_1")
    srv = ScriptedProcess.runs()
    server.expect_start("iperf3 -s -1 -p 5201", srv)
    server.expect(["ss", "-Hltn", "sport = :5201"], stdout="LISTEN 0 5 *:5201 *:*\n")
    client.expect_start(f"iperf3 -c {addr} -p 5201 -t 2 -J -P 1", ScriptedProcess.exits(0, out, err, cpu_seconds=0.5))


def test_every_pair_is_measured_by_its_own_hosts_and_its_lines_name_the_pair(tb3, tmp_path):
    sc = S.build({"matrix": {"modes": ["native"], "repeats": 1, "duration": 2, "placements": ["host-host"],
                             "tests": ["iperf3.tcp"], "pairs": "all"}, "testbed": {"lab_hosts": 3}})
    pairs = session.host_pairs(sc, tb3)
    assert pairs == [("h0", "h1"), ("h0", "h2"), ("h1", "h2")]
    by = {s.name: s for s in tb3.sides}
    for a, b in pairs:
        _serve_and_measure(by[b].host, by[a].host, by[b].underlay_ip)
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb3, store).run(S.expand(sc, pairs))
    tb3.assert_all_used()
    tp = [r for r in store.records() if r["metric"] == "throughput_bps"]
    assert [(r["src_host"], r["dst_host"], r["pair"]) for r in tp] == [
        ("h0", "h1", "h0→h1"), ("h0", "h2", "h0→h2"), ("h1", "h2", "h1→h2")]
    assert tp[1]["case"] == "native/u1500/o1500/host-host/iperf3.tcp/p1/h0-h2"
    assert tb3.meter.cases == [("h0", "h1"), ("h0", "h2"), ("h1", "h2")]


def test_a_run_of_one_pair_has_no_pair_dimension(tmp_path):
    two = lab_testbed(tmp_path)
    sc = S.build({"matrix": {"modes": ["native"]}})
    assert session.host_pairs(sc, two) is None
    assert session.host_pairs(S.build({"matrix": {"pairs": "h1-h0"}}), two) == [("h1", "h0")]


def test_a_mode_between_two_hosts_only_is_refused_on_three(tb3):
    sc = S.build({"matrix": {"modes": ["native", "sleeve", "auto", "flannel-vxlan"]}})
    with pytest.raises(HarnessError, match=r"^mode flannel-vxlan runs between two hosts only; this testbed has 3 "
                                           r"\(modes across more: native, fastdp, auto, sleeve, "):
        session.host_pairs(sc, tb3)
    with pytest.raises(HarnessError, match=r"^x.toml: \[matrix\] pairs: 'h0-h7' names the unknown host 'h7'"):
        session.host_pairs(S.build({"matrix": {"modes": ["native"], "pairs": ["h0-h7"]}}, source="x.toml"), tb3)


def _lab4(tmp_path, monkeypatch, journal):
    forbid_sleep(monkeypatch)
    bed = lab_testbed(tmp_path, hosts=4, journal=journal)
    for h in bed.hosts:
        h.allow(re.compile(r"ethtool -k \S+"), stdout=OFFLOADS)
    return bed


def _serve(server, port):
    srv = ScriptedProcess.runs()
    server.expect_start(f"iperf3 -s -1 -p {port}", srv)
    server.expect(["ss", "-Hltn", f"sport = :{port}"], stdout=f"LISTEN 0 5 *:{port} *:*\n")


def _client(client, addr, port):
    out, err = capture("iperf3_tcp_1")
    client.expect_start(f"iperf3 -c {addr} -p {port} -t 2 -J -P 1", ScriptedProcess.exits(0, out, err))


def _run(sc, tb, tmp_path, pairs):
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store).run(S.expand(sc, pairs))
    tb.assert_all_used()
    return [r for r in store.records() if r["metric"] == "throughput_bps"]


def _starts(journal):
    """The journal's tool starts as (host, "server"/"client", port)."""
    out = []
    for host, call in journal:
        if call.kind == "start" and call.argv[0] == "iperf3":
            out.append((host, "server" if "-s" in call.argv else "client", int(call.argv[call.argv.index("-p") + 1])))
    return out


def test_rounds_measure_disjoint_pairs_at_once_every_server_listening_first(tmp_path, monkeypatch):
    """Four hosts, all six pairs in the three rounds of the circle method; in each round the
    two pairs' servers take ports 5201 and 5203 and both listen before either client starts."""
    journal: list = []
    tb = _lab4(tmp_path, monkeypatch, journal)
    sc = S.build({"matrix": {"modes": ["native"], "repeats": 1, "duration": 2, "placements": ["host-host"],
                             "tests": ["iperf3.tcp"], "schedule": "rounds"}, "testbed": {"lab_hosts": 4}})
    pairs = session.host_pairs(sc, tb)
    by = {s.name: s for s in tb.sides}
    rounds = [[("h0", "h3"), ("h1", "h2")], [("h0", "h2"), ("h1", "h3")], [("h0", "h1"), ("h2", "h3")]]
    for r in rounds:
        for k, (a, b) in enumerate(r):
            _serve(by[b].host, 5201 + 2 * k)
        for k, (a, b) in enumerate(r):
            _client(by[a].host, by[b].underlay_ip, 5201 + 2 * k)
    tp = _run(sc, tb, tmp_path, pairs)
    assert [r["pair"] for r in tp] == [f"{a}→{b}" for r in rounds for a, b in r]
    assert all(r["ok"] for r in tp) and not any(r["metric"].startswith("cpu_") for r in tp)
    lines = results.RunStore.open(next((tmp_path / "results").iterdir())).records()
    assert {r["lines"] for r in lines} == {len(lines) // 3}, "each round's lines are one batch"
    starts = _starts(journal)
    for i in range(3):
        assert [kind for _h, kind, _p in starts[4 * i:4 * i + 4]] == ["server", "server", "client", "client"]


def test_a_mesh_measures_every_pair_at_once_and_a_server_that_never_listens_fails_alone(tmp_path, monkeypatch):
    tb = _lab4(tmp_path, monkeypatch, None)
    sc = S.build({"matrix": {"modes": ["native"], "repeats": 1, "duration": 2, "placements": ["host-host"],
                             "tests": ["iperf3.tcp"], "schedule": "mesh", "pairs": "star:h0"},
                  "testbed": {"lab_hosts": 4}})
    pairs = session.host_pairs(sc, tb)
    assert pairs == [("h0", "h1"), ("h0", "h2"), ("h0", "h3")]
    by = {s.name: s for s in tb.sides}
    _serve(by["h1"].host, 5201)
    dead = ScriptedProcess.exits(1, "", "iperf3: error - unable to start listener for connections: Address in use\n")
    by["h2"].host.expect_start("iperf3 -s -1 -p 5203", dead)
    _serve(by["h3"].host, 5205)
    _client(by["h0"].host, "198.18.0.2", 5201)
    _client(by["h0"].host, "198.18.0.4", 5205)
    rows = _run(sc, tb, tmp_path, pairs)
    assert [(r["pair"], r["ok"]) for r in rows] == [("h0→h1", True), ("h0→h3", True)]
    store = results.RunStore.open(next((tmp_path / "results").iterdir()))
    failed = [r for r in store.records() if not r["ok"]]
    assert [(r["pair"], r["error"][:28]) for r in failed] == [("h0→h2", "server exited 1 before liste")]


def test_vagrant_machines_share_the_subnet_all_of_them_have_beside_the_management_one():
    """Three Vagrant machines: eth0 is Vagrant's management network (the default route),
    eth1 the private network; h3 holds one more address on another subnet first."""
    from harness.hosts.scripted import ScriptedHost
    from harness.testbeds import vagrant

    def machine(name, *addrs):
        h = ScriptedHost(name)
        h.expect("ip -o -4 addr show", stdout="".join(
            f"{i + 2}: {dev}    inet {a} brd x scope global {dev}\\       valid_lft forever\n"
            for i, (dev, a) in enumerate(addrs)))
        h.expect("ip -o -4 route show default", stdout="default via 172.17.0.1 dev eth0\n")
        return h

    hosts = [machine("h1", ("eth0", "172.17.0.2/16"), ("eth1", "198.19.253.11/24")),
             machine("h2", ("eth0", "172.17.0.3/16"), ("eth1", "198.19.253.12/24")),
             machine("h3", ("eth0", "172.17.0.4/16"), ("eth2", "198.19.7.1/24"), ("eth1", "198.19.253.13/24"))]
    assert vagrant.shared_underlay(hosts) == [("eth1", "198.19.253.11"), ("eth1", "198.19.253.12"),
                                              ("eth1", "198.19.253.13")]
    lonely = [machine("h1", ("eth0", "172.17.0.2/16"), ("eth1", "198.19.253.11/24")),
              machine("h2", ("eth0", "172.17.0.3/16"), ("eth1", "198.19.254.12/24"))]
    with pytest.raises(HarnessError, match="h1, h2 share no network besides Vagrant's management one"):
        vagrant.shared_underlay(lonely)


def test_a_deploy_that_fails_fails_every_pair_of_the_set_in_one_batch(tb3, tmp_path):
    """fastdp's deploy fails (a duplicate FDB entry) under a mesh of three pairs: each pair
    gets its failed line, and the three lines are one batch (a kill keeps all or none)."""
    for h in tb3.hosts:
        h.allow(re.compile(r"(ip (neigh|link|addr|route) .*)|(bridge fdb append .*)|(sysctl .*)"))
    twice = "00:00:00:00:00:00 dst 198.18.0.2 self permanent\n" * 2
    tb3.sides[0].host.expect("bridge fdb show dev vx0", stdout=twice)
    sc = S.build({"matrix": {"modes": ["fastdp"], "repeats": 1, "duration": 2, "placements": ["host-host"],
                             "tests": ["iperf3.tcp"], "schedule": "mesh"}, "testbed": {"lab_hosts": 3}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb3, store).run(S.expand(sc, session.host_pairs(sc, tb3)))
    recs = store.records()
    assert [(r["pair"], r["metric"], r["lines"]) for r in recs] == [
        (p, "failed", 3) for p in ("h0→h1", "h0→h2", "h1→h2")]
    assert all(r["error"].startswith("deploy failed: h0: vx0 has 2 default FDB entries") for r in recs)
