"""`overlaybench export`: every format on the recorded quick run (tests/data/runs/quick), each
checked by its own checker where one exists: `promtool check metrics` (Debian's
prometheus) and prometheus_client's OpenMetrics parser; Bencher's published JSON schema
for BMF; github-action-benchmark's BenchmarkResult shape; the _bulk API's line pairs and
k8s-netperf's document field types for the NDJSON. Then a synthetic run of every test
(tests/report_fixtures/synth.py): each metric in the file of its direction, CPU-seconds per
gigabit computed by hand from the measurements, no float noise, one-way latencies and round
trips under names of their own, and two runs told apart by their `run` label.

Nothing here depends on timing: the runs are stored or generated from a seeded generator.
"""

from __future__ import annotations

import json
import math
import re
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
    assert s.labels == {"run": RUN_ID, "mode": "sleeve", "datapath": "sleeve", "underlay_mtu": "1500",
                        "overlay_mtu": "1450", "placement": "host-host", "test": "iperf3.tcp", "streams": "1"}
    samples = [x for x in out["openmetrics"].splitlines() if x.startswith("overlaybench_")]
    assert samples and all(x.split("{", 1)[1].startswith(f'run="{RUN_ID}",') for x in samples)   # run first
    assert s.value == pytest.approx(SLEEVE_BPS / 8, rel=1e-3)
    lat = fams["overlaybench_latency_seconds"]
    assert lat.unit == "seconds" and all(1e-6 < x.value < 1e-3 for x in lat.samples)
    ratio = fams["overlaybench_native_ratio"]
    r = next(x for x in ratio.samples if x.labels["mode"] == "sleeve" and x.labels["underlay_mtu"] == "1500"
             and x.labels["placement"] == "host-host" and x.labels["metric"] == "throughput_bps")
    assert r.value == pytest.approx(0.316, abs=0.001)
    assert r.labels["distinct"] == "true"           # 4.48–5.75 Gbit/s against native's 15.6–16.8
    # fastdp at MTU 9000 host-host: 12.6–13.4 Gbit/s inside native's 11.1–14.9, the table's ≈
    nd = next(x for x in ratio.samples if x.labels["mode"] == "fastdp" and x.labels["underlay_mtu"] == "9000"
              and x.labels["placement"] == "host-host" and x.labels["metric"] == "throughput_bps")
    assert nd.labels["distinct"] == "false" and nd.value == pytest.approx(0.999, abs=0.001)
    assert all("distinct" not in x.labels for x in ratio.samples if x.labels["mode"] == "native")   # no verdict
    cpu = fams["overlaybench_cpu_seconds_per_gigabit"]
    assert len(cpu.samples) == 10 and {x.labels["test"] for x in cpu.samples} == {"iperf3.tcp"}
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
    measured = [(k, m) for c in doc.values() for k, m in c.items() if not k.endswith("-native-ratio")]
    assert all(m["lower_value"] <= m["value"] <= m["upper_value"] for _, m in measured)
    assert all(len(k) <= 64 for c in doc.values() for k in c)            # Bencher's slug limit
    # Beside each measure with a native reference, its ratio to native: a value, no bounds.
    assert doc[SLEEVE]["throughput-native-ratio"] == {"value": pytest.approx(0.3159, abs=1e-4)}
    ratios = [m for c in doc.values() for k, m in c.items() if k.endswith("-native-ratio")]
    assert ratios and all(list(m) == ["value"] for m in ratios)
    assert "latency-us" in doc["sleeve/u1500/o1450/host-host/qperf.tcp_lat/p1"]
    assert doc["sleeve/u1500/o1450/host-host/qperf.tcp_lat/p1"]["latency-native-ratio"]["value"] == \
        pytest.approx(5.608, abs=1e-3)                                   # 41.1 µs / native's 7.33 µs
    assert "cpu-seconds-per-gbit" in doc[SLEEVE] and "cpu-s-per-gbit-native-ratio" in doc[SLEEVE]


