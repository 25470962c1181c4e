"""The report's figures under load: latency idle and beside a working load, and the UDP
sweeps' offered against received load with each mode's knee marked.

Drawn only where the run measured them (load.sockperf, else load.irtt, else load.bounceback;
iperf3.udp_sweepN);
`figures` returns nothing otherwise, as the table leaves those columns out.
"""

from __future__ import annotations

import re
from typing import Any

import matplotlib.ticker
import numpy as np
import pandas as pd

from harness.analysis import stats
from harness.analysis.summary import BOUNCEBACK_TESTS, LOAD_TESTS, SWEEP_TESTS
from harness.core.looks import Looks
from harness.report.breadth import _grid, _in_panel, _legend, _panels
from harness.report.plots import _looks
from harness.report.style import Plot, mode_color, styled, to_uri

PERCENTILES = [("p50", "P50"), ("p90", "P90"), ("p99", "P99"), ("p999", "P99.9")]
PHASES = [("idle", "--"), ("loaded", "-")]
_STEP = re.compile(r"^step(\d+)_(sent_bps|received_bps|loss_pct)$")
# The probes latency under load is drawn from, finest first: (tests, metric prefix, what the caption says)
PROBES = [(LOAD_TESTS[:1], "rtt", "sockperf's ping-pong: a 14-byte UDP message every 100 µs, one in flight, each "
                                  "round trip timed to the nanosecond, idle (dashed) and beside N TCP streams each "
                                  "way on the same path (solid, iperf 2); each percentile's median over repeats, "
                                  "log scale."),
          (LOAD_TESTS[1:], "rtt", "irtt: a 60-byte UDP probe every millisecond, each round trip timed to the "
                                  "nanosecond, idle (dashed) and beside N TCP streams each way on the same path "
                                  "(solid, iperf 2); each percentile's median over repeats, log scale."),
          (BOUNCEBACK_TESTS, "lat", "iperf 2 bounceback: a 16 KiB request every millisecond answered at once, "
                                    "idle (dashed) and beside N TCP streams each way on the same path (solid); "
                                    "each percentile's median over repeats, read off iperf's 100 µs histogram "
                                    "bins (upper edges), log scale.")]


def _log_axis(ax: Any, which: str = "y") -> None:
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


