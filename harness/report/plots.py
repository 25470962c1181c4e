"""The report's figures: matplotlib (Agg, no pyplot state), returned as data: URIs.

Every function takes frames from harness.analysis.stats and returns a `Figure`-free result:
a `Plot` (title, data URI, caption) or None when the run has nothing to draw — the
report then says what is missing instead.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from harness.analysis import stats, summary as summ, tablefmt
from harness.core.looks import Looks
from harness.core.placements import REFERENCE, rank as placement_rank
from harness.report.style import HATCHES, INK, MUTED, Plot, figure, mode_color, styled, to_uri


def _series(summary: pd.DataFrame, looks: Looks) -> list[tuple]:
    """Distinct bar series: (mode, variant index) in mode order. A mode with several overlay
    MTUs or stream counts at one underlay MTU and placement gets one series per variant."""
    out: dict[tuple, None] = {}
    for _, g in summary.groupby(["underlay_mtu", "placement", "mode"], dropna=False, sort=False):
        g = stats.sort_configs(g, looks)
        for i in range(len(g)):
            out[(g["mode"].iloc[0], i)] = None
    return sorted(out, key=lambda s: (looks.rank(s[0]), s[1]))


def _variant_label(row: dict) -> str:
    s = stats.key_value(row.get("streams"))
    extra = f", {s} streams" if s and s != 1 else ""
    return f"{row['mode']} (overlay {stats.key_value(row['overlay_mtu'])}{extra})"


def _grouped_bars(summary: pd.DataFrame, col: str | list[tuple[str, str]], ylabel: str, title: str, caption: str,
                  looks: Looks, value_fmt=lambda v: tablefmt.fmt_num(v, 3)) -> Plot | None:
    """Bars per mode grouped by underlay MTU, one panel per placement. `col` is one summary
    column, or a list of (column, y label) drawn as one row of panels each (rows without
    data are left out; None when no row has any)."""
    specs = [(col, ylabel)] if isinstance(col, str) else list(col)
    specs = [(c, yl) for c, yl in specs if c in summary.columns and summary[c].notna().any()]
    if not specs:
        return None
    d_all = summary[summary[[c for c, _ in specs]].notna().any(axis=1)]
    placements = sorted(d_all["placement"].dropna().unique(), key=placement_rank)
    series = _series(d_all, looks)
    mtus = sorted(d_all["underlay_mtu"].dropna().unique())
    nbar = len(series)
    width = min(0.8 / max(nbar, 1), 0.22)
    panel_w = max(3.2, len(mtus) * (nbar * width + 0.5) * 1.6)
    row_h = 4.2 if len(specs) == 1 else 3.3
    fig = figure(min(13.5, 0.8 + panel_w * len(placements)), row_h * len(specs) + (0.4 if len(specs) > 1 else 0))
    grid = fig.subplots(len(specs), len(placements), sharey="row", squeeze=False)
    handles: dict[str, Any] = {}
    for axes, (col, ylabel) in zip(grid, specs):
        d = summary[summary[col].notna()]
        for ax, place in zip(axes, placements):
            dp = d[d["placement"] == place]
            for gi, mtu in enumerate(mtus):
                dm = stats.sort_configs(dp[dp["underlay_mtu"] == mtu], looks)
                if dm.empty:
                    continue
                if not (dm["mode"] == stats.NATIVE).any():
                    _native_line(ax, d, mtu, col, gi, nbar * width, looks)
                variants: dict[str, int] = {}
                for r in dm.to_dict("records"):
                    vi = variants.get(r["mode"], 0)
                    variants[r["mode"]] = vi + 1
                    si = series.index((r["mode"], vi)) if (r["mode"], vi) in series else 0
                    x = gi + (si - (nbar - 1) / 2) * width
                    bar = _bar(ax, r, col, x, width, vi, value_fmt, looks, rotate=nbar > 4)
                    handles.setdefault(r["mode"] if vi == 0 else _variant_label(r), bar)
            if dp.empty:
                ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", va="center",
                        fontsize=8.5, color=MUTED)
            ax.set_xticks(range(len(mtus)), [f"underlay MTU {int(m)}" for m in mtus])
            ax.set_title(str(place), fontsize=10, color=MUTED, fontweight="normal")
            ax.grid(axis="x", visible=False)
            ax.margins(y=0.18)
        axes[0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=12, fontweight="bold", color=INK, x=0.01, ha="left")
    fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center",
               ncol=min(len(handles), 7), fontsize=8.5, handlelength=1.2, columnspacing=1.2)
    return Plot(title, to_uri(fig), caption, alt=title)


def _bar(ax: Any, r: dict, col: str, x: float, width: float, vi: int, value_fmt, looks: Looks,
         rotate: bool) -> Any:
    """One mode's bar (its `vi`-th variant hatched), min–max error bars, the value on top."""
    lo = r.get(f"{col}_min", math.nan)
    hi = r.get(f"{col}_max", math.nan)
    err = None
    if lo is not None and hi is not None and lo == lo and hi == hi:
        err = [[max(0.0, r[col] - lo)], [max(0.0, hi - r[col])]]
    bar = ax.bar(x, r[col], width * 0.92, color=mode_color(r["mode"], looks),
                 hatch=HATCHES[vi % len(HATCHES)], edgecolor="white", linewidth=0.6,
                 yerr=err, error_kw=dict(ecolor=INK, elinewidth=0.9, capsize=2.5, capthick=0.9),
                 label=r["mode"])
    top = r[col] if err is None else r[col] + err[1][0]
    ax.annotate(value_fmt(r[col]), (x, top), xytext=(0, 2), textcoords="offset points",
                ha="center", va="bottom", fontsize=7, color=MUTED, rotation=90 if rotate else 0)
    return bar


