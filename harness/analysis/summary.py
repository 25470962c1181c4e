"""The seed-style summary table: one row per configuration, its columns defined once in COLUMNS.

One row per (underlay MTU, mode, overlay MTU, placement[, pair][, streams]): TCP throughput
(iperf3.tcp, else qperf.tcp_bw), TCP latency (qperf.tcp_lat), BW % and Lat % of native,
UDP throughput, loss and jitter (iperf3.udp, else qperf.udp_bw), UDP latency
(qperf.udp_lat), ping RTT (ping.flood: avg, and the min/max/mdev of each run's rtt line),
P99 latency (sockperf.pingpong, and sockperf.pingpong_tcp in a column of its own), the packet rate at each payload size (iperf3.ppsN),
the P99 latency under a working load, what the load added to it and the load's throughput
(load.sockperf, else load.irtt; load.bounceback's in columns of their own), the
connection rate with its % of native, connect P99 and failures (iperf.crr), the loss
knee at each sweep's payload size (iperf3.udp_sweepN), the
isochronous UDP round trip's P99 and the probe's loss (irtt.udp),
the per-stream throughput and Jain's fairness index of the TCP throughput test at the row's
stream count, CPU per gigabit, each a median over repeats with its min–max, and a % of
native for every throughput, rate and latency. Whichever of these a run did not measure stays empty; the text
table (`tablefmt`) and the report leave such columns out.

COLUMNS is the one list both the numbers and their display come from: each entry says
which tests and metric fill it, which summary fields it owns, its title, and how it is
shown. The DataFrame's columns (SUMMARY_COLUMNS) are the row fields followed by every
column's fields in display order.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import pandas as pd

from harness.analysis.stats import (
    CONFIG_KEY,
    TCP_BW_TESTS,
    cpu_per_gbit,
    ensure_columns,
    failures,
    higher_is_better,
    join_unique,
    key_value,
    looks_of,
    sort_configs,
    summarize,
    truthy,
    with_native,
)
from harness.analysis.native import distinct_from_native, native_repeats, repeat_values, with_verdict
from harness.core import metrics
from harness.core.looks import Looks
from harness.core.metrics import CPU_PER_GBIT
from harness.tools import TOOLS
from harness.tools.base import PER_STREAM_METRIC
from harness.tools.blast import BlastPps
from harness.tools.iperf3 import Iperf3Pps
from harness.tools.ndr import BlastSearch
from harness.tools.sweep import Iperf3Sweep

TCP_LAT_TESTS = ("qperf.tcp_lat",)
UDP_TESTS = ("iperf3.udp", "qperf.udp_bw")
UDP_LAT_TESTS = ("qperf.udp_lat",)
PING_TESTS = ("ping.flood",)
TAIL_TESTS = ("sockperf.pingpong", "sockperf.pingpong_tcp")     # UDP, TCP: a column each
# The packet-rate tests (a fixed UDP payload each), smallest payload first.
PPS_TESTS = tuple(sorted((t for t in TOOLS.values() if isinstance(t, Iperf3Pps)), key=lambda t: t.payload))
# blast's packet rates and rate searches (tools/blast.py, tools/ndr.py), smallest payload first
BLAST_TESTS = tuple(sorted((t for t in TOOLS.values() if isinstance(t, BlastPps)), key=lambda t: (t.packet, t.payload)))
SEARCH_TESTS = tuple(sorted((t for t in TOOLS.values() if isinstance(t, BlastSearch)),
                            key=lambda t: (t.payload, t.kind)))
BOUND = "_sender_bound"               # a rate column's field + this: the share of repeats the sender set
# latency under load, the fine probes finest first: sockperf's ping-pong every 100 µs, irtt's 1 ms probe
LOAD_TESTS = ("load.sockperf", "load.irtt")
BOUNCEBACK_TESTS = ("load.bounceback",)  # iperf 2's bounceback: its percentiles are 100 µs bin edges
CRR_TESTS = ("iperf.crr",)
PROBE_TESTS = ("irtt.udp",)
# The UDP sweeps (a payload size each), smallest first: a knee column each.
SWEEP_TESTS = tuple(sorted((t for t in TOOLS.values() if isinstance(t, Iperf3Sweep)), key=lambda t: t.payload))

ROW_KEY = ["underlay_mtu", "mode", "overlay_mtu", "placement", "pair"]


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the summary table.

    kind: "config" (a row field), "value" (a median over repeats of `metric` from the
    first of `tests` present), "pct" (the % of native of the value column `of`), "parts"
    (medians of several metrics in one cell: `parts` = (field, metric) pairs), "cpu" (CPU
    per Gbit/s of the TCP throughput test) or "failed".
    """

    key: str                          # cell key (text table, report)
    title: str
    kind: str = "value"
    field: str | None = None          # the summary field holding the median
    tests: tuple[str, ...] = ()
    metric: str | None = None
    scale: float = 1.0                # e.g. 1e-9: bits/s → Gbit/s
    ranged: bool = False              # field_min and field_max too
    text_range: bool = True           # the text table shows the min–max (else only the report)
    digits: int = 3
    compact: bool = False             # no trailing zeros (fmt_compact)
    test_field: str | None = None     # records which test filled it (tcp_test, udp_test)
    of: str | None = None             # pct: the value column's key
    what: str = ""                    # value: what it measures, for "no native … to compare with"
    parts: tuple[tuple[str, str], ...] = ()
    shown_when_positive: bool = False  # shown only when some row is above 0 (ping loss)
    by_streams: bool = False          # matched on the row's stream count (per-stream figures)
    hidden: bool = False              # data only (exports), never a column of the text table

    @property
    def fields(self) -> list[str]:
        """The summary fields this column owns, in order."""
        if self.kind == "parts":
            return [f for f, _ in self.parts]
        if self.field is None:
            return []
        return ([self.field] + ([f"{self.field}_min", f"{self.field}_max"] if self.ranged else [])
                + ([self.distinct_field] if self.judged else []))

    @property
    def judged(self) -> bool:
        """Whether its cells carry the verdict against native (a % of native, CPU per gigabit)."""
        return self.kind in ("pct", "cpu")

    @property
    def distinct_field(self) -> str:
        """The field holding the verdict: True distinct from native, False not (≈), empty: no verdict."""
        return f"{self.field}_distinct"


