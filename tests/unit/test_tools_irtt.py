"""irtt.udp on real irtt 0.9.0 output (tests/data/irtt_*)."""

from __future__ import annotations

import json
import pathlib

import pytest

from harness.tools import TOOLS
from harness.tools.base import TestSpec

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
IRTT = TOOLS["irtt.udp"]


def read(name: str) -> tuple[str, str]:
    return (DATA / f"{name}.out").read_text(), (DATA / f"{name}.err").read_text()


def test_argv():
    spec = TestSpec(server_addr="198.18.0.2", duration=2)
    assert IRTT.server_argv(spec) == ["irtt", "server", "-b", "198.18.0.2:2112", "-i", "0"]
    assert IRTT.client_argv(spec) == ["irtt", "client", "-i", "1ms", "-d", "2s", "-Q", "-o", "-",
                                      "198.18.0.2:2112"]
    assert IRTT.listen == "udp"


def test_round_trips_tail_and_loss_from_real_output():
    out, err = read("irtt_ok")
    res = IRTT.parse(out, err, 0)
    assert res.ok, res.error
    v = {s.metric: s.value for s in res.samples}
    doc = json.loads(out)
    rtts = sorted(rt["delay"]["rtt"] / 1000 for rt in doc["round_trips"])     # 100, none lost
    assert len(rtts) == 100
    assert (v["rtt_us"], v["rtt_min_us"], v["rtt_max_us"]) == pytest.approx((130.133, 57.345, 244.023))
    assert v["rtt_p50_us"] == rtts[49] and v["rtt_p99_us"] == rtts[98] and v["rtt_p999_us"] == rtts[99]
    assert v["rtt_p90_us"] == rtts[89]
    assert v["probe_loss_pct"] == 0.0
    assert v["ipdv_us"] == pytest.approx(doc["stats"]["ipdv_round_trip"]["mean"] / 1000)


def test_lost_round_trips_count_as_loss_not_as_latency():
    out, _ = read("irtt_ok")
    doc = json.loads(out)
    for rt in doc["round_trips"][:10]:
        rt["lost"] = "true"
        rt["delay"] = {}
    doc["stats"]["packet_loss_percent"] = 10.0
    v = {s.metric: s.value for s in IRTT.parse(json.dumps(doc), "", 0).samples}
    assert v["probe_loss_pct"] == 10.0
    doc["round_trips"] = [dict(rt, lost="true", delay={}) for rt in doc["round_trips"]]
    res = IRTT.parse(json.dumps(doc), "", 0)
    assert not res.ok and res.error == "irtt: no round trip came back (100 sent)"
    assert [s.metric for s in res.samples] == ["probe_loss_pct"]


def test_no_server_and_killed():
    out, err = read("irtt_noserver")
    res = IRTT.parse(out, err, 1)
    assert res.error == ("irtt exited 1: Error: read udp4 127.0.0.1:36727->127.0.0.1:15119: "
                         "read: connection refused")
    out, err = read("irtt_killed")            # a killed client prints nothing
    assert IRTT.parse(out, err, None).error == "irtt timed out (killed)"
    assert IRTT.parse(out, err, 0).error.startswith("irtt printed no results")
