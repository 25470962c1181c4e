"""Text of the summary table: number formats, its cells and columns, and `show`'s output formats.

Every column's title, digits and range come from `summary.COLUMNS`; the HTML report
shares `table_columns`, `table_cells` and `table_notes`.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from harness.analysis.fleet import zones_of
from harness.analysis.stats import has_pairs, join_unique, key_value
from harness.analysis.summary import (
    BOUND,
    BY_KEY,
    COLUMNS,
    SUMMARY_COLUMNS,
    Column,
    has_data,
    missing_columns,
    pct_higher_is_better,
    summary_table,
)
from harness.core import metrics
from harness.core.errors import HarnessError
from harness.results import FIELDS

TABLE_HEADERS = [(c.key, c.title) for c in COLUMNS if not c.hidden]
# % of native columns: True where above 100 is better (throughput), False for latencies.
PCT_CELLS = {c.key: pct_higher_is_better(c) for c in COLUMNS if c.kind == "pct"}
TEXT_CELLS = {"mode", "datapath", "placement"}


# --------------------------------------------------------------------------- numbers

fmt_num = metrics.fmt_num


def fmt_compact(v: Any, digits: int = 3) -> str:
    """fmt_num without trailing zeros: 5 → "5", 52.30 → "52.3"; "—" for missing."""
    s = fmt_num(v, digits)
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def fmt_range(med: Any, lo: Any, hi: Any, digits: int = 3, fmt: Callable[..., str] | None = None) -> str:
    """"9.41 (9.38–9.45)"; just the median when min == max or they are missing.
    `fmt` formats each number (default fmt_num)."""
    fmt = fmt or fmt_num
    m = fmt(med, digits)
    if m == "—":
        return m
    lo_s, hi_s = fmt(lo, digits), fmt(hi, digits)
    if lo_s == "—" or hi_s == "—" or lo_s == hi_s:
        return m
    return f"{m} ({lo_s}–{hi_s})"


def fmt_pct(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "—"
    return "—" if not math.isfinite(x) else f"{x:.1f}"


def _fmt_int(v: Any) -> str:
    k = key_value(v)
    return "—" if k is None else str(k)


def fmt_ping_rtt(r: dict[str, Any]) -> str:
    """"52/61/90/7": medians of ping's min/avg/max/mdev, like its rtt line; "—" if none."""
    parts = [fmt_compact(r.get(c)) for c in ("ping_min_us", "ping_avg_us", "ping_max_us", "ping_mdev_us")]
    return "—" if all(p == "—" for p in parts) else "/".join(parts)


def number_format(col: Column) -> Callable[..., str]:
    return fmt_compact if col.compact else fmt_num


# --------------------------------------------------------------------------- cells and columns

def streams_vary(summary: pd.DataFrame) -> bool:
    s = pd.to_numeric(summary["streams"], errors="coerce").dropna()
    return s.nunique() > 1 or bool((s > 1).any())


def _has_cell_data(summary: pd.DataFrame, col: Column) -> bool:
    if col.shown_when_positive:
        v = pd.to_numeric(summary.get(col.field, pd.Series(dtype=float)), errors="coerce")
        return bool((v > 0).any())
    fields = ["ping_avg_us", *col.fields] if col.kind == "parts" else col.fields[:1]
    return any(has_data(summary, f) for f in fields)


def table_columns(summary: pd.DataFrame, show_streams: bool | None = None) -> list[tuple[str, str]]:
    """The TABLE_HEADERS entries worth showing for these summary rows: the config columns,
    Pair where the run has pairs, Streams when stream counts vary (`show_streams`
    overrides), Failed when a case failed, and each measurement column that has data in
    at least one row."""
    if show_streams is None:
        show_streams = streams_vary(summary)
    out = []
    for col in COLUMNS:
        if col.key == "streams":
            keep = show_streams
        elif col.key == "pair":
            keep = has_pairs(summary)
        elif col.kind == "failed":
            keep = bool(pd.to_numeric(summary["failed"], errors="coerce").fillna(0).astype(int).any())
        elif col.kind == "config":
            keep = True
        elif col.hidden:
            keep = False
        else:
            keep = _has_cell_data(summary, col)
        if keep:
            out.append((col.key, col.title))
    return out