def _native_line(ax: Any, d: pd.DataFrame, mtu: Any, col: str, x: float, span: float, looks: Looks) -> None:
    """Native host-host as a dashed reference across a group that has no native bar."""
    ref = d[(d["mode"] == stats.NATIVE) & (d["underlay_mtu"] == mtu) & (d["placement"] == REFERENCE)]
    if ref.empty:
        return
    v = float(ref[col].iloc[0])
    ax.hlines(v, x - span / 2, x + span / 2, colors=mode_color(stats.NATIVE, looks), linestyles=(0, (4, 3)), lw=1.1)
    ax.annotate("native", (x + span / 2, v), xytext=(2, 0), textcoords="offset points", ha="left",
                va="center", fontsize=7, color=mode_color(stats.NATIVE, looks))


@styled
def throughput_bars(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """TCP throughput per mode, grouped by underlay MTU, one panel per placement; UDP
    throughput (iperf3.udp, else qperf.udp_bw) as a second row where the run measured it."""
    specs = [("tcp_gbps", "TCP throughput (Gbit/s)"), ("udp_gbps", "UDP throughput (Gbit/s)")]
    tcp, udp = _any(summary, "tcp_gbps"), _any(summary, "udp_gbps")
    title = ("TCP and UDP throughput" if tcp and udp else "TCP throughput" if tcp else "UDP throughput")
    return _grouped_bars(summary, specs, "", title + " by mode and MTU",
                         "Median over repeats; error bars span min–max."
                         + (" TCP: iperf3.tcp, else qperf.tcp_bw." if tcp else "")
                         + (" UDP: iperf3.udp (receiver goodput at the offered rate), else qperf.udp_bw."
                            if udp else "")
                         + " Dashed: native host-host, where a placement has no native run.",
                         _looks(summary, looks))


_LATENCIES = [("tcp_lat_us", "TCP latency (µs)", "qperf tcp_lat"),
              ("udp_lat_us", "UDP latency (µs)", "qperf udp_lat"),
              ("ping_avg_us", "ping avg RTT (µs)", "ping.flood avg RTT")]


def _looks(frame: pd.DataFrame, looks: Looks | None) -> Looks:
    """The looks a figure shows its modes by: those given, else the frame's own (stats.looks_of)."""
    return stats.looks_of(frame) if looks is None else looks


def _any(summary: pd.DataFrame, col: str) -> bool:
    return col in summary.columns and bool(summary[col].notna().any())


@styled
def latency_bars(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """Latency per mode (lower is better): qperf tcp_lat, qperf udp_lat and ping.flood avg
    RTT, one row of panels each for those the run measured."""
    present = [x for x in _LATENCIES if _any(summary, x[0])]
    if not present:
        return None
    names = {"tcp_lat_us": "TCP latency", "udp_lat_us": "UDP latency", "ping_avg_us": "Ping RTT"}
    title = (names[present[0][0]] if len(present) == 1 else "Latency") + " by mode and MTU"
    return _grouped_bars(summary, [(c, yl) for c, yl, _ in present], "", title,
                         ", ".join(src for _, _, src in present)
                         + ": median over repeats; error bars span min–max. Lower is better."
                         + (" qperf latencies are one-way (half the round trip), ping's the round trip."
                            if len(present) > 1 and _any(summary, "ping_avg_us") else ""),
                         _looks(summary, looks))


@styled
def cpu_bars(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """CPU-seconds per gigabit of TCP throughput (lower is better)."""
    return _grouped_bars(summary, "cpu_s_per_gbit", "CPU-seconds per gigabit", "CPU cost per gigabit",
                         "CPU (total where recorded, else client + server) divided by the same repeat's "
                         "TCP throughput; median and min–max over repeats. Lower is better.", _looks(summary, looks))


# % of native heatmap panels: (summary column, title, colour map), and those where higher is better.
HEAT_PANELS = [("bw_pct", "TCP throughput, % of native", "YlGnBu"),
               ("lat_pct", "TCP latency, % of native", "YlOrRd"),
               ("udp_bw_pct", "UDP throughput, % of native", "YlGnBu"),
               ("udp_lat_pct", "UDP latency, % of native", "YlOrRd"),
               ("ping_pct", "ping avg RTT, % of native", "YlOrRd"),
               ("pps_64_pct", "64-byte packet rate, % of native", "YlGnBu"),
               ("p99_pct", "P99 latency, % of native", "YlOrRd")]
HIGHER_PCT = {c.field for c in summ.COLUMNS if c.kind == "pct" and summ.pct_higher_is_better(c)}
# Of these, only the TCP throughput's differs between a config's stream counts.
PER_STREAM_PCT = {"bw_pct"}


def _heat_panel(fig: Any, ax: Any, d: pd.DataFrame, col: str, title: str, cmap: str,
                rows: list[str], cols: list[str]) -> None:
    """One heatmap of `col` (% of native): rows are modes, columns (MTU, placement)."""
    grid = np.full((len(rows), len(cols)), np.nan)
    for r in d.to_dict("records"):
        v = r[col]
        if v == v and v is not None:
            grid[rows.index(r["_row"]), cols.index(r["_col"])] = v
    if col in HIGHER_PCT:
        vmin, vmax = 0.0, 100.0
    else:
        finite = grid[np.isfinite(grid)]
        vmin, vmax = 100.0, max(150.0, float(np.nanmax(finite)) if finite.size else 150.0)
    cm = matplotlib.colormaps[cmap].with_extremes(bad="#f3f4f6")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cm, vmin=vmin, vmax=vmax, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = grid[i, j]
            if not np.isfinite(v):
                ax.text(j, i, "—", ha="center", va="center", fontsize=8, color=MUTED)
                continue
            rgb = im.cmap(im.norm(v))[:3]
            lum = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
            ax.text(j, i, f"{v:.0f}%", ha="center", va="center", fontsize=9,
                    color="white" if lum < 0.5 else INK)
    ax.set_xticks(range(len(cols)), cols, fontsize=8.5)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.tick_params(length=0)
    ax.grid(False)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title(title, fontsize=10)
    ax.xaxis.tick_top()
    fig.colorbar(im, ax=ax, shrink=0.85, pad=0.02, format="%d%%")


def one_stream_count(summary: pd.DataFrame, keep: set[str] = frozenset()) -> pd.DataFrame:
    """The summary with each config's columns that do not vary with the stream count (all
    but `keep`) left only on its lowest stream count's row, so no figure shows them twice."""
    if summary.empty or summary["streams"].nunique(dropna=True) < 2:
        return summary
    d = summary.copy()
    streams = pd.to_numeric(d["streams"], errors="coerce")
    lowest = streams.groupby([d[c] for c in summ.ROW_KEY], dropna=False).transform("min")
    others = streams.notna() & (streams != lowest)
    cols = [f for c in summ.COLUMNS for f in c.fields if f not in keep and f in d.columns]
    d.loc[others, cols] = np.nan
    return d


HEATMAP_TITLE = "% of native by mode and MTU"


@styled
def pct_heatmap(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """Mode × (underlay MTU, placement) heatmap of each % of native the run has (HEAT_PANELS)."""
    panels = [(c, t, cmap) for c, t, cmap in HEAT_PANELS if _any(summary, c)]
    if not panels:
        return None
    looks = _looks(summary, looks)
    d = one_stream_count(stats.sort_configs(summary.copy(), looks), keep=PER_STREAM_PCT)
    # One row per mode; a mode measured with several overlay MTUs (or stream counts) at one
    # underlay MTU and placement gets a row per variant.
    labels = []
    for r in d.to_dict("records"):
        same = d[(d["underlay_mtu"] == r["underlay_mtu"]) & (d["placement"] == r["placement"])
                 & (d["mode"] == r["mode"])]
        labels.append(str(r["mode"]) if len(same) == 1 else _variant_label(r))
    d["_row"] = labels
    d["_col"] = [f"MTU {stats.key_value(r['underlay_mtu'])}\n{r['placement']}" for r in d.to_dict("records")]
    rows = sorted(dict.fromkeys(d["_row"]), key=lambda x: (looks.rank(x.split(" (")[0]), x))
    cols = list(dict.fromkeys(d.sort_values(["underlay_mtu", "placement"], kind="stable",
                                            key=lambda c: c.map(placement_rank)
                                            if c.name == "placement" else c)["_col"]))
    ncol = min(len(panels), 2)
    nrow = math.ceil(len(panels) / ncol)
    fig = figure(min(13.5, 1.9 + ncol * (1.4 + 1.25 * len(cols))), nrow * (1.3 + 0.36 * len(rows)))
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, (col, title, cmap) in zip(axes, panels):
        _heat_panel(fig, ax, d, col, title, cmap, rows, cols)
    return Plot(HEATMAP_TITLE, to_uri(fig),
                "Ratio of medians to native at the same underlay MTU (host-host native where the placement has "
                "none). Throughput and packet rate: higher is better; latency, P99 and ping: lower is better; — no data.",
                alt="heatmap of percent of native")


@styled
def interval_lines(df: pd.DataFrame, test: str = "iperf3.tcp", looks: Looks | None = None) -> Plot | None:
    """Per-interval throughput over time from iperf3 `intervals`, one panel per
    (underlay MTU, placement); each repeat is a line, coloured by mode."""
    if "intervals" not in df.columns:
        return None
    looks = _looks(df, looks)
    d = stats.ok_rows(df)
    d = d[(d["test"] == test) & (d["metric"] == "throughput_bps")]
    d = d[d["intervals"].map(lambda v: isinstance(v, (list, tuple)) and len(v) > 0)]
    if d.empty:
        return None
    # The lowest stream count only, to keep the panels readable.
    streams = pd.to_numeric(d["streams"], errors="coerce")
    if streams.notna().any():
        d = d[streams == streams.min()]
    # Panels per (underlay MTU, placement) of the overlay modes; native only runs host-host and
    # is drawn in every panel of its MTU as the reference (dashed where the placement differs).
    others = d[d["mode"] != stats.NATIVE]
    panels = stats.sort_configs((others if not others.empty else d)[["underlay_mtu", "placement"]]
                                .drop_duplicates(), looks).to_dict("records")
    panels = panels[:6]
    ncol = 2 if len(panels) > 1 else 1
    nrow = math.ceil(len(panels) / ncol)
    fig = figure(12.5 if ncol == 2 else 8.5, 0.6 + 3.0 * nrow)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    seen: dict[str, Any] = {}
    for ax, p in zip(axes, panels):
        dp = d[(d["underlay_mtu"] == p["underlay_mtu"]) & ((d["placement"] == p["placement"])
                                                             | ((d["mode"] == stats.NATIVE)
                                                                & (d["placement"] == REFERENCE)))]
        for r in stats.sort_configs(dp, looks).to_dict("records"):
            pts = np.asarray([(float(t), float(b)) for t, b in r["intervals"]])
            native = r["mode"] == stats.NATIVE
            line, = ax.plot(pts[:, 0], pts[:, 1] / 1e9, color=mode_color(r["mode"], looks), lw=1.4,
                            alpha=0.85, ls="--" if native and p["placement"] != r["placement"] else "-",
                            marker="o", ms=2.2)
            seen.setdefault(r["mode"], line)
        ax.set_title(f"underlay MTU {stats.key_value(p['underlay_mtu'])} · {p['placement']}", fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("Gbit/s")
        ax.set_ylim(bottom=0)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{test} throughput over time", fontsize=12, fontweight="bold", color=INK, x=0.01, ha="left")
    names = sorted(seen, key=looks.rank)
    fig.legend([seen[n] for n in names], names, loc="outside lower center", ncol=min(len(names), 7), fontsize=8.5)
    return Plot(f"{test} throughput over time", to_uri(fig),
                "Per-interval throughput as iperf3 reports it, one line per repeat; dashed: native host-host "
                "shown as the reference in container placements.", alt="throughput over time")


@styled
def comparison_bars(cmp: pd.DataFrame, label_a: str, label_b: str, looks: Looks | None = None) -> Plot | None:
    """Δ% of medians between two runs per config (throughput and latency panels)."""
    if cmp.empty:
        return None
    metrics = [m for m in ("throughput_bps", "latency_us") if (cmp["metric"] == m).any()]
    if not metrics:
        return None
    looks = _looks(cmp, looks)
    parts = {m: stats.sort_configs(cmp[cmp["metric"] == m], looks) for m in metrics}
    n = max(len(p) for p in parts.values())
    fig = figure(12.5, 1.2 + 0.22 * n)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, m in zip(axes, metrics):
        p = parts[m]
        labels = [f"{r['mode']} {stats.key_value(r['underlay_mtu'])} {r['placement'][:9]} {r['test']}"
                  for r in p.to_dict("records")]
        y = np.arange(len(p))
        colors = [("#1a7f37" if b else "#cf222e") if s else "#afb8c1"
                  for s, b in zip(p["significant"], p["better"])]
        ax.barh(y, p["delta_pct"], color=colors, height=0.7)
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color=INK, lw=0.8)
        ax.set_xlabel("change of median (%)")
        ax.set_title("throughput" if m == "throughput_bps" else "latency", fontsize=10)
        ax.grid(axis="y", visible=False)
    fig.suptitle(f"{label_b} vs {label_a}", fontsize=12, fontweight="bold", color=INK, x=0.01, ha="left")
    return Plot(f"{label_b} vs {label_a}", to_uri(fig),
                "Green: significantly better, red: significantly worse (two-sided Mann–Whitney U, α = 0.05), "
                "grey: no significant change.", alt="comparison of medians")


def all_plots(summary: pd.DataFrame, df: pd.DataFrame, looks: Looks | None = None) -> tuple[list[Plot], list[str]]:
    """Every per-run figure that has data, and a note for each that has none; modes as `looks`
    show them (default: the run's, as results.load put them in `df`)."""
    looks = _looks(df, looks)
    plots, missing = [], []
    for fn, what in ((throughput_bars, "TCP throughput plot: no iperf3.tcp or qperf.tcp_bw results"),
                     (latency_bars, "Latency plot: no qperf.tcp_lat, qperf.udp_lat or ping.flood results"),
                     (pct_heatmap, "% of native heatmap: no native reference for any mode"),
                     (cpu_bars, "CPU per gigabit plot: no CPU samples alongside TCP throughput"),
                     (lambda s, looks: interval_lines(df, looks=looks),
                      "throughput over time: no iperf3 per-interval data")):
        p = fn(summary, looks)
        (plots.append(p) if p is not None else missing.append(what))
    return plots, missing
