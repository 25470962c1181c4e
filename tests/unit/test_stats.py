"""harness.analysis.stats on frames built here: medians, native reference, ratios, the seed table."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from report_fixtures.synth import META, make_records

from harness import modes
from harness.analysis import significance, stats, summary, tablefmt
from harness.core.errors import HarnessError


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


def test_cpu_per_gbit_is_cpu_seconds_per_gigabit_from_total_else_client_plus_server():
    """CPU-seconds per gigabit: a busy share (%) of N CPUs is share/100 × N CPU-seconds each
    second; divided by Gbit/s (gigabits each second) it is CPU-seconds per gigabit."""
    rows = [row(value=2e9), row(metric="cpu_total_pct", value=50, unit="pct"),
            row(metric="cpu_client_pct", value=10, unit="pct"), row(metric="cpu_server_pct", value=10, unit="pct"),
            row("sleeve", value=1e9, datapath="sleeve"),
            row("sleeve", metric="cpu_client_pct", value=30, unit="pct", datapath="sleeve"),
            row("sleeve", metric="cpu_server_pct", value=20, unit="pct", datapath="sleeve")]
    # The lab: cpu_total_pct is the share of the machine's 2 CPUs; client and server are each
    # a process's % of one CPU.
    c = stats.cpu_per_gbit(frame(rows).assign(cpus=2)).set_index("mode")
    assert list(c.columns[-3:]) == ["cpu_pct", "gbps", "cpu_s_per_gbit"]
    assert c.loc["fastdp", "cpu_s_per_gbit"] == pytest.approx(0.5)   # 50 % × 2 CPUs / 2 Gbit/s (not client + server)
    assert c.loc["fastdp", "cpu_pct"] == 50 and c.loc["fastdp", "gbps"] == 2
    assert c.loc["sleeve", "cpu_s_per_gbit"] == pytest.approx(0.5)   # (30 + 20) % of one CPU / 1 Gbit/s
    # The machine's CPU count does not scale the per-process figures.
    c4 = stats.cpu_per_gbit(frame(rows).assign(cpus=4)).set_index("mode")["cpu_s_per_gbit"]
    assert c4["fastdp"] == pytest.approx(1.0) and c4["sleeve"] == pytest.approx(0.5)
    # Per-host accounting: client and server are each host's busy share of its 8 CPUs.
    per_host = [r for r in rows if r["metric"] != "cpu_total_pct"]
    h = stats.cpu_per_gbit(frame(per_host).assign(host_cpus=8)).set_index("mode")["cpu_s_per_gbit"]
    assert h["fastdp"] == pytest.approx(0.8)    # (10 + 10) % × 8 CPUs / 2 Gbit/s
    assert h["sleeve"] == pytest.approx(4.0)    # (30 + 20) % × 8 CPUs / 1 Gbit/s
    # A share of an unknown number of CPUs is no figure: not a guess at one CPU.
    bare = stats.cpu_per_gbit(frame(rows)).set_index("mode")["cpu_s_per_gbit"]
    assert "fastdp" not in bare.index and bare["sleeve"] == pytest.approx(0.5)


def test_results_load_carries_the_cpus_behind_each_share(tmp_path):
    from report_fixtures.synth import make_run

    from harness import results
    df = results.load(make_run(tmp_path, modes=["native"], underlay_mtus=[1500], tests=["iperf3.tcp"], repeats=1))
    assert set(df["cpus"]) == {2} and df["host_cpus"].isna().all()          # synth META: machine.cpus 2
    per_host = {"cpu_accounting": "per-host: …", "machine": {"cpus": 16},
                "hosts": {"h0": {"cpus": "4"}, "h1": {"cpus": 8}}}
    assert results.cpu_counts(per_host) == (16, 6)                          # hosts of two sizes: their mean
    assert results.cpu_counts({"cpu_accounting": "machine: …", "hosts": {"h0": {"cpus": 4}}}) == (None, None)
    assert results.cpu_counts({"machine": {"cpus": 0}}) == (None, None)


def seed_rows(mode, bw_mb, lat_us, u=1500, placement="container-container"):
    """The seed's numbers: TCP BW in MB/s (qperf tcp_bw) and latency in µs (qperf tcp_lat)."""
    p = "host-host" if mode == "native" else placement
    return [row(mode, u=u, placement=p, test="qperf.tcp_bw", value=bw_mb * 8e6),
            row(mode, u=u, placement=p, test="qperf.tcp_lat", metric="latency_us", value=lat_us, unit="us")]


