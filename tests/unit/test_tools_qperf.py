"""qperf argv and parser, on real -uu -v output captured by tests/data/capture.sh."""

from __future__ import annotations

import pytest
from captures import capture, captured_argv, values

from harness.tools.base import TestSpec as Spec  # "Test*" would be collected by pytest
from harness.tools.qperf import Qperf, parse_fields

SPEC = Spec(server_addr="198.18.0.2", duration=2)


# --- argv ------------------------------------------------------------------------------

@pytest.mark.parametrize("test", ["tcp_bw", "tcp_lat", "udp_bw", "udp_lat"])
def test_client_argv_is_what_was_captured(test):
    assert Qperf(test).client_argv(SPEC) == captured_argv(f"qperf_{test}")


def test_server_and_ports():
    assert Qperf("tcp_bw").server_argv(SPEC) == ["qperf", "-lp", "19765"]
    spec = Spec(server_addr="198.18.0.2", duration=2, port=20000, data_port=20001)
    argv = Qperf("tcp_lat").client_argv(spec)
    assert argv[:5] == ["qperf", "-lp", "20000", "-ip", "20001"]
    assert Qperf("tcp_lat").server_argv(spec) == ["qperf", "-lp", "20000"]


@pytest.mark.parametrize("mtu, size", [(1500, 1472), (1410, 1382), (8950, 8922)])
def test_udp_bw_messages_fit_the_overlay_mtu(mtu, size):
    argv = Qperf("udp_bw").client_argv(Spec(server_addr="198.18.0.2", duration=2, overlay_mtu=mtu))
    assert argv[argv.index("-m") + 1] == str(size)
    assert argv[-2:] == ["198.18.0.2", "udp_bw"]


def test_only_udp_bw_sets_a_message_size():
    for test in ("tcp_bw", "tcp_lat", "udp_lat"):
        assert "-m" not in Qperf(test).client_argv(SPEC)


def test_unknown_qperf_test():
    with pytest.raises(ValueError):
        Qperf("rc_bw")


# --- results ---------------------------------------------------------------------------

def test_tcp_bw_bytes_per_second_to_bits():
    r = Qperf("tcp_bw").parse(*capture("qperf_tcp_bw"), 0)
    assert r.ok and r.error is None
    assert values(r) == {"throughput_bps": 1161396224 * 8}
    assert r.samples[0].unit == "bps"


@pytest.mark.parametrize("test, ns", [("tcp_lat", 46352), ("udp_lat", 49526)])
def test_latency_ns_to_us(test, ns):
    r = Qperf(test).parse(*capture(f"qperf_{test}"), 0)
    assert r.ok
    assert values(r) == {"latency_us": pytest.approx(ns / 1000)}
    assert r.samples[0].unit == "us"


def test_udp_bw_uses_recv_bw_and_derives_loss_from_send_bw():
    r = Qperf("udp_bw").parse(*capture("qperf_udp_bw"), 0)
    assert r.ok
    v = values(r)
    assert v["throughput_bps"] == 219293408 * 8             # recv_bw, not send_bw
    assert v["loss_pct"] == pytest.approx(100 * (1 - 219293408 / 224256256))


def test_udp_bw_vv_takes_loss_from_message_counts():
    r = Qperf("udp_bw").parse(*capture("qperf_udp_bw_vv"), 0)
    assert r.ok
    v = values(r)
    assert v["throughput_bps"] == 279969248 * 8
    assert v["loss_pct"] == pytest.approx(100 * (1 - 380393 / 384594))
    # the two ways agree: both rates are over the same messages and time
    assert v["loss_pct"] == pytest.approx(100 * (1 - 279969248 / 283061184), abs=1e-3)


def test_fields_keep_units_and_read_unitless_ones():
    fields, unparsed = parse_fields(capture("qperf_udp_bw_vv")[0])
    assert unparsed == []
    assert fields["send_msgs"] == (384594.0, "")
    assert fields["msg_size"] == (1472.0, "bytes")
    assert fields["send_cpus_intr"] == (41.5, "% cpus")


def test_default_units_with_thousands_separators_also_parse():
    # qperf without -uu (as it printed here by hand): scaled units, "19,766"
    out = "tcp_bw:\n    bw              =    1.68 GB/sec\n    port            =  19,766 \n"
    r = Qperf("tcp_bw").parse(out, "", 0)
    assert values(r) == {"throughput_bps": pytest.approx(1.68e9 * 8)}
    lat = Qperf("tcp_lat").parse("tcp_lat:\n    latency        =      32 us\n", "", 0)
    assert values(lat) == {"latency_us": 32}


# --- failures --------------------------------------------------------------------------

def test_refused_connection_message_comes_from_stdout():
    out, err = capture("qperf_refused")
    assert err == ""                                        # qperf says it on stdout
    r = Qperf("tcp_bw").parse(out, err, 1)
    assert not r.ok
    assert r.error == "qperf: 198.18.0.2: failed to connect"
    assert r.samples == []


def test_killed_client_with_no_output():
    out, err = capture("qperf_tcp_bw_killed")
    assert out == ""                                        # nothing flushed before the kill
    assert Qperf("tcp_bw").parse(out, err, None).error == "qperf timed out (killed)"
    assert Qperf("tcp_bw").parse(out, err, 137).error == "qperf exited 137"


def test_header_only_is_a_failure():
    r = Qperf("tcp_lat").parse("tcp_lat:\n", "", 0)
    assert not r.ok and r.error == "qperf tcp_lat: output lacks 'latency'"


def test_stderr_warning_alone_is_not_a_failure():
    out, _ = capture("qperf_tcp_bw")
    r = Qperf("tcp_bw").parse(out, "warning: obsolete option: -u; use -uu instead\n", 0)
    assert r.ok
