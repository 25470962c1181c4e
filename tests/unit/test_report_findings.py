"""The report's findings (harness/analysis/findings.py) and the page's order.

The rule is tested on data whose answer is known by construction, then on the recorded
quick run (tests/data/runs/quick): there fastdp's throughput at underlay MTU 9000
(12.6–13.4 Gbit/s) lies inside native's spread (11.1–14.9), the sleeve's is below all of
native's at both MTUs. Every number a finding quotes links to the table cell it comes from.
"""

from __future__ import annotations

import html
import pathlib
import re

import pandas as pd
import pytest

from harness import results
from harness.analysis import findings as fnd, summary as summ
from harness.report import facts
from harness.report.render import render, render_html

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "runs" / "quick"


def test_separated_needs_two_repeats_a_side_and_no_overlap():
    assert fnd.separated([1, 2], [3, 4]) and fnd.separated([3, 4], [1, 2])
    assert not fnd.separated([1, 3], [2, 4])            # overlapping ranges
    assert not fnd.separated([1, 2], [2, 3])            # touching: a shared value is not beyond
    assert not fnd.separated([1], [5, 6])               # one repeat has no spread to judge against
    assert fnd.chance_separation(2, 2) == pytest.approx(1 / 3)
    assert fnd.chance_separation(3, 3) == pytest.approx(1 / 10)
    assert fnd.chance_separation(5, 5) == pytest.approx(1 / 126)


def _records(mode: str, test: str, metric: str, values: list[float], mtu: int = 1500) -> list[dict]:
    return [{"case": f"{mode}/{test}", "mode": mode, "datapath": mode, "underlay_mtu": mtu,
             "overlay_mtu": mtu if mode == "native" else mtu - 50, "placement": "host-host", "test": test,
             "streams": 1, "repeat": i, "metric": metric, "value": v, "unit": "", "ok": True, "error": None}
            for i, v in enumerate(values)]


def _known() -> pd.DataFrame:
    """half: half native's throughput, ranges apart; same: native's spread; lat: 3× native's latency."""
    recs = (_records("native", "iperf3.tcp", "throughput_bps", [10e9, 11e9, 12e9])
            + _records("fastdp", "iperf3.tcp", "throughput_bps", [10.5e9, 11.5e9, 12.5e9])
            + _records("sleeve", "iperf3.tcp", "throughput_bps", [5e9, 5.5e9, 6e9])
            + _records("native", "qperf.tcp_lat", "latency_us", [10, 11, 12])
            + _records("fastdp", "qperf.tcp_lat", "latency_us", [14])
            + _records("sleeve", "qperf.tcp_lat", "latency_us", [30, 33, 36]))
    return pd.DataFrame(recs)


def test_known_answers_quoted_or_called_indistinguishable():
    df = _known()
    summary = summ.summary_table(df)
    judged = fnd.cell_judgements(summary, df)
    by = {(rid[1], col): j for (rid, col), j in judged.items()}
    assert by[("sleeve", "tcp")].distinguishable and by[("sleeve", "tcp")].ratio == pytest.approx(0.5)
    assert not by[("fastdp", "tcp")].distinguishable                 # inside native's spread
    assert by[("sleeve", "lat")].distinguishable and by[("sleeve", "lat")].ratio == pytest.approx(3.0)
    assert not by[("fastdp", "lat")].distinguishable                 # a single repeat
    text = [f.text for f in fnd.findings(summary, df, judged)]
    assert text[0] == ("fastdp at underlay MTU 1500: TCP throughput not distinguishable from native in this run; "
                       "TCP latency not distinguishable from native in this run.")
    assert text[1] == "sleeve at underlay MTU 1500: TCP throughput at 50 % of native; TCP latency 3.0× native's."
    assert text[2].startswith("2 of 4 comparisons with native are not distinguishable in this run")
    assert "separated ranges 1 in 10 times" in text[2]


def test_placements_told_apart_one_by_one():
    cc = [dict(r, placement="container-container")
          for r in _records("sleeve", "iperf3.tcp", "throughput_bps", [10.5e9, 11.5e9, 12.5e9])]
    df = pd.DataFrame(_records("native", "iperf3.tcp", "throughput_bps", [10e9, 11e9, 12e9])
                      + _records("sleeve", "iperf3.tcp", "throughput_bps", [5e9, 5.5e9, 6e9]) + cc)
    text = [f.text for f in fnd.findings(summ.summary_table(df), df)]
    assert text[0] == ("sleeve at underlay MTU 1500: TCP throughput 50 % of native (host-host) and "
                       "not distinguishable from native in this run (container-container).")