def _cell(col: Column, r: dict[str, Any], all_ranges: bool, marks: bool = True) -> str:
    if col.kind == "config":
        v = r[col.key]
        if col.key in ("overlay_mtu", "streams"):
            return _fmt_int(v)
        return (v or "—") if col.key in ("datapath", "pair") else str(v)
    if col.kind == "failed":
        return str(int(r["failed"])) if r["failed"] else ""
    m = mark(r, col) if marks else ""
    if col.kind == "pct":
        return m + fmt_pct(r[col.field])
    if col.kind == "parts":
        return fmt_ping_rtt(r)
    f = col.field
    if col.ranged and (col.text_range or all_ranges):
        return m + fmt_range(r[f], r[f"{f}_min"], r[f"{f}_max"], col.digits, fmt=number_format(col))
    return m + number_format(col)(r[f], col.digits)


ND_MARK = "≈"
ND_NOTE = (f"{ND_MARK}: not distinguishable from native in this run: the repeats' ranges overlap with "
           "native's (or a side has a single repeat).")


SENDER_MARK = "†"
SENDER_NOTE = (f"{SENDER_MARK}: sender-bound: in some repeats the generator (blast), not the path, set "
               "the rate (it fell short of the rate asked, or nothing was lost while it ran, or waited for a CPU to "
               "run, all the window); "
               "a path's rate is then at least the figure, and a % of such a native figure at most the ratio.")


def mark(r: dict[str, Any], col: Column) -> str:
    """"≈ " before a judged cell whose repeats are not distinct from native's (analysis/native.py);
    "† " before a rate (and its % of native) that the sender set in some repeat."""
    nd = f"{ND_MARK} " if col.judged and r.get(col.distinct_field) is False else ""
    return sender_mark(r, col) + nd


def sender_mark(r: dict[str, Any], col: Column) -> str:
    rate = BY_KEY.get(col.of) if col.kind == "pct" else col
    bound = r.get(f"{rate.field}{BOUND}") if rate is not None and rate.field else None
    try:
        return f"{SENDER_MARK} " if bound is not None and float(bound) > 0 else ""
    except (TypeError, ValueError):
        return ""


def table_cells(summary: pd.DataFrame, all_ranges: bool = True, marks: bool = True) -> list[dict[str, str]]:
    """Each summary row as display strings keyed like TABLE_HEADERS (shared with the report).

    Throughputs, latencies and ping avg always carry their min–max; the UDP loss and
    jitter and the CPU columns only when `all_ranges`. A judged cell not distinct from native
    starts with "≈ " unless `marks` is off (the report marks it itself). A TCP throughput taken from
    qperf.tcp_bw where the run has iperf3.tcp elsewhere is marked with "*".
    """
    main_test = summary["tcp_test"].dropna().mode()
    main_test = main_test.iloc[0] if len(main_test) else None
    cells = []
    for r in summary.to_dict("records"):
        r = {**{c: None for c in SUMMARY_COLUMNS}, **r}
        c = {col.key: _cell(col, r, all_ranges, marks) for col in COLUMNS}
        if r["tcp_test"] and main_test and r["tcp_test"] != main_test:
            c["tcp"] += "*"
        c["tcp_test"] = r["tcp_test"] or ""
        c["udp_test"] = r["udp_test"] if isinstance(r["udp_test"], str) else ""
        cells.append(c)
    return cells


def table_notes(keys: Iterable[str]) -> list[str]:
    """What the shown columns mean (shared by the text table's footer and the report)."""
    keys = set(keys)
    notes = []
    ranged = [c.title.split(" (")[0] for c in COLUMNS if c.key in keys and c.ranged and c.text_range]
    if ranged:
        notes.append(f"{', '.join(ranged)}: median (min–max) over repeats; other columns: medians.")
    pcts = [t for k, t in TABLE_HEADERS if k in PCT_CELLS and k in keys]
    if pcts:
        lower = [t for k, t in TABLE_HEADERS if k in keys and PCT_CELLS.get(k) is False]
        notes.append(f"{', '.join(pcts)}: % of native at the same underlay MTU, test and streams"
                     + (f" ({', '.join(lower)}: above 100 is slower)." if lower else "."))
    if "ping_rtt" in keys:
        notes.append("Ping min/avg/max/mdev: medians over repeats of each ping.flood rtt summary.")
    lat = [t.split(" (")[0] for k, t in TABLE_HEADERS if k in keys and k in ("lat", "udp_lat", "p99", "tcp_p99")]
    if lat:
        notes.append(f"{', '.join(lat)}: one-way latency (half the round trip qperf or sockperf timed); "
                     "ping, UDP RTT and the loaded figures are round trips.")
    if "cpu" in keys:
        notes.append("CPU s/Gbit: CPU-seconds spent per gigabit of TCP throughput (the CPU share × the CPUs "
                     "it is a share of ÷ Gbit/s).")
    return notes