def test_github_action_benchmark_files_split_by_direction(out):
    import jsonschema
    bigger, smaller = json.loads(out["github-bigger"]), json.loads(out["github-smaller"])
    jsonschema.validate(bigger, GAB_SCHEMA)
    jsonschema.validate(smaller, GAB_SCHEMA)
    assert {e["unit"] for e in bigger} == {"Gbit/s", "× native"}
    assert {e["unit"] for e in smaller} == {"µs", "%", "", "CPU·s/Gbit", "× native"}   # "": retransmits
    e = next(e for e in bigger if e["name"] == f"{SLEEVE} throughput (received goodput)")
    assert e["value"] == pytest.approx(SLEEVE_BPS / 1e9, rel=1e-3) and e["range"] == "4.481–5.755"
    assert "31.6 % of native (distinct)" in e["extra"] and f"run {RUN_ID}" in e["extra"]
    r = next(e for e in bigger if e["name"] == f"{SLEEVE} throughput (received goodput) ratio to native")
    assert (r["unit"], r["value"]) == ("× native", pytest.approx(0.3159, abs=1e-4)) and "range" not in r
    nd = next(e for e in bigger if e["name"] == "fastdp/u9000/o8950/host-host/iperf3.tcp/p1 throughput "
              "(received goodput)")
    assert "99.9 % of native (not distinct)" in nd["extra"]
    # Each latency says its trip; CPU per gigabit is a cost, its ratio with it.
    assert any(e["name"] == "sleeve/u1500/o1450/host-host/qperf.tcp_lat/p1 latency (one-way)" for e in smaller)
    assert any(e["name"] == f"{SLEEVE} CPU-seconds per gigabit of TCP throughput ratio to native" for e in smaller)
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
    t = d["metrics"]["throughput_bps"]
    assert (t["ratio_to_native"], t["vs_native"], t["trip"]) == (pytest.approx(0.3159, abs=1e-4), "distinct", None)
    assert "pct_of_native" not in t
    native = next(d for d in docs if d["case"] == "native/u1500/o1500/host-host/iperf3.tcp/p1")
    assert native["metrics"]["throughput_bps"]["vs_native"] is None
    nd = next(d for d in docs if d["case"] == "fastdp/u9000/o8950/host-host/iperf3.tcp/p1")
    assert nd["metrics"]["throughput_bps"]["vs_native"] == "not distinct"
    lat = next(d for d in docs if d["case"] == "sleeve/u1500/o1450/container-container/qperf.tcp_lat/p1")
    assert (lat["profile"], lat["hostNetwork"], lat["ltcyMetric"]) == ("TCP_RR", False, "usec")
    # k8s-netperf's latency is a round trip: twice qperf's one-way 47.3 µs
    one_way = lat["metrics"]["latency_us"]
    assert one_way["trip"] == "one-way" and 40 < one_way["median"] < 55
    assert lat["latency"] == pytest.approx(2 * one_way["median"]) and "throughput" not in lat
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


# --------------------------------------------------------------------------- every metric kind

def copy_run(src: pathlib.Path, root: pathlib.Path, run_id: str) -> pathlib.Path:
    """The run `src` again under another run id (run.json and every measurement line)."""
    dst = root / run_id
    dst.mkdir(parents=True)
    meta = json.loads((src / "run.json").read_text())
    (dst / "run.json").write_text(json.dumps({**meta, "run_id": run_id}))
    lines = [json.loads(x) for x in (src / "measurements.jsonl").read_text().splitlines() if x.strip()]
    (dst / "measurements.jsonl").write_text("".join(json.dumps({**x, "run_id": run_id}) + "\n" for x in lines))
    return dst


@pytest.fixture(scope="module")
def every(tmp_path_factory):
    """A synthetic run of every test (tests/report_fixtures/synth.py): connections per second
    (iperf.crr), the knees (the UDP sweeps), the working load's throughput (load.bounceback),
    CPU around the throughput tests, every latency, on a machine of 2 CPUs (META)."""
    from report_fixtures.synth import EVERY_TEST, META, make_run
    assert META["machine"]["cpus"] == 2
    run = make_run(tmp_path_factory.mktemp("every"), modes=["native", "fastdp", "sleeve"], underlay_mtus=[1500],
                   tests=EVERY_TEST, placements=("container-container",), repeats=3)
    return run, {name: export(run, name) for name in FORMATS}


