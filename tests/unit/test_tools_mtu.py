"""The MTU doctor's probes: DF ping and nstat parsers on real output captured by
tests/data/capture_mtu.sh, and the bisection on known answers."""

from __future__ import annotations

import pytest
from captures import capture, captured_argv

from harness.tools import mtu as m


def probe_of(name: str, size: int, rc: int) -> m.Probe:
    return m.parse_df_ping(size, *capture(name), rc)


def test_every_mtu_capture_is_read_here():
    from test_metric_table import MTU_PROBES
    read = {"ping_df_ok", "ping_df_fragneeded", "ping_df_local", "ping_df_local_dev", "ping_df_blackhole", "nstat_frag"}
    from test_tools_mtu_udp import CAPTURED as udp      # the UDP probe's, read there
    assert MTU_PROBES == read | udp


def test_argv_is_what_was_captured():
    assert m.df_ping_argv("198.18.2.2", 1400) == captured_argv("ping_df_ok")
    assert m.df_ping_argv("198.18.2.2", 1401) == captured_argv("ping_df_fragneeded")
    assert m.nstat_argv() == captured_argv("nstat_frag")
    with pytest.raises(ValueError):
        m.df_ping_argv("198.18.2.2", 20)


def test_a_probe_that_fits_passes():
    assert probe_of("ping_df_ok", 1400, 0) == m.Probe(1400, m.PASSED)


def test_a_router_answers_fragmentation_needed():
    p = probe_of("ping_df_fragneeded", 1401, 1)
    assert (p.outcome, p.mtu, p.source) == (m.FRAG_NEEDED, 1400, "198.18.1.254")
    assert not p.passed


def test_the_sender_refuses_what_it_learnt_or_its_device_cannot_send():
    assert probe_of("ping_df_local", 1401, 1) == m.Probe(1401, m.LOCAL, 1400)
    assert probe_of("ping_df_local_dev", 1501, 1) == m.Probe(1501, m.LOCAL, 1400)


def test_a_packet_that_vanishes_is_lost():
    assert probe_of("ping_df_blackhole", 1401, 1) == m.Probe(1401, m.LOST)


def test_errors_and_kills_are_errors_not_losses():
    assert m.parse_df_ping(1400, "", "ping: connect: Network is unreachable\n", 2).outcome == m.ERROR
    assert m.parse_df_ping(1400, "", "", None).outcome == m.ERROR


def test_nstat_counters():
    got = m.parse_nstat(capture("nstat_frag")[0])
    assert got["IpFragCreates"] == 4 and got["IpFragOKs"] == 2 and got["IpFragFails"] == 2
    assert "#kernel" not in got and all(isinstance(v, int) for v in got.values())
    assert m.frag_delta({"IpFragCreates": 1}, got)["IpFragCreates"] == 3


def test_mss_as_mtu():
    assert m.mss_mtu(1448) == 1500 and m.mss_mtu(1460, timestamps=False) == 1500
    assert m.parse_mss({"start": {"tcp_mss_default": 1398}}) == 1398
    assert m.parse_mss({}) is None


def test_route_and_link():
    assert m.parse_route_dev("198.18.2.2 via 198.18.1.254 dev eth0 src 198.18.1.1 uid 0 \\    cache ") == "eth0"
    assert m.parse_link_mtu("7: vx0: <BROADCAST,MULTICAST,UP> mtu 1450 qdisc noqueue master br0") == 1450
    assert m.parse_route_dev("") is None and m.parse_link_mtu("") is None