def test_summary_table_reproduces_the_seed_percentages():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("sleeve-basic", 6.91, 372)
               + seed_rows("sleeve-l3", 23, 164) + seed_rows("fastdp", 112, 129))
    t = summary.summary_table(df, modes.standard().looks()).set_index("mode")     # the bundled modes' order
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
    t = summary.summary_table(frame(rows).assign(cpus=2)).set_index("mode")
    assert t.loc["fastdp", "tcp_test"] == "iperf3.tcp"
    assert t.loc["fastdp", "tcp_gbps"] == pytest.approx(5.0)
    assert t.loc["fastdp", "bw_pct"] == pytest.approx(50.0)
    assert t.loc["fastdp", "cpu_s_per_gbit"] == pytest.approx(0.16)    # 40 % of 2 CPUs / 5 Gbit/s (iperf3's)
    assert t.loc["native", "cpu_s_per_gbit"] == pytest.approx(0.08)    # 40 % of 2 CPUs / 10 Gbit/s
    assert t.loc["fastdp", "udp_loss_pct"] == pytest.approx(1.5)
    assert t.loc["fastdp", "udp_jitter_ms"] == pytest.approx(0.01)
    assert math.isnan(t.loc["fastdp", "tcp_lat_us"])


def test_summary_table_keeps_configs_whose_every_case_failed():
    df = frame(seed_rows("native", 116, 91.8)
               + [row("sleeve", placement="container-container", test="iperf3.tcp", metric="failed", value=None,
                      ok=False, error="sleeve: TAP device busy", datapath="sleeve")])
    t = summary.summary_table(df).set_index("mode")
    assert t.loc["sleeve", "failed"] == 1
    assert math.isnan(t.loc["sleeve", "tcp_gbps"])


def test_summary_table_of_realistic_run_has_one_row_per_mode_mtu_placement():
    df = frame(make_records(repeats=3, placements=("container-container",))).assign(cpus=META["machine"]["cpus"])
    t = summary.summary_table(df)
    assert len(t) == 2 * 7                    # two underlay MTUs × seven modes
    assert t["repeats"].eq(3).all()
    assert not t[["tcp_gbps", "tcp_lat_us", "bw_pct", "lat_pct", "udp_loss_pct", "cpu_s_per_gbit"]].isna().any().any()
    assert (t[t["mode"] != "native"]["bw_pct"] < 100).all()


def test_format_table_prints_aligned_markdown_per_underlay_mtu():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("sleeve-basic", 6.91, 372)
               + seed_rows("native", 116, 91.8, u=9000) + seed_rows("fastdp", 112, 129, u=9000))
    text = tablefmt.format_table(summary.summary_table(df))
    assert "Underlay MTU 1500" in text and "Underlay MTU 9000" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Mode"))
    assert "TCP BW (Gbit/s)" in header and "BW %" in header and "Lat %" in header
    block = lines[lines.index(header):lines.index(header) + 4]
    assert len({line.index("|") for line in block}) == 1      # columns line up
    basic = next(line for line in lines if line.startswith("sleeve-basic"))
    cells = [c.strip() for c in basic.split("|")]
    # BW %, Lat %: one repeat a side cannot tell sleeve-basic from native (≈), however far apart
    assert cells[cells.index("0.0553") + 2:cells.index("0.0553") + 4] == ["≈ 6.0", "≈ 405.2"]


def test_format_table_accepts_a_measurements_frame_and_empty():
    df = frame(seed_rows("native", 116, 91.8))
    assert "native" in tablefmt.format_table(df)
    assert tablefmt.format_table(frame([])) == "No measurements."


def test_format_summary_csv_json_and_bad_format():
    df = frame(seed_rows("native", 116, 91.8) + seed_rows("fastdp", 112, 129))
    csv = tablefmt.format_summary(df, "csv")
    assert csv.splitlines()[0].startswith("underlay_mtu,rate,mode")
    data = json.loads(tablefmt.format_summary(df, "json"))
    assert [d["mode"] for d in data] == ["native", "fastdp"]
    assert data[1]["tcp_lat_us"] == pytest.approx(129)
    assert data[0]["udp_loss_pct"] is None                  # NaN → null
    with pytest.raises(HarnessError, match="unknown format"):
        tablefmt.format_summary(df, "yaml")


