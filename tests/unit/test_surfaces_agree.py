"""One verdict against native, carried by every surface: for each judged cell (each % of
native, and CPU per gigabit) of a stored run, the summary's `<field>_distinct`, `show`'s
text table (≈), CSV and JSON, the report's ≈ marks, the export's Value, OpenMetrics'
`distinct` label, OpenSearch's `vs_native` and the findings' Judgement all say the same,
and their figures agree with the summary's.

The run (tests/report_fixtures/synth.py, every test, three repeats) has fastdp's TCP
throughput scaled to about native's at MTU 1500 and its latency to about native's
(overlapping repeats: ≈) beside clearly different cells (sleeve; fastdp at MTU 9000): both
verdicts occur, and native's own cells carry none. The noise comes from a seeded generator,
so the verdicts are the same on every run. Nothing here depends on timing.

The MTU check's verdicts likewise: for each path of a run made with --mtu-check, the
report's MTU section and `show` state the verdict and fix run.json stores.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re

import pytest
from report_fixtures.synth import EVERY_TEST, make_run

from harness import results
from harness.analysis import findings as fnd, stats, summary as summ, tablefmt
from harness.core import metrics
from harness.export import metrics as export_metrics
from harness.export import openmetrics, opensearch
from harness.report.render import cell_id, render_html

JUDGED = [c for c in summ.COLUMNS if c.judged]
TITLE = dict(tablefmt.TABLE_HEADERS)
ROW = ["underlay_mtu", "mode", "overlay_mtu", "placement", "pair", "streams"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("results"), modes=["native", "fastdp", "sleeve"],
                    underlay_mtus=[1500, 9000], tests=EVERY_TEST, placements=("host-host", "container-container"),
                    repeats=3, seed=1, noise=0.02, scale={"fastdp": 2.07}, lat_scale={"fastdp": 0.75})


@pytest.fixture(scope="module")
def df(run):
    return results.load(run)


@pytest.fixture(scope="module")
def summary(df):
    return summ.summary_table(df)


def kv(v):
    return stats.key_value(v)


def verdict(v) -> bool | None:
    """A distinct field as True, False or None (empty: no verdict)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    assert isinstance(v, bool), repr(v)
    return v


def finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def row_key(r: dict) -> tuple:
    return tuple(kv(r.get(c)) for c in ROW)


def cells(summary) -> list[tuple[dict, summ.Column, bool | None]]:
    """(summary row, judged column, its verdict) for every judged cell with a figure."""
    out = []
    for r in summary.to_dict("records"):
        for c in JUDGED:
            if finite(r[c.field]):
                out.append((r, c, verdict(r[c.distinct_field])))
            else:
                assert verdict(r[c.distinct_field]) is None, (row_key(r), c.key)   # no figure, no verdict
    return out


def source(r: dict, c: summ.Column, present: set[tuple]) -> tuple[tuple, str]:
    """The (CONFIG_KEY values, metric) the cell's figure comes from, picked as the summary
    picks it: the row's TCP test and stream count for TCP and CPU, else the first of the
    column's tests present, at the lowest stream count."""
    if c.kind == "cpu":
        metric, tests, per_streams = metrics.CPU_PER_GBIT, (r["tcp_test"],), True
    else:
        v = summ.BY_KEY[c.of]
        metric, per_streams = v.metric, v is summ.ROW_TCP or v.by_streams
        tests = (r[v.test_field],) if v.test_field and isinstance(r.get(v.test_field), str) else v.tests
    base = {k: kv(r[k]) for k in ("mode", "underlay_mtu", "overlay_mtu", "placement", "pair")}
    cands = [k for k in present if all(k[stats.CONFIG_KEY.index(f)] == x for f, x in base.items())
             and k[stats.CONFIG_KEY.index("test")] in tests
             and (not per_streams or k[stats.CONFIG_KEY.index("streams")] == kv(r["streams"]))]
    assert cands, (row_key(r), c.key)
    k = min(cands, key=lambda k: (tests.index(k[stats.CONFIG_KEY.index("test")]),
                                  k[stats.CONFIG_KEY.index("streams")] or 0))
    return k, metric


@pytest.fixture(scope="module")
def export(run):
    return export_metrics.load(run)


@pytest.fixture(scope="module")
def exported(export):
    """(CONFIG_KEY values, exported metric name) → Value."""
    return {(tuple(case.config[k] for k in stats.CONFIG_KEY), v.metric.name): v
            for case in export.cases for v in case.values}


def exported_name(key: tuple, metric: str) -> str:
    return metrics.for_test(metric, key[stats.CONFIG_KEY.index("test")]).name


def test_the_run_has_both_verdicts_and_native_has_none(summary):
    got = [(r["mode"], c.key, d) for r, c, d in cells(summary)]
    assert {d for m, _, d in got if m == "native"} == {None}
    assert {d for m, _, d in got if m != "native"} == {True, False}
    for key in ("bw_pct", "lat_pct", "cpu"):          # both verdicts in the headline columns
        assert {d for _, k, d in got if k == key} >= {True, False}, key
    assert {k for _, k, _ in got} == {c.key for c in JUDGED}      # every judged column has cells


