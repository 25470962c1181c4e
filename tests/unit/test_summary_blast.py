"""blast's columns in the summary table (udp.ppsN, udp.ndrN, udp.pdrN) and the sender-bound
mark of the text table, on synthetic measurements with known answers."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis import summary, tablefmt
from harness.core import metrics
from harness.gates.verdict import HEADLINE
from harness.tools import TOOLS


def row(mode: str, test: str, metric: str, value: float, repeat: int) -> dict:
    overlay = 1500 if mode == "native" else 1450
    return {"case": f"{mode}/u1500/o{overlay}/host-host/{test}/p1", "mode": mode,
            "datapath": "fastdp" if mode == "native" else "sleeve", "underlay_mtu": 1500,
            "overlay_mtu": overlay, "placement": "host-host", "test": test, "streams": 1,
            "repeat": repeat, "metric": metric, "value": value, "unit": "", "ok": True, "error": None,
            "pair": None, "rate": None}


def frame() -> pd.DataFrame:
    rows = []
    for r, k in enumerate((1.0, 1.1, 0.95)):
        # native: the path kept up with the whole-CPU sender in every repeat (sender-bound);
        # sleeve: the path lost, so its rate is its own
        for mode, pps, bound, ndr in (("native", 870e3, 1.0, 800e3), ("sleeve", 300e3, 0.0, 250e3)):
            rows += [row(mode, "udp.pps64", "pps", pps * k, r), row(mode, "udp.pps64", "sent_pps", 870e3 * k, r),
                     row(mode, "udp.pps64", "loss_pct", 0.0, r), row(mode, "udp.pps64", "sender_bound", bound, r),
                     row(mode, "udp.ndr64", "ndr_pps", ndr * k, r), row(mode, "udp.ndr64", "sender_bound", 0.0, r),
                     row(mode, "udp.ndr64", "trials", 7.0, r), row(mode, "udp.ndr64", "validated", 1.0, r),
                     row(mode, "udp.ndr64", "trial01_sent_pps", 870e3, r)]
    return pd.DataFrame(rows)


def test_columns_hold_the_medians_and_the_share_of_native():
    s = summary.summary_table(frame()).set_index("mode")
    assert s.loc["native", "udp_mpps_64"] == pytest.approx(0.87)
    assert s.loc["sleeve", "udp_mpps_64_pct"] == pytest.approx(100 * 300 / 870)
    assert s.loc["native", "udp_mpps_64_sender_bound"] == 1 and s.loc["sleeve", "udp_mpps_64_sender_bound"] == 0
    assert s.loc["sleeve", "ndr_mpps_64"] == pytest.approx(0.25)
    assert pd.isna(s.loc["sleeve", "pdr_mpps_64"])            # not measured: empty, not zero


def test_text_table_marks_the_sender_bound_cells():
    text = tablefmt.format_table(frame())
    native = next(ln for ln in text.splitlines() if ln.startswith("native"))
    sleeve = next(ln for ln in text.splitlines() if ln.startswith("sleeve"))
    assert f"{tablefmt.SENDER_MARK} 0.870" in native and tablefmt.SENDER_MARK not in sleeve
    assert tablefmt.SENDER_NOTE in text
    shown = dict(tablefmt.table_columns(summary.summary_table(frame())))
    assert "udp_pps64" in shown and "ndr64" in shown and "udp_pps64_bound" not in shown


def test_no_mark_and_no_note_without_a_bound_sender():
    df = frame()
    df.loc[df["metric"] == "sender_bound", "value"] = 0.0
    text = tablefmt.format_table(df)
    assert tablefmt.SENDER_MARK not in text


def test_every_metric_of_the_new_tests_is_in_the_table_and_each_test_has_a_headline():
    for name in ("udp.pps64", "udp.pps1400", "udp.ndr64", "udp.pdr64"):
        assert name in HEADLINE and metrics.get(HEADLINE[name]) is not None
    emitted = {"udp.pps64": ["pps", "sent_pps", "loss_pct", "socket_drops", "sender_cpu_pct", "sender_bound"],
               "udp.ndr64": ["ndr_pps", "ndr_bps", "trials", "validated", "sender_bound", "trial03_offered_pps",
                             "trial03_sent_pps", "trial03_loss_pct"],
               "udp.pdr64": ["pdr_pps", "pdr_bps"]}
    for test, names in emitted.items():
        for n in names:
            m = metrics.get(n)
            assert m is not None, n
            base = metrics.METRICS.get(n) or metrics.METRICS[n.split("_", 1)[1]]
            assert test in base.tests, (test, n)
    assert metrics.get("trial03_loss_pct").title == "loss, trial 03"
    assert set(TOOLS) >= set(emitted)


def test_the_report_marks_the_sender_bound_cells(tmp_path):
    from harness.core.looks import Looks
    from harness.report.render import _tables
    tables = _tables(summary.summary_table(frame()), {}, 1, Looks())
    cells = {(row["r"]["mode"], c["key"]): c for t in tables for row in t["rows"] for c in row["cells"]}
    assert cells[("native", "udp_pps64")]["sb"] and cells[("native", "udp_pps64_pct")]["sb"]
    assert not cells[("sleeve", "udp_pps64")]["sb"] and not cells[("native", "ndr64")]["sb"]
    assert all(t["sb_marked"] for t in tables)
    assert tablefmt.SENDER_MARK not in cells[("native", "udp_pps64")]["text"]   # the template marks it once