def test_min_p_value_and_enough_repeats():
    assert significance.min_p_value(2, 2, "less") == pytest.approx(1 / 6)
    assert significance.min_p_value(3, 3, "less") == pytest.approx(0.05)
    assert significance.min_p_value(5, 5, "less") == pytest.approx(1 / 252)
    assert significance.min_p_value(5, 5) == pytest.approx(2 / 252)
    assert not significance.mann_whitney([1, 2], [3, 4], "less").enough
    assert significance.mann_whitney([1, 2, 3], [4, 5, 6], "less").significant()


def test_mann_whitney_direction():
    low, high = [1.0, 1.1, 0.9, 1.05, 0.95], [2.0, 2.1, 1.9, 2.05, 1.95]
    assert significance.mann_whitney(low, high, "less").significant()
    assert not significance.mann_whitney(low, high, "greater").significant()
    same = significance.mann_whitney([1, 1, 1], [1, 1, 1], "less")
    assert same.p == 1.0 and not same.significant()


def test_bootstrap_ci_brackets_the_median():
    lo, hi = significance.bootstrap_ci([9.8, 10.1, 10.0, 9.9, 10.2, 10.05])
    assert lo <= 10.025 <= hi
    assert all(math.isnan(x) for x in significance.bootstrap_ci([1.0]))


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
    assert tablefmt.fmt_num(v) == expected


def test_fmt_range():
    assert tablefmt.fmt_range(9.41, 9.38, 9.45) == "9.41 (9.38–9.45)"
    assert tablefmt.fmt_range(9.41, 9.41, 9.41) == "9.41"


# --------------------------------------------------------------------------- optional columns

def header_of(text: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith("Mode"))
    return [c.strip() for c in line.split("|")]


def cells_of(text: str, mode: str, placement: str) -> dict[str, str]:
    head = header_of(text)
    line = next(x for x in text.splitlines() if x.startswith(mode + " ") and f" {placement} " in x + " ")
    return dict(zip(head, (c.strip() for c in line.split("|"))))


def ping_rows(mode, placement, mn, avg, mx, mdev, u=1500, repeats=(0,), loss=0.0):
    """One ping.flood result per repeat: ping's min/avg/max/mdev in µs, loss in %."""
    rows = []
    for rep in repeats:
        k = dict(mode=mode, u=u, placement=placement, test="ping.flood", repeat=rep, unit="us",
                 datapath="native" if mode == "native" else "sleeve")
        rows += [row(metric="latency_min_us", value=mn, **k), row(metric="latency_us", value=avg + rep, **k),
                 row(metric="latency_max_us", value=mx, **k), row(metric="latency_mdev_us", value=mdev, **k),
                 row(metric="loss_pct", value=loss, **{**k, "unit": "pct"})]
    return rows


def seed003_frame():
    """Seed 003's flood-ping table (ms → µs), native host-host and sleeve-basic in the three placements."""
    return frame(ping_rows("native", "host-host", 88, 105, 247, 38, repeats=(0, 1, 2))
                 + ping_rows("sleeve-basic", "host-host", 90, 110, 260, 40, repeats=(0, 1, 2))
                 + ping_rows("sleeve-basic", "host-container", 94, 128, 327, 60.8, repeats=(0, 1, 2))
                 + ping_rows("sleeve-basic", "container-container", 475, 684, 968, 137.1, repeats=(0, 1, 2)))


def test_ping_only_run_shows_ping_columns_and_no_tcp_columns():
    df = seed003_frame()
    t = summary.summary_table(df).set_index(["mode", "placement"])
    cc = t.loc[("sleeve-basic", "container-container")]
    assert (cc["ping_avg_us"], cc["ping_avg_us_min"], cc["ping_avg_us_max"]) == (685, 684, 686)
    assert (cc["ping_min_us"], cc["ping_max_us"], cc["ping_mdev_us"]) == (475, 968, pytest.approx(137.1))
    assert cc["ping_pct"] == pytest.approx(685 / 106 * 100)             # the seed's "6.51X increase"
    assert t.loc[("native", "host-host"), "ping_pct"] == pytest.approx(100)
    assert t.loc[("sleeve-basic", "host-container"), "ping_pct"] == pytest.approx(129 / 106 * 100)

    text = tablefmt.format_table(df)
    head = header_of(text)
    assert head == ["Mode", "Overlay MTU", "Datapath", "Placement", "Ping avg (µs)", "Ping %",
                    "Ping min/avg/max/mdev (µs)"]                       # no TCP, UDP, CPU, loss columns
    assert "TCP Lat" not in text and "Lat %" not in text and "UDP" not in text and "—" not in text
    c = cells_of(text, "sleeve-basic", "container-container")
    assert c["Ping avg (µs)"] == "685 (684–686)"
    assert c["Ping %"] == "646.2"
    assert c["Ping min/avg/max/mdev (µs)"] == "475/685/968/137"
    assert cells_of(text, "native", "host-host")["Ping min/avg/max/mdev (µs)"] == "88/106/247/38"
    assert [x for x in text.splitlines() if x.startswith("sleeve-basic")][1].split("|")[3].strip() == "host-container"
    # The only footer note is the one core column a reader would look for.
    assert "No data: TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)." in text
    assert "TCP latency" not in text and "jitter" not in text


