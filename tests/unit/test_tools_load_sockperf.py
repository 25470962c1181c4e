"""load.sockperf (harness/tools/load_sockperf.py) and sockperf's round-trip parser
(tools/sockperf.round_trips): its argv and its parser on real captured output
(tests/data/capture_load.sh), the failures included; its server's shell runs for
real in test_tools_underload.py."""

from __future__ import annotations

import pytest

from captures import capture, captured_argv
from harness.core.errors import HarnessError
from harness.tools import get, sockperf
from harness.tools.base import PhaseOutput, TestSpec
from harness.tools.load_sockperf import LoadSockperf

TOOL = LoadSockperf()


def spec(**kw) -> TestSpec:
    return TestSpec(**{"server_addr": "127.0.0.1", "duration": 1, "streams": 2, "port": 15132, **kw})


def phase(name: str, capture_name: str, returncode: int | None = 0) -> PhaseOutput:
    out, err = capture(capture_name)
    return PhaseOutput(name, out, err, returncode)


def figures(result) -> dict[str, float]:
    return {s.metric: s.value for s in result.samples}


def test_it_is_registered_and_needs_iperf_beside_sockperf():
    assert isinstance(get("load.sockperf"), LoadSockperf)
    assert TOOL.binary == "sockperf" and TOOL.also_needs == ("iperf",) and TOOL.listen == "udp"


def test_the_captured_commands_are_the_tools_own():
    idle, loaded = TOOL.phases(spec())
    assert captured_argv("load_sockperf_idle") == idle.argv
    assert captured_argv("load_sockperf_loaded")[:2] == loaded.argv[:2]
    assert " ".join(captured_argv("load_sockperf_loaded")[2:]) == " ".join(loaded.argv[2].split())
    assert TOOL.load_port(spec()) == 15133 and TOOL.load_port(spec(data_port=15200)) == 15200
    assert "--mps=10000" in idle.argv and "--full-rtt" in idle.argv


def test_the_load_outlasts_the_probe():
    _, loaded = TOOL.phases(spec(duration=5))
    assert "-t 6 " in loaded.argv[2] and "-t 5 --mps" in loaded.argv[2]


def test_every_round_trip_is_sockperfs_own_figure():
    r = TOOL.parse_phases([phase("idle", "load_sockperf_idle"), phase("loaded", "load_sockperf_loaded")])
    assert r.ok, r.error
    got = figures(r)
    assert got["rtt_idle_p50_us"] == 66.850 and got["rtt_idle_p90_us"] == 77.065
    assert got["rtt_idle_p99_us"] == 151.906 and got["rtt_idle_p999_us"] == 495.290
    assert got["rtt_idle_min_us"] == 4.066 and got["rtt_idle_max_us"] == 3658.856 and got["rtt_idle_us"] == 72.273
    assert got["rtt_loaded_p99_us"] == 190.116 and got["rtt_loaded_us"] == 82.184
    for p in ("p50", "p90", "p99", "p999"):
        assert got[f"rtt_added_{p}_us"] == pytest.approx(got[f"rtt_loaded_{p}_us"] - got[f"rtt_idle_{p}_us"])
    assert got["load_throughput_bps"] == pytest.approx(13.4e9 + 13.2e9)   # the two [FDn] lines
    assert got["probe_loss_pct"] == 0.0


def test_a_load_that_never_connected_fails_the_case():
    r = TOOL.parse_phases([phase("idle", "load_sockperf_idle"), phase("loaded", "load_sockperf_noload")])
    assert not r.ok and r.error == "loaded: the working load: iperf: tcp connect failed: Connection refused"


def test_a_lost_message_stalls_the_ping_pong_and_says_so():
    got, why = sockperf.round_trips(*capture("load_sockperf_lost"), 0)
    assert got == {} and why == ("sockperf: a message or its reply was lost and the ping-pong waited for it "
                                 "to the end (255 sent, 254 answered)")
    r = TOOL.parse_phases([phase("idle", "load_sockperf_lost"), phase("loaded", "load_sockperf_loaded")])
    assert not r.ok and r.error == "idle: " + why


def test_a_server_gone_mid_run_is_sockperfs_own_line():
    got, why = sockperf.round_trips(*capture("load_sockperf_stalled"), 0)
    assert why == "sockperf: No messages were received from the server. Is the server down?"


def test_one_way_figures_are_refused():
    """The plain ping-pong's capture (no --full-rtt) prints one-way latency: never read as round trips."""
    _, why = sockperf.round_trips(*capture("sockperf_udp"), 0)
    assert why == "sockperf printed one-way latency, not round trips (--full-rtt)"


def test_killed_phases_say_which():
    killed = TOOL.parse_phases([phase("idle", "load_sockperf_idle"), phase("loaded", "load_sockperf_killed", None)])
    assert not killed.ok and killed.error.startswith("loaded: killed at its timeout")
    idle = TOOL.parse_phases([phase("idle", "load_sockperf_killed", None), phase("loaded", "load_sockperf_loaded")])
    assert not idle.ok and idle.error.startswith("idle: sockperf")


def test_another_probes_mark_is_not_read_as_this_ones():
    out, err = capture("load_sockperf_loaded")
    r = TOOL.parse_phases([phase("idle", "load_sockperf_idle"),
                           PhaseOutput("loaded", out.replace("=== sockperf exit", "=== irtt exit"), err, 0)])
    assert not r.ok and r.error.startswith("loaded: the probe's shell printed no result line (exit 0)")


@pytest.mark.parametrize("streams", [0, 17])
def test_streams_out_of_range_are_refused(streams):
    with pytest.raises(HarnessError, match=r"^load\.sockperf: .* working-load streams; 1 to 16 each way$"):
        TOOL.phases(spec(streams=streams))


def test_output_cut_short_names_what_is_missing():
    """The idle capture cut after its mean: the first figure it lacks is named."""
    out, err = capture("load_sockperf_idle")
    cut = out[:out.index("Summary:")]
    assert sockperf.round_trips(cut, err, 0) == ({}, "sockperf printed no <MIN>")
