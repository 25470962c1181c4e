"""The report's figures across host pairs: hosts × hosts heatmaps per mode.

Drawn only where the run has a pair dimension (more than one pair). One column of panels
per mode, one row per figure the run has (TCP throughput, its % of native, TCP latency,
ping): the client's host down the side, the server's across the top, each cell the pair's
median over repeats at the run's first underlay MTU, the mode's last placement in table
order between the pair's two hosts (container-service, else container-container …; native:
host-host; same-node, whose server sits on the client's host, is no cell of a pair), the
lowest stream count. A host's label carries its zone where run.json records one.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from harness.analysis import fleet, stats
from harness.core.looks import Looks
from harness.core.placements import LOCAL, PLACEMENTS
from harness.report.plots import _looks, one_stream_count
from harness.report.style import INK, MUTED, Plot, figure, styled, to_uri

PANELS = [("tcp_gbps", "TCP throughput (Gbit/s)", "viridis", True),
          ("bw_pct", "TCP BW % of native", "viridis", True),
          ("tcp_lat_us", "TCP latency (µs)", "magma_r", False),
          ("ping_avg_us", "ping avg (µs)", "magma_r", False)]
MAX_MODES = 6
# the placements between the pair's two hosts, in table order (a local end is on the client's)
ACROSS = tuple(n for n, p in PLACEMENTS.items() if LOCAL not in (p.client, p.server))


def _rows_of(summary: pd.DataFrame, looks: Looks) -> dict[str, pd.DataFrame]:
    """Per mode, in table order: its rows at the first underlay MTU in its preferred placement."""
    d = one_stream_count(summary[summary["pair"].notna()])
    if d.empty:
        return {}
    d = d[d["underlay_mtu"] == stats.sort_configs(d, looks)["underlay_mtu"].iloc[0]]
    out = {}
    for mode in sorted(set(d["mode"]), key=looks.rank)[:MAX_MODES]:
        m = d[d["mode"] == mode]
        known = set(m["placement"]) & set(PLACEMENTS)
        place = next((p for p in reversed(ACROSS) if p in known), None) if known else m["placement"].iloc[0]
        if place is None:           # only same-node: its server is on the client's host, no hosts × hosts figure
            continue
        m = m[m["placement"] == place]
        out[f"{mode} · {place}"] = m[m["overlay_mtu"] == m["overlay_mtu"].iloc[0]]
    return out


def tick(host: str, zones: dict[str, str] | None) -> str:
    """A host's label on the heatmaps: its name, and below it its zone where run.json has one."""
    zone = (zones or {}).get(host)
    return f"{host}\n{zone}" if zone else host


@styled
def pair_heatmaps(summary: pd.DataFrame, looks: Looks | None = None, zones: dict[str, str] | None = None) -> Plot | None:
    if summary.empty or not stats.has_pairs(summary):
        return None
    per_mode = _rows_of(summary, _looks(summary, looks))
    hosts = fleet.hosts_of(summary["pair"].dropna())
    panels = [p for p in PANELS if p[0] in summary and any(rows[p[0]].notna().any() for rows in per_mode.values())]
    if not per_mode or not panels or len(hosts) < 2:
        return None
    names = list(per_mode)
    size = 0.45 * len(hosts) + 1.2
    fig = figure(min(14.0, 0.6 + size * len(names)), 0.5 + size * len(panels))
    axes = fig.subplots(len(panels), len(names), squeeze=False)
    for i, (col, title, cmap, _higher) in enumerate(panels):
        grids = {n: fleet.grid(per_mode[n], col, hosts) for n in names}
        finite = np.concatenate([g[np.isfinite(g)] for g in grids.values()])
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        cm = matplotlib.colormaps[cmap].with_extremes(bad="#f3f4f6")
        for j, n in enumerate(names):
            ax, g = axes[i, j], grids[n]
            im = ax.imshow(np.ma.masked_invalid(g), cmap=cm, vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1)
            for a in range(len(hosts)):
                for b in range(len(hosts)):
                    v = g[a, b]
                    if np.isfinite(v):
                        rgb = im.cmap(im.norm(v))[:3]
                        lum = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
                        ax.text(b, a, f"{v:.3g}", ha="center", va="center", fontsize=8,
                                color="white" if lum < 0.5 else INK)
                    elif a != b:
                        ax.text(b, a, "·", ha="center", va="center", fontsize=8, color=MUTED)
            ax.set_xticks(range(len(hosts)), [tick(h, zones) for h in hosts], fontsize=8)
            ax.set_yticks(range(len(hosts)), [tick(h, zones) for h in hosts], fontsize=8)
            ax.xaxis.tick_top()
            ax.tick_params(length=0)
            ax.grid(False)
            if i == 0:
                ax.set_title(n, fontsize=9.5)
            if j == 0:
                ax.set_ylabel(f"{title}\nclient", fontsize=8.5)
    fig.suptitle("Host pairs", fontsize=12, fontweight="bold", color=INK, x=0.01, ha="left")
    return Plot("Host pairs", to_uri(fig),
                "Each cell: the pair's median over repeats, client down the side, server across the top; "
                "one colour scale per row; · a pair not measured. % of native is against native on the same "
                "pair in the same repeats.", alt="heatmaps of host pairs per mode")


def figures(summary: pd.DataFrame, df: pd.DataFrame, looks: Looks | None = None, meta: dict | None = None) -> list[Plot]:
    p = pair_heatmaps(summary, _looks(df, looks), fleet.zones_of(meta or {}))
    return [p] if p is not None else []


