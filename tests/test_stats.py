"""harness.stats on frames built here: medians, native reference, ratios, the seed table."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from harness import stats
from harness.errors import HarnessError
from report_fixtures.synth import make_records


def row(mode="fastdp", u=1500, o=None, placement="host-host", test="iperf3.tcp", streams=1, repeat=0,
        metric="throughput_bps", value=1e9, ok=True, error=None, datapath=None, unit="bps", rate=None):
    return dict(run_id="t", case=f"{mode}/{u}/{placement}/{test}/{streams}", mode=mode,
                datapath=datapath or ("native" if mode == "native" else "fastdp"), underlay_mtu=u,
                overlay_mtu=o if o is not None else (u if mode == "native" else u - 50), placement=placement,
                test=test, streams=streams, repeat=repeat, metric=metric, value=value, unit=unit, ok=ok,
                error=error, ts="", rate=rate)


def frame(rows):
    return pd.DataFrame(rows)


def test_summarize_median_min_max_over_repeats():
    df = frame([row(repeat=i, value=v) for i, v in enumerate([3e9, 1e9, 2e9])])
    s = stats.summarize(df)
    assert len(s) == 1
    r = s.iloc[0]
    assert (r["n"], r["median"], r["min"], r["max"]) == (3, 2e9, 1e9, 3e9)


def test_failed_rows_are_not_measurements_and_are_listed():
    df = frame([row(value=2e9), row(repeat=1, metric="failed", value=None, ok=False, error="iperf3: refused")])
    assert len(stats.ok_rows(df)) == 1
    f = stats.failures(df)
    assert len(f) == 1 and f.iloc[0]["error"] == "iperf3: refused" and f.iloc[0]["repeat"] == 1


def test_native_reference_falls_back_to_host_host_and_prefers_same_placement():
    df = frame([
        row("native", placement="host-host", value=10e9),
        row("native", placement="container-container", value=8e9),
        row("fastdp", placement="container-container", value=4e9),
        row("fastdp", placement="host-container", value=5e9),
    ])
    s = stats.with_native(stats.summarize(df))
    pct = {r["placement"]: r["pct_of_native"] for r in s[s["mode"] == "fastdp"].to_dict("records")}
    assert pct["container-container"] == pytest.approx(50.0)     # same placement exists: 4/8
    assert pct["host-container"] == pytest.approx(50.0)          # none: host-host, 5/10


def test_native_reference_is_per_underlay_mtu_test_and_streams():
    df = frame([row("native", u=1500, value=10e9), row("native", u=9000, value=30e9),
                row("native", u=1500, streams=4, value=12e9),
                row("fastdp", u=9000, value=15e9), row("fastdp", u=1500, streams=4, value=6e9)])
    s = stats.with_native(stats.summarize(df))
    f = s[s["mode"] == "fastdp"].set_index(["underlay_mtu", "streams"])["pct_of_native"]
    assert f[(9000, 1)] == pytest.approx(50.0)
    assert f[(1500, 4)] == pytest.approx(50.0)


def test_repeat_ratios_pair_each_repeat_with_the_same_repeat_of_native():
    # Native drifts between repeats; the mode drifts with it. Pairing gives exactly 0.5.
    rows = []
    for rep, nat in enumerate([10e9, 14e9, 8e9]):
        rows += [row("native", repeat=rep, value=nat), row("fastdp", repeat=rep, value=nat / 2)]
    r = stats.repeat_ratios(frame(rows))
    assert list(r["ratio"]) == pytest.approx([0.5, 0.5, 0.5])
    assert set(r["mode"]) == {"fastdp"}


def test_repeat_without_native_counterpart_is_left_out():
    rows = [row("native", repeat=0, value=10e9), row("fastdp", repeat=0, value=5e9),
            row("native", repeat=1, metric="failed", value=None, ok=False, error="x"),
            row("fastdp", repeat=1, value=6e9)]
    r = stats.repeat_ratios(frame(rows))
    assert list(r["repeat"]) == [0]


def test_ratio_to_native_median_of_repeat_ratios():
    rows = []
    for rep, (n, f) in enumerate([(10, 4), (10, 5), (10, 6)]):
        rows += [row("native", repeat=rep, value=n * 1e9), row("fastdp", repeat=rep, value=f * 1e9)]
    r = stats.ratio_to_native(frame(rows)).iloc[0]
    assert (r["ratio"], r["ratio_min"], r["ratio_max"], r["n"]) == pytest.approx((0.5, 0.4, 0.6, 3))


def test_cpu_per_gbps_uses_total_else_client_plus_server():
    rows = [row(value=2e9), row(metric="cpu_total_pct", value=50, unit="pct"),
            row(metric="cpu_client_pct", value=10, unit="pct"), row(metric="cpu_server_pct", value=10, unit="pct"),
            row("sleeve", value=1e9, datapath="sleeve"),
            row("sleeve", metric="cpu_client_pct", value=30, unit="pct", datapath="sleeve"),
            row("sleeve", metric="cpu_server_pct", value=20, unit="pct", datapath="sleeve")]
    c = stats.cpu_per_gbps(frame(rows)).set_index("mode")["cpu_per_gbps"]
    assert c["fastdp"] == pytest.approx(25.0)    # 50 % / 2 Gbit/s
    assert c["sleeve"] == pytest.approx(50.0)    # (30 + 20) % / 1 Gbit/s


def seed_rows(mode, bw_mb, lat_us, u=1500, placement="container-container"):
    """The seed's numbers: TCP BW in MB/s (qperf tcp_bw) and latency in µs (qperf tcp_lat)."""
    p = "host-host" if mode == "native" else placement
    return [row(mode, u=u, placement=p, test="qperf.tcp_bw", value=bw_mb * 8e6),
            row(mode, u=u, placement=p, test="qperf.tcp_lat", metric="latency_us", value=lat_us, unit="us")]


