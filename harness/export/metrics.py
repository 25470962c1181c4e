"""What every export says: a run's cases, each metric's median and spread over repeats, under
one name table (METRICS) that all the formats read.

A *case* here is one configuration (harness.analysis.stats.CONFIG_KEY: mode, underlay MTU,
overlay MTU, placement, test, streams, pair) with its datapath; for each metric it
measured, the median, min and max over its repeats, their count, and the median's % of
native where the run has a native reference. CPU per Gbit/s (the machine's CPU over the
TCP throughput test's goodput, `stats.cpu_per_gbps`) is added as a metric of its own.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
from typing import Any

from harness import results
from harness.analysis import stats
from harness.analysis.summary import TCP_BW_TESTS
from harness.core.errors import HarnessError

CPU_PER_GBPS = "cpu_per_gbps"


@dataclasses.dataclass(frozen=True)
class Metric:
    """One measured metric as the exports name it.

    `unit`/`scale`: the unit CI dashboards read (value × scale); `base`/`base_scale`: the
    Prometheus name's base unit (seconds, bits, ratios), as its naming rules ask.
    """

    name: str                   # measurements.jsonl's metric
    slug: str                   # Bencher measure and github-action-benchmark name suffix
    title: str
    unit: str
    scale: float
    prom: str                   # Prometheus/OpenMetrics family, without the overlaybench_ prefix
    base_unit: str              # OpenMetrics UNIT ("" for none)
    base_scale: float
    higher_is_better: bool


def _m(name, slug, title, unit, scale, prom, base_unit, base_scale, higher=False) -> Metric:
    return Metric(name, slug, title, unit, scale, prom, base_unit, base_scale, higher)


METRICS: dict[str, Metric] = {m.name: m for m in [
    _m("throughput_bps", "throughput", "throughput", "Gbit/s", 1e-9,
       "throughput_bytes_per_second", "bytes_per_second", 0.125, higher=True),
    _m("stream_throughput_bps", "stream-throughput", "per-stream throughput", "Gbit/s", 1e-9,
       "stream_throughput_bytes_per_second", "bytes_per_second", 0.125, higher=True),
    _m("pps", "packet-rate", "packet rate", "Mpps", 1e-6, "packets_per_second", "packets_per_second", 1.0,
       higher=True),
    _m("fairness_jain", "fairness-jain", "Jain's fairness index", "index", 1.0, "fairness_jain", "", 1.0,
       higher=True),
    _m("latency_us", "latency", "latency", "us", 1.0, "latency_seconds", "seconds", 1e-6),
    _m("latency_min_us", "latency-min", "minimum latency", "us", 1.0, "latency_min_seconds", "seconds", 1e-6),
    _m("latency_max_us", "latency-max", "maximum latency", "us", 1.0, "latency_max_seconds", "seconds", 1e-6),
    _m("latency_mdev_us", "latency-mdev", "latency mean deviation", "us", 1.0, "latency_mdev_seconds",
       "seconds", 1e-6),
    _m("latency_p50_us", "latency-p50", "P50 latency", "us", 1.0, "latency_p50_seconds", "seconds", 1e-6),
    _m("latency_p90_us", "latency-p90", "P90 latency", "us", 1.0, "latency_p90_seconds", "seconds", 1e-6),
    _m("latency_p99_us", "latency-p99", "P99 latency", "us", 1.0, "latency_p99_seconds", "seconds", 1e-6),
    _m("latency_p999_us", "latency-p999", "P99.9 latency", "us", 1.0, "latency_p999_seconds", "seconds", 1e-6),
    _m("jitter_ms", "jitter", "jitter", "ms", 1.0, "jitter_seconds", "seconds", 1e-3),
    _m("loss_pct", "loss", "loss", "%", 1.0, "loss_ratio", "ratio", 0.01),
    _m("retransmits", "retransmits", "TCP retransmits", "count", 1.0, "retransmits", "", 1.0),
    _m("cpu_total_pct", "cpu-total", "CPU busy share (whole machine or host)", "%", 1.0, "cpu_total_ratio",
       "ratio", 0.01),
    _m("cpu_client_pct", "cpu-client", "client tool CPU (% of one CPU)", "%", 1.0, "cpu_client_ratio", "ratio",
       0.01),
    _m("cpu_server_pct", "cpu-server", "server tool CPU (% of one CPU)", "%", 1.0, "cpu_server_ratio", "ratio",
       0.01),
    _m("cpu_sleeve_pct", "cpu-sleeve", "sleeve daemons' CPU (% of one CPU)", "%", 1.0, "cpu_sleeve_ratio",
       "ratio", 0.01),
    _m(CPU_PER_GBPS, "cpu-per-gbit", "CPU per Gbit/s of TCP throughput", "%/(Gbit/s)", 1.0,
       "cpu_seconds_per_gigabit", "", 0.01),
]}


def metric(name: str, unit: str | None = None) -> Metric:
    """The table's entry, or one made for a metric it does not know (a mode's own counters):
    its recorded unit, lower is better."""
    if name in METRICS:
        return METRICS[name]
    safe = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_") or "metric"
    return Metric(name, safe.replace("_", "-"), name, unit or "", 1.0, safe, "", 1.0, False)


@dataclasses.dataclass(frozen=True)
class Value:
    """One metric of one case, in the measurement's own unit."""

    metric: Metric
    median: float
    lo: float
    hi: float
    n: int
    pct_of_native: float | None
    unit: str = ""               # as measurements.jsonl records it


