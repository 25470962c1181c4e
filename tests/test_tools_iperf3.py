"""iperf3 argv and parser, on real -J output captured by tests/data/capture.sh."""

from __future__ import annotations

import json

import pytest
from captures import DATA, capture, captured_argv, values

from harness.core.errors import HarnessError
from harness.tools.base import TestSpec as Spec  # "Test*" would be collected by pytest
from harness.tools.iperf3 import Iperf3Tcp, Iperf3Udp

TCP = Iperf3Tcp()
UDP = Iperf3Udp()


def units(result) -> dict[str, str]:
    return {s.metric: s.unit for s in result.samples}


SPEC = Spec(server_addr="198.18.0.2", duration=2)


# --- argv ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, tool, spec", [
    ("iperf3_tcp_1", TCP, SPEC),
    ("iperf3_tcp_4", TCP, Spec(server_addr="198.18.0.2", duration=2, streams=4)),
    ("iperf3_tcp_reverse", TCP, Spec(server_addr="198.18.0.2", duration=2, reverse=True)),
    ("iperf3_udp", UDP, Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=1500)),
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
