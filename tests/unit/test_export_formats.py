"""`overlaybench export`: every format on the recorded quick run (tests/data/runs/quick), each
checked by its own checker where one exists: `promtool check metrics` (Debian's
prometheus) and prometheus_client's OpenMetrics parser; Bencher's published JSON schema
for BMF; github-action-benchmark's BenchmarkResult shape; the _bulk API's line pairs and
k8s-netperf's document field types for the NDJSON.
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import subprocess

import pytest

from harness.cli import main
from harness.export import FORMATS, export

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "runs" / "quick"
RUN_ID = "20261128T001508Z-855b"
CASES = 20                       # 10 rows × iperf3.tcp and qperf.tcp_lat
# The recorded medians (measurements.jsonl): sleeve host-host at MTU 1500.
SLEEVE = "sleeve/u1500/o1450/host-host/iperf3.tcp/p1"
SLEEVE_BPS, SLEEVE_LO, SLEEVE_HI = 5.117e9, 4.48e9, 5.75e9

# Bencher's schema for BMF, as published at https://bencher.dev/bmf.json.
BMF_SCHEMA = {
    "$id": "https://bencher.dev/bmf.json", "$schema": "http://json-schema.org/draft-07/schema", "type": "object",
    "patternProperties": {".+": {"type": "object", "patternProperties": {".+": {
        "type": "object", "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                                         "upper_value": {"type": "number"}},
        "required": ["value"]}}}}}
# github-action-benchmark's BenchmarkResult (src/extract.ts): name, value, unit; range and extra optional.
GAB_SCHEMA = {"type": "array", "minItems": 1, "items": {
    "type": "object", "required": ["name", "value", "unit"], "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "value": {"type": "number"}, "unit": {"type": "string"},
                   "range": {"type": "string"}, "extra": {"type": "string"}}}}
# k8s-netperf's Doc (pkg/archive/archive.go): the fields we fill and their Go types.
K8S_TYPES = {"uuid": str, "timestamp": str, "driver": str, "profile": str, "hostNetwork": bool,
             "parallelism": int, "duration": int, "samples": int, "messageSize": int, "throughput": float,
             "tputMetric": str, "latency": float, "ltcyMetric": str, "tcpRetransmits": float,
             "udpLossPercent": float}


@pytest.fixture(scope="module")
def out() -> dict[str, str]:
    return {name: export(DATA, name) for name in FORMATS}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install -y prometheus)")
@pytest.mark.parametrize("fmt", ["prometheus", "openmetrics"])
def test_promtool_accepts_the_text(out, fmt):
    r = subprocess.run(["promtool", "check", "metrics"], input=out[fmt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr


def test_openmetrics_parses_one_sample_per_case_and_metric(out):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    fams = {f.name: f for f in text_string_to_metric_families(out["openmetrics"])}
    tput = fams["overlaybench_throughput_bytes_per_second"]
    assert tput.type == "gauge" and tput.unit == "bytes_per_second"
    assert len(tput.samples) == 10                      # one per iperf3.tcp case
    s = next(s for s in tput.samples if s.labels["mode"] == "sleeve" and s.labels["underlay_mtu"] == "1500"
             and s.labels["placement"] == "host-host")
    assert s.labels == {"mode": "sleeve", "datapath": "sleeve", "underlay_mtu": "1500", "overlay_mtu": "1450",
                        "placement": "host-host", "test": "iperf3.tcp", "streams": "1"}
    assert s.value == pytest.approx(SLEEVE_BPS / 8, rel=1e-3)
    lat = fams["overlaybench_latency_seconds"]
    assert lat.unit == "seconds" and all(1e-6 < x.value < 1e-3 for x in lat.samples)
    ratio = fams["overlaybench_native_ratio"]
    r = next(x for x in ratio.samples if x.labels["mode"] == "sleeve" and x.labels["underlay_mtu"] == "1500"
             and x.labels["placement"] == "host-host" and x.labels["metric"] == "throughput_bps")
    assert r.value == pytest.approx(0.316, abs=0.001)
    for f in fams.values():                             # label sets unique within a family
        keys = [tuple(sorted(x.labels.items())) for x in f.samples]
        assert len(keys) == len(set(keys)), f.name
    assert out["openmetrics"].endswith("# EOF\n") and "# EOF" not in out["prometheus"]


def test_bmf_matches_bencher_schema_with_the_repeats_as_bounds(out):
    import jsonschema
    doc = json.loads(out["bmf"])
    jsonschema.validate(doc, BMF_SCHEMA)
    assert len(doc) == CASES
    t = doc[SLEEVE]["throughput-gbit-s"]
    assert t["value"] == pytest.approx(SLEEVE_BPS / 1e9, rel=1e-3)
    assert t["lower_value"] == pytest.approx(SLEEVE_LO / 1e9, rel=1e-3)
    assert t["upper_value"] == pytest.approx(SLEEVE_HI / 1e9, rel=1e-3)
    assert all(m["lower_value"] <= m["value"] <= m["upper_value"] for c in doc.values() for m in c.values())
    assert all(len(k) <= 64 for c in doc.values() for k in c)            # Bencher's slug limit
    assert "latency-us" in doc["sleeve/u1500/o1450/host-host/qperf.tcp_lat/p1"]
    assert "cpu-pct-per-gbit-s" in doc[SLEEVE]


def test_github_action_benchmark_files_split_by_direction(out):
    import jsonschema
    bigger, smaller = json.loads(out["github-bigger"]), json.loads(out["github-smaller"])
    jsonschema.validate(bigger, GAB_SCHEMA)
    jsonschema.validate(smaller, GAB_SCHEMA)
    assert {e["unit"] for e in bigger} == {"Gbit/s"}
    assert {"us", "%", "count", "%/(Gbit/s)"} <= {e["unit"] for e in smaller}
    e = next(e for e in bigger if e["name"] == f"{SLEEVE} throughput")
    assert e["value"] == pytest.approx(SLEEVE_BPS / 1e9, rel=1e-3) and e["range"] == "4.481–5.755"
    assert "31.6 % of native" in e["extra"] and f"run {RUN_ID}" in e["extra"]
    names = [e["name"] for e in bigger + smaller]
    assert len(names) == len(set(names))                 # the action keys its history by name


def test_opensearch_bulk_lines_carry_k8s_netperf_fields(out):
    lines = out["opensearch"].split("\n")
    assert lines[-1] == "" and len(lines) == 2 * CASES + 1          # _bulk needs the final newline
    actions, docs = [json.loads(x) for x in lines[:-1:2]], [json.loads(x) for x in lines[1:-1:2]]
    assert all(list(a) == ["index"] and a["index"]["_index"] == "overlaybench" for a in actions)
    assert len({a["index"]["_id"] for a in actions}) == CASES
    for d in docs:
        for field, kind in K8S_TYPES.items():
            if field in d:
                assert type(d[field]) is kind, (field, d[field])
    d = next(d for d in docs if d["case"] == SLEEVE)
    assert d["uuid"] == RUN_ID and d["timestamp"] == "2026-11-28T00:15:08+00:00"
    assert (d["driver"], d["profile"], d["hostNetwork"], d["parallelism"], d["samples"], d["duration"]) == \
        ("iperf3", "TCP_STREAM", True, 1, 2, 1)
    assert d["throughput"] == pytest.approx(SLEEVE_BPS / 1e6, rel=1e-3) and d["tputMetric"] == "Mb/s"
    assert d["metrics"]["throughput_bps"]["pct_of_native"] == pytest.approx(31.6, abs=0.1)
    lat = next(d for d in docs if d["case"] == "sleeve/u1500/o1450/container-container/qperf.tcp_lat/p1")
    assert (lat["profile"], lat["hostNetwork"], lat["ltcyMetric"]) == ("TCP_RR", False, "usec")
    assert 40 < lat["latency"] < 55 and "throughput" not in lat
    assert all(math.isfinite(v["median"]) for d in docs for v in d["metrics"].values())


def test_cli_writes_a_file_or_stdout_and_refuses_bad_input(tmp_path, capsys):
    assert main(["export", str(DATA), "--format", "bmf", "-o", str(tmp_path / "o" / "bmf.json")]) == 0
    assert json.loads((tmp_path / "o" / "bmf.json").read_text()) == json.loads(export(DATA, "bmf"))
    capsys.readouterr()
    assert main(["export", str(DATA), "--format", "opensearch", "--index", "nets"]) == 0
    assert '"_index": "nets"' in capsys.readouterr().out
    assert main(["export", str(tmp_path / "nope"), "--format", "bmf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a run directory" in err
    with pytest.raises(SystemExit) as e:
        main(["export", str(DATA), "--format", "xml"])
    assert e.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"schema_version": 1, "run_id": "e"}))
    assert main(["export", str(empty), "--format", "prometheus"]) == 2
    assert "no successful measurements to export" in capsys.readouterr().err