def test_ping_loss_column_only_when_some_ping_lost_packets():
    df = frame(ping_rows("native", "host-host", 88, 105, 247, 38)
               + ping_rows("sleeve-basic", "container-container", 475, 684, 968, 137.1, loss=0.4))
    text = tablefmt.format_table(df)
    assert "Ping loss %" in header_of(text)
    assert cells_of(text, "sleeve-basic", "container-container")["Ping loss %"] == "0.40"
    assert "Ping loss %" not in tablefmt.format_table(seed003_frame())


def seed004_frame():
    """Seed 004: qperf tcp_bw (MB/s) and udp_lat (µs); fastdp at overlay MTU 1410 and 8950."""
    rows = []
    for mode, o, bw_mb, lat in (("native", 9000, 1200, 48.1), ("fastdp", 1410, 316, 61.4),
                                ("fastdp", 8950, 1090, 61.9)):
        p = "host-host" if mode == "native" else "container-container"
        rows += [row(mode, u=9000, o=o, placement=p, test="qperf.tcp_bw", value=bw_mb * 8e6),
                 row(mode, u=9000, o=o, placement=p, test="qperf.udp_lat", metric="latency_us", value=lat, unit="us")]
    return frame(rows)


def test_udp_lat_run_shows_udp_latency_and_its_percent_of_native():
    df = seed004_frame()
    t = summary.summary_table(df).set_index(["mode", "overlay_mtu"])
    assert t.loc[("fastdp", 1410), "udp_lat_us"] == pytest.approx(61.4)
    assert t.loc[("fastdp", 1410), "udp_lat_pct"] == pytest.approx(61.4 / 48.1 * 100)
    assert t.loc[("fastdp", 8950), "bw_pct"] == pytest.approx(1090 / 1200 * 100)
    assert math.isnan(t.loc[("fastdp", 1410), "tcp_lat_us"])
    text = tablefmt.format_table(df)
    assert header_of(text) == ["Mode", "Overlay MTU", "Datapath", "Placement", "TCP BW (Gbit/s)", "BW %",
                               "UDP Lat (µs)", "UDP Lat %"]
    lines = [x for x in text.splitlines() if x.startswith("fastdp") and "|" in x]
    assert [x.split("|")[-1].strip() for x in lines] == ["≈ 127.7", "≈ 128.7"]    # one repeat a side: ≈
    assert "fastdp: TCP throughput ≈ (ranges overlap)." in text.splitlines()
    # UDP latency stands in for TCP latency: the only note is the CPU this frame has no samples of.
    assert "No data: CPU per gigabit (no CPU samples alongside TCP throughput, or no CPU count in run.json)." in text
    assert "TCP latency" not in text and "Lat % of native" not in text
    assert "UDP Lat %: above 100 is slower" in text


def iperf3_udp_rows(mode, gbps, loss, jitter, placement="host-host", test="iperf3.udp"):
    k = dict(mode=mode, placement=placement, test=test)
    out = [row(metric="throughput_bps", value=gbps * 1e9, **k), row(metric="loss_pct", value=loss, unit="pct", **k)]
    if jitter is not None:
        out.append(row(metric="jitter_ms", value=jitter, unit="ms", **k))
    return out


def test_iperf3_udp_run_shows_udp_bandwidth_loss_and_jitter():
    df = frame(iperf3_udp_rows("native", 0.95, 0.0, 0.004)
               + iperf3_udp_rows("sleeve", 0.62, 3.1, 0.02, placement="container-container"))
    t = summary.summary_table(df).set_index("mode")
    assert t.loc["sleeve", "udp_gbps"] == pytest.approx(0.62)
    assert t.loc["sleeve", "udp_bw_pct"] == pytest.approx(0.62 / 0.95 * 100)
    assert t.loc["sleeve", "udp_test"] == "iperf3.udp"
    assert math.isnan(t.loc["sleeve", "tcp_gbps"])          # UDP throughput is not TCP throughput
    text = tablefmt.format_table(df)
    assert header_of(text) == ["Mode", "Overlay MTU", "Datapath", "Placement", "UDP BW (Gbit/s)", "UDP BW %",
                               "UDP loss %", "UDP jitter (ms)"]
    c = cells_of(text, "sleeve", "container-container")
    assert (c["UDP BW (Gbit/s)"], c["UDP BW %"], c["UDP loss %"], c["UDP jitter (ms)"]) == \
        ("0.620", "≈ 65.3", "3.1", "0.020")             # one repeat a side: not distinguishable
    assert "No data: TCP throughput" in text and "BW % of native" not in text


