"""The report's figures beyond the mean: tail latency, packet rate, and scaling with streams.

Each is drawn only where the run measured it (sockperf, iperf3.ppsN, several stream counts of
the TCP throughput test); a run without them gets no figure and no note, as the table leaves
their columns out.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib.ticker
import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.summary import PPS_TESTS, TAIL_TESTS, TCP_BW_TESTS
from harness.core.looks import Looks
from harness.report.plots import _any, _grouped_bars, _looks, one_stream_count
from harness.report.style import INK, Plot, figure, mode_color, styled, to_uri

PERCENTILES = [("latency_p50_us", "P50"), ("latency_p90_us", "P90"), ("latency_p99_us", "P99"),
               ("latency_p999_us", "P99.9")]


def _panels(d: pd.DataFrame) -> list[dict]:
    """(underlay MTU, placement) panels of the overlay modes (native's own where it is alone)."""
    others = d[d["mode"] != stats.NATIVE]
    return stats.sort_configs((others if not others.empty else d)[["underlay_mtu", "placement"]]
                              .drop_duplicates()).to_dict("records")[:6]


def _in_panel(d: pd.DataFrame, p: dict) -> pd.DataFrame:
    """The panel's rows, and native host-host as every panel's reference."""
    same_mtu = d["underlay_mtu"] == p["underlay_mtu"]
    return d[same_mtu & ((d["placement"] == p["placement"]) | (d["mode"] == stats.NATIVE))]


def _grid(n: int, height: float) -> tuple[Any, np.ndarray]:
    ncol = 2 if n > 1 else 1
    fig = figure(12.5 if ncol == 2 else 8.5, 0.8 + height * math.ceil(n / ncol))
    axes = fig.subplots(math.ceil(n / ncol), ncol, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _legend(fig: Any, seen: dict[str, Any], title: str, looks: Looks) -> None:
    names = sorted(seen, key=lambda n: looks.rank(n.split(" (")[0]))
    fig.suptitle(title, fontsize=12, fontweight="bold", color=INK, x=0.01, ha="left")
    fig.legend([seen[n] for n in names], names, loc="outside lower center", ncol=min(len(names), 7),
               fontsize=8.5)


@styled
def percentile_lines(df: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """Latency percentiles P50 … P99.9 per mode on a log axis (sockperf ping-pong), one
    panel per (underlay MTU, placement): the median over repeats of each percentile."""
    looks = _looks(df, looks)
    s = stats.summarize(df, [m for m, _ in PERCENTILES])
    s = s[s["test"].isin(TAIL_TESTS)]
    if s.empty:
        return None
    panels = _panels(s)
    fig, axes = _grid(len(panels), 3.2)
    seen: dict[str, Any] = {}
    x = np.arange(len(PERCENTILES))
    for ax, p in zip(axes, panels):
        dp = _in_panel(s, p)
        for (mode, test, overlay), g in dp.groupby(["mode", "test", "overlay_mtu"], sort=False):
            by = dict(zip(g["metric"], g["median"]))
            ys = [by.get(m, np.nan) for m, _ in PERCENTILES]
            label = mode if test == TAIL_TESTS[0] else f"{mode} ({test.split('.')[-1]})"
            line, = ax.plot(x, ys, color=mode_color(mode, looks), marker="o", ms=3, lw=1.5,
                            ls="-" if test == TAIL_TESTS[0] else ":")
            seen.setdefault(label, line)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(x, [name for _, name in PERCENTILES])
        ax.set_ylabel("one-way latency (µs)")
        ax.set_title(f"MTU {stats.key_value(p['underlay_mtu'])} · {p['placement']}", fontsize=10)
    _legend(fig, seen, "Latency percentiles by mode", looks)
    return Plot("Latency percentiles by mode", to_uri(fig),
                "sockperf ping-pong: each percentile's median over repeats, one-way (half the round "
                "trip), log scale; dotted: over TCP. Lower is better.", alt="latency percentiles per mode")


@styled
def pps_bars(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """Received packets per second at each payload size (iperf3 UDP, no rate cap)."""
    specs = [(f"mpps_{t.payload}", f"Mpps, {t.payload} B") for t in PPS_TESTS]
    if not any(_any(summary, c) for c, _ in specs):
        return None
    rows = one_stream_count(summary)
    rows = rows[rows[[c for c, _ in specs if c in rows]].notna().any(axis=1)]
    return _grouped_bars(rows, specs, "", "Packet rate by mode and payload size",
                         "iperf3 UDP with a fixed payload and no rate cap, one sender: packets the receiver "
                         "got per second, median over repeats, error bars span min–max. Higher is better.",
                         _looks(summary, looks))


@styled
def scaling_lines(summary: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """TCP throughput and CPU per gigabit against the stream count, a line per mode, for the
    configurations measured at more than one stream count."""
    looks = _looks(summary, looks)
    d = summary[summary["tcp_gbps"].notna() & summary["streams"].notna()] if "tcp_gbps" in summary else summary[:0]
    d = d.assign(streams=pd.to_numeric(d["streams"], errors="coerce"))
    counts = d.groupby(["underlay_mtu", "mode", "overlay_mtu", "placement"], dropna=False)["streams"].transform("nunique")
    d = d[counts > 1]
    if d.empty:
        return None
    panels = _panels(d)
    fig = figure(min(13.5, max(8.5, 1.5 + 4.2 * len(panels))), 6.6)
    axes = fig.subplots(2, len(panels), squeeze=False, sharex="col")
    seen: dict[str, Any] = {}
    for j, p in enumerate(panels):
        dp = _in_panel(d, p)
        for (mode, overlay), g in dp.groupby(["mode", "overlay_mtu"], sort=False):
            g = g.sort_values("streams")
            for ax, col in zip(axes[:, j], ("tcp_gbps", "cpu_s_per_gbit")):
                line, = ax.plot(g["streams"], g[col], color=mode_color(mode, looks), marker="o", ms=3, lw=1.5)
                seen.setdefault(mode, line)
        streams = sorted(d["streams"].unique())
        axes[1, j].set_xscale("log", base=2)
        axes[1, j].set_xticks(streams, [str(int(s)) for s in streams])
        axes[1, j].set_xlabel("parallel streams")
        axes[0, j].set_title(f"MTU {stats.key_value(p['underlay_mtu'])} · {p['placement']}", fontsize=10)
        axes[0, j].set_ylim(bottom=0)
        axes[1, j].set_ylim(bottom=0)
    axes[0, 0].set_ylabel("TCP throughput (Gbit/s)")
    axes[1, 0].set_ylabel("CPU-seconds per gigabit")
    _legend(fig, seen, "Scaling with parallel streams", looks)
    return Plot("Scaling with parallel streams", to_uri(fig),
                f"TCP throughput ({' or '.join(TCP_BW_TESTS)}, all streams together) and CPU per gigabit against the stream "
                "count; medians over repeats. The table gives each count's per-stream throughput and "
                "Jain's fairness index across the streams.", alt="throughput and CPU against streams")


def figures(summary: pd.DataFrame, df: pd.DataFrame, looks: Looks | None = None) -> list[Plot]:
    """The figures of this module that the run has data for, modes as `looks` show them
    (default: the run's, as results.load put them in `df`)."""
    looks = _looks(df, looks)
    out = [percentile_lines(df, looks), pps_bars(summary, looks), scaling_lines(summary, looks)]
    return [p for p in out if p is not None]