def test_higher_is_better_metrics_are_in_the_bigger_file(every):
    _, out = every
    bigger, smaller = json.loads(out["github-bigger"]), json.loads(out["github-smaller"])
    for title, unit in (("connections per second", "conn/s"), ("loss knee", "Mbit/s"),
                        ("the working load's throughput", "Gbit/s"), ("packet rate", "Mpps"),
                        ("throughput (received goodput)", "Gbit/s")):
        got = [e for e in bigger if title in e["name"] and not e["name"].endswith("ratio to native")]
        assert got and {e["unit"] for e in got} == {unit}, title
        assert not [e for e in smaller if title in e["name"]], title
    crr = next(e for e in bigger if e["name"] == "sleeve/u1500/container-container/iperf.crr/s1 "
                                                 "connections per second")
    assert 1000 < crr["value"] < 10000
    # latency, loss, CPU and the connect time are costs
    for title in ("latency (one-way)", "P99 round trip under load", "P99 connect time", "loss",
                  "CPU-seconds per gigabit of TCP throughput"):
        assert any(e["name"].endswith(f" {title}") for e in smaller), title
        assert not any(e["name"].endswith(f" {title}") for e in bigger), title


def _by_repeat(run: pathlib.Path, case_prefix: str, test: str, metric: str) -> dict[int, float]:
    lines = [json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines() if x.strip()]
    return {x["repeat"]: x["value"] for x in lines
            if x["case"].startswith(case_prefix) and x["test"] == test and x["metric"] == metric and x["ok"]}


def test_cpu_seconds_per_gigabit_is_share_times_cpus_over_gbit_per_s(every):
    run, out = every
    import statistics
    share = _by_repeat(run, "sleeve/", "iperf3.tcp", "cpu_total_pct")
    bps = _by_repeat(run, "sleeve/", "iperf3.tcp", "throughput_bps")
    assert len(share) == len(bps) == 3
    # per repeat: the busy share of the machine's 2 CPUs is CPU-seconds each second; over
    # the gigabits each second, CPU-seconds per gigabit
    per = sorted(share[r] / 100 * 2 / (bps[r] / 1e9) for r in share)
    want = statistics.median(per)
    case = "sleeve/u1500/container-container/iperf3.tcp/s1"         # the case as the run names it
    b = json.loads(out["bmf"])[case]["cpu-seconds-per-gbit"]
    assert (b["value"], b["lower_value"], b["upper_value"]) == \
        (pytest.approx(want, rel=1e-5), pytest.approx(per[0], rel=1e-5), pytest.approx(per[-1], rel=1e-5))
    g = next(e for e in json.loads(out["github-smaller"])
             if e["name"] == f"{case} CPU-seconds per gigabit of TCP throughput")
    assert g["unit"] == "CPU·s/Gbit" and g["value"] == pytest.approx(want, rel=1e-5)
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    fam = next(f for f in text_string_to_metric_families(out["openmetrics"])
               if f.name == "overlaybench_cpu_seconds_per_gigabit")
    s = next(s for s in fam.samples if s.labels["mode"] == "sleeve" and s.labels["test"] == "iperf3.tcp")
    assert s.value == pytest.approx(want, rel=1e-5)
    doc = next(json.loads(x) for x in out["opensearch"].splitlines()[1::2] if json.loads(x)["case"] == case)
    assert doc["metrics"]["cpu_s_per_gbit"]["median"] == pytest.approx(want, rel=1e-5)
    # the table's figure is the same one (show, the report)
    from harness import results
    from harness.analysis.summary import summary_table
    t = summary_table(results.load(run))
    assert t.loc[t["mode"] == "sleeve", "cpu_s_per_gbit"].iloc[0] == pytest.approx(want, rel=1e-9)


def test_no_value_carries_float_noise(every):
    """Exports round to 6 significant digits (ratios to 4): no 0.49920000000000003."""
    _, out = every
    for name, text in out.items():
        noisy = re.findall(r"\d\.\d{10,}", text)
        assert noisy == [], (name, noisy[:5])


