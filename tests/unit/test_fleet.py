"""Runs with host pairs, synthetic and seeded: ratios per pair, the pair that stands out, the
heatmaps and the report. Known answers, no chance in it."""

from __future__ import annotations

import pandas as pd
import pytest
from report_fixtures.synth import make_records

from harness.analysis import fleet, summary as summ, tablefmt
from harness.report import fleet as report_fleet, render
from harness.results import RunStore

PAIRS = ["h0→h1", "h0→h2", "h1→h2", "h1→h3", "h2→h3", "h0→h3"]


def pair_records(slow: dict[str, float] | None = None, repeats: int = 8,
                 placements: tuple[str, ...] = ("container-container",)) -> list[dict]:
    """The same native/fastdp matrix on every pair; `slow` scales one pair's fastdp (and,
    with "native:" in front, its native) throughput."""
    out = []
    for i, pair in enumerate(PAIRS):
        fast = (slow or {}).get(pair, 1.0)
        nat = (slow or {}).get(f"native:{pair}", 1.0)
        for r in make_records(modes=("native", "fastdp"), underlay_mtus=(1500,), tests=("iperf3.tcp", "qperf.tcp_lat"),
                              repeats=repeats, seed=i + 1, scale={"fastdp": fast, "native": nat},
                              placements=placements):
            src, dst = pair.split("→")
            out.append({**r, "case": r["case"] + f"/{src}-{dst}", "pair": pair, "src_host": src, "dst_host": dst})
    return out


def test_ratios_to_native_are_each_pairs_own():
    """A pair whose underlay is slow is slow for native and fastdp alike: its % of native is
    the others' (the reference is native on the same pair)."""
    df = pd.DataFrame(pair_records({"h1→h3": 0.5, "native:h1→h3": 0.5}))
    t = summ.summary_table(df)
    fd = t[t["mode"] == "fastdp"].set_index("pair")
    assert sorted(fd.index) == sorted(PAIRS)
    assert fd.loc["h1→h3", "tcp_gbps"] == pytest.approx(0.5 * fd.loc["h0→h1", "tcp_gbps"], rel=0.1)
    assert fd.loc["h1→h3", "bw_pct"] == pytest.approx(fd.loc["h0→h1", "bw_pct"], rel=0.1)
    assert "Pair" in tablefmt.format_table(t)


def test_a_slow_pair_is_named_with_its_share_and_p():
    df = pd.DataFrame(pair_records({"h1→h2": 0.6}))
    out = fleet.outliers(df)
    assert [(o.mode, o.pair, o.metric) for o in out] == [("fastdp", "h1→h2", "throughput_bps")]
    o = out[0]
    assert o.share == pytest.approx(-0.4, abs=0.05) and o.p < 0.05 / 6
    assert str(o).startswith(f"h1→h2: {abs(o.share) * 100:.0f} % below the median pair (fastdp, container-container, "
                             f"iperf3.tcp throughput_bps, p = ")


def test_no_pair_is_named_on_even_pairs_or_too_few_repeats():
    assert fleet.outliers(pd.DataFrame(pair_records())) == []
    assert fleet.outliers(pd.DataFrame(pair_records({"h1→h2": 0.6}, repeats=2))) == []   # 2 repeats cannot show it
    assert fleet.outliers(pd.DataFrame(make_records(modes=("native", "fastdp"), underlay_mtus=(1500,)))) == []


def test_the_grid_puts_each_pair_at_client_and_server():
    t = summ.summary_table(pd.DataFrame(pair_records()))
    fd = t[(t["mode"] == "fastdp")]
    hosts = fleet.hosts_of(PAIRS)
    assert hosts == ["h0", "h1", "h2", "h3"]
    g = fleet.grid(fd, "tcp_gbps", hosts)
    assert g.shape == (4, 4) and (g[0, 1] > 0) and (g[2, 3] > 0)
    assert all(g[i, i] != g[i, i] for i in range(4)) and g[1, 0] != g[1, 0]     # not measured: NaN


def test_the_report_has_the_pair_heatmaps_and_names_the_outlier(tmp_path):
    store = RunStore.create(tmp_path, {"scenario": {}, "run_id": "pairs"})
    store.path.joinpath("measurements.jsonl").write_text(
        "".join(pd.Series(r).to_json(force_ascii=False) + "\n" for r in pair_records({"h1→h2": 0.6})))
    html = render.render_html([store.path])
    assert 'alt="heatmaps of host pairs per mode"' in html
    assert "Host pairs</strong><ul><li>h1→h2: 39 % below the median pair" in html
    assert report_fleet.pair_heatmaps(summ.summary_table(pd.DataFrame(make_records()))) is None