def valued(key: str, label: str, *, metric: str, **kw) -> Column:
    """A value column whose unit and scale are the metric table's: "TCP BW (Gbit/s)"."""
    m = metrics.of(metric)
    return Column(key, f"{label} ({m.unit})" if m.unit else label, metric=metric, scale=m.scale, **kw)


def _rate_columns(t) -> tuple[Column, ...]:
    """A blast test's rate (udp_ppsN, pkt_ppsN, ndrN, pdrN), its % of native, and (hidden) the
    share of its repeats whose sender set the rate, which marks the rate's cells (tablefmt's
    SENDER_MARK)."""
    kind = t.kind if isinstance(t, BlastSearch) else "pkt_pps" if t.packet else "udp_pps"
    rate = kind.endswith("_pps")
    key, metric = f"{kind}{t.payload}", "pps" if rate else f"{kind}_pps"
    label = {"udp_pps": "UDP Mpps", "pkt_pps": "PKT Mpps", "ndr": "NDR Mpps", "pdr": "PDR Mpps"}[kind]
    field = f"{kind.replace('pps', 'mpps') if rate else kind + '_mpps'}_{t.payload}"
    what = f"{t.payload}-byte " + ("blast packet rate" if kind == "udp_pps" else
                                   "blast packet rate through a packet socket" if rate else kind.upper())
    return (Column(key, f"{label} {t.payload} B", field=field, tests=(t.name,), metric=metric,
                   scale=metrics.of(metric).scale, ranged=True, text_range=False, what=what),
            Column(f"{key}_pct", f"{label.split()[0]} {t.payload} B %", kind="pct", field=f"{field}_pct", of=key),
            Column(f"{key}_bound", f"{label.split()[0]} {t.payload} B sender-bound", field=field + BOUND,
                   tests=(t.name,), metric="sender_bound", hidden=True))


