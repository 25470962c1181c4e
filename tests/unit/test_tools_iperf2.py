"""The iperf 2 tests (load.bounceback, iperf.crr) on real iperf 2.1.8 output (tests/data/iperf2_*)."""

from __future__ import annotations

import math
import pathlib

import pytest

from harness.core.errors import HarnessError
from harness.tools import TOOLS
from harness.tools.base import PhaseOutput, TestSpec
from harness.tools.iperf2 import histogram_percentile, nearest_rank

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
LOAD, CRR = TOOLS["load.bounceback"], TOOLS["iperf.crr"]
SPEC = TestSpec(server_addr="198.18.0.2", duration=2, streams=2)


def capture(name: str) -> tuple[str, str]:
    err = DATA / f"{name}.err"
    return (DATA / f"{name}.out").read_text(), err.read_text() if err.exists() else ""


def phase(name: str, capture_name: str, rc: int | None = 0) -> PhaseOutput:
    out, err = capture(capture_name)
    return PhaseOutput(name, out, err, rc)


def values(result) -> dict[str, float]:
    return {s.metric: s.value for s in result.samples}


def test_phases_are_the_probe_idle_then_beside_the_load_both_ways():
    idle, loaded = LOAD.phases(SPEC)
    assert (idle.name, loaded.name) == ("idle", "loaded")
    assert idle.argv == ["iperf", "-c", "198.18.0.2", "-p", "5001", "--bounceback=1",
                         "--bounceback-period=0.001", "-l", "16K", "-t", "2", "-e"]
    assert loaded.argv == idle.argv + ["--bounceback-congest=bidir,2"]
    assert LOAD.server_argv(SPEC) == ["iperf", "-s", "-p", "5001"]
    assert LOAD.timeout(SPEC) == idle.timeout + loaded.timeout


def test_one_client_command_is_refused_not_half_measured():
    with pytest.raises(HarnessError, match="phases"):
        LOAD.client_argv(SPEC)


@pytest.mark.parametrize("streams", [0, 17])
def test_working_load_streams_out_of_range(streams):
    with pytest.raises(HarnessError, match="1 to 16"):
        LOAD.phases(TestSpec(server_addr="198.18.0.2", duration=2, streams=streams))


def test_idle_and_loaded_figures_from_real_output():
    res = LOAD.parse_phases([phase("idle", "iperf2_bbp_idle"), phase("loaded", "iperf2_bbp_congest1")])
    assert res.ok, res.error
    v = values(res)
    # BB line: 1951=0.053/0.023/10.091/0.268 ms idle; 1815=0.050/0.020/9.171/0.292 ms loaded
    assert (v["lat_idle_us"], v["lat_idle_min_us"], v["lat_idle_max_us"]) == pytest.approx((53, 23, 10091))
    assert (v["lat_loaded_us"], v["lat_loaded_min_us"]) == pytest.approx((50, 20))
    # idle histogram 1:1922,2:14,3:4,…: 1922/1951 = 98.5 % in bin 1, P99 (1931.5) needs bin 2
    assert (v["lat_idle_p50_us"], v["lat_idle_p90_us"], v["lat_idle_p99_us"]) == (100, 100, 200)
    # loaded 1:1774,2:13,3:17: 1774/1815 = 97.7 %; P99 (1796.9) lands in bin 3
    assert v["lat_loaded_p99_us"] == 300
    assert v["lat_added_p99_us"] == v["lat_loaded_p99_us"] - v["lat_idle_p99_us"] == 100
    assert v["load_throughput_bps"] == 265e6          # [FD2] 265 Mbits/sec, the one stream
    for p in ("p50", "p90", "p99", "p999"):
        assert v[f"lat_idle_{p}_us"] <= v[f"lat_idle_max_us"] + 100


def test_load_is_the_sum_of_every_stream_both_ways():
    res = LOAD.parse_phases([phase("idle", "iperf2_bb_idle"), phase("loaded", "iperf2_bb_congest")])
    assert res.ok, res.error
    assert values(res)["load_throughput_bps"] == (253 + 303) * 1e6     # [FD3] and [FD2]


def test_lab_load_in_gbits_fills_the_veth():
    res = LOAD.parse_phases([phase("idle", "iperf2_lab_idle"), phase("loaded", "iperf2_lab_loaded_16k")])
    assert res.ok, res.error
    v = values(res)
    assert v["load_throughput_bps"] == pytest.approx((10.4 + 10.1) * 1e9)   # [FD2] and [FD3], Gbits/sec
    assert v["lat_loaded_us"] == pytest.approx(324)                        # 2325=0.324/…
    assert v["lat_idle_p99_us"] == 100 and v["lat_loaded_p99_us"] > 1000