def test_summary_table_reproduces_the_seed_percentages():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("sleeve-basic", 6.91, 372)
               + seed_rows("sleeve-l3", 23, 164) + seed_rows("fastdp", 112, 129))
    t = stats.summary_table(df).set_index("mode")
    assert t.loc["native", "bw_pct"] == pytest.approx(100.0)
    assert t.loc["sleeve-basic", "bw_pct"] == pytest.approx(5.96, abs=0.01)
    assert t.loc["sleeve-basic", "lat_pct"] == pytest.approx(405.23, abs=0.01)
    assert t.loc["sleeve-l3", "bw_pct"] == pytest.approx(19.83, abs=0.01)
    assert t.loc["fastdp", "lat_pct"] == pytest.approx(140.52, abs=0.01)
    assert t.loc["fastdp", "tcp_test"] == "qperf.tcp_bw"        # no iperf3.tcp: qperf is the fallback
    assert list(t.index) == ["native", "fastdp", "sleeve-l3", "sleeve-basic"]


def test_summary_table_prefers_iperf3_and_fills_udp_and_cpu():
    rows = []
    for mode, bw in (("native", 10e9), ("fastdp", 5e9)):
        p = "host-host"
        rows += [row(mode, placement=p, value=bw), row(mode, placement=p, test="qperf.tcp_bw", value=bw * 0.5),
                 row(mode, placement=p, metric="cpu_total_pct", value=40, unit="pct"),
                 row(mode, placement=p, test="iperf3.udp", metric="loss_pct", value=1.5, unit="pct"),
                 row(mode, placement=p, test="iperf3.udp", metric="jitter_ms", value=0.01, unit="ms")]
    t = stats.summary_table(frame(rows)).set_index("mode")
    assert t.loc["fastdp", "tcp_test"] == "iperf3.tcp"
    assert t.loc["fastdp", "tcp_gbps"] == pytest.approx(5.0)
    assert t.loc["fastdp", "bw_pct"] == pytest.approx(50.0)
    assert t.loc["fastdp", "cpu_per_gbps"] == pytest.approx(8.0)
    assert t.loc["fastdp", "udp_loss_pct"] == pytest.approx(1.5)
    assert t.loc["fastdp", "udp_jitter_ms"] == pytest.approx(0.01)
    assert math.isnan(t.loc["fastdp", "tcp_lat_us"])


def test_summary_table_keeps_configs_whose_every_case_failed():
    df = frame(seed_rows("native", 116, 91.8)
               + [row("sleeve", placement="container-container", test="iperf3.tcp", metric="failed", value=None,
                      ok=False, error="sleeve: TAP device busy", datapath="sleeve")])
    t = stats.summary_table(df).set_index("mode")
    assert t.loc["sleeve", "failed"] == 1
    assert math.isnan(t.loc["sleeve", "tcp_gbps"])


def test_summary_table_of_realistic_run_has_one_row_per_mode_mtu_placement():
    df = frame(make_records(repeats=3, placements=("container-container",)))
    t = stats.summary_table(df)
    assert len(t) == 2 * 7                    # two underlay MTUs × seven modes
    assert t["repeats"].eq(3).all()
    assert not t[["tcp_gbps", "tcp_lat_us", "bw_pct", "lat_pct", "udp_loss_pct", "cpu_per_gbps"]].isna().any().any()
    assert (t[t["mode"] != "native"]["bw_pct"] < 100).all()