def test_without_tcp_the_findings_speak_of_udp_and_ping():
    df = pd.DataFrame(_records("native", "iperf3.udp", "throughput_bps", [4e9, 4.2e9])
                      + _records("sleeve", "iperf3.udp", "throughput_bps", [1e9, 1.1e9])
                      + _records("native", "ping.flood", "latency_us", [20, 22])
                      + _records("sleeve", "ping.flood", "latency_us", [60, 66]))
    text = [f.text for f in fnd.findings(summ.summary_table(df), df)]
    assert text[0] == ("sleeve at underlay MTU 1500: UDP throughput at 26 % of native; "
                       "ping round-trip time 3.0× native's.")


@pytest.fixture(scope="module")
def quick_html() -> str:
    return render_html([DATA])


def test_recorded_run_findings():
    df = results.load(DATA)
    text = [f.text for f in fnd.findings(summ.summary_table(df), df)]
    assert text[0].startswith("fastdp at underlay MTU 1500: TCP throughput at 73 % (host-host) and 77 % "
                              "(container-container) of native; TCP latency 1.5× (host-host)")
    assert text[1].startswith("sleeve at underlay MTU 1500: TCP throughput at 32 % (host-host) and 32 %")
    assert text[2].startswith("fastdp at underlay MTU 9000: TCP throughput not distinguishable from native in "
                              "this run (host-host, container-container)")
    assert "sleeve: raising the underlay MTU from 1500 to 9000 changes TCP throughput as a share of native " \
           "from 32 % to 64 % (host-host); from 32 % to 64 % (container-container)." in text
    assert text[-1].startswith("4 of 24 comparisons with native are not distinguishable in this run")


def _cell(page: str, cid: str) -> tuple[str, str]:
    """(class, text) of the table cell with id `cid`."""
    m = re.search(rf'<td class="([^"]*)" id="{re.escape(cid)}"[^>]*>(.*?)</td>', page, re.S)
    assert m, f"no cell {cid}"
    return m.group(1), html.unescape(re.sub(r"<[^>]+>", " ", m.group(2))).split()


def test_every_quoted_number_links_to_its_cell_and_the_cell_says_it(quick_html):
    found = quick_html[quick_html.index('<ul class="findings"'):]
    links = re.findall(r'<a href="#(run1-[^"]+)">([^<]+)</a>', found[:found.index("</ul>")])
    assert len(links) > 30
    for cid, quoted in links:
        cls, words = _cell(quick_html, cid)
        quoted = html.unescape(quoted)
        if "not distinguishable" in quoted or quoted in ("host-host", "container-container"):
            assert "nd" in cls.split() and words[0] == "≈", (cid, words)
            continue
        words = [w for w in words if w != "≈"]        # an MTU sentence may quote a cell marked against native
        if cid.endswith("_pct") and quoted.endswith("%"):
            assert abs(float(words[0]) - float(quoted.rstrip(" %"))) <= 0.55, (cid, words, quoted)   # both rounded
        elif cid.endswith("_pct") and quoted.endswith("×"):
            assert f"{float(words[0]) / 100:.1f}×" == quoted, (cid, words, quoted)
        else:
            assert cid.endswith("-cpu"), cid                 # CPU per gigabit: the mode's own cell
    # fastdp at MTU 9000: its BW % cells are marked, and say why.
    cls, words = _cell(quick_html, "run1-9000-fastdp-8950-host-host-x-1-bw_pct")
    assert "nd" in cls and words[:2] == ["≈", "99.9"]
    assert "not distinguishable from native in this run: the configuration" in quick_html