def test_refused_killed_and_missing_phases_fail_with_the_reason():
    ok = phase("idle", "iperf2_bbp_idle")
    refused = LOAD.parse_phases([phase("idle", "iperf2_bb_refused"), phase("loaded", "iperf2_bbp_congest1")])
    assert not refused.ok and refused.error == "idle: iperf: tcp connect failed: Connection refused"
    killed = LOAD.parse_phases([ok, phase("loaded", "iperf2_bb_killed", None)])
    assert not killed.ok and killed.error.startswith("loaded: iperf timed out")
    assert "half of -t" in killed.error and "longer duration" in killed.error      # the likely cause, and what to do
    idle_killed = LOAD.parse_phases([phase("idle", "iperf2_bb_killed", None), phase("loaded", "iperf2_bbp_congest1")])
    assert idle_killed.error.startswith("idle: iperf timed out") and "half of -t" not in idle_killed.error
    died = LOAD.parse_phases([ok, phase("loaded", "iperf2_bb_killed", -9)])
    assert not died.ok and died.error.startswith("loaded: iperf exited -9")
    # an idle probe's output in the loaded phase: no working load was there
    no_load = LOAD.parse_phases([ok, phase("loaded", "iperf2_bbp_idle")])
    assert not no_load.ok and "working-load" in no_load.error
    assert not LOAD.parse_phases([ok]).ok


def test_histogram_percentile_is_the_upper_edge_of_the_bin_reaching_it():
    bins = {1: 90, 2: 9, 40: 1}
    assert histogram_percentile(bins, 100, 50) == 100
    assert histogram_percentile(bins, 100, 90) == 100
    assert histogram_percentile(bins, 100, 99) == 200
    assert histogram_percentile(bins, 100, 99.9) == 4000
    with pytest.raises(ValueError):
        histogram_percentile({}, 100, 50)


def test_crr_argv_bounds_the_connects_and_stamps_the_run():
    argv = CRR.client_argv(SPEC)
    assert argv[:2] == ["sh", "-c"]
    assert argv[2] == ("date +%s.%N; iperf -c 198.18.0.2 -p 5001 --connect-only=4000 -e; rc=$?; "
                       "date +%s.%N; exit $rc")
    assert "--connect-only=6000 " in CRR.client_argv(TestSpec(server_addr="x", duration=60))[2]


def test_crr_from_real_output():
    out, err = capture("iperf2_crr")
    res = CRR.parse(out, err, 0)
    assert res.ok, res.error
    v = values(res)
    # 500 connects between the stamps 1795825731.356411843 and 1795825731.439329081
    assert v["conn_per_s"] == pytest.approx(500 / (1795825731.439329081 - 1795825731.356411843))
    assert v["conn_failed"] == 0
    assert v["connect_p50_us"] <= v["connect_p99_us"]
    assert v["connect_us"] == pytest.approx(81, abs=1)     # iperf's own avg: 0.081 ms
    assert nearest_rank([3.0, 1.0, 2.0], 50) == 2.0


def test_crr_refused_counts_failures_and_fails():
    out, err = capture("iperf2_crr_refused")
    res = CRR.parse(out, err, 0)          # iperf exits 0 although all 20 were refused
    assert not res.ok
    assert res.error == "iperf: no connection made: tcp connect failed: Connection refused"
    assert values(res) == {"conn_failed": 20.0}


def test_crr_killed_and_unstamped():
    out, _ = capture("iperf2_crr")
    assert CRR.parse(out, "", None).error.startswith("iperf timed out")
    unstamped = "\n".join(ln for ln in out.splitlines() if not ln[:1].isdigit())
    assert "stamps" in CRR.parse(unstamped, "", 0).error
    assert math.isfinite(values(CRR.parse(out, "", 0))["conn_per_s"])


def test_a_runner_that_stops_after_a_failed_phase_gets_that_phase_s_reason():
    res = LOAD.parse_phases([phase("idle", "iperf2_bb_refused")])
    assert res.error == "idle: iperf: tcp connect failed: Connection refused"


def test_preflight_hint_and_version_of_iperf_2():
    import re

    from harness.tools.packages import command, install_hint
    assert install_hint(["iperf", "iperf3"]) == "apt-get install -y iperf iperf3"
    c = command("iperf")
    assert c.version_argv == ("iperf", "--version")
    # what Debian's iperf 2.1.8 prints (on stderr) for --version
    assert re.search(c.version_re, "iperf version 2.1.8 (12 August 2022) pthreads")[1] == "2.1.8"
