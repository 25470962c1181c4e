"""blast's tests (udp.ppsN, packet.ppsN, udp.ndrN, udp.pdrN) on real blast output (tests/data/capture_blast.sh):
the argv builders, the pure parser, the adaptive search's phases."""

from __future__ import annotations

import dataclasses
import json

import pytest

from captures import DATA, capture, captured_argv, values
from harness.tools import TOOLS, search
from harness.tools.base import PhaseOutput, TestSpec
from harness.tools.blast import BlastPps, parse_send, sender_bound
from harness.tools.ndr import BlastSearch

SPEC = TestSpec(server_addr="198.18.0.2", duration=1, overlay_mtu=1500, port=9000)


def rc(name: str) -> int | None:
    for line in (DATA / "captures.tsv").read_text().splitlines():
        n, code, _ = line.split("\t")
        if n == name:
            return int(code)
    raise KeyError(name)


def out(name: str) -> PhaseOutput:
    stdout, stderr = capture(name)
    return PhaseOutput(name, stdout, stderr, rc(name))


def test_argv_is_what_the_captures_ran():
    t = BlastPps(64, locate=lambda: "blast")
    assert t.client_argv(SPEC) == captured_argv("blast_pps64")
    assert t.server_argv(SPEC)[:8] == captured_argv("blast_recv")[:8]
    bound = dataclasses.replace(SPEC, bind_addr="198.18.0.2")
    assert t.server_argv(bound)[-2:] == ["--addr", "198.18.0.2"]


def test_the_registry_has_the_tests():
    for name in ("udp.pps64", "udp.pps1400", "udp.ndr64", "udp.pdr64"):
        assert TOOLS[name].name == name and TOOLS[name].builds == ("make", "gcc")
    assert TOOLS["udp.pps64"].payload == 64 and TOOLS["udp.ndr64"].adaptive
    assert TOOLS["udp.pdr64"].settings.loss == search.DEFAULT_PDR_LOSS and TOOLS["udp.ndr64"].settings.loss == 0


def test_unpaced_64_bytes():
    o = out("blast_pps64")
    res = parse_send(o.stdout, o.stderr, o.returncode)
    v = values(res)
    assert res.ok and v["pps"] == pytest.approx(220992 / 1.001050)
    assert v["sent_pps"] == v["pps"] and v["loss_pct"] == 0 and v["socket_drops"] == 0
    assert v["sender_cpu_pct"] == pytest.approx(100 * 0.2416 / 1.001050, abs=0.01)
    # nothing lost, but the sender had a quarter of a CPU, and this older sender did not say
    # whether it waited for the rest (no wait_s): not judged sender-bound
    assert v["sender_bound"] == 0 and "sender_wait_pct" not in v


def test_a_starved_sender_is_sender_bound():
    # on CPU 0 beside a busy loop there: 30 % of a CPU run, 70 % waited for, nothing lost
    v = values(parse_send(*capture("blast_pps64_starved"), 0))
    assert v["sender_cpu_pct"] == pytest.approx(100 * 0.3014 / 1.000603, abs=0.01)
    assert v["sender_wait_pct"] == pytest.approx(100 * 0.6995 / 1.000603, abs=0.01)
    assert v["loss_pct"] == 0 and v["sender_bound"] == 1


def test_paced_at_its_rate_is_not_sender_bound():
    v = values(parse_send(*capture("blast_paced"), 0))
    assert v["sent_pps"] == pytest.approx(100032 / 1.000402) and v["sender_bound"] == 0


def test_1400_bytes():
    v = values(parse_send(*capture("blast_pps1400"), 0))
    assert v["pps"] == pytest.approx(198080 / 1.000226) and v["loss_pct"] == 0


def test_the_packet_sender_is_the_same_test_through_a_packet_socket():
    t = BlastPps(64, locate=lambda: "blast", packet=True)
    assert t.name == "packet.pps64" and TOOLS["packet.pps1400"].payload == 1400
    assert t.client_argv(dataclasses.replace(SPEC, port=9300)) == captured_argv("blast_packet64")
    assert t.server_argv(SPEC) == BlastPps(64, locate=lambda: "blast").server_argv(SPEC)   # the same receiver
    o = out("blast_packet64")
    assert '"sender":"packet"' in o.stdout
    v = values(parse_send(o.stdout, o.stderr, o.returncode))
    assert v["pps"] == pytest.approx(755392 / 0.997040 * 0.997040 / 1.000057)
    assert v["loss_pct"] == 0 and v["sender_cpu_pct"] == pytest.approx(100 * 0.9875 / 1.000057, abs=0.01)
    assert v["sender_bound"] == 1          # a whole CPU, nothing lost: the sender set the rate
    v = values(parse_send(*capture("blast_packet1400"), 0))
    assert v["pps"] == pytest.approx(580544 / 1.000036) and v["loss_pct"] == 0


def test_a_packet_sender_without_cap_net_raw_or_over_ipv6_fails_with_why():
    res = parse_send(*capture("blast_packet_noraw"), rc("blast_packet_noraw"))
    assert not res.ok and "it needs CAP_NET_RAW" in res.error
    res = parse_send(*capture("blast_packet_v6"), rc("blast_packet_v6"))
    assert not res.ok and "--packet is the sender's, over IPv4" in res.error


