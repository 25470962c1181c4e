"""A tool that runs in phases (run/case.py): every phase against the one server the case
started, one after the other, each kept as its own raw output and parsed together; a phase
whose client cannot start fails the case, and no later phase runs. ScriptedHosts, no root."""

from __future__ import annotations

import pytest
from captures import capture
from scripted_fixtures import runner_testbed

from harness import results
from harness.core.errors import CommandError
from harness.hosts.scripted import ScriptedProcess
from harness.run import scenario as S
from harness.run.runner import Runner

PROBE = "iperf -c 198.18.0.2 -p 5001 --bounceback=1 --bounceback-period=0.001 -l 16K -t 2 -e"


@pytest.fixture
def tb(tmp_path, monkeypatch):
    return runner_testbed(tmp_path, monkeypatch)


def _run(tb, tmp_path) -> results.RunStore:
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["load.bounceback"], "streams": [2], "repeats": 1,
                             "duration": 2, "placements": ["host-host"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store).run(S.expand(sc))
    return store


def test_the_phases_run_in_order_against_one_server_and_are_parsed_together(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    server = ScriptedProcess.runs()
    h1.expect_start("iperf -s -p 5001", server)
    h1.expect(["ss", "-Hltn", "sport = :5001"], stdout="LISTEN 0 5 *:5001 *:*\n")
    idle = ScriptedProcess.exits(0, *capture("iperf2_lab_idle"))
    loaded = ScriptedProcess.exits(0, *capture("iperf2_lab_loaded_16k"))
    h0.expect_start(PROBE, idle)
    h0.expect_start(PROBE + " --bounceback-congest=bidir,2", loaded)
    store = _run(tb, tmp_path)
    tb.assert_all_used()
    recs = store.records()
    assert all(r["ok"] for r in recs), recs[:2]
    metrics = {r["metric"] for r in recs}
    assert {"lat_idle_p99_us", "lat_loaded_p99_us", "lat_added_p99_us", "load_throughput_bps"} <= metrics
    assert not any(m.startswith("cpu_") for m in metrics), "no CPU figure spans two phases"
    raw = sorted(p.name for p in (store.path / "raw").iterdir())
    assert any(n.endswith(".idle.client.out") for n in raw) and any(n.endswith(".loaded.client.out") for n in raw)
    assert server.stopped


def test_a_phase_that_cannot_start_fails_the_case_and_no_later_phase_runs(tb, tmp_path):
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    server = ScriptedProcess.runs()
    h1.expect_start("iperf -s -p 5001", server)
    h1.expect(["ss", "-Hltn", "sport = :5001"], stdout="LISTEN 0 5 *:5001 *:*\n")
    h0.expect_start(PROBE, raises=CommandError("h0", PROBE.split(), 127, "", "iperf: not found"))
    store = _run(tb, tmp_path)
    tb.assert_all_used()                   # the loaded phase was never started
    (rec,) = store.records()
    assert rec["metric"] == "failed" and "iperf: not found" in rec["error"]
    assert server.stopped
