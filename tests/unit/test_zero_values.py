"""A measured value of 0, as a loss knee is when even a sweep's lowest step loses too much:
the table shows it, the stored-baseline gate says why it cannot judge against it, and the
A/B comparison counts a build whose knee fell to 0 as slower instead of dropping its pairs.
Synthetic data with known answers."""

from __future__ import annotations

import math

import pandas as pd

from harness.analysis import stats, summary
from harness.gates import baseline as gate, compare
from harness.gates.verdict import FAIL, SKIPPED
from harness.report import under_load as load_report
from test_summary_load import frame


def _native_knee_zero() -> pd.DataFrame:
    df = frame()
    df.loc[(df["mode"] == "native") & (df["metric"] == "knee_bps"), "value"] = 0.0
    return df


def test_a_native_knee_of_zero_is_shown_and_the_gate_says_why_it_has_no_ratio():
    df = _native_knee_zero()
    s = summary.summary_table(df).set_index("mode")
    assert s.loc["native", "knee_64_mbps"] == 0.0 and s.loc["sleeve", "knee_64_mbps"] == 316
    assert [f.title for f in load_report.figures(summary.summary_table(df), df)][-1] == "UDP offered against received load"
    v = gate.evaluate_frame(df, {"run_id": "r"}, gate.baseline_from_frame(frame(), {"run_id": "b"}))
    knee = [c for c in v.cases if c.case["test"] == "iperf3.udp_sweep64"]
    assert [c.status for c in knee] == [SKIPPED]
    assert "native's knee_bps is 0 in every repeat" in knee[0].message
    assert {c.case["test"]: c.status for c in v.cases if c is not knee[0]} == {
        "iperf.crr": "pass", "load.bounceback": "pass"}


def _ab(head_knee: float, base_knee: float = 300e6, repeats: int = 18) -> pd.DataFrame:
    rows = []
    for r in range(repeats):
        for arm, knee in (("base", base_knee), ("head", head_knee)):
            rows.append({"case": f"sleeve@{arm}/sweep", "mode": f"sleeve@{arm}", "datapath": "sleeve",
                         "underlay_mtu": 1500, "overlay_mtu": 1450, "placement": "host-host",
                         "test": "iperf3.udp_sweep64", "streams": 1, "repeat": r, "metric": "knee_bps",
                         "value": knee * (1 + 0.01 * (r % 3)), "unit": "bps", "ok": True, "error": None,
                         "pair": None, "rate": None, "run_id": "ab"})
    return pd.DataFrame(rows)


def test_a_knee_fallen_to_zero_is_a_thousandfold_change_not_a_lost_pair():
    p = stats.arm_pairs(_ab(0.0), "base", "head")
    assert len(p) == 18 and (p["log_ratio"] == -math.log(stats.ZERO_CHANGE)).all()
    both = stats.arm_pairs(_ab(0.0, base_knee=0.0), "base", "head")
    assert len(both) == 18 and (both["log_ratio"] == 0.0).all()
    v = compare.judge_frame(_ab(0.0), {"scenario": {"repeats": 18}})
    assert [c.status for c in v.cases] == [FAIL], [c.message for c in v.cases]
    assert "slower" in v.cases[0].message