def test_no_receiver_fails_with_why():
    res = parse_send(*capture("blast_norecv"), 0)
    assert not res.ok and "receiver's counts never came back" in res.error


def test_killed_and_bad_input_fail_with_why():
    res = parse_send(*capture("blast_killed"), None)
    assert not res.ok and res.error == "blast timed out (killed)"
    res = parse_send(*capture("blast_killed"), rc("blast_killed"))
    assert not res.ok and "exited -9" in res.error
    res = parse_send(*capture("blast_badsize"), rc("blast_badsize"))
    assert not res.ok and res.error == "blast exited 2: blast: --size 10 is under the 18-byte header"
    res = parse_send(*capture("blast_toobig"), 2)
    assert "at most 1472 payload bytes" in res.error


def test_receiver_lines():
    recv = [json.loads(x) for x in capture("blast_recv")[0].splitlines()]
    assert recv[0] == {"blast": "ready", "port": 9000, "flows": 4}
    assert recv[1]["runs"] == 4 and recv[1]["packets"] >= 220992
    idle = json.loads(capture("blast_recv_idle")[0].splitlines()[-1])
    assert idle["packets"] == 0 and idle["runs"] == 0 and idle["drops"] == 0


def test_a_receiver_that_reports_garbage_fails():
    doc = json.loads(capture("blast_pps64")[0])
    doc["receiver"] = {"packets": "many"}
    assert not parse_send(json.dumps(doc) + "\n", "", 0).ok
    assert not parse_send("not json\n", "", 0).ok


@pytest.mark.parametrize("asked, sent, loss, cpu, wait, bound", [
    (0, 5e5, 0.0, 99.0, 0.0, True),  # the path kept up with a saturated sender
    (0, 5e5, 0.0, 40.0, 0.0, False),  # back-pressure (blocked, not waiting for a CPU): the path's
    (0, 5e5, 0.0, 40.0, 55.0, True),  # starved: it ran or waited to run all the window
    (0, 5e5, 3.0, 40.0, 55.0, False),  # starved, but the path lost: its limit
    (0, 5e5, 3.0, 99.0, 0.0, False),  # the path lost: its limit
    (1e6, 9e5, 0.0, 99.0, 0.0, True),  # short of what was asked
    (1e6, 9.6e5, 0.0, 99.0, 0.0, False),
])
def test_sender_bound(asked, sent, loss, cpu, wait, bound):
    assert sender_bound(asked, sent, loss, cpu, wait) is bound


def with_loss(name: str, asked: float, sent: int, got: int) -> PhaseOutput:
    """A real sender line with its counts set: a trial at `asked` that lost sent - got."""
    doc = json.loads(capture("blast_paced")[0])
    doc.update(asked_pps=asked, sent=sent, seconds=1.0)
    doc["receiver"]["packets"] = got
    return PhaseOutput(name, json.dumps(doc) + "\n", "", 0)


def test_search_phases_follow_the_trials():
    t = BlastSearch("ndr", 64, locate=lambda: "blast")
    first = t.phases(SPEC)
    assert [p.name for p in first] == ["trial01"] and first[0].argv[-2:] == ["--rate", "0"]
    outs = [with_loss("trial01", 0, 1_000_000, 600_000)]
    nxt = t.next_phase(SPEC, outs)
    assert nxt.name == "trial02" and nxt.argv[-2:] == ["--rate", "600000"]
    outs.append(with_loss("trial02", 600_000, 600_000, 600_000))
    assert t.next_phase(SPEC, outs).argv[-1] == "600000"      # the load's vote goes on
    outs.append(with_loss("trial03", 600_000, 600_000, 600_000))
    assert t.next_phase(SPEC, outs).argv[-1] == "648000"      # 2 of 3 passed: 8 % above it
    # a trial that failed to parse ends the phases, and the case fails with its reason
    bad = outs + [PhaseOutput("trial04", "", "blast: send failed: Network is unreachable", 1)]
    assert t.next_phase(SPEC, bad) is None
    res = t.parse_phases(bad)
    assert not res.ok and res.error.startswith("trial04: blast exited 1")


def test_search_result_samples():
    t = BlastSearch("ndr", 64, locate=lambda: "blast")
    outs, cap = [], 300_000
    while (nxt := t.next_phase(SPEC, outs) if outs else t.phases(SPEC)[0]) is not None:
        rate = float(nxt.argv[-1])
        sent = 1_000_000 if rate == 0 else int(rate)
        outs.append(with_loss(nxt.name, rate, sent, min(sent, cap)))
    res = t.parse_phases(outs)
    v = values(res)
    assert res.ok and v["validated"] == 1 and v["sender_bound"] == 0 and v["trials"] == len(outs)
    assert cap * 0.98 <= v["ndr_pps"] <= cap and v["ndr_bps"] == v["ndr_pps"] * 64 * 8
    assert v["trial01_offered_pps"] == 0 and v["trial01_loss_pct"] == pytest.approx(70.0)
    assert f"trial{len(outs):02d}_sent_pps" in v


def test_search_cut_short_fails():
    t = BlastSearch("pdr", 64, locate=lambda: "blast")
    res = t.parse_phases([with_loss("trial01", 0, 1_000_000, 500_000)])
    assert not res.ok and "stopped after 1 trials" in res.error


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="18..65507"):
        BlastPps(17)
    with pytest.raises(ValueError, match="ndr or pdr"):
        BlastSearch("mlr", 64)