COLUMNS: list[Column] = [
    Column("mode", "Mode", kind="config"),
    Column("overlay_mtu", "Overlay MTU", kind="config"),
    Column("datapath", "Datapath", kind="config"),
    Column("placement", "Placement", kind="config"),
    Column("pair", "Pair", kind="config"),
    Column("streams", "Streams", kind="config"),
    valued("tcp", "TCP BW", field="tcp_gbps", tests=TCP_BW_TESTS, metric="throughput_bps",
           ranged=True, test_field="tcp_test", what="TCP throughput"),
    valued("lat", "TCP Lat", field="tcp_lat_us", tests=TCP_LAT_TESTS, metric="latency_us", ranged=True,
           what="TCP latency"),
    Column("bw_pct", "BW %", kind="pct", field="bw_pct", of="tcp"),
    Column("lat_pct", "Lat %", kind="pct", field="lat_pct", of="lat"),
    valued("udp_bw", "UDP BW", field="udp_gbps", tests=UDP_TESTS, metric="throughput_bps",
           ranged=True, test_field="udp_test", what="UDP throughput"),
    Column("udp_bw_pct", "UDP BW %", kind="pct", field="udp_bw_pct", of="udp_bw"),
    Column("loss", "UDP loss %", field="udp_loss_pct", tests=UDP_TESTS, metric="loss_pct", ranged=True,
           text_range=False, digits=2),
    valued("jitter", "UDP jitter", field="udp_jitter_ms", tests=UDP_TESTS, metric="jitter_ms", ranged=True,
           text_range=False, digits=2),
    valued("udp_lat", "UDP Lat", field="udp_lat_us", tests=UDP_LAT_TESTS, metric="latency_us", ranged=True,
           what="UDP latency"),
    Column("udp_lat_pct", "UDP Lat %", kind="pct", field="udp_lat_pct", of="udp_lat"),
    valued("ping", "Ping avg", field="ping_avg_us", tests=PING_TESTS, metric="latency_us", ranged=True,
           compact=True, what="ping"),
    Column("ping_pct", "Ping %", kind="pct", field="ping_pct", of="ping"),
    Column("ping_rtt", "Ping min/avg/max/mdev (µs)", kind="parts", tests=PING_TESTS,
           parts=(("ping_min_us", "latency_min_us"), ("ping_max_us", "latency_max_us"),
                  ("ping_mdev_us", "latency_mdev_us"))),
    Column("ping_loss", "Ping loss %", field="ping_loss_pct", tests=PING_TESTS, metric="loss_pct", digits=2,
           shown_when_positive=True),
    valued("p99", "P99 Lat", field="p99_lat_us", tests=TAIL_TESTS[:1], metric="latency_p99_us", ranged=True,
           text_range=False, what="P99 latency"),
    Column("p99_pct", "P99 %", kind="pct", field="p99_pct", of="p99"),
    valued("tcp_p99", "TCP P99 Lat", field="tcp_p99_lat_us", tests=TAIL_TESTS[1:], metric="latency_p99_us",
           ranged=True, text_range=False, what="TCP P99 latency"),
    Column("tcp_p99_pct", "TCP P99 %", kind="pct", field="tcp_p99_pct", of="tcp_p99"),
    *(c for t in PPS_TESTS for c in (
        Column(f"pps{t.payload}", f"Mpps {t.payload} B", field=f"mpps_{t.payload}", tests=(t.name,),
               metric="pps", scale=metrics.of("pps").scale, ranged=True, text_range=False,
               what=f"{t.payload}-byte packet rate"),
        Column(f"pps{t.payload}_pct", f"pps {t.payload} B %", kind="pct", field=f"pps_{t.payload}_pct",
               of=f"pps{t.payload}"))),
    *(c for t in BLAST_TESTS + SEARCH_TESTS for c in _rate_columns(t)),
    valued("rtt_load_p99", "Loaded P99", field="rtt_loaded_p99_us", tests=LOAD_TESTS, metric="rtt_loaded_p99_us",
           ranged=True, text_range=False, compact=True, what="P99 latency under load"),
    valued("rtt_added_p99", "Added P99", field="rtt_added_p99_us", tests=LOAD_TESTS, metric="rtt_added_p99_us",
           ranged=True, text_range=False, compact=True),
    valued("rtt_load_bw", "Load", field="rtt_load_gbps", tests=LOAD_TESTS, metric="load_throughput_bps",
           ranged=True, text_range=False),
    valued("load_p99", "BB loaded P99", field="lat_loaded_p99_us", tests=BOUNCEBACK_TESTS,
           metric="lat_loaded_p99_us", ranged=True, text_range=False, compact=True,
           what="bounceback P99 latency under load"),
    valued("added_p99", "BB added P99", field="lat_added_p99_us", tests=BOUNCEBACK_TESTS, metric="lat_added_p99_us",
           ranged=True, text_range=False, compact=True),
    valued("load_bw", "BB load", field="load_gbps", tests=BOUNCEBACK_TESTS, metric="load_throughput_bps",
           ranged=True, text_range=False),
    valued("probe_p99", "UDP RTT P99", field="rtt_p99_us", tests=PROBE_TESTS, metric="rtt_p99_us", ranged=True,
           text_range=False, compact=True, what="UDP round-trip P99"),
    Column("probe_p99_pct", "UDP RTT P99 %", kind="pct", field="rtt_p99_pct", of="probe_p99"),
    Column("probe_loss", "UDP probe loss %", field="probe_loss_pct", tests=PROBE_TESTS, metric="probe_loss_pct",
           digits=2, shown_when_positive=True),
    Column("crr", "CRR conn/s", field="conn_per_s", tests=CRR_TESTS, metric="conn_per_s", ranged=True,
           text_range=False, digits=0, compact=True, what="connection rate"),
    Column("crr_pct", "CRR %", kind="pct", field="crr_pct", of="crr"),
    valued("connect_p99", "Connect P99", field="connect_p99_us", tests=CRR_TESTS, metric="connect_p99_us",
           ranged=True, text_range=False, compact=True),
    Column("conn_failed", "Conn failed", field="conn_failed", tests=CRR_TESTS, metric="conn_failed", digits=0,
           compact=True, shown_when_positive=True),
    *(valued(f"knee{t.payload}", f"Knee {t.payload} B", field=f"knee_{t.payload}_mbps", tests=(t.name,),
             metric="knee_bps", ranged=True, text_range=False, digits=1, compact=True,
             what=f"{t.payload}-byte loss knee")
      for t in SWEEP_TESTS),
    valued("stream", "Per-stream", field="stream_gbps", tests=TCP_BW_TESTS,
           metric=PER_STREAM_METRIC, ranged=True, text_range=False, by_streams=True),
    Column("jain", "Jain", field="jain", tests=TCP_BW_TESTS, metric="fairness_jain", by_streams=True),
    Column("cpu", "CPU s/Gbit", kind="cpu", field=CPU_PER_GBIT, ranged=True, text_range=False),
    Column("failed", "Failed", kind="failed"),
]
BY_KEY = {c.key: c for c in COLUMNS}
ROW_TCP = BY_KEY["tcp"]               # its stream counts make the rows
BY_STREAMS = {c.key for c in COLUMNS if c.by_streams}