def test_csv_and_json_carry_the_summary_s_verdicts_and_figures(df, summary):
    rows = {row_key(r): r for r in summary.to_dict("records")}
    text = tablefmt.format_summary(df, "csv")
    parsed = list(csv.DictReader(io.StringIO(text)))
    data = json.loads(tablefmt.format_summary(df, "json"))
    assert len(parsed) == len(data) == len(rows)
    for c_row, j_row in zip(parsed, data):
        key = tuple(kv(j_row[k]) for k in ROW)
        r = rows[key]
        assert tuple(kv(float(c_row[k]) if c_row[k] and k in ("underlay_mtu", "overlay_mtu", "streams") else
                        (c_row[k] or None)) for k in ROW) == key
        for c in JUDGED:
            want = verdict(r[c.distinct_field])
            assert {"True": True, "False": False, "": None}[c_row[c.distinct_field]] is want, (key, c.key)
            assert j_row[c.distinct_field] is want, (key, c.key)
            if finite(r[c.field]):
                assert float(c_row[c.field]) == pytest.approx(r[c.field], rel=1e-5)
                assert j_row[c.field] == pytest.approx(r[c.field], rel=1e-9)


def _text_rows(text: str) -> dict[tuple, dict[str, str]]:
    """The pipe table's rows: (underlay MTU, mode, overlay MTU, placement) → {title: cell}."""
    out = {}
    for block in text.split("Underlay MTU ")[1:]:
        mtu = int(block.split()[0])
        lines = block.splitlines()
        head_at = next(i for i, x in enumerate(lines) if x.startswith("Mode "))
        head = [h.strip() for h in lines[head_at].split("|")]
        for line in lines[head_at + 2:]:
            if " | " not in line:
                break
            cell = dict(zip(head, (x.strip() for x in line.split("|"))))
            out[(mtu, cell["Mode"], int(cell["Overlay MTU"]), cell["Placement"])] = cell
    return out


def test_the_text_table_marks_exactly_the_cells_not_distinct(summary):
    """A % of native cell (and CPU's) of `show`'s table carries ≈ exactly when the summary
    says its repeats are not distinct from native's."""
    rows = _text_rows(tablefmt.format_table(summary))
    assert len(rows) == len(summary)
    for r, c, d in cells(summary):
        cell = rows[(kv(r["underlay_mtu"]), r["mode"], kv(r["overlay_mtu"]), r["placement"])][TITLE[c.key]]
        assert (tablefmt.ND_MARK in cell) is (d is False), (row_key(r), c.key, cell, d)
        assert cell.count(tablefmt.ND_MARK) <= 1, cell
        figure = cell.replace(tablefmt.ND_MARK, "").replace(tablefmt.SENDER_MARK, "").strip()    # † sender-bound
        if c.kind == "pct":
            assert float(figure) == pytest.approx(r[c.field], abs=0.051), (c.key, cell)      # one decimal
        else:
            assert figure == metrics.fmt_num(r[c.field]), (c.key, cell)


def test_the_report_marks_exactly_the_cells_not_distinct(run, summary):
    page = render_html([run])
    for r, c, d in cells(summary):
        rid = tuple(kv(r[k]) for k in fnd.ROW_ID)
        cid = cell_id(1, rid, c.key)
        m = re.search(rf'<td class="([^"]*)" id="{re.escape(cid)}"[^>]*>(.*?)</td>', page, re.S)
        assert m, f"no cell {cid}"
        nd = "nd" in m.group(1).split()
        assert nd is (d is False), (cid, m.group(1), d)
        # the figure, without its range and meter
        body = re.sub(r'<span class="(range|meter)".*', "", m.group(2), flags=re.S)
        text = html.unescape(re.sub(r"<[^>]+>", " ", body))
        assert text.count("≈") == (1 if nd else 0), (cid, text)         # one mark, not two
        figure = text.replace("≈", "").replace("†", "").strip()                 # † sender-bound
        if c.kind == "pct":
            assert float(figure) == pytest.approx(r[c.field], abs=0.051), (cid, text)
        else:
            assert figure == metrics.fmt_num(r[c.field]), (cid, text)


def test_the_findings_judge_each_cell_as_the_summary_does(df, summary):
    judged = fnd.cell_judgements(summary, df)
    for r, c, d in cells(summary):
        rid = tuple(kv(r[k]) for k in fnd.ROW_ID)
        j = judged.get((rid, c.key if c.kind == "cpu" else c.of))
        assert (j is None) is (d is None), (rid, c.key, d)
        if j is None:
            continue
        assert (not j.distinguishable) is (d is False), (rid, c.key)
        if c.kind == "pct":
            assert 100 * j.ratio == pytest.approx(r[c.field], rel=1e-9), (rid, c.key)
        else:
            assert j.median == pytest.approx(r[c.field], rel=1e-9), (rid, c.key)