def test_a_routes_own_mtu_counts_and_a_learnt_one_does_not():
    # captured: a pod of the local cluster on Cilium (eth0 at 1500, its routes at 1450) …
    pod = "198.19.225.5 via 198.19.225.180 dev eth0 src 198.19.225.17 uid 0 \\    cache mtu 1450 \n"
    assert m.parse_route_mtu(pod) == 1450 and m.parse_route_dev(pod) == "eth0"
    # … and a host that learnt a path MTU from a router's frag-needed (namespaces, 2026-12-07)
    learnt = "198.18.251.1 via 198.18.250.254 dev obcap-a0 src 198.18.250.1 uid 0 \\    cache expires 599sec mtu 1400 \n"
    assert m.parse_route_mtu(learnt) is None
    assert m.parse_route_mtu("198.18.2.2 via 198.18.1.254 dev eth0 src 198.18.1.1 uid 0 \\    cache ") is None
    assert m.parse_route_mtu("") is None


def path(mtu: int | None, refusal: str = m.LOCAL):
    """A probe of a path that carries `mtu` bytes, refusing bigger ones as `refusal` says."""
    asked = []

    def probe(size):
        asked.append(size)
        ok = mtu is not None and size <= mtu
        return m.Probe(size, m.PASSED if ok else refusal)
    return probe, asked


@pytest.mark.parametrize("mtu", [576, 577, 1000, 1399, 1400, 1449, 1450, 1499])
def test_bisection_finds_the_path_mtu_to_the_byte(mtu):
    probe, asked = path(mtu, m.LOST)
    b = m.bisect(probe, 576, 1500)
    assert b.mtu == mtu
    # high, low, then log2(924) halvings; a vanished probe is sent again, LOST_TRIES in all
    assert len(set(asked)) <= 2 + 10 and len(asked) <= m.LOST_TRIES * (2 + 10)
    assert all(not p.passed for p in b.refusals)


def test_a_path_that_carries_the_device_mtu_takes_one_probe():
    probe, asked = path(9000)
    assert m.bisect(probe, 576, 1500) == m.Bisection(1500, (m.Probe(1500, m.PASSED),))
    assert asked == [1500]


def test_a_path_that_carries_nothing_says_so():
    probe, asked = path(None, m.LOST)
    assert m.bisect(probe, 576, 1500).mtu is None and asked == [1500] * m.LOST_TRIES + [576] * m.LOST_TRIES


def test_one_late_echo_is_sent_again_not_read_as_lost():
    """A probe that vanishes once, then crosses: the size passes (a loaded host's late reply)."""
    seen: list[int] = []

    def probe(size: int) -> m.Probe:
        seen.append(size)
        return m.Probe(size, m.LOST if seen.count(size) == 1 else m.PASSED)

    assert m.bisect(probe, 576, 1500).mtu == 1500 and seen == [1500, 1500]
    refused = m.bisect(lambda s: m.Probe(s, m.FRAG_NEEDED, 1450), 576, 1500, tries=3)
    assert refused.mtu is None and len(refused.probes) == 2      # an answer is never asked again


def test_a_probe_error_stops_the_bisection():
    with pytest.raises(m.ProbeError, match="unreachable"):
        m.bisect(lambda s: m.Probe(s, m.ERROR, error="unreachable"), 576, 1500)
    with pytest.raises(ValueError):
        m.bisect(lambda s: m.Probe(s, m.PASSED), 1500, 576)


@pytest.mark.parametrize("mtu", [None, 576, 577, 1000, 1399, 1400, 1401, 1449, 1450, 1451, 1499, 1500])
@pytest.mark.parametrize("hint", [576, 1000, 1400, 1450, 1499])
def test_a_hint_never_changes_the_answer(mtu, hint):
    probe, _ = path(mtu, m.LOST)
    assert m.bisect(probe, 576, 1500, hint=hint).mtu == m.bisect(path(mtu, m.LOST)[0], 576, 1500).mtu == mtu


def test_a_path_that_agrees_with_the_hint_takes_two_probes():
    probe, asked = path(1450, m.FRAG_NEEDED)
    assert m.bisect(probe, 576, 1500, hint=1450).mtu == 1450 and asked == [1450, 1451]
    probe, asked = path(1450, m.LOST)
    assert m.bisect(probe, 576, 1500, hint=1450).mtu == 1450 and asked == [1450] + [1451] * m.LOST_TRIES
