"""load.sockperf for real: sockperf's ping-pong every 100 µs idle, then beside iperf 2's
load, native and fastdp host to host on the lab, read back by show (table and JSON), the
report and the gate.

What could make it fail by chance: a probe or its reply lost on a kernel path (the ping-pong
then waits to the end and the case fails, tools/load_sockperf.py); nothing measured is
judged by its size. Its rate, from the soak in tests/README.md, is stated there.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from conftest import needs_root
from harness.results import read_records
from harness.tools.underload import PERCENTILES
from test_testbed_ssh import ob

pytestmark = [needs_root(), pytest.mark.lab]

MODES = ("native", "fastdp")
RUN = ["--modes", ",".join(MODES), "--placements", "host-host", "--tests", "load.sockperf", "--streams", "2",
       "--repeats", "1", "--duration", "1", "--underlay-mtu", "1500", "-q"]


def test_load_sockperf_on_the_lab(tmp_path):
    p = ob("run", *RUN, "--results", str(tmp_path / "results"))
    assert p.returncode == 0, p.stderr[-3000:]
    run = pathlib.Path(p.stdout.splitlines()[0])
    recs = read_records(run)
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]][:3]
    by = {(r["mode"], r["metric"]): r["value"] for r in recs}
    for mode in MODES:
        got = {m: v for (md, m), v in by.items() if md == mode}
        for p_ in PERCENTILES:
            assert got[f"rtt_added_{p_}_us"] == got[f"rtt_loaded_{p_}_us"] - got[f"rtt_idle_{p_}_us"]
        for ph in ("idle", "loaded"):
            ranks = [got[f"rtt_{ph}_min_us"]] + [got[f"rtt_{ph}_{p_}_us"] for p_ in PERCENTILES] + [got[f"rtt_{ph}_max_us"]]
            assert 0 < ranks[0] and ranks == sorted(ranks), (mode, ph, ranks)
            # sockperf's own figures to the nanosecond, not a histogram's 100 µs edges
            assert any(got[f"rtt_{ph}_{p_}_us"] % 100 for p_ in PERCENTILES), (mode, ph, got)
        assert got["load_throughput_bps"] > 0 and got["probe_loss_pct"] == 0

    table = ob("show", str(run))
    assert table.returncode == 0 and "Loaded P99 (µs)" in table.stdout, table.stdout + table.stderr
    rows = json.loads(ob("show", str(run), "--format", "json").stdout)
    assert {r["mode"] for r in rows} == set(MODES) and all(r["rtt_loaded_p99_us"] > 0 for r in rows), rows
    html = tmp_path / "report.html"
    assert ob("report", str(run), "-o", str(html)).returncode == 0
    text = html.read_text()
    assert 'alt="idle and loaded latency percentiles per mode"' in text and "a 14-byte UDP message every 100 µs" in text

    base = tmp_path / "baseline.json"
    assert ob("baseline", str(run), "-o", str(base)).returncode == 0
    gate = ob("gate", str(run), "--baseline", str(base), "--format", "json")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    judged = {(c["test"], c["metric"]) for c in json.loads(gate.stdout)["cases"]}
    assert judged == {("load.sockperf", "rtt_loaded_p90_us")}, judged