ROW_FIELDS = ["underlay_mtu", "rate", "mode", "overlay_mtu", "datapath", "placement", "pair", "streams", "repeats",
              "failed"]
TEST_FIELDS = [c.test_field for c in COLUMNS if c.test_field]
SUMMARY_COLUMNS = ROW_FIELDS + TEST_FIELDS + [f for c in COLUMNS for f in c.fields]
DISTINCT_FIELDS = [c.distinct_field for c in COLUMNS if c.judged]
_NOT_FLOAT = set(ROW_FIELDS) | set(TEST_FIELDS) | set(DISTINCT_FIELDS)


def pct_higher_is_better(col: Column) -> bool:
    """For a % of native column: is above 100 better (throughput) or worse (latency)?"""
    return higher_is_better(BY_KEY[col.of].metric or "")


def has_data(summary: pd.DataFrame, field: str) -> bool:
    return field in summary.columns and bool(pd.to_numeric(summary[field], errors="coerce").notna().any())


def _pick(s: pd.DataFrame, tests: Sequence[str], metric: str) -> pd.DataFrame:
    """Summary rows of `metric` from the first of `tests` present per config, others dropped."""
    sub = s[(s["metric"] == metric) & s["test"].isin(list(tests))]
    if sub.empty:
        return sub
    rank = sub["test"].map({t: i for i, t in enumerate(tests)})
    sub = sub.assign(_rank=rank)
    keys = ["underlay_mtu", "mode", "overlay_mtu", "placement", "pair", "streams"]
    best = sub.groupby(keys, dropna=False)["_rank"].transform("min")
    return sub[sub["_rank"] == best].drop(columns="_rank")


