"""The MTU doctor's UDP probe: its argv and parser on real output captured by
tests/data/capture_mtu.sh (a router in the middle, its far link at MTU 1400), and the
bisection finding a path's UDP MTU from those outcomes."""

from __future__ import annotations

import pytest
from captures import capture, captured_argv

from harness.tools import mtu as m, mtu_udp as u

CAPTURED = {"udp_df_ok", "udp_df_fragneeded", "udp_df_local", "udp_df_local_dev", "udp_df_blackhole",
            "udp_df_noreceiver"}


def probe_of(name: str, size: int, rc: int = 0) -> m.Probe:
    return u.parse_udp_probe(size, *capture(name), rc)


def test_every_udp_capture_is_read_here():
    from test_metric_table import MTU_PROBES
    assert CAPTURED <= MTU_PROBES


def test_argv_is_what_was_captured():
    assert u.sender_argv("198.18.2.2", 1400) == captured_argv("udp_df_ok")
    assert u.sender_argv("198.18.2.2", 1000, port=19802) == captured_argv("udp_df_noreceiver")
    assert u.receiver_argv("198.18.2.2")[:2] == ["python3", "-c"] and u.receiver_argv("198.18.2.2")[3:] == [
        "198.18.2.2", str(u.PORT)]
    with pytest.raises(ValueError):
        u.sender_argv("198.18.2.2", 40)


def test_a_datagram_the_receiver_got_passed():
    assert probe_of("udp_df_ok", 1400) == m.Probe(1400, m.PASSED)


def test_a_router_answers_fragmentation_needed():
    assert probe_of("udp_df_fragneeded", 1401) == m.Probe(1401, m.FRAG_NEEDED, 1400, "198.18.1.254")


def test_the_sender_refuses_what_it_learnt_or_its_device_cannot_send():
    assert probe_of("udp_df_local", 1401) == m.Probe(1401, m.LOCAL, 1400)
    assert probe_of("udp_df_local_dev", 1501) == m.Probe(1501, m.LOCAL, 1400)


def test_a_datagram_that_vanishes_is_lost():
    assert probe_of("udp_df_blackhole", 1401) == m.Probe(1401, m.LOST)


def test_no_receiver_is_an_error_not_a_loss():
    p = probe_of("udp_df_noreceiver", 1000)
    assert p.outcome == m.ERROR and "icmp=3/3" in p.error


def test_a_sender_that_failed_or_was_killed_is_an_error():
    assert u.parse_udp_probe(1400, "", "", None).outcome == m.ERROR
    p = u.parse_udp_probe(1400, "", "bash: python3: command not found\n", 127)
    assert p.outcome == m.ERROR and "python3: command not found" in p.error
    assert u.parse_udp_probe(1400, "passed 1399\n", "", 0).outcome == m.ERROR     # another probe's line


def test_the_captured_outcomes_bisect_to_the_path_mtu():
    """A path of 1400 answering each size as the captures did (the size in the line
    rewritten): the bisection lands on 1400 to the byte."""
    def probe(size):
        name, was = ("udp_df_ok", "1400") if size <= 1400 else ("udp_df_fragneeded", "1401")
        out, err = capture(name)
        return u.parse_udp_probe(size, out.replace(was, str(size), 1), err, 0)

    assert m.bisect(probe, 576, 1500).mtu == 1400
