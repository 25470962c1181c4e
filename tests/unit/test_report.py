"""harness.report: one self-contained HTML file from real run directories.

The run directories are written through RunStore by tests/report_fixtures/synth.py with
realistic lab numbers. The last test opens the report in headless Chromium (Debian's
`chromium` package), checks every image decoded and no script error happened, and keeps
a screenshot under reports/ for a human to look at.
"""

from __future__ import annotations

import html.parser
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest
from report_fixtures.synth import make_run

from harness.core.errors import HarnessError
from harness.report.render import render

REPO = pathlib.Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"
FAILS = {("sleeve-crypto", 9000, "iperf3.tcp"): "iperf3: unable to connect to server: Connection refused",
         ("sleeve-basic", 1500, "qperf.tcp_lat", 2): "qperf: timed out after 30 s"}
ALL_PLOTS = 5        # throughput, latency, % of native heatmap, CPU per gigabit, throughput over time


class Tags(html.parser.HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(text: str) -> list[tuple[str, dict]]:
    p = Tags()
    p.feed(text)
    return p.tags


def assert_self_contained(text: str) -> None:
    for tag, attrs in tags(text):
        for name in ("src", "href", "data", "poster", "srcset"):
            if name not in attrs:
                continue
            v = (attrs[name] or "").strip()
            assert not re.match(r"(?i)(https?:)?//", v), f"<{tag} {name}={v[:60]}> loads from the network"
            if name == "src" or name == "srcset":
                assert v.startswith("data:"), f"<{tag} {name}={v[:60]}> is not inline"
        assert tag != "link", "external stylesheet or resource link"
        if tag == "script":
            assert "src" not in attrs
    assert "@import" not in text and "url(http" not in text


@pytest.fixture
def full_run(tmp_path):
    return make_run(tmp_path / "results", repeats=3, placements=("host-host", "container-container"), fail=FAILS)


def images(text: str) -> list[str]:
    return [a.get("src") or "" for t, a in tags(text) if t == "img"]


def test_report_is_one_self_contained_file_with_tables_plots_and_failures(full_run, tmp_path):
    out = render([full_run], tmp_path / "out" / "report.html")
    assert out == tmp_path / "out" / "report.html"
    text = out.read_text()
    assert_self_contained(text)
    imgs = images(text)
    assert len(imgs) == ALL_PLOTS
    assert all(s.startswith("data:image/png;base64,") and len(s) > 10_000 for s in imgs)
    # Run facts from run.json, whatever their shape.
    for fact in ("33ba442bd790", "6.18.44-fc-v657", "AMD EPYC 7B13", "iperf3", "3.12", "tso", "--gso",
                 "whole-machine"):
        assert fact in text, fact
    # The seed-style table per underlay MTU.
    assert text.count('<table class="summary">') == 2
    assert "Underlay MTU 1500" in text and "Underlay MTU 9000" in text
    assert "TCP BW (Gbit/s)" in text and "BW %" in text and "Lat %" in text and "CPU s/Gbit" in text
    # Failed cases with their reasons (HTML-escaped, so the test looks for the text).
    assert "unable to connect to server: Connection refused" in text
    assert "qperf: timed out after 30 s" in text
    assert 'Failed cases <span class="tag">4</span>' in text
    # The qperf fallback is marked where iperf3.tcp failed.
    assert "TCP BW from qperf.tcp_bw" in text


def test_native_only_run_renders_and_says_so(tmp_path):
    run = make_run(tmp_path, modes=["native"], repeats=2)
    text = render([run], tmp_path / "r.html").read_text()
    assert "Only native was measured" in text
    assert_self_contained(text)
    assert len(images(text)) == ALL_PLOTS       # native's own bars, 100 % heatmap, CPU, intervals


def test_all_cases_failed_renders_the_failures(tmp_path):
    fail = {(m, u, t): "lab: namespace ob-h1 vanished"
            for m in ("native", "fastdp") for u in (1500,) for t in ("iperf3.tcp", "qperf.tcp_lat")}
    run = make_run(tmp_path, modes=["native", "fastdp"], underlay_mtus=[1500], tests=["iperf3.tcp", "qperf.tcp_lat"],
                   fail=fail, repeats=2)
    text = render([run], tmp_path / "r.html").read_text()
    assert "No successful measurements" in text
    assert "namespace ob-h1 vanished" in text
    assert images(text) == []
    assert '<table class="summary">' not in text


def test_missing_metrics_are_named(tmp_path):
    run = make_run(tmp_path, modes=["native", "fastdp"], underlay_mtus=[1500], tests=["qperf.tcp_lat"], repeats=2)
    text = render([run], tmp_path / "r.html").read_text()
    assert "TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)" in text
    assert "TCP throughput plot: no iperf3.tcp or qperf.tcp_bw results" in text
    assert "throughput over time: no iperf3 per-interval data" in text
    assert len(images(text)) == 2                # latency bars and the Lat % heatmap


def test_run_without_native_says_ratios_are_missing(tmp_path):
    run = make_run(tmp_path, modes=["fastdp", "sleeve"], underlay_mtus=[1500], repeats=2)
    text = render([run], tmp_path / "r.html").read_text()
    assert "No native measurements" in text
    assert "% of native heatmap: no native reference" in text


def test_empty_run_renders(tmp_path):
    run = make_run(tmp_path, records=[])
    text = render([run], tmp_path / "r.html").read_text()
    assert "No measurements recorded" in text


def test_two_runs_get_a_comparison_with_significant_changes_marked(tmp_path):
    kw = dict(modes=["native", "fastdp", "sleeve"], underlay_mtus=[1500], repeats=5)
    a = make_run(tmp_path / "results", **kw)
    b = make_run(tmp_path / "results", seed=7, scale={"sleeve": 0.6}, **kw)
    text = render([a, b], tmp_path / "cmp.html").read_text()
    assert_self_contained(text)
    assert 'id="compare"' in text and a.name in text and b.name in text
    sig = text[text.index('id="compare"'):text.index("<details")]
    assert sig.count('<span class="pill bad">worse</span>') >= 3       # sleeve iperf3.tcp, iperf3.udp, qperf.tcp_bw
    assert re.search(r"sleeve</span></td>.*?-4\d\.\d %", sig, re.S)
    assert len(images(text)) == 2 * ALL_PLOTS + 1


def test_bad_input_is_a_harness_error(tmp_path):
    with pytest.raises(HarnessError, match="not a run directory"):
        render([tmp_path / "nope"], tmp_path / "r.html")
    with pytest.raises(HarnessError, match="no run"):
        render([], tmp_path / "r.html")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(full_run, tmp_path):
    """Open the report as a browser would: every image decodes, no script error, a
    non-blank screenshot (kept at reports/test_report.png for a human to look at)."""
    REPORTS.mkdir(exist_ok=True)
    report = render([full_run], REPORTS / "test_report.html")
    shot = REPORTS / "test_report.png"
    shot.unlink(missing_ok=True)
    url = report.resolve().as_uri()
    env = {**os.environ, "HOME": str(tmp_path)}
    with tempfile.TemporaryDirectory(dir=tmp_path) as profile:
        dom = subprocess.run(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120, env=env)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(0)))
    assert attrs.get("data-images-total") == str(ALL_PLOTS), attrs
    assert attrs.get("data-images-ok") == str(ALL_PLOTS), attrs
    assert attrs.get("data-errors") == "0", attrs
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console

    with tempfile.TemporaryDirectory(dir=tmp_path) as profile:
        run = subprocess.run(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
             "--window-size=1400,3000", url],
            capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 50_000

    from PIL import Image
    with Image.open(shot) as im:
        assert im.size == (1400, 3000)
        px = im.convert("RGB").resize((140, 300))
        colors = px.getcolors(maxcolors=140 * 300)
        assert colors is not None and len(colors) > 50, "screenshot looks blank"
        dominant = max(colors)[0] / (140 * 300)
        assert dominant < 0.9, f"one colour covers {dominant:.0%} of the screenshot"
        # The dark header band is at the top, the page body below it is light.
        assert sum(px.getpixel((70, 5))) < 150 and sum(px.getpixel((70, 150))) > 600


