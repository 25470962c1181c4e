"""Numbers across host pairs: a pair × pair grid per mode, and the pairs that stand out.

Where a run has a pair dimension (harness/core/pairs.py), each summary row is one pair's.
`grid` lays a summary column out as hosts × hosts (client rows, server columns) for one
mode and placement. `outliers` names the pairs whose median is far from the median pair
of the same configuration, where their repeats say so: a two-sided Mann–Whitney U test of
the pair's repeats against the other pairs' pooled repeats, at α / (the number of pairs),
and at least OUTLIER_SHARE away. With few repeats no pair can be shown to stand out, and
none is named. Pure functions on the summary and the measurements.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from harness.analysis import significance, stats

OUTLIER_SHARE = 0.25       # how far from the median pair a pair must be to be named
OUTLIER_ALPHA = 0.05       # shared by the pairs of one configuration


def has_pairs(summary: pd.DataFrame) -> bool:
    return "pair" in summary and summary["pair"].notna().any()


def hosts_of(pairs) -> list[str]:
    """The hosts the pairs name, in the order they first appear ("h0→h1" → h0, h1)."""
    out: dict[str, None] = {}
    for p in pairs:
        if isinstance(p, str) and "→" in p:
            a, b = p.split("→", 1)
            out.setdefault(a)
            out.setdefault(b)
    return list(out)


def grid(rows: pd.DataFrame, col: str, hosts: list[str]) -> np.ndarray:
    """`col` of one mode's rows (one per pair) as a hosts × hosts array: [client, server];
    NaN where a pair was not measured."""
    g = np.full((len(hosts), len(hosts)), np.nan)
    for r in rows.to_dict("records"):
        pair, v = r.get("pair"), r.get(col)
        if not isinstance(pair, str) or "→" not in pair or v is None or v != v:
            continue
        a, b = pair.split("→", 1)
        if a in hosts and b in hosts:
            g[hosts.index(a), hosts.index(b)] = float(v)
    return g


@dataclasses.dataclass(frozen=True)
class Outlier:
    mode: str
    underlay_mtu: int
    placement: str
    test: str
    metric: str
    pair: str
    value: float             # the pair's median
    median_pair: float       # the median of the configuration's pair medians
    p: float

    @property
    def share(self) -> float:
        return self.value / self.median_pair - 1

    def __str__(self) -> str:
        where = "above" if self.share > 0 else "below"
        return (f"{self.pair}: {abs(self.share) * 100:.0f} % {where} the median pair ({self.mode}, "
                f"{self.placement}, {self.test} {self.metric}, p = {self.p:.2g})")


def outliers(df: pd.DataFrame, metrics: tuple[str, ...] = ("throughput_bps", "latency_us")) -> list[Outlier]:
    """The pairs that stand out in each configuration of a run with pairs (module doc)."""
    d = stats.ok_rows(df)
    if d.empty or "pair" not in d or not d["pair"].notna().any():
        return []
    d = d[d["pair"].notna() & d["metric"].isin(list(metrics))]
    keys = [c for c in stats.CONFIG_KEY if c != "pair"] + ["metric"]
    out = []
    for k, g in d.groupby(keys, dropna=False, sort=False):
        by_pair = {p: list(x["value"]) for p, x in g.groupby("pair", sort=False)}
        if len(by_pair) < 3:
            continue
        medians = {p: float(np.median(v)) for p, v in by_pair.items()}
        mid = float(np.median(list(medians.values())))
        if mid == 0:
            continue
        conf = dict(zip(keys, (stats.key_value(x) for x in k)))
        for p, v in by_pair.items():
            if abs(medians[p] / mid - 1) < OUTLIER_SHARE:
                continue
            rest = [x for q, xs in by_pair.items() if q != p for x in xs]
            t = significance.mann_whitney(v, rest, alpha=OUTLIER_ALPHA / len(by_pair))
            if t.significant(OUTLIER_ALPHA / len(by_pair)):
                out.append(Outlier(conf["mode"], conf["underlay_mtu"], conf["placement"], conf["test"],
                                   conf["metric"], p, medians[p], mid, float(t.p)))
    return out
