"""iperf3 argv and parser, on real -J output captured by tests/data/capture.sh."""

from __future__ import annotations

import json
import math

import pytest
from captures import DATA, capture, captured_argv, values

from harness.core.errors import HarnessError
from harness.tools.base import TestSpec as Spec  # "Test*" would be collected by pytest
from harness.tools.common import jain
from harness.tools.iperf3 import Iperf3Pps, Iperf3Tcp, Iperf3Udp

TCP = Iperf3Tcp()
UDP = Iperf3Udp()
PPS64 = Iperf3Pps(64)
PPS1400 = Iperf3Pps(1400)


def units(result) -> dict[str, str]:
    return {s.metric: s.unit for s in result.samples}


def per_stream(result) -> list[float]:
    return [s.value for s in result.samples if s.metric == "stream_throughput_bps"]


SPEC = Spec(server_addr="198.18.0.2", duration=2)


# --- argv ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, tool, spec", [
    ("iperf3_tcp_1", TCP, SPEC),
    ("iperf3_tcp_4", TCP, Spec(server_addr="198.18.0.2", duration=2, streams=4)),
    ("iperf3_tcp_reverse", TCP, Spec(server_addr="198.18.0.2", duration=2, reverse=True)),
    ("iperf3_udp", UDP, Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=1500)),
    ("iperf3_udp_2", UDP, Spec(server_addr="198.18.0.2", duration=2, streams=2)),
    ("iperf3_pps_64", PPS64, SPEC),
    ("iperf3_pps_1400", PPS1400, SPEC),
])
def test_client_argv_is_what_was_captured(name, tool, spec):
    assert tool.client_argv(spec) == captured_argv(name)


def test_server_argv_serves_one_test():
    assert TCP.server_argv(SPEC) == ["iperf3", "-s", "-1", "-p", "5201"]
    spec = Spec(server_addr="198.18.0.2", duration=2, port=5300, bind_addr="198.18.0.2")
    assert UDP.server_argv(spec) == ["iperf3", "-s", "-1", "-p", "5300", "-B", "198.18.0.2"]


@pytest.mark.parametrize("mtu, length", [(1500, 1472), (1450, 1422), (1410, 1382), (8950, 8922)])
def test_udp_datagrams_fit_the_overlay_mtu(mtu, length):
    argv = UDP.client_argv(Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=mtu))
    assert argv[argv.index("-l") + 1] == str(length)
    assert argv[argv.index("-b") + 1] == "0"
    assert "-u" in argv


def test_udp_over_ipv6_leaves_room_for_the_larger_header():
    argv = UDP.client_argv(Spec(server_addr="fd00::2", duration=2, overlay_mtu=1500))
    assert argv[argv.index("-l") + 1] == "1452"


def test_udp_rate_and_tcp_has_no_udp_flags():
    argv = Iperf3Udp(rate="1G").client_argv(SPEC)
    assert argv[argv.index("-b") + 1] == "1G"
    assert not {"-u", "-b", "-l", "-R"} & set(TCP.client_argv(SPEC))


def test_fractional_duration_rounds_up_and_timeout_has_a_margin():
    spec = Spec(server_addr="198.18.0.2", duration=2.5)
    argv = TCP.client_argv(spec)
    assert argv[argv.index("-t") + 1] == "3"
    assert TCP.timeout(spec) == 3 + 15


def test_pps_declares_its_payload_and_sends_it_whatever_the_mtu():
    for size in (64, 256, 1400):
        tool = Iperf3Pps(size)
        assert (tool.name, tool.payload) == (f"iperf3.pps{size}", size)
        argv = tool.client_argv(Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=1410))
        assert argv[-5:] == ["-u", "-b", "0", "-l", str(size)]   # the scenario checks the fit
    assert UDP.payload is None and TCP.payload is None


@pytest.mark.parametrize("size", [0, 15, 65508])
def test_pps_refuses_a_payload_iperf3_refuses(size):
    with pytest.raises(ValueError, match="16..65507"):
        Iperf3Pps(size)


