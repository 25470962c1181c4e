"""ping -f argv and parser, on real iputils output captured by tests/data/capture.sh."""

from __future__ import annotations

import pytest
from captures import capture, captured_argv, values

from harness.tools.base import TestSpec as Spec  # "Test*" would be collected by pytest
from harness.tools.ping import PingFlood

PING = PingFlood()
SPEC = Spec(server_addr="198.18.0.2", duration=2)


def test_argv_is_what_was_captured():
    assert PING.client_argv(SPEC) == captured_argv("ping_flood")
    assert PING.server_argv(SPEC) is None and not PING.needs_server


def test_argv_count_size_deadline():
    argv = PingFlood(count=16, size=1400).client_argv(Spec(server_addr="198.18.0.9", duration=0.5))
    assert argv == ["ping", "-f", "-c", "16", "-q", "-s", "1400", "-w", "1", "198.18.0.9"]
    assert PING.timeout(SPEC) == 2 + 5


def test_flood_summary():
    r = PING.parse(*capture("ping_flood"), 0)
    assert r.ok and r.error is None
    assert values(r) == pytest.approx({
        "latency_min_us": 4, "latency_us": 4, "latency_max_us": 116, "latency_mdev_us": 3,
        "loss_pct": 0})
    assert {s.unit for s in r.samples} == {"us", "pct"}


def test_partial_loss_exits_1_but_is_a_result():
    out, err = capture("ping_partial_loss")
    r = PING.parse(out, err, 1)
    assert r.ok
    v = values(r)
    assert v["loss_pct"] == pytest.approx(100 * 125 / 540)     # 540 sent, 415 received
    assert v["latency_us"] == pytest.approx(19)
    assert v["latency_max_us"] == pytest.approx(125)


def test_total_loss_is_a_failure_that_keeps_loss_pct():
    out, err = capture("ping_loss")
    r = PING.parse(out, err, 1)
    assert not r.ok
    assert r.error == "no reply: 100% packet loss (12 sent)"
    assert values(r) == {"loss_pct": 100.0}


def test_no_route_is_a_failure_with_pings_message():
    out, err = capture("ping_unreachable")
    r = PING.parse(out, err, 2)
    assert not r.ok
    assert r.error == "ping exited 2: ping: connect: Network is unreachable"
    assert r.samples == []


def test_timed_out_ping():
    r = PING.parse("", "", None)
    assert not r.ok and r.error == "ping timed out (killed)"


def test_summary_with_error_and_duplicate_counts():
    # iputils adds "+N duplicates" / "+N errors" between received and the loss
    out = ("--- 198.18.0.2 ping statistics ---\n"
           "10 packets transmitted, 8 received, +3 duplicates, +2 errors, 20% packet loss, time 9ms\n"
           "rtt min/avg/max/mdev = 0.010/0.020/0.030/0.005 ms\n")
    r = PING.parse(out, "", 1)
    assert r.ok
    assert values(r)["loss_pct"] == 20
    assert values(r)["latency_us"] == pytest.approx(20)
