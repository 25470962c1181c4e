"""The scenario's checks for the under-load tests: the [sweep] table, the working load's
stream count, and the payload a sweep cannot fit; all refused before anything runs."""

from __future__ import annotations

import pytest

from harness.core.errors import HarnessError
from harness.run import scenario as S


def build(text_tables: dict) -> S.Scenario:
    return S.build(text_tables, source="t.toml")


def test_defaults_and_a_sweep_as_written():
    sc = build({"matrix": {"tests": ["iperf3.udp_sweep64"]}})
    assert S.sweep_rates(sc) == (10e6, 31622777.0, 100e6, 316227766.0, 1e9, 3162277660.0, 10e9)
    sc = build({"sweep": {"from": "100mbit", "to": "1gbit", "steps": 2}})
    assert S.sweep_rates(sc) == (100e6, 1e9)


@pytest.mark.parametrize("sweep, why", [
    ({"steps": 0}, "[sweep] steps: 0 is outside 2..32"),
    ({"steps": 1}, "[sweep] steps: 1 is outside 2..32"),
    ({"from": "100kbit"}, "[sweep] from: rate '100kbit': below 1mbit"),
    ({"from": "1gbit", "to": "100mbit"}, "[sweep]: a sweep's top rate 100mbit must be above its bottom rate 1gbit"),
    ({"step": 3}, "step"),
])
def test_bad_sweeps_are_refused(sweep, why):
    with pytest.raises(HarnessError) as e:
        build({"matrix": {"tests": ["iperf3.udp_sweep64"]}, "sweep": sweep})
    assert why in str(e.value) and str(e.value).startswith("t.toml")


def test_working_load_streams_in_range_and_as_the_case_s_streams():
    with pytest.raises(HarnessError, match=r"\[matrix\] streams: load.bounceback runs 1 to 16 working-load "
                                           r"streams each way, not 17"):
        build({"matrix": {"tests": ["load.bounceback"], "streams": [2, 17]}})
    sc = build({"matrix": {"tests": ["load.bounceback", "iperf.crr", "iperf3.tcp"], "streams": [1, 4],
                           "modes": ["native"], "repeats": 1}})
    got = {(c.test, c.streams) for c in S.expand(sc)}
    assert got == {("load.bounceback", 1), ("load.bounceback", 4), ("iperf.crr", 1), ("iperf3.tcp", 1),
                   ("iperf3.tcp", 4)}
    # 17 streams are fine where no test takes a working load
    build({"matrix": {"tests": ["iperf3.tcp"], "streams": [17]}})


def test_a_sweep_payload_that_cannot_cross_the_overlay_is_refused_or_skipped():
    m = {"tests": ["iperf3.udp_sweep1400", "iperf.crr"], "modes": ["native", "sleeve-crypto"], "repeats": 1}
    with pytest.raises(HarnessError, match="iperf3.udp_sweep1400 sends 1400-byte payloads, which need an MTU "
                                           "of at least 1428; mode sleeve-crypto has 1418"):
        S.expand(build({"matrix": m}))
    cases = S.expand(build({"matrix": {**m, "unfit": "skip"}}))
    assert {(c.mode, c.test) for c in cases} == {("native", "iperf3.udp_sweep1400"), ("native", "iperf.crr"),
                                                 ("sleeve-crypto", "iperf.crr")}
