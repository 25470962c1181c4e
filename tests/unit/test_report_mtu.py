"""The report's MTU section (harness/report/mtu.py), its findings and `show`'s MTU block, on
runs whose run.json carries `mtu_check` as `run --mtu-check` stores it
(tests/report_fixtures/mtu.py: paths shaped as harness/run/mtu.py returns them, judged
by harness/analysis/mtu.py's judge_all): native ok both ways, fastdp at 1500 too big, the
sleeve at 1500 a black hole; and a run of only ok paths. What could fail: a verdict or fix
that is not the stored one, a not-ok path that does not stand out, a section on a run made
without the check, or an error on one whose record is not a judged path list.
"""

from __future__ import annotations

import html
import re

import pytest
from report_fixtures.mtu import make_mtu_run, mtu_check
from report_fixtures.synth import make_run

from harness.analysis import findings as fnd
from harness.cli import main
from harness.report import mtu as mtu_section
from harness.report.render import cell_id, render_html

FIX = "set the overlay MTU to 1450: --overlay-mtu 1450 (a scenario's [matrix] overlay_mtu, or [modes.{}] overlay_mtu)"


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return make_mtu_run(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def page(faulty):
    return render_html([faulty])


def text(fragment: str) -> str:
    """A table row's text, a space between its cells."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def inline(fragment: str) -> str:
    """A sentence's text, its tags dropped."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def row_of(page: str, p: dict) -> tuple[str, str]:
    """(the path's verdict cell, the row under it: its why, cost and fix, or "" for an ok path)."""
    cid = cell_id(1, fnd.mtu_path_id(p), fnd.MTU_VERDICT)
    m = re.search(rf'<td [^>]*id="{re.escape(cid)}"[^>]*>(.*?)</td>.*?</tr>\s*(<tr class="why">.*?</tr>)?',
                  page, re.S)
    assert m, f"no row {cid}"
    return m.group(1), m.group(2) or ""


def section(page: str) -> str:
    start = page.index('id="run1-mtu"')
    return page[start:page.index('id="run1-plots"')]


def test_each_path_shows_its_stored_verdict_and_fix(page):
    paths = mtu_check()["paths"]
    assert [p["verdict"] for p in paths] == ["ok", "ok", "too big", "too big", "black hole", "black hole"]
    for p in paths:
        cell, why = row_of(page, p)
        assert text(cell) == p["verdict"]
        if p["verdict"] == "ok":
            assert 'class="pill good"' in cell and why == ""
            continue
        assert 'class="pill bad"' in cell                 # marked as the failed-case counts are
        assert inline(why).endswith(f"Fix: {FIX.format(p['mode'])}")
        assert inline(why).startswith(f"{p['verdict']}: {p['why']}.")
        assert f"Measured: {p['cost']}." in inline(why)


def test_the_section_has_found_expected_devices_mss_fragments_cost_and_fix_mtu(page):
    s = section(page)
    assert "4 of 6 paths not ok." in text(s) and "data-mtu-bad" in s and "data-mtu-ok" not in s
    rows = [text(r) for r in re.findall(r'<tr class="(?:ok|bad)">(.*?)</tr>', s, re.S)]
    assert rows[0] == "native host-host 1500 1500 h0 → h1 ok 1500 1500 1500 / 1500 1500 MSS 1448 local 0 — —"
    # fastdp at 1500: path MTU 1450 of 1450 expected, its devices 1500, 12 fragments, 1.03× of 1450, fix 1450
    assert rows[2] == ("fastdp container-container 1500 1500 h0 → h1 too big 1450 1450 1500 / 1500 1500 MSS 1448 "
                       "frag-needed 12 1.03× at 1500 vs 1450 1450")
    assert rows[3].split(" MSS 1398 ")[1] == "frag-needed 12 1.05× at 1500 vs 1450 1450"
    # the black hole's transfer moved nothing: no ratio, the stored sentence under the path
    assert rows[4].endswith("MSS 1448 lost 0 — 1450")
    assert "the transfer at 1500 moved nothing measurable" in text(s)


def test_a_udp_column_only_where_the_check_probed_with_udp(page, tmp_path):
    assert "<th class=\"num\">UDP</th>" not in section(page)
    s = section(render_html([make_mtu_run(tmp_path / "results", udp=True)]))
    assert "<th class=\"num\">UDP</th>" in s and 'colspan="15"' in s and 'colspan="14"' not in s
    rows = [text(r) for r in re.findall(r'<tr class="(?:ok|bad)">(.*?)</tr>', s, re.S)]
    assert rows[2].startswith("fastdp container-container 1500 1500 h0 → h1 too big 1450 1450 1450 1500 / 1500")
    assert "4 of 6 paths not ok." in text(s)                   # the same verdicts


def test_the_findings_open_with_the_paths_not_ok_linking_to_their_rows(page, faulty):
    findings = re.search(r"<ul class=\"findings\" data-findings>(.*?)</ul>", page, re.S).group(1)
    items = re.findall(r"<li>(.*?)</li>", findings, re.S)
    assert inline(items[0]) == ("fastdp: the MTU check found too big on h0→h1, h1→h0 (container-container, overlay "
                              f"MTU 1500 over underlay 1500); fix: {FIX.format('fastdp')}.")
    assert inline(items[1]).startswith("sleeve: the MTU check found black hole on h0→h1, h1→h0")
    assert not any("native: the MTU check" in inline(i) for i in items)
    for p in mtu_check()["paths"][2:]:
        cid = cell_id(1, fnd.mtu_path_id(p), fnd.MTU_VERDICT)
        assert f'href="#{cid}"' in findings and f'id="{cid}"' in page
    assert inline(items[2]).startswith("fastdp at underlay MTU 1500:")          # then the costs, as before


def test_mtu_findings_speak_only_of_paths_not_ok():
    assert fnd.mtu_findings(mtu_check(faults=False)["paths"]) == []
    got = fnd.mtu_findings(mtu_check()["paths"])
    assert [f.kind for f in got] == ["mtu_check", "mtu_check"]
    assert [f.parts[0].text for f in got] == ["fastdp", "sleeve"]


def test_a_run_whose_paths_are_all_ok_says_so_in_one_line(tmp_path):
    page = render_html([make_mtu_run(tmp_path / "results", faults=False)])
    s = section(page)
    assert re.search(r'<p class="lead" data-mtu-ok>(.*?)</p>', s).group(1) == (
        "All 4 paths ok: each path MTU is the underlay&#39;s minus the mode&#39;s encapsulation, and the ends&#39; "
        "devices agree.")
    assert "data-mtu-bad" not in s and 'class="pill bad"' not in s
    assert "<details" in s                               # the table folded
    assert "the MTU check found" not in page


def test_a_run_without_the_check_has_no_section_no_link_and_no_finding(tmp_path):
    page = render_html([make_run(tmp_path / "results", modes=["native", "fastdp"], underlay_mtus=[1500],
                                 tests=["iperf3.tcp"])])
    assert 'id="run1-mtu"' not in page and 'href="#run1-mtu"' not in page
    assert "MTU check" not in page and "the MTU check found" not in page
    assert 'id="run1-plots"' in page and 'href="#run1-findings"' in page


@pytest.mark.parametrize("record", ["not a dict", {"ok": True}, {"paths": "none"}, {"paths": [{"mode": "x"}, 3]}])
def test_a_record_that_is_no_judged_path_list_is_no_error(tmp_path, record):
    page = render_html([make_run(tmp_path / "results", meta={"mtu_check": record}, modes=["native", "fastdp"],
                                 underlay_mtus=[1500], tests=["iperf3.tcp"])])
    if isinstance(record, dict) and isinstance(record.get("paths"), list):
        assert "The MTU check recorded no paths." in section(page)        # a list, but nothing judged in it
    else:
        assert 'id="run1-mtu"' not in page


def test_the_section_has_a_link_and_run_facts_leave_the_record_out(page):
    assert '<a href="#run1-mtu">MTU</a>' in page
    facts = page[page.index('id="run1-facts"'):]
    assert "Mtu check" not in facts and "MTU check" not in facts and "IpFragCreates" not in facts


def test_show_prints_the_verdicts_as_the_doctor_does(faulty, capsys):
    assert main(["show", str(faulty)]) == 0
    out = capsys.readouterr().out
    block = out[out.index("MTU check (run --mtu-check): "):]
    from harness.analysis import mtu as verdicts
    assert block == ("MTU check (run --mtu-check): 4 of 6 paths not ok.\n\n"
                     + verdicts.format_table(mtu_check()["paths"]) + "\n")


def test_show_says_nothing_of_mtu_for_a_run_without_the_check_or_in_csv(faulty, tmp_path, capsys):
    plain = make_run(tmp_path / "results", modes=["native", "fastdp"], underlay_mtus=[1500], tests=["iperf3.tcp"])
    assert main(["show", str(plain)]) == 0
    assert "MTU check" not in capsys.readouterr().out
    assert main(["show", str(faulty), "--format", "csv"]) == 0
    assert "MTU check" not in capsys.readouterr().out


def test_stored_paths_are_the_record_s_judged_paths():
    rec = mtu_check()
    assert mtu_section.stored_paths({"mtu_check": rec}) == rec["paths"]
    assert mtu_section.stored_paths({}) is None
    assert mtu_section.headline(rec["paths"]) == "4 of 6 paths not ok."


def test_run_mtu_check_hands_its_verdicts_to_run_json(tmp_path, monkeypatch, capsys):
    """`run --mtu-check` gives the check's record to session.run as run.json's `mtu_check`
    (the doctor and the run faked: no testbed here; session.run writes `meta` into run.json
    as the directory is made), and the report of that run shows it."""
    from harness.cli import mtu as cli_mtu
    from harness.results import RunStore
    from harness.run import session

    record = mtu_check()
    seen = {}

    def fake_run(**kw):
        seen.update(kw)
        return RunStore.open(make_run(tmp_path / "results", meta=kw["meta"], modes=["native", "fastdp"],
                                      underlay_mtus=[1500], tests=["iperf3.tcp"]))

    monkeypatch.setattr(cli_mtu, "check", lambda a: record)
    monkeypatch.setattr(session, "run", fake_run)
    assert main(["run", "--mtu-check", "--modes", "native,fastdp", "-q"]) == 0
    assert seen["meta"] == {"mtu_check": record}
    (run_dir,) = (tmp_path / "results").iterdir()
    assert "4 of 6 paths not ok." in section(render_html([run_dir]))
    capsys.readouterr()
    monkeypatch.setattr(session, "run", lambda **kw: seen.update(kw) or RunStore.open(run_dir))
    assert main(["run", "--modes", "native,fastdp", "-q"]) == 0
    assert seen["meta"] is None                                 # without the check: nothing added
