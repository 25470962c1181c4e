"""The runner's failure paths on ScriptedHosts: every failure is a row, the matrix goes on.

The same logic test_runner_faults.py and test_faults.py check on the real lab (a daemon
killed mid-test, a hung tool) plus what they do not reach (a tool exiting non-zero,
printing an error or dying by a signal, a server that never listens, a host failing
under a case, three such in a row, a mode that cannot deploy, an underlay that cannot be
had), in milliseconds and without root. The tools' processes are scripted exactly; the
mode's own setup and teardown commands, checked command by command in
test_native_fastdp_auto_scripted.py, are answered here by standing patterns.
"""

from __future__ import annotations

import json
import re
import signal

import pytest
from captures import capture
from scripted_fixtures import any_of, forbid_sleep, lab_testbed

from harness.core.errors import HarnessError, SshConnectionLost
from harness.hosts.scripted import ScriptedProcess
from harness import results
from harness.run import scenario as S
from harness.run.runner import Runner

IPERF3_SERVER = "iperf3 -s -1 -p 5201"
QPERF_SERVER = "qperf -lp 19765"
OFFLOADS = "Features for dev:\ngeneric-segmentation-offload: on\ngeneric-receive-offload: on\n"
STAT = "4001 (sleeve) S 1 4001 4001 0 -1 4194560 120 0 0 0 250 130 0 0 20 0 3 0 100 0 0\n"


def iperf3_client(addr: str, streams: int = 1) -> str:
    return f"iperf3 -c {addr} -p 5201 -t 2 -J -P {streams}"


def qperf_client(addr: str, test: str) -> str:
    return f"qperf -lp 19765 -ip 19766 -t 2 -uu -v {addr} {test}"


@pytest.fixture
def tb(tmp_path, monkeypatch):
    forbid_sleep(monkeypatch)
    bed = lab_testbed(tmp_path)
    for h in bed.hosts:
        h.allow(re.compile(r"ethtool -k \S+"), stdout=OFFLOADS)       # read once per deployment
    return bed