def test_format_table_prints_aligned_markdown_per_underlay_mtu():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("sleeve-basic", 6.91, 372)
               + seed_rows("native", 116, 91.8, u=9000) + seed_rows("fastdp", 112, 129, u=9000))
    text = stats.format_table(stats.summary_table(df))
    assert "Underlay MTU 1500" in text and "Underlay MTU 9000" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Mode"))
    assert "TCP BW (Gbit/s)" in header and "BW %" in header and "Lat %" in header
    block = lines[lines.index(header):lines.index(header) + 4]
    assert len({line.index("|") for line in block}) == 1      # columns line up
    basic = next(line for line in lines if line.startswith("sleeve-basic"))
    cells = [c.strip() for c in basic.split("|")]
    assert cells[cells.index("0.0553") + 2:cells.index("0.0553") + 4] == ["6.0", "405.2"]   # BW %, Lat %


def test_format_table_accepts_a_measurements_frame_and_empty():
    df = frame(seed_rows("native", 116, 91.8))
    assert "native" in stats.format_table(df)
    assert stats.format_table(frame([])) == "No measurements."


def test_format_summary_csv_json_and_bad_format():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("fastdp", 112, 129))
    csv = stats.format_summary(df, "csv")
    assert csv.splitlines()[0].startswith("underlay_mtu,rate,mode")
    data = json.loads(stats.format_summary(df, "json"))
    assert [d["mode"] for d in data] == ["native", "fastdp"]
    assert data[1]["tcp_lat_us"] == pytest.approx(129)
    assert data[0]["udp_loss_pct"] is None                  # NaN → null
    with pytest.raises(HarnessError, match="unknown format"):
        stats.format_summary(df, "yaml")


def test_min_p_value_and_enough_repeats():
    assert stats.min_p_value(2, 2, "less") == pytest.approx(1 / 6)
    assert stats.min_p_value(3, 3, "less") == pytest.approx(0.05)
    assert stats.min_p_value(5, 5, "less") == pytest.approx(1 / 252)
    assert stats.min_p_value(5, 5) == pytest.approx(2 / 252)
    assert not stats.mann_whitney([1, 2], [3, 4], "less").enough
    assert stats.mann_whitney([1, 2, 3], [4, 5, 6], "less").significant()


def test_mann_whitney_direction():
    low, high = [1.0, 1.1, 0.9, 1.05, 0.95], [2.0, 2.1, 1.9, 2.05, 1.95]
    assert stats.mann_whitney(low, high, "less").significant()
    assert not stats.mann_whitney(low, high, "greater").significant()
    same = stats.mann_whitney([1, 1, 1], [1, 1, 1], "less")
    assert same.p == 1.0 and not same.significant()


def test_bootstrap_ci_brackets_the_median():
    lo, hi = stats.bootstrap_ci([9.8, 10.1, 10.0, 9.9, 10.2, 10.05])
    assert lo <= 10.025 <= hi
    assert all(math.isnan(x) for x in stats.bootstrap_ci([1.0]))


def test_compare_runs_marks_significant_and_knows_direction():
    a = frame([row(repeat=i, value=v) for i, v in enumerate([10e9, 10.1e9, 9.9e9, 10.05e9, 9.95e9])]
              + [row(test="qperf.tcp_lat", metric="latency_us", unit="us", repeat=i, value=v)
                 for i, v in enumerate([20, 20.2, 19.8, 20.1, 19.9])])
    b = frame([row(repeat=i, value=v) for i, v in enumerate([7e9, 7.1e9, 6.9e9, 7.05e9, 6.95e9])]
              + [row(test="qperf.tcp_lat", metric="latency_us", unit="us", repeat=i, value=v)
                 for i, v in enumerate([15, 15.2, 14.8, 15.1, 14.9])])
    c = stats.compare_runs(a, b).set_index("metric")
    assert c.loc["throughput_bps", "significant"] and c.loc["throughput_bps", "better"] is False
    assert c.loc["throughput_bps", "delta_pct"] == pytest.approx(-30.0)
    assert c.loc["latency_us", "significant"] and c.loc["latency_us", "better"] is True


@pytest.mark.parametrize("v,expected", [(14.3, "14.3"), (0.6089, "0.609"), (123.4, "123"), (2.0, "2.00"),
                                        (None, "—"), (float("nan"), "—"), (0, "0")])
def test_fmt_num(v, expected):
    assert stats.fmt_num(v) == expected


def test_fmt_range():
    assert stats.fmt_range(9.41, 9.38, 9.45) == "9.41 (9.38–9.45)"
    assert stats.fmt_range(9.41, 9.41, 9.41) == "9.41"