def test_qperf_udp_bw_is_the_udp_fallback_without_jitter():
    df = frame(iperf3_udp_rows("native", 4.0, 0.1, None, test="qperf.udp_bw")
               + iperf3_udp_rows("fastdp", 3.0, 0.5, None, placement="container-container", test="qperf.udp_bw"))
    t = summary.summary_table(df).set_index("mode")
    assert t.loc["fastdp", "udp_test"] == "qperf.udp_bw"
    assert t.loc["fastdp", "udp_bw_pct"] == pytest.approx(75.0)
    head = header_of(tablefmt.format_table(df))
    assert "UDP BW (Gbit/s)" in head and "UDP loss %" in head and "UDP jitter (ms)" not in head


def test_run_with_every_test_shows_every_column_in_table_csv_and_json():
    from report_fixtures.synth import EVERY_TEST
    df = frame(make_records(repeats=3, underlay_mtus=(1500,), tests=EVERY_TEST,
                            placements=("host-host", "container-container"))).assign(cpus=META["machine"]["cpus"])
    t = summary.summary_table(df)
    assert list(t.columns) == summary.SUMMARY_COLUMNS
    overlay = t[t["mode"] != "native"]
    for col in ("tcp_gbps", "tcp_lat_us", "bw_pct", "lat_pct", "udp_gbps", "udp_bw_pct", "udp_loss_pct",
                "udp_jitter_ms", "udp_lat_us", "udp_lat_pct", "ping_avg_us", "ping_pct", "ping_min_us",
                "ping_max_us", "ping_mdev_us", "ping_loss_pct", "cpu_s_per_gbit"):
        assert overlay[col].notna().all(), col
    assert (overlay["udp_lat_pct"] > 100).all() and (overlay["ping_pct"] > 100).all()
    assert (overlay["udp_bw_pct"] < 100).all()
    assert set(t["udp_test"]) == {"iperf3.udp"}              # iperf3.udp wins over qperf.udp_bw
    text = tablefmt.format_table(t)
    assert header_of(text) == [title for key, title in tablefmt.TABLE_HEADERS
                               if key not in ("pair", "streams", "ping_loss", "failed", "stream", "jain")]
    assert "No data" not in text
    csv_head = tablefmt.format_summary(df, "csv").splitlines()[0].split(",")
    assert csv_head == summary.SUMMARY_COLUMNS
    data = json.loads(tablefmt.format_summary(df, "json"))
    sb = next(d for d in data if d["mode"] == "sleeve-basic" and d["placement"] == "container-container")
    assert sb["udp_lat_us"] > 0 and sb["ping_avg_us"] > sb["ping_min_us"] > 0 and sb["udp_gbps"] > 0
    assert sb["udp_test"] == "iperf3.udp" and sb["ping_loss_pct"] == 0


def test_columns_follow_each_underlay_mtu_table():
    df = pd.concat([seed003_frame(), seed004_frame()])
    text = tablefmt.format_table(df)
    b1500, b9000 = text.split("Underlay MTU 9000")
    assert "Ping avg (µs)" in b1500 and "TCP BW" not in b1500.split("\n\n")[1]
    assert "UDP Lat (µs)" in b9000 and "Ping avg" not in b9000.split("\n\n")[1]


def test_missing_columns_notes_only_core_columns():
    assert summary.missing_columns(summary.summary_table(seed004_frame())) == [
        "CPU per gigabit (no CPU samples alongside TCP throughput, or no CPU count in run.json)"]
    assert summary.missing_columns(summary.summary_table(seed003_frame())) == [
        "TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)"]
    notes = summary.missing_columns(summary.summary_table(frame(seed_rows("sleeve", 23, 164))))
    assert notes == ["BW % of native (no native TCP throughput to compare with)",
                     "Lat % of native (no native TCP latency to compare with)",
                     "CPU per gigabit (no CPU samples alongside TCP throughput, or no CPU count in run.json)"]
    only_bw = frame([row("native", test="qperf.tcp_bw", value=1e9)])
    assert "TCP latency (no qperf.tcp_lat measurements)" in summary.missing_columns(summary.summary_table(only_bw))