@dataclasses.dataclass(frozen=True)
class Case:
    name: str                    # mode/u…/o…/placement/test/p…[/pair], as measurements.jsonl names it
    config: dict[str, Any]       # CONFIG_KEY → value, plus datapath
    values: tuple[Value, ...]


@dataclasses.dataclass(frozen=True)
class Export:
    run_id: str
    meta: dict[str, Any]
    cases: tuple[Case, ...]


def _case_name(c: dict[str, Any]) -> str:
    name = f"{c['mode']}/u{c['underlay_mtu']}/o{c['overlay_mtu']}/{c['placement']}/{c['test']}/p{c['streams']}"
    return name + (f"/{c['pair']}" if c.get("pair") is not None else "")


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load(run: pathlib.Path | str) -> Export:
    """The run's cases with their metrics, in table order; HarnessError when it has none."""
    path = results.resolve_run(run)
    meta = results.read_meta(path)
    df = results.load(path)
    summary = stats.with_native(stats.summarize(df))
    cpu = stats.cpu_per_gbps(df, TCP_BW_TESTS)
    if not cpu.empty:
        g = cpu.groupby(stats.CONFIG_KEY, dropna=False, sort=False)["cpu_per_gbps"]
        extra = g.agg(n="count", median="median", min="min", max="max").reset_index()
        extra["metric"], extra["unit"] = CPU_PER_GBPS, "%/(Gbit/s)"
        nat = {tuple(stats.key_value(r[c]) for c in ("underlay_mtu", "placement", "test", "streams", "pair")):
               r["median"] for r in extra.to_dict("records") if r["mode"] == stats.NATIVE}
        extra["native"] = [nat.get((stats.key_value(r["underlay_mtu"]), r["placement"], r["test"],
                                    stats.key_value(r["streams"]), stats.key_value(r["pair"])))
                           or nat.get((stats.key_value(r["underlay_mtu"]), "host-host", r["test"],
                                       stats.key_value(r["streams"]), stats.key_value(r["pair"])))
                           for r in extra.to_dict("records")]
        extra["pct_of_native"] = [100 * m / n if n else None for m, n in zip(extra["median"], extra["native"])]
    datapaths = {}
    names = {}
    for r in stats.ok_rows(df).to_dict("records"):
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY)
        datapaths.setdefault(k, r.get("datapath"))
        names.setdefault(k, r.get("case"))
    by_case: dict[tuple, list[Value]] = {}
    rows = summary.to_dict("records") + (extra.to_dict("records") if not cpu.empty else [])
    for r in rows:
        k = tuple(stats.key_value(r[c]) for c in stats.CONFIG_KEY)
        med, lo, hi = _num(r["median"]), _num(r["min"]), _num(r["max"])
        if med is None or lo is None or hi is None:
            continue
        unit = r.get("unit") if isinstance(r.get("unit"), str) else ""
        by_case.setdefault(k, []).append(Value(metric(r["metric"], unit), med, lo, hi, int(r["n"]),
                                               _num(r.get("pct_of_native")), unit))
    if not by_case:
        raise HarnessError(f"{path}: no successful measurements to export")
    cases = []
    for k, values in by_case.items():
        config = dict(zip(stats.CONFIG_KEY, k))
        config["datapath"] = datapaths.get(k) or config["mode"]
        name = names.get(k) if isinstance(names.get(k), str) else None
        cases.append(Case(name or _case_name(config), config, tuple(values)))
    return Export(str(meta.get("run_id") or path.name), meta, tuple(cases))


LABELS = ["mode", "datapath", "underlay_mtu", "overlay_mtu", "placement", "test", "streams", "pair"]


def labels(case: Case) -> dict[str, str]:
    """The case's labels, as strings; an absent pair is left out."""
    return {k: str(case.config[k]) for k in LABELS if case.config.get(k) is not None}
