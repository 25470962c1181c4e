"""Newline-delimited JSON for the OpenSearch / Elasticsearch `_bulk` API: per case an action
line `{"index": {"_index": …, "_id": …}}` and a document.

The document carries k8s-netperf's field names where they mean the same thing (K8S_NETPERF
says which: its throughput in Mb/s, latency in usec, retransmits, UDP loss, run uuid and
time, parallelism, driver and profile), so dashboards built on its index can read ours,
beside overlaybench's own fields: the case's configuration and, under `metrics`, every
metric's median, min, max, repeats, unit, trip, ratio to native and verdict against native.

Latency: k8s-netperf's `latency` is a request/response round trip. qperf and sockperf report
one way (half the round trip they time), so `latency` is twice their figure, exactly the
round trip they measured; ping's and irtt's are round trips already. Under `metrics`, a
one-way latency keeps its `latency…` name with `"trip": "one-way"` and a round trip is
named `rtt…` with `"trip": "round-trip"` (MAPPING says the same for the index).
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.core.metrics import ONE_WAY, significant
from harness.export.metrics import Case, Export, Value

DEFAULT_INDEX = "overlaybench"

# overlaybench test → k8s-netperf's profile (netperf's test names).
PROFILES = {"iperf3.tcp": "TCP_STREAM", "qperf.tcp_bw": "TCP_STREAM", "iperf3.udp": "UDP_STREAM",
            "qperf.udp_bw": "UDP_STREAM", "qperf.tcp_lat": "TCP_RR", "sockperf.pingpong_tcp": "TCP_RR",
            "qperf.udp_lat": "UDP_RR", "sockperf.pingpong": "UDP_RR"}
# k8s-netperf field ← how it is filled here (docs/export.md's table says the same).
K8S_NETPERF = {
    "uuid": "the run id",
    "timestamp": "the run's start (ISO 8601)",
    "driver": "the tool (iperf3, qperf, sockperf, ping)",
    "profile": "TCP_STREAM, UDP_STREAM, TCP_RR or UDP_RR from the test (PROFILES); other tests: the test's name",
    "hostNetwork": "placement host-host",
    "parallelism": "streams",
    "duration": "the scenario's duration per case, seconds",
    "samples": "repeats measured",
    "messageSize": "the packet-rate tests' UDP payload, bytes",
    "throughput": "median throughput_bps over repeats, in Mb/s (tputMetric)",
    "tputMetric": "\"Mb/s\"",
    "latency": "round trip in usec: the median P99 where the test measures percentiles, else the median; "
               "a one-way figure (qperf, sockperf) doubled, as it is half the round trip the tool timed",
    "ltcyMetric": "\"usec\"",
    "tcpRetransmits": "median retransmits",
    "udpLossPercent": "median loss_pct",
}


def _by_metric(case: Case) -> dict[str, Value]:
    return {v.metric.name: v for v in case.values}


def _k8s_netperf(case: Case, export: Export) -> dict[str, Any]:
    c, vals = case.config, _by_metric(case)
    test = str(c["test"])
    doc: dict[str, Any] = {"uuid": export.run_id, "timestamp": export.meta.get("start"),
                           "driver": test.split(".")[0], "profile": PROFILES.get(test, test),
                           "hostNetwork": c["placement"] == "host-host",
                           "parallelism": int(c["streams"]) if c.get("streams") is not None else 1,
                           "samples": max(v.n for v in case.values)}
    duration = (export.meta.get("scenario") or {}).get("duration")
    if isinstance(duration, (int, float)):
        doc["duration"] = int(round(duration))
    size = re.fullmatch(r"iperf3\.pps(\d+)", test)
    if size:
        doc["messageSize"] = int(size.group(1))
    if "throughput_bps" in vals:
        doc["throughput"], doc["tputMetric"] = significant(vals["throughput_bps"].median / 1e6), "Mb/s"
    lat = (vals.get("latency_p99_us") or vals.get("latency_us") or vals.get("rtt_p99_us")
           or vals.get("rtt_us"))
    if lat is not None:
        rtt = lat.median * (2 if lat.metric.trip == ONE_WAY else 1)
        doc["latency"], doc["ltcyMetric"] = significant(rtt), "usec"
    if "retransmits" in vals:
        doc["tcpRetransmits"] = significant(vals["retransmits"].median)
    if "loss_pct" in vals:
        doc["udpLossPercent"] = significant(vals["loss_pct"].median)
    return doc


def _own(case: Case, export: Export) -> dict[str, Any]:
    meta = export.meta
    machine = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    doc: dict[str, Any] = {"run_id": export.run_id, "scenario": (meta.get("scenario") or {}).get("name"),
                           "git_commit": meta.get("git_commit"), "kernel": machine.get("kernel"),
                           "hostname": machine.get("hostname"), "case": case.name}
    doc.update({k: v for k, v in case.config.items()})
    doc["metrics"] = {v.metric.name: {"median": significant(v.median), "min": significant(v.lo),
                                      "max": significant(v.hi), "n": v.n, "unit": v.unit or None,
                                      "trip": v.metric.trip, "ratio_to_native": v.ratio,
                                      "vs_native": v.verdict}
                      for v in case.values}
    return doc


# What the index's fields mean, for a mapping or a dashboard's legend.
MAPPING = {
    "latency": "k8s-netperf's field: a round trip in usec (see K8S_NETPERF)",
    "metrics.latency*": "one-way latency (half the round trip qperf or sockperf timed), trip \"one-way\"",
    "metrics.rtt*": "round trip (ping, irtt, sockperf's ping-pong under load, iperf 2's bounceback), "
                   "trip \"round-trip\"",
    "metrics.*.ratio_to_native": "the median over native's at the same underlay MTU, test and streams",
    "metrics.*.vs_native": "\"distinct\" when the repeats are separated from native's, \"not distinct\" when "
                           "their ranges overlap (the table's ≈), null for native or without a reference",
}


def documents(export: Export) -> list[dict[str, Any]]:
    return [{**_k8s_netperf(case, export), **_own(case, export)} for case in export.cases]


def ndjson(export: Export, index: str = DEFAULT_INDEX, **_: object) -> str:
    lines = []
    for case, doc in zip(export.cases, documents(export)):
        lines.append(json.dumps({"index": {"_index": index, "_id": f"{export.run_id}/{case.name}"}}))
        lines.append(json.dumps(doc, ensure_ascii=False))
    return "\n".join(lines) + "\n"