def _by_row(frame: pd.DataFrame, per_streams: bool) -> dict:
    """Row key → the summary row of the lowest stream count (or → {streams: row})."""
    out: dict = {}
    if frame.empty:
        return out
    frame = frame.assign(_s=pd.to_numeric(frame["streams"], errors="coerce"))
    frame = frame.sort_values("_s", na_position="last", kind="stable")
    for r in frame.to_dict("records"):
        k = tuple(key_value(r[c]) for c in ROW_KEY)
        if per_streams:
            out.setdefault(k, {})[key_value(r["streams"])] = r
        else:
            out.setdefault(k, r)
    return out


def _cpu_by(df: pd.DataFrame) -> dict:
    """(row key…, test, streams) → (the per-repeat CPU per gigabit of that TCP throughput test,
    its verdict against native's)."""
    cpu = cpu_per_gbit(df, TCP_BW_TESTS)
    values = repeat_values(df)
    refs = native_repeats(values)
    out: dict = {}
    for k, g in cpu.groupby(CONFIG_KEY, dropna=False):
        k = tuple(key_value(x) for x in k)
        d = dict(zip(CONFIG_KEY, k))
        out[tuple(d[c] for c in ROW_KEY + ["test", "streams"])] = (
            g[CPU_PER_GBIT], distinct_from_native(refs, values, k + (CPU_PER_GBIT,)))
    return out


def _row_info(df: pd.DataFrame) -> tuple[dict, dict]:
    """Every row key seen in the run, ok or failed, with its datapaths, rates and repeats;
    and the number of failed (config, repeat)s per row key."""
    info: dict = {}
    for r in df.to_dict("records"):
        if r.get("mode") is None:
            continue
        k = tuple(key_value(r.get(c)) for c in ROW_KEY)
        e = info.setdefault(k, {"datapath": [], "rate": [], "repeats": set()})
        e["datapath"].append(r.get("datapath"))
        e["rate"].append(r.get("rate"))
        if truthy(r.get("ok")) and r.get("metric") != "failed":
            e["repeats"].add(key_value(r.get("repeat")))
    nfail: dict = {}
    for r in failures(df).to_dict("records"):
        k = tuple(key_value(r[c]) for c in ROW_KEY)
        nfail[k] = nfail.get(k, 0) + 1
    return info, nfail


def _fill(row: dict, col: Column, src: dict | None, sources: dict) -> None:
    """Put one column's numbers from its source summary row(s) into `row`."""
    if col.kind == "value" and src is not None:
        row[col.field] = src["median"] * col.scale
        if col.ranged:
            row[f"{col.field}_min"], row[f"{col.field}_max"] = src["min"] * col.scale, src["max"] * col.scale
        if col.test_field:
            row[col.test_field] = src["test"]
    elif col.kind == "pct" and src is not None:
        row[col.field] = src["pct_of_native"]
        row[col.distinct_field] = src["distinct"]
    elif col.kind == "parts":
        for field, metric in col.parts:
            part = sources.get((col.key, metric))
            if part is not None:
                row[field] = part["median"]


