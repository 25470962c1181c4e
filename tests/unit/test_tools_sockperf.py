"""sockperf ping-pong argv and parser, on real output captured by tests/data/capture.sh."""

from __future__ import annotations

import re

import pytest
from captures import capture, captured_argv, values

from harness.tools.base import TestSpec as Spec  # "Test*" would be collected by pytest
from harness.tools.sockperf import SockperfPingPong

SPEC = Spec(server_addr="198.18.0.2", duration=2)
UDP, TCP = SockperfPingPong("udp"), SockperfPingPong("tcp")


# --- the tool ----------------------------------------------------------------------------

def test_names_binary_and_how_the_server_waits():
    assert (UDP.name, TCP.name) == ("sockperf.pingpong", "sockperf.pingpong_tcp")
    for tool in (UDP, TCP):
        assert (tool.binary, tool.package) == ("sockperf", "sockperf")
        assert tool.needs_server and tool.server_exits is False
        assert tool.payload is None                       # not a packet-rate test
    assert (UDP.listen, TCP.listen) == ("udp", "tcp")


def test_version_line():
    line = "sockperf, version 3.7-no.git\n   compiled 2021-08-23 12:14:23\n"
    assert UDP.version_argv == ("sockperf", "--version")
    assert re.search(UDP.version_re, line)[1] == "3.7"
    assert re.search(UDP.version_re, "sockperf, version 3.10-0.git6b4ba6fc6d")[1] == "3.10"


def test_unknown_protocol():
    with pytest.raises(ValueError):
        SockperfPingPong("sctp")


# --- argv --------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, name", [(UDP, "sockperf_udp"), (TCP, "sockperf_tcp")])
def test_client_argv_is_what_was_captured(tool, name):
    assert tool.client_argv(SPEC) == captured_argv(name)


def test_server_argv_and_port():
    assert UDP.server_argv(SPEC) == ["sockperf", "sr", "-i", "198.18.0.2", "-p", "11111"]
    assert TCP.server_argv(SPEC) == ["sockperf", "sr", "-i", "198.18.0.2", "-p", "11111", "--tcp"]
    spec = Spec(server_addr="10.0.0.2", duration=2.5, port=20000)
    assert TCP.client_argv(spec) == ["sockperf", "pp", "-i", "10.0.0.2", "-p", "20000",
                                     "-t", "3", "--tcp"]
    assert UDP.server_argv(spec)[-2:] == ["-p", "20000"]


def test_a_server_behind_a_service_binds_its_own_address():
    """Through a Service the client's address is the ClusterIP, which no pod can bind."""
    spec = Spec(server_addr="10.96.0.12", bind_addr="10.244.1.5", duration=1)
    assert UDP.server_argv(spec)[:4] == ["sockperf", "sr", "-i", "10.244.1.5"]
    assert UDP.client_argv(spec)[:4] == ["sockperf", "pp", "-i", "10.96.0.12"]


def test_timeout_bounds_the_client():
    assert UDP.timeout(SPEC) == 17
    assert TCP.timeout(Spec(server_addr="198.18.0.2", duration=0.2)) == 16


# --- results -----------------------------------------------------------------------------

def test_udp_capture():
    r = UDP.parse(*capture("sockperf_udp"), 0)
    assert r.ok and r.error is None
    assert values(r) == {"latency_us": 25.195, "latency_p50_us": 24.661,
                         "latency_p90_us": 27.726, "latency_p99_us": 36.178,
                         "latency_p999_us": 52.858, "latency_max_us": 990.561,
                         "latency_min_us": 9.393}
    assert {s.unit for s in r.samples} == {"us"}
    assert r.samples[0].metric == "latency_us"


def test_tcp_capture():
    r = TCP.parse(*capture("sockperf_tcp"), 0)
    assert r.ok
    assert values(r) == {"latency_us": 26.781, "latency_p50_us": 26.779,
                         "latency_p90_us": 29.183, "latency_p99_us": 37.294,
                         "latency_p999_us": 57.389, "latency_max_us": 1021.025,
                         "latency_min_us": 9.654}


def test_colour_codes_are_in_the_capture_and_do_not_matter():
    out, err = capture("sockperf_udp")
    assert "\x1b[" in out and err == ""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert values(UDP.parse(plain, "", 0)) == values(UDP.parse(out, err, 0))


def test_missing_percentile_fails():
    out, _ = capture("sockperf_udp")
    r = UDP.parse(re.sub(r".*percentile 99\.900.*\n", "", out), "", 0)
    assert not r.ok and r.samples == []
    assert r.error == "sockperf printed no 99.900 percentile"
    r = UDP.parse(re.sub(r".*<MIN>.*\n", "", out), "", 0)
    assert r.error == "sockperf printed no <MIN>"


def test_full_rtt_output_is_refused():
    out, _ = capture("sockperf_udp")
    r = UDP.parse(out.replace("avg-latency=", "avg-rtt="), "", 0)
    assert not r.ok and "round trips" in r.error


# --- failures ----------------------------------------------------------------------------

def test_refused_tcp_exits_0_with_its_error_on_stdout():
    out, err = capture("sockperf_refused")
    assert err == ""
    r = TCP.parse(out, err, 0)                            # the captured exit status: 0
    assert not r.ok and r.samples == []
    assert r.error == "sockperf: ERROR: Can`t connect socket (errno=111 Connection refused)"


def test_udp_without_a_server_exits_0_with_no_results():
    r = UDP.parse(*capture("sockperf_udp_noserver"), 0)
    assert not r.ok and r.samples == []
    assert r.error == "sockperf: No messages were received from the server. Is the server down?"


def test_killed_client():
    out, err = capture("sockperf_udp_killed")
    r = UDP.parse(out, err, None)
    assert not r.ok
    assert r.error == "sockperf timed out (killed): Warmup stage (sending a few dummy messages)..."
    assert UDP.parse("", "", None).error == "sockperf timed out (killed)"
    assert UDP.parse("", "", 137).error == "sockperf exited 137"


def test_results_with_a_bad_exit_status_are_not_trusted():
    r = UDP.parse(*capture("sockperf_udp"), 1)
    assert not r.ok and r.error.startswith("sockperf exited 1: ")


def test_bad_arguments_print_the_usage_and_exit_0():
    # as sockperf 3.7 printed them here by hand (pp --badopt; pp -i nosuchhost.invalid)
    usage = ("ping-pong (pp): Run sockperf client for latency test in ping pong mode.\n\n"
             "Usage: sockperf ping-pong [options] [args]...\n"
             " sockperf ping-pong -i ip  [-p port] [-m message_size] [-t time]\n")
    assert UDP.parse(usage, "", 0).error == "sockperf printed its usage: bad arguments"
    bad = "sockperf: '-i' Invalid address: nosuchhost.invalid\n" + usage
    assert UDP.parse(bad, "", 0).error == "sockperf: '-i' Invalid address: nosuchhost.invalid"


@pytest.mark.parametrize("out", ["", "\n\n", "garbage\x00\xff", "avg-latency=",
                                 "percentile 50.000 = 3\n<MAX> observation = x"])
def test_garbage_is_a_failure(out):
    r = UDP.parse(out, "", 0)
    assert not r.ok and r.error.startswith("sockperf printed no")