@styled
def latency_under_load(df: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """P50 … P99.9 of the probe per mode, idle (dashed) and beside the working load (solid),
    one panel per (underlay MTU, placement): the median over repeats of each percentile."""
    looks = _looks(df, looks)
    for tests, prefix, caption in PROBES:
        metrics = [f"{prefix}_{ph}_{p}_us" for ph, _ in PHASES for p, _ in PERCENTILES]
        s = stats.summarize(df, metrics)
        s = s[s["test"].isin(tests)]
        if not s.empty:
            break
    else:
        return None
    panels = _panels(s)
    fig, axes = _grid(len(panels), 3.4)
    seen: dict[str, Any] = {}
    x = np.arange(len(PERCENTILES))
    for ax, p in zip(axes, panels):
        for (mode, _overlay, streams), g in _in_panel(s, p).groupby(["mode", "overlay_mtu", "streams"], sort=False):
            by = dict(zip(g["metric"], g["median"]))
            for phase, ls in PHASES:
                ys = [by.get(f"{prefix}_{phase}_{q}_us", np.nan) for q, _ in PERCENTILES]
                line, = ax.plot(x, ys, color=mode_color(mode, looks), marker="o", ms=3, lw=1.5, ls=ls)
                if phase == "loaded":
                    seen.setdefault(f"{mode} (×{stats.key_value(streams)} each way)", line)
        _log_axis(ax)
        ax.set_xticks(x, [name for _, name in PERCENTILES])
        ax.set_ylabel("round trip (µs)")
        ax.set_title(f"MTU {stats.key_value(p['underlay_mtu'])} · {p['placement']}", fontsize=10)
    _legend(fig, seen, "Latency idle and under load", looks)
    return Plot("Latency idle and under load", to_uri(fig),
                caption + " The gap between a mode's two lines is what the load added. Lower is better.",
                alt="idle and loaded latency percentiles per mode")


def sweep_points(df: pd.DataFrame, test: str) -> pd.DataFrame:
    """Per configuration and step of `test`: the medians over repeats of sent, received and
    loss (columns step, sent_bps, received_bps, loss_pct), and the median knee (knee_bps)."""
    ok = stats.ok_rows(df)
    ok = ok[ok["test"] == test]
    if ok.empty:
        return pd.DataFrame()
    m = ok["metric"].str.extract(_STEP)
    steps = ok.assign(step=pd.to_numeric(m[0]), what=m[1]).dropna(subset=["what"])
    keys = ["mode", "underlay_mtu", "overlay_mtu", "placement"]
    wide = (steps.groupby(keys + ["step", "what"], dropna=False)["value"].median()
            .unstack("what").reset_index())
    knees = ok[ok["metric"] == "knee_bps"].groupby(keys, dropna=False)["value"].median().rename("knee_bps")
    return wide.merge(knees.reset_index(), on=keys, how="left")


@styled
def sweep_lines(df: pd.DataFrame, looks: Looks | None = None) -> Plot | None:
    """Received against sent load per mode on log axes, a panel per (sweep size, underlay MTU,
    placement), each mode's knee marked on its line."""
    looks = _looks(df, looks)
    data = [(t, sweep_points(df, t.name)) for t in SWEEP_TESTS]
    panels = [(t, p, d) for t, d in data if not d.empty for p in _panels(d)][:6]
    if not panels:
        return None
    fig, axes = _grid(len(panels), 3.4)
    seen: dict[str, Any] = {}
    for ax, (t, p, d) in zip(axes, panels):
        for (mode, _overlay), g in _in_panel(d, p).groupby(["mode", "overlay_mtu"], sort=False):
            g = g.sort_values("step")
            line, = ax.plot(g["sent_bps"] / 1e6, g["received_bps"] / 1e6, color=mode_color(mode, looks),
                            marker="o", ms=3, lw=1.5)
            seen.setdefault(mode, line)
            knee = g["knee_bps"].iloc[0]
            if knee == knee and knee > 0:
                at = g.iloc[(g["sent_bps"] - knee).abs().argmin()]
                ax.plot([at["sent_bps"] / 1e6], [at["received_bps"] / 1e6], marker="*", ms=12,
                        color=mode_color(mode, looks), markeredgecolor="black", markeredgewidth=0.6, ls="none")
        lo = max(1e-3, float(np.nanmin(d["sent_bps"])) / 1e6 / 2)
        hi = float(np.nanmax(d["sent_bps"])) / 1e6 * 2
        ax.plot([lo, hi], [lo, hi], color="0.6", lw=0.8, ls=":")
        _log_axis(ax, "x")
        _log_axis(ax, "y")
        ax.set_xlabel("sent (Mbit/s)")
        ax.set_ylabel("received (Mbit/s)")
        ax.set_title(f"{t.payload} B · MTU {stats.key_value(p['underlay_mtu'])} · {p['placement']}", fontsize=10)
    _legend(fig, seen, "UDP offered against received load", looks)
    return Plot("UDP offered against received load", to_uri(fig),
                "iperf3 UDP at stepped offered loads, one sender, one payload size per panel: what the "
                "sender sent against what the receiver got, medians over repeats, log scales; the dotted "
                "diagonal is no loss. A star marks each mode's knee, the highest sent load before the first "
                "step whose loss reached 0.1 % (median over repeats).",
                alt="offered against received UDP load per mode with the knee marked")


def figures(summary: pd.DataFrame, df: pd.DataFrame, looks: Looks | None = None) -> list[Plot]:
    """The figures of this module that the run has data for (`summary` unused: kept so the
    report calls every figure module alike), modes as `looks` show them (default: the run's)."""
    looks = _looks(df, looks)
    out = [latency_under_load(df, looks), sweep_lines(df, looks)]
    return [p for p in out if p is not None]