def test_the_page_opens_with_findings_and_ends_with_folded_facts(quick_html):
    order = [quick_html.index(s) for s in ('id="run1-findings"', 'class="heatmap"', 'id="run1-plots"',
                                           'id="run1-tables"', 'id="run1-failed"', 'id="run1-facts"')]
    assert order == sorted(order)
    tail = quick_html[quick_html.index('id="run1-facts"'):]
    assert tail.index('<details class="fold">') < tail.index("<dl class=\"facts\">")
    # the command as typed, labels not keys, the planned configurations as a table
    assert "<code>overlaybench run scenarios/quick.toml --repeats 2 --duration 1 --results results</code>" \
        in quick_html
    assert "__main__" not in quick_html and "Cpu idle" not in quick_html and "CPU idle states" in quick_html
    planned = quick_html[quick_html.index('<table class="planned">'):]
    assert planned[:planned.index("</table>")].count("<tr>") == 21          # header + 20 configurations


def test_command_as_typed():
    assert facts.command_line(["CHECKOUT/harness/cli/__main__.py", "run", "a b.toml"]) == \
        "overlaybench run 'a b.toml'"
    assert facts.command_line(["/usr/local/bin/overlaybench", "report", "R"]) == "overlaybench report R"
    assert facts.command_line(["/usr/bin/python3", "-m", "harness.cli", "run"]) == "overlaybench run"
    assert facts.command_line(["CHECKOUT/harness/cli.py", "compare", "--base", "HEAD"]) == \
        "overlaybench compare --base HEAD"
    assert facts.command_line(["pytest", "-q"]) == "pytest -q"          # not the CLI: shown as recorded
    assert facts.command_line(None) is None


def test_labels_not_keys():
    assert facts.label("cpu_idle") == "CPU idle"
    assert facts.label("sleeve_source") == "Sleeve source"
    assert facts.label("underlay_mtu") == "Underlay MTU"


def test_a_run_without_native_has_no_findings_and_says_why(tmp_path):
    store = results.RunStore.create(tmp_path, {"scenario": {"name": "t"}})
    df = _known()
    store.append([results.Measurement(**r) for r in df[df["mode"] != "native"].to_dict("records")])
    text = render([store.path], tmp_path / "r.html").read_text()
    assert "No findings: No native measurements" in text


def test_a_section_is_a_partial_and_a_line(tmp_path, monkeypatch):
    """How a new block joins the page: a partial in templates/sections/ and a Section in
    SECTIONS, whose builder's result the partial reads as run.sections[name]."""
    import shutil

    from harness.report import render as rmod
    templates = tmp_path / "templates"
    shutil.copytree(rmod.TEMPLATES, templates)
    (templates / "sections" / "extra.html.j2").write_text(
        '<h3 id="run{{ rid }}-extra">Extra</h3><p class="extra">{{ run.sections.extra }}</p>\n')
    sections = list(rmod.SECTIONS)
    sections.insert([s.name for s in sections].index("tables"),
                    rmod.Section("extra", "Extra", build=lambda view: f"{view.n_ok} measurements seen"))
    monkeypatch.setattr(rmod, "TEMPLATES", templates)
    monkeypatch.setattr(rmod, "SECTIONS", sections)
    page = render_html([DATA])
    assert '<a href="#run1-extra">Extra</a>' in page                      # in the header's list
    assert '<p class="extra">156 measurements seen</p>' in page
    assert page.index('id="run1-plots"') < page.index('id="run1-extra"') < page.index('id="run1-tables"')


def test_a_cni_deployment_fact_names_its_datapath_in_one_line():
    fp = {"cni": "cilium", "version": "v1.16.1", "encapsulation": "none", "routing": "native",
          "encryption": "wireguard", "dataplane": "ebpf", "kube_proxy": "replaced by cilium", "mtu": 1450,
          "seen": ["configmap kube-system/cilium-config"],
          "summary": "cilium v1.16.1, no encapsulation, wireguard, kube-proxy replacement"}
    got = dict(facts.facts({"datapaths": [{"mode": "cni", "datapath": "cni (cilium v1.16.1, …)", "underlay_mtu": 1500,
                                           "overlay_mtu": 1450, "info": {"cni": "cilium", "fingerprint": fp}}]}))
    (line,) = got["Deployments"].values()
    assert "fingerprint cilium v1.16.1, no encapsulation, wireguard, kube-proxy replacement (routing native, " \
           "encryption wireguard, dataplane ebpf, kube-proxy replaced by cilium, mtu 1450)" in line
    assert "seen" not in line