def test_tiny_mtu_is_refused():
    with pytest.raises(HarnessError, match="MTU 40"):
        UDP.client_argv(Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=40))


# --- TCP -------------------------------------------------------------------------------

def test_tcp_single_stream_reads_received_goodput_and_sender_retransmits():
    r = TCP.parse(*capture("iperf3_tcp_1"), 0)
    assert r.ok and r.error is None
    v = values(r)
    assert v["throughput_bps"] == 10815217218.287586      # end.sum_received
    assert v["throughput_bps"] != 10816787006.745375      # not end.sum_sent
    assert v["retransmits"] == 1853
    assert v["cpu_client_pct"] == 71.5396421785435         # host_total
    assert v["cpu_server_pct"] == 40.79981412453656        # remote_total
    assert units(r) == {"throughput_bps": "bps", "retransmits": "count",
                        "cpu_client_pct": "pct", "cpu_server_pct": "pct"}
    assert r.intervals == [(1.001575, 11708832652.969746), (2.001223, 9923022112.17701)]


def test_tcp_four_streams_uses_the_sum_over_streams():
    r = TCP.parse(*capture("iperf3_tcp_4"), 0)
    assert r.ok
    assert values(r)["throughput_bps"] == 21484166508.178158
    assert values(r)["retransmits"] == 3482
    assert len(r.intervals) == 2


def test_tcp_four_streams_each_stream_as_its_receiver_counted_and_jain():
    r = TCP.parse(*capture("iperf3_tcp_4"), 0)
    rates = [5384048528.89918, 5369667954.02221, 5369930891.696083, 5360519133.560686]
    assert per_stream(r) == rates                           # end.streams[i].receiver
    assert per_stream(r)[0] != 5389757029.35038             # not .sender
    assert values(r)["fairness_jain"] == 0.9999975473038298
    assert values(r)["fairness_jain"] == pytest.approx(sum(rates) ** 2 / (4 * sum(x * x for x in rates)))
    assert units(r)["stream_throughput_bps"] == "bps" and units(r)["fairness_jain"] == "ratio"
    assert sum(rates) == pytest.approx(values(r)["throughput_bps"])


def test_tcp_reverse_is_parsed_like_forward():
    r = TCP.parse(*capture("iperf3_tcp_reverse"), 0)
    assert r.ok
    v = values(r)
    assert v["throughput_bps"] == 11047517540.0615
    assert v["retransmits"] == 5409                        # the server's, as it sent
    assert v["cpu_client_pct"] == 37.44008146871544


# --- UDP -------------------------------------------------------------------------------

def test_udp_312_uses_sum_received_not_the_sender_side_sum():
    out, err = capture("iperf3_udp")
    assert "warning: UDP block size 1472 exceeds TCP MSS" in err   # harmless, ignored
    r = UDP.parse(out, err, 0)
    assert r.ok
    v = values(r)
    assert v["throughput_bps"] == 1729851117.3671741        # end.sum_received
    assert v["throughput_bps"] != 1800595775.5316837        # end.sum / sum_sent (sender)
    assert v["jitter_ms"] == 0.00355089844742136
    assert v["loss_pct"] == 3.9204080965305255
    assert "retransmits" not in v
    assert units(r)["jitter_ms"] == "ms" and units(r)["loss_pct"] == "pct"
    assert v["cpu_server_pct"] == 60.73722627737226


def test_udp_two_streams_each_is_the_senders_rate_less_its_lost_share():
    out, err = capture("iperf3_udp_2")
    r = UDP.parse(out, err, 0)
    assert r.ok
    v = values(r)
    assert v["throughput_bps"] == 2656818290.2190886        # end.sum_received, as for one stream
    assert v["loss_pct"] == 3.9177277179236043
    # 3.12's end.streams[i].udp: the sender's 1382625117.6204128 bit/s each, minus the
    # 3.916024358046246 % and 3.9194310778009624 % its receiver lost
    assert per_stream(r) == [1328481181.233932, 1328434079.0709162]
    for rate, stream in zip(per_stream(r), json.loads(out)["end"]["streams"]):
        udp = stream["udp"]
        received = (udp["packets"] - udp["lost_packets"]) * 1472 * 8 / udp["seconds"]
        assert rate == pytest.approx(received, rel=1e-12)
    assert v["fairness_jain"] == 0.9999999996857131
    # the streams' times are the sender's, sum_received's the receiver's
    assert sum(per_stream(r)) == pytest.approx(v["throughput_bps"], rel=1e-4)