def test_one_way_and_round_trip_latencies_never_share_a_name(every):
    from harness.core.metrics import ONE_WAY, ROUND_TRIP
    from harness.export.metrics import load
    run, out = every
    trips: dict[str, set] = {}
    for case in load(run).cases:
        for v in case.values:
            trips.setdefault(v.metric.name, set()).add((v.metric.trip, case.config["test"]))
    for name, seen in trips.items():
        assert len({t for t, _ in seen}) == 1, (name, seen)
    assert {t for t, _ in trips["latency_us"]} == {ONE_WAY}               # qperf's and sockperf's
    assert {test for _, test in trips["latency_us"]} == {"qperf.tcp_lat", "qperf.udp_lat", "sockperf.pingpong",
                                                          "sockperf.pingpong_tcp"}
    assert trips["rtt_us"] == {(ROUND_TRIP, "ping.flood"), (ROUND_TRIP, "irtt.udp")}   # ping's latency_us
    assert {"rtt_min_us", "rtt_max_us", "rtt_mdev_us"} <= set(trips)
    assert not any(test == "ping.flood" for name in trips if name.startswith("latency") for _, test in trips[name])
    for name in ("lat_loaded_p99_us", "connect_p99_us", "rtt_p99_us"):
        assert {t for t, _ in trips[name]} == {ROUND_TRIP}, name
    for name in ("jitter_ms", "step01_jitter_ms", "ipdv_us"):           # variations, not latencies
        assert {t for t, _ in trips[name]} == {None}, name
    # every latency has a trip
    for name, seen in trips.items():
        if name.endswith("_us") and not name.startswith("ipdv"):
            assert {t for t, _ in seen} <= {ONE_WAY, ROUND_TRIP} and None not in {t for t, _ in seen}, name
    # OpenMetrics: latency_seconds holds one-way figures only, rtt_seconds round trips only
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    fams = {f.name: f for f in text_string_to_metric_families(out["openmetrics"])}
    assert {s.labels["test"] for s in fams["overlaybench_latency_seconds"].samples} == \
        {"qperf.tcp_lat", "qperf.udp_lat", "sockperf.pingpong", "sockperf.pingpong_tcp"}
    assert {s.labels["test"] for s in fams["overlaybench_rtt_seconds"].samples} == {"ping.flood", "irtt.udp"}
    # OpenSearch: each metric says its trip; k8s-netperf's latency is a round trip
    docs = [json.loads(x) for x in out["opensearch"].splitlines()[1::2]]
    for d in docs:
        for name, m in d["metrics"].items():
            if name.startswith("latency"):
                assert m["trip"] == ONE_WAY, (d["case"], name)
            if name.startswith("rtt"):
                assert m["trip"] == ROUND_TRIP, (d["case"], name)
        if d["test"] == "ping.flood":
            assert d["latency"] == pytest.approx(d["metrics"]["rtt_us"]["median"], rel=1e-5)
        if d["test"] == "sockperf.pingpong":
            assert d["latency"] == pytest.approx(2 * d["metrics"]["latency_p99_us"]["median"], rel=1e-5)


def test_openmetrics_of_two_runs_keep_them_apart_by_run_label(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    other = copy_run(DATA, tmp_path, "20261129T090000Z-0b0b")
    samples = {}
    for run, run_id in ((DATA, RUN_ID), (other, "20261129T090000Z-0b0b")):
        fams = list(text_string_to_metric_families(export(run, "openmetrics")))
        got = [(s.name, tuple(sorted(s.labels.items())), s.value) for f in fams for s in f.samples]
        assert got and all(dict(labels)["run"] == run_id for _, labels, _ in got)
        samples[run_id] = got
    a, b = ({(n, labels) for n, labels, _ in samples[k]} for k in (RUN_ID, "20261129T090000Z-0b0b"))
    assert a.isdisjoint(b)                                # no series of one is a series of the other
    drop = {(n, tuple(x for x in labels if x[0] != "run")) for n, labels in a}
    assert drop == {(n, tuple(x for x in labels if x[0] != "run")) for n, labels in b}   # the run label alone
