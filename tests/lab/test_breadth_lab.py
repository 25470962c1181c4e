"""Beyond the mean, for real: sockperf's tail latency, the packet-rate tests and parallel
streams, run by the harness on the lab and over SSH, then read back by show, the JSON, the
report and the gate.

What could make these fail by chance: nothing in the run tests (they assert that each figure
was measured and carried through, never its size). The ordering test compares native's P99
with a sleeve that sleeps 10 ms on every frame: see its docstring.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from conftest import needs_root
from harness.modes.native import Native
from harness.run.endpoints import endpoints
from harness.results import read_records
from harness.run.procs import wait_listening
from harness.tools import get as get_tool
from harness.tools.base import TestSpec
from test_compare_lab import Calibrated
from test_testbed_ssh import ob, ssh_lab  # noqa: F401  (ssh_lab: the fixture, a lab whose hosts run sshd)

pytestmark = [needs_root(), pytest.mark.lab]

# One repeat of 1 s each: tail latency, the 64-byte packet rate, and TCP at 1 and 2 streams.
MATRIX = ["--modes", "native,sleeve", "--placements", "host-host,container-container",
          "--tests", "sockperf.pingpong,iperf3.pps64,iperf3.tcp", "--streams", "1,2",
          "--repeats", "1", "--duration", "1", "-q"]


def _check_run(run: pathlib.Path, tmp: pathlib.Path, env=None) -> None:
    """Every case measured; each new figure recorded where it belongs, and carried into show's
    table and JSON, the report and the gate."""
    recs = read_records(run)
    assert all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    by = {}
    for r in recs:
        by.setdefault((r["mode"], r["placement"], r["test"], r["streams"], r["metric"]), []).append(r["value"])
    for mode, placement in (("native", "host-host"), ("sleeve", "host-host"), ("sleeve", "container-container")):
        for m in ("latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p999_us", "latency_max_us"):
            (v,) = by[(mode, placement, "sockperf.pingpong", 1, m)]
            assert v > 0, (mode, placement, m)
        p50, p99, mx = (by[(mode, placement, "sockperf.pingpong", 1, m)][0]
                        for m in ("latency_p50_us", "latency_p99_us", "latency_max_us"))
        assert p50 <= p99 <= mx
        (pps,) = by[(mode, placement, "iperf3.pps64", 1, "pps")]
        assert pps > 0 and len(by[(mode, placement, "iperf3.pps64", 1, "loss_pct")]) == 1
        assert len(by[(mode, placement, "iperf3.tcp", 2, "stream_throughput_bps")]) == 2
        (jain,) = by[(mode, placement, "iperf3.tcp", 2, "fairness_jain")]
        assert 0.5 <= jain <= 1.0                       # Jain's index of two streams, by definition
        assert (mode, placement, "iperf3.tcp", 1, "fairness_jain") not in by
        assert (mode, placement, "iperf3.pps64", 2, "pps") not in by     # one sender per packet-rate case

    table = ob("show", str(run), env=env)
    assert table.returncode == 0, table.stderr
    for title in ("P99 Lat (µs)", "P99 %", "Mpps 64 B", "pps 64 B %", "Per-stream (Gbit/s)", "Jain"):
        assert title in table.stdout, (title, table.stdout)
    rows = json.loads(ob("show", str(run), "--format", "json", env=env).stdout)
    sleeve = [r for r in rows if r["mode"] == "sleeve"]
    assert sleeve and all(r["p99_lat_us"] > 0 and r["mpps_64"] > 0 for r in sleeve)
    assert {r["streams"] for r in sleeve} == {1, 2}
    assert all((r["jain"] is None) == (r["streams"] == 1) for r in sleeve)

    html = tmp / "report.html"
    rep = ob("report", str(run), "-o", str(html), env=env)
    assert rep.returncode == 0, rep.stderr
    text = html.read_text()
    for alt in ("latency percentiles per mode", "Packet rate by mode and payload size",
                "throughput and CPU against streams"):
        assert f'alt="{alt}"' in text, alt
    assert "P99 Lat" in text and "Mpps 64 B" in text and "Jain" in text

    # The gate: a run judged against a baseline made from itself changes nothing, so it passes
    # whatever was measured; its cases include the new metrics.
    base = tmp / "baseline.json"
    assert ob("baseline", str(run), "-o", str(base), env=env).returncode == 0
    gate = ob("gate", str(run), "--baseline", str(base), "--format", "json", env=env)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    metrics = {c["metric"] for c in json.loads(gate.stdout)["cases"]}
    assert {"latency_p99_us", "pps", "throughput_bps"} <= metrics, metrics


def test_tail_packet_rate_and_streams_on_the_lab(tmp_path):
    p = ob("run", *MATRIX, "--results", str(tmp_path / "results"))
    assert p.returncode == 0, p.stderr[-3000:]
    _check_run(pathlib.Path(p.stdout.splitlines()[0]), tmp_path)


def test_tail_packet_rate_and_streams_over_ssh(ssh_lab, tmp_path):
    inv = ssh_lab.inventory()
    ssh_lab.bare()
    p = ob("run", *MATRIX, "--inventory", inv, "--results", str(tmp_path / "results"), env=ssh_lab.env())
    assert p.returncode == 0, p.stderr[-3000:]
    _check_run(pathlib.Path(p.stdout.splitlines()[0]), tmp_path, env=ssh_lab.env())
    assert ssh_lab.leftovers() == []


def _pingpong(lab, dp, placement: str) -> dict[str, float]:
    """sockperf ping-pong across a deployed data path, for 2 s: its samples."""
    tool = get_tool("sockperf.pingpong")
    c, s = endpoints(lab, dp, placement)
    spec = TestSpec(server_addr=s.addr, duration=2, port=11111)
    srv = s.host.start(tool.server_argv(spec))
    try:
        assert wait_listening(s.host, 11111, srv, proto=tool.listen) is None
        out = c.host.run(tool.client_argv(spec), check=False, timeout=tool.timeout(spec))
    finally:
        srv.stop()
    res = tool.parse(out.stdout, out.stderr, out.returncode)
    assert res.ok, res.error
    return {x.metric: x.value for x in res.samples}


def test_the_tail_orders_native_before_a_sleeve_that_waits_10_ms_per_frame(lab):
    """The calibrated sleeve spends 10 ms on every frame it reads from or writes to its device:
    a message and its reply pass four such steps, so every one-way figure sockperf reports
    (half the round trip) is at least 20 ms, by construction. Native's P99 over 2 s of
    ping-pong (tens of thousands of round trips of some 50 µs) would have to reach 20 ms: one
    round trip in a hundred waiting 40 ms for a CPU. Even beside two CPU hogs a waiting task
    runs within a few milliseconds, so a chance failure is designed out (under 1 in 10^6)."""
    got = {}
    for mode in (Native(), Calibrated()):
        dp = mode.deploy(lab, 1450)
        try:
            got[mode.name] = _pingpong(lab, dp, "host-host" if mode.name == "native" else "container-container")
        finally:
            mode.teardown(lab, dp)
    cal = got["sleeve"]
    assert cal["latency_p50_us"] >= 20_000 and cal["latency_min_us"] >= 20_000, cal
    assert got["native"]["latency_p99_us"] < cal["latency_p50_us"], got