def test_udp_streams_that_got_nothing_have_no_fairness():
    doc = json.loads(capture("iperf3_udp_2")[0])
    for stream in doc["end"]["streams"]:
        stream["udp"]["lost_percent"] = 100
    r = UDP.parse(json.dumps(doc), "", 0)
    assert r.ok and per_stream(r) == [0.0, 0.0] and "fairness_jain" not in values(r)


def test_a_broken_stream_entry_is_a_failure():
    doc = json.loads(capture("iperf3_tcp_4")[0])
    del doc["end"]["streams"][2]["receiver"]
    r = TCP.parse(json.dumps(doc), "", 0)
    assert not r.ok and "lacks the summary" in r.error and "receiver" in r.error


@pytest.mark.parametrize("name, tool", [
    ("iperf3_tcp_1", TCP), ("iperf3_tcp_reverse", TCP), ("iperf3_udp", UDP),
    ("iperf3_udp_3.1.3", UDP), ("iperf3_pps_64", PPS64), ("iperf3_pps_1400", PPS1400),
])
def test_one_stream_has_no_stream_figures(name, tool):
    r = tool.parse((DATA / f"{name}.out").read_text(), "", 0)
    assert r.ok
    assert not {"stream_throughput_bps", "fairness_jain"} & set(values(r))


def test_udp_before_311_falls_back_to_end_sum():
    # iperf 3.1.3, from github.com/0-complexity/selfhealing (see iperf3_udp_3.1.3.SOURCE)
    out = (DATA / "iperf3_udp_3.1.3.out").read_text()
    assert "sum_received" not in out
    r = UDP.parse(out, "", 0)
    assert r.ok
    v = values(r)
    # end.sum.bits_per_second is the sender's rate; the lost share is taken off
    assert v["throughput_bps"] == pytest.approx(834711189.017002 * (1 - 0.690276 / 100))
    assert v["jitter_ms"] == 0.092
    assert v["loss_pct"] == 0.690276
    assert v["cpu_client_pct"] == 17.76954
    assert r.intervals == [(0.785134, 834711189.017002)]


# --- packet rate -----------------------------------------------------------------------

@pytest.mark.parametrize("name, tool, sent, lost, seconds, pps, bps, loss, jitter", [
    ("iperf3_pps_64", PPS64, 521970, 4426, 2.000113, 258757.38020801826,
     132483778.66650535, 0.8479414525739027, 0.002439697178646731),
    ("iperf3_pps_1400", PPS1400, 511930, 5403, 2.000062, 253255.64907487872,
     2836463269.6386414, 1.055417732893169, 0.002880314526674),
])
def test_pps_is_what_the_receiver_got_per_second(name, tool, sent, lost, seconds, pps, bps, loss, jitter):
    out, err = capture(name)
    r = tool.parse(out, err, 0)
    assert r.ok
    v = values(r)
    rx = json.loads(out)["end"]["sum_received"]
    assert (rx["packets"], rx["lost_packets"], rx["seconds"]) == (sent, lost, seconds)
    assert v["pps"] == pps == (sent - lost) / seconds
    assert rx["bytes"] == (sent - lost) * tool.payload     # packets - lost are the arrivals
    assert v["throughput_bps"] == bps                       # end.sum_received
    assert v["pps"] * tool.payload * 8 == pytest.approx(bps, rel=1e-12)
    assert (v["loss_pct"], v["jitter_ms"]) == (loss, jitter)
    assert units(r) == {"pps": "pps", "throughput_bps": "bps", "jitter_ms": "ms", "loss_pct": "pct",
                        "cpu_client_pct": "pct", "cpu_server_pct": "pct"}