def test_the_export_judges_each_cell_as_the_summary_does(df, summary, exported):
    present = {k for k, _ in exported}
    for r, c, d in cells(summary):
        key, metric = source(r, c, present)
        v = exported[(key, exported_name(key, metric))]
        assert v.distinct is d, (key, metric, v.distinct, d)
        assert v.verdict == {True: "distinct", False: "not distinct", None: None}[d]
        if c.kind == "pct":
            assert v.pct_of_native == pytest.approx(r[c.field], rel=1e-9), (key, metric)
            assert 100 * v.ratio == pytest.approx(r[c.field], rel=5e-4), (key, metric)   # 4 significant digits
        else:
            assert v.median == pytest.approx(r[c.field], rel=1e-9)
            assert (v.lo, v.hi) == (pytest.approx(r[f"{c.field}_min"]), pytest.approx(r[f"{c.field}_max"]))


def test_openmetrics_and_opensearch_carry_the_same_verdicts(summary, export, exported):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    fams = {f.name: f for f in text_string_to_metric_families(openmetrics.openmetrics(export))}
    ratio = {}
    for s in fams["overlaybench_native_ratio"].samples:
        lab = s.labels
        assert lab["run"] == export.run_id
        k = (lab["mode"], lab["underlay_mtu"], lab["overlay_mtu"], lab["placement"], lab["test"], lab["streams"],
             lab.get("pair"), lab["metric"])
        assert k not in ratio
        ratio[k] = ({"true": True, "false": False, None: None}[lab.get("distinct")], s.value)
    docs = {doc["case"]: doc for doc in opensearch.documents(export)}
    names = {tuple(case.config[k] for k in stats.CONFIG_KEY): case.name for case in export.cases}
    present = {k for k, _ in exported}
    for r, c, d in cells(summary):
        key, metric = source(r, c, present)
        name = exported_name(key, metric)
        v = exported[(key, name)]
        om = ratio[tuple(None if x is None else str(x) for x in key) + (name,)]
        assert om == (d, pytest.approx(v.ratio, rel=1e-9)), (key, name)
        m = docs[names[key]]["metrics"][name]
        assert m["vs_native"] == v.verdict and m["ratio_to_native"] == v.ratio, (key, name)


# --------------------------------------------------------------------------- the MTU check's verdicts

def _show_mtu(out: str) -> dict[tuple, tuple[str, str]]:
    """`show`'s MTU block (analysis/mtu.py's format_table): (mode, placement, src, dst) →
    (verdict, fix); the fix from the path's note line, "" for a path without one."""
    block = out[out.index("MTU check (run --mtu-check): "):].split("\n\n")
    head, *rows = block[1].splitlines()
    assert head.split()[:3] == ["mode", "placement", "path"]
    got = {}
    for line in rows:
        cols = re.split(r" {2,}", line.strip())
        src, dst = cols[2].split("→")
        got[(cols[0], cols[1], src, dst)] = (cols[-1], "")
    for note in (block[2].splitlines() if len(block) > 2 else []):
        where, verdict = note.split(": ")[:2]
        mode, placement, path = where.split(" ")
        key = (mode, placement, *path.split("→"))
        assert got[key][0] == verdict, (key, note)
        got[key] = (verdict, note.split(". Fix: ", 1)[1] if ". Fix: " in note else "")
    return got


def _report_mtu(page: str, paths: list[dict]) -> dict[tuple, tuple[str, str]]:
    """The report's MTU section: the same key → (the verdict pill, the fix under the row)."""
    got = {}
    for p in paths:
        cid = cell_id(1, fnd.mtu_path_id(p), fnd.MTU_VERDICT)
        m = re.search(rf'id="{re.escape(cid)}"[^>]*><span class="pill [^"]*">([^<]*)</span>.*?</tr>\s*'
                      r'(?:<tr class="why">.*?<span class="fix-text">(.*?)</span>)?', page, re.S)
        assert m, cid
        got[(p["mode"], p["placement"], p["src"], p["dst"])] = (html.unescape(m.group(1)),
                                                                html.unescape(m.group(2) or ""))
    return got


def test_the_report_and_show_state_the_same_mtu_verdict_and_fix_per_path(tmp_path, capsys):
    """For each path of a run made with --mtu-check (tests/report_fixtures/mtu.py: ok, too
    big and black-hole paths), the report's MTU section and `show` name the same verdict and
    the same fix, and both are the ones run.json stores."""
    from report_fixtures.mtu import make_mtu_run

    from harness.cli import main
    run_dir = make_mtu_run(tmp_path / "results")
    stored = {(p["mode"], p["placement"], p["src"], p["dst"]): (p["verdict"], p["fix"])
              for p in results.read_meta(run_dir)["mtu_check"]["paths"]}
    assert {v for v, _ in stored.values()} == {"ok", "too big", "black hole"}
    assert main(["show", str(run_dir)]) == 0
    shown = _show_mtu(capsys.readouterr().out)
    page = render_html([run_dir])
    reported = _report_mtu(page, results.read_meta(run_dir)["mtu_check"]["paths"])
    assert shown == reported == stored
