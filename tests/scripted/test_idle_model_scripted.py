"""The lab's idle model: idle CPUs poll while a latency test runs, and only then (the
runner holds run/cpuidle.py's request around those sets); which model a run used goes
into run.json. ScriptedHosts and a stand-in for the request, no root."""

from __future__ import annotations

import pytest
from captures import capture
from scripted_fixtures import runner_testbed

from harness import results
from harness.hosts.scripted import ScriptedProcess
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.run.session import RunSettings


@pytest.fixture
def tb(tmp_path, monkeypatch):
    return runner_testbed(tmp_path, monkeypatch)


class Request:
    """Stands in for cpuidle.hold(): logs when it is held and released."""

    def __init__(self, log: list[str]):
        self.log = log
        log.append("hold")

    def release(self) -> None:
        self.log.append("release")


def test_idle_cpus_poll_around_latency_tests_only(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    log: list[str] = []

    def serves(host, argv, port):
        host.expect_start(argv, ScriptedProcess.runs())
        host.expect(["ss", "-Hltn", f"sport = :{port}"], stdout=f"LISTEN 0 5 *:{port} *:*\n")

    def started(name):
        def answer(*_a):
            log.append(name)
            return ScriptedProcess.exits(0, *capture(name))
        return answer

    serves(h1, "iperf3 -s -1 -p 5201", 5201)
    h0.expect_start("iperf3 -c 198.18.0.2 -p 5201 -t 2 -J -P 1", answer=started("iperf3_tcp_1"))
    serves(h1, "qperf -lp 19765", 19765)
    h0.expect_start("qperf -lp 19765 -ip 19766 -t 2 -uu -v 198.18.0.2 tcp_lat", answer=started("qperf_tcp_lat"))
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["iperf3.tcp", "qperf.tcp_lat"], "repeats": 1,
                             "duration": 2, "placements": ["host-host"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store, poll_latency=lambda: Request(log)).run(S.expand(sc))
    tb.assert_all_used()
    assert log == ["iperf3_tcp_1", "hold", "qperf_tcp_lat", "release"]


@pytest.mark.parametrize("settings, here, model", [
    (RunSettings(), True, "poll-latency"),
    (RunSettings(), False, "default"),                  # a remote testbed: this machine's CPUs are not measured
    (RunSettings(poll_idle=True), True, "poll"),
    (RunSettings(halt_idle=True), True, "default"),
])
def test_the_run_records_its_idle_model(settings, here, model):
    assert settings.idle_model(here) == model