# --------------------------------------------------------------------------- whole tables

def format_table(df: pd.DataFrame) -> str:
    """The summary as plain-text, pipe-aligned tables (valid markdown), one per underlay MTU.

    Accepts `summary_table` output, or a measurements frame (it is summarized first).
    Each table has the measurement columns that have data at that underlay MTU (see
    `table_columns`); values are "median (min–max)" over repeats, % columns are % of native.
    """
    summary = summary_table(df) if "metric" in df.columns else df
    if summary.empty:
        return "No measurements."
    show_streams = streams_vary(summary)
    numeric = {k for k, _ in TABLE_HEADERS} - TEXT_CELLS
    blocks, shown = [], set()
    for mtu, part in summary.groupby("underlay_mtu", dropna=False, sort=False):
        headers = table_columns(part, show_streams)
        shown |= {k for k, _ in headers}
        rate = join_unique(part["rate"])
        title = f"Underlay MTU {_fmt_int(mtu)}" + (f", rate {rate}" if rate else "")
        cells = table_cells(part, all_ranges=False)
        width = {k: max(len(t), *(len(c[k]) for c in cells)) for k, t in headers}

        def line(values: dict[str, str]) -> str:
            return " | ".join(values[k].rjust(width[k]) if k in numeric else values[k].ljust(width[k])
                              for k, _ in headers).rstrip()

        lines = [title, "", line({k: t for k, t in headers}),
                 " | ".join("-" * width[k] for k, _ in headers)]
        lines += [line(c) for c in cells]
        blocks.append("\n".join(lines))
    notes = missing_columns(summary)
    text = "\n\n".join(blocks)
    answers = mode_answers(summary)
    if answers:
        text += "\n\n" + "\n".join(answers)
    footer = table_notes(shown)
    records = summary.to_dict("records")
    if any(ND_MARK in mark(r, col) for r in records for col in COLUMNS if col.judged):
        footer.append(ND_NOTE)
    if any(sender_mark(r, col) for r in records for col in COLUMNS if col.key in shown):
        footer.append(SENDER_NOTE)
    if "tcp" in shown and any(c["tcp"].endswith("*") for c in table_cells(summary)):
        footer.append("* TCP BW from qperf.tcp_bw: this config has no iperf3.tcp result.")
    if notes:
        footer.append("No data: " + "; ".join(notes) + ".")
    if footer:
        text += "\n\n" + "\n".join(footer)
    return text


def _span(values: list[float], fmt: Callable[[float], str]) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _judged_text(rows: list[dict[str, Any]], col: Column, fmt: Callable[[float], str], unit: str) -> str | None:
    """One figure for a mode at one underlay MTU: the span of its distinct cells, or ≈ native."""
    cells = [(float(r[col.field]), r.get(col.distinct_field)) for r in rows
             if isinstance(r.get(col.field), (int, float)) and math.isfinite(float(r[col.field]))]
    if not cells:
        return None
    distinct = [v for v, d in cells if d is not False]
    if not distinct:
        return f"{ND_MARK} (ranges overlap)"
    some = " (some ≈)" if len(distinct) < len(cells) else ""
    return f"{_span(distinct, fmt)}{unit}{some}"


def mode_answers(summary: pd.DataFrame) -> list[str]:
    """One line per mode: its TCP throughput and latency against native at each underlay MTU (a
    span over its placements; ≈ where the repeats cannot tell it from native), so that what the
    MTU moved reads across the line."""
    by = {c.key: c for c in COLUMNS}
    lines = []
    rows = [r for r in summary.to_dict("records") if r.get("mode") != "native"]
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    mtus = list(dict.fromkeys(key_value(r["underlay_mtu"]) for r in summary.to_dict("records")))
    for mode in modes:
        parts = []
        for what, col, fmt, unit in (("TCP throughput", by["bw_pct"], lambda v: f"{v:.0f}", " % of native"),
                                     ("TCP latency", by["lat_pct"], lambda v: fmt_num(v / 100, 2), "× native's")):
            per = []
            for u in mtus:
                text = _judged_text([r for r in rows if r["mode"] == mode and key_value(r["underlay_mtu"]) == u],
                                    col, fmt, unit)
                if text is not None:
                    per.append(text + (f" at MTU {u}" if len(mtus) > 1 else ""))
            if per:
                parts.append(f"{what} {', '.join(per)}")
        if parts:
            lines.append(f"{mode}: {'; '.join(parts)}.")
    return lines


