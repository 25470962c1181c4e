"""The UDP sweeps (iperf3.udp_sweepN) on real iperf3 3.12 output, and the knee finder on
fixed data with known answers."""

from __future__ import annotations

import pathlib

import pytest

from harness.core.errors import HarnessError
from harness.tools import TOOLS
from harness.tools.base import PhaseOutput, TestSpec
from harness.tools.knee import Knee, knee
from harness.tools.sweep import DEFAULT_RATES, rates

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
SWEEP = TOOLS["iperf3.udp_sweep64"]


def phase(name: str, capture: str, rc: int | None = 0) -> PhaseOutput:
    return PhaseOutput(name, (DATA / f"{capture}.out").read_text(), (DATA / f"{capture}.err").read_text(), rc)


def test_knee_is_the_last_clean_step_before_the_first_lossy_one():
    steps = [(10e6, 0.0), (100e6, 0.05), (1e9, 0.3), (3e9, 0.0), (10e9, 40.0)]
    assert knee(steps) == Knee(100e6, 1, True)            # 3 Gbit/s clean after a lossy 1 Gbit/s: no
    assert knee(steps, threshold_pct=0.5) == Knee(3e9, 3, True)
    assert knee(list(reversed(steps))) == Knee(100e6, 3, True)     # order given does not matter


def test_knee_when_nothing_or_everything_is_lost():
    assert knee([(10e6, 1.0), (20e6, 2.0)]) == Knee(0.0, None, True)
    assert knee([(10e6, 0.0), (20e6, 0.09)]) == Knee(20e6, 1, False)    # only a lower bound
    assert knee([(10e6, 0.1)]) == Knee(0.0, None, True)                 # the threshold itself is lossy
    with pytest.raises(ValueError):
        knee([])
    with pytest.raises(ValueError):
        knee([(float("nan"), 0.0)])


def test_rates_are_log_spaced_and_checked():
    assert rates("10mbit", "1gbit", 3) == (10e6, 100e6, 1e9)
    assert DEFAULT_RATES[0] == 10e6 and DEFAULT_RATES[-1] == 10e9 and len(DEFAULT_RATES) == 7
    for bad, why in [(("10mbit", "1gbit", 1), "2 to 32 steps"), (("10mbit", "1gbit", 0), "2 to 32 steps"),
                     (("100kbit", "1gbit", 3), "below 1mbit"), (("1gbit", "1gbit", 3), "above")]:
        with pytest.raises(HarnessError, match=why):
            rates(*bad)


def test_phases_step_up_against_one_server():
    spec = TestSpec(server_addr="198.18.0.2", duration=2, rates=(1e9, 10e6))
    steps = SWEEP.phases(spec)
    assert [p.name for p in steps] == ["step01", "step02"]
    assert steps[0].argv == ["iperf3", "-c", "198.18.0.2", "-p", "5201", "-t", "2", "-J", "-u",
                             "-b", "10000000", "-l", "64"]
    assert SWEEP.server_argv(spec) == ["iperf3", "-s", "-p", "5201"]      # no -1: it serves every step
    assert len(SWEEP.phases(TestSpec(server_addr="x", duration=1))) == len(DEFAULT_RATES)
    with pytest.raises(HarnessError, match="at least 2 steps"):
        SWEEP.phases(TestSpec(server_addr="x", duration=1, rates=(1e9,)))
    with pytest.raises(HarnessError, match="phases"):
        SWEEP.client_argv(spec)
    assert SWEEP.payload == 64 and TOOLS["iperf3.udp_sweep1400"].payload == 1400


def test_steps_and_knee_from_real_output():
    res = SWEEP.parse_phases([phase("step01", "iperf3_sweep64_100M"), phase("step02", "iperf3_sweep1400_5G")])
    assert res.ok, res.error
    v = {s.metric: s.value for s in res.samples}
    assert v["step01_offered_bps"] == 100e6                        # start.test_start.target_bitrate
    assert v["step01_sent_bps"] == pytest.approx(37529417.646)     # the sender fell short of it
    assert v["step01_received_bps"] == pytest.approx(23725952.780)  # end.sum_received
    assert v["step01_loss_pct"] == pytest.approx(36.776, abs=1e-3)
    assert v["step02_jitter_ms"] == pytest.approx(0.24006, abs=1e-5)
    assert v["knee_bps"] == 0.0 and v["knee_bounded"] == 1.0       # loopback lost at both steps


def test_a_failed_step_fails_the_sweep_with_its_name():
    res = SWEEP.parse_phases([phase("step01", "iperf3_sweep64_100M"), phase("step02", "iperf3_sweep_refused")])
    assert not res.ok
    assert res.error == "step02: iperf3: unable to connect to server: Connection refused"
    killed = SWEEP.parse_phases([phase("step01", "iperf3_sweep64_100M"), phase("step02", "iperf3_sweep_refused", None)])
    assert killed.error.endswith("(timed out)")
    assert not SWEEP.parse_phases([phase("step01", "iperf3_sweep64_100M")]).ok


def test_a_runner_that_stops_after_a_failed_step_gets_that_step_s_reason():
    res = SWEEP.parse_phases([phase("step01", "iperf3_sweep_refused")])
    assert res.error == "step01: iperf3: unable to connect to server: Connection refused"