def summary_headers(text: str) -> list[str]:
    """Column titles of the first seed-style table."""
    table = text[text.index('<table class="summary">'):]
    head = table[:table.index("</thead>")]
    return [html.unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<th[^>]*>.*?</th>", head, re.S)]


def alts(text: str) -> list[str]:
    return [a.get("alt") or "" for t, a in tags(text) if t == "img"]


def test_ping_only_run_shows_ping_columns_and_plots_ping(tmp_path):
    run = make_run(tmp_path, modes=["native", "sleeve-basic"], underlay_mtus=[1500], tests=["ping.flood"],
                   placements=("host-host", "host-container", "container-container"), repeats=3)
    text = render([run], tmp_path / "r.html").read_text()
    assert_self_contained(text)
    assert summary_headers(text) == ["Mode", "Overlay MTU", "Datapath", "Placement", "Ping avg (µs)", "Ping %",
                                     "Ping min/avg/max/mdev (µs)"]
    assert text.count('<tr class="') == 4                        # native + sleeve-basic × 3 placements
    assert "Ping min/avg/max/mdev: medians" in text
    assert alts(text) == ["heatmap of percent of native", "Ping RTT by mode and MTU"]   # the heatmap opens
    assert "TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)" in text
    visible = re.sub(r'src="data:[^"]*"', "", text)
    assert "TCP latency (no qperf.tcp_lat" not in visible and "UDP" not in visible


def test_udp_latency_run_shows_udp_latency_columns(tmp_path):
    run = make_run(tmp_path, modes=["native", "fastdp"], underlay_mtus=[9000], tests=["qperf.tcp_bw", "qperf.udp_lat"],
                   repeats=3)
    text = render([run], tmp_path / "r.html").read_text()
    assert summary_headers(text) == ["Mode", "Overlay MTU", "Datapath", "Placement", "TCP BW (Gbit/s)", "BW %",
                                     "UDP Lat (µs)", "UDP Lat %", "CPU s/Gbit"]
    assert "BW % and UDP Lat %: % of native at underlay MTU 9000" in text
    assert 'title="native latency / this latency"' in text
    assert alts(text) == ["heatmap of percent of native", "TCP throughput by mode and MTU",
                          "UDP latency by mode and MTU", "CPU cost per gigabit"]
    assert "Column without data" not in text


def test_run_with_every_test_shows_every_column(tmp_path):
    from report_fixtures.synth import EVERY_TEST

    from harness.analysis import tablefmt
    run = make_run(tmp_path, underlay_mtus=[1500], tests=EVERY_TEST, repeats=2, streams=(1, 2),
                   placements=("host-host", "container-container"))
    text = render([run], tmp_path / "r.html").read_text()
    assert summary_headers(text) == [t for k, t in tablefmt.TABLE_HEADERS if k not in ("pair", "ping_loss", "failed")]
    assert alts(text)[:3] == ["heatmap of percent of native", "TCP and UDP throughput by mode and MTU",
                              "Latency by mode and MTU"]
    # and beyond the mean: the percentiles, the packet rates and the scaling with streams; under load
    assert alts(text)[ALL_PLOTS:] == ["latency percentiles per mode", "Packet rate by mode and payload size",
                                      "throughput and CPU against streams",
                                      "idle and loaded latency percentiles per mode",
                                      "offered against received UDP load per mode with the knee marked"]
