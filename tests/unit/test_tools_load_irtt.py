"""load.irtt (harness/tools/load_irtt.py): its argv and its parser on real captured output
(tests/data/capture_load.sh); its server's shell runs for real in test_tools_underload.py."""

from __future__ import annotations


import pytest

from captures import capture, captured_argv
from harness.core.errors import HarnessError
from harness.tools import get
from harness.tools.base import PhaseOutput, TestSpec
from harness.tools.load_irtt import LoadIrtt

TOOL = LoadIrtt()


def spec(**kw) -> TestSpec:
    return TestSpec(**{"server_addr": "127.0.0.1", "duration": 1, "streams": 2, "port": 15122, **kw})


def phase(name: str, capture_name: str, returncode: int | None = 0) -> PhaseOutput:
    out, err = capture(capture_name)
    return PhaseOutput(name, out, err, returncode)


def figures(result) -> dict[str, float]:
    return {s.metric: s.value for s in result.samples}


def test_it_is_registered_and_needs_iperf_beside_irtt():
    assert get("load.irtt") is not None and TOOL.binary == "irtt" and TOOL.also_needs == ("iperf",)


def test_the_captured_commands_are_the_tools_own():
    """The captures were made with the tool's argv (every 10 ms there, every 1 ms here)."""
    idle, loaded = TOOL.phases(spec())
    as_captured = [a.replace("-i 1ms", "-i 10ms") for a in loaded.argv]
    assert captured_argv("load_irtt_loaded")[:2] == as_captured[:2]
    assert " ".join(captured_argv("load_irtt_loaded")[2:]) == " ".join(as_captured[2].split())
    assert captured_argv("load_irtt_idle") == [a.replace("1ms", "10ms") for a in idle.argv]
    assert TOOL.load_port(spec()) == 15123 and "-p 15123" in loaded.argv[2] and "-P 2" in loaded.argv[2]


def test_the_load_outlasts_the_probe():
    _, loaded = TOOL.phases(spec(duration=5))
    assert "-t 6 " in loaded.argv[2] and "-d 5s" in loaded.argv[2]


def test_every_round_trip_is_a_real_value_not_a_bin_edge():
    r = TOOL.parse_phases([phase("idle", "load_irtt_idle"), phase("loaded", "load_irtt_loaded")])
    assert r.ok, r.error
    got = figures(r)
    assert got["rtt_idle_p50_us"] == pytest.approx(96.752)
    assert got["rtt_idle_p99_us"] == pytest.approx(281.2)
    assert got["rtt_loaded_p99_us"] == pytest.approx(8677.142)
    assert got["rtt_idle_min_us"] == pytest.approx(47.65) and got["rtt_idle_us"] == pytest.approx(107.766)
    for p in ("p50", "p90", "p99", "p999"):
        assert got[f"rtt_added_{p}_us"] == pytest.approx(got[f"rtt_loaded_{p}_us"] - got[f"rtt_idle_{p}_us"])
    assert got["load_throughput_bps"] == pytest.approx(13.3e9 + 9.95e9)   # the two [FDn] lines
    assert got["probe_loss_pct"] == 0.0


def test_a_load_that_never_connected_fails_the_case():
    r = TOOL.parse_phases([phase("idle", "load_irtt_idle"), phase("loaded", "load_irtt_noload")])
    assert not r.ok and r.error == "loaded: the working load: iperf: tcp connect failed: Connection refused"


def test_killed_phases_say_which():
    killed = TOOL.parse_phases([phase("idle", "load_irtt_idle"), phase("loaded", "load_irtt_killed", None)])
    assert not killed.ok and killed.error.startswith("loaded: killed at its timeout")
    idle = TOOL.parse_phases([phase("idle", "load_irtt_killed", None), phase("loaded", "load_irtt_loaded")])
    assert not idle.ok and idle.error.startswith("idle: irtt")


def test_a_shell_that_printed_no_mark_is_one_reason():
    r = TOOL.parse_phases([phase("idle", "load_irtt_idle"), PhaseOutput("loaded", "", "sh: 1: iperf: not found", 127)])
    assert r.error == "loaded: the probe's shell printed no result line (exit 127): sh: 1: iperf: not found"


def test_missing_phases_are_named():
    r = TOOL.parse_phases([phase("idle", "load_irtt_idle")])
    assert not r.ok and r.error == "load.irtt: expected phases idle and loaded, got idle"


@pytest.mark.parametrize("streams", [0, 17])
def test_streams_out_of_range_are_refused(streams):
    with pytest.raises(HarnessError, match=r"^load\.irtt: .* working-load streams; 1 to 16 each way$"):
        TOOL.phases(spec(streams=streams))