def test_pps_without_sum_received_counts_from_end_sum():
    doc = json.loads(capture("iperf3_pps_64")[0])
    del doc["end"]["sum_received"]
    assert values(PPS64.parse(json.dumps(doc), "", 0))["pps"] == (521970 - 4426) / 2.000113
    # iperf 3.1.3: end.sum's (sender's) packets less the receiver's losses
    r = PPS64.parse((DATA / "iperf3_udp_3.1.3.out").read_text(), "", 0)
    assert values(r)["pps"] == (9996 - 69) / 0.785134


def test_pps_with_no_time_is_a_failure():
    doc = json.loads(capture("iperf3_pps_64")[0])
    doc["end"]["sum_received"]["seconds"] = 0
    r = PPS64.parse(json.dumps(doc), "", 0)
    assert not r.ok and "lacks the summary" in r.error


# --- Jain's index ----------------------------------------------------------------------

@pytest.mark.parametrize("xs, index", [
    ([1, 1, 1, 1], 1.0), ([1, 0, 0, 0], 0.25), ([1, 1, 0, 0], 0.5), ([3, 1], 0.8),
    ([7], 1.0), ([2e9, 2e9, 2e9], 1.0), ([1e200, 1e200], 1.0), ([1e-200, 0], 0.5),
])
def test_jain_on_known_shares(xs, index):
    assert jain(xs) == pytest.approx(index, rel=1e-15)


def test_jain_is_scale_free_and_bounded():
    xs = [5.0, 3.0, 9.0, 1.0]
    assert jain(xs) == pytest.approx(jain([x * 1e9 for x in xs]), rel=1e-15)
    assert 1 / len(xs) <= jain(xs) <= 1


def test_jain_of_nothing_is_undefined():
    assert math.isnan(jain([0, 0, 0]))
    for bad in ([], [1, -1], [1, math.nan], [math.inf, 1]):
        with pytest.raises(ValueError):
            jain(bad)


# --- failures --------------------------------------------------------------------------

def test_connection_refused_is_a_failure_although_iperf3_exits_0():
    out, err = capture("iperf3_refused")
    assert captured_argv("iperf3_refused")[:2] == ["iperf3", "-c"]
    r = TCP.parse(out, err, 0)                              # 3.12 really exits 0 here
    assert not r.ok
    assert r.error == "iperf3: unable to connect to server: Connection refused"
    assert r.samples == []


def test_client_stopped_by_sigterm_reports_iperf3s_error():
    r = TCP.parse(*capture("iperf3_tcp_sigterm"), None)
    assert not r.ok
    assert r.error == "iperf3: interrupt - the client has terminated (timed out)"
    assert r.samples == []


def test_killed_client_with_no_output():
    out, err = capture("iperf3_tcp_killed")
    assert out == ""
    assert TCP.parse(out, err, None).error == "iperf3 timed out (killed)"
    assert TCP.parse(out, err, 137).error == "iperf3 exited 137"
    assert TCP.parse(out, err, 0).error == "iperf3 printed no output"


def test_truncated_json_is_a_failure():
    out, _ = capture("iperf3_tcp_1")
    r = TCP.parse(out[: len(out) // 2], "", 0)
    assert not r.ok
    assert r.error.startswith("iperf3 output is not valid JSON")


def test_nonzero_exit_without_json_error_is_a_failure():
    out, _ = capture("iperf3_tcp_1")
    r = TCP.parse(out, "iperf3: some late failure\n", 1)
    assert not r.ok and r.error == "iperf3 exited 1: iperf3: some late failure"


def test_json_without_the_summary_is_a_failure():
    doc = json.loads(capture("iperf3_tcp_1")[0])
    del doc["end"]["sum_received"]
    r = TCP.parse(json.dumps(doc), "", 0)
    assert not r.ok and "lacks the summary" in r.error and "sum_received" in r.error