def run(tb, tmp_path, raises=None, **matrix) -> results.RunStore:
    """Run a one-repeat, 2-second matrix on the testbed; the store it wrote."""
    sc = S.build({"matrix": {"repeats": 1, "duration": 2, "placements": ["host-host"], **matrix}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    if raises:
        with pytest.raises(HarnessError, match=raises):
            Runner(sc, tb, store).run(S.expand(sc))
    else:
        Runner(sc, tb, store).run(S.expand(sc))
    return store


def serves(host, argv: str, port: int) -> ScriptedProcess:
    """A server that listens until it is stopped."""
    proc = ScriptedProcess.runs()
    host.expect_start(argv, proc)
    host.expect(["ss", "-Hltn", f"sport = :{port}"], stdout=f"LISTEN 0 5 *:{port} *:*\n")
    return proc


def measures(host, argv: str, capture_name: str) -> ScriptedProcess:
    out, err = capture(capture_name)
    proc = ScriptedProcess.exits(0, out, err, cpu_seconds=0.5)
    host.expect_start(argv, proc)
    return proc


def rows(store) -> list[tuple]:
    """(test, streams, metric, ok, error) of every line."""
    return [(r["test"], r["streams"], r["metric"], r["ok"], r["error"]) for r in store.records()]


def failed(store) -> list[tuple]:
    return [(r["test"], r["error"]) for r in store.records() if not r["ok"]]


# ------------------------------------------------------------------ a case, measured

def test_a_measured_case_is_the_tools_figures_and_the_testbeds_cpu(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    server = serves(h1, IPERF3_SERVER, 5201)
    client = measures(h0, iperf3_client("198.18.0.2"), "iperf3_tcp_1")
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp"])
    tb.assert_all_used()
    assert rows(store) == [("iperf3.tcp", 1, "throughput_bps", True, None), ("iperf3.tcp", 1, "retransmits", True, None),
                           ("iperf3.tcp", 1, "cpu_total_pct", True, None)], "no CPU figure of the tool's own"
    assert client.waits == [2 + 15], "the client's hard timeout"
    assert server.stopped
    assert tb.meter.cases == [("h0", "h1")]
    assert tb.events == ["set_underlay 1500"]
    saved = json.loads((store.raw / "native_u1500_o1500_host-host_iperf3.tcp_p1_r0.client.cmd.json").read_text())
    assert (saved["argv"], saved["exit"]) == (iperf3_client("198.18.0.2").split(), 0)


# ------------------------------------------------------------------ the tool fails

@pytest.mark.parametrize("client, error", [
    (ScriptedProcess.exits(1, stderr="iperf3: error - control socket has closed unexpectedly\n"),
     "iperf3 exited 1: iperf3: error - control socket has closed unexpectedly"),
    (ScriptedProcess.exits(0, *capture("iperf3_refused")), "iperf3: unable to connect to server: Connection refused"),
    (ScriptedProcess.dies(signal.SIGKILL), "iperf3 exited -9"),
], ids=["exits-non-zero", "prints-an-error", "dies-by-a-signal"])
def test_a_failing_tool_is_a_failed_row_and_the_next_case_is_measured(tb, tmp_path, client, error):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    serves(h1, IPERF3_SERVER, 5201)
    h0.expect_start(iperf3_client("198.18.0.2"), client)
    serves(h1, QPERF_SERVER, 19765)
    measures(h0, qperf_client("198.18.0.2", "tcp_lat"), "qperf_tcp_lat")
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp", "qperf.tcp_lat"])
    tb.assert_all_used()
    assert rows(store) == [("iperf3.tcp", 1, "failed", False, error),
                           ("qperf.tcp_lat", 1, "latency_us", True, None),
                           ("qperf.tcp_lat", 1, "cpu_total_pct", True, None)]


def test_qperf_printing_its_error_on_stdout_is_a_failed_row(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    serves(h1, QPERF_SERVER, 19765)
    h0.expect_start(qperf_client("198.18.0.2", "tcp_bw"), ScriptedProcess.exits(1, *capture("qperf_refused")))
    store = run(tb, tmp_path, modes=["native"], tests=["qperf.tcp_bw"])
    tb.assert_all_used()
    assert failed(store) == [("qperf.tcp_bw", "qperf: 198.18.0.2: failed to connect")]


def test_a_client_past_its_hard_timeout_is_stopped_and_a_failed_row(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    server = serves(h1, IPERF3_SERVER, 5201)
    hung = ScriptedProcess.runs()
    h0.expect_start(iperf3_client("198.18.0.2"), hung)
    serves(h1, QPERF_SERVER, 19765)
    measures(h0, qperf_client("198.18.0.2", "tcp_lat"), "qperf_tcp_lat")
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp", "qperf.tcp_lat"])
    tb.assert_all_used()
    assert failed(store) == [("iperf3.tcp", "iperf3 timed out (killed)")]
    assert hung.waits == [17] and hung.stopped and server.stopped
    saved = json.loads((store.raw / "native_u1500_o1500_host-host_iperf3.tcp_p1_r0.client.cmd.json").read_text())
    assert saved["exit"] is None, "a timeout is recorded as no exit code"
    assert ("qperf.tcp_lat", 1, "latency_us", True, None) in rows(store)


def test_a_server_that_never_listens_fails_its_case_and_no_client_runs(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    h1.expect_start(IPERF3_SERVER, ScriptedProcess.exits(
        1, stderr="iperf3: error - unable to start listener for connections: Address already in use\n"))
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp"])
    tb.assert_all_used()
    assert failed(store) == [("iperf3.tcp", "server exited 1 before listening: iperf3: error - unable to start "
                                            "listener for connections: Address already in use")]
    assert [c for c in h0.calls if c.kind == "start"] == []


# ------------------------------------------------------------------ the data path fails

def sleeve_commands(tb) -> None:
    """The sleeve's own setup, counters and teardown, answered whenever they come."""
    for s in tb.sides:
        s.host.allow(re.compile(r"ip -o link show sv0"), stdout="7: sv0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450\n")
        s.host.allow(re.compile(r"\S+/sleeve-shipped --version"), stdout="sleeve 2.1\n")
        s.host.allow(re.compile(r"cat \S+/sleeve-stats\.json"), stdout=json.dumps({"peers": [{"tx_frames": 1}]}))
        s.host.allow(re.compile(r"cat /proc/\d+/stat"), stdout=STAT)
        s.host.allow("getconf CLK_TCK", stdout="100\n")
        s.host.allow(any_of(r"ip (neigh|link) .*", r"rm -f .*"))
        s.container.allow(re.compile(r"ip (neigh|link) .*"))


def sleeve_daemons(tb) -> list[ScriptedProcess]:
    daemons = []
    for s in tb.sides:
        daemons.append(ScriptedProcess.runs())
        s.host.expect_start(re.compile(rf"/run/overlaybench/ob12ab/h{s.index}/sleeve-shipped --dev sv0 .*"), daemons[-1])
    return daemons


def test_a_daemon_dead_at_the_end_of_a_case_fails_it_with_its_signal_and_the_group_redeploys(tb, tmp_path):
    """h1's sleeve is killed while the first case's client runs (as test_runner_faults.py
    does on the lab): that case fails with the signal, the sleeves are torn down and
    deployed again, and the next case is measured on the new pair."""
    (h0, c0), (h1, c1) = ((s.host, s.container) for s in tb.sides)
    sleeve_commands(tb)
    first = sleeve_daemons(tb)
    serves(c1, IPERF3_SERVER, 5201)

    def killed_mid_test(argv, input):
        first[1].die(signal.SIGKILL)
        return ScriptedProcess.exits(0, *capture("iperf3_tcp_1"))

    c0.expect_start(iperf3_client("198.18.64.12"), answer=killed_mid_test)
    second = sleeve_daemons(tb)
    serves(c1, QPERF_SERVER, 19765)
    measures(c0, qperf_client("198.18.64.12", "tcp_lat"), "qperf_tcp_lat")

    store = run(tb, tmp_path, modes=["sleeve"], tests=["iperf3.tcp", "qperf.tcp_lat"],
                placements=["container-container"])
    tb.assert_all_used()
    assert failed(store) == [("iperf3.tcp", "sleeve on h1 died (signal 9, SIGKILL)")]
    measured = {r["metric"] for r in store.records() if r["ok"]}
    assert measured == {"latency_us", "cpu_total_pct", "cpu_sleeve_pct"}
    assert len(store.read_meta()["datapaths"]) == 2, "the case after the death runs on a fresh deployment"
    assert first[0].stopped and not first[1].stopped, "the dead one is not stopped again"
    assert all(d.stopped for d in second), "the second pair goes at the end of the group"
    for h in (h0, h1):                           # the first pair's device removed before the second starts
        t = h.transcript()
        starts = [i for i, line in enumerate(t) if line.startswith("start: ") and "sleeve-shipped" in line]
        assert any(line == "run: ip link del sv0" for line in t[starts[0]:starts[1]])


def test_a_mode_that_cannot_deploy_fails_its_groups_cases_and_the_next_group_is_measured(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    h0.expect("ip link add vx0 type vxlan id 42 dstport 4789 local 198.18.0.1 dev ul0 nolearning",
              returncode=2, stderr="RTNETLINK answers: Operation not supported\n")
    for s in tb.sides:                          # fastdp's cleanup after the failed deploy
        s.host.allow(re.compile(r"ip (neigh|link) .*"))
        s.container.allow(re.compile(r"ip (neigh|link) .*"))
    serves(h1, IPERF3_SERVER, 5201)
    measures(h0, iperf3_client("198.18.0.2"), "iperf3_tcp_1")
    store = run(tb, tmp_path, modes=["fastdp", "native"], tests=["iperf3.tcp"],
                placements=["host-host", "container-container"])
    tb.assert_all_used()
    why = ("deploy failed: h0: `ip link add vx0 type vxlan id 42 dstport 4789 local 198.18.0.1 "
           "dev ul0 nolearning` exited 2: RTNETLINK answers: Operation not supported")
    assert [(r["mode"], r["placement"], r["error"]) for r in store.records() if not r["ok"]] == [
        ("fastdp", "host-host", why), ("fastdp", "container-container", why)]
    assert ("native", "throughput_bps", True) in {(r["mode"], r["metric"], r["ok"]) for r in store.records()}


def test_an_underlay_mtu_that_cannot_be_had_fails_its_cases_and_the_others_are_measured(tb, tmp_path):
    tb.refuse = {9000: "a 9000-byte packet with DF set does not reach 198.18.0.2"}
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    serves(h1, IPERF3_SERVER, 5201)
    measures(h0, iperf3_client("198.18.0.2"), "iperf3_tcp_1")
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp"], underlay_mtu=[9000, 1500])
    tb.assert_all_used()
    assert [(r["underlay_mtu"], r["metric"], r["error"]) for r in store.records() if r["underlay_mtu"] == 9000] == [
        (9000, "failed", "underlay MTU 9000: a 9000-byte packet with DF set does not reach 198.18.0.2")]
    assert {r["metric"] for r in store.records() if r["underlay_mtu"] == 1500} >= {"throughput_bps"}
    assert tb.events == ["set_underlay 9000", "set_underlay 1500"]


# ------------------------------------------------------------------ a host fails

LOST = SshConnectionLost("h1: connection lost while running `iperf3` (it may still run there)")


def test_a_host_failing_under_a_case_is_that_cases_failure(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    h1.expect_start(IPERF3_SERVER, raises=LOST)
    serves(h1, QPERF_SERVER, 19765)
    measures(h0, qperf_client("198.18.0.2", "tcp_lat"), "qperf_tcp_lat")
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp", "qperf.tcp_lat"])
    tb.assert_all_used()
    assert failed(store) == [("iperf3.tcp", str(LOST))]
    assert ("qperf.tcp_lat", 1, "latency_us", True, None) in rows(store)


def test_three_host_failures_in_a_row_stop_the_run_after_recording_them_and_tearing_down(tb, tmp_path):
    (s0, s1) = tb.sides
    for s in tb.sides:
        s.host.allow(any_of(r"ip (neigh|link) .*", r"bridge fdb (show|append) .*"),
                     stdout=f"00:00:00:00:00:00 dst {tb.peer(s).underlay_ip} self permanent\n")
        s.container.allow(re.compile(r"ip (neigh|link) .*"))
    for _ in range(3):
        s1.host.expect_start(IPERF3_SERVER, raises=LOST)
    store = run(tb, tmp_path, raises=r"^stopping: 3 cases in a row could not run; the last: h1: connection lost",
                modes=["fastdp"], tests=["iperf3.tcp"], streams=[1, 2, 3, 4])
    tb.assert_all_used()                      # the fourth case's server was never started
    assert rows(store) == [("iperf3.tcp", n, "failed", False, str(LOST)) for n in (1, 2, 3)]
    last_start = max(i for i, c in enumerate(s1.host.calls) if c.kind == "start")
    assert "run: ip link del vx0" in s1.host.transcript()[last_start:], "fastdp was torn down after the stop"
    assert "run: ip link del vx0" in s0.host.transcript()


def test_a_measured_case_between_host_failures_starts_the_count_again(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    for streams in (1, 2, 3, 4, 5):
        if streams == 3:
            serves(h1, IPERF3_SERVER, 5201)
            measures(h0, iperf3_client("198.18.0.2", 3), "iperf3_tcp_4")
        else:
            h1.expect_start(IPERF3_SERVER, raises=LOST)
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp"], streams=[1, 2, 3, 4, 5])
    tb.assert_all_used()
    assert [r["streams"] for r in store.records() if not r["ok"]] == [1, 2, 4, 5]
    assert ("iperf3.tcp", 3, "throughput_bps", True, None) in rows(store)


def test_a_host_failure_while_a_tool_runs_stops_what_was_started(tb, tmp_path):
    """The client's host drops while it is waited for: the case fails, and the server
    already listening on the other host is stopped, not left behind."""
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    server = serves(h1, IPERF3_SERVER, 5201)
    h0.expect_start(iperf3_client("198.18.0.2"), raises=SshConnectionLost("h0: connection lost"))
    store = run(tb, tmp_path, modes=["native"], tests=["iperf3.tcp"])
    tb.assert_all_used()
    assert failed(store) == [("iperf3.tcp", "h0: connection lost")]
    assert server.stopped



def test_enough_stops_an_underlay_between_repeats_and_the_next_underlay_is_measured(tb, tmp_path, monkeypatch):
    """`enough(underlay)` is asked between one repeat and the next, never within one: when
    it says so, that underlay's remaining repeats are not measured and the next underlay's
    are, each repeat whole (both modes). The groups are recorded instead of deployed."""
    sc = S.build({"matrix": {"repeats": 6, "duration": 2, "placements": ["host-host"], "modes": ["native", "fastdp"],
                             "underlay_mtu": [1500, 9000], "tests": ["iperf3.tcp"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    ran, asked = [], []
    monkeypatch.setattr(Runner, "_run_group", lambda self, mode, o, group: ran.append(
        (group[0].underlay_mtu, group[0].repeat, mode.name)))

    def enough(u):
        asked.append((u, len([g for g in ran if g[0] == u])))
        return u == 1500 and len([g for g in ran if g[0] == u]) == 4      # after repeat 1 of 1500

    runner = Runner(sc, tb, store)
    runner.run(S.expand(sc), enough=enough)
    modes = ("fastdp", "native")      # each repeat's order rotates; both modes in every repeat
    assert sorted(g for g in ran if g[0] == 1500) == [(1500, r, m) for r in (0, 1) for m in modes]
    assert sorted(g for g in ran if g[0] == 9000) == [(9000, r, m) for r in range(6) for m in modes]
    assert runner.stopped == {1500: 2}
    assert asked[:2] == [(1500, 2), (1500, 4)] and all(n % 2 == 0 for _, n in asked)   # whole repeats only