def summary_table(df: pd.DataFrame, looks: Looks | None = None) -> pd.DataFrame:
    """The seed's table as a DataFrame, one row per (underlay MTU, mode, overlay MTU,
    placement, streams of the TCP throughput test). See COLUMNS and the module doc. Rows
    in table order, modes as `looks` place them (default: the run's own, as results.load
    put them in `df`: stats.looks_of).

    Latency, UDP, ping, packet-rate and CPU columns come from their own tests; they are
    matched on (underlay MTU, mode, overlay MTU, placement) and, where several stream counts
    exist, the lowest. The per-stream columns (`by_streams`) are matched on the row's own
    stream count. Ping: `ping_avg_us` is the median (min–max) over repeats of each run's
    avg RTT, ping_min/max/mdev_us the medians of each run's min, max and mdev.
    Configs whose every case failed still get a row (empty values, `failed` counts them).
    """
    df = ensure_columns(df, CONFIG_KEY + ["metric", "value", "ok", "repeat", "datapath", "rate", "error"])
    s = with_verdict(with_native(summarize(df)), df)
    picked: dict = {}
    for col in COLUMNS:
        if col.kind == "value":
            picked[col.key] = _by_row(_pick(s, col.tests, col.metric), per_streams=col is ROW_TCP or col.by_streams)
        elif col.kind == "parts":
            for _, metric in col.parts:
                picked[(col.key, metric)] = _by_row(_pick(s, col.tests, metric), per_streams=False)
    cpu_by = _cpu_by(df)
    info, nfail = _row_info(df)

    rows = []
    for k, e in info.items():
        for streams, tcp in (picked[ROW_TCP.key].get(k) or {None: None}).items():
            row: dict = dict(zip(ROW_KEY, k))
            row.update(datapath=join_unique(e["datapath"]), rate=join_unique(e["rate"]) or None,
                       streams=streams, repeats=len(e["repeats"]), failed=nfail.get(k, 0))
            sources = {key: (tcp if key == ROW_TCP.key else
                             (rows_of.get(k) or {}).get(streams) if key in BY_STREAMS else rows_of.get(k))
                       for key, rows_of in picked.items()}
            for col in COLUMNS:
                src = sources.get(col.of if col.kind == "pct" else col.key)
                _fill(row, col, src, sources)
            got = cpu_by.get((*k, tcp["test"], key_value(tcp["streams"]))) if tcp is not None else None
            if got is not None and len(got[0]):
                c, cpu_col = got[0], BY_KEY["cpu"]
                row.update({cpu_col.field: float(c.median()), f"{cpu_col.field}_min": float(c.min()),
                            f"{cpu_col.field}_max": float(c.max()), cpu_col.distinct_field: got[1]})
            rows.append(row)
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for c in SUMMARY_COLUMNS:
        if c not in _NOT_FLOAT:
            out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return sort_configs(out, looks_of(df) if looks is None else looks).reset_index(drop=True)


def missing_columns(summary: pd.DataFrame) -> list[str]:
    """Human notes on the core columns that have no data at all (and why that may be).

    Only what a reader of the seed's table would look for: TCP throughput; TCP latency
    when the run measured no latency of any kind (qperf.tcp_lat, qperf.udp_lat,
    ping.flood, sockperf); a % of native whose values exist but have no native reference; CPU per
    Gbit/s when there is TCP throughput but no CPU sample. Optional measurements nobody
    ran (UDP, ping) get no note: their columns are simply left out.
    """
    if summary.empty:
        return ["no measurements at all"]
    notes = []
    if not has_data(summary, "tcp_gbps"):
        notes.append("TCP throughput (no iperf3.tcp or qperf.tcp_bw measurements)")
    if not any(has_data(summary, c) for c in ("tcp_lat_us", "udp_lat_us", "ping_avg_us", "p99_lat_us")):
        notes.append("TCP latency (no qperf.tcp_lat measurements)")
    for pct in (c for c in COLUMNS if c.kind == "pct"):
        value = BY_KEY[pct.of]
        if has_data(summary, value.field) and not has_data(summary, pct.field):
            notes.append(f"{pct.title} of native (no native {value.what} to compare with)")
    if has_data(summary, "tcp_gbps") and not has_data(summary, BY_KEY["cpu"].field):
        notes.append("CPU per gigabit (no CPU samples alongside TCP throughput, or no CPU count in run.json)")
    return notes