def test_a_hosts_heatmap_label_carries_its_zone_from_run_json():
    meta = {"testbed": {"hosts": {"h0": {"name": "node-a", "zone": "eu-1a"}, "h1": {"name": "node-b", "zone": None},
                                  "h2": {"name": "node-c"}}}}
    zones = fleet.zones_of(meta)
    assert zones == {"node-a": "eu-1a"}
    assert [report_fleet.tick(h, zones) for h in ("node-a", "node-b")] == ["node-a\neu-1a", "node-b"]
    assert fleet.zones_of({}) == {} and fleet.zones_of({"testbed": {"hosts": None}}) == {}
    assert fleet.zones_of({"testbed": {"hosts": 2}}) == {}       # the lab records a count
    assert "Zones: node-a eu-1a." in tablefmt.run_notes(meta)           # the text table's footer
    assert not [n for n in tablefmt.run_notes({"testbed": {"hosts": 2}}) if n.startswith("Zones")]


def test_the_heatmaps_leave_same_node_out_and_the_table_shows_it_last():
    """same-node's server sits on the client's host: no cell of a pair. A mode with it and
    container-container shows the latter; a mode with only same-node has no heatmap."""
    from harness.report.plots import _looks
    t = summ.summary_table(pd.DataFrame(pair_records(repeats=3, placements=("same-node", "container-container"))))
    assert list(report_fleet._rows_of(t, _looks(t, None))) == ["native · host-host", "fastdp · container-container"]
    text = tablefmt.format_table(t)
    assert text.index("container-container") < text.index("same-node")
    only = summ.summary_table(pd.DataFrame(pair_records(repeats=3, placements=("same-node",))))
    assert list(report_fleet._rows_of(only, _looks(only, None))) == ["native · host-host"]
    assert all(only[only["mode"] == "fastdp"]["bw_pct"].notna())      # its native reference: host-host


def test_a_mesh_summed_per_repeat_with_jains_index_and_the_slowest_pair():
    df = pd.DataFrame(pair_records({"h0→h3": 0.5}, repeats=3))
    (m,) = [x for x in fleet.mesh(df) if x.mode == "fastdp"]
    assert (m.pairs, m.repeats, m.slowest) == (6, 3, "h0→h3")
    assert 0.9 < m.jain < 1.0 and m.slowest_bps / m.aggregate_bps == pytest.approx(0.5 / 5.5, rel=0.1)
    assert str(m).startswith("fastdp, container-container, iperf3.tcp: 6 pairs at once, ")
    lines = fleet.lines(df, {"scenario": {"schedule": "mesh"}})
    assert lines[0].startswith("Pairs measured at once shared the fabric (schedule mesh)")
    assert any(line.startswith("fastdp, container-container, iperf3.tcp: 6 pairs at once") for line in lines)
    assert fleet.lines(df, {"scenario": {"schedule": "sequential"}}) == [str(o) + "." for o in fleet.outliers(df)]


def test_the_gate_judges_each_pair_against_its_own_baseline_and_names_the_pair():
    """A baseline of six pairs; now one pair's fastdp runs at 60 %: that pair's case alone
    fails, named with its pair in the text, the table and JUnit."""
    from harness.gates import baseline as gate, render
    meta = {"run_id": "base", "hostname": "bench-01", "kernel": "6.18.44"}
    b = gate.baseline_from_frame(pd.DataFrame(pair_records()), meta)
    assert sorted({c["pair"] for c in b["cases"]}) == sorted(PAIRS)
    v = gate.evaluate_frame(pd.DataFrame(pair_records({"h1→h2": 0.6})), {**meta, "run_id": "now"}, b)
    assert [(c.case["pair"], c.case["metric"]) for c in v.failures] == [("h1→h2", "throughput_bps")]
    assert len({c.name for c in v.cases}) == len(v.cases) == 2 * len(PAIRS)
    assert v.failures[0].name.endswith("throughput_bps h1→h2")
    assert "container-container, h1→h2, iperf3.tcp" in render.text(v)
    assert "| Hosts |" in render.markdown(v) and "| h1→h2 |" in render.markdown(v)
    assert "container-container, h1→h2): " in render.junit_xml(v)
