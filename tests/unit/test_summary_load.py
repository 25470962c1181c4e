"""The under-load columns of the summary table, the headline each new test is judged on, and
the report's under-load figures, on synthetic measurements with known answers."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis import stats, summary, tablefmt
from harness.gates.verdict import DEFAULT_TOLERANCES, HEADLINE
from harness.report import under_load as load_report


def row(mode: str, test: str, metric: str, value: float, repeat: int, streams: int = 1) -> dict:
    overlay = 1500 if mode == "native" else 1450
    return {"case": f"{mode}/u1500/o{overlay}/host-host/{test}/p{streams}", "mode": mode,
            "datapath": "fastdp" if mode == "native" else "sleeve", "underlay_mtu": 1500,
            "overlay_mtu": overlay, "placement": "host-host", "test": test, "streams": streams,
            "repeat": repeat, "metric": metric, "value": value, "unit": "", "ok": True, "error": None,
            "pair": None, "rate": None}


def frame() -> pd.DataFrame:
    rows = []
    for r, k in enumerate((1.0, 1.2, 0.9)):       # medians are the k = 1.0 repeat's values
        for mode, idle, loaded, cps, knee in (("native", 100, 300, 9000, 3e9), ("sleeve", 100, 2100, 3000, 316e6)):
            rows += [row(mode, "load.bounceback", "lat_idle_p99_us", idle, r, 2),
                     row(mode, "load.bounceback", "lat_loaded_p99_us", loaded * k, r, 2),
                     row(mode, "load.bounceback", "lat_added_p99_us", loaded * k - idle, r, 2),
                     row(mode, "load.bounceback", "load_throughput_bps", 2e9 * k, r, 2),
                     row(mode, "iperf.crr", "conn_per_s", cps * k, r),
                     row(mode, "iperf.crr", "connect_p99_us", 50 * k, r),
                     row(mode, "iperf.crr", "conn_failed", 0.0, r),
                     row(mode, "iperf3.udp_sweep64", "knee_bps", knee * k, r)]
            for i, (sent, loss) in enumerate(((10e6, 0.0), (1e9, 0.0), (10e9, 30.0))):
                rows += [row(mode, "iperf3.udp_sweep64", f"step{i + 1:02d}_sent_bps", sent, r),
                         row(mode, "iperf3.udp_sweep64", f"step{i + 1:02d}_received_bps", sent * (1 - loss / 100), r),
                         row(mode, "iperf3.udp_sweep64", f"step{i + 1:02d}_loss_pct", loss, r)]
    return pd.DataFrame(rows)


def test_columns_hold_the_medians_and_crr_as_a_share_of_native():
    s = summary.summary_table(frame()).set_index("mode")
    assert s.loc["native", "lat_loaded_p99_us"] == 300
    assert s.loc["sleeve", "lat_loaded_p99_us"] == 2100
    assert s.loc["sleeve", "lat_added_p99_us"] == 2000
    assert (s.loc["sleeve", "lat_loaded_p99_us_min"], s.loc["sleeve", "lat_loaded_p99_us_max"]) == (2100 * 0.9, 2100 * 1.2)
    assert s.loc["native", "load_gbps"] == pytest.approx(2.0)
    assert s.loc["sleeve", "conn_per_s"] == 3000
    assert s.loc["sleeve", "crr_pct"] == pytest.approx(100 * 3000 / 9000)
    assert s.loc["native", "knee_64_mbps"] == pytest.approx(3000)
    assert s.loc["sleeve", "knee_64_mbps"] == pytest.approx(316)
    assert pd.isna(s.loc["sleeve", "knee_1400_mbps"])         # not measured: empty, not zero


def test_text_table_shows_the_new_columns_only_where_measured():
    shown = dict(tablefmt.table_columns(summary.summary_table(frame())))
    for key in ("load_p99", "added_p99", "load_bw", "crr", "crr_pct", "connect_p99", "knee64"):
        assert key in shown, key
    assert "knee1400" not in shown and "conn_failed" not in shown    # unmeasured; no failure to show
    assert "BB loaded P99" in tablefmt.format_table(frame())


def test_each_new_test_has_one_headline_with_a_tolerance_and_a_direction():
    for test, metric, higher in (("load.bounceback", "lat_loaded_p99_us", False), ("iperf.crr", "conn_per_s", True),
                                 ("iperf3.udp_sweep64", "knee_bps", True), ("iperf3.udp_sweep1400", "knee_bps", True),
                                 ("irtt.udp", "rtt_p50_us", False)):
        assert HEADLINE[test] == metric
        assert metric in DEFAULT_TOLERANCES
        assert stats.higher_is_better(metric) is higher
    assert "iperf3.udp_sweep64" not in [t.name for t in summary.PPS_TESTS]   # a payload, not a packet-rate test


def test_sweep_points_are_step_medians_with_the_knee():
    p = load_report.sweep_points(frame(), "iperf3.udp_sweep64").set_index(["mode", "step"])
    assert list(p.loc["sleeve"].index) == [1, 2, 3]
    assert p.loc[("sleeve", 3), "received_bps"] == pytest.approx(7e9)
    assert p.loc[("sleeve", 3), "loss_pct"] == 30.0
    assert p.loc[("sleeve", 1), "knee_bps"] == pytest.approx(316e6)
    assert load_report.sweep_points(frame(), "iperf3.udp_sweep1400").empty


def test_figures_only_where_measured():
    df = frame()
    figs = load_report.figures(summary.summary_table(df), df)
    assert [f.title for f in figs] == ["Latency idle and under load", "UDP offered against received load"]
    assert all(f.uri.startswith("data:image/png;base64,") for f in figs)
    sweep_only = df[df["test"] != "load.bounceback"]
    assert [f.title for f in load_report.figures(summary.summary_table(sweep_only), sweep_only)] == [
        "UDP offered against received load"]
    none = df[~df["test"].isin(["load.bounceback", "iperf3.udp_sweep64"])]
    assert load_report.figures(summary.summary_table(none), none) == []