def test_fmt_compact_and_ping_rtt():
    assert [tablefmt.fmt_compact(v) for v in (5.0, 52.3, 0.060, 1229.0, None)] == ["5", "52.3", "0.06", "1229", "—"]
    assert tablefmt.fmt_ping_rtt({"ping_min_us": 52, "ping_avg_us": 61, "ping_max_us": 90,
                               "ping_mdev_us": 7}) == "52/61/90/7"
    assert tablefmt.fmt_ping_rtt({}) == "—"


def test_tail_latency_packet_rate_and_stream_columns_with_their_share_of_native():
    """P99 from sockperf, Mpps per payload size and % of native pps, per-stream throughput and
    Jain's index matched on the row's own stream count (fixed numbers, known answers)."""
    rows = []
    for mode, p99, pps, scale in (("native", 20.0, 2e6, 1.0), ("sleeve", 80.0, 0.5e6, 0.5)):
        rows += [row(mode, test="sockperf.pingpong", metric="latency_p99_us", value=p99, unit="us"),
                 row(mode, test="iperf3.pps64", metric="pps", value=pps, unit="pps"),
                 row(mode, test="iperf3.pps1400", metric="pps", value=pps / 2, unit="pps"),
                 row(mode, value=10e9 * scale), row(mode, streams=4, value=16e9 * scale)]
        rows += [row(mode, streams=4, metric="stream_throughput_bps", value=v * scale)
                 for v in (3e9, 4e9, 4e9, 5e9)]
        rows.append(row(mode, streams=4, metric="fairness_jain", value=0.97 if mode == "native" else 0.9,
                        unit="ratio"))
    t = summary.summary_table(frame(rows)).set_index(["mode", "streams"])
    one, four = t.loc[("sleeve", 1)], t.loc[("sleeve", 4)]
    assert one["p99_lat_us"] == 80 and one["p99_pct"] == pytest.approx(400)
    assert one["mpps_64"] == pytest.approx(0.5) and one["pps_64_pct"] == pytest.approx(25)
    assert one["mpps_1400"] == pytest.approx(0.25) and one["pps_1400_pct"] == pytest.approx(25)
    assert math.isnan(one["stream_gbps"]) and math.isnan(one["jain"])          # one stream: none
    assert four["tcp_gbps"] == pytest.approx(8) and four["stream_gbps"] == pytest.approx(2)
    assert (four["stream_gbps_min"], four["stream_gbps_max"]) == (pytest.approx(1.5), pytest.approx(2.5))
    assert four["jain"] == pytest.approx(0.9)
    text = tablefmt.format_table(frame(rows))
    head = header_of(text)
    for title in ("P99 Lat (µs)", "P99 %", "Mpps 64 B", "pps 64 B %", "Mpps 1400 B", "Per-stream (Gbit/s)",
                  "Jain"):
        assert title in head, head
    assert "Mpps 256 B" not in head                       # not measured: left out
    assert stats.higher_is_better("pps") and not stats.higher_is_better("latency_p99_us")


def test_figures_show_figures_that_do_not_vary_with_streams_once_per_config():
    """P99 and packet rate are measured with one stream; the summary repeats them on each
    stream count's row, and the figures take them from the lowest only."""
    from harness.report.plots import one_stream_count
    rows = []
    for mode, scale in (("native", 1.0), ("sleeve", 0.5)):
        rows += [row(mode, test="iperf3.pps64", metric="pps", value=1e6 * scale, unit="pps"),
                 row(mode, test="sockperf.pingpong", metric="latency_p99_us", value=40 / scale, unit="us"),
                 row(mode, value=10e9 * scale), row(mode, streams=4, value=20e9 * scale)]
    t = summary.summary_table(frame(rows))
    assert t.groupby("mode")["mpps_64"].count().to_dict() == {"native": 2, "sleeve": 2}   # the table repeats it
    d = one_stream_count(t, keep={"bw_pct"})
    assert d.groupby("mode")["mpps_64"].count().to_dict() == {"native": 1, "sleeve": 1}
    assert d.loc[d["streams"] == 1, "mpps_64"].notna().all() and d.loc[d["streams"] == 4, "p99_pct"].isna().all()
    assert d["bw_pct"].notna().all()                               # TCP's own per stream count stays