def run_notes(meta: dict) -> list[str]:
    """What the figures were measured under, for the table's footer: where the hosts' processes
    ran (run.json's testbed `cpus`: the lab's placement, or real hosts pinned), the zones of a
    cluster's nodes (the pairs' labels name the nodes) and how idle CPUs waited (`cpu_idle`)."""
    notes = []
    scenario = meta.get("scenario") if isinstance(meta.get("scenario"), dict) else {}
    repeats, duration = scenario.get("repeats"), scenario.get("duration")
    if isinstance(repeats, int) and isinstance(duration, (int, float)):
        notes.append(f"Each case: {repeats} repeat{'s' if repeats != 1 else ''} of {fmt_compact(duration)} s, "
                     "modes interleaved within each repeat.")
    testbed = meta.get("testbed") or {}
    cpus = testbed.get("cpus")
    if isinstance(cpus, dict) and cpus.get("policy") == "given":
        names = testbed.get("hosts") if isinstance(testbed.get("hosts"), dict) else {}
        where = ", ".join(f"{(names.get(h) or {}).get('name') or h} "
                          f"{'unpinned' if c == 'unpinned' else f'on CPU {c}'}"
                          for h, c in (cpus.get("hosts") or {}).items())
        notes.append(f"CPUs: each host's tools and daemons pinned with taskset as given ({where}).")
    elif isinstance(cpus, dict) and cpus.get("policy") == "scheduler":
        notes.append("CPUs: the lab's hosts shared this machine's CPUs as the scheduler put them.")
    elif isinstance(cpus, dict) and cpus.get("policy") == "own":
        where = ", ".join(f"{h} on CPU {c}" for h, c in (cpus.get("hosts") or {}).items())
        notes.append(f"CPUs: more lab hosts than CPUs, shared round-robin ({where})." if cpus.get("shared")
                     else f"CPUs: each lab host on CPUs of its own ({where}).")
    zones = zones_of(meta)
    if zones:
        notes.append("Zones: " + ", ".join(f"{h} {z}" for h, z in zones.items()) + ".")
    idle = meta.get("cpu_idle")
    if idle == "poll-latency":
        notes.append("Idle CPUs polled while latency tests ran (no mode's latency includes waking a halted "
                     "CPU) and halted otherwise.")
    elif idle == "poll":
        notes.append("Idle CPUs polled (--poll-idle): no wake-up from a halted CPU in any mode's latency.")
    elif idle == "default":
        notes.append("Idle CPUs halted (the default): a latency includes waking the receiver's CPU.")
    return notes


def json_value(v: Any) -> Any:
    """A value as JSON wants it: NaN and pandas' missing markers → None, numpy → Python."""
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if v is not None and not isinstance(v, (str, int, bool, list, dict)) and pd.isna(v):
        return None
    return v


def frame_as(frame: pd.DataFrame, fmt: str) -> str:
    """A frame as CSV or as a JSON list of records (NaN → null)."""
    if fmt == "csv":
        buf = io.StringIO()
        frame.to_csv(buf, index=False, float_format="%.6g")
        return buf.getvalue().rstrip("\n")
    records = [{k: json_value(v) for k, v in r.items()} for r in frame.to_dict("records")]
    return json.dumps(records, indent=2)


def format_summary(df: pd.DataFrame, fmt: str = "table") -> str:
    """What `overlaybench show RUN --format table|csv|json` prints, from a measurements frame."""
    if fmt not in ("table", "csv", "json"):
        raise HarnessError(f"unknown format {fmt!r}: use table, csv or json")
    summary = summary_table(df)
    return format_table(summary) if fmt == "table" else frame_as(summary, fmt)


RAW_COLUMNS = FIELDS + ["rate"]


def format_raw(df: pd.DataFrame, fmt: str = "csv") -> str:
    """Every measurement line, `overlaybench show RUN --raw --format csv|json`: one row per
    metric per repeat, failed cases included (metric "failed", ok false, the reason in
    error). JSON keeps each throughput's per-second intervals; CSV leaves them out."""
    if fmt not in ("csv", "json"):
        raise HarnessError(f"--raw prints every measurement as csv or json, not {fmt!r}")
    cols = RAW_COLUMNS + (["intervals"] if fmt == "json" and "intervals" in df.columns else [])
    frame = df.reindex(columns=cols)
    return frame_as(frame, fmt)
